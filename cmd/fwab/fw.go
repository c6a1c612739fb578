package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/atomicfile"
)

// targetFlags pick a firewall from the targets file.
type targetFlags struct {
	target           string
	targets          string
	acceptNewHostKey bool
	rollbackAfter    time.Duration
	lease            time.Duration
	keepOriginal     bool
}

func addTargetFlags(cmd *cobra.Command, f *targetFlags) {
	cmd.Flags().StringVar(&f.target, "target", "", "the firewall, by its name in the targets file (required)")
	addTargetsFileFlags(cmd, f)
}

// addTargetsFileFlags are the target flags but --target itself, for a
// command that takes several targets.
func addTargetsFileFlags(cmd *cobra.Command, f *targetFlags) {
	cmd.Flags().StringVar(&f.targets, "targets", fwapi.DefaultTargetsPath(), "the targets file")
	cmd.Flags().BoolVar(&f.acceptNewHostKey, "accept-new-host-key", false, "trust and remember an SSH host key seen for the first time (a changed key is always refused)")
}

func addRollbackFlag(cmd *cobra.Command, f *targetFlags) {
	cmd.Flags().DurationVar(&f.rollbackAfter, "rollback-after", fwapi.DefaultRollbackAfter, "the firewall restores the previous config by itself unless fwab confirms the change within this time (a sweep raises the default to 3× the slowest apply measured on the target)")
	cmd.Flags().BoolVar(&f.keepOriginal, "keep-original", false, "keep the local copy of the firewall's original config (it holds the box's keys) after the session restored it; by default it is removed then")
	cmd.Flags().DurationVar(&f.lease, "lease", 0, "the firewall restores the session's original config by itself unless fwab renews its lease within this time (default: the target's lease:, else "+fwapi.DefaultLease.String()+": longer than a reboot plus a step's rollback)")
}

// leaseLength is the session's lease: --lease, else the target's lease:,
// else the default.
func (f *targetFlags) leaseLength(t *fwapi.Target) (time.Duration, error) {
	if f.lease != 0 {
		if f.lease < 30*time.Second {
			return 0, usageErrorf("--lease %v is under 30s: the box needs time for a reboot between renewals", f.lease)
		}
		return f.lease, nil
	}
	return t.LeaseLength()
}

func (f *targetFlags) lookup() (*fwapi.Target, error) {
	if f.target == "" {
		return nil, usageErrorf("--target is required: name a firewall from %s", f.targets)
	}
	tf, err := readTargets(f.targets)
	if err != nil {
		return nil, err
	}
	t, err := tf.Lookup(f.target)
	if err != nil {
		return nil, usageError{err}
	}
	return t, nil
}

// checkOfflineFlavor checks an offline --config against the target the
// command plans for (--target, else the spec's target:): a config of the
// other product would plan changes that target cannot take. Without that
// target in the targets file there is nothing to compare.
func (f *targetFlags) checkOfflineFlavor(specTarget, configPath string, c *configxml.Config) error {
	name := cmp.Or(f.target, specTarget)
	if name == "" {
		return nil
	}
	tf, err := fwapi.LoadTargets(f.targets)
	if err != nil {
		return nil // offline: the targets file is not needed
	}
	t, err := tf.Lookup(name)
	if err != nil || t.Flavor == string(c.Flavor()) {
		return nil
	}
	return usageErrorf("target %s is %s but %s is a %s config: give the target's own config.xml (fwab fw pull --target %s -o FILE), or drop --config to plan against the firewall", name, t.Flavor, configPath, c.Flavor(), name)
}

// readTargets reads the targets file at path, checked (fwapi.LoadTargets).
// A missing default file is an empty set (no target yet); a path the user
// typed must exist, or a typo would read as "no targets".
func readTargets(path string) (*fwapi.TargetsFile, error) {
	if path != fwapi.DefaultTargetsPath() {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, usageErrorf("targets file %s does not exist: check the --targets path (without it fwab reads %s)", path, fwapi.DefaultTargetsPath())
		}
	}
	tf, err := fwapi.LoadTargets(path)
	if err != nil {
		return nil, usageError{err}
	}
	return tf, nil
}

// open connects to the target's firewall.
func (f *targetFlags) open(ctx context.Context, io *streams) (*fwapi.Target, fwapi.Firewall, error) {
	t, err := f.lookup()
	if err != nil {
		return nil, nil, err
	}
	// A key, password or CA file the target names but that is not there,
	// or a secret others may read, is bad input, said before any
	// connection is tried.
	if ps := t.FileProblems(); len(ps) > 0 {
		var texts []string
		for _, p := range ps {
			texts = append(texts, p.String())
		}
		return nil, nil, usageErrorf("target %s: %s (fix it in %s)", t.Name, strings.Join(texts, "; "), f.targets)
	}
	fw, err := fwapi.Open(ctx, t, fwapi.OpenOptions{AcceptNewHostKey: f.acceptNewHostKey, Logger: logger(io)})
	if err != nil {
		return nil, nil, err
	}
	return t, fw, nil
}

func logger(io *streams) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.ErrOut, &slog.HandlerOptions{Level: &io.LogLevel}))
}

// guardOf returns the firewall's lock and rollback: the driver's own, or
// for a driver without one (OPNsense over its API), the shell guard over
// the target's SSH. The returned close releases that extra connection.
func guardOf(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target, fw fwapi.Firewall) (fwapi.Guard, func(), error) {
	if g, ok := fw.(fwapi.Guard); ok {
		return g, func() {}, nil
	}
	if t.SSH == nil || t.Flavor != "opnsense" {
		return nil, nil, fmt.Errorf("target %s: the %s driver has no firewall lock or rollback and the target has no ssh section: refusing to change it", t.Name, t.Flavor)
	}
	sh, err := fwapi.DialTarget(ctx, t, fwapi.OpenOptions{AcceptNewHostKey: f.acceptNewHostKey, Logger: logger(io)})
	if err != nil {
		return nil, nil, fmt.Errorf("lock and rollback need SSH: %w", err)
	}
	return fwapi.OPNsenseShellGuard(sh), func() { sh.Close() }, nil
}

// startSession locks the firewall and records its config for restoring:
// the one way commands that change a firewall begin. The returned release
// closes the guard's extra connection, if any, after the session is closed.
func startSession(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target, fw fwapi.Firewall) (*fwapi.Session, func(), error) {
	g, closeGuard, err := guardOf(ctx, io, f, t, fw)
	if err != nil {
		return nil, nil, err
	}
	dir, err := stateDir(t)
	if err != nil {
		closeGuard()
		return nil, nil, err
	}
	lease, err := f.leaseLength(t)
	if err != nil {
		closeGuard()
		return nil, nil, err
	}
	s, err := fwapi.StartSession(ctx, fw, g, fwapi.SessionOptions{
		Target: t.Name, Dir: dir, Owner: lockOwner(), RollbackAfter: f.rollbackAfter, Lease: lease, KeepOriginal: f.keepOriginal, Logger: logger(io),
	})
	if err != nil {
		closeGuard()
		return nil, nil, err
	}
	return s, closeGuard, nil
}

func lockOwner() fwapi.LockOwner {
	name := "unknown"
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	host, _ := os.Hostname()
	var tok [8]byte
	rand.Read(tok[:])
	return fwapi.LockOwner{Owner: name + "@" + host, PID: os.Getpid(), Time: time.Now(), Token: hex.EncodeToString(tok[:])}
}

func newFwCmd(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fw",
		Short: "Talk to a firewall: info, pull, push, apply, verify, metrics, upgrade, firmwares, recover",
	}
	cmd.AddCommand(
		newFwInfoCmd(io),
		newFwPullCmd(io),
		newFwPushCmd(io),
		newFwApplyCmd(io),
		newFwVerifyCmd(io),
		newFwMetricsCmd(io),
		newFwUpgradeCmd(io),
		newFwFirmwaresCmd(io),
		newFwRecoverCmd(io),
	)
	return cmd
}

// --- info

func newFwInfoCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "info --target NAME",
		Short: "Show the firewall's product, version, hostname and NICs",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFwInfo(cmd.Context(), io, f, asJSON)
		},
	}
	addTargetFlags(cmd, f)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func runFwInfo(ctx context.Context, io *streams, f *targetFlags, asJSON bool) error {
	_, fw, err := f.open(ctx, io)
	if err != nil {
		return err
	}
	defer fw.Close()
	info, err := fw.Info(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(io.Out, info)
	}
	fmt.Fprintf(io.Out, "flavor\t%s\nversion\t%s\nhostname\t%s\nnics\t%s\n", info.Flavor, info.Version, info.Hostname, strings.Join(info.NICs, " "))
	return nil
}

// --- pull

func newFwPullCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var out string
	cmd := &cobra.Command{
		Use:   "pull --target NAME [-o FILE]",
		Short: "Copy the firewall's config.xml, byte for byte, to a file or stdout",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFwPull(cmd.Context(), io, f, out)
		},
	}
	addTargetFlags(cmd, f)
	cmd.Flags().StringVarP(&out, "output", "o", "-", "where to write config.xml (- for stdout)")
	return cmd
}

func runFwPull(ctx context.Context, io *streams, f *targetFlags, out string) error {
	_, fw, err := f.open(ctx, io)
	if err != nil {
		return err
	}
	defer fw.Close()
	data, err := fw.ReadConfig(ctx)
	if err != nil {
		return err
	}
	if out == "-" {
		_, err = io.Out.Write(data)
		return err
	}
	return atomicfile.WriteFile(out, data, 0o600)
}

// --- push and apply: one commit-confirmed change that stays

func newFwPushCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var diff bool
	cmd := &cobra.Command{
		Use:   "push FILE --target NAME",
		Short: "Replace the firewall's config.xml with FILE, apply what changed, verify, keep it",
		Long: "push compares FILE with the running config, writes it, runs the narrowest service action\n" +
			"for each changed knob and checks the runtime state. A rollback armed on the firewall restores\n" +
			"the previous config unless the change is confirmed within --rollback-after.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := os.ReadFile(args[0])
			if err != nil {
				return usageError{err}
			}
			next, err := configxml.LoadBytes(data)
			if err != nil {
				return usageError{fmt.Errorf("%s: %w", args[0], err)}
			}
			return runFwChange(cmd.Context(), io, f, diff, func(*configxml.Config) (*configxml.Config, error) { return next, nil })
		},
	}
	addTargetFlags(cmd, f)
	addRollbackFlag(cmd, f)
	cmd.Flags().BoolVar(&diff, "diff", false, "print what would change on the firewall, from its current config; write nothing")
	return cmd
}

func newFwApplyCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var diff bool
	cmd := &cobra.Command{
		Use:   "apply KNOB=VALUE... --target NAME",
		Short: "Set knobs on the firewall's config, apply them, verify, keep them",
		Long: "apply sets each KNOB=VALUE (see 'fwab config knobs') in the running config, writes it,\n" +
			"runs the narrowest service action for each change and checks the runtime state,\n" +
			"commit-confirmed like push.",
		Args: minArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			for _, a := range args {
				if _, _, err := configxml.ParseAssignment(a); err != nil {
					return usageError{err}
				}
			}
			return runFwChange(cmd.Context(), io, f, diff, func(cur *configxml.Config) (*configxml.Config, error) {
				next, err := configxml.LoadBytes(cur.Bytes())
				if err != nil {
					return nil, err
				}
				if !cur.Product().Inferred {
					next.SetProduct(cur.Product().Version)
				}
				if err := next.SetAll(args); err != nil {
					return nil, usageError{err}
				}
				return next, nil
			})
		},
	}
	addTargetFlags(cmd, f)
	addRollbackFlag(cmd, f)
	cmd.Flags().BoolVar(&diff, "diff", false, "print what would change on the firewall, from its current config; write nothing")
	return cmd
}

func runFwChange(ctx context.Context, io *streams, f *targetFlags, diff bool, edit func(cur *configxml.Config) (*configxml.Config, error)) error {
	t, fw, err := f.open(ctx, io)
	if err != nil {
		return err
	}
	defer fw.Close()
	info, err := fw.Info(ctx)
	if err != nil {
		return err
	}
	if diff {
		return diffFwChange(ctx, io, fw, info.Version, edit)
	}
	s, release, err := startSession(ctx, io, f, t, fw)
	if err != nil {
		return err
	}
	defer release()
	err = applyChange(ctx, io, t, info.Version, s, edit)
	if err != nil {
		// Leave the firewall as it was.
		if cerr := s.Close(ctx); cerr != nil {
			return fmt.Errorf("%w; %v", err, cerr)
		}
		return err
	}
	return s.Commit(ctx)
}

func applyChange(ctx context.Context, io *streams, t *fwapi.Target, version string, s *fwapi.Session, edit func(cur *configxml.Config) (*configxml.Config, error)) error {
	cur, err := configxml.LoadBytes(s.Original())
	if err != nil {
		return fmt.Errorf("the firewall's config.xml: %w", err)
	}
	// Values the running version cannot take are refused before anything
	// changes, so the knobs must know the version the firewall reports.
	if err := cur.SetProduct(version); err != nil {
		fmt.Fprintf(io.ErrOut, "note: version %q not understood (%v); checking values against the version the config implies\n", version, err)
		version = ""
	}
	next, err := edit(cur)
	if err != nil {
		return err
	}
	if version != "" {
		if err := next.SetProduct(version); err != nil {
			return err
		}
	}
	if next.Flavor() != cur.Flavor() {
		return usageErrorf("the new config is %s but target %s runs %s", next.Flavor(), t.Name, cur.Flavor())
	}
	if bad := newLintErrors(cur, next); len(bad) > 0 {
		return fmt.Errorf("refusing the change, nothing was touched: it would make the config unsafe or invalid: %s", strings.Join(bad, "; "))
	}
	changes, paths := configxml.Diff(cur, next)
	if len(changes) == 0 && len(paths) == 0 {
		fmt.Fprintln(io.ErrOut, "no change")
		return nil
	}
	if len(changes) == 0 {
		fmt.Fprintf(io.ErrOut, "note: %d element changes outside any knob; written without a service action\n", len(paths))
	}
	for _, c := range changes {
		fmt.Fprintf(io.ErrOut, "%s: %s -> %s (%s)\n", c.Knob, c.From, c.To, c.Action)
	}
	if err := s.Apply(ctx, next.Bytes(), changes, fwapi.ChangeVerifier(next, changes)); err != nil {
		return err
	}
	fmt.Fprintf(io.ErrOut, "applied and confirmed; config sha256 %s\n", fwapi.SHA256Hex(next.Bytes()))
	return nil
}

// diffFwChange prints what a push or apply would change, read from the
// firewall's current config, without taking the lock or writing anything.
func diffFwChange(ctx context.Context, io *streams, fw fwapi.Firewall, version string, edit func(cur *configxml.Config) (*configxml.Config, error)) error {
	raw, err := fw.ReadConfig(ctx)
	if err != nil {
		return err
	}
	cur, err := configxml.LoadBytes(raw)
	if err != nil {
		return fmt.Errorf("the firewall's config.xml: %w", err)
	}
	if err := cur.SetProduct(version); err != nil {
		fmt.Fprintf(io.ErrOut, "note: version %q not understood (%v); checking values against the version the config implies\n", version, err)
	}
	next, err := edit(cur)
	if err != nil {
		return err
	}
	if next.Flavor() != cur.Flavor() {
		return usageErrorf("the new config is %s but the firewall runs %s", next.Flavor(), cur.Flavor())
	}
	for _, b := range newLintErrors(cur, next) {
		fmt.Fprintf(io.ErrOut, "would be refused: %s\n", b)
	}
	knobs, paths := configxml.Diff(cur, next)
	if len(knobs) == 0 && len(paths) == 0 {
		fmt.Fprintln(io.Out, "no differences")
		return nil
	}
	if err := printKnobChanges(io, knobs); err != nil {
		return err
	}
	for _, l := range collapseRuns(paths) {
		fmt.Fprintln(io.Out, l)
	}
	return nil
}

// newLintErrors lists the lint errors next has and cur had not.
func newLintErrors(cur, next *configxml.Config) []string {
	had := map[string]bool{}
	for _, f := range configxml.Lint(cur) {
		had[f.Rule+f.Message] = true
	}
	var bad []string
	for _, f := range configxml.Lint(next) {
		if f.Severity == configxml.SeverityError && !had[f.Rule+f.Message] {
			bad = append(bad, f.Rule+" "+f.Message)
		}
	}
	return bad
}

// --- verify (also 'fwab verify')

func newFwVerifyCmd(io *streams) *cobra.Command {
	cmd := newVerifyCmd(io)
	cmd.Use = "verify --target NAME"
	return cmd
}

// --- metrics

func newFwMetricsCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var count int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "metrics --target NAME [--count N]",
		Short: "Sample the firewall's CPU, temperature, memory and mbufs",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 1 {
				return usageErrorf("--count must be at least 1")
			}
			return runFwMetrics(cmd.Context(), io, f, count, asJSON)
		},
	}
	addTargetFlags(cmd, f)
	cmd.Flags().IntVar(&count, "count", 1, "number of samples (each takes about a second)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per sample")
	return cmd
}

func runFwMetrics(ctx context.Context, io *streams, f *targetFlags, count int, asJSON bool) error {
	_, fw, err := f.open(ctx, io)
	if err != nil {
		return err
	}
	defer fw.Close()
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	if !asJSON {
		fmt.Fprintln(tw, "TIME\tCPU%\tPER-CPU%\tTEMP°C\tMEM%\tMBUFS")
	}
	for i := 0; i < count; i++ {
		m, err := fw.Metrics(ctx)
		if err != nil {
			return err
		}
		if asJSON {
			if err := writeJSON(io.Out, m); err != nil {
				return err
			}
			continue
		}
		per := make([]string, len(m.PerCPU))
		for j, p := range m.PerCPU {
			per[j] = fmt.Sprintf("%.0f", p)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%.1f\t%.1f\t%d\n", m.Time.Format(time.TimeOnly), m.CPUPercent, strings.Join(per, ","), m.TempCelsius, m.MemUsedPct, m.MbufsInUse)
	}
	return tw.Flush()
}

// --- upgrade

func newFwUpgradeCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var timeout time.Duration
	var keep bool
	cmd := &cobra.Command{
		Use:   "upgrade [VERSION] --target NAME [--keep]",
		Short: "Upgrade the firewall through its own mechanism, wait for it and check the version",
		Long: `Upgrade the firewall through its own mechanism, wait for it and check the version.

--keep first makes a boot environment of the running system, named after
its version (bectl create -r; neither bectl nor OPNsense's API records an
environment's version), so that the old firmware stays on the box beside
the new one: 'fwab fw firmwares' lists them. It needs a ZFS root and the
target's ssh section, and is refused before anything changes when an
environment of that name holds another version, or when the pool has less
room than the running system's size (zfs list): the kept environment holds
every block the upgrade replaces.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			version := ""
			if len(args) == 1 {
				version = args[0]
			}
			return runFwUpgrade(cmd.Context(), io, f, version, timeout, keep)
		},
	}
	addTargetFlags(cmd, f)
	cmd.Flags().DurationVar(&timeout, "timeout", 45*time.Minute, "give up after this long")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the running firmware in a boot environment named after its version")
	return cmd
}

// keepFirmware makes a boot environment of the running firmware, named
// after its version; one of that name that holds the same version already
// is kept as it is.
func keepFirmware(ctx context.Context, io *streams, fw fwapi.Firewall) error {
	b, ok := fw.(fwapi.BootEnvironments)
	if !ok {
		return fmt.Errorf("--keep: %T manages no boot environments", fw)
	}
	info, err := fw.Info(ctx)
	if err != nil {
		return err
	}
	envs, err := b.BootEnvs(ctx)
	if err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	// The kept environment holds on to every block the upgrade replaces,
	// and an upgrade may replace the whole system: room for a second copy
	// of it is what keeping it can cost.
	space, err := b.BootEnvSpace(ctx)
	if err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	if space.Available < space.Referenced {
		return fmt.Errorf("--keep: the pool has %s free, and keeping %s beside its upgrade can take up to %s (the running system's size, its child datasets counted: the kept environment holds every block the upgrade replaces); make room (bectl destroy an environment no longer needed, 'fwab fw firmwares' lists them) and try again; nothing was changed",
			humanize.IBytes(uint64(space.Available)), info.Version, humanize.IBytes(uint64(space.Referenced)))
	}
	for _, e := range envs {
		if e.Name == info.Version && e.Version == info.Version {
			fmt.Fprintf(io.ErrOut, "boot environment %s already holds %s: kept as it is\n", e.Name, info.Version)
			return nil
		}
	}
	if err := b.CreateBootEnv(ctx, info.Version); err != nil {
		return fmt.Errorf("--keep: %w", err)
	}
	fmt.Fprintf(io.ErrOut, "kept %s in boot environment %s\n", info.Version, info.Version)
	return nil
}

func runFwUpgrade(ctx context.Context, io *streams, f *targetFlags, version string, timeout time.Duration, keep bool) error {
	if err := fwapi.CheckUpgradeVersion(version); err != nil {
		return usageError{err}
	}
	if version != "" {
		// The version is held to the target's scheme before any connection.
		t, err := f.lookup()
		if err != nil {
			return err
		}
		if err := configxml.CheckVersion(configxml.Flavor(t.Flavor), version); err != nil {
			return usageErrorf("--version: %w", err)
		}
	}
	t, fw, err := f.open(ctx, io)
	if err != nil {
		return err
	}
	defer fw.Close()
	g, closeGuard, err := guardOf(ctx, io, f, t, fw)
	if err != nil {
		return err
	}
	defer closeGuard()
	owner := lockOwner()
	if err := g.Lock(ctx, owner); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if keep {
		if err := keepFirmware(ctx, io, fw); err != nil {
			g.Unlock(context.WithoutCancel(ctx), owner)
			return err
		}
	}
	err = fw.Upgrade(ctx, version, func(line string) { fmt.Fprintln(io.ErrOut, line) })
	// A reboot empties /var/run and so the lock; release it if it is still there.
	unlockCtx, cancelUnlock := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancelUnlock()
	if uerr := g.Unlock(unlockCtx, owner); uerr != nil && err == nil && !strings.Contains(uerr.Error(), "No such file") {
		fmt.Fprintf(io.ErrOut, "warning: %v\n", uerr)
	}
	return err
}

// --- firmwares

func newFwFirmwaresCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "firmwares --target NAME",
		Short: "List the firewall's boot environments: the firmware each holds, which runs, which boots next",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, fw, err := f.open(cmd.Context(), io)
			if err != nil {
				return err
			}
			defer fw.Close()
			b, ok := fw.(fwapi.BootEnvironments)
			if !ok {
				return fmt.Errorf("%T manages no boot environments", fw)
			}
			envs, err := b.BootEnvs(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(io.Out, envs)
			}
			tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BOOT ENVIRONMENT\tFIRMWARE\tRUNS\tBOOTS NEXT\tCREATED")
			for _, e := range envs {
				v := e.Version
				if v == "" {
					v = "? (" + e.Reason + ")"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, v, yesNo(e.Booted), yesNo(e.NextBoot), e.Created)
			}
			return tw.Flush()
		},
	}
	addTargetFlags(cmd, f)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "-"
}

// --- recover

func newFwRecoverCmd(io *streams) *cobra.Command {
	f := &targetFlags{}
	var wait time.Duration
	var force bool
	cmd := &cobra.Command{
		Use:   "recover --target NAME",
		Short: "After a crash, restore the original config (from the local journal, or from what the session's lease keeps on the box)",
		Long: "Ends a session whose fwab is gone: restores its original config, runs its service actions, releases its lease and lock.\n" +
			"From the machine that ran the session it uses the local journal; from any other machine, what the session's lease keeps on the box.\n" +
			"A session whose lease has not ended and whose fwab may still run is refused (it names the holder and when its lease ends) unless --force.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runFwRecover(cmd.Context(), io, f, wait, force)
		},
	}
	addTargetFlags(cmd, f)
	cmd.Flags().DurationVar(&wait, "wait", 15*time.Minute, "how long to wait for a firewall that does not answer (fwab may have died while it rebooted)")
	cmd.Flags().BoolVar(&force, "force", false, "recover even a session that may still be running (its lease has not ended)")
	return cmd
}

// openWaiting opens the target, waiting up to wait while the firewall
// does not answer (refused, unreachable, timed out: a reboot), and then
// until it is ready.
func openWaiting(ctx context.Context, io *streams, f *targetFlags, wait time.Duration) (*fwapi.Target, fwapi.Firewall, error) {
	deadline := time.Now().Add(wait)
	said := false
	for {
		t, fw, err := f.open(ctx, io)
		if err == nil {
			if err := fw.WaitReady(ctx, max(time.Until(deadline), 30*time.Second)); err != nil {
				fw.Close()
				return nil, nil, err
			}
			return t, fw, nil
		}
		if !unreachable(err) || time.Now().After(deadline) {
			return nil, nil, err
		}
		if !said {
			fmt.Fprintf(io.ErrOut, "the firewall does not answer (%v); it may be rebooting: waiting up to %v\n", err, wait)
			said = true
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// unreachable tells a firewall that does not answer from one that refuses
// fwab (credentials, host key), which waiting cannot mend.
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH) ||
		errors.Is(err, fwapi.ErrConnectionLost) || errors.As(err, &ne) && ne.Timeout()
}

func runFwRecover(ctx context.Context, io *streams, f *targetFlags, wait time.Duration, force bool) error {
	t, fw, err := openWaiting(ctx, io, f, wait)
	if err != nil {
		return err
	}
	defer fw.Close()
	g, closeGuard, err := guardOf(ctx, io, f, t, fw)
	if err != nil {
		return err
	}
	defer closeGuard()
	dir, err := stateDir(t)
	if err != nil {
		return err
	}
	rep, err := fwapi.RecoverWith(ctx, fw, g, dir, fwapi.RecoverOptions{Force: force})
	nothing := err != nil && strings.Contains(err.Error(), "nothing to recover")
	if err != nil && !nothing {
		return err
	}
	if rep.LeaseEnded != "" && !nothing {
		fmt.Fprintf(io.Out, "the session's lease had ended on the box without fwab (%s)\n", rep.LeaseEnded)
	}
	switch {
	case nothing:
	case rep.Left:
		fmt.Fprintf(io.Out, "ended the session of %s without writing: config.xml on the box is someone else's edit, left as it is; lease and lock removed\n", rep.Owner)
	case rep.FromBox:
		acts := make([]string, len(rep.Actions))
		for i, a := range rep.Actions {
			acts[i] = string(a)
		}
		what := "the firewall already had the original config"
		if rep.Restored {
			what = "restored the original config"
		}
		fmt.Fprintf(io.Out, "%s of the session of %s from the copy its lease kept on the box (sha256 %s verified); ran %s; lease and lock removed\n",
			what, rep.Owner, rep.SHA256, strings.Join(acts, ", "))
	case rep.NotStarted:
		fmt.Fprintln(io.Out, "the crashed session had not started (it was taking the lock): nothing was changed; its lock, if left, removed")
	case !rep.Restored:
		fmt.Fprintf(io.Out, "the firewall already had the original config (sha256 %s); lock removed\n", rep.SHA256)
	default:
		acts := make([]string, len(rep.Actions))
		for i, a := range rep.Actions {
			acts[i] = string(a)
		}
		fmt.Fprintf(io.Out, "restored the config from the session started %s (sha256 %s verified); ran %s; lock removed\n",
			rep.Started.Format(time.RFC3339), rep.SHA256, strings.Join(acts, ", "))
	}
	// A sweep with a firmware axis that died on another boot environment
	// left a boot journal: the box goes back to where it started.
	booted, berr := recoverBootEnv(ctx, io, t, fw)
	if berr != nil {
		return fmt.Errorf("booting back into the environment the sweep started on: %w", berr)
	}
	if booted {
		fmt.Fprintln(io.Out, "the firewall runs the boot environment the sweep started on again")
	}
	if nothing && !booted {
		return err
	}
	return nil
}
