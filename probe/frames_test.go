package probe

import (
	"context"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFrameSizes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		payload int
		err     string
	}{
		{"64", 64, 18, ""},
		{"1518", 1518, 1472, ""},
		{"63", 0, 0, "frame size 63: Ethernet frames are 64 to 1518 bytes at an MTU of 1500"},
		{"1519", 0, 0, "64 to 1518 bytes"},
		{"imix", 0, 0, "or imix"}, // ParseFrames takes it
		{"big", 0, 0, `frame size "big": give a whole number`},
	} {
		got, err := ParseFrameSize(tc.in, 1500)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseFrameSize(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || UDPPayload(got) != tc.payload {
			t.Errorf("ParseFrameSize(%q) = %d (payload %d), %v; want %d (payload %d)", tc.in, got, UDPPayload(got), err, tc.want, tc.payload)
		}
	}
	// 64-byte frames at 1 Gbit/s line rate: 1,488,095 frames a second.
	fps := 1e9 / float64(8*(64+20))
	if got := WireBPS(fps, 64); math.Abs(got-1e9) > 1 {
		t.Errorf("WireBPS(%v, 64) = %v, want 1e9", fps, got)
	}
	if got := FramesPerSecond(fps*18*8, 64); math.Abs(got-fps) > 1e-6 {
		t.Errorf("FramesPerSecond = %v, want %v", got, fps)
	}
}

// TestIperf3Trial: a trial runs iperf3 UDP with the frame's payload, the
// asked rate, whole seconds and 64-bit counters, and reads the loss and the
// rate really sent from the report.
func TestIperf3Trial(t *testing.T) {
	r := newScripted(t, "iperf3/server-udp.json", "iperf3/udp.json")
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	trial := Iperf3Trial(Iperf3{StartGrace: time.Millisecond}, client, server, OneFrameSize(1246), false)
	got, err := trial(t.Context(), 100e6, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss != 0.004800307219662059 || got.Offered != 99983451.67965452 {
		t.Errorf("trial = %+v; want the fixture's loss and sent rate", got)
	}
	var argv []string
	for _, c := range r.calls {
		if slices.Contains(c, "-c") {
			argv = c
		}
	}
	for _, want := range [][]string{{"-u"}, {"-l", "1200"}, {"-b", "100000000"}, {"-t", "2"}, {"--udp-counters-64bit"}} {
		if i := slices.Index(argv, want[0]); i < 0 || (len(want) == 2 && (i+1 >= len(argv) || argv[i+1] != want[1])) {
			t.Errorf("client argv %q lacks %q", argv, want)
		}
	}
}

// policed is a Runner whose iperf3 client reports what a policer at
// capacity bits/s of payload would let through of the rate asked (-b).
type policed struct {
	*scripted
	capacity float64
}

// Start starts a server that is done a moment later, after the client.
func (p policed) Start(_ context.Context, argv []string) (Process, error) {
	p.scripted.record(argv)
	proc := &fakeProcess{done: make(chan struct{}), out: p.serverOut}
	time.AfterFunc(20*time.Millisecond, func() { close(proc.done) })
	return proc, nil
}

func (p policed) Run(ctx context.Context, argv []string) ([]byte, error) {
	if !slices.Contains(argv, "-c") {
		return p.scripted.Run(ctx, argv)
	}
	p.scripted.record(argv)
	return policedReport(argv, func(rate float64) float64 { return min(rate, p.capacity) })
}

// policedReport is the iperf3 UDP client report of argv's stream when the
// policer lets pass(rate) of the rate it asks.
func policedReport(argv []string, pass func(rate float64) float64) ([]byte, error) {
	rate, _ := strconv.ParseFloat(argv[slices.Index(argv, "-b")+1], 64)
	length, _ := strconv.Atoi(argv[slices.Index(argv, "-l")+1])
	secs, _ := strconv.ParseFloat(argv[slices.Index(argv, "-t")+1], 64)
	packets := int64(rate * secs / float64(8*length))
	got := pass(rate)
	lost := packets - int64(got*secs/float64(8*length))
	sum := func(bps float64, lost int64) map[string]any {
		return map[string]any{"seconds": secs, "bytes": bps * secs / 8, "bits_per_second": bps, "jitter_ms": 0.01, "lost_packets": lost, "packets": packets,
			"lost_percent": 100 * float64(lost) / float64(packets)}
	}
	rep := map[string]any{"start": map[string]any{"version": "iperf 3.12", "test_start": map[string]any{"protocol": "UDP", "num_streams": 1}},
		"end": map[string]any{"sum_sent": sum(rate, 0), "sum_received": sum(got, lost), "cpu_utilization_percent": map[string]float64{"host_total": 30, "remote_total": 20}}}
	return json.Marshal(rep)
}

// TestNDRMeasure: a search at 64-byte frames against a policer of 100
// Mbit/s of payload is one sample: the rate on the wire (84/18 of the
// payload rate), every trial in the record.
func TestNDRMeasure(t *testing.T) {
	r := policed{newScripted(t, "iperf3/server-udp.json", ""), 100e6}
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	n := NDR{Frames: OneFrameSize(64), Search: RateSearch{Max: 400e6, FinalDuration: 2 * time.Second, Phases: 1}, Iperf3: Iperf3{StartGrace: time.Millisecond}}
	s := n.Measure(t.Context(), client, server, Watch{})
	if s.Failed || s.NDR == nil {
		t.Fatalf("Measure = %+v", s)
	}
	if got := s.NDR.PayloadBPS; got > 100e6 || got < 99.5e6 || s.NDR.Width > 0.005 {
		t.Errorf("NDR %.4g bit/s of payload, width %v; want within 0.5 %% below 100 Mbit/s", got, s.NDR.Width)
	}
	if want := s.NDR.PayloadBPS * 84 / 18; math.Abs(s.BitsPerSecond()-want) > 1 || s.Result.UDP.LostPercent != 0 {
		t.Errorf("sample %v bit/s, loss %v; want the wire rate %v and no loss", s.BitsPerSecond(), s.Result.UDP.LostPercent, want)
	}
	if len(s.NDR.Trials) < 5 || s.NDR.Trials[0].PayloadBPS != 400e6 || s.EndpointCPUBound {
		t.Errorf("trials %+v; want several, the first at the maximum, none generator-limited", s.NDR.Trials)
	}
}

func TestParseBitrate(t *testing.T) {
	for in, want := range map[string]float64{"10G": 10e9, "500M": 500e6, "1.5g": 1.5e9, "64000": 64000} {
		if got, err := ParseBitrate(in); err != nil || got != want {
			t.Errorf("ParseBitrate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "fast", "1G/10"} {
		if got, err := ParseBitrate(in); err == nil {
			t.Errorf("ParseBitrate(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4M": 4 << 20, "1.5K": 1536, "2g": 2 << 30, "65536": 65536, "512k": 512 << 10} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "4 MB", "4T", "-1M", "M"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %v, want an error", in, got)
		}
	}
}

// pingPoliced is policed with a ping that answers from a fixture.
type pingPoliced struct {
	policed
	ping []byte
}

func (p pingPoliced) Start(ctx context.Context, argv []string) (Process, error) {
	if argv[0] != "ping" {
		return p.policed.Start(ctx, argv)
	}
	p.scripted.record(argv)
	proc := &fakeProcess{done: make(chan struct{}), out: p.ping}
	close(proc.done)
	return proc, nil
}

// TestNDRLatencyAtFractions: with ping, a search is followed by a trial at
// 10, 50 and 90 % of its rate, each with a ping beside it, as CSIT
// measures latency; the highest fraction's ping is the sample's latency.
func TestNDRLatencyAtFractions(t *testing.T) {
	r := pingPoliced{policed{newScripted(t, "iperf3/server-udp.json", ""), 100e6}, fixture(t, "ping/iputils-loopback.txt")}
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	n := NDR{Frames: OneFrameSize(64), Search: RateSearch{Max: 400e6, FinalDuration: 2 * time.Second, Phases: 1}, Iperf3: Iperf3{StartGrace: time.Millisecond}, LatencyAt: LatencyFractions}
	s := n.Measure(t.Context(), client, server, Watch{})
	if s.Failed || s.NDR == nil {
		t.Fatalf("Measure = %+v", s)
	}
	if len(s.NDR.Latency) != 3 {
		t.Fatalf("latency %+v (warnings %q): want three fractions", s.NDR.Latency, s.Warnings)
	}
	for i, l := range s.NDR.Latency {
		if l.Fraction != LatencyFractions[i] || math.Abs(l.PayloadBPS-s.NDR.PayloadBPS*l.Fraction) > 1 || l.PingAvgMS <= 0 || l.UDPLossPct != 0 {
			t.Errorf("latency %d = %+v: want %.0f%% of %.4g bit/s, a ping average and no loss below the policer", i, l, 100*LatencyFractions[i], s.NDR.PayloadBPS)
		}
	}
	if s.Ping == nil || s.Ping.Avg <= 0 {
		t.Errorf("the sample's ping = %+v, want the 90 %% trial's", s.Ping)
	}
	var rates []string
	for _, c := range r.calls {
		if slices.Contains(c, "-c") {
			rates = append(rates, c[slices.Index(c, "-b")+1])
		}
	}
	if last := rates[len(rates)-1]; last != strconv.FormatFloat(0.9*s.NDR.PayloadBPS, 'f', 0, 64) {
		t.Errorf("the last client ran at -b %s, want 90 %% of the rate found", last)
	}
}

// sharedPolicer polices all the streams that run at once to capacity
// bits/s of payload in all, each losing the same share: a client waits
// until the trial's other streams have started before it reports.
type sharedPolicer struct {
	policed
	mu     sync.Mutex
	active map[*[]string]float64
}

func (p *sharedPolicer) Run(ctx context.Context, argv []string) ([]byte, error) {
	if !slices.Contains(argv, "-c") {
		return p.scripted.Run(ctx, argv)
	}
	p.scripted.record(argv)
	rate, _ := strconv.ParseFloat(argv[slices.Index(argv, "-b")+1], 64)
	p.mu.Lock()
	p.active[&argv] = rate
	p.mu.Unlock()
	time.Sleep(60 * time.Millisecond)
	p.mu.Lock()
	total := 0.0
	for _, r := range p.active {
		total += r
	}
	p.mu.Unlock()
	time.Sleep(60 * time.Millisecond)
	p.mu.Lock()
	delete(p.active, &argv)
	p.mu.Unlock()
	return policedReport(argv, func(rate float64) float64 { return rate * min(1, p.capacity/total) })
}

// TestNDRMixAndBidir: an IMIX search both ways at once sends six streams
// together (three sizes, each way), in CSIT's 7:4:1 packet shares, half
// the rate each way; against a policer of 100 Mbit/s of payload in all,
// the rate found is that, in frames of IMIX's mean size.
func TestNDRMixAndBidir(t *testing.T) {
	r := &sharedPolicer{policed: policed{newScripted(t, "iperf3/server-udp.json", ""), 100e6}, active: map[*[]string]float64{}}
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	n := NDR{Frames: IMIX, Bidir: true, Search: RateSearch{Max: 400e6, FinalDuration: time.Second, Phases: 1}, Iperf3: Iperf3{StartGrace: time.Millisecond}}
	s := n.Measure(t.Context(), client, server, Watch{})
	if s.Failed || s.NDR == nil {
		t.Fatalf("Measure = %+v", s)
	}
	if got := s.NDR.PayloadBPS; got > 100e6 || got < 99.5e6 || !s.NDR.Bidir || s.NDR.Mix != "imix 64:7 570:4 1518:1" || s.Direction != Bidir {
		t.Errorf("NDR %.4g bit/s of payload, bidir %v, mix %q, direction %s; want within 0.5 %% below 100 Mbit/s, both ways, IMIX", got, s.NDR.Bidir, s.NDR.Mix, s.Direction)
	}
	if want := s.NDR.PayloadBPS / (8 * IMIX.MeanPayload()); math.Abs(s.NDR.FPS-want) > 1e-6 {
		t.Errorf("%v frames/s, want %v at IMIX's mean payload", s.NDR.FPS, want)
	}
	// The last trial's six streams: per size and way, packets 7:4:1.
	var last [][]string
	for _, c := range r.calls {
		if slices.Contains(c, "-c") {
			last = append(last, c)
		}
	}
	last = last[len(last)-6:]
	pps := map[string]float64{}
	reverse := 0
	for _, c := range last {
		rate, _ := strconv.ParseFloat(c[slices.Index(c, "-b")+1], 64)
		length, _ := strconv.Atoi(c[slices.Index(c, "-l")+1])
		way := "up"
		if slices.Contains(c, "-R") {
			way = "down"
			reverse++
		}
		pps[way+strconv.Itoa(length)] = rate / float64(8*length)
	}
	if reverse != 3 || len(pps) != 6 {
		t.Fatalf("the last trial's streams %q: want three sizes each way", last)
	}
	for _, way := range []string{"up", "down"} {
		a, b, c := pps[way+"18"], pps[way+"524"], pps[way+"1472"]
		if math.Abs(a/c-7) > 0.01 || math.Abs(b/c-4) > 0.01 {
			t.Errorf("%s: packets a second %v, %v, %v; want 7:4:1", way, a, b, c)
		}
	}
	if math.Abs(pps["up18"]-pps["down18"]) > 1 {
		t.Errorf("up %v and down %v packets a second of 64-byte frames: want the same each way", pps["up18"], pps["down18"])
	}
}

// lateServer is timed with its third server 150 ms late to listen.
type lateServer struct {
	timed
	n atomic.Int32
}

func (r *lateServer) Start(ctx context.Context, argv []string) (Process, error) {
	if r.n.Add(1) == 3 {
		time.Sleep(150 * time.Millisecond)
	}
	return r.timed.Start(ctx, argv)
}

// TestIperf3TrialArmed: an IMIX trial's streams are armed first, every
// server listening (one 150 ms late), then fired together, and the trial
// keeps how far apart their clients launched.
func TestIperf3TrialArmed(t *testing.T) {
	c := &clock{}
	r := &lateServer{timed: timed{policed: policed{newScripted(t, "iperf3/server-udp.json", ""), 100e6}, c: c}}
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	res, err := Iperf3Trial(Iperf3{StartGrace: time.Millisecond}, client, server, IMIX, false)(t.Context(), 50e6, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.servers) != 3 || len(c.clients) != 3 {
		t.Fatalf("servers %v, clients %v: want IMIX's three streams", c.servers, c.clients)
	}
	last := slices.MaxFunc(c.servers, func(a, b time.Time) int { return a.Compare(b) })
	for _, cl := range c.clients {
		if cl.Before(last) {
			t.Errorf("a stream's client ran %v before the last server listened: not armed first", last.Sub(cl))
		}
	}
	if res.StartSkew < 0 || res.StartSkew > MaxStartSkew {
		t.Errorf("start skew %v: want the streams fired together", res.StartSkew)
	}
}

// dropping is policed with a receiver that drops add datagrams for a
// full socket buffer whenever a client asked more than drops bits/s: its
// /proc/net/snmp counts them.
type dropping struct {
	policed
	drops float64
	add   int64
	mu    sync.Mutex
	last  float64 // the rate the last client asked; 0 once counted
	count int64
}

func (d *dropping) Run(ctx context.Context, argv []string) ([]byte, error) {
	if len(argv) == 2 && argv[0] == "cat" && argv[1] == "/proc/net/snmp" {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.last > d.drops {
			d.count += d.add
		}
		d.last = 0
		return []byte("Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 100 0 " + strconv.FormatInt(d.count, 10) + " 100 " + strconv.FormatInt(d.count, 10) + " 0\n"), nil
	}
	if slices.Contains(argv, "-c") {
		rate, _ := strconv.ParseFloat(argv[slices.Index(argv, "-b")+1], 64)
		d.mu.Lock()
		d.last = rate
		d.mu.Unlock()
	}
	return d.policed.Run(ctx, argv)
}

// TestNDRReceiverDrops: a receiver that loses what it drops for a full
// socket buffer above 60 Mbit/s makes those trials the endpoints' limit,
// not the firewall's: the search is flagged, its warning names the socket
// buffer, the trials keep the drops. A few drops beside a firewall's much
// larger loss (another socket of the host's) do not.
func TestNDRReceiverDrops(t *testing.T) {
	measure := func(capacity float64, add int64) Sample {
		r := &dropping{policed: policed{newScripted(t, "iperf3/server-udp.json", ""), capacity}, drops: 60e6, add: add}
		client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
		n := NDR{Frames: OneFrameSize(512), Search: RateSearch{Max: 400e6, FinalDuration: time.Second, Phases: 1}, Iperf3: Iperf3{StartGrace: time.Millisecond}}
		s := n.Measure(t.Context(), client, server, Watch{})
		if s.Failed || s.NDR == nil {
			t.Fatalf("Measure = %+v", s)
		}
		return s
	}
	// The receiver's 60 Mbit/s (the policer's loss is its drops).
	s := measure(60e6, 1<<40)
	if got := s.NDR.PayloadBPS; got > 60e6 || got < 59e6 || !s.NDR.Limited || !s.EndpointCPUBound {
		t.Errorf("NDR %.4g bit/s, limited %v; want just below the receiver's 60 Mbit/s, flagged", got, s.NDR.Limited)
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "socket buffer") && strings.Contains(w, "window: 4M") }) {
		t.Errorf("warnings %q: want the receiver's socket buffer named", s.Warnings)
	}
	if !slices.ContainsFunc(s.NDR.Trials, func(tr TrialJSON) bool { return tr.ReceiverDrops > 0 && tr.Limited }) {
		t.Errorf("trials %+v: want those above 60 Mbit/s limited with their drops", s.NDR.Trials)
	}
	// A firewall that loses above 100 Mbit/s, 25 drops of another socket.
	s = measure(100e6, 25)
	if got := s.NDR.PayloadBPS; got > 100e6 || got < 99.5e6 || s.NDR.Limited {
		t.Errorf("NDR %.4g bit/s, limited %v; want the firewall's 100 Mbit/s, not flagged for 25 stray drops", got, s.NDR.Limited)
	}
}
