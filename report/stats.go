package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/perf/benchmath"
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
	mean := benchmath.AssumeNormal.Summary(benchmath.NewSample(slices.Clone(v), &benchmath.DefaultThresholds), confidence)
	out := Summary{N: len(v), Confidence: confidence, Median: med.Center, Lo: med.Lo, Hi: med.Hi, Mean: mean.Center, MeanLo: mean.Lo, MeanHi: mean.Hi}
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
	P                 float64 // Mann-Whitney U test
	Alpha             float64
	Significant       bool // P < Alpha: a difference is shown
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
	d := Delta{Base: SummarizeAt(b, confidence), New: SummarizeAt(n, confidence), Pct: math.NaN(), PctLo: math.NaN(), PctHi: math.NaN(), P: math.NaN(),
		Alpha: benchmath.DefaultThresholds.CompareAlpha, MeanPct: math.NaN(), TP: math.NaN()}
	if len(b) == 0 || len(n) == 0 {
		d.Warnings = append(d.Warnings, "no valid samples to compare")
		return d
	}
	c := benchmath.AssumeNothing.Compare(benchmath.NewSample(b, &benchmath.DefaultThresholds), benchmath.NewSample(n, &benchmath.DefaultThresholds))
	d.P, d.Alpha = c.P, c.Alpha
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
