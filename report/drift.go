package report

import (
	"fmt"
	"math"
	"strings"
)

// Drift is what a run's drift check saw at one probe and metric: its
// baseline point measured once more after every regular round
// (store.DriftRound), against the same point's regular rounds.
type Drift struct {
	Point   string // the baseline point's label
	Probe   string
	Metric  Metric
	Regular float64 // the median of the regular rounds
	End     float64 // the re-measurement at the end
	// Change is End against Regular: percent of Regular, or for a metric
	// told in points the difference in its unit.
	Change float64

	headline Metric // the probe's headline metric, the one its note tells
}

// Drifts are the run's drift figures, one per probe and metric its drift
// check measured; nil when the run has none.
func (r *Run) Drifts() []Drift {
	var out []Drift
	for _, p := range r.Points {
		if p.End == nil {
			continue
		}
		for _, probe := range r.Probes {
			end, regular := p.End[probe], p.Probes[probe]
			if end == nil || regular == nil {
				continue
			}
			for _, m := range AllMetrics {
				ve, vr := m.values(end), m.values(regular)
				if len(ve) == 0 || len(vr) == 0 {
					continue
				}
				d := Drift{Point: r.Label(p), Probe: probe, Metric: m, Regular: median(vr), End: median(ve), headline: regular.HeadlineMetric()}
				switch {
				case m.InPoints():
					d.Change = d.End - d.Regular
				case d.Regular != 0:
					d.Change = (d.End/d.Regular - 1) * 100
				default:
					continue
				}
				out = append(out, d)
			}
		}
	}
	return out
}

type driftKey struct {
	probe  string
	metric Metric
}

// driftJudge holds two independent runs' drift checks and judges rows by
// them: a change no larger than the larger drift of the two runs at that
// probe and metric is not called a regression.
type driftJudge struct {
	limit map[driftKey]float64 // the larger |drift| of the runs that have one
}

// newDriftJudge reads both runs' drift checks and says what they saw.
func newDriftJudge(a, b *Run) (*driftJudge, []string) {
	da, db := a.Drifts(), b.Drifts()
	if len(da) == 0 && len(db) == 0 {
		return nil, nil
	}
	j := &driftJudge{limit: map[driftKey]float64{}}
	for _, ds := range [][]Drift{da, db} {
		for _, d := range ds {
			k := driftKey{d.Probe, d.Metric}
			j.limit[k] = math.Max(j.limit[k], math.Abs(d.Change))
		}
	}
	var lines []string
	for _, run := range []struct {
		r  *Run
		ds []Drift
	}{{a, da}, {b, db}} {
		if len(run.ds) == 0 {
			lines = append(lines, fmt.Sprintf("run %d has no drift check (it did not re-measure its baseline at its end): only run %d's drift bounds the changes", run.r.Info.ID, other(a, b, run.r).Info.ID))
			continue
		}
		if note := driftNote(run.r, run.ds); note != "" {
			lines = append(lines, note)
		}
	}
	return j, lines
}

// DriftNote says how far the run drifted by its drift check, in each
// probe's headline metric (throughput, or a connect probe's rate): "" when
// it has none.
func (r *Run) DriftNote() string { return driftNote(r, r.Drifts()) }

func driftNote(r *Run, ds []Drift) string {
	var parts []string
	for _, d := range ds {
		if d.Metric == d.headline {
			parts = append(parts, fmt.Sprintf("%s %s (%s → %s %s)", d.Probe, formatChange(d.Change, d.Metric), formatNum(d.Regular, d.Metric.info().prec), formatNum(d.End, d.Metric.info().prec), d.Metric.unit()))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("run %d drifted %s at its baseline %s between its regular rounds and its end", r.Info.ID, strings.Join(parts, ", "), ds[0].Point)
}

func other(a, b, r *Run) *Run {
	if r == a {
		return b
	}
	return a
}

// of is the drift limit of a row; NaN when neither run measured one.
func (j *driftJudge) of(r CompareRow) float64 {
	if j == nil {
		return math.NaN()
	}
	if v, ok := j.limit[driftKey{r.Probe, r.Metric}]; ok {
		return v
	}
	return math.NaN()
}

// apply marks the regressions no larger than the drift as within it, and
// says so once with the figures.
func (j *driftJudge) apply(c *Comparison) {
	if j == nil {
		return
	}
	within, most := 0, 0.0
	for i := range c.Rows {
		r := &c.Rows[i]
		r.Drift = j.of(*r)
		if r.Regression && isFinite(r.Drift) && math.Abs(r.Change) <= r.Drift {
			r.Regression, r.WithinDrift = false, true
			within++
			most = math.Max(most, r.Drift)
		}
	}
	if within > 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%d changes beyond the threshold are no larger than the drift the runs saw (up to %.1f%%), so they are not called regressions (marked \"within drift\"): re-measure both, or measure them in one run paired by round", within, most))
	}
}

func formatChange(v float64, m Metric) string {
	return fmt.Sprintf("%+.2f%s", v, m.changeUnit())
}
