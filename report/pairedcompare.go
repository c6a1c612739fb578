package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fwab/fwab/configxml"
)

// Design is how a comparison's two sides were measured, which decides the
// test it can use.
type Design struct {
	// Paired is set for two points of one run that differ in one axis:
	// every round measured both, close in time, so the per-round
	// differences cancel what drifts over the run. Otherwise the sides are
	// independent runs, which cannot be paired.
	Paired bool
	Run    int64  // the run, when paired
	Axis   string // the knob the two sides differ in, when paired
	Base   string // the axis value the others are compared against
	Rounds int    // the run's regular rounds, when paired
}

func (d Design) String() string {
	if !d.Paired {
		return "independent runs"
	}
	return fmt.Sprintf("paired by round within run %d, %d rounds (%s=%s against the others)", d.Run, d.Rounds, d.Axis, d.Base)
}

// CompareAxis compares, within one run, the points that differ only in
// axis: for every group of points equal in all other knobs, each value of
// the axis against base ("" for the axis's first value). The sides are
// paired by round (Figures of the same Round and Repeat; a round missing
// on either side is dropped and counted) and the per-round differences
// (in the metric's unit) go through opts.Test, SignRank (the default) or
// Sign. Judging, adjustment over the family and the gate are CompareRuns'.
func CompareAxis(r *Run, axis, base string, opts CompareOptions) (*Comparison, error) {
	if opts.Test == "" {
		opts.Test = SignRank
	}
	if opts.Test != SignRank && opts.Test != Sign {
		return nil, fmt.Errorf("test %q compares independent samples: a comparison paired by round takes signrank or sign", opts.Test)
	}
	opts.Ignore = []string{}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	axis = canonicalRef(axis)
	values := r.AxisValues(axis)
	if !slices.Contains(r.Knobs, axis) {
		if _, fixed := r.Fixed[axis]; fixed {
			return nil, fmt.Errorf("axis %s has one value (%s) in run %d: there is nothing to compare it with; sweep it over two values or more (axes: {%s: [A, B]})", axis, r.Fixed[axis], r.Info.ID, axis)
		}
		return nil, fmt.Errorf("axis %s is not a knob of run %d; its axes are %s", axis, r.Info.ID, axesList(r.Knobs))
	}
	if base == "" {
		base = values[0]
	}
	base = configxml.Canonical(axis, base)
	if !slices.Contains(values, base) {
		return nil, fmt.Errorf("--base %s: axis %s of run %d takes %s", base, axis, r.Info.ID, strings.Join(values, ", "))
	}
	design := Design{Paired: true, Run: r.Info.ID, Axis: axis, Base: base, Rounds: regularRounds(r)}
	info := runInfo(r)
	cr := &comparer{
		c:            &Comparison{A: info, B: info, Threshold: opts.Threshold, Test: opts.Test, Metrics: opts.Metrics, Design: design},
		opts:         opts,
		missingProbe: map[string]bool{},
		warned:       map[string]bool{},
	}
	others := slices.DeleteFunc(slices.Clone(r.Knobs), func(k string) bool { return k == axis })
	groups := map[string]map[string]*Point{} // match key → axis value → point
	var order []string
	for _, p := range r.Points {
		if !measuredWithSamples(p) {
			continue
		}
		key := matchKey(p, []string{axis})
		if groups[key] == nil {
			groups[key] = map[string]*Point{}
			order = append(order, key)
		}
		groups[key][p.Knobs[axis]] = p
	}
	dropped := 0
	for _, key := range order {
		g := groups[key]
		pb := g[base]
		for _, v := range values {
			p := g[v]
			switch {
			case v == base || p == nil:
				continue
			case pb == nil:
				cr.c.OnlyB = append(cr.c.OnlyB, key)
				continue
			}
			label := groupLabel(p, others)
			for _, probe := range r.Probes {
				sa, sb := pb.Probes[probe], p.Probes[probe]
				if len(sa.Headline()) == 0 || len(sb.Headline()) == 0 {
					continue
				}
				dropped += cr.comparePaired(label, v, probe, sa, sb)
			}
		}
		if pb != nil && len(g) == 1 {
			cr.c.OnlyA = append(cr.c.OnlyA, key)
		}
	}
	if len(cr.c.Rows) == 0 {
		return nil, fmt.Errorf("run %d has no two measured points that differ only in %s: nothing to compare", r.Info.ID, axis)
	}
	cr.c.Metrics = gatedPresent(cr.c.Metrics, cr.c.Rows)
	if dropped > 0 {
		cr.c.Warnings = append(cr.c.Warnings, fmt.Sprintf("%d rounds measured on one side only were dropped from the pairs ('fwab runs show %d' lists the samples)", dropped, r.Info.ID))
	}
	cr.judge()
	if err := cr.checkPairedRounds(); err != nil {
		return nil, err
	}
	return cr.c, nil
}

// comparePaired adds a row per metric of one probe at two points of the
// run, paired by round; it returns the rounds dropped because only one
// side has them.
func (cr *comparer) comparePaired(label, value, probe string, sa, sb *ProbeSamples) int {
	dropped := 0
	for _, m := range AllMetrics {
		va, vb := byRound(sa, m), byRound(sb, m)
		if len(va) == 0 || len(vb) == 0 {
			continue
		}
		var rounds []roundKey
		for k := range va {
			if _, ok := vb[k]; ok {
				rounds = append(rounds, k)
			}
		}
		slices.SortFunc(rounds, func(x, y roundKey) int { return cmp.Or(cmp.Compare(x.round, y.round), cmp.Compare(x.repeat, y.repeat)) })
		lost := len(va) + len(vb) - 2*len(rounds)
		if m == sa.HeadlineMetric() {
			dropped += lost
		}
		a, b := make([]float64, len(rounds)), make([]float64, len(rounds))
		diffs, changes := make([]float64, len(rounds)), make([]float64, 0, len(rounds))
		for i, k := range rounds {
			a[i], b[i] = va[k], vb[k]
			diffs[i] = b[i] - a[i]
			switch {
			case m.InPoints():
				changes = append(changes, diffs[i])
			case a[i] != 0:
				changes = append(changes, (b[i]/a[i]-1)*100)
			}
		}
		d := CompareAt(a, b, Confidence)
		d.Warnings = nil // the U test's, which this comparison does not make
		res := SignedRank(diffs)
		if cr.opts.Test == Sign {
			res = SignTest(diffs)
		}
		d.P, d.PAdj, d.TP = res.P, res.P, math.NaN()
		row := CompareRow{Point: label, Value: value, Probe: probe, Metric: m, Delta: d, Change: math.NaN(), P: res.P, PAdj: math.NaN(),
			Detectable: math.NaN(), Drift: math.NaN(), Gated: slices.Contains(cr.opts.Metrics, m), Pairs: len(rounds), Dropped: lost}
		if len(rounds) == 0 {
			row.P = math.NaN()
		}
		if len(changes) > 0 {
			row.Change = median(changes)
		}
		cr.c.Rows = append(cr.c.Rows, row)
		cr.samples = append(cr.samples, [2][]float64{changes, nil})
	}
	return dropped
}

type roundKey struct{ round, repeat int }

// byRound is a probe's figures of one metric by round and repeat.
func byRound(ps *ProbeSamples, m Metric) map[roundKey]float64 {
	out := map[roundKey]float64{}
	for _, f := range ps.Figures {
		if v := m.of(f); isFinite(v) {
			out[roundKey{f.Round, f.Repeat}] = v
		}
	}
	return out
}

// checkPairedRounds refuses a paired comparison in which no gated row has
// pairs enough for a p below α after the adjustment over the family
// (2/2ⁿ·m ≥ α), naming the rounds that would do, and warns when only some
// rows fall short.
func (cr *comparer) checkPairedRounds() error {
	m := cr.c.Family
	if m == 0 {
		return nil
	}
	alpha := cr.c.Rows[0].Delta.Alpha
	most, short := 0, 0
	for _, r := range cr.c.Rows {
		if !r.Gated || math.IsNaN(r.P) {
			continue
		}
		most = max(most, r.Pairs)
		if MinPPaired(r.Pairs)*float64(m) >= alpha {
			short++
		}
	}
	need := RoundsForFamily(m, alpha)
	if MinPPaired(most)*float64(m) >= alpha {
		return fmt.Errorf("with %d paired rounds a paired test's smallest p, 2/2^%d = %.4f, adjusted over %d gated comparisons is %.3f, not below α=%.2f: no regression could be flagged. Measure %d or more rounds (repeats: %d in the spec)",
			most, most, MinPPaired(most), m, math.Min(1, MinPPaired(most)*float64(m)), alpha, need, need)
	}
	if short > 0 {
		cr.c.Warnings = append(cr.c.Warnings, fmt.Sprintf("%d gated comparisons have too few paired rounds to be flagged alone after adjustment over %d: %d are needed", short, m, need))
	}
	return nil
}

// pairedDetectable is DetectableChange for paired rounds: the per-round
// changes' standard deviation over √n, times Student's t quantiles with
// n−1 degrees of freedom, divided by the square root of the test's
// asymptotic efficiency against the t-test (3/π for the signed-rank test,
// 2/π for the sign test). +Inf when n pairs cannot reach alpha at all.
func pairedDetectable(changes []float64, test Test, alpha float64) float64 {
	n := len(changes)
	if n < 2 {
		return math.NaN()
	}
	if MinPPaired(n) >= alpha {
		return math.Inf(1)
	}
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(n - 1)}
	k := t.Quantile(1-alpha/2) + t.Quantile(Power)
	are := 3 / math.Pi
	if test == Sign {
		are = 2 / math.Pi
	}
	return k / math.Sqrt(are) * stat.StdDev(changes, nil) / math.Sqrt(float64(n))
}

// regularRounds counts the rounds the run's samples were measured in.
func regularRounds(r *Run) int {
	seen := map[int]bool{}
	for _, p := range r.Points {
		for _, ps := range p.Probes {
			for _, f := range ps.Figures {
				seen[f.Round] = true
			}
		}
	}
	return len(seen)
}

// groupLabel names a group of points by the run's other axes.
func groupLabel(p *Point, others []string) string {
	parts := make([]string, 0, len(others))
	for _, k := range others {
		parts = append(parts, k+"="+p.Knobs[k])
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

func axesList(knobs []string) string {
	if len(knobs) == 0 {
		return "none (every point has the same knob values)"
	}
	return strings.Join(knobs, ", ")
}

// pairedTestName names the paired test for the text and JUnit output.
func pairedTestName(t Test, rounds int) string {
	name := "Wilcoxon signed-rank test"
	if t == Sign {
		name = "exact sign test"
	}
	return name + " of the per-round differences (" + strconv.Itoa(rounds) + " rounds)"
}
