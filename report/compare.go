package report

import (
	"cmp"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Test is the significance test a comparison uses.
type Test string

// Tests.
const (
	UTest Test = "utest" // Mann-Whitney U on the medians (benchstat's): assumes nothing
	TTest Test = "ttest" // Welch's t-test on the means: assumes normal noise, works with fewer repeats
	// SignRank is the Wilcoxon signed-rank test of per-round differences,
	// for two points of one run paired by round (CompareAxis).
	SignRank Test = "signrank"
	Sign     Test = "sign" // the exact sign test of per-round differences
)

// CompareOptions set the regression gate.
type CompareOptions struct {
	// Threshold is the smallest change that can be a regression: percent of
	// A's figure, or percentage points for a metric told in points (loss).
	Threshold float64
	Metrics   []Metric // the metrics that can fail the gate; default throughput
	Test      Test     // default UTest for two runs, SignRank paired by round
	// Ignore lists knobs left out when points are matched: a firmware
	// knob differs between a baseline and a rerun by design. Nil means
	// DefaultIgnore; an empty, non-nil slice ignores nothing.
	Ignore []string
}

// DefaultIgnore is what CompareRuns leaves out of point matching by default.
var DefaultIgnore = []string{"firmware"}

// matchKey names a point by its knob values without the ignored knobs.
func matchKey(p *Point, ignore []string) string {
	knobs := make(map[string]string, len(p.Knobs))
	for k, v := range p.Knobs {
		if !slices.Contains(ignore, k) {
			knobs[k] = v
		}
	}
	return KnobsKey(knobs)
}

// Comparison is run B against run A, point by point.
type Comparison struct {
	A, B      RunInfo
	Threshold float64
	Test      Test
	Metrics   []Metric // gated metrics
	Design    Design   // independent runs, or paired by round within one run
	// DriftA and DriftB are what each run's drift check saw (Run.Drifts),
	// for independent runs.
	DriftA, DriftB []Drift
	Rows           []CompareRow
	Family         int      // gated rows with a test: what the p-values are adjusted over
	OnlyA          []string // points measured only in A, by key
	OnlyB          []string
	Warnings       []string
}

// RunInfo names a compared run.
type RunInfo struct {
	ID       int64  `json:"id"`
	Target   string `json:"target"`
	Firmware string `json:"firmware"`
}

func (r RunInfo) String() string {
	s := "run " + strconv.FormatInt(r.ID, 10)
	if r.Target != "" {
		s += " on " + r.Target
	}
	if r.Firmware != "" {
		s += " (" + r.Firmware + ")"
	}
	return s
}

// CompareRow is one metric of one probe at one point.
type CompareRow struct {
	Point string // the point's knob values: "blocklist=on ids@lan=off"
	// Value is, paired by round, the axis value compared against the base
	// (Design.Base) at Point; "" for independent runs.
	Value  string
	Probe  string
	Metric Metric
	Delta  Delta
	Change float64 // percent: the median's change (U test) or the mean's (t-test)
	// P is the test's p; PAdj the same adjusted by Benjamini–Hochberg over
	// the gated rows (Comparison.Family), NaN for a row the gate does not
	// judge.
	P, PAdj float64
	Shown   bool // the test shows a difference: PAdj < α for a gated row, P < α otherwise
	Gated   bool // the metric can fail the gate
	// Detectable is, for a gated row, the smallest change in percent the
	// gate flags at this point alone with probability Power, at these
	// samples' noise and numbers and this threshold (never below it): +Inf
	// when the test cannot flag this point alone at all, NaN when unknown.
	Detectable float64
	Regression bool
	// Pairs are, paired by round, the rounds both sides have; Dropped
	// the samples whose round the other side lacks.
	Pairs, Dropped int
	// Drift is, for independent runs, the larger of the two runs' drift
	// for this probe and metric (RunDrift), in the change's unit; NaN
	// where neither run measured one. WithinDrift marks a change the
	// test shows beyond the threshold in the bad direction that is not
	// beyond the drift: not called a regression.
	Drift       float64
	WithinDrift bool
}

// Regressions counts the regressions.
func (c *Comparison) Regressions() int {
	n := 0
	for _, r := range c.Rows {
		if r.Regression {
			n++
		}
	}
	return n
}

// CompareRuns matches the points of two runs by their knob values and
// tests every probe's metrics. A regression is a change the test shows
// after Benjamini–Hochberg adjustment over every gated row (adjusted
// p < α) that is larger than the threshold in the bad direction. With no
// change at all (an A/A pair) the chance that any row is flagged stays at
// most α however many rows there are; a change that touches many points
// keeps most of its power.
func CompareRuns(a, b *Run, opts CompareOptions) (*Comparison, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if opts.Test == SignRank || opts.Test == Sign {
		return nil, fmt.Errorf("test %s pairs rounds within one run; runs %d and %d are independent: use utest or ttest, or compare the points of one run across an axis", opts.Test, a.Info.ID, b.Info.ID)
	}
	bByKey, err := pointsByMatchKey(b, a.Info.ID, opts.Ignore)
	if err != nil {
		return nil, err
	}
	cr := &comparer{
		c:            &Comparison{A: runInfo(a), B: runInfo(b), Threshold: opts.Threshold, Test: opts.Test, Metrics: opts.Metrics},
		opts:         opts,
		missingProbe: map[string]bool{},
		warned:       map[string]bool{},
	}
	cr.c.Warnings = append(cr.c.Warnings, inventoryDiffs(a, b)...)
	matchedB := map[string]bool{}
	for _, pa := range a.Points {
		if !measuredWithSamples(pa) {
			continue
		}
		key := matchKey(pa, opts.Ignore)
		pb := bByKey[key]
		if pb == nil {
			cr.c.OnlyA = append(cr.c.OnlyA, key)
			continue
		}
		matchedB[key] = true
		label := a.Label(pa)
		if len(a.Knobs) == 0 {
			label = key
		}
		cr.comparePoint(label, a.Probes, pa, pb)
		cr.compareApplies(label, a.blackoutsAt(pa.Index), b.blackoutsAt(pb.Index))
	}
	for _, p := range b.Points {
		if key := matchKey(p, opts.Ignore); measuredWithSamples(p) && !matchedB[key] {
			cr.c.OnlyB = append(cr.c.OnlyB, key)
		}
	}
	if len(cr.c.Rows) == 0 {
		return nil, fmt.Errorf("runs %d and %d share no measured point with the same knob values and probe: nothing to compare", a.Info.ID, b.Info.ID)
	}
	cr.c.Metrics = gatedPresent(cr.c.Metrics, cr.c.Rows)
	cr.judge()
	dj, lines := newDriftJudge(a, b)
	cr.c.DriftA, cr.c.DriftB = a.Drifts(), b.Drifts()
	cr.c.Warnings = append(cr.c.Warnings, lines...)
	dj.apply(cr.c)
	cr.warnTooFewSamples()
	cr.warnFamily()
	return cr.c, nil
}

// gatedPresent are the gated metrics some row has, so that the default gate
// (throughput and the connection rate) names only what the probes measured;
// all of them when no row has any.
func gatedPresent(gated []Metric, rows []CompareRow) []Metric {
	var out []Metric
	for _, m := range gated {
		if slices.ContainsFunc(rows, func(r CompareRow) bool { return r.Metric == m }) {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return gated
	}
	return out
}

// withDefaults checks the options and fills in the defaults.
func (opts CompareOptions) withDefaults() (CompareOptions, error) {
	if opts.Threshold < 0 || math.IsNaN(opts.Threshold) {
		return opts, fmt.Errorf("threshold %v%%: give a percentage of 0 or more", opts.Threshold)
	}
	if len(opts.Metrics) == 0 {
		opts.Metrics = DefaultGate
	}
	if opts.Test == "" {
		opts.Test = UTest
	}
	if !slices.Contains([]Test{UTest, TTest, SignRank, Sign}, opts.Test) {
		return opts, fmt.Errorf("test %q: use utest or ttest for two runs, signrank or sign paired by round", opts.Test)
	}
	if opts.Ignore == nil {
		opts.Ignore = DefaultIgnore
	}
	return opts, nil
}

// measuredWithSamples reports whether a point has samples to compare.
func measuredWithSamples(p *Point) bool { return p.Measured() && hasSamples(p) }

// pointsByMatchKey indexes run b's comparable points by matchKey; two points
// that differ only in ignored knobs cannot be matched with run a's.
func pointsByMatchKey(b *Run, aID int64, ignore []string) (map[string]*Point, error) {
	byKey := map[string]*Point{}
	for _, p := range b.Points {
		if !measuredWithSamples(p) {
			continue
		}
		key := matchKey(p, ignore)
		if other := byKey[key]; other != nil {
			return nil, fmt.Errorf("run %d: points %d and %d differ only in ignored knobs (%s): they cannot be matched with run %d's points", b.Info.ID, other.Index, p.Index, strings.Join(ignore, ", "), aID)
		}
		byKey[key] = p
	}
	return byKey, nil
}

// comparer builds one Comparison, row by row.
type comparer struct {
	c            *Comparison
	opts         CompareOptions
	missingProbe map[string]bool // probes already warned about as missing in B
	warned       map[string]bool // the statistics' warnings already given
	samples      [][2][]float64  // per row: A's and B's values
}

// comparePoint compares every probe of two matched points.
func (cr *comparer) comparePoint(label string, probes []string, pa, pb *Point) {
	for _, probe := range probes {
		sa, sb := pa.Probes[probe], pb.Probes[probe]
		if len(sa.Headline()) == 0 || len(sb.Headline()) == 0 {
			if len(sa.Headline()) > 0 && !cr.missingProbe[probe] {
				cr.missingProbe[probe] = true
				cr.c.Warnings = append(cr.c.Warnings, fmt.Sprintf("probe %s has no samples in run %d at some points; those are not compared", probe, cr.c.B.ID))
			}
			continue
		}
		cr.compareProbe(label, probe, sa, sb)
	}
}

// ApplyProbe is the probe name compare gives the rows of an apply's
// figures (BlackoutTime, TCPSurvived), which belong to no probe.
const ApplyProbe = "apply"

// compareApplies adds the rows of the blackouts of two matched points'
// applies, where both runs measured some.
func (cr *comparer) compareApplies(label string, ba, bb []Blackout) {
	for _, m := range []Metric{BlackoutTime, TCPSurvived} {
		cr.add(label, ApplyProbe, m, applyValues(ba, m), applyValues(bb, m))
	}
}

// applyValues are the applies' figures of metric m: the time blocked, or
// the share of held connections that survived (none where none was held).
func applyValues(bs []Blackout, m Metric) []float64 {
	var out []float64
	for _, b := range bs {
		switch {
		case m == BlackoutTime:
			out = append(out, b.BlockedMS)
		case m == TCPSurvived && b.TCPHeld > 0:
			out = append(out, 100*float64(b.TCPSurvived)/float64(b.TCPHeld))
		}
	}
	return out
}

// compareProbe adds a row per metric both runs' samples of a probe have.
func (cr *comparer) compareProbe(label, probe string, sa, sb *ProbeSamples) {
	for _, m := range AllMetrics {
		cr.add(label, probe, m, m.values(sa), m.values(sb))
	}
}

// add is the row of metric m where both runs have values of it.
func (cr *comparer) add(label, probe string, m Metric, va, vb []float64) {
	if len(va) == 0 || len(vb) == 0 {
		return
	}
	row := cr.row(label, probe, m, Compare(va, vb))
	cr.c.Rows = append(cr.c.Rows, row)
	cr.samples = append(cr.samples, [2][]float64{va, vb})
	if row.Gated {
		cr.warnOnce(row.Delta.Warnings)
	}
}

// row is one metric's delta with the test's raw p; judge decides it.
func (cr *comparer) row(label, probe string, m Metric, d Delta) CompareRow {
	row := CompareRow{Point: label, Probe: probe, Metric: m, Delta: d, Change: m.change(&d, cr.opts.Test == TTest), P: d.P, PAdj: math.NaN(), Detectable: math.NaN(), Drift: math.NaN(), Gated: slices.Contains(cr.opts.Metrics, m)}
	if cr.opts.Test == TTest {
		row.P = d.TP
	}
	return row
}

// judge adjusts the gated rows' p by Benjamini–Hochberg, judges every row
// against the test and the threshold, and states each gated row's
// detectable change.
func (cr *comparer) judge() {
	var gated []int
	var p []float64
	for i, r := range cr.c.Rows {
		if r.Gated && !math.IsNaN(r.P) {
			gated = append(gated, i)
			p = append(p, r.P)
		}
	}
	cr.c.Family = len(gated)
	for k, q := range AdjustBH(p) {
		cr.c.Rows[gated[k]].PAdj = q
	}
	for i := range cr.c.Rows {
		r := &cr.c.Rows[i]
		r.Shown = r.P < r.Delta.Alpha
		if r.Gated {
			r.Shown = r.PAdj < r.Delta.Alpha
			if cr.c.Family > 0 {
				// One change alone among Family rows: BH flags it at p < α/Family.
				mde := detectable(cr.samples[i][0], cr.samples[i][1], cr.opts.Test, r.Delta.Alpha/float64(cr.c.Family), r.Metric.InPoints())
				if cr.c.Design.Paired {
					mde = pairedDetectable(cr.samples[i][0], cr.opts.Test, r.Delta.Alpha/float64(cr.c.Family))
				}
				r.Detectable = math.Max(mde, cr.opts.Threshold)
				if math.IsNaN(mde) {
					r.Detectable = mde
				}
			}
		}
		bad := r.Change > cr.opts.Threshold
		if r.Metric.HigherIsBetter() {
			bad = r.Change < -cr.opts.Threshold
		}
		r.Regression = r.Gated && r.Shown && bad
		if r.Gated && r.Metric == CanaryPassed && slices.Max(cr.samples[i][0]) == 0 && slices.Max(cr.samples[i][1]) > 0 {
			// A trigger through an IPS that passed none before is the box
			// letting through what its rules drop: a fact, not noise.
			r.Regression = true
			cr.c.Warnings = append(cr.c.Warnings, fmt.Sprintf("fail-open at %s, probe %s: the IPS canary's triggers passed in run %d's samples where run %d's IPS let none through; a regression whatever the statistics", r.Point, r.Probe, cr.c.B.ID, cr.c.A.ID))
		}
		// An IDS's misses (canary-missed) are left to the statistics: a
		// passive IDS misses copies under load by chance, where an inline
		// IPS that lets a trigger through has failed open.
	}
}

// warnOnce passes on a gated delta's warnings, each once; the t-test has no
// use for the warnings about the medians' confidence intervals.
func (cr *comparer) warnOnce(warnings []string) {
	for _, w := range warnings {
		if !cr.warned[w] && (cr.opts.Test == UTest || !strings.Contains(w, "confidence interval")) {
			cr.warned[w] = true
			cr.c.Warnings = append(cr.c.Warnings, w)
		}
	}
}

// warnTooFewSamples says when a gated row has too few samples for the U
// test to show any difference, so the gate cannot fail.
func (cr *comparer) warnTooFewSamples() {
	if cr.opts.Test != UTest {
		return
	}
	for _, r := range cr.c.Rows {
		if n := min(r.Delta.Base.N, r.Delta.New.N); r.Gated && n < MinSamplesUTest {
			cr.c.Warnings = append(cr.c.Warnings, fmt.Sprintf("with %d samples on a side the U test cannot show any difference at α=%.2f, so this gate cannot fail: use %d or more repeats, or --test ttest",
				n, r.Delta.Alpha, MinSamplesUTest))
			return
		}
	}
}

// warnFamily says when the U test, at these repeats and this many gated
// rows, cannot flag a change at one point alone after the adjustment, and
// names the repeats that could.
func (cr *comparer) warnFamily() {
	m := cr.c.Family
	if cr.opts.Test != UTest || m == 0 {
		return
	}
	alpha := cr.c.Rows[0].Delta.Alpha
	for _, r := range cr.c.Rows {
		na, nb := r.Delta.Base.N, r.Delta.New.N
		if minP := MinPUTest(na, nb); r.Gated && !math.IsNaN(r.P) && minP*float64(m) >= alpha && minP < alpha {
			msg := fmt.Sprintf("with %d+%d samples and %d gated comparisons a regression at one point alone cannot be flagged: the U test's smallest p, %.4f, adjusted over %d comparisons is %.3f, not below α=%.2f; only a change at several points together can be",
				na, nb, m, minP, m, math.Min(1, minP*float64(m)), alpha)
			if need := RepeatsForFamily(m, alpha); need > 0 {
				msg += fmt.Sprintf(". Use %d or more repeats in both runs, or --test ttest", need)
			}
			cr.c.Warnings = append(cr.c.Warnings, msg)
			return
		}
	}
}

// MinSamplesUTest is the fewest samples per side for which the U test can
// reach p < 0.05 at all (n=3 against 3 gives p ≥ 0.1 whatever the data).
const MinSamplesUTest = 4

func runInfo(r *Run) RunInfo {
	return RunInfo{ID: r.Info.ID, Target: r.Info.Target, Firmware: r.Info.Firmware}
}

func (c *Comparison) testName() string {
	if c.Design.Paired {
		return pairedTestName(c.Test, c.Design.Rounds)
	}
	if c.Test == TTest {
		return "Welch's t-test on the means"
	}
	return "Mann-Whitney U test on the medians"
}

// WriteText writes the comparison the way benchstat does: per metric a
// table with A's and B's centers ± their interval and B's change "vs base",
// "~" where the test shows no difference; regressions are marked.
func (c *Comparison) WriteText(w io.Writer) error {
	var b strings.Builder
	if c.Design.Paired {
		fmt.Fprintf(&b, "A: %s, %s=%s\nB: %s, %s=%s\n", c.A, c.Design.Axis, c.Design.Base, c.B, c.Design.Axis, strings.Join(c.values(), ", "))
	} else {
		fmt.Fprintf(&b, "A: %s\nB: %s\n", c.A, c.B)
	}
	fmt.Fprintf(&b, "design: %s\n", c.Design)
	names := make([]string, len(c.Metrics))
	var points, ms []string
	for i, m := range c.Metrics {
		names[i] = string(m)
		switch {
		case m == BlackoutTime:
			ms = append(ms, string(m))
		case m.InPoints():
			points = append(points, string(m))
		}
	}
	var units []string
	if len(points) > 0 {
		units = append(units, "percentage points for "+strings.Join(points, ", "))
	}
	if len(ms) > 0 {
		units = append(units, "ms for "+strings.Join(ms, ", "))
	}
	inPoints := ""
	if len(units) > 0 {
		inPoints = " (" + strings.Join(units, "; ") + ")"
	}
	fmt.Fprintf(&b, "regression: %s changed beyond %s%%%s in the bad direction, shown by the %s at α=0.05 after Benjamini–Hochberg adjustment over the %d gated comparisons (p adj)\n",
		strings.Join(names, ", "), strconv.FormatFloat(c.Threshold, 'f', -1, 64), inPoints, c.testName(), c.Family)
	fmt.Fprintf(&b, "detectable: the smallest change the gate flags at one point alone with %.0f%% power, at these samples' noise and numbers\n", 100*Power)
	center := "median"
	if c.Test == TTest {
		center = "mean"
	}
	for _, m := range AllMetrics {
		for _, value := range c.values() {
			var rows []CompareRow
			for _, r := range c.Rows {
				if r.Metric == m && r.Value == value {
					rows = append(rows, r)
				}
			}
			if len(rows) > 0 {
				c.writeTable(&b, m, value, center, rows)
			}
		}
	}
	if len(c.OnlyA) > 0 || len(c.OnlyB) > 0 {
		b.WriteString("\n")
		for _, k := range c.OnlyA {
			if c.Design.Paired {
				fmt.Fprintf(&b, "no other %s value measured beside it, not compared: %s\n", c.Design.Axis, k)
				continue
			}
			fmt.Fprintf(&b, "only in run %d, not compared: %s\n", c.A.ID, k)
		}
		for _, k := range c.OnlyB {
			if c.Design.Paired {
				fmt.Fprintf(&b, "no %s=%s point beside it, not compared: %s\n", c.Design.Axis, c.Design.Base, k)
				continue
			}
			fmt.Fprintf(&b, "only in run %d, not compared: %s\n", c.B.ID, k)
		}
	}
	if len(c.Warnings) > 0 {
		b.WriteString("\n")
		for _, wn := range c.Warnings {
			fmt.Fprintf(&b, "warning: %s\n", wn)
		}
	}
	if n := c.Regressions(); n > 0 {
		fmt.Fprintf(&b, "\n%d regressions\n", n)
	} else {
		b.WriteString("\nno regression\n")
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

// values are the compared axis values in row order; one "" for
// independent runs.
func (c *Comparison) values() []string {
	if !c.Design.Paired {
		return []string{""}
	}
	var out []string
	for _, r := range c.Rows {
		if !slices.Contains(out, r.Value) {
			out = append(out, r.Value)
		}
	}
	return out
}

// writeTable writes one metric's rows (paired: of one axis value).
func (c *Comparison) writeTable(b *strings.Builder, m Metric, value, center string, rows []CompareRow) {
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	colA, colB := fmt.Sprintf("run %d", c.A.ID), fmt.Sprintf("run %d", c.B.ID)
	if c.Design.Paired {
		colA, colB = c.Design.Axis+"="+c.Design.Base, c.Design.Axis+"="+value
	}
	fmt.Fprintf(tw, "\t│ %s\t│ %s\t\t\t\t\t\t│\n", colA, colB)
	fmt.Fprintf(tw, "%s\t│ %s\t│ %s\tvs base\tp\tp adj\tn\tdetectable\t│\n", m.unit(), center, center)
	for _, r := range rows {
		sa, sb := r.Delta.Base, r.Delta.New
		ca, cb := formatCenter(sa, c.Test, m), formatCenter(sb, c.Test, m)
		vs := "~"
		if r.Shown && isFinite(r.Change) {
			vs = fmt.Sprintf("%+.2f%s", r.Change, m.changeUnit())
		} else if r.Shown {
			vs = "?"
		}
		mark := ""
		if r.Regression {
			mark = "REGRESSION"
		}
		n := fmt.Sprintf("n=%d+%d", sa.N, sb.N)
		if c.Design.Paired {
			n = fmt.Sprintf("%d pairs", r.Pairs)
		}
		if r.WithinDrift {
			mark = fmt.Sprintf("within drift %.1f%%", r.Drift)
		}
		fmt.Fprintf(tw, "%s %s\t  %s\t  %s\t%s\t%s\t%s\t%s\t%s\t  %s\n", r.Probe, r.Point, ca, cb, vs, formatP(r.P), formatP(r.PAdj), n, formatDetectable(r.Detectable, m), mark)
	}
	tw.Flush()
}

// formatDetectable is a row's detectable change: "≥ 4.2%", "none" where
// the test cannot flag the point alone, "-" where unknown.
func formatDetectable(v float64, m Metric) string {
	switch {
	case math.IsInf(v, 1):
		return "none"
	case math.IsNaN(v):
		return "-"
	}
	return fmt.Sprintf("≥ %.1f%s", v, m.changeUnit())
}

func formatCenter(s Summary, test Test, m Metric) string {
	prec := m.info().prec
	if test == TTest {
		if !isFinite(s.Mean) {
			return "-"
		}
		return formatNum(s.Mean, prec) + " " + meanSpread(s)
	}
	return m.formatValue(s)
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the comparison as JUnit XML for CI systems: one test
// case per point and probe, failed when any gated metric regressed; points
// in only one run are skipped cases.
func (c *Comparison) WriteJUnit(w io.Writer) error {
	suite := junitSuite{
		Name: c.suiteName(),
		Properties: []junitProperty{
			{"run_a", c.A.String()}, {"run_b", c.B.String()},
			{"threshold_percent", strconv.FormatFloat(c.Threshold, 'f', -1, 64)}, {"test", string(c.Test)},
			{"adjustment", "benjamini-hochberg"}, {"family", strconv.Itoa(c.Family)}, {"design", c.Design.String()},
		},
	}
	type caseKey struct{ point, value, probe string }
	var order []caseKey
	cases := map[caseKey]*junitCase{}
	for _, r := range c.Rows {
		k := caseKey{r.Point, r.Value, r.Probe}
		jc := cases[k]
		if jc == nil {
			name := r.Point
			if c.Design.Paired {
				name += " " + c.Design.Axis + "=" + r.Value
			}
			jc = &junitCase{Classname: "fwab.compare." + r.Probe, Name: name, Time: "0"}
			cases[k] = jc
			order = append(order, k)
		}
		p := "p=" + formatP(r.P)
		if r.Gated {
			p += ", adjusted " + formatP(r.PAdj) + ", detectable " + formatDetectable(r.Detectable, r.Metric)
		}
		line := fmt.Sprintf("%s: %s -> %s, %s (%s)", r.Metric, formatCenter(r.Delta.Base, c.Test, r.Metric), formatCenter(r.Delta.New, c.Test, r.Metric), changeText(r), p)
		jc.SystemOut += line + "\n"
		if r.Regression {
			if jc.Failure == nil {
				jc.Failure = &junitFailure{Type: "regression"}
			}
			msg := fmt.Sprintf("%s %s beyond the %s%s threshold", r.Metric, changeText(r), strconv.FormatFloat(c.Threshold, 'f', -1, 64), r.Metric.changeUnit())
			if jc.Failure.Message != "" {
				jc.Failure.Message += "; "
			}
			jc.Failure.Message += msg
			jc.Failure.Text += line + "\n"
		}
	}
	for _, k := range order {
		suite.Cases = append(suite.Cases, *cases[k])
		if cases[k].Failure != nil {
			suite.Failures++
		}
	}
	for _, only := range []struct {
		run  int64
		keys []string
	}{{c.A.ID, c.OnlyA}, {c.B.ID, c.OnlyB}} {
		for _, k := range only.keys {
			suite.Cases = append(suite.Cases, junitCase{Classname: "fwab.compare", Name: k, Time: "0",
				Skipped: &junitSkipped{Message: fmt.Sprintf("measured only in run %d", only.run)}})
			suite.Skipped++
		}
	}
	suite.Tests = len(suite.Cases)
	out := junitSuites{Name: "fwab compare", Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func (c *Comparison) suiteName() string {
	if c.Design.Paired {
		return fmt.Sprintf("fwab compare run %d: %s=%s vs %s", c.A.ID, c.Design.Axis, c.Design.Base, strings.Join(c.values(), ", "))
	}
	return fmt.Sprintf("fwab compare run %d vs run %d", c.A.ID, c.B.ID)
}

func changeText(r CompareRow) string {
	u := r.Metric.changeUnit()
	if !r.Shown {
		if isFinite(r.Change) {
			return fmt.Sprintf("~ (%+.2f%s, not shown)", r.Change, u)
		}
		return "~"
	}
	if !isFinite(r.Change) {
		return "?"
	}
	return fmt.Sprintf("%+.2f%s", r.Change, u)
}

// recordedInventory is the part of a run's target info a sweep records of
// what ran on the box (fwapi.Inventory's JSON).
type recordedInventory struct {
	Inventory *struct {
		CPUModel string `json:"cpu_model"`
		Cores    int    `json:"cores"`
		Packages []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"packages"`
		NICs []struct {
			Name   string `json:"name"`
			Driver string `json:"driver"`
			Media  string `json:"media"`
		} `json:"nics"`
		AESNI         *bool           `json:"aesni"`
		CryptoModules map[string]bool `json:"crypto_modules"`
	} `json:"inventory"`
	Lab string `json:"lab"` // a lab target's profile (fwapi.Target.Lab)
}

// labShort is a lab profile's line without its calibration's figures
// (which vary from one `lab up` to the next): the profile, links and
// budget.
func labShort(lab string) string {
	short, _, _ := strings.Cut(lab, " (cgroup")
	return short
}

// inventoryDiffs names what differs between the boxes two runs ran on
// beyond the knobs: CPU, packages and their versions, NIC drivers and
// media. A firmware regression run expects the packages to change, a
// box-against-box run the hardware; anything else is a confounder.
func inventoryDiffs(a, b *Run) []string {
	var ia, ib recordedInventory
	if json.Unmarshal(a.Info.TargetInfo, &ia) != nil || json.Unmarshal(b.Info.TargetInfo, &ib) != nil || ia.Inventory == nil || ib.Inventory == nil {
		return nil
	}
	x, y := ia.Inventory, ib.Inventory
	var diffs []string
	if la, lb := labShort(ia.Lab), labShort(ib.Lab); la != lb {
		diffs = append(diffs, fmt.Sprintf("%s vs %s", cmp.Or(la, "no lab profile"), cmp.Or(lb, "no lab profile")))
	}
	if x.CPUModel != y.CPUModel || x.Cores != y.Cores {
		diffs = append(diffs, fmt.Sprintf("CPU %s × %d vs %s × %d", x.CPUModel, x.Cores, y.CPUModel, y.Cores))
	}
	pa, pb := map[string]string{}, map[string]string{}
	for _, p := range x.Packages {
		pa[p.Name] = p.Version
	}
	for _, p := range y.Packages {
		pb[p.Name] = p.Version
	}
	for _, name := range slices.Sorted(maps.Keys(pa)) {
		if v, ok := pb[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("package %s %s only in run %d", name, pa[name], a.Info.ID))
		} else if v != pa[name] {
			diffs = append(diffs, fmt.Sprintf("package %s %s vs %s", name, pa[name], v))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(pb)) {
		if _, ok := pa[name]; !ok {
			diffs = append(diffs, fmt.Sprintf("package %s %s only in run %d", name, pb[name], b.Info.ID))
		}
	}
	nb := map[string]string{}
	for _, n := range y.NICs {
		nb[n.Name] = n.Driver + " " + n.Media
	}
	for _, n := range x.NICs {
		if other, ok := nb[n.Name]; ok && other != n.Driver+" "+n.Media {
			diffs = append(diffs, fmt.Sprintf("NIC %s %s %s vs %s", n.Name, n.Driver, n.Media, other))
		}
	}
	if x.AESNI != nil && y.AESNI != nil && *x.AESNI != *y.AESNI {
		diffs = append(diffs, fmt.Sprintf("AES-NI %v vs %v", *x.AESNI, *y.AESNI))
	}
	for _, m := range slices.Sorted(maps.Keys(x.CryptoModules)) {
		if v, ok := y.CryptoModules[m]; ok && v != x.CryptoModules[m] {
			diffs = append(diffs, fmt.Sprintf("crypto module %s loaded %v vs %v", m, x.CryptoModules[m], v))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("runs %d and %d differ beyond the knobs compared: %s", a.Info.ID, b.Info.ID, strings.Join(diffs, "; "))}
}
