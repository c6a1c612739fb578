package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
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
}

func newCompareCmd(io *streams) *cobra.Command {
	opts := &compareOptions{}
	cmd := &cobra.Command{
		Use:   "compare RUN_A RUN_B",
		Short: "Compare two runs point by point; exit 1 on a regression",
		Long: `Compare run B against run A (the baseline: before a firmware upgrade, or box A).
Points are matched by their knob values; points in only one run are listed and
skipped. A regression is a change the significance test shows (p < 0.05 after
Benjamini-Hochberg adjustment over every gated comparison, so an unchanged
firmware fails about 1 run in 20 however large the matrix) that is larger than
the threshold in the bad direction: throughput or UDP packet rate (pps) down;
retransmits, DUT CPU, UDP loss or jitter, ping latency (latency) or ping loss
under load up. Loss and ping-loss changes are in percentage points, so
--metric loss --fail-on-regression 0.5% fails when loss rose by more than half
a point; every other change is in percent of run A's figure.
Each row states its raw and adjusted p and the smallest change the gate would
have flagged at that point alone; a warning names the repeats needed when none
could be. The exit status is 1 only when there is a regression, 2 for bad
arguments or input, 0 otherwise. --junit writes JUnit XML for CI systems.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			b, err := parseRunID(args[1])
			if err != nil {
				return err
			}
			return runCompare(cmd.Context(), opts, a, b, io)
		},
	}
	addDBFlag(cmd.Flags(), &opts.db, "results `database`")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the comparison as JSON (the exit status is the same)")
	cmd.Flags().StringVar(&opts.threshold, "fail-on-regression", "3%", "smallest change that counts as a regression, in `percent`")
	cmd.Flags().StringVar(&opts.junit, "junit", "", "write JUnit XML to `file`")
	cmd.Flags().StringVar(&opts.test, "test", string(report.UTest), "significance test: utest (Mann-Whitney, on medians) or ttest (Welch, on means; works with fewer repeats)")
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

// parseThreshold reads "3%", "3" or "0.5%" as a percentage.
func parseThreshold(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v >= 100 {
		return 0, usageErrorf("--fail-on-regression %q: give a percentage from 0 to below 100, such as 3%%", s)
	}
	return v, nil
}

func runCompare(ctx context.Context, opts *compareOptions, a, b int64, io *streams) error {
	threshold, err := parseThreshold(opts.threshold)
	if err != nil {
		return err
	}
	copts := report.CompareOptions{Threshold: threshold, Test: report.Test(opts.test), Ignore: append([]string{}, opts.ignore...)}
	if copts.Test != report.UTest && copts.Test != report.TTest {
		return usageErrorf("--test %q: use utest or ttest", opts.test)
	}
	for _, m := range opts.metrics {
		metric, err := report.ParseMetric(strings.TrimSpace(m))
		if err != nil {
			return usageErrorf("--metric: %w", err)
		}
		copts.Metrics = append(copts.Metrics, metric)
	}
	// Exit status 1 means a regression and nothing else, so that CI can
	// tell a slower firmware from a broken job: every other failure is 2.
	c, testbeds, err := compareRuns(ctx, opts.db, a, b, copts)
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
	Adjustment  string         `json:"adjustment"` // of the gated rows' p
	Family      int            `json:"family"`     // gated rows adjusted over
	Regressions int            `json:"regressions"`
	Rows        []compareRow   `json:"rows"`
	OnlyA       []string       `json:"only_in_a"`
	OnlyB       []string       `json:"only_in_b"`
	Warnings    []string       `json:"warnings"`
}

type compareRow struct {
	Point      string   `json:"point"`
	Probe      string   `json:"probe"`
	Metric     string   `json:"metric"`
	A          median   `json:"a"`
	B          median   `json:"b"`
	ChangePct  float64  `json:"change_pct"`
	P          float64  `json:"p"`
	PAdj       *float64 `json:"p_adjusted"`     // null for a row the gate does not judge
	Detectable *float64 `json:"detectable_pct"` // null where unknown or where the point alone cannot be flagged
	Shown      bool     `json:"shown"`
	Gated      bool     `json:"gated"`
	Regression bool     `json:"regression"`
	Warnings   []string `json:"warnings,omitempty"`
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
	out := compareJSON{A: c.A, B: c.B, Threshold: c.Threshold, Test: string(c.Test), Adjustment: "benjamini-hochberg", Family: c.Family, Regressions: c.Regressions(),
		Rows: []compareRow{}, OnlyA: append([]string{}, c.OnlyA...), OnlyB: append([]string{}, c.OnlyB...), Warnings: append([]string{}, c.Warnings...)}
	for _, r := range c.Rows {
		out.Rows = append(out.Rows, compareRow{Point: r.Point, Probe: r.Probe, Metric: string(r.Metric),
			A: medianOf(r.Delta.Base), B: medianOf(r.Delta.New), ChangePct: finite(r.Change), P: finite(r.P), PAdj: knownFigure(r.PAdj), Detectable: knownFigure(r.Detectable),
			Shown: r.Shown, Gated: r.Gated, Regression: r.Regression, Warnings: r.Delta.Warnings})
	}
	return out
}
