// Package reporttest fills a results database with synthetic runs of known
// effects, for tests of reports and comparisons: what each point costs is
// set by hand, the noise comes from a seeded generator.
package reporttest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// Run describes a synthetic run.
type Run struct {
	Target   string
	Testbed  string // name@fingerprint; "" leaves it out
	Lab      string // the target's lab profile (fwapi.Target.Lab); "" for none
	Firmware string
	Spec     string // matrix spec text stored with the run (axes order, baseline)
	Seed     uint64
	Repeats  int       // samples per point and probe
	Noise    float64   // relative standard deviation of throughput, e.g. 0.03
	Uniform  bool      // noise uniform in ±Noise instead of normal
	Slowdown float64   // applied to every point: 0.10 is 10 % slower
	Created  time.Time // default 2026-11-30 04:00 UTC
	Probes   []Probe
	Points   []Point
	Series   bool // keep an iperf3 client report with per-second intervals in Raw
	// RoundNoise is the relative standard deviation of a throughput factor
	// every point of a round shares: drift over the run, which two runs
	// cannot tell from an effect and pairing by round cancels.
	RoundNoise float64
	// Trend is a slow drift: throughput changes by Trend (0.01: 1 %) of
	// its level per round, counted from round TrendFrom (a run measured
	// after another continues its trend). The drift check is the round
	// after the last.
	Trend     float64
	TrendFrom int
	// EndBaseline adds the run's re-measurement of point 0 at its end
	// (store.DriftRound), EndDrift slower than point 0's regular rounds
	// (0.06 is 6 % slower), without noise unless EndNoisy.
	EndBaseline bool
	EndDrift    float64
	EndNoisy    bool
}

// Probe is a probe run at every point.
type Probe struct {
	Name, Direction string
	Mbps            float64 // throughput at a point with Factor 1
	// UDP probes keep a client report with packet counts (for the packet
	// rate) and record loss and jitter; Length is the datagram payload.
	UDP    bool
	Length int
	Jitter float64 // ms at a point with Factor 1
	Ping   float64 // ms of latency under load at a point with PingFactor 1; 0: no ping
	// Connects makes it a connect probe: new connections a second at a
	// point with Factor 1, Mbps unused.
	Connects float64
}

// Point is one configuration and its known effect.
type Point struct {
	Knobs       map[string]string
	Factor      float64 // throughput relative to the probe's Mbps; 0 means 1
	CPU         float64 // DUT CPU %; 0 leaves DUT metrics out
	Temp        float64 // °C; 0 when unknown
	Power       float64 // W; 0 leaves power out
	Retransmits float64 // mean retransmits per sample; negative: unknown
	Status      store.PointStatus
	Reason      string
	FailEvery   int     // every n-th sample fails; 0: none
	Noise       float64 // this point's noise instead of the run's; 0: the run's
	Loss        float64 // UDP datagrams lost, %, at this point
	PingFactor  float64 // latency under load relative to the probe's Ping; 0 means 1
	PingLoss    float64 // pings lost under load, %
	// An idle phase before the point's first probe, when IdleCPU or
	// IdlePower is set: the DUT's CPU %, temperature and power, and the
	// ping latency (IdlePing, ms), at rest.
	IdleCPU, IdleTemp, IdlePower, IdlePing float64
}

// Create writes the run into st and returns its id.
func Create(ctx context.Context, st *store.Store, r Run) (int64, error) {
	info, points, samples := Generate(r)
	id, err := st.CreateRun(ctx, info)
	if err != nil {
		return 0, err
	}
	if err := st.AddPoints(ctx, id, points); err != nil {
		return 0, err
	}
	for _, x := range samples {
		x.Run = id
		if err := st.RecordSample(ctx, x); err != nil {
			return 0, err
		}
	}
	if err := st.FinishRun(ctx, id, store.Done); err != nil {
		return 0, err
	}
	return id, nil
}

// targetInfo is a pfSense run's target info, with lab as its lab profile.
func targetInfo(lab string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Flavor string `json:"flavor"`
		Lab    string `json:"lab,omitempty"`
	}{"pfsense", lab})
	return b
}

// Generate makes the run's records without a database, for tests that
// need many runs: statistical trials.
func Generate(r Run) (store.Run, []store.Point, []store.Sample) {
	if r.Target == "" {
		r.Target = "lab"
	}
	if r.Created.IsZero() {
		r.Created = time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	}
	if r.Repeats == 0 {
		r.Repeats = 5
	}
	rng := rand.New(rand.NewPCG(r.Seed, r.Seed^0x9e3779b97f4a7c15))
	info := store.Run{Created: r.Created, Spec: r.Spec, SpecHash: store.HashSpec(r.Spec), Seed: int64(r.Seed), FwabVersion: "test", Target: r.Target, Testbed: r.Testbed,
		TargetInfo: targetInfo(r.Lab), Firmware: r.Firmware, Status: store.Done}
	points := make([]store.Point, len(r.Points))
	for i, p := range r.Points {
		status := p.Status
		if status == "" {
			status = store.Valid
		}
		points[i] = store.Point{Index: i, Knobs: p.Knobs, Status: status, Reason: p.Reason}
	}
	var samples []store.Sample
	t := r.Created
	n := 0
	// Idle phases draw their noise from a generator of their own, so that
	// adding them leaves every probe's figures as they were.
	idleRNG := rand.New(rand.NewPCG(r.Seed^0x1d1e, r.Seed))
	idled := map[int]bool{}
	// The rounds' shared factors, from a generator of their own too.
	roundRNG := rand.New(rand.NewPCG(r.Seed^0x20d, r.Seed))
	rounds := make([]int, r.Repeats)
	roundFactor := make([]float64, r.Repeats)
	for i := range rounds {
		rounds[i], roundFactor[i] = i, (1+r.RoundNoise*roundRNG.NormFloat64())*(1+r.Trend*float64(r.TrendFrom+i))
	}
	if r.EndBaseline && len(r.Points) > 0 {
		rounds, roundFactor = append(rounds, store.DriftRound), append(roundFactor, (1-r.EndDrift)*(1+r.Trend*float64(r.TrendFrom+r.Repeats)))
	}
	for ri, round := range rounds {
		for i, p := range r.Points {
			if round == store.DriftRound && i > 0 {
				break
			}
			if points[i].Status != store.Valid {
				continue
			}
			if (p.IdleCPU > 0 || p.IdlePower > 0) && !idled[i] {
				idled[i] = true
				t = t.Add(10 * time.Second)
				samples = append(samples, idleSample(idleRNG, store.Key{Point: i, Probe: probe.IdleProbe, Round: round}, t, p))
			}
			for _, pr := range r.Probes {
				n++
				t = t.Add(10 * time.Second)
				factor := p.Factor
				if factor == 0 {
					factor = 1
				}
				e := rng.NormFloat64()
				if r.Uniform {
					e = 2*rng.Float64() - 1
				}
				noise := r.Noise
				if p.Noise > 0 {
					noise = p.Noise
				}
				mbps := pr.Mbps * factor * (1 - r.Slowdown) * (1 + noise*e) * roundFactor[ri]
				if round == store.DriftRound && !r.EndNoisy {
					mbps = pr.Mbps * factor * (1 - r.Slowdown) * roundFactor[ri] // the drift exactly, no noise
				}
				x := store.Sample{Key: store.Key{Point: i, Probe: pr.Name, Round: round}, Direction: pr.Direction, Started: t, Elapsed: 5 * time.Second,
					BitsPerSecond: mbps * 1e6, SentBPS: mbps * 1e6, BidirBPS: store.Unknown, Retransmits: -1,
					ClientCPU: store.Unknown, ServerCPU: store.Unknown, RTTms: store.Unknown, JitterMS: store.Unknown, LostPercent: store.Unknown,
					PingAvgMS: store.Unknown, PingLossPercent: store.Unknown, PowerWatts: store.Unknown, Warnings: []string{}}
				if p.Retransmits >= 0 && !pr.UDP {
					x.Retransmits = max(int64(math.Round(p.Retransmits*(1+0.2*rng.NormFloat64()))), 0)
				}
				if p.Power > 0 {
					x.PowerWatts = p.Power * (1 + 0.01*rng.NormFloat64())
				}
				if p.CPU > 0 {
					for s := range 5 {
						x.DUT = append(x.DUT, probe.DUTMetrics{Time: t.Add(time.Duration(s) * time.Second), CPUPercent: p.CPU * (1 + 0.05*rng.NormFloat64()), TempCelsius: p.Temp})
					}
				}
				if r.Series {
					x.Raw, _ = json.Marshal(map[string]any{"client": json.RawMessage(Iperf3Client(rng, mbps, 5)), "parallel": 1})
				}
				if pr.Connects > 0 {
					rate := pr.Connects * factor * (1 - r.Slowdown) * (1 + noise*e)
					x.BitsPerSecond, x.SentBPS = store.Unknown, store.Unknown
					x.Raw, _ = json.Marshal(map[string]any{"connect": probe.ConnectResult{Seconds: 5, Parallel: 4, Connects: int64(rate * 5), PerSecond: rate,
						ConnectMS: probe.ConnectTimes{Min: 0.1, Median: 4000 / rate, P99: 3 * 4000 / rate, Max: 1000}}})
				}
				if pr.UDP {
					x.LostPercent = max(p.Loss*(1+0.2*rng.NormFloat64()), 0)
					x.JitterMS = pr.Jitter / factor * (1 + 0.1*rng.NormFloat64())
					x.Raw, _ = json.Marshal(map[string]any{"client": json.RawMessage(Iperf3UDPClient(mbps, pr.Length, 5, x.LostPercent, x.JitterMS)), "udp": true, "length": pr.Length})
				}
				if pr.Ping > 0 {
					pf := p.PingFactor
					if pf == 0 {
						pf = 1
					}
					x.PingAvgMS = pr.Ping * pf * (1 + 0.05*rng.NormFloat64())
					x.PingLossPercent = max(p.PingLoss*(1+0.3*rng.NormFloat64()), 0)
				}
				if p.FailEvery > 0 && n%p.FailEvery == 0 {
					x.Failed, x.Reason = true, "iperf3 client: connection refused"
					x.BitsPerSecond, x.SentBPS, x.Retransmits, x.DUT, x.Raw = store.Unknown, store.Unknown, -1, nil, nil
				}
				samples = append(samples, x)
			}
		}
	}
	return info, points, samples
}

// idleSample is a point's idle phase: five DUT readings and the power at
// rest, no traffic.
func idleSample(rng *rand.Rand, k store.Key, t time.Time, p Point) store.Sample {
	x := store.Sample{Key: k, Started: t, Elapsed: 10 * time.Second,
		BitsPerSecond: store.Unknown, SentBPS: store.Unknown, BidirBPS: store.Unknown, Retransmits: -1,
		ClientCPU: store.Unknown, ServerCPU: store.Unknown, RTTms: store.Unknown, JitterMS: store.Unknown, LostPercent: store.Unknown,
		PingAvgMS: store.Unknown, PingLossPercent: store.Unknown, PowerWatts: store.Unknown, Warnings: []string{}}
	if p.IdlePower > 0 {
		x.PowerWatts = p.IdlePower * (1 + 0.01*rng.NormFloat64())
	}
	if p.IdlePing > 0 {
		x.PingAvgMS, x.PingLossPercent = p.IdlePing*(1+0.05*rng.NormFloat64()), 0
	}
	if p.IdleCPU > 0 {
		for s := range 5 {
			x.DUT = append(x.DUT, probe.DUTMetrics{Time: t.Add(time.Duration(s) * time.Second), CPUPercent: p.IdleCPU * (1 + 0.1*rng.NormFloat64()), TempCelsius: p.IdleTemp})
		}
	}
	return x
}

// iperfSum is the part of an iperf3 report's sums that TCP and UDP share.
type iperfSum struct {
	Start         float64 `json:"start"`
	End           float64 `json:"end"`
	Seconds       float64 `json:"seconds"`
	Bytes         int64   `json:"bytes"`
	BitsPerSecond float64 `json:"bits_per_second"`
}

// Iperf3Client is a small iperf3 client report (JSON) with per-second
// intervals around mbps.
func Iperf3Client(rng *rand.Rand, mbps float64, seconds int) []byte {
	type sum struct {
		iperfSum
		Retransmits int64 `json:"retransmits"`
	}
	type interval struct {
		Sum sum `json:"sum"`
	}
	var ivs []interval
	for s := range seconds {
		bps := math.Round(mbps * (1 + 0.04*rng.NormFloat64()) * 1e6)
		ivs = append(ivs, interval{sum{iperfSum: iperfSum{Start: float64(s), End: float64(s + 1), Seconds: 1, Bytes: int64(bps / 8), BitsPerSecond: bps}}})
	}
	total := sum{iperfSum: iperfSum{Start: 0, End: float64(seconds), Seconds: float64(seconds), Bytes: int64(mbps * 1e6 / 8 * float64(seconds)), BitsPerSecond: mbps * 1e6}}
	rep := map[string]any{
		"start":     map[string]any{"version": "iperf 3.12", "test_start": map[string]any{"protocol": "TCP", "num_streams": 1, "omit": 0, "reverse": 0}},
		"intervals": ivs,
		"end": map[string]any{"sum_sent": total, "sum_received": total,
			"cpu_utilization_percent": map[string]float64{"host_total": 20, "host_user": 5, "host_system": 15, "remote_total": 30, "remote_user": 5, "remote_system": 25}},
	}
	client, err := json.Marshal(rep)
	if err != nil {
		panic(fmt.Sprintf("reporttest: %v", err))
	}
	return client
}

// Iperf3UDPClient is a small iperf3 UDP client report (JSON, as iperf 3.12
// writes it) of a test at mbps received with datagrams of length bytes,
// lossPct of them lost.
func Iperf3UDPClient(mbps float64, length, seconds int, lossPct, jitterMS float64) []byte {
	type sum struct {
		iperfSum
		JitterMS    float64 `json:"jitter_ms"`
		LostPackets int64   `json:"lost_packets"`
		Packets     int64   `json:"packets"`
		LostPercent float64 `json:"lost_percent"`
	}
	received := int64(mbps * 1e6 / 8 * float64(seconds) / float64(length))
	packets := int64(math.Round(float64(received) / (1 - lossPct/100)))
	secs := float64(seconds)
	sent := sum{iperfSum: iperfSum{End: secs, Seconds: secs, Bytes: packets * int64(length), BitsPerSecond: float64(packets*int64(length)*8) / secs}, Packets: packets}
	recv := sum{iperfSum: iperfSum{End: secs, Seconds: secs, Bytes: received * int64(length), BitsPerSecond: mbps * 1e6}, JitterMS: jitterMS,
		LostPackets: packets - received, Packets: packets, LostPercent: lossPct}
	rep := map[string]any{
		"start": map[string]any{"version": "iperf 3.12", "test_start": map[string]any{"protocol": "UDP", "num_streams": 1, "omit": 0, "reverse": 0, "blksize": length}},
		"end": map[string]any{"sum": recv, "sum_sent": sent, "sum_received": recv,
			"cpu_utilization_percent": map[string]float64{"host_total": 40, "host_user": 10, "host_system": 30, "remote_total": 35, "remote_user": 10, "remote_system": 25}},
	}
	client, err := json.Marshal(rep)
	if err != nil {
		panic(fmt.Sprintf("reporttest: %v", err))
	}
	return client
}

// LatencyUnderLoad is a run of an inline IPS against none, measured with a
// TCP probe that pings alongside and two UDP probes of 64- and 1400-byte
// datagrams: inline IPS costs 35 % of the throughput, loses 2 % of the
// datagrams (none without it) and triples the latency under load.
func LatencyUnderLoad(seed uint64) Run {
	return Run{
		Firmware: "2.7.2-RELEASE",
		Spec:     "name: latency-under-load\naxes:\n  ids@lan: [off, ips-inline]\n",
		Seed:     seed, Repeats: 7, Noise: 0.02,
		Probes: []Probe{
			{Name: "up", Direction: "up", Mbps: 940, Ping: 0.35},
			{Name: "udp-64", Direction: "up", Mbps: 120, UDP: true, Length: 64, Jitter: 0.012},
			{Name: "udp-1400", Direction: "up", Mbps: 900, UDP: true, Length: 1400, Jitter: 0.020},
		},
		Points: []Point{
			{Knobs: map[string]string{"ids@lan": "off"}, CPU: 20, Temp: 47, Power: 14.1, Retransmits: 2, IdleCPU: 2, IdleTemp: 44, IdlePower: 11.7, IdlePing: 0.05},
			{Knobs: map[string]string{"ids@lan": "ips-inline"}, Factor: 0.65, CPU: 95, Temp: 57, Power: 18.8, Retransmits: 90, Loss: 2, PingFactor: 3, PingLoss: 1, IdleCPU: 5, IdleTemp: 45, IdlePower: 12.4, IdlePing: 0.09},
		},
	}
}

// T730 is a run shaped like the HP T730 review: defaults, +pfBlockerNG,
// +Suricata IDS, +Suricata inline IPS (35 % slower, offloads off).
func T730(seed uint64, slowdown float64) Run {
	return Run{
		Firmware: "2.7.2-RELEASE",
		Spec: `name: t730-packages
axes:
  blocklist: [off, on]
  ids@lan: [off, ids, ips-inline]
  offload.checksum: [on, off]
baseline: {blocklist: off, ids@lan: off, offload.checksum: on}
`,
		Seed: seed, Repeats: 5, Noise: 0.03, Slowdown: slowdown,
		Probes: []Probe{{Name: "up", Direction: "up", Mbps: 940}, {Name: "down", Direction: "down", Mbps: 930}},
		Points: []Point{
			{Knobs: map[string]string{"blocklist": "off", "ids@lan": "off", "offload.checksum": "on", "offload.tso": "off"}, CPU: 22, Temp: 48, Power: 14.2, Retransmits: 3, IdleCPU: 2, IdleTemp: 44, IdlePower: 11.8},
			{Knobs: map[string]string{"blocklist": "on", "ids@lan": "off", "offload.checksum": "on", "offload.tso": "off"}, Factor: 0.99, CPU: 24, Temp: 49, Power: 14.5, Retransmits: 3, IdleCPU: 2.5, IdleTemp: 44, IdlePower: 11.9},
			{Knobs: map[string]string{"blocklist": "on", "ids@lan": "ids", "offload.checksum": "on", "offload.tso": "off"}, Factor: 0.96, CPU: 41, Temp: 52, Power: 16.1, Retransmits: 4, IdleCPU: 4, IdleTemp: 45, IdlePower: 12.3},
			{Knobs: map[string]string{"blocklist": "on", "ids@lan": "ips-inline", "offload.checksum": "off", "offload.tso": "off"}, Factor: 0.65, CPU: 97, Temp: 58, Power: 18.9, Retransmits: 140, IdleCPU: 6, IdleTemp: 46, IdlePower: 12.6},
		},
	}
}

// E302 is a full-factorial run shaped like the Supermicro E302-9D write-up:
// rules@lan over rules values (0, 10, 20, ...: each ten rules cost 0.05 %
// of throughput) × nat.outbound disabled/automatic (NAT costs 4 %), two
// probes, so 2·rules points and 4·rules comparisons. Repeats and noise as
// T730's; change them on the result.
func E302(seed uint64, slowdown float64, rules int) Run {
	r := Run{
		Firmware: "2.7.2-RELEASE",
		Seed:     seed, Repeats: 6, Noise: 0.03, Slowdown: slowdown,
		Probes: []Probe{{Name: "up-p4", Direction: "up", Mbps: 2350}, {Name: "down-p4", Direction: "down", Mbps: 2310}},
	}
	values := make([]string, rules)
	for i := range values {
		values[i] = fmt.Sprint(10 * i)
	}
	r.Spec = fmt.Sprintf("name: e302-modes\naxes:\n  rules@lan: [%s]\n  nat.outbound: [disabled, automatic]\nbaseline: {rules@lan: 0, nat.outbound: disabled}\n", strings.Join(values, ", "))
	for i := range rules {
		for j, nat := range []string{"disabled", "automatic"} {
			r.Points = append(r.Points, Point{Knobs: map[string]string{"rules@lan": fmt.Sprint(10 * i), "nat.outbound": nat},
				Factor: (1 - 0.0005*float64(i)) * (1 - 0.04*float64(j)), CPU: 30 + 0.1*float64(i), Retransmits: 2})
		}
	}
	return r
}
