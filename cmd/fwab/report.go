package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
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
	cmd.Flags().StringVar(&opts.confidence, "confidence", "95%", "confidence `level` of the intervals: a percentage, 95% or 0.95 ("+percentRule+")")
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
	confidence, err := parsePercent("--confidence", opts.confidence, false)
	if err != nil {
		return err
	}
	confidence /= 100
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

// percentRule is how a percentage flag is read, for the flags' help.
const percentRule = "a plain number below 1 is a fraction; 1 or more needs its % sign"

// parsePercent reads the value of a percentage flag as a percentage: "3%"
// is 3, and a plain number below 1 is a fraction, so "0.03" is 3 too. A
// plain number of 1 or more is refused: "3" could mean 3 % or 300 %. The
// value must be below 100 %, and above 0 unless zeroOK.
func parsePercent(flag, s string, zeroOK bool) (float64, error) {
	example := "3% or 0.03"
	if !zeroOK {
		example = "95% or 0.95"
	}
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	num = strings.TrimSpace(num)
	// Parsed as a ratio, so that 0.07 is 7 and not 7.000000000000001.
	v, err := strconv.ParseFloat(num, 64)
	r, ok := new(big.Rat).SetString(num)
	if err != nil || !ok {
		return 0, usageErrorf("%s %q: not a number: write a percentage such as %s", flag, s, example)
	}
	hundred := big.NewRat(100, 1)
	if !pct {
		if r.Cmp(big.NewRat(1, 1)) >= 0 && r.Cmp(hundred) < 0 {
			return 0, usageErrorf("%s %q is ambiguous: write %s%% or %s (%s)", flag, s, num, strconv.FormatFloat(v/100, 'f', -1, 64), percentRule)
		}
		r.Mul(r, hundred)
	}
	if r.Sign() < 0 || r.Sign() == 0 && !zeroOK || r.Cmp(hundred) >= 0 {
		if zeroOK {
			return 0, usageErrorf("%s %q: give a percentage from 0 to below 100%%, such as %s", flag, s, example)
		}
		return 0, usageErrorf("%s %q: give a percentage above 0 and below 100%%, such as %s", flag, s, example)
	}
	out, _ := r.Float64()
	return out, nil
}
