package inspect

import (
	"bytes"
	"context"
	"io"
	"net"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fwab/fwab/internal/freeport"
	"github.com/google/go-cmp/cmp"
)

func TestRulesetDeterministic(t *testing.T) {
	spec := RulesetSpec{Rules: 2000, Seed: 42}
	a, err := GenerateRuleset(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, err := GenerateRuleset(spec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a.Rules, b.Rules); diff != "" {
		t.Errorf("same spec, different rules (-first +second):\n%s", diff)
	}
	c, err := GenerateRuleset(RulesetSpec{Rules: 2000, Seed: 43})
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(a.Rules, c.Rules) {
		t.Error("seeds 42 and 43 gave the same rules")
	}
}

func TestRulesetShape(t *testing.T) {
	tests := []struct {
		spec      RulesetSpec
		wantDrops int
	}{
		{RulesetSpec{Rules: 1, Seed: 1}, 1},
		{RulesetSpec{Rules: 1000, Seed: 1}, 100},
		{RulesetSpec{Rules: 1001, Seed: 1}, 101},
		{RulesetSpec{Rules: 10, Seed: 1, DropEvery: 1}, 10},
		{RulesetSpec{Rules: 10, Seed: 1, DropEvery: 3}, 4},
	}
	for _, tt := range tests {
		rs, err := GenerateRuleset(tt.spec)
		if err != nil {
			t.Fatalf("GenerateRuleset(%+v): %v", tt.spec, err)
		}
		if len(rs.Rules) != tt.spec.Rules {
			t.Errorf("GenerateRuleset(%+v): %d rules, want %d", tt.spec, len(rs.Rules), tt.spec.Rules)
		}
		if got := rs.Drops(); got != tt.wantDrops {
			t.Errorf("GenerateRuleset(%+v): %d drop rules, want %d", tt.spec, got, tt.wantDrops)
		}
		seen := map[string]bool{}
		for i, r := range rs.Rules {
			if r.SID != FirstSID+i {
				t.Errorf("rule %d: sid %d, want %d", i, r.SID, FirstSID+i)
			}
			if len(r.Content) < minContent || len(r.Content) > maxContent {
				t.Errorf("rule %d: content of %d bytes, want %d to %d", i, len(r.Content), minContent, maxContent)
			}
			if seen[string(r.Content)] {
				t.Errorf("rule %d: content %x repeats an earlier rule's", i, r.Content)
			}
			seen[string(r.Content)] = true
			if !acceptable(r.Content, nil) {
				t.Errorf("rule %d: content %q is printable text", i, r.Content)
			}
		}
		// Every rule's content matches itself, with the right action.
		for i, r := range rs.Rules {
			n, drop := rs.Verdict(append([]byte("xx"), r.Content...), nil)
			if n < 1 || drop != (r.Action == Drop) {
				t.Fatalf("Verdict(rule %d content) = %d, %v; want >= 1, %v", i, n, drop, r.Action == Drop)
			}
		}
	}
}

func TestRulesetRefusesBadCount(t *testing.T) {
	for _, n := range []int{0, -1, MaxRules + 1} {
		if _, err := GenerateRuleset(RulesetSpec{Rules: n}); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("GenerateRuleset(Rules: %d) error = %v, want out of range", n, err)
		}
	}
}

// TestRulesetExclude plants a generated content in a traffic sample; a
// ruleset generated with that sample excluded must not contain it.
func TestRulesetExclude(t *testing.T) {
	plain, err := GenerateRuleset(RulesetSpec{Rules: 50, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	victim := plain.Rules[7].Content
	sample := append(append([]byte("some traffic "), victim...), " more"...)
	rs, err := GenerateRuleset(RulesetSpec{Rules: 50, Seed: 9, Exclude: [][]byte{sample}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rs.Rules {
		if bytes.Contains(sample, r.Content) {
			t.Errorf("rule %d content %x occurs in the excluded sample", i, r.Content)
		}
	}
	if cmp.Equal(plain.Rules, rs.Rules) {
		t.Error("excluding a sample that holds rule 7's content changed nothing")
	}
}

func TestWriteRules(t *testing.T) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := rs.WriteRules(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "drop ip any any -> any any (") || !strings.HasPrefix(lines[1], "alert ") ||
		!strings.Contains(lines[1], "sid:9000001;") {
		t.Errorf("WriteRules = %q, want a drop rule then an alert rule with sid 9000001", b.String())
	}
}

// TestNoContentInIperf3Payload records real iperf3 traffic (control and
// data, random and --repeating-payload) through a loopback proxy and checks
// that no rule of large rulesets occurs in it.
func TestNoContentInIperf3Payload(t *testing.T) {
	if _, err := exec.LookPath("iperf3"); err != nil {
		t.Skip("iperf3 not installed (scripts/setup.sh installs it)")
	}
	sample := recordIperf3(t)
	if len(sample) < 1<<20 {
		t.Fatalf("recorded only %d bytes of iperf3 traffic", len(sample))
	}
	for _, seed := range []uint64{1, 2} {
		rs, err := GenerateRuleset(RulesetSpec{Rules: 50_000, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		var hits []int
		rs.Matcher.Scan(sample, func(id, _ int) bool { hits = append(hits, rs.Rules[id].SID); return true })
		if len(hits) > 0 {
			t.Errorf("seed %d: rules %v match recorded iperf3 traffic", seed, hits)
		}
	}
}

// recordIperf3 runs iperf3 on 127.0.0.1 through a proxy that records up to
// 16 MiB of each connection's bytes in both directions.
func recordIperf3(t *testing.T) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	port := freeport.TCP(t)
	srv := exec.CommandContext(ctx, "iperf3", "-s", "-B", "127.0.0.1", "-p", strconv.Itoa(port))
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var sample bytes.Buffer
	record := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 64<<10)
		kept := 0
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if kept < 16<<20 {
					mu.Lock()
					sample.Write(buf[:n])
					mu.Unlock()
					kept += n
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(2)
			go func() { defer wg.Done(); record(up, c); up.(*net.TCPConn).CloseWrite() }()
			go func() { defer wg.Done(); record(c, up); c.(*net.TCPConn).CloseWrite() }()
		}
	}()

	proxyPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, extra := range [][]string{nil, {"--repeating-payload"}, {"-R"}} {
		var out []byte
		for try := range 20 { // the server may still be starting
			args := append([]string{"-c", "127.0.0.1", "-p", proxyPort, "-t", "1"}, extra...)
			out, err = exec.CommandContext(ctx, "iperf3", args...).CombinedOutput()
			if err == nil || try == 19 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("iperf3 %v: %v\n%s", extra, err, out)
		}
	}
	ln.Close()
	mu.Lock()
	defer mu.Unlock()
	return bytes.Clone(sample.Bytes())
}

// TestParseRules: rules files as Suricata reads them load into the
// matcher: WriteRules's output reads back as the same rules, a custom
// drop rule with text and |hex| runs matches its content and drops, and
// rules the lab would match otherwise than Suricata are refused, named.
func TestParseRules(t *testing.T) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: 50, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := rs.WriteRules(&b); err != nil {
		t.Fatal(err)
	}
	back, err := ParseRules(strings.NewReader(b.String()), "written.rules")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rs.Rules) {
		t.Errorf("WriteRules then ParseRules gave other rules")
	}

	const custom = `# fwab canary
alert ip any any -> any any (msg:"stand-in"; sid:9000001; rev:1;)

drop udp any any -> any any (msg:"fwab canary"; content:"fwab-canary|3a 00|a\;b\"c"; sid:9999001; rev:1;)
`
	extra, err := ParseRules(strings.NewReader(custom), "custom.rules")
	if err != nil {
		t.Fatal(err)
	}
	want := []Rule{{SID: 9999001, Content: []byte("fwab-canary:\x00a;b\"c"), Action: Drop}}
	if !reflect.DeepEqual(extra, want) {
		t.Fatalf("ParseRules = %+v, want %+v", extra, want)
	}
	with, err := GenerateRuleset(RulesetSpec{Rules: 50, Seed: 7, Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	if n, drop := with.Verdict([]byte("....fwab-canary:\x00a;b\"c...."), nil); n != 1 || !drop {
		t.Errorf("Verdict of the canary = %d matches, drop %v; want 1, true", n, drop)
	}
	if n, drop := with.Verdict([]byte("fwab-canary:\x00a;b"), nil); n != 0 || drop {
		t.Errorf("Verdict of part of the canary = %d, %v; want no match", n, drop)
	}

	for line, msg := range map[string]string{
		`pass ip any any -> any any (content:"x"; sid:1;)`:              "action",
		`drop ip any any -> any any (content:"a;b"; sid:1;)`:            "want a quoted string",
		`drop ip any any -> any any (content:"a\nb"; sid:1;)`:           "Suricata escapes only",
		`drop ip any any -> any any (content:"abc"; sid:5)`:             "do not end with",
		`drop tcp any any -> any any (content:"abc"; nocase; sid:5;)`:   "option nocase",
		`drop tcp any any -> any any (content:"abc"; depth:3; sid:5;)`:  "option depth",
		`drop ip any any -> any any (content:"x"; content:"y"; sid:1;)`: "two contents",
		`drop ip any any -> any any (content:"|zz|"; sid:1;)`:           "invalid byte",
		`drop ip any any -> any any (content:"x";)`:                     "no sid",
		`drop ip any any -> any any content:"x"; sid:1;`:                "no (options)",
		`drop ip any any -> any any (content:"|41 42"; sid:1;)`:         "not closed",
	} {
		if _, err := ParseRules(strings.NewReader("\n"+line+"\n"), "bad.rules"); err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), "bad.rules:2:") {
			t.Errorf("ParseRules(%s) = %v, want an error at bad.rules:2 about %q", line, err, msg)
		}
	}
}
