package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/internal/atomicfile"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
)

type trendOptions struct {
	db, testbed, html, threshold string
	window                       int
	json                         bool
}

func newTrendCmd(io *streams) *cobra.Command {
	o := &trendOptions{}
	cmd := &cobra.Command{
		Use:   "trend MATRIX.yaml --testbed TESTBED",
		Short: "Find where throughput (connect: conn/s, http: tx/s) changed over the runs of a spec on one testbed",
		Long: "Read every complete run of the spec on the testbed, oldest first, and report per point and probe\n" +
			"the runs where the level changed: the runs of a window before and of a window from the run differ\n" +
			"by a Mann–Whitney U test (p ≤ 0.01) and their medians by at least the threshold.\n" +
			"Exit status 1 when there is a change, so that a nightly job can flag it.",
		Example: "  fwab trend examples/t730-packages.yaml --testbed t730\n  fwab trend nightly.yaml --testbed apu2@3f2a9c1b0d4e --threshold 5% --html trend.html",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTrend(cmd.Context(), io, o, args[0])
		},
	}
	addDBFlag(cmd.Flags(), &o.db, "results `database`")
	cmd.Flags().StringVar(&o.testbed, "testbed", "", "the testbed, as 'fwab runs list' shows it (name@fingerprint), or a target name with one testbed (required)")
	cmd.Flags().IntVar(&o.window, "window", 5, "runs on each side of a candidate change")
	cmd.Flags().StringVar(&o.threshold, "threshold", "3%", "the smallest change of the median that counts: a `percentage`, 3% or 0.03 ("+percentRule+")")
	cmd.Flags().StringVar(&o.html, "html", "", "also write the table and a chart per series, change points marked, to `FILE`")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runTrend(ctx context.Context, io *streams, o *trendOptions, file string) error {
	if o.testbed == "" {
		return usageErrorf("--testbed is required: 'fwab runs list' shows the testbeds")
	}
	if o.window < 2 {
		return usageErrorf("--window %d: give at least 2 runs", o.window)
	}
	threshold, err := parsePercent("--threshold", o.threshold, true)
	if err != nil {
		return err
	}
	spec, err := readSpec(file)
	if err != nil {
		return err
	}
	st, err := openResults(ctx, o.db)
	if err != nil {
		return err
	}
	defer st.Close()
	var testbeds []string
	runs, err := st.History(ctx, spec.Hash(), func(h store.HistoryRun) bool {
		on := onTestbed(store.Run{Target: h.Target, Testbed: h.Testbed}, o.testbed)
		if on && !slices.Contains(testbeds, h.Testbed) {
			testbeds = append(testbeds, h.Testbed)
		}
		return on
	}, rateProbes(spec))
	if err != nil {
		return err
	}
	switch {
	case len(runs) == 0:
		return usageErrorf("no complete run of %s on testbed %s in %s: 'fwab runs list --testbed %s' shows its runs", file, o.testbed, store.Redact(o.db), o.testbed)
	case len(testbeds) > 1:
		return usageErrorf("%s names %d testbeds (%s): pick one, a history does not mix boxes", o.testbed, len(testbeds), strings.Join(testbeds, ", "))
	}
	tb := testbeds[0]
	if tb == "" {
		tb = o.testbed
	}
	tr, err := report.NewTrend(tb, runs, report.TrendOptions{Window: o.window, Threshold: threshold})
	if err != nil {
		return err
	}
	if o.json {
		err = writeJSON(io.Out, struct {
			Testbed string               `json:"testbed"`
			Runs    int                  `json:"runs"`
			Series  []report.TrendSeries `json:"series"`
		}{tr.Testbed, tr.Runs, tr.Series})
	} else {
		err = tr.WriteText(io.Out)
	}
	if err != nil {
		return err
	}
	if o.html != "" {
		var buf bytes.Buffer
		if err := tr.WriteHTML(&buf); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(o.html, buf.Bytes(), 0o644); err != nil {
			return usageErrorf("--html: %w", err)
		}
	}
	if tr.Changes() > 0 {
		return silentError{exitFailure}
	}
	return nil
}

// rateProbes are the names under which the spec's connect and http probes
// record their samples (one a link): their series follow the connection
// rate and the transactions a second.
func rateProbes(spec *matrix.Spec) store.RateProbes {
	var out store.RateProbes
	for _, r := range spec.ProbeRuns() {
		switch {
		case r.Connect != nil:
			out.Connect = append(out.Connect, r.Name)
		case r.HTTP != nil:
			out.HTTP = append(out.HTTP, r.Name)
		}
	}
	return out
}

// readSpec parses a matrix spec file; a missing or bad file is bad input.
func readSpec(file string) (*matrix.Spec, error) {
	spec, err := matrix.ParseFile(file)
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) && pathErr.Path == file {
		return nil, usageError{err}
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", file, err)}
	}
	return spec, nil
}
