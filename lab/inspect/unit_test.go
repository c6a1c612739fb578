package inspect

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/fwapi"
)

func ipv4(proto byte, l4 []byte) []byte {
	p := make([]byte, 20, 20+len(l4))
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(20+len(l4)))
	p[9] = proto
	copy(p[12:16], []byte{198, 18, 1, 10})
	copy(p[16:20], []byte{198, 19, 1, 10})
	return append(p, l4...)
}

func tcp(payload string) []byte {
	h := make([]byte, 24) // 20 bytes + 4 bytes of options
	h[12] = 6 << 4
	return append(h, payload...)
}

func TestParsePacket(t *testing.T) {
	v6 := make([]byte, 40)
	v6[0] = 0x60
	v6[6] = 17
	v6[8], v6[9], v6[11] = 0x20, 0x01, 0x02 // 2001:2:: (benchmarking range)
	v6 = append(v6, append(make([]byte, 8), "six"...)...)
	frag := ipv4(6, []byte("fragment data"))
	binary.BigEndian.PutUint16(frag[6:8], 10)                              // fragment offset 80
	padded := append(ipv4(17, append(make([]byte, 8), "udp"...)), 0, 0, 0) // Ethernet padding past total length

	tests := []struct {
		name    string
		p       []byte
		ok      bool
		src     string
		payload string
	}{
		{"tcp with options", ipv4(6, tcp("hello")), true, "198.18.1.10", "hello"},
		{"udp", ipv4(17, append(make([]byte, 8), "dgram"...)), true, "198.18.1.10", "dgram"},
		{"padding ignored", padded, true, "198.18.1.10", "udp"},
		{"icmp", ipv4(1, []byte("\x08\x00ping")), true, "198.18.1.10", "\x08\x00ping"},
		{"later fragment", frag, true, "198.18.1.10", "fragment data"},
		{"ipv6 udp", v6, true, "2001:2::", "six"},
		{"empty", nil, false, "", ""},
		{"short ipv4", []byte{0x45, 0, 0}, false, "", ""},
		{"not ip", []byte{0x00, 1, 2, 3}, false, "", ""},
		{"bad tcp offset", ipv4(6, make([]byte, 20)), true, "198.18.1.10", string(make([]byte, 20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, ok := parsePacket(tt.p)
			if ok != tt.ok {
				t.Fatalf("parsePacket ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if got := info.src.String(); got != tt.src {
				t.Errorf("src = %s, want %s", got, tt.src)
			}
			if got := string(info.payload); got != tt.payload {
				t.Errorf("payload = %q, want %q", got, tt.payload)
			}
		})
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"inline": Inline, "ips-inline": Inline, "ids": IDS, "legacy": Legacy, "ips-legacy": Legacy} {
		got, err := ParseMode(in)
		if err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
		if back, _ := ParseMode(got.Knob()); back != want {
			t.Errorf("ParseMode(%q.Knob()) = %q, want %q", got, back, want)
		}
	}
	if _, err := ParseMode("ips"); err == nil || !strings.Contains(err.Error(), "use inline, ids or legacy") {
		t.Errorf("ParseMode(ips) error = %v, want one naming the valid modes", err)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: 10, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"no ruleset", Options{Mode: Inline}, "no ruleset"},
		{"no mode", Options{Ruleset: rs}, "unknown inspection mode"},
		{"ids without interface", Options{Mode: IDS, Ruleset: rs}, "needs at least one interface"},
		{"legacy failopen", Options{Mode: Legacy, Ruleset: rs, Interfaces: []string{"d0"}, FailOpen: true}, "fail-open applies to inline mode only"},
		{"queues past 65535", Options{Mode: Inline, Ruleset: rs, Queue: 65535, Queues: 2}, "out of range"},
	}
	for _, tt := range tests {
		_, err := New(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: New error = %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	if _, err := New(Options{Mode: Inline, Ruleset: rs}); err != nil {
		t.Errorf("New(inline) = %v, want nil", err)
	}
}

func TestQueueRules(t *testing.T) {
	tests := []struct {
		st   Steering
		want [][]string
	}{
		{Steering{Queue: 0}, [][]string{{"-j", "NFQUEUE", "--queue-num", "0"}}},
		{Steering{Queue: 2, Queues: 2, Bypass: true}, [][]string{{"-j", "NFQUEUE", "--queue-balance", "2:3", "--queue-bypass"}}},
		{Steering{Interfaces: []string{"d0"}, Queue: 1}, [][]string{
			{"-i", "d0", "-j", "NFQUEUE", "--queue-num", "1"},
			{"-o", "d0", "-j", "NFQUEUE", "--queue-num", "1"},
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, QueueRules(tt.st)); diff != "" {
			t.Errorf("QueueRules(%+v) (-want +got):\n%s", tt.st, diff)
		}
	}
}

// TestSteererCommands records the commands Install runs in a namespace on
// an empty system (every probe for an existing object fails).
func TestSteererCommands(t *testing.T) {
	var got []string
	fake := func(_ context.Context, name string, args ...string) ([]byte, error) {
		line := name + " " + strings.Join(args, " ")
		got = append(got, line)
		if strings.Contains(line, " -L ") || strings.Contains(line, " -C ") || strings.Contains(line, "nft list") {
			return []byte("No chain/target/match by that name."), errors.New("exit status 1")
		}
		return nil, nil
	}
	s := Steerer{Run: fake}
	if err := s.Install(t.Context(), Steering{Netns: "ns1", Mode: Inline, Interfaces: []string{"d0"}}); err != nil {
		t.Fatal(err)
	}
	pre := "ip netns exec ns1 "
	want := []string{
		pre + "nft list table inet fwab_ips",
		pre + "iptables-nft -w -t filter -L FWAB-IPS -n",
		pre + "iptables-nft -w -t filter -N FWAB-IPS",
		pre + "iptables-nft -w -t filter -F FWAB-IPS",
		pre + "iptables-nft -w -t filter -A FWAB-IPS -i d0 -j NFQUEUE --queue-num 0",
		pre + "iptables-nft -w -t filter -A FWAB-IPS -o d0 -j NFQUEUE --queue-num 0",
		pre + "iptables-nft -w -t filter -C FORWARD -j FWAB-IPS",
		pre + "iptables-nft -w -t filter -I FORWARD 1 -j FWAB-IPS",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Install(inline) commands (-want +got):\n%s", diff)
	}

	for _, bad := range []string{"", "d0 -j ACCEPT", "a/b", "averyveryverylongname"} {
		if err := s.Install(t.Context(), Steering{Mode: Inline, Interfaces: []string{bad}}); err == nil {
			t.Errorf("Install with interface %q: got nil error", bad)
		}
	}
	failing := Steerer{Run: func(context.Context, string, ...string) ([]byte, error) {
		return []byte("iptables: Permission denied"), errors.New("exit status 4")
	}}
	err := failing.Install(t.Context(), Steering{Mode: Inline})
	if err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("Install when iptables fails: error = %v, want the command's output in it", err)
	}
}

func TestBlockRuleset(t *testing.T) {
	rs := BlockRuleset()
	for _, want := range []string{
		"add set inet fwab_ips snort2c { type ipv4_addr; }",
		"flush chain inet fwab_ips block",
		"add rule inet fwab_ips block ip saddr @snort2c drop",
		"add rule inet fwab_ips block ip6 daddr @snort2c6 drop",
	} {
		if !strings.Contains(rs, want+"\n") {
			t.Errorf("BlockRuleset() lacks %q:\n%s", want, rs)
		}
	}
	if strings.Contains(rs, "flush set") || strings.Contains(rs, "delete") {
		t.Errorf("BlockRuleset() must keep blocked addresses:\n%s", rs)
	}
}

func TestParseSetElements(t *testing.T) {
	out := `table inet fwab_ips {
	set snort2c {
		type ipv4_addr
		elements = { 198.18.1.10, 198.18.1.77,
			     198.18.2.1 }
	}
}
`
	want := []string{"198.18.1.10", "198.18.1.77", "198.18.2.1"}
	if diff := cmp.Diff(want, parseSetElements(out)); diff != "" {
		t.Errorf("parseSetElements (-want +got):\n%s", diff)
	}
	if got := parseSetElements("set snort2c {\n type ipv4_addr\n}"); got != nil {
		t.Errorf("parseSetElements(empty set) = %v, want nil", got)
	}
}

func TestParseOffloads(t *testing.T) {
	out := `Features for d0:
rx-checksumming: on
tx-checksumming: on
	tx-checksum-ipv4: off [fixed]
scatter-gather: on
tcp-segmentation-offload: off
	tx-tcp-segmentation: off
generic-segmentation-offload: on
large-receive-offload: on [fixed]
`
	if diff := cmp.Diff([]string{"rxcsum", "txcsum", "lro"}, parseOffloads(out)); diff != "" {
		t.Errorf("parseOffloads (-want +got):\n%s", diff)
	}
}

func TestStatusFile(t *testing.T) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "status.json")
	e, err := New(Options{Mode: Inline, Ruleset: rs, Queue: 4, Queues: 2, Interfaces: []string{"d0"}, StatusFile: path})
	if err != nil {
		t.Fatal(err)
	}
	e.offload = map[string][]string{"d0": {"txcsum", "tso"}}
	e.inspect(ipv4(17, append(make([]byte, 8), rs.Rules[0].Content...)), nil, nil)
	if err := e.writeStatus(true); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "ips-inline" || st.Rules != 20 || st.DropRules != 2 || !cmp.Equal(st.Queues, []uint16{4, 5}) || st.PID != os.Getpid() {
		t.Errorf("status %+v: want ips-inline, 20 rules, 2 drop rules, queues [4 5], our pid", st)
	}
	if st.Stats.Packets != 1 || st.Stats.Matches != 1 {
		t.Errorf("status counters %v, want 1 packet, 1 match", st.Stats)
	}
	if len(st.Warnings) != 1 || !strings.Contains(st.Warnings[0], "txcsum,tso") {
		t.Errorf("status warnings %q, want one naming txcsum,tso", st.Warnings)
	}
	want := []fwapi.IDSInstance{{Interface: "d0", Mode: "ips-inline", PID: os.Getpid(), Rules: 20}}
	if diff := cmp.Diff(want, st.IDSInstances()); diff != "" {
		t.Errorf("IDSInstances (-want +got):\n%s", diff)
	}
	st.Running = false
	if got := st.IDSInstances(); got != nil {
		t.Errorf("IDSInstances of a stopped engine = %v, want none", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("status directory holds %d files, want only the status file (no temporary left)", len(entries))
	}
	if _, err := ReadStatus(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("ReadStatus(missing) = nil error")
	}
}

func TestBlockSet(t *testing.T) {
	for in, want := range map[string]string{"198.18.1.10": BlockSet4, "::ffff:198.18.1.10": BlockSet4, "2001:2::1": BlockSet6} {
		if got := blockSet(netip.MustParseAddr(in)); got != want {
			t.Errorf("blockSet(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestSuricataCommand(t *testing.T) {
	tests := []struct {
		mode Mode
		want string
	}{
		{Inline, "/usr/local/bin/suricata --netmap -D -c /usr/local/etc/suricata/suricata_7_igb1/suricata.yaml --pidfile /var/run/suricata_igb17.pid"},
		{IDS, "/usr/local/bin/suricata -i igb1 -D -c /usr/local/etc/suricata/suricata_7_igb1/suricata.yaml --pidfile /var/run/suricata_igb17.pid"},
		{Legacy, "/usr/local/bin/suricata -i igb1 -D -c /usr/local/etc/suricata/suricata_7_igb1/suricata.yaml --pidfile /var/run/suricata_igb17.pid"},
	}
	for _, tt := range tests {
		st := Status{Mode: tt.mode.Knob(), Seed: 7}
		if got := st.SuricataCommand("igb1"); got != tt.want {
			t.Errorf("SuricataCommand(%s) = %q, want %q", tt.mode, got, tt.want)
		}
	}
}

func tcpPorts(sport, dport uint16, payload []byte) []byte {
	h := tcp("")
	binary.BigEndian.PutUint16(h[0:2], sport)
	binary.BigEndian.PutUint16(h[2:4], dport)
	return append(h, payload...)
}

// TestStreamDepth: with a depth, a TCP flow direction is inspected up to
// that many bytes only; other flows and UDP are not affected.
func TestStreamDepth(t *testing.T) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: 5, Seed: 11, DropEvery: 1})
	if err != nil {
		t.Fatal(err)
	}
	content := rs.Rules[2].Content
	benign := func(n int) []byte { return make([]byte, n) }
	e, err := New(Options{Mode: Inline, Ruleset: rs, StreamDepth: 100})
	if err != nil {
		t.Fatal(err)
	}
	flows := newFlowTable(e.opts.StreamDepth)
	steps := []struct {
		name     string
		pkt      []byte
		wantDrop bool
	}{
		{"flow A, 95 bytes", ipv4(6, tcpPorts(40000, 80, benign(95))), false},
		{"flow A, content across the depth", ipv4(6, tcpPorts(40000, 80, content)), false},
		{"flow A reversed direction, content", ipv4(6, tcpPorts(80, 40000, content)), true},
		{"flow B, content", ipv4(6, tcpPorts(40001, 80, content)), true},
		{"udp, content", ipv4(17, append(benign(8), content...)), true},
		{"flow A past the depth, content", ipv4(6, tcpPorts(40000, 80, content)), false},
	}
	for _, s := range steps {
		if _, drop := e.inspect(s.pkt, flows, nil); drop != s.wantDrop {
			t.Errorf("%s: drop = %v, want %v", s.name, drop, s.wantDrop)
		}
	}
	// The reversed direction has the same addresses here; the key includes
	// the ports, so it is a separate direction.
	if got, want := e.Stats().BeyondDepth, uint64(2*len(content)-5); got != want {
		t.Errorf("BeyondDepth = %d, want %d", got, want)
	}
	// Without a depth everything is inspected.
	e2, _ := New(Options{Mode: Inline, Ruleset: rs})
	for range 3 {
		if _, drop := e2.inspect(ipv4(6, tcpPorts(40000, 80, append(benign(200), content...))), nil, nil); !drop {
			t.Fatal("no stream depth: content after 200 bytes not dropped")
		}
	}
}

// TestAlertLog: in IDS mode a rule that matches a packet captured on an
// interface adds a fast-log line to that interface's alert log, a drop
// rule marked as Suricata marks one it would have dropped; another
// interface's log gets nothing.
func TestAlertLog(t *testing.T) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: 20, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lan, wan := filepath.Join(dir, "lan.log"), filepath.Join(dir, "wan.log")
	os.WriteFile(lan, []byte("an earlier line\n"), 0o644)
	e, err := New(Options{Mode: IDS, Ruleset: rs, Interfaces: []string{"d0", "d1"}, AlertLogs: map[string]string{"d0": lan, "d1": wan}})
	if err != nil {
		t.Fatal(err)
	}
	drop, _ := rs.FirstWith(Drop)
	alert, _ := rs.FirstWith(Alert)
	e.inspect(ipv4(17, append(make([]byte, 8), drop.Content...)), nil, e.alertLogs["d0"])
	e.inspect(ipv4(17, append(make([]byte, 8), alert.Content...)), nil, e.alertLogs["d0"])
	e.inspect(ipv4(17, make([]byte, 64)), nil, e.alertLogs["d0"])
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(lan)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 3 || lines[0] != "an earlier line" ||
		!strings.Contains(lines[1], fmt.Sprintf("  [wDrop] [**] [1:%d:1] ", drop.SID)) || !strings.Contains(lines[1], "{UDP}") ||
		!strings.Contains(lines[2], fmt.Sprintf("  [**] [1:%d:1] ", alert.SID)) {
		t.Errorf("lan's alert log:\n%s\nwant the earlier line, then a [wDrop] line for sid %d and one for sid %d", data, drop.SID, alert.SID)
	}
	if data, err := os.ReadFile(wan); err != nil || len(data) != 0 {
		t.Errorf("wan's alert log: %q, %v; want an empty file", data, err)
	}
}
