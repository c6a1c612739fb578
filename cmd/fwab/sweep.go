package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/secretfile"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
)

// exitPanic is the exit code of a sweep stopped by a bug in fwab (a
// panic), once the firewall is restored: the code Go exits with on one.
const exitPanic = 2

type sweepOptions struct {
	targetFlags
	targetNames []string // --target, once per firewall
	file        string
	db          string
	dryRun      bool
	rollbackSet bool   // --rollback-after given: not sized from measured costs
	config      string // --dry-run against this config.xml: no firewall
	product     string
	resume      int64
	seed        uint64
	seedSet     bool
	progress    bool
	// allowConfigDiff runs a firmware axis whose environments' configs
	// differ beyond the knobs.
	allowConfigDiff bool
}

func newSweepCmd(io *streams) *cobra.Command {
	o := &sweepOptions{}
	cmd := &cobra.Command{
		Use:   "sweep MATRIX.yaml",
		Short: "Run a configuration-matrix sweep: apply, verify, settle and probe every point",
		Long: "Run a configuration-matrix sweep. Every point of the matrix is applied (commit-confirmed),\n" +
			"verified on the firewall, settled and probed through the firewall, in rounds; every sample\n" +
			"goes to the results database as it is measured, and the original config is restored at the\n" +
			"end, also on Ctrl-C, SIGTERM or SIGHUP. --resume continues an interrupted run, on the target,\n" +
			"testbed and config it was measured on, without repeating a sample. It exits 0 when every point\n" +
			"was measured, 1 when any failed (its apply, verify, settling or a probe), 130 when interrupted.",
		Example: "  fwab sweep examples/t730-packages.yaml\n  fwab sweep examples/e302-modes.yaml --target lab --dry-run\n  fwab sweep examples/e302-modes.yaml --resume 3",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			o.seedSet = cmd.Flags().Changed("seed")
			o.rollbackSet = cmd.Flags().Changed("rollback-after")
			if o.config != "" && !o.dryRun {
				return usageErrorf("--config plans against a file: it goes with --dry-run (a sweep reads the firewall's own config)")
			}
			if o.product != "" && o.config == "" {
				return usageErrorf("--product goes with --dry-run --config FILE (a sweep asks the firewall its version)")
			}
			switch len(o.targetNames) {
			case 0:
			case 1:
				o.target = o.targetNames[0]
			default:
				return runSweeps(cmd.Context(), io, o)
			}
			return runSweep(cmd.Context(), io, o)
		},
	}
	cmd.Flags().StringArrayVar(&o.targetNames, "target", nil, "the firewall, by its name in the targets file (default: the spec's target); repeat it to sweep several at once")
	addTargetsFileFlags(cmd, &o.targetFlags)
	addRollbackFlag(cmd, &o.targetFlags)
	addDBFlag(cmd.Flags(), &o.db, "the results `database`")
	cmd.Flags().BoolVar(&o.dryRun, "dry-run", false, "print the plan, each step's changes and the estimated duration; change nothing")
	cmd.Flags().Int64Var(&o.resume, "resume", 0, "continue the interrupted run `RUN`")
	cmd.Flags().StringVar(&o.config, "config", "", "with --dry-run: plan against this config.xml, with no firewall at all")
	cmd.Flags().StringVar(&o.product, "product", "", "with --dry-run --config: the product version the firewall runs (default: inferred from the config)")
	cmd.Flags().Uint64Var(&o.seed, "seed", 0, "seed for the randomized order (default: from the spec's hash, so a dry run shows the order that runs; recorded with the run)")
	cmd.Flags().BoolVar(&o.progress, "progress", true, "show progress bars on a terminal")
	cmd.Flags().BoolVar(&o.allowConfigDiff, "allow-config-differences", false, "with a firmware axis: run although the boot environments' config.xml files differ beyond the spec's knobs (an upgrade's config migration, say), measuring those differences with the firmware")
	return cmd
}

// runSweep wires a sweep: the spec, the firewall and its endpoints, the
// results database; matrix.Run does the rest.
func runSweep(ctx context.Context, io *streams, o *sweepOptions) error {
	w := &sweepWiring{io: io, o: o}
	defer w.close()
	if err := w.prepare(ctx); err != nil || o.dryRun {
		return err
	}
	out, err := w.run().Execute(ctx)
	if errors.Is(err, matrix.ErrOtherFirewall) {
		return usageError{err} // --resume of another firewall's run: nothing was changed
	}
	if err != nil {
		return err
	}
	return w.finish(ctx, out)
}

// sweepWiring holds what runSweep opens, in the order it opens it.
type sweepWiring struct {
	io *streams
	o  *sweepOptions

	spec           *matrix.Spec
	st             *store.Store
	t              *fwapi.Target
	fw             fwapi.Firewall
	fc             firewallConfig
	psk            string
	plan           *matrix.Plan
	client, server probe.Endpoint
	links          map[string]probe.Link // every link the probes name, and the first
	power          probe.PowerMeter
	session        interface{ OriginalSHA256() string } // once begun
	envs           *fwapi.EnvSessions                   // a firmware axis's boot environments; nil without one
	bars           *sweepProgress                       // once begun

	closers []func()
}

// close closes what was opened, last first.
func (w *sweepWiring) close() {
	for i := len(w.closers) - 1; i >= 0; i-- {
		w.closers[i]()
	}
}

// prepare does everything that can fail without touching the firewall; a
// dry run ends here, with the plan printed.
func (w *sweepWiring) prepare(ctx context.Context) error {
	var err error
	if w.spec, err = loadSweepSpec(w.o); err != nil {
		return err
	}
	if !w.o.seedSet {
		w.o.seed = w.spec.DefaultSeed()
	}
	// The results database first: a bad --db fails before the firewall
	// is contacted. A resumed run keeps its spec and seed; a dry run
	// only reads.
	if err := w.openStore(ctx); err != nil {
		return err
	}
	if w.o.config != "" {
		// Offline: plan against a file, no firewall at all.
		if w.fc.config, err = loadConfigFile(ctx, w.io, w.o.config, w.o.product); err != nil {
			return err
		}
		if err := w.o.checkOfflineFlavor(w.spec.Target, w.o.config, w.fc.config); err != nil {
			return err
		}
	} else {
		if w.t, w.fw, err = w.o.open(ctx, w.io); err != nil {
			return err
		}
		w.closers = append(w.closers, func() { w.fw.Close() })
		if w.fc, err = readFirewall(ctx, w.io, w.fw, w.t); err != nil {
			return err
		}
	}
	if versions := firmwareValues(w.spec); versions != nil && w.fw != nil {
		if w.envs, err = newEnvSessions(ctx, w.io, &w.o.targetFlags, w.t, w.fw, w.fc.info.Version, versions); err != nil {
			return err
		}
	}
	if w.plan, err = matrix.NewPlan(ctx, w.spec, w.fc.config, w.o.seed); err != nil {
		return usageError{fmt.Errorf("%s: %w", w.o.file, err)}
	}
	printWarnings(w.io, w.o.file, w.plan)
	// After the spec's own checks, as matrix check reads it.
	if w.psk, err = tunnelPSK(w.spec); err != nil {
		return err
	}
	if w.t != nil {
		w.plan.Measured = measuredCosts(ctx, w.o.db, w.t.Name)
		after, notes := rollbackAdvice(w.plan, w.o.rollbackAfter, w.o.rollbackSet)
		w.o.rollbackAfter = after
		for _, n := range notes {
			fmt.Fprintln(w.io.ErrOut, n)
		}
		if _, err := linkNames(w.t, w.spec); err != nil {
			return err
		}
		for _, warn := range sharedCores(w.spec, w.t) {
			fmt.Fprintf(w.io.ErrOut, "warning: %s\n", warn)
		}
	}
	if w.envs != nil {
		if err := checkConfigs(ctx, w.io, w.envs, w.plan, w.fc.config, w.o.allowConfigDiff); err != nil {
			return err
		}
	}
	if w.o.dryRun {
		printPlan(w.io, w.plan)
		return nil
	}
	if stubProbe != nil {
		return nil
	}
	links, closeEndpoints, err := openLinks(ctx, w.io, &w.o.targetFlags, w.t, w.spec)
	if err != nil {
		return err
	}
	first := links[w.t.Endpoints.FirstLink()]
	w.links, w.client, w.server = links, first.Client, first.Server
	w.closers = append(w.closers, closeEndpoints)
	if w.power, err = preflight(ctx, w.o, w.spec, w.client, w.server); err != nil {
		return err
	}
	return checkLinks(ctx, w.spec, w.t, links)
}

// linkNames are the target's first link and every other one the spec's
// probes name; a name the target lacks is refused, the known ones listed.
func linkNames(t *fwapi.Target, spec *matrix.Spec) ([]string, error) {
	names := []string{t.Endpoints.FirstLink()}
	for _, n := range spec.LinkNames() {
		if _, err := t.Endpoints.Pair(n); err != nil {
			return nil, usageError{fmt.Errorf("target %s: %w", t.Name, err)}
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// openLinks opens the links linkNames lists.
func openLinks(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target, spec *matrix.Spec) (map[string]probe.Link, func(), error) {
	names, err := linkNames(t, spec)
	if err != nil {
		return nil, nil, err
	}
	links, closeAll, err := t.OpenLinks(ctx, fwapi.OpenOptions{AcceptNewHostKey: f.acceptNewHostKey, Logger: logger(io)}, names)
	if err != nil {
		return nil, nil, usageError{fmt.Errorf("target %s: %w", t.Name, err)}
	}
	return links, closeAll, nil
}

// checkLinks checks, before anything touches the firewall, that iperf3
// runs on every further link the probes name, and that each endpoint has
// the cores a probe's cpuset pins iperf3 to.
func checkLinks(ctx context.Context, spec *matrix.Spec, t *fwapi.Target, links map[string]probe.Link) error {
	// Once per further link and window its probes ask for (a kernel may
	// refuse one); preflight checked the first link.
	windows := map[string][]string{}
	for _, pr := range spec.ProbeRuns() {
		for _, n := range pr.Links {
			if n != t.Endpoints.FirstLink() && !slices.Contains(windows[n], pr.Iperf3.Window) {
				windows[n] = append(windows[n], pr.Iperf3.Window)
			}
		}
	}
	for _, n := range spec.LinkNames() {
		l := links[n]
		for _, w := range windows[n] {
			check := probe.Iperf3{Duration: time.Second, Window: w}
			if err := check.Check(ctx, l.Client, l.Server); err != nil {
				return fmt.Errorf("before touching the firewall: link %s: %w", n, err)
			}
		}
	}
	checked := map[string]bool{}
	for _, pr := range spec.ProbeRuns() {
		names := pr.Links
		if len(names) == 0 {
			names = []string{t.Endpoints.FirstLink()}
		}
		for _, n := range names {
			clientCPUs, serverCPUs := pr.Iperf3.CPUsFor(n)
			for _, side := range []struct {
				ep   probe.Endpoint
				list string
			}{{links[n].Client, clientCPUs}, {links[n].Server, serverCPUs}} {
				if key := side.ep.Name + " " + side.list; side.list != "" && !checked[key] {
					checked[key] = true
					if err := probe.CheckCPUs(ctx, side.ep, side.list); err != nil {
						return usageError{fmt.Errorf("probe %s: %w", pr.Name, err)}
					}
				}
			}
		}
	}
	return nil
}

// sharedCores warns of a probe whose links run at once with two of their
// iperf3 processes pinned to the same cores of one host: they take turns on
// those cores, each reads about half of one, and neither is flagged as
// bound by its CPU, so the sum can measure the endpoints.
func sharedCores(spec *matrix.Spec, t *fwapi.Target) []string {
	type side struct {
		name, link, host string
		cores            []int
	}
	var warns []string
	seen := map[string]bool{}
	for _, pr := range spec.ProbeRuns() {
		if len(pr.Links) < 2 || seen[pr.Spec.Name] {
			continue // a probe's runs (one per length) share its cores
		}
		seen[pr.Spec.Name] = true
		var sides []side
		for _, n := range pr.Links {
			pair, err := t.Endpoints.Pair(n)
			if err != nil {
				continue // openLinks named it
			}
			c, s := pr.Iperf3.CPUsFor(n)
			for _, x := range []struct {
				role, list string
				ep         fwapi.Endpoint
			}{{"client", c, pair.Client}, {"server", s, pair.Server}} {
				if cores, err := probe.ParseCPUList(x.list); err == nil && x.list != "" {
					sides = append(sides, side{x.role + "@" + n, n, x.ep.Host(), cores})
				}
			}
		}
		for i, a := range sides {
			for _, b := range sides[i+1:] {
				if a.host != b.host {
					continue
				}
				shared := slices.DeleteFunc(slices.Clone(a.cores), func(c int) bool { return !slices.Contains(b.cores, c) })
				if len(shared) == 0 {
					continue
				}
				fix := "give each link cores of its own (cpuset: {links: {LINK: {client: ..., server: ...}}})"
				if a.link == b.link {
					fix = "give the link's client and server different cores"
				}
				warns = append(warns, fmt.Sprintf("probe %s: %s and %s run at once on %s pinned to the same cores (%v): they compete for them and neither shows as CPU-bound; %s", pr.Spec.Name, a.name, b.name, a.host, shared, fix))
			}
		}
	}
	return warns
}

// openStore opens the results database: the run to resume (read-only for
// a dry run), or for a new run the database it will go to (none for a dry
// run, which writes nothing).
func (w *sweepWiring) openStore(ctx context.Context) error {
	var err error
	switch {
	case w.o.resume != 0:
		w.st, err = openResumed(ctx, w.o, w.spec)
	case w.o.dryRun:
		return nil
	default:
		w.st, err = openNewStore(ctx, w.o.db)
	}
	if err != nil {
		return err
	}
	w.closers = append(w.closers, func() { w.st.Close() })
	return nil
}

// run is the sweep as matrix runs it, with the terminal output between
// its steps.
func (w *sweepWiring) run() *matrix.Run {
	io, o, plan := w.io, w.o, w.plan
	return &matrix.Run{
		Store: w.st, Plan: plan, Resume: o.resume,
		New: store.Run{FwabVersion: fwabVersion(), Target: w.t.Name, Testbed: testbedOf(w.t, w.fc.info, w.fc.inv), TargetInfo: w.fc.infoJSON, Firmware: w.fc.info.Version, ConfigHash: fwapi.SHA256Hex(w.fc.raw)},
		Begin: func(ctx context.Context, id int64) (matrix.Session, error) {
			probes := len(w.spec.ProbeRuns())
			rounds := strconv.Itoa(w.spec.Repeats)
			if w.spec.Adaptive() {
				rounds += fmt.Sprintf(" (up to %d where an interval is wider than ±%s%%)", w.spec.RepeatsSpec.Max, strconv.FormatFloat(w.spec.RepeatsSpec.Width, 'f', -1, 64))
			}
			fmt.Fprintf(io.ErrOut, "run %d: %d points × %s rounds, %d probes each; seed %d; about %s; results in %s\n",
				id, len(plan.Points), rounds, probes, plan.Seed, plan.Estimate().Round(time.Minute), store.Redact(o.db))
			w.bars = newSweepProgress(io, o.progress, len(plan.Steps), probes)
			if w.envs != nil {
				if err := w.envs.Begin(ctx); err != nil {
					return nil, err
				}
				w.session = w.envs
				return w.envs, nil
			}
			s, release, err := startSession(ctx, io, &o.targetFlags, w.t, w.fw)
			if err != nil {
				return nil, err
			}
			w.session = s
			w.closers = append(w.closers, release)
			return s, nil
		},
		Sweep: matrix.Sweep{
			Config: w.fc.config, Firmware: w.fc.info.Version, SwitchFirmware: w.switchFirmware(), PSK: w.psk, Log: logger(io),
			Health: w.health(), ServiceComeback: serviceComeback,
			Progress: func(p matrix.Progress) { w.bars.update(p) },
			Settle: func(ctx context.Context) error {
				if stubProbe != nil {
					return nil
				}
				for _, l := range w.links {
					if err := trafficPasses(ctx, l.Client, l.Server); err != nil {
						return err
					}
				}
				return nil
			},
			Measure: func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
				if stubProbe != nil {
					return stubProbe(ctx, pr)
				}
				s := pr.MeasureLinks(ctx, w.links, w.t.Endpoints.FirstLink(), probe.Watch{DUT: w.fw.Metrics, DUTEvery: time.Second, Power: w.power})
				for _, lw := range w.fc.linkWarnings {
					s.Warnings = append(s.Warnings, "link: "+lw)
				}
				return s
			},
			Idle:          w.idle(),
			Blackout:      w.blackout(),
			BlackoutShare: w.blackoutShare(),
			Canary:        w.canary(),
			Alerts:        w.alerts(),
			Wider: func(ctx context.Context, run int64, width float64) ([]int, error) {
				r, err := report.Load(ctx, w.st, run)
				if err != nil {
					return nil, err
				}
				return report.Wider(r, width), nil
			},
		},
		Swept: func(s matrix.Stats) { w.bars.wait(); printSweepStats(io, s) },
	}
}

// blackout starts the spec's blackout stream between the first link's
// endpoints, at bps where the sweep sizes it (a share of the measured
// throughput); nil without one (or with the stub probe of the tests).
func (w *sweepWiring) blackout() func(context.Context, float64) (func(context.Context) (probe.BlackoutResult, error), error) {
	if w.spec.Blackout == nil || stubProbe != nil {
		return nil
	}
	b, err := w.spec.Blackout.Probe()
	if err != nil {
		return nil // the spec was checked
	}
	return func(ctx context.Context, bps float64) (func(context.Context) (probe.BlackoutResult, error), error) {
		if bps > 0 {
			b.Rate = blackoutRate(bps, b.Size)
		}
		return b.Start(ctx, w.client, w.server)
	}
}

// blackoutRate is bps in size-byte datagrams a second, within what the
// agent sends (probe.Blackout.Validate) and no coarser than 100 ms.
func blackoutRate(bps float64, size int) float64 {
	return min(max(bps/8/float64(size), 10), 1e6)
}

// blackoutShare is the spec's blackout rate as a share of the baseline's
// throughput; 0 for a rate of its own.
func (w *sweepWiring) blackoutShare() float64 {
	if w.spec.Blackout == nil {
		return 0
	}
	return w.spec.Blackout.Share()
}

// canary starts the IPS canary's triggers between the first link's
// endpoints; nil without one (or with the stub probe of the tests).
func (w *sweepWiring) canary() func(context.Context, probe.Canary) (func(context.Context) (probe.CanaryResult, error), error) {
	if !w.spec.Canary.On() || stubProbe != nil {
		return nil
	}
	return func(ctx context.Context, c probe.Canary) (func(context.Context) (probe.CanaryResult, error), error) {
		return c.Start(ctx, w.client, w.server)
	}
}

// alerts reads the IDS's alert logs for the canary at detect-only points
// (matrix.Sweep.Alerts); nil for a driver that cannot.
func (w *sweepWiring) alerts() func(context.Context, int, int) (probe.AlertLogs, error) {
	if ar, ok := w.fw.(fwapi.AlertReader); ok && w.spec.Canary.On() {
		return ar.Alerts
	}
	return nil
}

// switchFirmware is the sweep's way between boot environments; nil
// without a firmware axis.
func (w *sweepWiring) switchFirmware() func(context.Context, string) (*configxml.Config, error) {
	if w.envs == nil {
		return nil
	}
	return w.envs.Switch
}

// health reads the firewall's health before and after every probe
// (matrix.Sweep.Health); nil for a driver that cannot.
func (w *sweepWiring) health() func(context.Context) (probe.Health, error) {
	if hr, ok := w.fw.(fwapi.HealthReader); ok {
		return hr.Health
	}
	return nil
}

// idle is the sweep's idle phase: at rest the same figures as under load,
// latency too where a probe measures it under load. Synthetic probes
// (tests) have none.
func (w *sweepWiring) idle() func(ctx context.Context, d time.Duration) probe.Sample {
	if stubProbe != nil {
		return nil
	}
	return func(ctx context.Context, d time.Duration) probe.Sample {
		return probe.Idle(ctx, d, w.client, w.server, probe.Watch{DUT: w.fw.Metrics, DUTEvery: time.Second, Ping: w.spec.Pings(), Power: w.power})
	}
}

// finish says how the run ended and what to do next, and prints the
// report of a complete run.
func (w *sweepWiring) finish(ctx context.Context, out matrix.Outcome) error {
	io, o := w.io, w.o
	var bug *matrix.PanicError
	if errors.As(out.SweepErr, &bug) {
		// Where the bug is first, then how the firewall was left.
		fmt.Fprintf(io.ErrOut, "%v\n\n%s\n", bug, bug.Stack)
	}
	if out.RestoreErr != nil {
		fmt.Fprintf(io.ErrOut, "every sample so far is kept: once the firewall is fixed, run 'fwab fw recover --target %s', then continue with 'fwab sweep %s --resume %d'\n", w.t.Name, o.file, out.Run)
		if bug != nil {
			return panicked(io, out.Err())
		}
		return out.Err()
	}
	fmt.Fprintf(io.ErrOut, "original config restored (sha256 %s)\n", w.session.OriginalSHA256()[:16])
	switch {
	case bug != nil:
		return panicked(io, fmt.Errorf("run %d stopped by a bug in fwab (%v); the firewall's config is restored and every sample so far kept: please report the bug with the trace above", out.Run, bug))
	case out.SweepErr == nil:
		if err := printSweepSummary(context.WithoutCancel(ctx), io, w.st, out.Run); err != nil {
			return err
		}
		return w.failedPoints(context.WithoutCancel(ctx), out.Run)
	case errors.Is(out.SweepErr, context.Canceled):
		fmt.Fprintf(io.ErrOut, "run %d interrupted; every sample so far is kept: continue with --resume %d\n", out.Run, out.Run)
	case matrix.DiskFailed(out.SweepErr):
		fmt.Fprintf(io.ErrOut, "run %d stopped; every sample so far is kept: once the firewall's disk is fixed, continue with 'fwab sweep %s --resume %d'\n", out.Run, o.file, out.Run)
	}
	return out.SweepErr
}

// panicked prints err, the end of a sweep stopped by a bug, and makes
// fwab exit with exitPanic.
func panicked(io *streams, err error) error {
	fmt.Fprintf(io.ErrOut, "fwab: %v\n", err)
	return panicError{err}
}

// panicError is a sweep's error, already printed, when a bug stopped it.
type panicError struct{ err error }

func (e panicError) Error() string   { return e.err.Error() }
func (e panicError) Unwrap() []error { return []error{e.err, silentError{exitPanic}} }

// failedPoints is the error of a complete run with points not measured in
// full (exit 1): how many, and where to see why; nil when every point was.
func (w *sweepWiring) failedPoints(ctx context.Context, run int64) error {
	failed, points, err := matrix.FailedPoints(ctx, w.st, run)
	if err != nil || len(failed) == 0 {
		return err
	}
	show := fmt.Sprintf("fwab runs show %d", run)
	if w.o.db != defaultDB() {
		show += " --db " + store.Redact(w.o.db)
	}
	return fmt.Errorf("%d of %d points failed: see '%s'", len(failed), points, show)
}

// stubProbe, which only this package's tests set, stands in for the
// target's endpoints: none is opened or checked, traffic passes at once,
// and each probe's sample is what it returns. It lets tests run whole
// sweeps against the emulator without root (no namespaces, no iperf3).
var stubProbe func(ctx context.Context, pr matrix.ProbeRun) probe.Sample

// serviceComeback, which only this package's tests set, shortens how long
// the sweep waits for a stopped service to start again (0: matrix's
// default).
var serviceComeback time.Duration

// loadSweepSpec reads the matrix file and settles the target it names.
func loadSweepSpec(o *sweepOptions) (*matrix.Spec, error) {
	spec, err := readSpec(o.file)
	if err != nil {
		return nil, err
	}
	if o.target == "" {
		o.target = spec.Target
	}
	if o.target == "" && o.config == "" {
		return nil, usageErrorf("%s names no target: add target: NAME to it or pass --target", o.file)
	}
	return spec, nil
}

// openResumed opens the results database of a run to resume, checks the
// run against spec and takes its seed.
func openResumed(ctx context.Context, o *sweepOptions, spec *matrix.Spec) (*store.Store, error) {
	// The run must exist: a mistyped --db is not a new, empty database.
	st, err := openResults(ctx, o.db)
	if err != nil && !errors.Is(err, store.ErrOlderSchema) {
		return nil, err
	}
	if !o.dryRun {
		if st != nil {
			st.Close()
		}
		if st, err = store.Open(ctx, o.db); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	r, err := matrix.CheckResume(ctx, st, o.resume, spec)
	if err != nil {
		st.Close()
		if errors.Is(err, matrix.ErrSpecChanged) {
			return nil, usageErrorf("run %d was made from a different spec than %s; resume it with the same file", o.resume, o.file)
		}
		return nil, usageError{err}
	}
	o.seed = uint64(r.Seed)
	return st, nil
}

// openNewStore opens the results database for a new run, creating its
// directory.
func openNewStore(ctx context.Context, path string) (*store.Store, error) {
	if !store.IsURL(path) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, usageErrorf("results database: %w", err)
		}
	}
	st, err := store.Open(ctx, path)
	if err != nil {
		return nil, usageError{err} // a bad --db is bad input, found before the firewall is touched
	}
	return st, nil
}

// firewallConfig is what a sweep reads from the firewall before planning.
type firewallConfig struct {
	info     fwapi.Info
	inv      *fwapi.Inventory // nil when the driver cannot list it
	infoJSON []byte
	raw      []byte // config.xml as read
	config   *configxml.Config
	// linkWarnings are the inventory's links that are not full duplex or
	// below their NIC's best: each sample carries them, so a report of any
	// point says its throughput may be the link's.
	linkWarnings []string
}

func readFirewall(ctx context.Context, io *streams, fw fwapi.Firewall, t *fwapi.Target) (firewallConfig, error) {
	var fc firewallConfig
	info, err := fw.Info(ctx)
	if err != nil {
		return fc, err
	}
	fc.info = info
	// What ran on the box goes with the run: a driver that cannot list it
	// (OPNsense without SSH) leaves it out, with a note.
	// A lab target's profile goes too (fwapi.Target.Lab).
	recorded := struct {
		fwapi.Info
		Inventory *fwapi.Inventory `json:"inventory,omitempty"`
		Lab       string           `json:"lab,omitempty"`
	}{Info: info, Lab: t.Lab}
	if lister, ok := fw.(interface {
		Inventory(context.Context) (fwapi.Inventory, error)
	}); ok {
		if inv, err := lister.Inventory(ctx); err != nil {
			fmt.Fprintf(io.ErrOut, "note: no inventory recorded: %v\n", err)
		} else {
			recorded.Inventory, fc.inv = &inv, &inv
			fc.linkWarnings = inv.LinkWarnings()
			for _, w := range fc.linkWarnings {
				fmt.Fprintf(io.ErrOut, "warning: %s\n", w)
			}
		}
	}
	fc.infoJSON, _ = json.Marshal(recorded)
	if fc.raw, err = fw.ReadConfig(ctx); err != nil {
		return fc, err
	}
	if fc.config, err = configxml.LoadBytes(fc.raw); err != nil {
		return fc, fmt.Errorf("the firewall's config.xml: %w", err)
	}
	if err := fc.config.SetProduct(info.Version); err != nil {
		fmt.Fprintf(io.ErrOut, "note: version %q not understood (%v); checking values against the version the config implies\n", info.Version, err)
	}
	return fc, nil
}

// preflight checks the probes, the power meter and that traffic passes,
// before anything touches the firewall.
func preflight(ctx context.Context, o *sweepOptions, spec *matrix.Spec, client, server probe.Endpoint) (probe.PowerMeter, error) {
	probes := spec.ProbeRuns()
	for _, pr := range probes {
		if err := pr.Validate(); err != nil {
			return nil, usageError{fmt.Errorf("probe %s: %w", pr.Name, err)}
		}
	}
	power, err := spec.PowerMeter()
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	// One check per tool the probes use: iperf3 for iperf3 and ndr (once
	// per window asked for, which a kernel may refuse), the packet
	// generator and the path for an ndr probe it generates (once per
	// direction), h2load, nginx and openssl for http, fwab's agent for
	// connect.
	iperf3Checked, connectChecked, httpChecked, packetsChecked := map[string]bool{}, false, false, map[probe.Direction]bool{}
	for _, pr := range probes {
		var err error
		switch {
		case pr.NDR != nil && pr.NDR.Packets != nil:
			if d := pr.NDR.Iperf3.Direction; !packetsChecked[d] {
				packetsChecked[d] = true
				sender, receiver := client, server
				if d == probe.Down {
					sender, receiver = server, client
				}
				_, err = pr.NDR.Packets.Check(ctx, sender, receiver)
			}
		case pr.HTTP != nil:
			if !httpChecked {
				httpChecked = true
				_, err = pr.HTTP.Check(ctx, client, server)
			}
		case pr.Connect != nil && !connectChecked:
			connectChecked = true
			err = pr.Connect.Check(ctx, client, server)
		case pr.Connect == nil && !iperf3Checked[pr.Iperf3.Window]:
			iperf3Checked[pr.Iperf3.Window] = true
			check := pr.Iperf3
			check.Duration = time.Second
			err = check.Check(ctx, client, server)
		}
		if err != nil {
			return nil, fmt.Errorf("before touching the firewall: %w", err)
		}
	}
	// The blackout stream: the agent on both hosts, and a second of it
	// passing the firewall as it is.
	if spec.Blackout != nil {
		b, err := spec.Blackout.Probe()
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", o.file, err)}
		}
		stop, err := b.Start(ctx, client, server)
		if err == nil {
			time.Sleep(time.Second)
			_, err = stop(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("before touching the firewall: the blackout stream: %w", err)
		}
	}
	// The canary: its triggers must pass the firewall as it is, with no
	// rule for them, or none passing later would show nothing.
	if spec.Canary.On() {
		c, err := spec.Canary.Probe(probe.NewNonce())
		if err != nil {
			return nil, usageError{fmt.Errorf("%s: %w", o.file, err)}
		}
		stop, err := c.Start(ctx, client, server)
		var r probe.CanaryResult
		if err == nil {
			time.Sleep(time.Second)
			r, err = stop(ctx)
		}
		switch {
		case err != nil:
			return nil, fmt.Errorf("before touching the firewall: the IPS canary: %w", err)
		case r.Sent == 0 || r.Passed == 0 || r.ControlPassed == 0:
			return nil, fmt.Errorf("before touching the firewall: the IPS canary: %d of %d triggers and %d of %d control datagrams passed the firewall with no rule against them; a canary that cannot pass cannot show an IPS that fails open: check that UDP passes from %s to %s", r.Passed, r.Sent, r.ControlPassed, r.ControlSent, client, server)
		}
	}
	return power, nil
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
	fmt.Fprintf(io.ErrOut, "time: %s in all: probes %.1f%%, idle phases %.1f%%, applies %.1f%%, settling %.1f%%, fwab overhead %.1f%% (%s); %d samples; service actions: %s\n",
		s.Wall.Round(time.Second), pct(s.Probe), pct(s.Idle), pct(s.Apply), pct(s.Settle), pct(s.Overhead()), s.Overhead().Round(time.Millisecond), s.Samples, strings.Join(actions, ", "))
}

// tunnelPSK reads the pre-shared key of the spec's tunnel: section (one
// line), which matrix check, matrix plan and sweep all read alike.
func tunnelPSK(spec *matrix.Spec) (string, error) {
	if spec.Tunnel == nil {
		return "", nil
	}
	if spec.Tunnel.PSKFile == "" {
		return "", usageErrorf("tunnel: psk_file is missing; give a file that holds the pre-shared key on one line (secrets are never written in the spec)")
	}
	psk, err := secretfile.ReadLine(spec.Tunnel.PSKFile)
	if err != nil {
		return "", usageError{fmt.Errorf("tunnel psk_file: %w", err)}
	}
	return psk, nil
}

// A sweep stops, instead of marking a point broken, when the firewall's
// disk refuses writes: matrix learns that from fwapi's command error.
var _ matrix.DiskError = (*fwapi.CommandError)(nil)

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
	steps   int
}

func newSweepProgress(io *streams, enabled bool, steps, probes int) *sweepProgress {
	sp := &sweepProgress{io: io, steps: steps}
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
	if p.Round == store.DriftRound {
		label = fmt.Sprintf("point %d drift check %s", p.Point.Index, p.Phase)
	}
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
	if p.Steps > sp.steps {
		sp.steps = p.Steps // adaptive repeats added a round
		sp.overall.SetTotal(int64(p.Steps), false)
	}
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

// measuredCosts is what each service action took on the target's latest
// run in the results database, read-only; none when there is no such run
// (the plan then estimates with its defaults).
func measuredCosts(ctx context.Context, db, target string) map[configxml.Action]time.Duration {
	st, err := store.OpenReadOnly(ctx, db)
	if err != nil {
		return nil
	}
	defer st.Close()
	events, err := st.LatestEvents(ctx, target, matrix.EventApplyCost)
	if err != nil {
		return nil
	}
	return matrix.MeasuredCosts(events)
}

// rollbackAdvice sizes a sweep's rollback deadline from what its plan's
// service actions took on this target before (plan.Measured): a step
// verified within ConfirmMargin of the deadline is refused and undone, so
// a deadline near an action's cost would fail points that are fine. When
// --rollback-after was not given (set), the deadline grows to
// fwapi.RollbackFor the slowest step (its actions summed), and a note says so; when it was
// given and the slowest step takes more than half of what it leaves
// before the margin, a warning says so and what to give instead.
func rollbackAdvice(plan *matrix.Plan, after time.Duration, set bool) (time.Duration, []string) {
	// One rollback covers a whole step, so a step's cost is the sum of
	// its actions' (a reboot and the IDS restart after it).
	var slowest time.Duration
	var which string
	for _, st := range plan.Steps {
		var cost time.Duration
		var names []string
		actions := st.Actions
		if canaryRestarts(plan, st) {
			actions = append(slices.Clone(actions), configxml.ActionIDSRestart)
		}
		for _, a := range actions {
			if c := plan.Measured[a]; c > 0 {
				cost += c
				names = append(names, string(a))
			}
		}
		if cost > slowest {
			slowest, which = cost, strings.Join(names, " + ")
		}
	}
	if slowest == 0 {
		return after, nil
	}
	need := fwapi.RollbackFor(slowest)
	if !set {
		if need > after {
			return need, []string{fmt.Sprintf("rollback deadline %v: %s took %v on this target (3× that; --rollback-after sets it)", need, which, slowest.Round(100*time.Millisecond))}
		}
		return after, nil
	}
	if slowest > (after-fwapi.ConfirmMargin(after))/2 {
		return after, []string{fmt.Sprintf("warning: %s took %v on this target, near --rollback-after %v (a step verified within %v of it is undone): give --rollback-after %v",
			which, slowest.Round(100*time.Millisecond), after, fwapi.ConfirmMargin(after), need)}
	}
	return after, nil
}

// canaryRestarts reports whether the sweep's canary may add an IDS
// restart to st at run time (matrix's placeCanary): its point may run
// inline IPS or detect-only IDS, whose config the canary rule goes into,
// and the step restarts no IDS of its own. A point of a config set may run it whatever
// its knobs say.
func canaryRestarts(plan *matrix.Plan, st matrix.Step) bool {
	if plan.Spec == nil || !plan.Spec.Canary.On() || st.Point == nil || slices.Contains(st.Actions, configxml.ActionIDSRestart) {
		return false
	}
	return slices.ContainsFunc(st.Point.Values, func(kv matrix.KnobValue) bool {
		return kv.Knob == "config" || strings.HasPrefix(kv.Knob, "ids@") && (kv.Value == configxml.IDSInlineIPS || kv.Value == configxml.IDSAlert)
	})
}
