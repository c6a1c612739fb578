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
skipped. A regression is a change the significance test shows (p < 0.05) that is
larger than the threshold in the bad direction: throughput down, retransmits or
DUT CPU up. The exit status is 1 only when there is a regression, 2 for bad
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
	cmd.Flags().StringVar(&opts.db, "db", store.DefaultPath(), "results database `file`")
	cmd.Flags().StringVar(&opts.threshold, "fail-on-regression", "3%", "smallest change that counts as a regression, in `percent`")
	cmd.Flags().StringVar(&opts.junit, "junit", "", "write JUnit XML to `file`")
	cmd.Flags().StringVar(&opts.test, "test", string(report.UTest), "significance test: utest (Mann-Whitney, on medians) or ttest (Welch, on means; works with fewer repeats)")
	cmd.Flags().StringSliceVar(&opts.ignore, "ignore-knob", report.DefaultIgnore, "knobs left out when points are matched (a firmware knob differs by design)")
	cmd.Flags().StringSliceVar(&opts.metrics, "metric", []string{string(report.Throughput)}, "metrics that can fail the gate: throughput, retransmits, dut-cpu")
	return cmd
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
	c, err := compareRuns(ctx, opts.db, a, b, copts)
	if err != nil {
		return usageError{err}
	}
	if err := c.WriteText(io.Out); err != nil {
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

func compareRuns(ctx context.Context, db string, a, b int64, opts report.CompareOptions) (*report.Comparison, error) {
	st, err := openResults(ctx, db)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ra, err := loadRun(ctx, st, db, a)
	if err != nil {
		return nil, err
	}
	rb, err := loadRun(ctx, st, db, b)
	if err != nil {
		return nil, err
	}
	c, err := report.CompareRuns(ra, rb, opts)
	if err != nil {
		return nil, fmt.Errorf("compare: %w", err)
	}
	return c, nil
}
