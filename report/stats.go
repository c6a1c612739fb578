package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/perf/benchmath"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
)

// Confidence is the default confidence level of the intervals fwab reports.
const Confidence = 0.95

// Summary is a sample's median with its confidence interval.
type Summary struct {
	N          int
	Confidence float64
	Median     float64
	Lo, Hi     float64 // the interval; ±Inf when n is too small for Confidence
	Mean       float64 // for the Student's t view
	MeanLo     float64
	MeanHi     float64
	Warnings   []string
}

// Summarize describes one point's values at the default confidence.
func Summarize(values []float64) Summary { return SummarizeAt(values, Confidence) }

// SummarizeAt describes one point's values with intervals at the given
// confidence level (0.95 for 95 %).
func SummarizeAt(values []float64, confidence float64) Summary {
	v := finite(values)
	if len(v) == 0 {
		return Summary{Confidence: confidence, Median: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), Mean: math.NaN(), MeanLo: math.NaN(), MeanHi: math.NaN(), Warnings: []string{"no valid samples"}}
	}
	s := benchmath.NewSample(v, &benchmath.DefaultThresholds)
	med := benchmath.AssumeNothing.Summary(s, confidence)
	mean, meanLo, meanHi := meanCI(v, confidence)
	out := Summary{N: len(v), Confidence: confidence, Median: med.Center, Lo: med.Lo, Hi: med.Hi, Mean: mean, MeanLo: meanLo, MeanHi: meanHi}
	warnings := s.Warnings
	if need := MinSamplesAt(confidence); len(v) < need {
		// Says what benchmath's "need >= N samples" says, with the remedy.
		out.Warnings = append(out.Warnings, fmt.Sprintf("n=%d is too few for a %s%% interval of the median; use %d or more repeats",
			len(v), strconv.FormatFloat(confidence*100, 'f', -1, 64), need))
	} else {
		warnings = append(med.Warnings, warnings...)
	}
	for _, w := range warnings {
		out.Warnings = append(out.Warnings, w.Error())
	}
	return out
}

// meanCI is benchmath's Student's t interval of the mean (AssumeNormal),
// with the t quantile, which benchmath finds by bisection each time, taken
// once per n and confidence from benchmath itself on a reference sample.
func meanCI(v []float64, confidence float64) (mean, lo, hi float64) {
	n := len(v)
	if n < 2 {
		s := benchmath.AssumeNormal.Summary(benchmath.NewSample(slices.Clone(v), &benchmath.DefaultThresholds), confidence)
		return s.Center, s.Lo, s.Hi
	}
	mean = stat.Mean(v, nil)
	half := tCritical(n, confidence) * stat.StdDev(v, nil) / math.Sqrt(float64(n))
	return mean, mean - half, mean + half
}

var tCriticalCache sync.Map // tKey → float64

type tKey struct {
	n          int
	confidence float64
}

// tCritical is the half-width of benchmath's mean interval in standard
// errors for n samples.
func tCritical(n int, confidence float64) float64 {
	key := tKey{n, confidence}
	if k, ok := tCriticalCache.Load(key); ok {
		return k.(float64)
	}
	ref := make([]float64, n)
	for i := range ref {
		ref[i] = float64(i)
	}
	s := benchmath.AssumeNormal.Summary(benchmath.NewSample(ref, &benchmath.DefaultThresholds), confidence)
	k := (s.Hi - s.Center) / (stat.StdDev(ref, nil) / math.Sqrt(float64(n)))
	tCriticalCache.Store(key, k)
	return k
}

var minSamplesCache sync.Map // confidence → int

// MinSamplesAt is the smallest n for which the median's interval at the
// confidence level is finite, as benchmath computes it (6 at 95 %, 8 at
// 99 %); 0 when no n up to 1000 reaches it.
func MinSamplesAt(confidence float64) int {
	if n, ok := minSamplesCache.Load(confidence); ok {
		return n.(int)
	}
	need := 0
	for n := 2; n <= 1000; n++ {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i)
		}
		sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(v, &benchmath.DefaultThresholds), confidence)
		if !math.IsInf(sum.Lo, 0) && !math.IsInf(sum.Hi, 0) {
			need = n
			break
		}
	}
	minSamplesCache.Store(confidence, need)
	return need
}

// Delta compares a point with the baseline.
type Delta struct {
	Base, New Summary
	// Pct is the change of the median in percent; PctLo and PctHi bound it
	// conservatively from the two medians' intervals.
	Pct, PctLo, PctHi float64
	// Diff is the change of the median in the metric's own unit (new minus
	// base), DiffLo and DiffHi bound it from the two medians' intervals;
	// MeanDiff is the change of the mean. Metrics told in percentage
	// points (loss) use these.
	Diff, DiffLo, DiffHi, MeanDiff float64
	P                              float64 // Mann-Whitney U test
	// PAdj is P adjusted by Benjamini–Hochberg over the Family comparisons
	// it was judged with (AdjustDeltas); P itself when Family is 0.
	PAdj        float64
	Family      int
	Alpha       float64
	Significant bool // PAdj < Alpha: a difference is shown
	// The Student's t view, for readers used to ministat: the change of the
	// mean in percent and Welch's two-sample t-test. It assumes normal noise,
	// which throughput often is not; the U test above assumes nothing.
	MeanPct      float64
	TP           float64
	TSignificant bool // TP < Alpha
	Warnings     []string
}

// String is benchstat's form: "+12.34%" or "~" where no difference is shown.
func (d Delta) String() string {
	if !d.Significant {
		return "~"
	}
	if math.IsNaN(d.Pct) {
		return "?"
	}
	return fmt.Sprintf("%+.2f%%", d.Pct)
}

// Compare tests whether values differ from base, with intervals at the
// default confidence.
func Compare(base, values []float64) Delta { return CompareAt(base, values, Confidence) }

// CompareAt is Compare with intervals at the given confidence level. The
// test's α stays benchmath's 0.05.
func CompareAt(base, values []float64, confidence float64) Delta {
	b, n := finite(base), finite(values)
	d := Delta{Base: SummarizeAt(b, confidence), New: SummarizeAt(n, confidence), Pct: math.NaN(), PctLo: math.NaN(), PctHi: math.NaN(), P: math.NaN(), PAdj: math.NaN(),
		Diff: math.NaN(), DiffLo: math.NaN(), DiffHi: math.NaN(), MeanDiff: math.NaN(),
		Alpha: benchmath.DefaultThresholds.CompareAlpha, MeanPct: math.NaN(), TP: math.NaN()}
	if len(b) == 0 || len(n) == 0 {
		d.Warnings = append(d.Warnings, "no valid samples to compare")
		return d
	}
	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(b, &benchmath.DefaultThresholds), benchmath.NewSample(n, &benchmath.DefaultThresholds))
	d.P, d.PAdj, d.Alpha = c.P, c.P, c.Alpha
	d.Significant = c.P < c.Alpha
	for _, w := range c.Warnings {
		d.Warnings = append(d.Warnings, w.Error())
	}
	if len(b) >= 2 && len(n) >= 2 {
		t := benchmath.AssumeNormal.Compare(benchmath.NewSample(slices.Clone(b), &benchmath.DefaultThresholds), benchmath.NewSample(slices.Clone(n), &benchmath.DefaultThresholds))
		d.TP = t.P
		d.TSignificant = t.P < d.Alpha
	}
	if d.Base.Mean != 0 {
		d.MeanPct = (d.New.Mean/d.Base.Mean - 1) * 100
	}
	d.Diff, d.MeanDiff = d.New.Median-d.Base.Median, d.New.Mean-d.Base.Mean
	if isFinite(d.Base.Lo) && isFinite(d.Base.Hi) && isFinite(d.New.Lo) && isFinite(d.New.Hi) {
		d.DiffLo, d.DiffHi = d.New.Lo-d.Base.Hi, d.New.Hi-d.Base.Lo
	}
	switch {
	case d.Base.Median == 0 && d.New.Median > 0:
		d.Pct = math.Inf(1) // from nothing to something, as retransmits can
	case d.Base.Median != 0:
		d.Pct = (d.New.Median/d.Base.Median - 1) * 100
		if d.Base.Lo > 0 && d.Base.Hi > 0 && !math.IsInf(d.Base.Hi, 0) && !math.IsInf(d.New.Hi, 0) {
			d.PctLo = (d.New.Lo/d.Base.Hi - 1) * 100
			d.PctHi = (d.New.Hi/d.Base.Lo - 1) * 100
		}
	}
	return d
}

// AdjustBH is the Benjamini–Hochberg adjustment of a family of p-values:
// the i-th smallest of m becomes min over j ≥ i of p(j)·m/j, at most 1, so
// that "adjusted p < α" rejects what the step-up procedure at level α
// rejects. NaN p-values (no test was made) are not in the family and stay
// NaN. The result is in the order of p.
func AdjustBH(p []float64) []float64 {
	out := make([]float64, len(p))
	var idx []int
	for i, v := range p {
		out[i] = math.NaN()
		if !math.IsNaN(v) {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(p[a], p[b]) })
	m := float64(len(idx))
	running := 1.0
	for k := len(idx) - 1; k >= 0; k-- {
		running = math.Min(running, p[idx[k]]*m/float64(k+1))
		out[idx[k]] = running
	}
	return out
}

// AdjustDeltas adjusts the U test's p of a family of comparisons by
// Benjamini–Hochberg and judges each by its adjusted p; nil entries are
// skipped. A run's table is one family: every point against the baseline,
// every probe.
func AdjustDeltas(ds []*Delta) {
	var live []*Delta
	var p []float64
	for _, d := range ds {
		if d != nil && !math.IsNaN(d.P) {
			live = append(live, d)
			p = append(p, d.P)
		}
	}
	for i, q := range AdjustBH(p) {
		live[i].PAdj, live[i].Family = q, len(live)
		live[i].Significant = q < live[i].Alpha
	}
}

var minPCache sync.Map // [2]int → float64

// MinPUTest is the smallest p the U test can give with na and nb samples:
// both samples apart, 2/C(na+nb, na) for the exact two-sided test (2/924
// at 6 against 6), as benchmath computes it.
func MinPUTest(na, nb int) float64 {
	key := [2]int{na, nb}
	if p, ok := minPCache.Load(key); ok {
		return p.(float64)
	}
	a, b := make([]float64, na), make([]float64, nb)
	for i := range a {
		a[i] = float64(i)
	}
	for i := range b {
		b[i] = float64(na + i)
	}
	p := 1.0
	if na > 0 && nb > 0 {
		p = benchmath.AssumeNothing.Compare(benchmath.NewSample(a, &benchmath.DefaultThresholds), benchmath.NewSample(b, &benchmath.DefaultThresholds)).P
	}
	minPCache.Store(key, p)
	return p
}

// RepeatsForFamily is the fewest repeats per side with which the U test
// can flag one comparison alone in a family of m after Benjamini–Hochberg
// adjustment: MinPUTest(n, n)·m < alpha. 0 when no n up to 1000 can.
func RepeatsForFamily(m int, alpha float64) int {
	for n := 2; n <= 1000; n++ {
		if MinPUTest(n, n)*float64(m) < alpha {
			return n
		}
	}
	return 0
}

// Power is the chance DetectableChange gives a change of its size to be
// flagged.
const Power = 0.8

// DetectableChange is the smallest change of the center, in percent of the
// baseline's, that a test at level alpha flags with probability Power at
// this noise and these repeats, from the samples' standard deviations
// (Welch's normal approximation with Student's t quantiles; for the U test
// divided by the square root of its asymptotic efficiency 3/π). +Inf when
// the U test cannot reach alpha at all with these sample sizes, NaN when
// there are fewer than 2 samples on a side.
func DetectableChange(base, values []float64, test Test, alpha float64) float64 {
	return detectable(base, values, test, alpha, false)
}

// detectable is DetectableChange, in the metric's own unit instead of in
// percent of the baseline's center when points is set.
func detectable(base, values []float64, test Test, alpha float64, points bool) float64 {
	b, v := finite(base), finite(values)
	if len(b) < 2 || len(v) < 2 {
		return math.NaN()
	}
	if test != TTest && MinPUTest(len(b), len(v)) >= alpha {
		return math.Inf(1)
	}
	center := stat.Mean(b, nil)
	if test != TTest {
		center = median(b)
	}
	if center == 0 && !points {
		return math.NaN()
	}
	se := math.Sqrt(stat.Variance(b, nil)/float64(len(b)) + stat.Variance(v, nil)/float64(len(v)))
	t := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(b) + len(v) - 2)}
	k := t.Quantile(1-alpha/2) + t.Quantile(Power)
	if test != TTest {
		k /= math.Sqrt(3 / math.Pi)
	}
	if points {
		return k * se
	}
	return 100 * k * se / math.Abs(center)
}

// MinSamples is the smallest n for which a median's 95 % interval and a
// U test at α = 0.05 can show anything (benchmath's warnings say so too).
const MinSamples = 6

func finite(values []float64) []float64 {
	out := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}
