package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
)

// version is fwab's version, recorded with every run.
var version = "dev"

type sweepOptions struct {
	targetFlags
	file     string
	db       string
	dryRun   bool
	resume   int64
	seed     uint64
	progress bool
}

func newSweepCmd(io *streams) *cobra.Command {
	o := &sweepOptions{}
	cmd := &cobra.Command{
		Use:   "sweep MATRIX.yaml",
		Short: "Run a configuration-matrix sweep: apply, verify, settle and probe every point",
		Long: "Run a configuration-matrix sweep. Every point of the matrix is applied (commit-confirmed),\n" +
			"verified on the firewall, settled and probed through the firewall, in rounds; every sample\n" +
			"goes to the results database as it is measured, and the original config is restored at the\n" +
			"end, also on Ctrl-C. --resume continues an interrupted run without repeating a sample.",
		Example: "  fwab sweep examples/t730-packages.yaml\n  fwab sweep examples/e302-modes.yaml --target lab --dry-run\n  fwab sweep examples/e302-modes.yaml --resume 3",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			if !cmd.Flags().Changed("seed") {
				var b [8]byte
				rand.Read(b[:])
				o.seed = binary.LittleEndian.Uint64(b[:]) >> 1
			}
			return runSweep(cmd.Context(), io, o)
		},
	}
	addTargetFlags(cmd, &o.targetFlags)
	addRollbackFlag(cmd, &o.targetFlags)
	cmd.Flags().StringVar(&o.db, "db", store.DefaultPath(), "the results database")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the plan, each step's changes and the estimated duration; change nothing")
	cmd.Flags().Int64Var(&o.resume, "resume", 0, "continue the interrupted run `RUN`")
	cmd.Flags().Uint64Var(&o.seed, "seed", 0, "seed for the randomized order (default: random, recorded with the run)")
	cmd.Flags().BoolVar(&o.progress, "progress", true, "show progress bars on a terminal")
	return cmd
}

func runSweep(ctx context.Context, io *streams, o *sweepOptions) error {
	f, err := os.Open(o.file)
	if err != nil {
		return usageError{err}
	}
	spec, err := matrix.Parse(f)
	f.Close()
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	if o.target == "" {
		o.target = spec.Target
	}
	if o.target == "" {
		return usageErrorf("%s names no target: add target: NAME to it or pass --target", o.file)
	}

	// A resumed run keeps its spec and seed.
	var st *store.Store
	var prior *store.Run
	if o.resume != 0 {
		if st, err = store.Open(ctx, o.db); err != nil {
			return err
		}
		defer st.Close()
		r, err := st.Run(ctx, o.resume)
		if err != nil {
			return usageError{err}
		}
		if r.SpecHash != spec.Hash() {
			return usageErrorf("run %d was made from a different spec than %s; resume it with the same file", o.resume, o.file)
		}
		prior = &r
		o.seed = uint64(r.Seed)
	}

	t, fw, err := o.open(ctx, io)
	if err != nil {
		return err
	}
	defer fw.Close()
	info, err := fw.Info(ctx)
	if err != nil {
		return err
	}
	current, err := fw.ReadConfig(ctx)
	if err != nil {
		return err
	}
	cfg, err := configxml.LoadBytes(current)
	if err != nil {
		return fmt.Errorf("the firewall's config.xml: %w", err)
	}
	if err := cfg.SetProduct(info.Version); err != nil {
		fmt.Fprintf(io.ErrOut, "note: version %q not understood (%v); checking values against the version the config implies\n", info.Version, err)
	}
	psk, err := tunnelPSK(spec)
	if err != nil {
		return err
	}
	plan, err := matrix.NewPlan(spec, cfg, o.seed)
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	if o.dryRun {
		printPlan(io, plan)
		return nil
	}

	// Everything that can fail without touching the firewall fails here.
	client, server, closeEndpoints, err := endpoints(ctx, io, &o.targetFlags, t)
	if err != nil {
		return err
	}
	defer closeEndpoints()
	probes := spec.ProbeRuns()
	for _, pr := range probes {
		if err := pr.Iperf3.Validate(); err != nil {
			return usageError{fmt.Errorf("probe %s: %w", pr.Name, err)}
		}
	}
	power, err := spec.PowerMeter()
	if err != nil {
		return usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	check := probes[0].Iperf3
	check.Duration = time.Second
	if err := check.Check(ctx, client, server); err != nil {
		return fmt.Errorf("before touching the firewall: %w", err)
	}

	if st == nil {
		if err := os.MkdirAll(filepath.Dir(o.db), 0o755); err != nil {
			return err
		}
		if st, err = store.Open(ctx, o.db); err != nil {
			return err
		}
		defer st.Close()
	}
	runID := o.resume
	if prior == nil {
		infoJSON, _ := json.Marshal(info)
		runID, err = st.CreateRun(ctx, store.Run{
			Spec: string(spec.Raw()), Seed: int64(plan.Seed), FwabVersion: version, Target: t.Name,
			TargetInfo: infoJSON, Firmware: info.Version, ConfigHash: fwapi.SHA256Hex(current),
		})
		if err != nil {
			return err
		}
		if err := st.AddPoints(ctx, runID, plan.StorePoints()); err != nil {
			return err
		}
	} else {
		if err := st.Reopen(ctx, runID); err != nil {
			return err
		}
		// A sweep killed between creating the run and adding its points
		// left a run without points.
		pts, err := st.Points(ctx, runID)
		if err != nil {
			return err
		}
		if len(pts) == 0 {
			if err := st.AddPoints(ctx, runID, plan.StorePoints()); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(io.ErrOut, "run %d: %d points × %d rounds, %d probes each; about %s; results in %s\n",
		runID, len(plan.Points), spec.Repeats, len(probes), plan.Estimate().Round(time.Minute), o.db)

	session, release, err := startSession(ctx, io, &o.targetFlags, t, fw)
	if err != nil {
		// Nothing was changed: the run did not start.
		if ferr := st.FinishRun(context.WithoutCancel(ctx), runID, store.Failed); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	defer release()

	sweep := &matrix.Sweep{
		Plan: plan, Store: st, Run: runID, Config: cfg, PSK: psk, Log: logger(io),
		Apply:  session.ApplyChecked,
		Settle: func(ctx context.Context) error { return trafficPasses(ctx, client, server) },
		Measure: func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
			return pr.Iperf3.Measure(ctx, client, server, probe.Watch{DUT: fw.Metrics, DUTEvery: time.Second, Ping: pr.Spec.Ping, Power: power})
		},
	}
	bars := newSweepProgress(io, o.progress, len(plan.Steps), len(probes))
	sweep.Progress = bars.update
	runErr := sweep.Execute(ctx)
	bars.wait()
	printSweepStats(io, sweep.Stats)

	// The firewall goes back to how it was found, whatever happened.
	restoreErr := session.Close(ctx)
	status := store.Done
	switch {
	case errors.Is(runErr, context.Canceled):
		status = store.Cancelled
	case runErr != nil || restoreErr != nil:
		status = store.Failed
	}
	if err := st.FinishRun(context.WithoutCancel(ctx), runID, status); err != nil && runErr == nil {
		runErr = err
	}
	if restoreErr != nil {
		err := fmt.Errorf("restoring the original config: %w", restoreErr)
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			err = fmt.Errorf("%w\nand before that: %v", err, runErr)
		}
		fmt.Fprintf(io.ErrOut, "every sample so far is kept: once the firewall is fixed, run 'fwab fw recover --target %s', then continue with 'fwab sweep %s --resume %d'\n", t.Name, o.file, runID)
		return err
	}
	fmt.Fprintf(io.ErrOut, "original config restored (sha256 %s)\n", session.OriginalSHA256()[:16])
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			fmt.Fprintf(io.ErrOut, "run %d interrupted; every sample so far is kept: continue with --resume %d\n", runID, runID)
		} else if errors.Is(runErr, fwapi.ErrFirewallDisk) {
			fmt.Fprintf(io.ErrOut, "run %d stopped; every sample so far is kept: once the firewall's disk is fixed, continue with 'fwab sweep %s --resume %d'\n", runID, o.file, runID)
		}
		return runErr
	}
	return printSweepSummary(context.WithoutCancel(ctx), io, st, runID)
}

// printSweepStats says where the time went: fwab's own share is what is
// left after applying, settling and probing.
func printSweepStats(io *streams, s matrix.Stats) {
	if s.Wall <= 0 {
		return
	}
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / s.Wall.Seconds() }
	var actions []string
	for a, n := range s.Actions {
		actions = append(actions, fmt.Sprintf("%d %s", n, a))
	}
	slices.Sort(actions)
	fmt.Fprintf(io.ErrOut, "time: %s in all: probes %.1f%%, applies %.1f%%, settling %.1f%%, fwab overhead %.1f%% (%s); %d samples; service actions: %s\n",
		s.Wall.Round(time.Second), pct(s.Probe), pct(s.Apply), pct(s.Settle), pct(s.Overhead()), s.Overhead().Round(time.Millisecond), s.Samples, strings.Join(actions, ", "))
}

// tunnelPSK reads the pre-shared key of the tunnel the spec may create.
func tunnelPSK(spec *matrix.Spec) (string, error) {
	if spec.Tunnel == nil || spec.Tunnel.PSKFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(spec.Tunnel.PSKFile)
	if err != nil {
		return "", usageError{fmt.Errorf("tunnel psk_file: %w", err)}
	}
	return strings.TrimSpace(string(b)), nil
}

// A sweep stops, instead of marking a point broken, when the firewall's
// disk refuses writes: matrix learns that from fwapi's command error.
var _ matrix.DiskError = (*fwapi.CommandError)(nil)

// endpoints opens the target's traffic hosts.
func endpoints(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target) (client, server probe.Endpoint, closeAll func(), err error) {
	client, server, closeAll, err = t.OpenEndpoints(ctx, fwapi.OpenOptions{AcceptNewHostKey: f.acceptNewHostKey, Logger: logger(io)})
	if err != nil {
		return client, server, nil, usageError{fmt.Errorf("target %s: %w", t.Name, err)}
	}
	return client, server, closeAll, nil
}

// trafficPasses waits until the client reaches the server through the
// firewall.
func trafficPasses(ctx context.Context, client, server probe.Endpoint) error {
	var last error
	for {
		_, err := client.Runner.Run(ctx, []string{"ping", "-c", "1", "-W", "1", server.Addr})
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s cannot reach %s: %v", client, server.Addr, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// sweepProgress shows an overall bar and the current step on a terminal,
// and one line per step otherwise.
type sweepProgress struct {
	io      *streams
	p       *mpb.Progress
	overall *mpb.Bar
	current string
	last    int
}

func newSweepProgress(io *streams, enabled bool, steps, probes int) *sweepProgress {
	sp := &sweepProgress{io: io}
	if enabled && isTerminal(io.ErrOut) {
		sp.p = mpb.New(mpb.WithOutput(io.ErrOut), mpb.WithWidth(40))
		sp.overall = sp.p.AddBar(int64(steps),
			mpb.PrependDecorators(decor.Name("sweep "), decor.CountersNoUnit("%d/%d")),
			mpb.AppendDecorators(decor.Percentage(), decor.Name(" eta "), decor.EwmaETA(decor.ET_STYLE_GO, 30), decor.Any(func(decor.Statistics) string { return "  " + sp.current })),
		)
	}
	return sp
}

func (sp *sweepProgress) update(p matrix.Progress) {
	label := fmt.Sprintf("point %d round %d %s", p.Point.Index, p.Round+1, p.Phase)
	if p.Probe != "" {
		label += " " + p.Probe
	}
	if p.Detail != "" && p.Phase != "probe" {
		label += ": " + p.Detail
	}
	if sp.p == nil {
		// One line per phase and probe: a log that shows where a sweep was.
		fmt.Fprintf(sp.io.ErrOut, "[%d/%d] %s\n", p.Step, p.Steps, label)
		sp.last = p.Step
		return
	}
	sp.current = label
	for sp.last < p.Step-1 {
		sp.overall.EwmaIncrement(time.Second)
		sp.last++
	}
}

func (sp *sweepProgress) wait() {
	if sp.p == nil {
		return
	}
	sp.overall.SetTotal(-1, true)
	sp.p.Wait()
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// printSweepSummary prints the run's report table, as 'fwab report' does.
func printSweepSummary(ctx context.Context, io *streams, st *store.Store, run int64) error {
	r, err := report.Load(ctx, st, run)
	if err != nil {
		return err
	}
	fmt.Fprintln(io.Out)
	return report.Write(io.Out, r, report.Markdown, report.Options{})
}
