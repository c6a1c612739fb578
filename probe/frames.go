package probe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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
// largest frame an MTU of mtu bytes carries (1518 at 1500). IMIX, a mix of
// sizes sent as several streams at once, is refused: it is not built yet.
func ParseFrameSize(s string, mtu int) (int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "imix") {
		return 0, fmt.Errorf("frame size imix: a mix of sizes needs several UDP streams at once, which fwab does not send yet; list the sizes (such as 64, 576, 1518)")
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("frame size %q: give a whole number of bytes, such as 64 or 1518", s)
	}
	if top := mtu + ethernetOverhead; n < 64 || n > top {
		return 0, fmt.Errorf("frame size %d: Ethernet frames are 64 to %d bytes at an MTU of %d", n, top, mtu)
	}
	return n, nil
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

// Iperf3Trial is a rate search's trial with iperf3 UDP: datagrams that fill
// frames of frame bytes, sent at the asked rate of UDP payload bits/s for
// the trial's duration (whole seconds, at least one), with 64-bit packet
// counters. The sender's CPU at its limit makes the trial
// generator-bound; a probe that fails is an error.
func Iperf3Trial(p Iperf3, client, server Endpoint, frame int) Trial {
	return func(ctx context.Context, rate float64, d time.Duration) (TrialResult, error) {
		q := p
		q.UDP, q.Counters64 = true, true
		q.Length = UDPPayload(frame)
		q.Bitrate = strconv.FormatFloat(rate, 'f', 0, 64)
		q.Duration = max(time.Second, d.Round(time.Second))
		s := q.Run(ctx, client, server)
		if s.Failed {
			return TrialResult{}, fmt.Errorf("trial at %.4g bit/s of %d-byte frames: %s", rate, frame, s.Reason)
		}
		if s.Result.UDP == nil {
			return TrialResult{}, fmt.Errorf("trial at %.4g bit/s of %d-byte frames: the iperf3 report has no loss figures", rate, frame)
		}
		return TrialResult{Offered: s.Result.Flow.SentBPS, Loss: s.Result.UDP.LostPercent, GeneratorBound: s.EndpointCPUBound}, nil
	}
}

// NDR is a rate search at one frame size with iperf3 UDP, one direction:
// the highest rate whose loss is at most the search's tolerance.
type NDR struct {
	Frame  int        // Ethernet frame size, bytes
	Search RateSearch // its rates in bits/s of UDP payload, as iperf3 -b takes them
	Iperf3 Iperf3     // the trials' settings besides rate, length and duration
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
	Frame       int         `json:"frame"`
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
}

// Measure runs the search between client and server, watching the DUT as w
// asks, and returns it as one sample: its throughput is the found rate on
// the wire, its loss the loss of the trial that found it. A search the
// generator may have bounded is flagged EndpointCPUBound with a warning
// that says so; one that cannot run is a failed Sample.
func (n NDR) Measure(ctx context.Context, client, server Endpoint, w Watch) Sample {
	s := Sample{Probe: "ndr", Direction: n.Iperf3.Direction, UDP: true, Length: UDPPayload(n.Frame), Parallel: 1, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	defer func() { s.Elapsed = time.Since(s.Started) }()
	w.Ping = false // latency is measured after the search, at fractions of its rate (LatencyAt)
	stop := startWatch(ctx, client, server, Iperf3{Duration: n.Search.FinalDuration}, w)
	res, err := n.Search.Run(ctx, Iperf3Trial(n.Iperf3, client, server, n.Frame))
	stop(&s)
	r := NDRResult{Frame: n.Frame, Tolerance: res.Tolerance, PayloadBPS: res.Rate, UpperBPS: res.Upper, Width: res.Width, AtMax: res.AtMax,
		Limited: res.Limited, Incomplete: res.Incomplete, TrialsTotal: res.Elapsed.String(), Trials: []TrialJSON{}}
	r.FPS = FramesPerSecond(res.Rate, n.Frame)
	r.WireBPS = WireBPS(r.FPS, n.Frame)
	loss := 0.0
	for _, t := range res.Trials {
		r.Trials = append(r.Trials, TrialJSON{PayloadBPS: t.Rate, OfferedBPS: t.Offered, LossPct: t.Loss, Seconds: t.Duration.Seconds(), Pass: t.Pass, Limited: t.Limited})
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
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d-byte frames: the generator did not offer some rates asked near the result, or its CPU was saturated: the figure may measure the generator, not the firewall", n.Frame))
	}
	if res.AtMax {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d-byte frames: nothing beyond the tolerance was lost at the highest rate offered (%.4g bit/s): the firewall's limit is above it", n.Frame, res.Rate))
	}
	s.Result = &Iperf3Result{Protocol: "UDP", Flow: Flow{ReceivedBPS: r.WireBPS, SentBPS: r.WireBPS, Retransmits: -1}, UDP: &UDPStats{LostPercent: loss}}
	n.measureLatency(ctx, client, server, res.Rate, &s)
	return s
}

// measureLatency runs a trial at each fraction of rate with a ping beside
// it and keeps what it measured in the sample's search; the highest
// fraction's ping is the sample's latency under load.
func (n NDR) measureLatency(ctx context.Context, client, server Endpoint, rate float64, s *Sample) {
	for _, f := range n.LatencyAt {
		q := n.Iperf3
		q.UDP, q.Counters64 = true, true
		q.Length = UDPPayload(n.Frame)
		q.Bitrate = strconv.FormatFloat(rate*f, 'f', 0, 64)
		q.Duration = max(time.Second, n.Search.FinalDuration.Round(time.Second))
		t := q.Measure(ctx, client, server, Watch{Ping: true, PingInterval: 100 * time.Millisecond})
		if t.Failed || t.Ping == nil || t.Result == nil || t.Result.UDP == nil {
			reason := t.Reason
			if reason == "" {
				reason = "no ping or loss figures"
			}
			s.Warnings = append(s.Warnings, fmt.Sprintf("%d-byte frames: latency at %.0f%% of the rate not measured: %s", n.Frame, 100*f, reason))
			continue
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
		s.NDR.Latency = append(s.NDR.Latency, LatencyJSON{Fraction: f, PayloadBPS: rate * f, UDPLossPct: t.Result.UDP.LostPercent,
			PingAvgMS: ms(t.Ping.Avg), PingMinMS: ms(t.Ping.Min), PingMaxMS: ms(t.Ping.Max), PingLossPct: t.Ping.LossPercent})
		s.Ping = t.Ping
	}
}

// ParseBitrate reads a rate as iperf3 -b takes it, "500M" or "1.5G" (K, M,
// G and T are powers of 1000, as iperf3 counts rates), in bits/s.
func ParseBitrate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if !bitrateRE.MatchString(t) || strings.Contains(t, "/") {
		return 0, fmt.Errorf("rate %q: write a number with an optional K, M, G or T suffix, such as 10G", s)
	}
	mult := 1.0
	switch t[len(t)-1] {
	case 'k', 'K':
		mult = 1e3
	case 'm', 'M':
		mult = 1e6
	case 'g', 'G':
		mult = 1e9
	case 't', 'T':
		mult = 1e12
	}
	if mult != 1 {
		t = t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || !(v > 0) {
		return 0, fmt.Errorf("rate %q: give a rate above zero, such as 10G", s)
	}
	return v * mult, nil
}
