package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
)

// A sweep with a firmware axis runs on the box's boot environments in turn
// (fwapi.EnvSessions); this file wires it to the command: the axis from the
// spec, the sessions fw's commands start, and the check of each
// environment's config against the plan.

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

// newEnvSessions opens the firmware axis's sessions over the box's boot
// environments; a box that cannot serve the axis is a usage error.
func newEnvSessions(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target, fw fwapi.Firewall, running string, versions []string) (*fwapi.EnvSessions, error) {
	dir, err := stateDir(t)
	if err != nil {
		return nil, err
	}
	e, err := fwapi.NewEnvSessions(ctx, fw, running, versions, fwapi.EnvSessionsOptions{
		StateDir: dir,
		Begin:    func(ctx context.Context) (*fwapi.Session, func(), error) { return startSession(ctx, io, f, t, fw) },
		Log:      io.ErrOut,
		Target:   t.Name,
	})
	var axis *fwapi.EnvAxisError
	if errors.As(err, &axis) {
		return nil, usageError{err}
	}
	return e, err
}

// checkConfigs refuses, before anything changes, environments that boot
// with a config.xml differing from the running one's beyond the sweep's
// knobs: the comparison would measure those differences with the
// firmware. allow lets it run (an upgrade's config migration, say),
// naming them.
func checkConfigs(ctx context.Context, io *streams, e *fwapi.EnvSessions, plan *matrix.Plan, running *configxml.Config, allow bool) error {
	others, err := e.OtherConfigs(ctx)
	if err != nil {
		return err
	}
	for _, o := range others {
		diffs, err := plan.ConfigBeyondKnobs(running, o.Config)
		if err != nil {
			return fmt.Errorf("firmware axis: boot environment %s's config.xml: %w", o.Name, err)
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
		what := fmt.Sprintf("boot environment %s (%s) boots with a config.xml that differs from the running %s's beyond the spec's knobs in %d places:\n%s", o.Name, o.Version, e.Start(), len(diffs), strings.Join(lines, "\n"))
		if allow {
			fmt.Fprintf(io.ErrOut, "warning: %s\n(--allow-config-differences: measured with the firmware)\n", what)
			continue
		}
		return usageErrorf("firmware axis: %s\nits results would measure these with the firmware: make them agree on that environment (boot it, set what differs, boot back), or pass --allow-config-differences to measure them as they are (an upgrade's config migration, say); nothing was changed", what)
	}
	return nil
}

// recoverBootEnv is fw recover's last step (fwapi.RecoverBootEnv).
func recoverBootEnv(ctx context.Context, io *streams, t *fwapi.Target, fw fwapi.Firewall) (bool, error) {
	dir, err := stateDir(t)
	if err != nil {
		return false, err
	}
	return fwapi.RecoverBootEnv(ctx, fw, dir, io.ErrOut)
}
