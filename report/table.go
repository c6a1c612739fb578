package report

import (
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
	Run        int64
	Target     string
	Firmware   string
	Status     string // the run's: running, done, failed, cancelled
	Knobs      []string
	Fixed      map[string]string
	Probes     []string
	Baseline   string // the baseline's label; empty when the run has none
	Rows       []Row
	StudentT   bool    // show the Student's t view next to the medians
	Confidence float64 // of the intervals
	Warnings   []string
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
}

// Cell is one probe at one point.
type Cell struct {
	Probe       string
	Failed      int
	Mbps        Summary
	Delta       *Delta // nil at the baseline and where either side has no samples
	Retransmits float64
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
	t := &Table{Run: r.Info.ID, Target: r.Info.Target, Firmware: r.Info.Firmware, Status: string(r.Info.Status), Knobs: r.Knobs, Fixed: r.Fixed, Probes: r.Probes, StudentT: opts.StudentT, Confidence: opts.confidence()}
	if r.Info.Status != store.Done {
		t.Warnings = append(t.Warnings, fmt.Sprintf("run %d is %s, not done: its figures are partial", r.Info.ID, r.Info.Status))
	}
	t.Warnings = append(t.Warnings, r.Warnings...)
	if w := widthWarning(r); w != "" {
		t.Warnings = append(t.Warnings, w)
	}
	if r.Baseline != nil {
		t.Baseline = r.Label(r.Baseline)
	} else {
		t.Warnings = append(t.Warnings, "no point has samples: there is no baseline to compare with")
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
		for _, name := range r.Probes {
			c := Cell{Probe: name, Mbps: SummarizeAt(nil, t.Confidence), Retransmits: math.NaN()}
			if ps := p.Probes[name]; ps != nil {
				c.Failed = ps.Failed
				if len(ps.Mbps) > 0 {
					c.Mbps = SummarizeAt(ps.Mbps, t.Confidence)
					warn(c.Mbps.Warnings)
				}
				c.Retransmits = median(ps.Retransmits)
				cpu, temp, power = append(cpu, ps.DUTCPU...), append(temp, ps.DUTTemp...), append(power, ps.Power...)
				if r.Baseline != nil && p != r.Baseline && len(ps.Mbps) > 0 {
					if bs := r.Baseline.Probes[name]; bs != nil && len(bs.Mbps) > 0 {
						d := CompareAt(bs.Mbps, ps.Mbps, t.Confidence)
						c.Delta = &d
						warn(d.Warnings)
					}
				}
			}
			row.Cells = append(row.Cells, c)
		}
		row.DUTCPU, row.TempC, row.PowerW = median(cpu), median(temp), median(power)
		t.Rows = append(t.Rows, row)
	}
	var family []*Delta
	for _, row := range t.Rows {
		for _, c := range row.Cells {
			family = append(family, c.Delta)
		}
	}
	AdjustDeltas(family)
	return t
}

// Family is how many comparisons against the baseline the table's p-values
// are adjusted over.
func (t *Table) Family() int {
	for _, r := range t.Rows {
		for _, c := range r.Cells {
			if c.Delta != nil && c.Delta.Family > 0 {
				return c.Delta.Family
			}
		}
	}
	return 0
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
	return p.Probes[probe].Mbps
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
