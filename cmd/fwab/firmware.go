package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/atomicfile"
	"github.com/fwab/fwab/matrix"
)

// A sweep with a firmware axis runs on the box's boot environments in
// turn: one session (lock, journal, original config, restore) per stay on
// an environment, a reboot into the next with bectl activate -t (the next
// boot only: a crash or a hung boot returns the box to the environment
// the pool boots), and at the end a boot back into the environment the box
// started on. fwab never changes which environment the pool boots.

// firmwareValues are the versions of the spec's firmware axis; nil when it
// has none.
func firmwareValues(spec *matrix.Spec) []string {
	for _, ax := range spec.Axes {
		if ax.Knob == matrix.FirmwareKnob {
			return ax.Values
		}
	}
	return nil
}

// bootJournal is what the state folder keeps while a sweep is on another
// environment than the one the box started on, so that fw recover can
// boot it back.
type bootJournal struct {
	Start   string    `json:"start"`   // the environment the box booted at the start
	Version string    `json:"version"` // the firmware it holds
	Since   time.Time `json:"since"`
}

const bootJournalFile = "bootenv.json"

// envSessions is the firewall side of such a sweep: a matrix.Session over
// the session of the environment it is on.
type envSessions struct {
	io   *streams
	f    *targetFlags
	t    *fwapi.Target
	fw   fwapi.Firewall
	b    fwapi.BootEnvironments
	dir  string            // the target's state folder
	envs map[string]string // firmware version → environment name
	// start is where the box began: the environment and its version.
	start, startVersion string
	booted              string // the environment it runs now

	cur      *fwapi.Session
	release  func()
	startSHA string // the start environment's original config
}

// newEnvSessions checks, before anything changes, that the box keeps
// boot environments, that exactly one holds each version of the axis, and
// that the next boot is the running environment's.
func newEnvSessions(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target, fw fwapi.Firewall, running string, versions []string) (*envSessions, error) {
	b, ok := fw.(fwapi.BootEnvironments)
	if !ok {
		return nil, fmt.Errorf("firmware axis: %T manages no boot environments", fw)
	}
	list, err := b.BootEnvs(ctx)
	if err != nil {
		return nil, fmt.Errorf("firmware axis: %w", err)
	}
	dir, err := stateDir(t)
	if err != nil {
		return nil, err
	}
	e := &envSessions{io: io, f: f, t: t, fw: fw, b: b, dir: dir, envs: map[string]string{}, startVersion: running}
	var have []string
	for _, env := range list {
		have = append(have, fmt.Sprintf("%s (%s)", env.Name, cmp.Or(env.Version, "version unknown: "+env.Reason)))
		if env.Booted {
			e.start, e.booted = env.Name, env.Name
		}
		if env.NextBoot && !env.Booted {
			return nil, fmt.Errorf("firmware axis: boot environment %s boots next, not the running %s: fwab changes only the next boot; make the running one the next (bectl activate %s, or bectl activate -T) first", env.Name, cmp.Or(e.start, "one"), cmp.Or(e.start, "NAME"))
		}
	}
	for _, v := range versions {
		var holders []string
		for _, env := range list {
			if env.Version == v {
				holders = append(holders, env.Name)
			}
		}
		switch len(holders) {
		case 1:
			e.envs[v] = holders[0]
		case 0:
			return nil, usageErrorf("firmware axis: no boot environment holds %s; the firewall has %s (fwab fw upgrade VERSION --keep keeps the running firmware before an upgrade)", v, strings.Join(have, ", "))
		default:
			return nil, usageErrorf("firmware axis: %s is in %d boot environments (%s): keep one", v, len(holders), strings.Join(holders, ", "))
		}
	}
	if e.start == "" {
		return nil, errors.New("firmware axis: bectl lists no booted environment")
	}
	return e, nil
}

// checkConfigs refuses, before anything changes, environments that boot
// with a config.xml differing from the running one's beyond the sweep's
// knobs: the comparison would measure those differences with the
// firmware. allow lets it run (an upgrade's config migration, say),
// naming them.
func (e *envSessions) checkConfigs(ctx context.Context, plan *matrix.Plan, running *configxml.Config, allow bool) error {
	for _, v := range slices.Sorted(maps.Keys(e.envs)) {
		name := e.envs[v]
		if name == e.start {
			continue
		}
		raw, err := e.b.BootEnvConfig(ctx, name)
		if err != nil {
			return fmt.Errorf("firmware axis: %w", err)
		}
		c, err := configxml.LoadBytes(raw)
		if err != nil {
			return fmt.Errorf("firmware axis: boot environment %s's config.xml: %w", name, err)
		}
		diffs, err := plan.ConfigBeyondKnobs(running, c)
		if err != nil {
			return fmt.Errorf("firmware axis: boot environment %s's config.xml: %w", name, err)
		}
		if len(diffs) == 0 {
			continue
		}
		const show = 5
		var lines []string
		for _, d := range diffs[:min(show, len(diffs))] {
			lines = append(lines, "  "+d.String())
		}
		if len(diffs) > show {
			lines = append(lines, fmt.Sprintf("  … and %d more", len(diffs)-show))
		}
		what := fmt.Sprintf("boot environment %s (%s) boots with a config.xml that differs from the running %s's beyond the spec's knobs in %d places:\n%s", name, v, e.start, len(diffs), strings.Join(lines, "\n"))
		if allow {
			fmt.Fprintf(e.io.ErrOut, "warning: %s\n(--allow-config-differences: measured with the firmware)\n", what)
			continue
		}
		return usageErrorf("firmware axis: %s\nits results would measure these with the firmware: make them agree on that environment (boot it, set what differs, boot back), or pass --allow-config-differences to measure them as they are (an upgrade's config migration, say); nothing was changed", what)
	}
	return nil
}

// begin starts the session of the environment the box runs.
func (e *envSessions) begin(ctx context.Context) error {
	s, release, err := startSession(ctx, e.io, e.f, e.t, e.fw)
	if err != nil {
		return err
	}
	e.cur, e.release = s, release
	if e.startSHA == "" && e.booted == e.start {
		e.startSHA = s.OriginalSHA256()
	}
	return nil
}

// ApplyChecked implements matrix.Session.
func (e *envSessions) ApplyChecked(ctx context.Context, config []byte, changes []configxml.Change) error {
	if e.cur == nil {
		return errors.New("no session: the last switch of boot environment failed")
	}
	return e.cur.ApplyChecked(ctx, config, changes)
}

// OriginalSHA256 is the original config of the environment the box
// started on, which it runs again once Close has booted it back.
func (e *envSessions) OriginalSHA256() string { return e.startSHA }

func (e *envSessions) closeCurrent(ctx context.Context) error {
	if e.cur == nil {
		return nil
	}
	err := e.cur.Close(ctx)
	e.release()
	e.cur, e.release = nil, nil
	return err
}

// Switch implements matrix.Sweep.SwitchFirmware: restore and close the
// environment it leaves, boot the one that holds version, begin its
// session, and return its own config.
func (e *envSessions) Switch(ctx context.Context, version string) (*configxml.Config, error) {
	name := e.envs[version]
	if name == "" {
		return nil, fmt.Errorf("no boot environment holds %s", version) // newEnvSessions checked the axis
	}
	if err := e.closeCurrent(ctx); err != nil {
		return nil, fmt.Errorf("restoring environment %s before leaving it: %w", e.booted, err)
	}
	if e.booted == e.start {
		j, _ := json.Marshal(bootJournal{Start: e.start, Version: e.startVersion, Since: time.Now().UTC()})
		if err := atomicfile.WriteFile(filepath.Join(e.dir, bootJournalFile), j, 0o600); err != nil {
			return nil, err
		}
	}
	if err := bootEnvOnce(ctx, e.io, e.fw, e.b, name, version); err != nil {
		return nil, err
	}
	e.booted = name
	if err := e.begin(ctx); err != nil {
		return nil, err
	}
	raw, err := e.fw.ReadConfig(ctx)
	if err != nil {
		return nil, err
	}
	c, err := configxml.LoadBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("environment %s's config.xml: %w", name, err)
	}
	if err := c.SetProduct(version); err != nil {
		return nil, err
	}
	return c, nil
}

// Close implements matrix.Session: restore the environment the box runs,
// then boot back into the one it started on.
func (e *envSessions) Close(ctx context.Context) error {
	err := e.closeCurrent(ctx)
	if e.booted != e.start {
		if berr := bootEnvOnce(ctx, e.io, e.fw, e.b, e.start, e.startVersion); berr != nil {
			return errors.Join(err, fmt.Errorf("booting back into %s: %w; the firewall runs %s: run 'fwab fw recover --target %s'", e.start, berr, e.booted, e.t.Name))
		}
		e.booted = e.start
	}
	if rerr := os.Remove(filepath.Join(e.dir, bootJournalFile)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// bootEnvOnce boots the firewall into environment name for the next boot
// only and checks that it runs version afterwards.
func bootEnvOnce(ctx context.Context, io *streams, fw fwapi.Firewall, b fwapi.BootEnvironments, name, version string) error {
	fmt.Fprintf(io.ErrOut, "booting boot environment %s (%s)\n", name, version)
	if err := b.ActivateBootEnvOnce(ctx, name); err != nil {
		return err
	}
	if err := fw.Reboot(ctx); err != nil {
		return err
	}
	if err := fw.WaitReady(ctx, 15*time.Minute); err != nil {
		return fmt.Errorf("booting %s: %w", name, err)
	}
	info, err := fw.Info(ctx)
	if err != nil {
		return err
	}
	if info.Version != version {
		return fmt.Errorf("booted environment %s, but the firewall runs %s, not %s", name, info.Version, version)
	}
	return nil
}

// recoverBootEnv is fw recover's last step: a sweep that died on another
// boot environment than the one the box started on left a boot journal;
// boot the box back and check its version.
func recoverBootEnv(ctx context.Context, io *streams, t *fwapi.Target, fw fwapi.Firewall) (bool, error) {
	dir, err := stateDir(t)
	if err != nil {
		return false, err
	}
	path := filepath.Join(dir, bootJournalFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var j bootJournal
	if err := json.Unmarshal(data, &j); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	b, ok := fw.(fwapi.BootEnvironments)
	if !ok {
		return false, fmt.Errorf("%s names boot environment %s, but %T manages none", path, j.Start, fw)
	}
	list, err := b.BootEnvs(ctx)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(list, func(e fwapi.BootEnv) bool { return e.Booted })
	pending := slices.ContainsFunc(list, func(e fwapi.BootEnv) bool { return e.NextBoot && e.Name != j.Start })
	switch {
	case i < 0 || list[i].Name != j.Start:
		if err := bootEnvOnce(ctx, io, fw, b, j.Start, j.Version); err != nil {
			return false, err
		}
	case pending:
		// Killed between activate -t and the reboot: the next boot would
		// go to the other environment.
		if err := b.ActivateBootEnvOnce(ctx, j.Start); err != nil {
			return false, err
		}
	}
	return true, os.Remove(path)
}
