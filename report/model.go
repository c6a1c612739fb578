package report

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// Run is a sweep's results, grouped by point and probe, ready for tables,
// charts and comparisons.
type Run struct {
	Info     store.Run
	Knobs    []string          // the axes: knobs whose value differs between points, in spec order
	Fixed    map[string]string // knobs with one value at every point
	Probes   []string          // probe names in the order they were first recorded
	Points   []*Point          // in point order
	Baseline *Point            // nil when no point has samples
	// Blackouts are the traffic each apply dropped, where the spec
	// measured it (store.EventBlackout), in the order of the applies.
	Blackouts []Blackout
	Warnings  []string
}

// Blackout is one apply's blackout at a point.
type Blackout struct {
	Point int
	store.BlackoutEvent
}

// blackoutsAt are the blackouts of the applies of point.
func (r *Run) blackoutsAt(point int) []Blackout {
	var out []Blackout
	for _, b := range r.Blackouts {
		if b.Point == point {
			out = append(out, b)
		}
	}
	return out
}

// Point is one configuration and what was measured there.
type Point struct {
	Index  int
	Knobs  map[string]string
	Status store.PointStatus
	Reason string
	Probes map[string]*ProbeSamples // by probe name
	// Idle is the point's idle phase (probe.IdleProbe): the DUT's CPU,
	// temperature and power, and the latency, with no traffic; nil when
	// the run had none.
	Idle *ProbeSamples
	// End is the run's drift check at this point (its baseline): the
	// re-measurement after every regular round, by probe; nil elsewhere.
	// Its samples are in no statistic of the point.
	End map[string]*ProbeSamples
}

// ProbeSamples are one probe's figures at one point, one value per
// successful sample. Unknown figures are left out, so the slices may differ
// in length.
type ProbeSamples struct {
	Name         string
	Direction    string
	Mbps         []float64
	Retransmits  []float64
	DUTCPU       []float64 // the DUT's mean CPU % during each sample
	DUTTemp      []float64 // °C
	Power        []float64 // W
	PPS          []float64 // UDP datagrams received per second
	Loss         []float64 // UDP datagrams lost, %
	Jitter       []float64 // UDP jitter, ms
	Latency      []float64 // ping round trip under load, ms
	PingLoss     []float64 // pings lost under load, %
	WattsPerGbps []float64 // the DUT's power per Gbit/s of throughput
	ConnectRate  []float64 // a connect probe's connections a second
	ConnectMS    []float64 // its median handshake time, ms
	HTTPRate     []float64 // an http probe's transactions a second
	TTLB         []float64 // its median time to the last byte, ms
	TTLBP99      []float64 // its 99th percentile, ms
	HTTPHeld     []float64 // the connections established at the server during the load
	CanaryPct    []float64 // an IPS canary's triggers that passed, % of those sent
	MissedPct    []float64 // a detect-only IDS's canary triggers without an alert, % of those sent
	// Canary counts the IPS canary over every sample that ran one, the
	// invalid ones too: a box that let triggers through did so whatever
	// else changed under the sample.
	Canary     CanaryCount
	Failed     int       // failed samples, not counted above
	Invalid    int       // of Failed, those the firewall changed under (probe.InvalidReason)
	InvalidWhy []string  // what changed under each of them
	CPUBound   int       // samples limited by an endpoint's CPU
	Series     []Series  // per-interval throughput, where the raw report has it
	Figures    []Figures // each successful sample's figures, in recorded order
	// Links are, for a probe of several links at once, each link's own
	// Mbit/s, by link in the order first recorded.
	Links []LinkValues
}

// CanaryCount is what the IPS canary saw over a probe's samples at one
// point.
type CanaryCount struct {
	Samples  int    // samples that ran a canary
	FailOpen int    // of them, those any trigger passed an inline IPS
	Sent     uint64 // triggers sent
	Passed   uint64 // of them, arrived: the IPS let them through
	// Detect counts the samples at which the IDS only detects: its
	// triggers pass, and Alerted counts those it logged an alert for;
	// Missed the samples with a trigger it logged none for.
	Detect  int
	Alerted uint64
	Missed  int
}

func (c *CanaryCount) add(r probe.CanaryResult) {
	c.Samples++
	if r.FailOpen() {
		c.FailOpen++
	}
	c.Sent += r.Sent
	c.Passed += r.Passed
	if r.Detect {
		c.Detect++
		c.Alerted += r.Alerted
		if r.Missed() > 0 {
			c.Missed++
		}
	}
}

// LinkValues are one link's Mbit/s within the samples of a probe that
// ran several links at once.
type LinkValues struct {
	Name string
	Mbps []float64
}

// Figures are one sample's figures; NaN where unknown.
type Figures struct {
	Round, Repeat int
	Mbps          float64
	Retransmits   float64
	DUTCPU        float64
	DUTTemp       float64
	Power         float64
	PPS           float64
	Loss          float64
	Jitter        float64
	Latency       float64
	PingLoss      float64
	WattsPerGbps  float64
	ConnectRate   float64
	ConnectMS     float64
	HTTPRate      float64
	TTLB, TTLBP99 float64
	HTTPHeld      float64
	CanaryPct     float64 // canary triggers passed an inline IPS, %; NaN without one
	MissedPct     float64 // canary triggers a detect-only IDS logged no alert for, %; NaN without one
}

// slice is where the probe keeps the metric's values; nil for a metric it
// does not keep per sample.
func (ps *ProbeSamples) slice(m Metric) *[]float64 {
	switch m {
	case Throughput:
		return &ps.Mbps
	case ConnectRate:
		return &ps.ConnectRate
	case ConnectTime:
		return &ps.ConnectMS
	case HTTPRate:
		return &ps.HTTPRate
	case TTLB:
		return &ps.TTLB
	case TTLBP99:
		return &ps.TTLBP99
	case HTTPHeld:
		return &ps.HTTPHeld
	case CanaryPassed:
		return &ps.CanaryPct
	case CanaryMissed:
		return &ps.MissedPct
	case Retransmits:
		return &ps.Retransmits
	case DUTCPU:
		return &ps.DUTCPU
	case PPS:
		return &ps.PPS
	case Loss:
		return &ps.Loss
	case Jitter:
		return &ps.Jitter
	case Latency:
		return &ps.Latency
	case PingLoss:
		return &ps.PingLoss
	case WattsPerGbps:
		return &ps.WattsPerGbps
	}
	return nil
}

// Series is one sample's throughput over time.
type Series struct {
	Round, Repeat int
	Started       time.Time
	Seconds       []float64 // interval ends, from the start of the probe
	Mbps          []float64
}

// Key names a point by its knob values, sorted by knob: two runs of the same
// matrix give the same point the same key.
func (p *Point) Key() string { return KnobsKey(p.Knobs) }

// KnobsKey writes knob values as "knob=value" pairs sorted by knob.
func KnobsKey(knobs map[string]string) string {
	keys := make([]string, 0, len(knobs))
	for k := range knobs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + knobs[k]
	}
	return strings.Join(parts, " ")
}

// Label names a point by the run's axes only: "blocklist=on ids@lan=ids".
func (r *Run) Label(p *Point) string {
	parts := make([]string, 0, len(r.Knobs))
	for _, k := range r.Knobs {
		parts = append(parts, k+"="+p.Knobs[k])
	}
	if len(parts) == 0 {
		return "point " + fmt.Sprint(p.Index)
	}
	return strings.Join(parts, " ")
}

// Measured reports whether the point's samples count: it was applied and
// verified (or the sweep has not recorded otherwise yet).
func (p *Point) Measured() bool {
	return p.Status == store.Valid || p.Status == store.Pending
}

// Load reads a run from the results database.
func Load(ctx context.Context, st *store.Store, run int64) (*Run, error) {
	info, err := st.Run(ctx, run)
	if err != nil {
		return nil, err
	}
	points, err := st.Points(ctx, run)
	if err != nil {
		return nil, err
	}
	samples, err := st.Samples(ctx, run)
	if err != nil {
		return nil, err
	}
	r, err := build(info, points, samples)
	if err != nil {
		return nil, err
	}
	events, err := st.Events(ctx, run)
	if err != nil {
		return nil, err
	}
	for _, e := range events {
		var b Blackout
		if e.Kind != store.EventBlackout || json.Unmarshal([]byte(e.Message), &b.BlackoutEvent) != nil {
			continue
		}
		b.Point = e.Point
		r.Blackouts = append(r.Blackouts, b)
	}
	return r, nil
}

func build(info store.Run, points []store.Point, samples []store.Sample) (*Run, error) {
	r := &Run{Info: info, Fixed: map[string]string{}}
	byIndex := map[int]*Point{}
	for _, sp := range points {
		p := &Point{Index: sp.Index, Knobs: sp.Knobs, Status: sp.Status, Reason: sp.Reason, Probes: map[string]*ProbeSamples{}}
		if p.Knobs == nil {
			p.Knobs = map[string]string{}
		}
		r.Points = append(r.Points, p)
		byIndex[p.Index] = p
	}
	seenProbe := map[string]bool{}
	var failed, cpuBound, idleFailed int
	var invalid []string // what changed under each invalid sample
	for _, x := range samples {
		p, ok := byIndex[x.Point]
		if !ok {
			return nil, fmt.Errorf("run %d: a sample names point %d, which the run does not have", info.ID, x.Point)
		}
		if x.Drift() {
			if x.Failed || !isFinite(x.BitsPerSecond) && rawOf(x).Connect == nil || x.Probe == probe.IdleProbe {
				continue
			}
			if p.End == nil {
				p.End = map[string]*ProbeSamples{}
			}
			if p.End[x.Probe] == nil {
				p.End[x.Probe] = &ProbeSamples{Name: x.Probe, Direction: x.Direction}
			}
			p.End[x.Probe].add(x, clientReport(x))
			continue
		}
		if x.Probe == probe.IdleProbe {
			if p.Idle == nil {
				p.Idle = &ProbeSamples{Name: x.Probe}
			}
			if x.Failed {
				p.Idle.Failed++
				idleFailed++
				continue
			}
			p.Idle.add(x, nil)
			continue
		}
		if !seenProbe[x.Probe] {
			seenProbe[x.Probe] = true
			r.Probes = append(r.Probes, x.Probe)
		}
		ps := p.Probes[x.Probe]
		if ps == nil {
			ps = &ProbeSamples{Name: x.Probe, Direction: x.Direction}
			p.Probes[x.Probe] = ps
		}
		if c := rawOf(x).Canary; c != nil {
			ps.Canary.add(*c)
		}
		// A sample without throughput failed, unless it is a connect
		// probe's, whose figure is the connection rate.
		if x.Failed || !isFinite(x.BitsPerSecond) && rawOf(x).Connect == nil {
			ps.Failed++
			if why, ok := strings.CutPrefix(x.Reason, probe.InvalidReason); ok {
				ps.Invalid++
				ps.InvalidWhy = append(ps.InvalidWhy, why)
				invalid = append(invalid, why)
			} else {
				failed++
			}
			continue
		}
		client := clientReport(x)
		ps.add(x, client)
		if x.EndpointCPUBound {
			ps.CPUBound++
			cpuBound++
		}
		if s, ok := seriesOf(x, client); ok {
			ps.Series = append(ps.Series, s)
		}
	}
	if idleFailed > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d idle phases failed and are left out ('fwab runs show %d' lists their reasons)", idleFailed, info.ID))
	}
	if failed > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d failed samples are left out of the statistics ('fwab runs show %d' lists their reasons)", failed, info.ID))
	}
	if len(invalid) > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d samples are invalid, the firewall changed during them (%s): they are left out of the statistics ('fwab runs show %d' lists them)", len(invalid), countReasons(invalid), info.ID))
	}
	if cpuBound > 0 {
		r.Warnings = append(r.Warnings, fmt.Sprintf("%d samples were limited by an endpoint's CPU: they may measure the endpoints rather than the firewall", cpuBound))
	}
	for _, p := range r.Points {
		if !p.Measured() {
			r.Warnings = append(r.Warnings, fmt.Sprintf("point %d (%s) is %s: %s", p.Index, p.Key(), p.Status, p.Reason))
		}
	}
	r.Warnings = append(r.Warnings, routerModeNotes(info, r.Points)...)
	r.Knobs, r.Fixed = axes(info.Spec, r.Points)
	r.Baseline = baseline(info.Spec, r.Points)
	return r, nil
}

// add keeps a successful sample's figures; client is its iperf3 client
// report, nil when it has none.
func (ps *ProbeSamples) add(x store.Sample, client *probe.Iperf3Result) {
	f := Figures{Round: x.Round, Repeat: x.Repeat, Mbps: x.BitsPerSecond / 1e6, Retransmits: math.NaN(), Power: x.PowerWatts,
		PPS: math.NaN(), Loss: x.LostPercent, Jitter: x.JitterMS, Latency: x.PingAvgMS, PingLoss: x.PingLossPercent,
		WattsPerGbps: wattsPerGbps(x.PowerWatts, x.BitsPerSecond), ConnectRate: math.NaN(), ConnectMS: math.NaN(), CanaryPct: math.NaN(), MissedPct: math.NaN(),
		HTTPRate: math.NaN(), TTLB: math.NaN(), TTLBP99: math.NaN(), HTTPHeld: math.NaN()}
	f.DUTCPU, f.DUTTemp = dutMeans(x.DUT)
	if x.Retransmits >= 0 {
		f.Retransmits = float64(x.Retransmits)
	}
	if client != nil {
		if pps := client.PacketsPerSecond(); pps > 0 {
			f.PPS = pps
		}
	}
	raw := rawOf(x)
	if n := raw.NDR; n != nil && n.FPS > 0 {
		f.PPS = n.FPS // a rate search's frames a second at the rate found
	}
	if c := raw.Connect; c != nil {
		f.ConnectRate, f.ConnectMS = c.PerSecond, c.ConnectMS.Median
	}
	if h := raw.HTTP; h != nil {
		f.HTTPRate, f.TTLB, f.TTLBP99 = h.PerSecond, h.TTLB.Median, h.TTLB.P99
		if h.Held != nil { // none in records from before it was counted, or where the server could not say
			f.HTTPHeld = float64(*h.Held)
		}
	}
	switch c := raw.Canary; {
	case c == nil || c.Sent == 0:
	case c.Detect:
		if c.Passed > 0 {
			f.MissedPct = 100 * float64(c.Missed()) / float64(c.Passed)
		}
	default:
		f.CanaryPct = 100 * float64(c.Passed) / float64(c.Sent)
	}
	for _, l := range raw.Links {
		if l.Failed {
			continue
		}
		i := slices.IndexFunc(ps.Links, func(v LinkValues) bool { return v.Name == l.Name })
		if i < 0 {
			ps.Links, i = append(ps.Links, LinkValues{Name: l.Name}), len(ps.Links)
		}
		ps.Links[i].Mbps = append(ps.Links[i].Mbps, l.BitsPerSecond/1e6)
	}
	ps.Figures = append(ps.Figures, f)
	for _, m := range AllMetrics {
		if v := m.of(f); isFinite(v) {
			*ps.slice(m) = append(*ps.slice(m), v)
		}
	}
	if isFinite(f.DUTTemp) {
		ps.DUTTemp = append(ps.DUTTemp, f.DUTTemp)
	}
	if isFinite(x.PowerWatts) {
		ps.Power = append(ps.Power, x.PowerWatts)
	}
}

// wattsPerGbps is the power drawn per Gbit/s forwarded; NaN when either
// is unknown or nothing was forwarded.
func wattsPerGbps(watts, bitsPerSecond float64) float64 {
	if !isFinite(watts) || !isFinite(bitsPerSecond) || watts < 0 || bitsPerSecond <= 0 {
		return math.NaN()
	}
	return watts / (bitsPerSecond / 1e9)
}

// dutMeans averages the DUT's CPU and temperature over a sample; NaN when
// unknown. A temperature of 0 means the firewall did not report one.
func dutMeans(ms []probe.DUTMetrics) (cpu, temp float64) {
	cpu, temp = math.NaN(), math.NaN()
	var c, t []float64
	for _, m := range ms {
		if isFinite(m.CPUPercent) {
			c = append(c, m.CPUPercent)
		}
		if m.TempCelsius != 0 && isFinite(m.TempCelsius) {
			t = append(t, m.TempCelsius)
		}
	}
	if len(c) > 0 {
		cpu = mean(c)
	}
	if len(t) > 0 {
		temp = mean(t)
	}
	return cpu, temp
}

// clientReport is the iperf3 client report the sample keeps in Raw; nil
// when it has none that parses.
func clientReport(x store.Sample) *probe.Iperf3Result {
	var raw struct {
		Client json.RawMessage `json:"client"`
	}
	if len(x.Raw) == 0 || json.Unmarshal(x.Raw, &raw) != nil || len(raw.Client) == 0 {
		return nil
	}
	res, err := probe.ParseIperf3(raw.Client)
	if err != nil {
		return nil
	}
	return &res
}

// rawReports are the reports of fwab's own probes in a sample's raw record.
type rawReports struct {
	NDR     *probe.NDRResult     `json:"ndr"`
	Connect *probe.ConnectResult `json:"connect"`
	HTTP    *probe.HTTPResult    `json:"http"`
	Canary  *probe.CanaryResult  `json:"canary"`
	Links   []probe.LinkSample   `json:"links"` // a sample of several links at once
}

func rawOf(x store.Sample) rawReports {
	var raw rawReports
	if len(x.Raw) > 0 {
		_ = json.Unmarshal(x.Raw, &raw) // a raw record without them is an iperf3 sample
	}
	return raw
}

// seriesOf is the per-interval throughput of the sample's client report.
func seriesOf(x store.Sample, res *probe.Iperf3Result) (Series, bool) {
	if res == nil || len(res.Intervals) == 0 {
		return Series{}, false
	}
	s := Series{Round: x.Round, Repeat: x.Repeat, Started: x.Started}
	for _, iv := range res.Intervals {
		s.Seconds = append(s.Seconds, iv.End)
		s.Mbps = append(s.Mbps, iv.BitsPerSecond/1e6)
	}
	return s, true
}

// specHead is the part of a matrix spec a report needs: the axes' order
// and the baseline. Anything else in the spec is matrix's business.
type specHead struct {
	Axes     yaml.Node         `yaml:"axes"`
	Baseline map[string]string `yaml:"baseline"`
}

func parseSpecHead(spec string) specHead {
	var h specHead
	_ = yaml.Unmarshal([]byte(spec), &h) // a spec that does not parse leaves the defaults
	return h
}

// canonicalRef is the knob's canonical reference ("ids" → "ids@lan"), or the
// name as written when it is not a knob configxml knows.
func canonicalRef(knob string) string {
	ref, err := configxml.ParseRef(knob)
	if err != nil {
		return knob
	}
	return ref.String()
}

// axes splits the points' knobs into those that vary (in the spec's axis
// order, then by name) and those fixed at one value.
func axes(spec string, points []*Point) ([]string, map[string]string) {
	values := map[string]map[string]bool{}
	for _, p := range points {
		for k, v := range p.Knobs {
			if values[k] == nil {
				values[k] = map[string]bool{}
			}
			values[k][v] = true
		}
	}
	// A knob missing at some point varies too.
	for k := range values {
		for _, p := range points {
			if _, ok := p.Knobs[k]; !ok {
				values[k][""] = true
			}
		}
	}
	order := map[string]int{}
	h := parseSpecHead(spec)
	if h.Axes.Kind == yaml.MappingNode {
		for i := 0; i < len(h.Axes.Content); i += 2 {
			order[canonicalRef(h.Axes.Content[i].Value)] = i/2 + 1
		}
	}
	var varying []string
	fixed := map[string]string{}
	for k, vs := range values {
		if len(vs) > 1 {
			varying = append(varying, k)
			continue
		}
		for v := range vs {
			fixed[k] = v
		}
	}
	sort.Slice(varying, func(i, j int) bool {
		oi, oj := order[varying[i]], order[varying[j]]
		if oi == 0 {
			oi = math.MaxInt
		}
		if oj == 0 {
			oj = math.MaxInt
		}
		if oi != oj {
			return oi < oj
		}
		return varying[i] < varying[j]
	})
	return varying, fixed
}

// baseline is the spec's baseline point, or the first measured point with
// samples.
func baseline(spec string, points []*Point) *Point {
	h := parseSpecHead(spec)
	if len(h.Baseline) > 0 {
		want := map[string]string{}
		for k, v := range h.Baseline {
			ref := canonicalRef(k)
			want[ref] = configxml.Canonical(ref, v)
		}
		for _, p := range points {
			if p.Measured() && hasSamples(p) && matchesAll(p.Knobs, want) {
				return p
			}
		}
	}
	for _, p := range points {
		if p.Measured() && hasSamples(p) {
			return p
		}
	}
	return nil
}

func matchesAll(knobs, want map[string]string) bool {
	for k, v := range want {
		if knobs[k] != v {
			return false
		}
	}
	return true
}

func hasSamples(p *Point) bool {
	for _, ps := range p.Probes {
		if len(ps.Headline()) > 0 {
			return true
		}
	}
	return false
}

// HeadlineMetric is the metric that sums up the probe: the connection rate of a
// connect probe, the throughput of every other.
func (ps *ProbeSamples) HeadlineMetric() Metric {
	if ps != nil && len(ps.Mbps) == 0 && len(ps.ConnectRate) > 0 {
		return ConnectRate
	}
	return Throughput
}

// Headline are the values of the probe's headline metric.
func (ps *ProbeSamples) Headline() []float64 { return ps.HeadlineMetric().values(ps) }

// AxisValues lists the values a knob takes, in point order.
func (r *Run) AxisValues(knob string) []string {
	var out []string
	for _, p := range r.Points {
		if v := p.Knobs[knob]; !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func mean(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return Summarize(v).Median
}

// routerModeNotes says, for a pfSense run, which points ran with the filter
// disabled: pfSense loads NAT with the filter's ruleset, so those points
// measured plain routing without NAT, whatever nat.outbound says.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:492 — NAT goes into the ruleset a disabled filter never loads: `$rules .= "{$natrules}\n";`
func routerModeNotes(info store.Run, points []*Point) []string {
	var target struct{ Flavor string }
	if json.Unmarshal(info.TargetInfo, &target) != nil || target.Flavor != "pfsense" {
		return nil
	}
	var idx []string
	for _, p := range points {
		if p.Knobs["filter"] == "disabled" {
			idx = append(idx, strconv.Itoa(p.Index))
		}
	}
	if len(idx) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("point %s ran with filter=disabled: pfSense loads no NAT without its filter, so they measured routing without NAT whatever nat.outbound says", strings.Join(idx, ", "))}
}

// countReasons says how often each reason occurred, most frequent first:
// "suricata restarted ×2, the firewall rebooted".
// Restarts are counted by service, whatever their pids.
func countReasons(reasons []string) string {
	n := map[string]int{}
	var order []string
	for _, r := range reasons {
		for _, part := range strings.Split(r, "; ") {
			if i := strings.Index(part, " (pid "); i >= 0 {
				part = part[:i]
			}
			if n[part] == 0 {
				order = append(order, part)
			}
			n[part]++
		}
	}
	slices.SortStableFunc(order, func(a, b string) int { return n[b] - n[a] })
	for i, r := range order {
		if n[r] > 1 {
			order[i] = fmt.Sprintf("%s ×%d", r, n[r])
		}
	}
	return strings.Join(order, ", ")
}
