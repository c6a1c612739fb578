package probe

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
)

// RFC2544FrameSizes are RFC 2544's Ethernet frame sizes (section 9.1), in
// bytes with the header and FCS.
var RFC2544FrameSizes = []int{64, 128, 256, 512, 1024, 1280, 1518}

// Ethernet and IPv4/UDP overheads, in bytes.
const (
	ethernetOverhead = 14 + 4 // header and FCS: in the frame size
	ethernetGap      = 8 + 12 // preamble and inter-frame gap: on the wire, not in the frame size
	udpIPv4Headers   = 20 + 8 // what a UDP datagram's payload is short of an IPv4 packet
	frameHeaders     = ethernetOverhead + udpIPv4Headers
)

// ParseFrameSize reads an Ethernet frame size in bytes, 64 up to the
// largest frame an MTU of mtu bytes carries (1518 at 1500).
func ParseFrameSize(s string, mtu int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("frame size %q: give a whole number of bytes, such as 64 or 1518, or imix", s)
	}
	if top := mtu + ethernetOverhead; n < 64 || n > top {
		return 0, fmt.Errorf("frame size %d: Ethernet frames are 64 to %d bytes at an MTU of %d", n, top, mtu)
	}
	return n, nil
}

// Frames is what a rate search's trials send: frames of one size, or a mix
// of sizes, one UDP stream per size, all at once, in shares of packets.
type Frames struct {
	Name  string // "64", or "imix"
	Sizes []FrameShare
}

// FrameShare is one size of a mix and its weight in packets.
type FrameShare struct{ Frame, Weight int }

// IMIX is the simple Internet mix of 64-, 570- and 1518-byte Ethernet
// frames, 7:4:1 by packets (FD.io CSIT's IMIX_v4_1; 340.3 bytes a frame
// on average).
var IMIX = Frames{Name: "imix", Sizes: []FrameShare{{64, 7}, {570, 4}, {1518, 1}}}

// OneFrameSize is frames of n bytes only.
func OneFrameSize(n int) Frames {
	return Frames{Name: strconv.Itoa(n), Sizes: []FrameShare{{n, 1}}}
}

// ParseFrames reads a frame size (ParseFrameSize) or imix.
func ParseFrames(s string, mtu int) (Frames, error) {
	if strings.EqualFold(strings.TrimSpace(s), "imix") {
		for _, sz := range IMIX.Sizes {
			if sz.Frame > mtu+ethernetOverhead {
				return Frames{}, fmt.Errorf("frame size imix: its %d-byte frames need an MTU of %d, not %d", sz.Frame, sz.Frame-ethernetOverhead, mtu)
			}
		}
		return IMIX, nil
	}
	n, err := ParseFrameSize(s, mtu)
	if err != nil {
		return Frames{}, err
	}
	return OneFrameSize(n), nil
}

// String names the frames in a sentence: "64-byte frames", "IMIX frames
// (64, 570 and 1518 bytes, 7:4:1)".
func (f Frames) String() string {
	if len(f.Sizes) == 1 {
		return fmt.Sprintf("%d-byte frames", f.Sizes[0].Frame)
	}
	var sizes, weights []string
	for _, s := range f.Sizes {
		sizes, weights = append(sizes, strconv.Itoa(s.Frame)), append(weights, strconv.Itoa(s.Weight))
	}
	return fmt.Sprintf("%s frames (%s bytes, %s)", strings.ToUpper(f.Name), strings.Join(sizes, ", "), strings.Join(weights, ":"))
}

// mean is g's mean over the frames, weighted by packets.
func (f Frames) mean(g func(frame int) float64) float64 {
	var sum, w float64
	for _, s := range f.Sizes {
		sum += float64(s.Weight) * g(s.Frame)
		w += float64(s.Weight)
	}
	return sum / w
}

// MeanFrame is the frames' mean size in bytes.
func (f Frames) MeanFrame() float64 { return f.mean(func(n int) float64 { return float64(n) }) }

// MeanPayload is the frames' mean UDP payload in bytes.
func (f Frames) MeanPayload() float64 {
	return f.mean(func(n int) float64 { return float64(UDPPayload(n)) })
}

// FramesPerSecond is the frame rate that carries payloadBPS bits/s of UDP
// payload in these frames.
func (f Frames) FramesPerSecond(payloadBPS float64) float64 {
	return payloadBPS / (8 * f.MeanPayload())
}

// WireBPS is the bits/s these frames take on the wire at fps frames a
// second, preamble and gap included.
func (f Frames) WireBPS(fps float64) float64 {
	return fps * 8 * f.mean(func(n int) float64 { return float64(n + ethernetGap) })
}

// payloadShare is the share of the payload rate the frames of size i
// carry: its packets' share times their payload, over the mean.
func (f Frames) payloadShare(i int) float64 {
	var w float64
	for _, s := range f.Sizes {
		w += float64(s.Weight)
	}
	return float64(f.Sizes[i].Weight) / w * float64(UDPPayload(f.Sizes[i].Frame)) / f.MeanPayload()
}

// UDPPayload is the UDP payload (iperf3 -l) that makes an IPv4 datagram
// fill an Ethernet frame of frame bytes: 18 at 64, 1472 at 1518.
func UDPPayload(frame int) int { return frame - frameHeaders }

// FramesPerSecond is the frame rate that carries payloadBPS bits/s of UDP
// payload in frames of frame bytes.
func FramesPerSecond(payloadBPS float64, frame int) float64 {
	return payloadBPS / float64(8*UDPPayload(frame))
}

// WireBPS is the bits/s frames of frame bytes take on the wire at fps
// frames a second, preamble and gap included: what a link's speed counts.
func WireBPS(fps float64, frame int) float64 { return fps * float64(8*(frame+ethernetGap)) }

// Iperf3Trial is a rate search's trial with iperf3 UDP: for each size of
// frames (and, with bidir, each direction) a stream of datagrams that fill
// those frames, all started together, whose payload rates add up to the
// asked rate in the mix's shares (half of it each way with bidir, as RFC
// 2544's bidirectional test offers the same rate both ways), for the
// trial's duration (whole seconds, at least one), with 64-bit packet
// counters. The loss is the streams' lost packets over their packets; a
// sender's CPU at its limit, or datagrams the receiving host dropped for
// a full socket buffer that make up at least half the loss, make the
// trial generator-bound (the endpoints, not the firewall, lost them); a
// stream that fails is an error.
func Iperf3Trial(p Iperf3, client, server Endpoint, frames Frames, bidir bool) Trial {
	dirs := []Direction{p.Direction}
	if bidir {
		dirs = []Direction{Up, Down}
	}
	return func(ctx context.Context, rate float64, d time.Duration) (TrialResult, error) {
		type stream struct {
			q Iperf3
			s Sample
		}
		var streams []*stream
		for _, dir := range dirs {
			for i, sz := range frames.Sizes {
				q := p
				q.Direction, q.UDP, q.Counters64 = dir, true, true
				q.Length = UDPPayload(sz.Frame)
				q.Bitrate = strconv.FormatFloat(rate*frames.payloadShare(i)/float64(len(dirs)), 'f', 0, 64)
				q.Duration = max(time.Second, d.Round(time.Second))
				streams = append(streams, &stream{q: q})
			}
		}
		receivers := map[string]Endpoint{}
		for _, dir := range dirs {
			if dir == Down {
				receivers["client"] = client
			} else {
				receivers["server"] = server
			}
		}
		before := map[string]int64{}
		for side, e := range receivers {
			if n, ok := rcvbufErrors(ctx, e); ok {
				before[side] = n
			}
		}
		// Every stream's server listens before any client sends, as links
		// run at once do (MeasureLinks): the streams overlap for the whole
		// trial, not from the slowest server's start.
		arm := newBarrier(len(streams))
		var wg sync.WaitGroup
		for _, st := range streams {
			st.q.arm = arm.seat()
			wg.Go(func() {
				defer st.q.arm.arrive(ctx) // a stream that fails early lets the others go
				st.s = st.q.Run(ctx, client, server)
			})
		}
		wg.Wait()
		var res TrialResult
		for side, n := range before {
			if after, ok := rcvbufErrors(ctx, receivers[side]); ok && after > n {
				res.ReceiverDrops += after - n
			}
		}
		var lost, packets int64
		var lossPct float64
		var first, last time.Time
		for _, st := range streams {
			if c := st.s.ClientStarted; !c.IsZero() {
				if first.IsZero() || c.Before(first) {
					first = c
				}
				if c.After(last) {
					last = c
				}
			}
			what := fmt.Sprintf("trial at %.4g bit/s of %s", rate, frames)
			if len(streams) > 1 {
				what += fmt.Sprintf(", its %s stream of %d-byte datagrams", st.q.Direction, st.q.Length)
			}
			if st.s.Failed {
				return TrialResult{}, fmt.Errorf("%s: %s", what, st.s.Reason)
			}
			if st.s.Result.UDP == nil {
				return TrialResult{}, fmt.Errorf("%s: the iperf3 report has no loss figures", what)
			}
			u := st.s.Result.UDP
			res.Offered += st.s.Result.Flow.SentBPS
			res.GeneratorBound = res.GeneratorBound || st.s.EndpointCPUBound
			lost, packets = lost+u.LostPackets, packets+u.Packets
			lossPct = max(lossPct, u.LostPercent)
		}
		res.StartSkew = last.Sub(first)
		res.Loss = lossPct
		if packets > 0 {
			res.Loss = 100 * float64(lost) / float64(packets)
		}
		// The receiving host's drops count for the whole host: they make
		// the trial the endpoints' only where they explain at least half
		// of what the trial lost, not where other sockets dropped a few.
		if res.ReceiverDrops > 0 && lost > 0 && 2*res.ReceiverDrops >= lost {
			res.GeneratorBound = true
		}
		return res, nil
	}
}

// NDR is a rate search at one frame size with iperf3 UDP, one direction:
// the highest rate whose loss is at most the search's tolerance.
type NDR struct {
	Frames Frames     // Ethernet frame sizes
	Bidir  bool       // both directions at once, half the rate each (RFC 2544's bidirectional test)
	Search RateSearch // its rates in bits/s of UDP payload, as iperf3 -b takes them
	Iperf3 Iperf3     // the trials' settings besides rate, length and duration
	// Packets, when set, sends the trials with a packet generator instead
	// of iperf3 (one direction: Iperf3.Direction's sender to its
	// receiver).
	Packets PacketGenerator
	// LatencyAt are fractions of the found rate (0.1, 0.5, 0.9) at which,
	// once the search is done, a trial of the final duration runs with a
	// ping beside it, as FD.io CSIT measures latency at fractions of the
	// PDR; none: no latency.
	LatencyAt []float64
}

// LatencyFractions are the fractions of the found rate latency is
// measured at when a search asks for it: CSIT's 10, 50 and 90 %.
var LatencyFractions = []float64{0.1, 0.5, 0.9}

// LatencyJSON is the latency at one fraction of a search's rate.
type LatencyJSON struct {
	Fraction    float64 `json:"fraction"`
	PayloadBPS  float64 `json:"payload_bps"`
	UDPLossPct  float64 `json:"udp_loss_percent"`
	PingAvgMS   float64 `json:"ping_avg_ms"`
	PingMinMS   float64 `json:"ping_min_ms"`
	PingMaxMS   float64 `json:"ping_max_ms"`
	PingLossPct float64 `json:"ping_loss_percent"`
}

// NDRResult is a search's outcome at one frame size, with every trial.
type NDRResult struct {
	Frame       int         `json:"frame"`               // the size; 0 for a mix
	Mix         string      `json:"mix,omitempty"`       // a mix: "imix 64:7 570:4 1518:1"
	MeanFrame   float64     `json:"mean_frame"`          // bytes, weighted by packets
	Bidir       bool        `json:"bidir,omitempty"`     // rates are both directions' sum
	Generator   string      `json:"generator,omitempty"` // trafgen, pkt-gen; "" is iperf3
	Tolerance   float64     `json:"loss_tolerance_percent"`
	FPS         float64     `json:"frames_per_second"` // at the found rate
	WireBPS     float64     `json:"wire_bps"`          // the same on the wire, preamble and gap included
	PayloadBPS  float64     `json:"payload_bps"`       // the same as iperf3 -b
	UpperBPS    float64     `json:"upper_payload_bps"` // the lowest rate that failed
	Width       float64     `json:"width"`             // of the final interval, relative
	AtMax       bool        `json:"at_max"`            // the maximum passed: the firewall was not the limit
	Limited     bool        `json:"generator_limited"` // the generator, not the firewall, may have set the figure
	Incomplete  string      `json:"incomplete,omitempty"`
	TrialsTotal string      `json:"trials_time"`
	Trials      []TrialJSON `json:"trials"`
	// Latency is the latency at fractions of the found rate (NDR.LatencyAt).
	Latency []LatencyJSON `json:"latency,omitempty"`
}

// TrialJSON is one trial as a sample records it.
type TrialJSON struct {
	PayloadBPS float64 `json:"payload_bps"`
	OfferedBPS float64 `json:"offered_payload_bps"`
	LossPct    float64 `json:"loss_percent"`
	Seconds    float64 `json:"seconds"`
	Pass       bool    `json:"pass"`
	Limited    bool    `json:"generator_limited"`
	// ReceiverDrops are datagrams the receiving host dropped for a full
	// socket buffer during the trial.
	ReceiverDrops int64 `json:"receiver_drops,omitempty"`
	// StartSkewMS is how far apart the trial's streams (an IMIX's sizes,
	// both ways) were launched, in milliseconds.
	StartSkewMS float64 `json:"start_skew_ms,omitempty"`
}

// Measure runs the search between client and server, watching the DUT as w
// asks, and returns it as one sample: its throughput is the found rate on
// the wire, its loss the loss of the trial that found it. A search the
// generator may have bounded is flagged EndpointCPUBound with a warning
// that says so; one that cannot run is a failed Sample.
func (n NDR) Measure(ctx context.Context, client, server Endpoint, w Watch) Sample {
	dir := n.Iperf3.Direction
	if n.Bidir {
		dir = Bidir
	}
	s := Sample{Probe: "ndr", Direction: dir, UDP: true, Length: int(math.Round(n.Frames.MeanPayload())), Parallel: 1, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	defer func() { s.Elapsed = time.Since(s.Started) }()
	w.Ping = false // latency is measured after the search, at fractions of its rate (LatencyAt)
	trial := n.trial(client, server)
	stop := startWatch(ctx, client, server, Iperf3{Duration: n.Search.FinalDuration}, w)
	res, err := n.Search.Run(ctx, trial)
	stop(&s)
	r := NDRResult{MeanFrame: n.Frames.MeanFrame(), Bidir: n.Bidir, Generator: n.generator(), Tolerance: res.Tolerance, PayloadBPS: res.Rate, UpperBPS: res.Upper, Width: res.Width, AtMax: res.AtMax,
		Limited: res.Limited, Incomplete: res.Incomplete, TrialsTotal: res.Elapsed.String(), Trials: []TrialJSON{}}
	if len(n.Frames.Sizes) == 1 {
		r.Frame = n.Frames.Sizes[0].Frame
	} else {
		r.Mix = n.Frames.Name
		for _, sz := range n.Frames.Sizes {
			r.Mix += fmt.Sprintf(" %d:%d", sz.Frame, sz.Weight)
		}
	}
	r.FPS = n.Frames.FramesPerSecond(res.Rate)
	r.WireBPS = n.Frames.WireBPS(r.FPS)
	loss := 0.0
	var drops int64
	for _, t := range res.Trials {
		if t.Limited {
			drops += t.ReceiverDrops
		}
		r.Trials = append(r.Trials, TrialJSON{PayloadBPS: t.Rate, OfferedBPS: t.Offered, LossPct: t.Loss, Seconds: t.Duration.Seconds(), Pass: t.Pass, Limited: t.Limited, ReceiverDrops: t.ReceiverDrops,
			StartSkewMS: float64(t.StartSkew) / float64(time.Millisecond)})
		if t.Pass && t.Rate == res.Rate {
			loss = t.Loss
		}
	}
	s.NDR = &r
	switch {
	case err != nil:
		s.Failed, s.Reason = true, err.Error()
		return s
	case res.Rate == 0:
		s.Failed, s.Reason = true, "rate search found no rate that passes"
		return s
	}
	if res.Incomplete != "" {
		s.Warnings = append(s.Warnings, "rate search: "+res.Incomplete)
	}
	if res.Limited {
		s.EndpointCPUBound = true
		why := "the generator did not offer some rates asked near the result, or its CPU was saturated"
		switch {
		case drops > 0 && n.Packets != nil:
			why = fmt.Sprintf("the receiving host's interface dropped %d frames (rx_dropped, rx_missed_errors) in the trials flagged, or %s fell short of the rate", drops, n.Packets.Name())
		case drops > 0:
			why = fmt.Sprintf("the receiving host dropped %d datagrams its socket buffer (%s) could not hold in the trials flagged, or the generator fell short: a larger window gives it room (window: 4M, say, where the receiver's net.core.rmem_max grants at least half of it)", drops, cmp.Or(n.Iperf3.Window, "the system's default; no window set"))
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s: the figure may measure the endpoints, not the firewall", n.Frames, why))
	}
	if res.AtMax {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s: nothing beyond the tolerance was lost at the highest rate offered (%.4g bit/s): the firewall's limit is above it", n.Frames, res.Rate))
	}
	s.Result = &Iperf3Result{Protocol: "UDP", Flow: Flow{ReceivedBPS: r.WireBPS, SentBPS: r.WireBPS, Retransmits: -1}, UDP: &UDPStats{LostPercent: loss}}
	n.measureLatency(ctx, client, server, trial, res.Rate, &s)
	return s
}

// PacketGenerator sends a rate search's trials as whole frames from the
// direction's sender, counted at the receiver's interface: Trafgen from a
// Linux sender, PktGen from a FreeBSD one.
type PacketGenerator interface {
	// Name is the generator as results record it ("trafgen").
	Name() string
	// Check makes sure the generator runs and the path carries its
	// frames; it returns the tool's version line.
	Check(ctx context.Context, sender, receiver Endpoint) (string, error)
	// Trial is the search's trial from sender to receiver.
	Trial(sender, receiver Endpoint, frames Frames) Trial
}

// generator names the trials' generator as a result records it: "" for
// iperf3, the default.
func (n NDR) generator() string {
	if n.Packets != nil {
		return n.Packets.Name()
	}
	return ""
}

// trial is the search's trial: iperf3's, or trafgen's from the
// direction's sender.
func (n NDR) trial(client, server Endpoint) Trial {
	if n.Packets == nil {
		return Iperf3Trial(n.Iperf3, client, server, n.Frames, n.Bidir)
	}
	if n.Iperf3.Direction == Down {
		return n.Packets.Trial(server, client, n.Frames)
	}
	return n.Packets.Trial(client, server, n.Frames)
}

// measureLatency runs a trial at each fraction of rate with a ping beside
// it and keeps what it measured in the sample's search; the highest
// fraction's ping is the sample's latency under load.
func (n NDR) measureLatency(ctx context.Context, client, server Endpoint, trial Trial, rate float64, s *Sample) {
	d := max(time.Second, n.Search.FinalDuration.Round(time.Second))
	for _, f := range n.LatencyAt {
		var t Sample
		stop := startWatch(ctx, client, server, Iperf3{Duration: d}, Watch{Ping: true, PingInterval: 100 * time.Millisecond})
		res, err := trial(ctx, rate*f, d)
		stop(&t)
		if err == nil && t.Ping == nil {
			err = fmt.Errorf("no ping figures (%s)", strings.Join(t.Warnings, "; "))
		}
		if err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s: latency at %.0f%% of the rate not measured: %v", n.Frames, 100*f, err))
			continue
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		s.NDR.Latency = append(s.NDR.Latency, LatencyJSON{Fraction: f, PayloadBPS: rate * f, UDPLossPct: res.Loss,
			PingAvgMS: ms(t.Ping.Avg), PingMinMS: ms(t.Ping.Min), PingMaxMS: ms(t.Ping.Max), PingLossPct: t.Ping.LossPercent})
		s.Ping = t.Ping
	}
}

// ParseBytes parses a size as iperf3's -w takes it: a number with an
// optional K, M or G of 1024, 1024² or 1024³ bytes.
//
// upstream: esnet/iperf@e61aaf8c95df956cefbc54fab7b3d78914664180 src/units.c:72 — unit_atof's `KILO_UNIT = 1024.0` (sizes; rates use 1000)
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if !windowRE.MatchString(t) {
		return 0, fmt.Errorf("size %q: write a number with an optional K, M or G, such as 4M", s)
	}
	t, mult := unitSuffix(t, 1024)
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %v", s, err)
	}
	return int64(v * mult), nil
}

// unitSuffix splits a number's K, M, G or T suffix off, as powers of k.
func unitSuffix(t string, k float64) (string, float64) {
	if t == "" {
		return t, 1
	}
	if i := strings.IndexByte("kmgt", t[len(t)-1]|0x20); i >= 0 {
		return t[:len(t)-1], math.Pow(k, float64(i+1))
	}
	return t, 1
}

// ParseBitrate reads a rate as iperf3 -b takes it, "500M" or "1.5G" (K, M,
// G and T are powers of 1000, as iperf3 counts rates), in bits/s.
func ParseBitrate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if !bitrateRE.MatchString(t) || strings.Contains(t, "/") {
		return 0, fmt.Errorf("rate %q: write a number with an optional K, M, G or T suffix, such as 10G", s)
	}
	t, mult := unitSuffix(t, 1000)
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) {
		return 0, fmt.Errorf("rate %q: give a rate above zero, such as 10G", s)
	}
	return v * mult, nil
}
