package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fwab/fwab/internal/atomicfile"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
	"github.com/spf13/cobra"
)

type reportOptions struct {
	db         string
	format     string
	pivot      string
	output     string
	studentT   bool
	confidence string
}

func newReportCmd(io *streams) *cobra.Command {
	opts := &reportOptions{}
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Tables, statistics and charts of a run",
		Long: `Report a run: one row per point with each probe's throughput (median and its
95 % confidence interval), the change against the baseline with the Mann-Whitney
U test's p ("~" where no difference is shown), retransmits, and the DUT's CPU,
temperature and power. --pivot KNOB adds a "% gained / lost" table by that
knob's values. The html format is one self-contained file with charts; without
-o it is written to fwab-report-RUN.html and its path printed.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseRunID(args[0])
			if err != nil {
				return err
			}
			return runReport(cmd.Context(), opts, id, io)
		},
	}
	addDBFlag(cmd.Flags(), &opts.db, "results `database`")
	cmd.Flags().StringVar(&opts.format, "format", "md", "output format: "+strings.Join(reportFormats(), ", "))
	cmd.Flags().StringVar(&opts.pivot, "pivot", "", "add a \"% gained / lost\" table by this `knob`'s values")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "", "write to `file` instead of standard output")
	cmd.Flags().StringVar(&opts.confidence, "confidence", "95%", "confidence `level` of the intervals, such as 95% or 0.99")
	cmd.Flags().BoolVar(&opts.studentT, "student", false, "add the Student's t view: means, their intervals, Welch's t-test")
	return cmd
}

// parseRunID reads a run number as 'fwab runs list' prints it.
func parseRunID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErrorf("run %q: give the run's number, as 'fwab runs list' prints it", s)
	}
	return id, nil
}

// loadRun reads one run of the results database for a report.
func loadRun(ctx context.Context, st *store.Store, db string, id int64) (*report.Run, error) {
	r, err := report.Load(ctx, st, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, usageErrorf("no run %d in %s: 'fwab runs list' shows the runs there", id, store.Redact(db))
	}
	return r, err
}

func runReport(ctx context.Context, opts *reportOptions, id int64, io *streams) error {
	format, err := report.ParseFormat(opts.format)
	if err != nil {
		return usageError{err}
	}
	confidence, err := parseConfidence(opts.confidence)
	if err != nil {
		return err
	}
	st, err := openResults(ctx, opts.db)
	if err != nil {
		return err
	}
	defer st.Close()
	r, err := loadRun(ctx, st, opts.db, id)
	if err != nil {
		return err
	}
	if opts.pivot != "" {
		if _, err := report.NewPivot(r, opts.pivot); err != nil {
			return usageError{err}
		}
	}
	var buf bytes.Buffer
	if err := report.Write(&buf, r, format, report.Options{Pivot: opts.pivot, StudentT: opts.studentT, Confidence: confidence}); err != nil {
		return err
	}
	path := opts.output
	if path == "" && format == report.HTML {
		path = fmt.Sprintf("fwab-report-%d.html", id)
	}
	if path == "" || path == "-" {
		_, err := io.Out.Write(buf.Bytes())
		return err
	}
	if err := atomicfile.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return usageErrorf("report: %w (check the -o path)", err)
	}
	fmt.Fprintln(io.Out, path)
	return nil
}

// parseConfidence reads "95%", "95" or "0.95" as 0.95.
func parseConfidence(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err == nil && (pct || v > 1) {
		v /= 100
	}
	if err != nil || !(v > 0 && v < 1) {
		return 0, usageErrorf("--confidence %q: give a level between 0 and 100%%, such as 95%% or 0.99", s)
	}
	return v, nil
}
