package probe

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// trafgenFixture is a recorded output of the real tools (trafgen 0.6.8,
// iproute2 6.1, in a lab namespace).
func trafgenFixture(name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "trafgen", name))
	if err != nil {
		panic(err)
	}
	return b
}

func TestParseTrafgen(t *testing.T) {
	rep, err := parseTrafgen(string(trafgenFixture("trafgen-0.6.8.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Packets != 20000 || rep.Elapsed != 975106*time.Microsecond {
		t.Errorf("parseTrafgen = %+v, want 20000 packets in 975.106 ms", rep)
	}
	for _, bad := range []string{"", "trafgen: Failed to open output device\n", "  12 packets outgoing\n"} {
		if _, err := parseTrafgen(bad); err == nil {
			t.Errorf("parseTrafgen(%q) = nil error, want one", bad)
		}
	}
	if kind, handle := qdiscKind(string(trafgenFixture("qdisc-noqueue.txt"))); kind != "noqueue" || handle != "0:" {
		t.Errorf("qdiscKind = %q %q, want noqueue 0:", kind, handle)
	}
}

func TestTrafgenCommandLines(t *testing.T) {
	p := trafgenPath{Dev: "eth1", Src: "198.18.1.10", NextMAC: "2e:af:e8:33:7c:9f", RxDev: "eth2"}
	got := Trafgen{}.trafgenArgs(p, "198.19.1.10", OneFrameSize(64), 148810, 12*time.Second)
	want := []string{"timeout", "-s", "INT", "12", "env", "-C", "/tmp",
		"trafgen", "--dev", "eth1", "--qdisc-path", "--cpus", "1", "--no-sock-mem", "--notouch-irq", "--gap", "0", "--num", "148810",
		"{ eth(da=2e:af:e8:33:7c:9f), ipv4(saddr=198.18.1.10, daddr=198.19.1.10, ttl=64, df), udp(sp=49161, dp=9), fill(0x00, 18) }"}
	if !slices.Equal(got, want) {
		t.Errorf("trafgenArgs =\n%q\nwant\n%q", got, want)
	}
	// IMIX: 12 packets round robin, 7 of 64 bytes, 4 of 570, 1 of 1518.
	mix := trafgenPacket(p, "198.19.1.10", IMIX)
	for fill, n := range map[string]int{"fill(0x00, 18)": 7, "fill(0x00, 524)": 4, "fill(0x00, 1472)": 1} {
		if c := strings.Count(mix, fill); c != n {
			t.Errorf("IMIX packet has %d × %s, want %d", c, fill, n)
		}
	}
	// The pacing tbf counts frames without FCS: 100 Mbit/s of 128-byte
	// frames is 100e6 / (8 · 124) = 100,806 frames a second; its bucket
	// a millisecond of that, 12,500 bytes.
	pace := newPacing(OneFrameSize(128), 100e6/(8*124))
	want = []string{"tc", "qdisc", "replace", "dev", "eth1", "root", "handle", "fab0:", "tbf", "rate", "100000000bit", "burst", "12500", "limit", "25000"}
	if got := pace.args("eth1"); !slices.Equal(got, want) {
		t.Errorf("pacing args = %q, want %q", got, want)
	}
	if d := pace.drain(); d != 2*time.Millisecond {
		t.Errorf("drain = %v, want 2ms (25,000 bytes at 100 Mbit/s)", d)
	}
	// A slow rate's bucket still holds 8 of the largest frames.
	if pace := newPacing(OneFrameSize(1518), 1000); pace.burst != 8*1518 {
		t.Errorf("burst at 1000 fps of 1518 bytes: %d, want %d", pace.burst, 8*1518)
	}
}

// wire is a sender, a firewall that forwards at most capFPS frames a
// second, and a receiver, as trafgen, tc and nft see them: the pacing
// tbf sets the sender's rate (or genFPS, its own limit, if lower), and
// the receiver's counter counts what the cap lets through.
type wire struct {
	capFPS, genFPS float64
	failTrafgen    bool

	mu      sync.Mutex
	paceFPS float64
	rx      int64
	calls   [][]string
	qdisc   string // the sender's root qdisc: "noqueue 0:"
	tables  map[string]bool
}

var tbfRateRE = regexp.MustCompile(`^(\d+)bit$`)

func (w *wire) Run(_ context.Context, argv []string) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls = append(w.calls, slices.Clone(argv))
	if w.tables == nil {
		w.tables = map[string]bool{}
	}
	if argv[0] == "timeout" { // timeout -s INT N env -C /tmp trafgen …
		argv = argv[7:]
	}
	line := strings.Join(argv, " ")
	switch {
	case strings.HasPrefix(line, "ip -j route get 198.19"):
		return trafgenFixture("route-get.json"), nil
	case strings.HasPrefix(line, "ip -j route get 198.18"):
		return []byte(`[{"dst":"198.18.1.10","gateway":"198.19.1.1","dev":"fwtgw0","prefsrc":"198.19.1.10"}]`), nil
	case strings.HasPrefix(line, "ip -j neigh"):
		return trafgenFixture("neigh.json"), nil
	case strings.HasPrefix(line, "ping"), line == "tc -V", line == "nft --version":
		return nil, nil
	case line == "cat /proc/sys/net/core/default_qdisc":
		return []byte("pfifo_fast\n"), nil
	case strings.HasPrefix(line, "tc qdisc show"):
		return []byte("qdisc " + w.qdisc + " root refcnt 2\n"), nil
	case strings.HasPrefix(line, "tc -s qdisc show"):
		return []byte("qdisc " + w.qdisc + " root refcnt 2\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)\n backlog 0b 0p requeues 0\n"), nil
	case strings.HasPrefix(line, "tc qdisc replace"):
		m := tbfRateRE.FindStringSubmatch(argv[10])
		bps, _ := strconv.ParseFloat(m[1], 64)
		w.paceFPS, w.qdisc = bps/(8*124), "tbf fab0:" // 128-byte frames in these tests
		return nil, nil
	case strings.HasPrefix(line, "tc qdisc del"):
		w.qdisc = "noqueue 0:"
		return nil, nil
	case strings.HasPrefix(line, "cat /sys/class/net/fwtgw0/"):
		return []byte("0\n0\n"), nil
	case argv[0] == "nft" && strings.HasPrefix(argv[1], "add table netdev "):
		name := strings.TrimSuffix(strings.Fields(argv[1])[3], ";")
		w.tables[name], w.rx = true, 0
		return nil, nil
	case argv[0] == "nft" && argv[1] == "-j":
		return fmt.Appendf(nil, `{"nftables": [{"rule": {"expr": [{"counter": {"packets": %d, "bytes": 0}}]}}]}`, w.rx), nil
	case argv[0] == "nft" && argv[1] == "delete":
		delete(w.tables, argv[4])
		return nil, nil
	case argv[0] == "trafgen" && argv[1] == "--version":
		return trafgenFixture("version-0.6.8.txt"), &ExitError{Code: 1}
	case argv[0] == "trafgen":
		if w.failTrafgen {
			return nil, &ExitError{Code: 1, Stderr: "Failed to open output device"}
		}
		n, _ := strconv.ParseInt(argv[slices.Index(argv, "--num")+1], 10, 64)
		fps := math.Min(w.paceFPS, w.genFPS)
		secs := float64(n) / fps
		w.rx += int64(math.Min(float64(n), w.capFPS*secs))
		us := int64(secs * 1e6)
		return fmt.Appendf(nil, "\r%12d packets outgoing\n\r%12d bytes outgoing\n\r%12d sec, %d usec on CPU0 (%d packets)\n", n, n*124, us/1e6, us%1e6, n), nil
	}
	return nil, fmt.Errorf("wire: unexpected command %q", line)
}

func (w *wire) Start(context.Context, []string) (Process, error) {
	return nil, fmt.Errorf("wire: nothing starts in the background")
}

// clean fails the test where the wire's hosts keep fwab's tbf or an nft
// table of its own.
func (w *wire) clean(t *testing.T) {
	t.Helper()
	if w.qdisc != "noqueue 0:" || len(w.tables) > 0 {
		t.Errorf("the sender's qdisc is %q and the receiver keeps tables %v: want the pacing tbf and the counters removed", w.qdisc, w.tables)
	}
}

func TestTrafgenTrialFindsTheCap(t *testing.T) {
	const capFPS = 100e6 / (8 * 124) // a 100 Mbit/s tbf, 128-byte frames
	frames := OneFrameSize(128)
	// 1 Gbit/s on the wire at most, in payload bits/s as the search counts.
	search := RateSearch{Max: 1e9 * frames.MeanPayload() / (frames.MeanFrame() + 20), Width: 0.005, InitialDuration: time.Second, FinalDuration: 2 * time.Second}

	t.Run("the firewall's cap", func(t *testing.T) {
		w := &wire{capFPS: capFPS, genFPS: 1e9, qdisc: "noqueue 0:"}
		e := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
		r := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
		n := NDR{Frames: frames, Search: search, Packets: Trafgen{}}
		s := n.Measure(t.Context(), e, r, Watch{})
		if s.Failed {
			t.Fatal(s.Reason)
		}
		if got := s.NDR.FPS / capFPS; got < 0.98 || got > 1.0 {
			t.Errorf("NDR %.0f fps against a cap of %.0f (%.3f), want within -2 %%", s.NDR.FPS, capFPS, got)
		}
		if s.NDR.Limited || s.NDR.Generator != "trafgen" {
			t.Errorf("limited %v, generator %q; want false, trafgen", s.NDR.Limited, s.NDR.Generator)
		}
		w.clean(t)
	})
	t.Run("a generator slower than the cap is flagged", func(t *testing.T) {
		w := &wire{capFPS: capFPS, genFPS: capFPS / 2, qdisc: "noqueue 0:"}
		e := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
		r := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
		s := NDR{Frames: frames, Search: search, Packets: Trafgen{}}.Measure(t.Context(), e, r, Watch{})
		if !s.NDR.Limited || !s.EndpointCPUBound {
			t.Errorf("a generator at half the cap: limited %v, endpoint-bound %v; want both", s.NDR.Limited, s.EndpointCPUBound)
		}
	})
	t.Run("the tbf goes when trafgen fails", func(t *testing.T) {
		w := &wire{capFPS: capFPS, genFPS: 1e9, qdisc: "noqueue 0:", failTrafgen: true}
		e := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
		r := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
		_, err := Trafgen{}.Trial(e, r, frames)(t.Context(), 1e6, time.Second)
		if err == nil || !strings.Contains(err.Error(), "Failed to open output device") {
			t.Errorf("err = %v, want trafgen's error", err)
		}
		w.clean(t)
	})
	t.Run("a qdisc set by hand is not replaced", func(t *testing.T) {
		w := &wire{capFPS: capFPS, genFPS: 1e9, qdisc: "htb 1:"}
		e := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
		r := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
		_, err := Trafgen{}.Check(t.Context(), e, r)
		if err == nil || !strings.Contains(err.Error(), "root qdisc is htb") {
			t.Errorf("Check = %v, want the hand-set qdisc named", err)
		}
		for _, c := range w.calls {
			if len(c) > 2 && c[0] == "tc" && c[2] == "replace" {
				t.Errorf("Check ran %q", c)
			}
		}
	})
}

// TestTrafgenNetns searches with trafgen through a router namespace whose
// egress is capped by tbf: the NDR of 128-byte frames is the cap's frame
// rate (tbf counts frames without FCS: 20e6 / (8 · 124) = 20,161 a second),
// and the generator reaches it.
func TestTrafgenNetns(t *testing.T) {
	if _, err := exec.LookPath("trafgen"); err != nil {
		t.Skip("skipping: trafgen is not installed (Debian: netsniff-ng; make setup installs it)")
	}
	const capMbit = 20
	client, server, router := netnsRouted(t, capMbit)
	g := Trafgen{}
	version, err := g.Check(t.Context(), client, server)
	if err != nil {
		t.Fatal(err)
	}
	frames := OneFrameSize(128)
	capFPS := capMbit * 1e6 / (8 * 124)
	n := NDR{Frames: frames, Packets: g, Search: RateSearch{
		Max: 2 * capMbit * 1e6 * frames.MeanPayload() / (frames.MeanFrame() + 20), Width: 0.01, Phases: 1,
		InitialDuration: time.Second / 2, FinalDuration: time.Second}}
	s := n.Measure(t.Context(), client, server, Watch{})
	if s.Failed {
		t.Fatal(s.Reason)
	}
	got := s.NDR.FPS / capFPS
	t.Logf("%s: NDR %.0f fps against a cap of %.0f (%.3f), width %.2f %%, %d trials in %s, limited %v",
		version, s.NDR.FPS, capFPS, got, 100*s.NDR.Width, len(s.NDR.Trials), s.NDR.TrialsTotal, s.NDR.Limited)
	if got < 0.98 || got > 1.02 {
		t.Errorf("NDR %.0f fps is %.3f of the cap's %.0f, want within ±2 %%", s.NDR.FPS, got, capFPS)
	}
	if s.NDR.Limited {
		t.Errorf("the search is flagged generator-limited (warnings %q)", s.Warnings)
	}
	for _, tr := range s.NDR.Trials {
		t.Logf("trial %.4g asked, %.4g offered, loss %.3f%%, %v s, pass %v", tr.PayloadBPS, tr.OfferedBPS, tr.LossPct, tr.Seconds, tr.Pass)
	}
	out, _ := exec.Command("ip", "netns", "exec", router, "tc", "-s", "qdisc", "show").CombinedOutput()
	t.Logf("router: %s", out)
	if out, _ := client.Runner.Run(t.Context(), []string{"tc", "qdisc", "show"}); strings.Contains(string(out), "tbf") {
		t.Errorf("the client keeps a tbf after the search: %s", out)
	}
}
