package inspect

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/internal/netnstest"
)

// The end-to-end tests build client — dut — server namespaces:
//
//	client c0 198.18.1.10/24 ── d0 198.18.1.1/24 [dut] d1 198.19.1.1/24 ── s0 198.19.1.10/24 server
//
// and run the engine inside dut as a separate process (this test binary,
// re-executed through `ip netns exec`, as the lab runs `fwab lab inspect`).

const (
	clientIP = "198.18.1.10"
	serverIP = "198.19.1.10"
	dutLAN   = "d0"

	engineEnv = "FWAB_INSPECT_ENGINE" // set in the re-executed test binary
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(engineEnv); spec != "" {
		os.Exit(runEngineHelper(spec))
	}
	os.Exit(m.Run())
}

// engineSpec is what the re-executed test binary runs.
type engineSpec struct {
	Mode       Mode
	Rules      int
	Seed       uint64
	Interfaces []string
	Queue      uint16
	Queues     int
	FailOpen   bool
	Status     string
	Depth      uint64
}

// runEngineHelper is the engine process: it runs until SIGTERM and prints
// its counters as JSON.
func runEngineHelper(spec string) int {
	var s engineSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	rs, err := GenerateRuleset(RulesetSpec{Rules: s.Rules, Seed: s.Seed})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	eng, err := New(Options{Mode: s.Mode, Ruleset: rs, Interfaces: s.Interfaces, Queue: s.Queue, Queues: s.Queues,
		FailOpen: s.FailOpen, StatusFile: s.Status, StatusEvery: 100 * time.Millisecond, StreamDepth: s.Depth})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signalContext()
	defer stop()
	if path := os.Getenv("FWAB_INSPECT_CPUPROFILE"); path != "" {
		f, err := os.Create(path + "." + string(s.Mode))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if err := eng.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(eng.Stats())
	return 0
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

type topology struct {
	client, dut, server string
}

func requireLab(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: builds network namespaces, iptables and nftables rules")
	}
	for _, tool := range []string{"ip", "iptables-nft", "nft", "iperf3", "ethtool"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (scripts/setup.sh installs it)", tool)
		}
	}
}

func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newTopology builds the three namespaces with unique names and removes
// them in t.Cleanup (after the processes started later are killed).
func newTopology(t *testing.T) *topology {
	t.Helper()
	requireLab(t)
	var b [4]byte
	rand.Read(b[:])
	id := "fwti" + hex.EncodeToString(b[:])
	tp := &topology{client: id + "-c", dut: id + "-d", server: id + "-s"}
	for _, ns := range []string{tp.client, tp.dut, tp.server} {
		sh(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		sh(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	sh(t, "ip", "link", "add", "c0", "netns", tp.client, "type", "veth", "peer", "name", "d0", "netns", tp.dut)
	sh(t, "ip", "link", "add", "d1", "netns", tp.dut, "type", "veth", "peer", "name", "s0", "netns", tp.server)
	sh(t, "ip", "-n", tp.client, "addr", "add", clientIP+"/24", "dev", "c0")
	sh(t, "ip", "-n", tp.dut, "addr", "add", "198.18.1.1/24", "dev", "d0")
	sh(t, "ip", "-n", tp.dut, "addr", "add", "198.19.1.1/24", "dev", "d1")
	sh(t, "ip", "-n", tp.server, "addr", "add", serverIP+"/24", "dev", "s0")
	for _, l := range [][2]string{{tp.client, "c0"}, {tp.dut, "d0"}, {tp.dut, "d1"}, {tp.server, "s0"}} {
		sh(t, "ip", "-n", l[0], "link", "set", l[1], "up")
	}
	sh(t, "ip", "-n", tp.client, "route", "add", "default", "via", "198.18.1.1")
	sh(t, "ip", "-n", tp.server, "route", "add", "default", "via", "198.19.1.1")
	sh(t, "ip", "netns", "exec", tp.dut, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	return tp
}

// start runs a process and kills it in t.Cleanup.
func start(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd
}

type engineProc struct {
	cmd    *exec.Cmd
	status string
	out    *bytes.Buffer
	errOut *bytes.Buffer
	done   chan struct{}
}

// startEngine runs the engine in the dut and installs its steering rules.
func startEngine(t *testing.T, tp *topology, spec engineSpec) *engineProc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Interfaces == nil {
		spec.Interfaces = []string{dutLAN}
	}
	spec.Status = filepath.Join(t.TempDir(), "status.json")
	js, _ := json.Marshal(spec)
	e := &engineProc{status: spec.Status, out: &bytes.Buffer{}, errOut: &bytes.Buffer{}, done: make(chan struct{})}
	e.cmd = exec.Command("ip", "netns", "exec", tp.dut, self, "-test.run=^$")
	e.cmd.Env = append(os.Environ(), engineEnv+"="+string(js))
	e.cmd.Stdout, e.cmd.Stderr = e.out, e.errOut
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { e.cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		e.cmd.Process.Kill()
		<-e.done
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(e.status); err == nil {
			break
		}
		select {
		case <-e.done:
			t.Fatalf("engine exited before it was ready: %s", e.errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine not ready after 20s: %s", e.errOut)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := Steering{Netns: tp.dut, Mode: spec.Mode, Interfaces: spec.Interfaces, Queue: spec.Queue, Queues: spec.Queues, Bypass: spec.FailOpen}
	if err := (Steerer{}).Install(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { (Steerer{}).Remove(context.Background(), tp.dut) })
	return e
}

func (e *engineProc) statusNow(t *testing.T) Status {
	t.Helper()
	st, err := ReadStatus(e.status)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// stop sends SIGTERM and returns the counters the engine printed.
func (e *engineProc) stop(t *testing.T) Stats {
	t.Helper()
	e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("engine did not exit 10s after SIGTERM: %s", e.errOut)
	}
	var s Stats
	if err := json.Unmarshal(e.out.Bytes(), &s); err != nil {
		t.Fatalf("engine output %q: %v (stderr: %s)", e.out, err, e.errOut)
	}
	if st := e.statusNow(t); st.Running {
		t.Errorf("status file after exit says running")
	}
	return s
}

// inNetns runs fn on an OS thread inside namespace ns (netnstest.Do).
func inNetns(t *testing.T, ns string, fn func() error) {
	t.Helper()
	if err := netnstest.Do(ns, fn); err != nil {
		t.Fatal(err)
	}
}

// udpPath is a UDP sender in the client and a receiver in the server.
type udpPath struct {
	send  *net.UDPConn
	recv  *net.UDPConn
	round uint64
}

func newUDPPath(t *testing.T, tp *topology) *udpPath {
	t.Helper()
	u := &udpPath{}
	inNetns(t, tp.server, func() (err error) {
		u.recv, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.ParseIP(serverIP), Port: 9999})
		return err
	})
	inNetns(t, tp.client, func() (err error) {
		u.send, err = net.DialUDP("udp4", nil, &net.UDPAddr{IP: net.ParseIP(serverIP), Port: 9999})
		return err
	})
	t.Cleanup(func() { u.send.Close(); u.recv.Close() })
	return u
}

// exchange sends n datagrams carrying content and returns how many arrived.
func (u *udpPath) exchange(t *testing.T, content []byte, n int) int {
	t.Helper()
	u.round++
	msg := binary.BigEndian.AppendUint64(nil, u.round)
	msg = append(append(msg, "payload:"...), content...)
	for range n {
		if _, err := u.send.Write(msg); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	got := 0
	buf := make([]byte, 2048)
	u.recv.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
	for {
		k, err := u.recv.Read(buf)
		if err != nil {
			break
		}
		if k >= 8 && binary.BigEndian.Uint64(buf[:8]) == u.round {
			got++
		}
	}
	return got
}

// iperf3 runs one TCP test through the dut and returns bits per second.
// It retries while the server is starting or still busy with the previous
// test (iperf3 -J reports those as an "error" field, sometimes with exit 0).
func iperf3(t *testing.T, tp *topology, seconds int) float64 {
	t.Helper()
	var out []byte
	var err error
	for try := 0; ; try++ {
		out, err = exec.Command("ip", "netns", "exec", tp.client, "iperf3", "-c", serverIP, "-t", strconv.Itoa(seconds), "-J").Output()
		var r struct {
			Error string `json:"error"`
			End   struct {
				SumReceived struct {
					BitsPerSecond float64 `json:"bits_per_second"`
				} `json:"sum_received"`
			} `json:"end"`
		}
		jerr := json.Unmarshal(out, &r)
		if jerr == nil && r.Error == "" && r.End.SumReceived.BitsPerSecond > 0 {
			return r.End.SumReceived.BitsPerSecond
		}
		if try == 30 {
			t.Fatalf("iperf3: %v %v\n%s", err, jerr, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func startIperf3Server(t *testing.T, tp *topology) {
	t.Helper()
	start(t, exec.Command("ip", "netns", "exec", tp.server, "iperf3", "-s", "-B", serverIP))
}

func testRules(t *testing.T, n int, seed uint64) (alert, drop Rule) {
	t.Helper()
	rs, err := GenerateRuleset(RulesetSpec{Rules: n, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	alert, _ = rs.FirstWith(Alert)
	drop, _ = rs.FirstWith(Drop)
	return alert, drop
}

func TestInlineDropsDropRulesOnly(t *testing.T) {
	tp := newTopology(t)
	startIperf3Server(t, tp)
	alert, drop := testRules(t, 1000, 5)
	eng := startEngine(t, tp, engineSpec{Mode: Inline, Rules: 1000, Seed: 5})

	if bps := iperf3(t, tp, 2); bps < 10e6 {
		t.Errorf("iperf3 through inline IPS: %.0f bit/s, want traffic to pass", bps)
	}
	u := newUDPPath(t, tp)
	if got := u.exchange(t, []byte("nothing to see"), 20); got < 18 {
		t.Errorf("plain datagrams: %d of 20 arrived", got)
	}
	if got := u.exchange(t, alert.Content, 20); got < 18 {
		t.Errorf("datagrams matching alert rule %d: %d of 20 arrived, want them to pass", alert.SID, got)
	}
	if got := u.exchange(t, drop.Content, 20); got != 0 {
		t.Errorf("datagrams matching drop rule %d: %d of 20 arrived, want 0", drop.SID, got)
	}
	st := eng.statusNow(t)
	if st.Mode != "ips-inline" || !st.Running || len(st.Queues) != 1 {
		t.Errorf("status mode %q running %v queues %v, want ips-inline, running, [0]", st.Mode, st.Running, st.Queues)
	}
	if on := st.Offloads[dutLAN]; len(on) > 0 && len(st.Warnings) == 0 {
		t.Errorf("offloads %v on in inline mode but no warning in the status", on)
	}
	s := eng.stop(t)
	if s.Dropped < 20 || s.Matches < 40 || s.Accepted == 0 {
		t.Errorf("counters %v: want dropped >= 20, matches >= 40, accepted > 0", s)
	}
}

func TestIDSSeesWithoutBlocking(t *testing.T) {
	tp := newTopology(t)
	_, drop := testRules(t, 1000, 6)
	eng := startEngine(t, tp, engineSpec{Mode: IDS, Rules: 1000, Seed: 6})
	u := newUDPPath(t, tp)
	if got := u.exchange(t, drop.Content, 20); got < 18 {
		t.Errorf("IDS: datagrams matching drop rule %d: %d of 20 arrived, want them to pass", drop.SID, got)
	}
	if st := eng.statusNow(t); st.Mode != "ids" {
		t.Errorf("status mode %q, want ids", st.Mode)
	}
	s := eng.stop(t)
	// The capture on d0 sees each datagram once (ingress).
	if s.Matches < 18 || s.Dropped != 0 || s.Blocked != 0 || s.Packets < 20 {
		t.Errorf("counters %v: want matches >= 18, packets >= 20, nothing dropped or blocked", s)
	}
	if out := sh(t, "ip", "netns", "exec", tp.dut, "iptables-nft", "-S", "FORWARD"); strings.Contains(out, "NFQUEUE") || strings.Contains(out, IPSChain) {
		t.Errorf("IDS mode left queue rules in FORWARD:\n%s", out)
	}
}

func TestLegacyBlocksOffender(t *testing.T) {
	tp := newTopology(t)
	_, drop := testRules(t, 1000, 7)
	eng := startEngine(t, tp, engineSpec{Mode: Legacy, Rules: 1000, Seed: 7})
	u := newUDPPath(t, tp)
	if got := u.exchange(t, []byte("before"), 10); got < 9 {
		t.Fatalf("before any offence: %d of 10 datagrams arrived", got)
	}
	// The offending datagram itself passes: legacy mode acts after the fact.
	u.exchange(t, drop.Content, 1)
	deadline := time.Now().Add(5 * time.Second)
	for eng.statusNow(t).Stats.Blocked == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("offender not blocked 5s after the drop rule matched: %v", eng.statusNow(t).Stats)
		}
		time.Sleep(50 * time.Millisecond)
	}
	blocked, err := (Steerer{}).Blocked(t.Context(), tp.dut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(blocked, clientIP) {
		t.Errorf("block set holds %v, want %s", blocked, clientIP)
	}
	if got := u.exchange(t, []byte("after"), 10); got != 0 {
		t.Errorf("after the offence: %d of 10 datagrams from the blocked client arrived, want 0", got)
	}
	if st := eng.statusNow(t); st.Mode != "ips-legacy" {
		t.Errorf("status mode %q, want ips-legacy", st.Mode)
	}
	s := eng.stop(t)
	if s.Blocked != 1 || s.Dropped != 0 {
		t.Errorf("counters %v: want blocked 1, dropped 0", s)
	}
}

// TestInlineFailsClosed checks that without an engine the queue drops
// traffic unless bypass (fail-open) was asked for.
func TestInlineFailsClosed(t *testing.T) {
	tp := newTopology(t)
	u := newUDPPath(t, tp)
	for _, bypass := range []bool{false, true} {
		st := Steering{Netns: tp.dut, Mode: Inline, Interfaces: []string{dutLAN}, Bypass: bypass}
		if err := (Steerer{}).Install(t.Context(), st); err != nil {
			t.Fatal(err)
		}
		got := u.exchange(t, []byte("x"), 10)
		if !bypass && got != 0 {
			t.Errorf("queue without engine, no bypass: %d of 10 arrived, want 0", got)
		}
		if bypass && got < 9 {
			t.Errorf("queue without engine, bypass: %d of 10 arrived, want them to pass", got)
		}
	}
	if err := (Steerer{}).Remove(t.Context(), tp.dut); err != nil {
		t.Fatal(err)
	}
}

func TestSteeringIdempotent(t *testing.T) {
	tp := newTopology(t)
	ctx := t.Context()
	s := Steerer{}
	inline := Steering{Netns: tp.dut, Mode: Inline, Interfaces: []string{"d0", "d1"}, Queue: 3, Queues: 2}
	chainRules := func() []string {
		var rules []string
		for _, l := range strings.Split(sh(t, "ip", "netns", "exec", tp.dut, "iptables-nft", "-S"), "\n") {
			if strings.Contains(l, IPSChain) || strings.Contains(l, "NFQUEUE") {
				rules = append(rules, l)
			}
		}
		return rules
	}
	for range 2 {
		if err := s.Install(ctx, inline); err != nil {
			t.Fatal(err)
		}
	}
	got := chainRules()
	want := []string{
		"-N " + IPSChain,
		"-A FORWARD -j " + IPSChain,
		"-A " + IPSChain + " -i d0 -j NFQUEUE --queue-balance 3:4",
		"-A " + IPSChain + " -o d0 -j NFQUEUE --queue-balance 3:4",
		"-A " + IPSChain + " -i d1 -j NFQUEUE --queue-balance 3:4",
		"-A " + IPSChain + " -o d1 -j NFQUEUE --queue-balance 3:4",
	}
	if !slices.Equal(got, want) {
		t.Errorf("inline installed twice: rules\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	legacy := Steering{Netns: tp.dut, Mode: Legacy}
	if err := s.Install(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if got := chainRules(); len(got) != 0 {
		t.Errorf("legacy after inline left %v", got)
	}
	sh(t, "ip", "netns", "exec", tp.dut, "nft", "add", "element", "inet", BlockTable, BlockSet4, "{ 198.18.1.77 }")
	if err := s.Install(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	blocked, err := s.Blocked(ctx, tp.dut)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(blocked, []string{"198.18.1.77"}) {
		t.Errorf("legacy installed again: blocked %v, want the earlier entry kept", blocked)
	}
	if n := strings.Count(sh(t, "ip", "netns", "exec", tp.dut, "nft", "list", "table", "inet", BlockTable), " drop"); n != 4 {
		t.Errorf("legacy installed twice: %d drop rules, want 4", n)
	}
	for range 2 {
		if err := s.Remove(ctx, tp.dut); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if got := chainRules(); len(got) != 0 {
		t.Errorf("after Remove: %v", got)
	}
	if _, err := exec.Command("ip", "netns", "exec", tp.dut, "nft", "list", "table", "inet", BlockTable).CombinedOutput(); err == nil {
		t.Error("after Remove: block table still there")
	}
}

// TestThroughputByMode measures iperf3 through the dut with no inspection
// and with each mode, and checks that inline IPS costs clearly more than
// IDS. Modes alternate within each round (none, ids, inline, legacy, then
// again) so that load from elsewhere on the machine hits them alike.
// FWAB_INSPECT_RUNS sets the rounds (default 3), FWAB_INSPECT_SECONDS the
// iperf3 duration (default 2) and FWAB_INSPECT_STREAM_DEPTH the engine's
// stream depth in bytes (default 0: inspect everything).
func TestThroughputByMode(t *testing.T) {
	if testing.Short() {
		t.Skip("throughput probes are slow; not in -short")
	}
	tp := newTopology(t)
	startIperf3Server(t, tp)
	runs, secs := envInt("FWAB_INSPECT_RUNS", 3), envInt("FWAB_INSPECT_SECONDS", 2)
	depth := uint64(envInt("FWAB_INSPECT_STREAM_DEPTH", 0))
	const none Mode = "none"

	for _, rules := range []int{1000, 10000} {
		samples := map[Mode][]float64{}
		for round := range runs {
			for _, mode := range []Mode{none, IDS, Inline, Legacy} {
				if mode == none {
					samples[mode] = append(samples[mode], iperf3(t, tp, secs))
					continue
				}
				eng := startEngine(t, tp, engineSpec{Mode: mode, Rules: rules, Seed: 1, Depth: depth})
				samples[mode] = append(samples[mode], iperf3(t, tp, secs))
				s := eng.stop(t)
				if err := (Steerer{}).Remove(t.Context(), tp.dut); err != nil {
					t.Fatal(err)
				}
				t.Logf("round %d, %s, %d rules: %.0f Mbit/s; %v", round, mode, rules, samples[mode][round]/1e6, s)
				if s.Matches != 0 || s.Dropped != 0 || s.Blocked != 0 {
					t.Errorf("%s, %d rules: iperf3 traffic matched rules: %v", mode, rules, s)
				}
			}
		}
		med := map[Mode]float64{}
		for _, mode := range []Mode{none, IDS, Inline, Legacy} {
			v := slices.Sorted(slices.Values(samples[mode]))
			med[mode] = v[len(v)/2]
			t.Logf("FIGURE %d rules, %-7s median %6.0f Mbit/s of %d runs of %ds (min %.0f, max %.0f)",
				rules, mode, med[mode]/1e6, runs, secs, v[0]/1e6, v[len(v)-1]/1e6)
		}
		if med[Inline] > 0.7*med[IDS] {
			t.Errorf("%d rules: inline %.0f Mbit/s, IDS %.0f Mbit/s: want inline clearly (30%%+) below IDS",
				rules, med[Inline]/1e6, med[IDS]/1e6)
		}
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
