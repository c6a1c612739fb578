package report

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fwab/fwab/store"
)

// Table is the seeds' table: one row per point, with each probe's
// throughput, its change against the baseline, retransmits, and the DUT's
// CPU, temperature and power.
type Table struct {
	Run    int64
	Target string
	// Testbed is the box measured, as 'fwab runs list' shows it: the
	// target's name and its hardware's fingerprint ("" for runs from
	// before testbeds were recorded).
	Testbed string
	// Lab is what a lab target's box stood for (fwapi.Target.Lab): its
	// profile and CPU budget; "" for a real box.
	Lab      string
	Firmware string
	Status   string // the run's: running, done, failed, cancelled
	Knobs    []string
	Fixed    map[string]string
	Probes   []string
	// Extra lists, per probe, the metrics shown beside its throughput
	// (extraMetrics that it measured at some point): UDP loss, jitter and
	// packet rate, ping latency and loss under load.
	Extra [][]Metric
	// Throughput says, per probe, whether its columns include throughput:
	// a connect probe measures the connection rate alone (in Extra), so
	// its Mbit/s, Δ, p and retransmit columns are left out.
	Throughput []bool
	Baseline   string // the baseline's label; empty when the run has none
	Rows       []Row
	// Idle says some point has an idle phase: the rows' Idle figures are
	// shown beside the under-load ones; IdleLatency that some idle phase
	// measured latency too.
	Idle, IdleLatency bool
	StudentT          bool    // show the Student's t view next to the medians
	Confidence        float64 // of the intervals
	// Blackouts are the applies' blackouts by the service actions they
	// ran ("filter-reload", "ids-restart+filter-reload"), in the order
	// first seen; empty when the run measured none.
	Blackouts []BlackoutFigures
	Warnings  []string
}

// BlackoutFigures summarize the blackouts of several applies: a point's,
// or all those that ran the same service actions.
type BlackoutFigures struct {
	Actions   string  // the service actions, joined by +
	N         int     // applies measured
	Failed    int     // of them, applies that failed (the retry included)
	BlockedMS float64 // the median time blocked
	MaxMS     float64 // the longest time blocked
	MaxGapMS  float64 // the longest gap between two datagrams
	// TCPHeld and TCPSurvived count the held connections over the
	// applies, and those that still passed data after them.
	TCPHeld, TCPSurvived int
}

// summarizeBlackouts puts bs together; N is 0 when bs is empty.
func summarizeBlackouts(bs []Blackout) BlackoutFigures {
	var f BlackoutFigures
	var blocked []float64
	for _, b := range bs {
		f.N++
		if b.Failed {
			f.Failed++
		}
		blocked = append(blocked, b.BlockedMS)
		f.MaxMS = max(f.MaxMS, b.BlockedMS)
		f.MaxGapMS = max(f.MaxGapMS, b.MaxGapMS)
		f.TCPHeld += b.TCPHeld
		f.TCPSurvived += b.TCPSurvived
	}
	f.BlockedMS = median(blocked)
	return f
}

// TCPText is "4/4", or "-" where no connection was held.
func (f BlackoutFigures) TCPText() string {
	if f.TCPHeld == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d", f.TCPSurvived, f.TCPHeld)
}

// HasLinks says some cell has links run at once.
func (t *Table) HasLinks() bool {
	for _, r := range t.Rows {
		for _, c := range r.Cells {
			if len(c.Links) > 0 {
				return true
			}
		}
	}
	return false
}

// linksText is a cell's links as one line: "link1 940.2 ± 0.3%, link2 …".
func linksText(c Cell) string {
	var parts []string
	for _, l := range c.Links {
		parts = append(parts, l.Name+" "+formatMbps(l.Mbps))
	}
	return strings.Join(parts, ", ")
}

// Row is one point.
type Row struct {
	Point    int
	Label    string
	Values   []string // the point's values for Table.Knobs
	Baseline bool
	Status   string
	Reason   string
	Cells    []Cell  // one per Table.Probes
	DUTCPU   float64 // median over the point's samples; NaN when unknown
	TempC    float64
	PowerW   float64
	Idle     IdleFigures
	Blackout BlackoutFigures // the point's applies; N is 0 where none was measured
}

// IdleFigures are a point's figures at rest, from its idle phases: medians,
// NaN when unknown.
type IdleFigures struct {
	N         int // idle phases measured
	DUTCPU    float64
	TempC     float64
	PowerW    float64
	LatencyMS float64
}

// InvalidNote says how many of the cell's samples the firewall changed
// under, of all it took, and what changed: "invalid 2/8: suricata
// restarted ×2". Empty when none was.
func (c Cell) InvalidNote() string {
	if c.Invalid == 0 {
		return ""
	}
	return fmt.Sprintf("invalid %d/%d: %s", c.Invalid, c.Mbps.N+c.Failed, c.InvalidWhy)
}

// CanaryNote says what the IPS canary saw in the cell's samples:
// "fail-open 2/7: 97 of 700 canary triggers passed", or "canary: none of
// 700 triggers passed"; at a detect-only IDS "ids missed 1/7: 650 of 700
// canary triggers alerted", or "canary: 700 of 700 triggers alerted"
// (of those that passed the box).
// Empty where no canary ran.
func (c Cell) CanaryNote() string {
	switch k := c.Canary; {
	case k.FailOpen > 0:
		return fmt.Sprintf("fail-open %d/%d: %d of %d canary triggers passed", k.FailOpen, k.Samples, k.Passed, k.Sent)
	case k.Missed > 0:
		return fmt.Sprintf("ids missed %d/%d: %d of %d canary triggers alerted", k.Missed, k.Samples, k.Alerted, k.Passed)
	case k.Samples > 0 && k.Detect == k.Samples:
		return fmt.Sprintf("canary: %d of %d triggers alerted", k.Alerted, k.Passed)
	case k.Samples > 0:
		return fmt.Sprintf("canary: none of %d triggers passed", k.Sent)
	}
	return ""
}

// Bad reports whether the canary flagged any sample: fail-open, or an
// IDS that missed triggers.
func (k CanaryCount) Bad() bool { return k.FailOpen > 0 || k.Missed > 0 }

// Cell is one probe at one point.
type Cell struct {
	Probe       string
	Failed      int
	Invalid     int    // of Failed, the samples the firewall changed under
	InvalidWhy  string // what changed under them, counted by kind
	Canary      CanaryCount
	Mbps        Summary
	Delta       *Delta // nil at the baseline and where either side has no samples
	Retransmits float64
	Extra       []MetricCell // one per Table.Extra of the probe
	// Links are each link's Mbit/s where the probe ran several at once
	// (Mbps is then their sum).
	Links []LinkCell
}

// LinkCell is one link's throughput within a probe of several links.
type LinkCell struct {
	Name string
	Mbps Summary
}

// MetricCell is one metric of a probe at one point: its median with the
// interval, and the change against the baseline.
type MetricCell struct {
	Metric Metric
	Value  Summary
	Delta  *Delta // nil at the baseline and where either side has no values
}

// Options choose what a report shows.
type Options struct {
	Pivot      string  // a knob: add the "% gained / lost" table by its values
	StudentT   bool    // add the Student's t view (mean, its interval, Welch's t-test)
	Confidence float64 // of the intervals; 0 means Confidence (0.95)
}

// confidence is the level asked for, or the default.
func (o Options) confidence() float64 {
	if o.Confidence == 0 {
		return Confidence
	}
	return o.Confidence
}

// NewTable computes the run's table.
func NewTable(r *Run, opts Options) *Table {
	t := &Table{Run: r.Info.ID, Target: r.Info.Target, Testbed: r.Info.Testbed, Lab: labOf(r.Info.TargetInfo), Firmware: r.Info.Firmware, Status: string(r.Info.Status), Knobs: r.Knobs, Fixed: r.Fixed, Probes: r.Probes, StudentT: opts.StudentT, Confidence: opts.confidence()}
	if r.Info.Status != store.Done {
		t.Warnings = append(t.Warnings, fmt.Sprintf("run %d is %s, not done: its figures are partial", r.Info.ID, r.Info.Status))
	}
	t.Warnings = append(t.Warnings, r.Warnings...)
	if w := widthWarning(r); w != "" {
		t.Warnings = append(t.Warnings, w)
	}
	if n := r.DriftNote(); n != "" {
		t.Warnings = append(t.Warnings, n)
	}
	if r.Baseline != nil {
		t.Baseline = r.Label(r.Baseline)
	} else {
		t.Warnings = append(t.Warnings, "no point has samples: there is no baseline to compare with")
	}
	for _, name := range r.Probes {
		t.Extra = append(t.Extra, measuredMetrics(r, name))
	}
	warned := map[string]bool{}
	warn := func(ws []string) {
		for _, w := range ws {
			if !warned[w] {
				warned[w] = true
				t.Warnings = append(t.Warnings, w)
			}
		}
	}
	for _, p := range r.Points {
		row := Row{Point: p.Index, Label: r.Label(p), Baseline: p == r.Baseline, Status: string(p.Status), Reason: p.Reason}
		for _, k := range r.Knobs {
			row.Values = append(row.Values, p.Knobs[k])
		}
		var cpu, temp, power []float64
		for pi, name := range r.Probes {
			c := Cell{Probe: name, Mbps: SummarizeAt(nil, t.Confidence), Retransmits: math.NaN()}
			ps := p.Probes[name]
			var base *ProbeSamples
			if r.Baseline != nil && p != r.Baseline {
				base = r.Baseline.Probes[name]
			}
			tput := metricCell(Throughput, base, ps, t.Confidence)
			c.Mbps, c.Delta = tput.Value, tput.Delta
			for _, m := range t.Extra[pi] {
				c.Extra = append(c.Extra, metricCell(m, base, ps, t.Confidence))
			}
			if ps != nil {
				c.Failed, c.Invalid, c.InvalidWhy, c.Canary = ps.Failed, ps.Invalid, countReasons(ps.InvalidWhy), ps.Canary
				c.Retransmits = median(ps.Retransmits)
				for _, l := range ps.Links {
					c.Links = append(c.Links, LinkCell{Name: l.Name, Mbps: SummarizeAt(l.Mbps, t.Confidence)})
				}
				cpu, temp, power = append(cpu, ps.DUTCPU...), append(temp, ps.DUTTemp...), append(power, ps.Power...)
				if len(ps.Mbps) > 0 {
					warn(c.Mbps.Warnings)
				}
				if c.Delta != nil {
					warn(c.Delta.Warnings)
				}
			}
			row.Cells = append(row.Cells, c)
		}
		row.DUTCPU, row.TempC, row.PowerW = median(cpu), median(temp), median(power)
		row.Idle = idleFigures(p.Idle)
		row.Blackout = summarizeBlackouts(r.blackoutsAt(p.Index))
		t.Idle = t.Idle || row.Idle.N > 0
		t.IdleLatency = t.IdleLatency || isFinite(row.Idle.LatencyMS)
		t.Rows = append(t.Rows, row)
	}
	for pi := range r.Probes {
		t.Throughput = append(t.Throughput, measuresThroughput(t, pi))
	}
	byActions := map[string][]Blackout{}
	var order []string
	for _, b := range r.Blackouts {
		k := actionsText(b.Actions)
		if byActions[k] == nil {
			order = append(order, k)
		}
		byActions[k] = append(byActions[k], b)
	}
	for _, k := range order {
		f := summarizeBlackouts(byActions[k])
		f.Actions = k
		t.Blackouts = append(t.Blackouts, f)
	}
	// One family per metric: a metric's p-values are adjusted over its
	// comparisons with the baseline, whatever else the table shows.
	families := map[Metric][]*Delta{}
	for _, row := range t.Rows {
		for _, c := range row.Cells {
			families[Throughput] = append(families[Throughput], c.Delta)
			for _, mc := range c.Extra {
				families[mc.Metric] = append(families[mc.Metric], mc.Delta)
			}
		}
	}
	for _, f := range families {
		AdjustDeltas(f)
	}
	return t
}

// actionsText names an apply's service actions: "filter-reload",
// "ids-restart+filter-reload"; "none" for an apply that ran none.
func actionsText(as []string) string {
	if len(as) == 0 {
		return "none"
	}
	return strings.Join(as, "+")
}

// idleFigures are the medians of a point's idle phases.
func idleFigures(ps *ProbeSamples) IdleFigures {
	if ps == nil {
		return IdleFigures{DUTCPU: math.NaN(), TempC: math.NaN(), PowerW: math.NaN(), LatencyMS: math.NaN()}
	}
	return IdleFigures{N: len(ps.Figures), DUTCPU: median(ps.DUTCPU), TempC: median(ps.DUTTemp), PowerW: median(ps.Power), LatencyMS: median(ps.Latency)}
}

// metricCell summarizes metric m of a probe at a point (ps, nil when the
// point has no samples of it) and compares it with the baseline's (base,
// nil at the baseline itself).
func metricCell(m Metric, base, ps *ProbeSamples, confidence float64) MetricCell {
	c := MetricCell{Metric: m, Value: SummarizeAt(nil, confidence)}
	v := m.values(ps)
	if len(v) == 0 {
		return c
	}
	c.Value = SummarizeAt(v, confidence)
	if b := m.values(base); len(b) > 0 {
		d := CompareAt(b, v, confidence)
		c.Delta = &d
	}
	return c
}

// measuredMetrics are the extra metrics the probe measured at some point.
func measuredMetrics(r *Run, probe string) []Metric {
	var out []Metric
	for _, m := range extraMetrics {
		for _, p := range r.Points {
			if p.Measured() && len(m.values(p.Probes[probe])) > 0 {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

// measuresThroughput says whether probe pi of the table measures
// throughput: every probe but one that measured a connection rate and no
// throughput at any point (a throughput probe that failed everywhere keeps
// its columns, which show the failure).
func measuresThroughput(t *Table, pi int) bool {
	if !slices.Contains(t.Extra[pi], ConnectRate) {
		return true
	}
	for _, r := range t.Rows {
		if r.Cells[pi].Mbps.N > 0 {
			return true
		}
	}
	return false
}

// AnyThroughput says some probe of the table measures throughput.
func (t *Table) AnyThroughput() bool { return slices.Contains(t.Throughput, true) }

// FamilyOf is how many comparisons against the baseline the p-values of
// metric m are adjusted over.
func (t *Table) FamilyOf(m Metric) int {
	for _, r := range t.Rows {
		for _, c := range r.Cells {
			if d := c.deltaOf(m); d != nil && d.Family > 0 {
				return d.Family
			}
		}
	}
	return 0
}

// extra is the cell's figures of metric m; nil when the probe has none.
func (c Cell) extra(m Metric) *MetricCell {
	for i := range c.Extra {
		if c.Extra[i].Metric == m {
			return &c.Extra[i]
		}
	}
	return nil
}

// HasExtra reports whether any probe shows metrics beside throughput.
func (t *Table) HasExtra() bool {
	for _, ms := range t.Extra {
		if len(ms) > 0 {
			return true
		}
	}
	return false
}

// extraLegend says how the metrics beside throughput are shown.
const extraLegend = "The figures beside a probe's throughput, or in its place (UDP packet rate in pkt/s received, loss and jitter; ping latency and loss under load; the DUT's power per Gbit/s; a connect probe's connections a second and connect time; an http probe's transactions a second in tx/s, the median and 99th percentile time to the last byte and the connections established at the server), where it measured them: median ± its interval likewise (± in percentage points for loss), Δ against the baseline in percent, or in percentage points (pp) for loss; each metric's p-values are adjusted over its own comparisons. Lower is better for loss, jitter, latency, connect time, time to the last byte and W per Gbit/s, higher for the packet, connection and transaction rates and the connections held."

// idleLegend says what the idle columns are.
const idleLegend = "Idle: the DUT's CPU, temperature and power (and ping latency) with no traffic, sampled before each point's first probe (median over the point's idle phases), beside the same figures under load."

// deltaOf is the cell's change of metric m against the baseline.
func (c Cell) deltaOf(m Metric) *Delta {
	if m == Throughput {
		return c.Delta
	}
	if mc := c.extra(m); mc != nil {
		return mc.Delta
	}
	return nil
}

// Family is how many comparisons against the baseline the p-values of
// the table's main figures are adjusted over: throughput's, or where no
// probe measures throughput the connection rate's.
func (t *Table) Family() int {
	if !t.AnyThroughput() {
		return t.FamilyOf(ConnectRate) // the main figures are the connection rates
	}
	return t.FamilyOf(Throughput)
}

// Pivot is the "% gained / lost" table: for each combination of the other
// knobs, the throughput at the pivot knob's first value and the change at
// each other value, in percent.
type Pivot struct {
	Knob    string
	Values  []string // the pivot's values: the columns
	Others  []string // the other axes
	Rows    []PivotRow
	Skipped int // combinations of the other knobs measured at one pivot value only
}

// PivotRow is one combination of the other knobs for one probe.
type PivotRow struct {
	Values []string // for Pivot.Others
	Probe  string
	Base   Summary  // Mbit/s at Pivot.Values[0]; N == 0 when that point is missing
	Deltas []*Delta // one per Pivot.Values; [0] and missing points are nil
}

// NewPivot builds the pivot table by knob, with intervals at the default
// confidence.
func NewPivot(r *Run, knob string) (*Pivot, error) { return NewPivotAt(r, knob, Confidence) }

// NewPivotAt builds the pivot table by knob with intervals at the given
// confidence level.
func NewPivotAt(r *Run, knob string, confidence float64) (*Pivot, error) {
	if ref := canonicalRef(knob); !slices.Contains(r.Knobs, knob) && slices.Contains(r.Knobs, ref) {
		knob = ref // "ids" is "ids@lan"
	}
	if !slices.Contains(r.Knobs, knob) {
		if len(r.Knobs) == 0 {
			return nil, fmt.Errorf("pivot %q: this run has no knob that varies between points", knob)
		}
		return nil, fmt.Errorf("pivot %q: not an axis of run %d; pick one of: %s", knob, r.Info.ID, strings.Join(r.Knobs, ", "))
	}
	pv := &Pivot{Knob: knob, Values: r.AxisValues(knob)}
	for _, k := range r.Knobs {
		if k != knob {
			pv.Others = append(pv.Others, k)
		}
	}
	// Group points by the other knobs' values, in point order.
	type group struct {
		values []string
		byVal  map[string]*Point
	}
	var groups []*group
	index := map[string]*group{}
	for _, p := range r.Points {
		if !p.Measured() {
			continue
		}
		var vals []string
		for _, k := range pv.Others {
			vals = append(vals, p.Knobs[k])
		}
		key := strings.Join(vals, "\x00")
		g := index[key]
		if g == nil {
			g = &group{values: vals, byVal: map[string]*Point{}}
			index[key] = g
			groups = append(groups, g)
		}
		g.byVal[p.Knobs[knob]] = p
	}
	for _, g := range groups {
		if len(g.byVal) < 2 {
			// One value of the pivot only: nothing to compare (the matrix's
			// constraints left out the others).
			pv.Skipped++
			continue
		}
		for _, probe := range r.Probes {
			row := PivotRow{Values: g.values, Probe: probe, Base: SummarizeAt(nil, confidence), Deltas: make([]*Delta, len(pv.Values))}
			base := samplesAt(g.byVal[pv.Values[0]], probe)
			if len(base) > 0 {
				row.Base = SummarizeAt(base, confidence)
			}
			for i, v := range pv.Values[1:] {
				vals := samplesAt(g.byVal[v], probe)
				if len(base) > 0 && len(vals) > 0 {
					d := CompareAt(base, vals, confidence)
					row.Deltas[i+1] = &d
				}
			}
			pv.Rows = append(pv.Rows, row)
		}
	}
	var family []*Delta
	for _, row := range pv.Rows {
		family = append(family, row.Deltas...)
	}
	AdjustDeltas(family)
	if len(pv.Rows) == 0 {
		return nil, fmt.Errorf("pivot %q: no combination of the other knobs was measured at two or more of its values, so there is nothing to compare; the main table's Δ compares every point with the baseline", knob)
	}
	return pv, nil
}

func samplesAt(p *Point, probe string) []float64 {
	if p == nil || p.Probes[probe] == nil {
		return nil
	}
	return p.Probes[probe].Headline()
}

// Family is how many comparisons the pivot's p-values are adjusted over.
func (pv *Pivot) Family() int {
	for _, r := range pv.Rows {
		for _, d := range r.Deltas {
			if d != nil && d.Family > 0 {
				return d.Family
			}
		}
	}
	return 0
}

// labOf is the lab profile a run's target info records; "" for none.
func labOf(info json.RawMessage) string {
	var v struct{ Lab string }
	_ = json.Unmarshal(info, &v)
	return v.Lab
}

// LabLine is Lab as a sentence's start: "Lab profile t730: …".
func (t *Table) LabLine() string {
	if t.Lab == "" {
		return ""
	}
	return strings.ToUpper(t.Lab[:1]) + t.Lab[1:]
}

// Where is where the run measured, for a report's title: its testbed
// (the target's name and hardware fingerprint), with the target's name
// beside it where the testbed does not start with it; the target alone
// for runs without a testbed.
func (t *Table) Where() string {
	switch {
	case t.Testbed == "":
		return t.Target
	case t.Target == "" || strings.HasPrefix(t.Testbed, t.Target+"@"):
		return t.Testbed
	}
	return t.Target + ", testbed " + t.Testbed
}
