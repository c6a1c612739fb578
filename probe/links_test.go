package probe

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock logs when servers start and clients run, across links.
type clock struct {
	mu      sync.Mutex
	servers []time.Time
	clients []time.Time
}

// timed is a link's policed runner whose server takes delay to start
// listening, logging to a shared clock.
type timed struct {
	policed
	c     *clock
	delay time.Duration
	fail  bool
}

func (r timed) Start(ctx context.Context, argv []string) (Process, error) {
	if r.fail {
		return nil, errors.New("iperf3: not found")
	}
	time.Sleep(r.delay)
	r.c.mu.Lock()
	r.c.servers = append(r.c.servers, time.Now())
	r.c.mu.Unlock()
	return r.policed.Start(ctx, argv)
}

func (r timed) Run(ctx context.Context, argv []string) ([]byte, error) {
	if slices.Contains(argv, "-c") {
		r.c.mu.Lock()
		r.c.clients = append(r.c.clients, time.Now())
		r.c.mu.Unlock()
	}
	return r.policed.Run(ctx, argv)
}

// TestMeasureLinks: two links run together are armed first (both servers
// listening, the slower one's 150 ms late) and then fired together; the
// sample is their sum, each link's figures beside it, with the clients'
// start skew. A link that cannot start fails the sample, naming it,
// without holding the other.
func TestMeasureLinks(t *testing.T) {
	c := &clock{}
	link := func(name string, capacity float64, delay time.Duration) Link {
		r := timed{policed: policed{newScripted(t, "iperf3/server-udp.json", ""), capacity}, c: c, delay: delay}
		return Link{Name: name, Client: Endpoint{Name: "client@" + name, Addr: "198.18.1.10", Runner: r}, Server: Endpoint{Name: "server@" + name, Addr: "198.19.1.10", Runner: r}}
	}
	p := Iperf3{UDP: true, Bitrate: "100000000", Length: 1400, Duration: time.Second, StartGrace: time.Millisecond}
	var firstWatch time.Time
	var wmu sync.Mutex
	dut := func(context.Context) (DUTMetrics, error) {
		wmu.Lock()
		defer wmu.Unlock()
		if firstWatch.IsZero() {
			firstWatch = time.Now()
		}
		return DUTMetrics{}, nil
	}
	s := p.MeasureLinks(t.Context(), []Link{link("a", 60e6, 0), link("b", 30e6, 150*time.Millisecond)}, Watch{DUT: dut, DUTEvery: 10 * time.Millisecond})
	if s.Failed {
		t.Fatalf("MeasureLinks: %s", s.Reason)
	}
	if got := s.BitsPerSecond(); math.Abs(got-90e6) > 1e6 {
		t.Errorf("sum %.4g bit/s, want the links' 60 + 30 Mbit/s", got)
	}
	if len(s.Links) != 2 || s.Links[0].Name != "a" || math.Abs(s.Links[0].BitsPerSecond-60e6) > 1e6 || math.Abs(s.Links[1].BitsPerSecond-30e6) > 1e6 {
		t.Errorf("links %+v, want a at 60 and b at 30 Mbit/s", s.Links)
	}
	for _, l := range s.Links {
		var client struct {
			End map[string]json.RawMessage `json:"end"`
		}
		if err := json.Unmarshal(l.Client, &client); err != nil || len(client.End) == 0 || !json.Valid(l.Server) || len(l.Server) == 0 {
			t.Errorf("link %s keeps client report %.60q (%v) and server report %.60q: want each link's own iperf3 reports, for the record", l.Name, l.Client, err, l.Server)
		}
	}
	if want := 100 * (40.0 + 70.0) / 200.0; math.Abs(s.Result.UDP.LostPercent-want) > 0.5 {
		t.Errorf("loss %.2f %%, want the links' lost packets over all their packets, %.2f %%", s.Result.UDP.LostPercent, want)
	}
	last := slices.MaxFunc(c.servers, func(a, b time.Time) int { return a.Compare(b) })
	for _, cl := range c.clients {
		if cl.Before(last) {
			t.Errorf("a client ran %v before the last server listened: not armed first", last.Sub(cl))
		}
	}
	if wmu.Lock(); firstWatch.IsZero() || firstWatch.Before(last) {
		t.Errorf("the DUT was first read %v, before the last server listened (%v): the watch must cover the load only", firstWatch, last)
	}
	wmu.Unlock()
	if s.StartSkew > MaxStartSkew || s.StartSkew < 0 || slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "apart") }) {
		t.Errorf("start skew %v (warnings %q): want the clients fired together", s.StartSkew, s.Warnings)
	}

	broken := link("b", 30e6, 0)
	r := broken.Client.Runner.(timed)
	r.fail = true
	broken.Client.Runner, broken.Server.Runner = r, r
	done := make(chan Sample)
	go func() { done <- p.MeasureLinks(t.Context(), []Link{link("a", 60e6, 0), broken}, Watch{}) }()
	select {
	case s = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a link that cannot start held the other")
	}
	if !s.Failed || !strings.Contains(s.Reason, "link b:") || strings.Contains(s.Reason, "link a:") {
		t.Errorf("with link b broken: failed %v, %q; want it failed, naming b only", s.Failed, s.Reason)
	}
}

// TestMeasureLinksOwnCores: a link given cores of its own (LinkCPUs) runs
// its iperf3s on them, the others on the probe's.
func TestMeasureLinksOwnCores(t *testing.T) {
	var links []Link
	runners := map[string]*scripted{}
	for _, name := range []string{"a", "b"} {
		r := newScripted(t, "iperf3/server-udp.json", "iperf3/udp.json")
		runners[name] = r
		links = append(links, Link{Name: name, Client: Endpoint{Name: "client@" + name, Addr: "198.18.1.10", Runner: r}, Server: Endpoint{Name: "server@" + name, Addr: "198.19.1.10", Runner: r}})
	}
	p := Iperf3{UDP: true, Bitrate: "100M", ClientCPUs: "0", ServerCPUs: "1", LinkCPUs: map[string]CPUSides{"b": {Client: "2", Server: "3"}}, StartGrace: time.Millisecond}
	if s := p.MeasureLinks(t.Context(), links, Watch{}); s.Failed {
		t.Fatalf("MeasureLinks: %s", s.Reason)
	}
	want := map[string][2]string{"a": {"0", "1"}, "b": {"2", "3"}}
	for name, r := range runners {
		if len(r.calls) == 0 {
			t.Fatalf("link %s ran nothing", name)
		}
		for _, c := range r.calls {
			cores := want[name][0]
			if slices.Contains(c, "-s") {
				cores = want[name][1]
			}
			if len(c) < 4 || c[0] != "sh" || c[3] != cores {
				t.Errorf("link %s: argv %q, want iperf3 on cores %s", name, c, cores)
			}
		}
	}
}

// TestMeasureLinksNetns: two links of network namespaces, each capped at
// 200 Mbit/s on its client's egress with tc tbf, run together with their
// iperf3s pinned to cores: each link
// carries the cap's TCP goodput (1448 of every 1514 bytes tbf counts) and
// the sample their sum, the clients launched within MaxStartSkew.
//
// FWAB_LINK_CAP_MBIT sets another cap (500 Mbit/s a link, say);
// FWAB_LINK_PIN=off leaves the iperf3s to the scheduler.
func TestMeasureLinksNetns(t *testing.T) {
	capMbit := 200
	if v := os.Getenv("FWAB_LINK_CAP_MBIT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10 || n > 10000 {
			t.Fatalf("FWAB_LINK_CAP_MBIT=%q: want Mbit/s from 10 to 10000", v)
		}
		capMbit = n
	}
	var links []Link
	for _, name := range []string{"a", "b"} {
		client, server, _ := netnsPair(t)
		if _, err := client.Runner.Run(t.Context(), []string{"iperf3", "--version"}); err != nil {
			t.Skipf("skipping: iperf3 not runnable in a namespace: %v", err)
		}
		ns := client.Runner.(Local).Netns
		dev := strings.TrimSuffix(ns, "-a") + "a"
		if out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", strconv.Itoa(capMbit)+"mbit", "burst", "64k", "latency", "50ms").CombinedOutput(); err != nil {
			t.Skipf("skipping: tc tbf: %v %s", err, out)
		}
		links = append(links, Link{Name: name, Client: client, Server: server})
	}
	// Pinned (cpuset) as the E302 review pinned its iperf3s, through
	// taskset; this machine has two cores, not one a process, so each
	// core runs one link's client and the other's server (a's client on
	// core 0, b's on core 1: LinkCPUs).
	p := Iperf3{Duration: 3 * time.Second, Omit: time.Second, ClientCPUs: "0", ServerCPUs: "1", LinkCPUs: map[string]CPUSides{"b": {Client: "1", Server: "0"}}}
	for _, l := range links {
		if err := CheckCPUs(t.Context(), l.Client, "0-1"); err != nil {
			t.Skipf("skipping: %v", err)
		}
	}
	if os.Getenv("FWAB_LINK_PIN") == "off" {
		p.ClientCPUs, p.ServerCPUs, p.LinkCPUs = "", "", nil
	}
	s := p.MeasureLinks(t.Context(), links, Watch{})
	if s.Failed {
		t.Fatalf("MeasureLinks: %s", s.Reason)
	}
	want := float64(capMbit) * 1e6 * 1448 / 1514
	for _, l := range s.Links {
		if math.Abs(l.BitsPerSecond-want) > 0.1*want {
			t.Errorf("link %s: %.1f Mbit/s, want the cap's goodput %.1f ± 10 %%", l.Name, l.BitsPerSecond/1e6, want/1e6)
		}
	}
	if math.Abs(s.BitsPerSecond()-2*want) > 0.1*2*want {
		t.Errorf("sum %.1f Mbit/s, want %.1f", s.BitsPerSecond()/1e6, 2*want/1e6)
	}
	if s.StartSkew > MaxStartSkew {
		t.Errorf("clients launched %v apart, want within %v", s.StartSkew, MaxStartSkew)
	}
	t.Logf("links %.1f and %.1f Mbit/s, sum %.1f, start skew %v", s.Links[0].BitsPerSecond/1e6, s.Links[1].BitsPerSecond/1e6, s.BitsPerSecond()/1e6, s.StartSkew)
}

// answer is a Runner that answers every command with out.
type answer string

func (a answer) Run(context.Context, []string) ([]byte, error) { return []byte(a), nil }
func (a answer) Start(context.Context, []string) (Process, error) {
	return nil, errors.New("not a server")
}

// TestCPUSet: a cpuset runs each side's iperf3 through taskset -c (or
// cpuset -l, where there is no taskset) on its cores, and an endpoint that
// lacks a core is refused by name before anything runs.
func TestCPUSet(t *testing.T) {
	r := newScripted(t, "iperf3/server-udp.json", "iperf3/udp.json")
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	s := Iperf3{UDP: true, Bitrate: "100M", ClientCPUs: "1", ServerCPUs: "0-1,3", StartGrace: time.Millisecond}.Run(t.Context(), client, server)
	if s.Failed {
		t.Fatalf("Run: %s", s.Reason)
	}
	for _, c := range r.calls {
		want := "1"
		if slices.Contains(c, "-s") {
			want = "0-1,3"
		}
		if len(c) < 5 || c[0] != "sh" || !strings.Contains(c[2], "taskset -c") || !strings.Contains(c[2], "cpuset -l") || c[3] != want || c[4] != "iperf3" {
			t.Errorf("argv %q: want iperf3 run on cores %s through sh, taskset or cpuset", c, want)
		}
	}
	if err := CheckCPUs(t.Context(), Endpoint{Name: "client", Addr: "198.18.1.10", Runner: answer("no-tool\n")}, "1"); err == nil || !strings.Contains(err.Error(), "neither taskset") {
		t.Errorf("CheckCPUs on an endpoint without taskset or cpuset = %v, want them named", err)
	}
	four := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: answer("4\n")}
	if err := CheckCPUs(t.Context(), four, "2-3"); err != nil {
		t.Errorf("CheckCPUs(2-3) on 4 cores: %v", err)
	}
	if err := CheckCPUs(t.Context(), four, "0,4"); err == nil || !strings.Contains(err.Error(), "core 4 does not exist, the endpoint has 4 (0-3)") {
		t.Errorf("CheckCPUs(0,4) on 4 cores = %v, want core 4 named", err)
	}
	for _, bad := range []string{"a", "3-1", "1,,2", ""} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) took it", bad)
		}
	}
	if err := (Iperf3{ServerCPUs: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), "server cpuset") {
		t.Errorf("Validate with cpuset x = %v", err)
	}
}

// TestSumLinksBidir: both flows of bidir links are summed, retransmits
// unknown on one link leave the sum's unknown.
func TestSumLinksBidir(t *testing.T) {
	now := time.Now()
	one := func(up, down float64, retr int64) Sample {
		return Sample{ClientStarted: now, Result: &Iperf3Result{Bidir: true, Streams: 1, Seconds: 3,
			Flow: Flow{ReceivedBPS: up, SentBPS: up, Retransmits: retr}, BidirFlow: &Flow{ReceivedBPS: down, SentBPS: down, Retransmits: 2}}}
	}
	s := Sample{Direction: Bidir, ClientCPU: -1, ServerCPU: -1}
	s.sumLinks([]Link{{Name: "a"}, {Name: "b"}}, []Sample{one(100, 80, 3), one(50, 40, -1)})
	r := s.Result
	if s.Failed || r.Flow.ReceivedBPS != 150 || r.BidirFlow == nil || r.BidirFlow.ReceivedBPS != 120 || r.Flow.Retransmits != -1 || r.BidirFlow.Retransmits != 4 || r.Streams != 2 || !r.Bidir {
		t.Errorf("sum %+v (reverse %+v), want 150 up and 120 down, retransmits unknown up and 4 down, 2 streams", r, r.BidirFlow)
	}
}
