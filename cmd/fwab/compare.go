package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/fwab/fwab/internal/atomicfile"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
	"github.com/spf13/cobra"
)

type compareOptions struct {
	json      bool
	db        string
	threshold string
	junit     string
	test      string
	metrics   []string
	ignore    []string
	axis      string
	base      string
	testbed   string
}

func newCompareCmd(io *streams) *cobra.Command {
	opts := &compareOptions{}
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B | compare RUN --axis KNOB [--base VALUE] | compare --testbed TESTBED",
		Short: "Compare two runs point by point, or one run across an axis; exit 1 on a regression",
		Long: `Compare run B against run A (the baseline: before a firmware upgrade, or box A),
or, with --axis, the points of one run that differ in that knob alone.

Two designs, and the output names the one used:
  independent runs (compare A B): points are matched by their knob values;
    points in only one run are listed and skipped. The runs were measured at
    different times, so whatever drifted between them (temperature, other
    traffic, the endpoints' state) is confounded with the change; --test
    utest (default) or ttest. Where a run re-measured its baseline at its
    end (the spec's drift_check, on by default), compare states the drift each
    run saw, and a change no larger than the larger of the two drifts is not
    called a regression (the row says "within drift" with the figure).
  paired by round (compare RUN --axis KNOB): a sweep measures every point once
    per round, close in time, so two points that differ in KNOB alone are
    paired by round and their per-round differences tested, which cancels the
    drift; points are matched by every knob but KNOB, --base (default: the
    axis's first value) is compared with every other value; a round missing on
    either side is dropped and counted. --test signrank (Wilcoxon signed-rank,
    default) or sign. The smallest p with n rounds is 2/2^n (0.031 at 6, 0.0078
    at 8), so a gate over m comparisons needs 2/2^n·m < 0.05: compare refuses,
    naming the rounds needed, when no comparison could be flagged.

compare --testbed TESTBED, for a nightly job, compares the testbed's newest
finished run (B) with the finished run of the same spec on that testbed
before it (A). When there is none, the first night, it says so and exits 0.

A regression is a change the significance test shows (p < 0.05 after
Benjamini-Hochberg adjustment over every gated comparison, so an unchanged
firmware fails about 1 run in 20 however large the matrix) that is larger than
the threshold in the bad direction: throughput or UDP packet rate (pps) down;
retransmits, DUT CPU, UDP loss or jitter, ping latency (latency) or ping loss
under load up. Loss and ping-loss changes are in percentage points, so
--metric loss --fail-on-regression 0.5% fails when loss rose by more than half
a point; every other change is in percent of run A's figure. Write the
threshold 3% or 0.03 (` + percentRule + `).
Each row states its raw and adjusted p and the smallest change the gate would
have flagged at that point alone; a warning names the repeats needed when none
could be. The exit status is 1 only when there is a regression, 2 for bad
arguments or input, 0 otherwise. --junit writes JUnit XML for CI systems.`,
		Example: "  fwab compare 12 14 --fail-on-regression 3% --junit compare.xml\n" +
			"  fwab compare 14 --axis ids@lan --base off\n" +
			"  fwab compare --testbed t730 --fail-on-regression 0.03",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.testbed != "" && opts.axis != "":
				return usageErrorf("--testbed compares two runs; --axis compares within one: give the run, compare RUN --axis %s", opts.axis)
			case opts.testbed != "" && len(args) > 0:
				return usageErrorf("--testbed picks the two runs itself: give no run with it, or give two runs without --testbed")
			case opts.testbed != "":
				return nil
			case opts.axis != "" && len(args) != 1:
				return usageErrorf("compare --axis takes one run, the one whose points it pairs by round; got %d arguments", len(args))
			case opts.axis != "":
				return nil
			case len(args) == 1:
				return usageErrorf("compare %s: one run is compared within itself, across an axis: give --axis KNOB (fwab compare %s --axis KNOB), or a second run to compare it with", args[0], args[0])
			case len(args) != 2:
				return usageErrorf("compare takes two runs, RUN_A RUN_B; got %d arguments (or one run with --axis KNOB, or --testbed TESTBED alone)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			// Every flag is checked first, so that a first night with
			// nothing to compare does not pass a flag that fails later.
			copts, err := opts.parse()
			if err != nil {
				return err
			}
			if opts.testbed != "" {
				return runCompareTestbed(cmd.Context(), opts, copts, io)
			}
			a, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			if opts.axis != "" {
				if cmd.Flags().Changed("ignore-knob") {
					return usageErrorf("--ignore-knob matches two runs' points; with --axis the points differ in %s alone", opts.axis)
				}
				return runCompare(cmd.Context(), opts, copts, a, a, io)
			}
			if opts.base != "" {
				return usageErrorf("--base %s names the value of --axis compared against; give --axis KNOB too", opts.base)
			}
			b, err := parseRunID(args[1])
			if err != nil {
				return err
			}
			return runCompare(cmd.Context(), opts, copts, a, b, io)
		},
	}
	addDBFlag(cmd.Flags(), &opts.db, "results `database`")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the comparison as JSON (the exit status is the same)")
	cmd.Flags().StringVar(&opts.threshold, "fail-on-regression", "3%", "smallest change that counts as a regression: a `percentage`, 3% or 0.03 ("+percentRule+")")
	cmd.Flags().StringVar(&opts.junit, "junit", "", "write JUnit XML to `file`")
	cmd.Flags().StringVar(&opts.test, "test", "", "significance test: for two runs utest (Mann-Whitney, on medians; the default) or ttest (Welch, on means; works with fewer repeats); with --axis signrank (Wilcoxon signed-rank of the per-round differences; the default) or sign (the exact sign test)")
	cmd.Flags().StringVar(&opts.axis, "axis", "", "compare the points of one run that differ in this `knob` alone, paired by round")
	cmd.Flags().StringVar(&opts.base, "base", "", "with --axis, the `value` the others are compared against (default: the axis's first value)")
	cmd.Flags().StringVar(&opts.testbed, "testbed", "", "compare the newest finished run on `TESTBED` (as 'fwab runs list' shows it, or a target name) with the one of the same spec before it; exit 0 when there is none yet")
	cmd.Flags().StringSliceVar(&opts.ignore, "ignore-knob", report.DefaultIgnore, "knobs left out when points are matched (a firmware knob differs by design)")
	cmd.Flags().StringSliceVar(&opts.metrics, "metric", gateNames(report.DefaultGate), "metrics that can fail the gate: "+metricNames())
	return cmd
}

// metricNames lists the metrics --metric takes.
// gateNames are the names of metrics, for a flag's default.
func gateNames(ms []report.Metric) []string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = string(m)
	}
	return names
}

func metricNames() string {
	names := make([]string, len(report.AllMetrics))
	for i, m := range report.AllMetrics {
		names[i] = string(m)
	}
	return strings.Join(names, ", ")
}

// parse checks compare's flags and turns them into the options
// of a comparison.
func (opts *compareOptions) parse() (report.CompareOptions, error) {
	threshold, err := parsePercent("--fail-on-regression", opts.threshold, true)
	if err != nil {
		return report.CompareOptions{}, err
	}
	copts := report.CompareOptions{Threshold: threshold, Test: report.Test(opts.test), Ignore: append([]string{}, opts.ignore...)}
	switch {
	case opts.axis == "" && copts.Test != "" && copts.Test != report.UTest && copts.Test != report.TTest:
		hint := ""
		if copts.Test == report.SignRank || copts.Test == report.Sign {
			hint = " (signrank and sign pair the rounds of one run: compare RUN --axis KNOB)"
		}
		return copts, usageErrorf("--test %q: two runs are independent: use utest or ttest%s", opts.test, hint)
	case opts.axis != "" && copts.Test != "" && copts.Test != report.SignRank && copts.Test != report.Sign:
		return copts, usageErrorf("--test %q: --axis pairs rounds within one run: use signrank or sign", opts.test)
	}
	for _, m := range opts.metrics {
		metric, err := report.ParseMetric(strings.TrimSpace(m))
		if err != nil {
			return copts, usageErrorf("--metric: %w", err)
		}
		copts.Metrics = append(copts.Metrics, metric)
	}
	return copts, nil
}

// firstRunJSON is `fwab compare --testbed --json` when the testbed has no
// earlier run to compare with.
type firstRunJSON struct {
	Compared bool   `json:"compared"` // always false
	Run      int64  `json:"run"`
	Testbed  string `json:"testbed"`
	Message  string `json:"message"`
}

// runCompareTestbed compares the testbed's newest finished run with the
// one of the same spec before it, or says that there is none yet.
func runCompareTestbed(ctx context.Context, opts *compareOptions, copts report.CompareOptions, io *streams) error {
	a, b, err := latestRuns(ctx, opts.db, opts.testbed)
	if err != nil {
		return err
	}
	if a.ID == 0 {
		msg := fmt.Sprintf("run %d is the first finished run of its spec on testbed %s: nothing to compare it with yet; the next run is compared with it", b.ID, testbedCell(b))
		if opts.json {
			return writeJSON(io.Out, firstRunJSON{Run: b.ID, Testbed: testbedCell(b), Message: msg})
		}
		fmt.Fprintln(io.Out, msg)
		return nil
	}
	return runCompare(ctx, opts, copts, a.ID, b.ID, io)
}

// latestRuns returns the newest finished run on testbed, b, and the
// finished run before it on b's testbed made from the same spec, a; a.ID
// is 0 when there is none.
func latestRuns(ctx context.Context, db, testbed string) (a, b store.Run, err error) {
	st, err := openResults(ctx, db)
	if err != nil {
		return a, b, err
	}
	defer st.Close()
	runs, err := st.Runs(ctx) // newest first
	if err != nil {
		return a, b, err
	}
	for _, r := range runs {
		switch {
		case r.Status != store.Done || !onTestbed(r.Run, testbed):
		case b.ID == 0:
			b = r.Run
		case r.Testbed == b.Testbed && r.SpecHash == b.SpecHash:
			return r.Run, b, nil
		}
	}
	if b.ID == 0 {
		return a, b, usageErrorf("no finished run on testbed %s in %s: 'fwab runs list --testbed %s' shows its runs", testbed, store.Redact(db), testbed)
	}
	return a, b, nil
}

func runCompare(ctx context.Context, opts *compareOptions, copts report.CompareOptions, a, b int64, io *streams) error {
	// Exit status 1 means a regression and nothing else, so that CI can
	// tell a slower firmware from a broken job: every other failure is 2.
	var c *report.Comparison
	var testbeds string
	var err error
	if opts.axis != "" {
		c, err = compareAxis(ctx, opts.db, a, opts.axis, opts.base, copts)
	} else {
		c, testbeds, err = compareRuns(ctx, opts.db, a, b, copts)
	}
	if err != nil {
		return usageError{err}
	}
	switch {
	case testbeds == "":
	case opts.json:
		c.Warnings = append([]string{testbeds}, c.Warnings...)
	default:
		fmt.Fprintln(io.Out, testbeds) // the first line: it changes what the rest means
	}
	if opts.json {
		if err := writeJSON(io.Out, comparisonJSON(c)); err != nil {
			return err
		}
	} else if err := c.WriteText(io.Out); err != nil {
		return usageError{err}
	}
	if opts.junit != "" {
		var buf bytes.Buffer
		if err := c.WriteJUnit(&buf); err != nil {
			return usageError{err}
		}
		if err := atomicfile.WriteFile(opts.junit, buf.Bytes(), 0o644); err != nil {
			return usageErrorf("junit: %w", err)
		}
	}
	if c.Regressions() > 0 {
		return silentError{exitFailure}
	}
	return nil
}

// compareRuns compares run a with run b, and says when they are on
// different testbeds.
func compareRuns(ctx context.Context, db string, a, b int64, opts report.CompareOptions) (*report.Comparison, string, error) {
	st, err := openResults(ctx, db)
	if err != nil {
		return nil, "", err
	}
	defer st.Close()
	ra, err := loadRun(ctx, st, db, a)
	if err != nil {
		return nil, "", err
	}
	rb, err := loadRun(ctx, st, db, b)
	if err != nil {
		return nil, "", err
	}
	c, err := report.CompareRuns(ra, rb, opts)
	if err != nil {
		return nil, "", fmt.Errorf("compare: %w", err)
	}
	return c, testbedLine(ra.Info, rb.Info), nil
}

// compareAxis compares the points of run id that differ in axis alone,
// paired by round.
func compareAxis(ctx context.Context, db string, id int64, axis, base string, opts report.CompareOptions) (*report.Comparison, error) {
	st, err := openResults(ctx, db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	r, err := loadRun(ctx, st, db, id)
	if err != nil {
		return nil, err
	}
	c, err := report.CompareAxis(r, axis, base, opts)
	if err != nil {
		return nil, fmt.Errorf("compare --axis: %w", err)
	}
	return c, nil
}

// testbedLine says when the two runs are on different testbeds: allowed
// (box A or box B), but then the change is the boxes', not a knob's or a
// firmware's. "" on one testbed, or when either run predates testbeds.
func testbedLine(a, b store.Run) string {
	if a.Testbed == "" || b.Testbed == "" || a.Testbed == b.Testbed {
		return ""
	}
	return fmt.Sprintf("different testbeds: run %d on %s, run %d on %s: this compares two boxes, not one box before and after", a.ID, a.Testbed, b.ID, b.Testbed)
}

// compareJSON is `fwab compare --json`: every comparison row with both
// medians, their intervals (null where n is too small for one), the change
// the test's p, raw and adjusted, and the detectable change.
type compareJSON struct {
	A           report.RunInfo `json:"a"`
	B           report.RunInfo `json:"b"`
	Threshold   float64        `json:"threshold_pct"`
	Test        string         `json:"test"`
	Design      designJSON     `json:"design"`
	DriftA      []driftJSON    `json:"drift_a,omitempty"` // what run A's drift check saw
	DriftB      []driftJSON    `json:"drift_b,omitempty"`
	Adjustment  string         `json:"adjustment"` // of the gated rows' p
	Family      int            `json:"family"`     // gated rows adjusted over
	Regressions int            `json:"regressions"`
	Rows        []compareRow   `json:"rows"`
	OnlyA       []string       `json:"only_in_a"`
	OnlyB       []string       `json:"only_in_b"`
	Warnings    []string       `json:"warnings"`
}

// designJSON is how the two sides were measured: "independent" runs, or
// "paired" by round within one run across an axis.
type designJSON struct {
	Kind   string `json:"kind"`
	Text   string `json:"text"`
	Run    int64  `json:"run,omitempty"`
	Axis   string `json:"axis,omitempty"`
	Base   string `json:"base,omitempty"`
	Rounds int    `json:"rounds,omitempty"`
}

// driftJSON is one probe's and metric's drift check of a run.
type driftJSON struct {
	Point   string  `json:"point"`
	Probe   string  `json:"probe"`
	Metric  string  `json:"metric"`
	Regular float64 `json:"regular"` // the baseline's median over its regular rounds
	End     float64 `json:"end"`     // its re-measurement at the run's end
	Change  float64 `json:"change"`  // percent, or percentage points for a metric told in points
}

func driftsJSON(ds []report.Drift) []driftJSON {
	var out []driftJSON
	for _, d := range ds {
		out = append(out, driftJSON{Point: d.Point, Probe: d.Probe, Metric: string(d.Metric), Regular: d.Regular, End: d.End, Change: d.Change})
	}
	return out
}

type compareRow struct {
	Point       string   `json:"point"`
	Value       string   `json:"value,omitempty"` // paired: the axis value compared against the base
	Probe       string   `json:"probe"`
	Metric      string   `json:"metric"`
	A           median   `json:"a"`
	B           median   `json:"b"`
	ChangePct   float64  `json:"change_pct"`
	P           float64  `json:"p"`
	PAdj        *float64 `json:"p_adjusted"`     // null for a row the gate does not judge
	Detectable  *float64 `json:"detectable_pct"` // null where unknown or where the point alone cannot be flagged
	Shown       bool     `json:"shown"`
	Gated       bool     `json:"gated"`
	Regression  bool     `json:"regression"`
	Pairs       int      `json:"pairs,omitempty"`          // paired: the rounds both sides have
	Dropped     int      `json:"dropped_rounds,omitempty"` // paired: samples whose round the other side lacks
	Drift       *float64 `json:"drift,omitempty"`          // independent: the larger drift of the two runs
	WithinDrift bool     `json:"within_drift,omitempty"`   // shown beyond the threshold but not beyond the drift
	Warnings    []string `json:"warnings,omitempty"`
}

type median struct {
	N      int      `json:"n"`
	Median float64  `json:"median"`
	Lo     *float64 `json:"lo"`
	Hi     *float64 `json:"hi"`
}

func medianOf(s report.Summary) median {
	m := median{N: s.N, Median: s.Median}
	if !math.IsInf(s.Lo, 0) && !math.IsNaN(s.Lo) && !math.IsInf(s.Hi, 0) && !math.IsNaN(s.Hi) {
		m.Lo, m.Hi = &s.Lo, &s.Hi
	}
	return m
}

func finite(v float64) float64 {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
}

func comparisonJSON(c *report.Comparison) compareJSON {
	d := designJSON{Kind: "independent", Text: c.Design.String()}
	if c.Design.Paired {
		d = designJSON{Kind: "paired", Text: c.Design.String(), Run: c.Design.Run, Axis: c.Design.Axis, Base: c.Design.Base, Rounds: c.Design.Rounds}
	}
	out := compareJSON{A: c.A, B: c.B, Threshold: c.Threshold, Test: string(c.Test), Design: d, DriftA: driftsJSON(c.DriftA), DriftB: driftsJSON(c.DriftB),
		Adjustment: "benjamini-hochberg", Family: c.Family, Regressions: c.Regressions(),
		Rows: []compareRow{}, OnlyA: append([]string{}, c.OnlyA...), OnlyB: append([]string{}, c.OnlyB...), Warnings: append([]string{}, c.Warnings...)}
	for _, r := range c.Rows {
		out.Rows = append(out.Rows, compareRow{Point: r.Point, Value: r.Value, Probe: r.Probe, Metric: string(r.Metric), Pairs: r.Pairs, Dropped: r.Dropped, Drift: knownFigure(r.Drift), WithinDrift: r.WithinDrift,
			A: medianOf(r.Delta.Base), B: medianOf(r.Delta.New), ChangePct: finite(r.Change), P: finite(r.P), PAdj: knownFigure(r.PAdj), Detectable: knownFigure(r.Detectable),
			Shown: r.Shown, Gated: r.Gated, Regression: r.Regression, Warnings: r.Delta.Warnings})
	}
	return out
}
