package fwapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// A sweep with a firmware axis runs on the box's boot environments in
// turn: one session (lock, journal, original config, restore) per stay on
// an environment, a reboot into the next with bectl activate -t (the next
// boot only: a crash or a hung boot returns the box to the environment
// the pool boots), and at the end a boot back into the environment the box
// started on. fwab never changes which environment the pool boots.

// BootJournalFile is the file, in the target's state folder, that says a
// sweep left the box on another environment than the one it started on,
// so that RecoverBootEnv can boot it back.
const BootJournalFile = "bootenv.json"

// bootJournal is BootJournalFile's content.
type bootJournal struct {
	Start   string    `json:"start"`   // the environment the box booted at the start
	Version string    `json:"version"` // the firmware it holds
	Since   time.Time `json:"since"`
}

// EnvAxisError is a firmware axis the box's boot environments cannot serve
// as asked: nothing was changed, and the user must change the spec or the
// box (a usage error).
type EnvAxisError struct{ msg string }

func (e *EnvAxisError) Error() string { return e.msg }

// EnvSessionsOptions are what EnvSessions needs from its caller.
type EnvSessionsOptions struct {
	// StateDir is the target's state folder, where the boot journal is.
	StateDir string
	// Begin starts the session of the environment the box runs (lock,
	// guard, journal) and returns it with its release.
	Begin func(ctx context.Context) (*Session, func(), error)
	// Log receives a line for each boot.
	Log io.Writer
	// Target is the target's name, for the recovery hint.
	Target string
}

// EnvSessions is the firewall side of a sweep with a firmware axis: a
// session (matrix.Session) over the session of the environment the box is
// on, and the switch between environments (matrix.Sweep.SwitchFirmware).
type EnvSessions struct {
	o    EnvSessionsOptions
	fw   Firewall
	b    BootEnvironments
	envs map[string]string // firmware version → environment name
	// start is where the box began: the environment and its version.
	start, startVersion string
	booted              string // the environment it runs now

	cur      *Session
	release  func()
	startSHA string // the start environment's original config
}

// NewEnvSessions checks, before anything changes, that the box keeps boot
// environments, that exactly one holds each version of the axis, and that
// the next boot is the running environment's. running is the firmware the
// box runs now.
func NewEnvSessions(ctx context.Context, fw Firewall, running string, versions []string, o EnvSessionsOptions) (*EnvSessions, error) {
	b, ok := fw.(BootEnvironments)
	if !ok {
		return nil, fmt.Errorf("firmware axis: %T manages no boot environments", fw)
	}
	list, err := b.BootEnvs(ctx)
	if err != nil {
		return nil, fmt.Errorf("firmware axis: %w", err)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	e := &EnvSessions{o: o, fw: fw, b: b, envs: map[string]string{}, startVersion: running}
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
			return nil, &EnvAxisError{fmt.Sprintf("firmware axis: no boot environment holds %s; the firewall has %s (fwab fw upgrade VERSION --keep keeps the running firmware before an upgrade)", v, strings.Join(have, ", "))}
		default:
			return nil, &EnvAxisError{fmt.Sprintf("firmware axis: %s is in %d boot environments (%s): keep one", v, len(holders), strings.Join(holders, ", "))}
		}
	}
	if e.start == "" {
		return nil, errors.New("firmware axis: bectl lists no booted environment")
	}
	return e, nil
}

// Start is the environment the box started on.
func (e *EnvSessions) Start() string { return e.start }

// EnvConfig is the config.xml another environment boots with.
type EnvConfig struct {
	Name, Version string
	Config        *configxml.Config
}

// OtherConfigs reads the config.xml of each environment of the axis other
// than the one the box runs, by version.
func (e *EnvSessions) OtherConfigs(ctx context.Context) ([]EnvConfig, error) {
	var out []EnvConfig
	for _, v := range slices.Sorted(maps.Keys(e.envs)) {
		name := e.envs[v]
		if name == e.start {
			continue
		}
		raw, err := e.b.BootEnvConfig(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("firmware axis: %w", err)
		}
		c, err := configxml.LoadBytes(raw)
		if err != nil {
			return nil, fmt.Errorf("firmware axis: boot environment %s's config.xml: %w", name, err)
		}
		out = append(out, EnvConfig{Name: name, Version: v, Config: c})
	}
	return out, nil
}

// Begin starts the session of the environment the box runs.
func (e *EnvSessions) Begin(ctx context.Context) error {
	s, release, err := e.o.Begin(ctx)
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
func (e *EnvSessions) ApplyChecked(ctx context.Context, config []byte, changes []configxml.Change) error {
	if e.cur == nil {
		return errors.New("no session: the last switch of boot environment failed")
	}
	return e.cur.ApplyChecked(ctx, config, changes)
}

// OriginalSHA256 is the original config of the environment the box
// started on, which it runs again once Close has booted it back.
func (e *EnvSessions) OriginalSHA256() string { return e.startSHA }

func (e *EnvSessions) closeCurrent(ctx context.Context) error {
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
func (e *EnvSessions) Switch(ctx context.Context, version string) (*configxml.Config, error) {
	name := e.envs[version]
	if name == "" {
		return nil, fmt.Errorf("no boot environment holds %s", version) // NewEnvSessions checked the axis
	}
	if err := e.closeCurrent(ctx); err != nil {
		return nil, fmt.Errorf("restoring environment %s before leaving it: %w", e.booted, err)
	}
	if e.booted == e.start {
		j, _ := json.Marshal(bootJournal{Start: e.start, Version: e.startVersion, Since: time.Now().UTC()})
		if err := atomicfile.WriteFile(filepath.Join(e.o.StateDir, BootJournalFile), j, 0o600); err != nil {
			return nil, err
		}
	}
	if err := bootEnvOnce(ctx, e.o.Log, e.fw, e.b, name, version); err != nil {
		return nil, err
	}
	e.booted = name
	if err := e.Begin(ctx); err != nil {
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
func (e *EnvSessions) Close(ctx context.Context) error {
	err := e.closeCurrent(ctx)
	if e.booted != e.start {
		if berr := bootEnvOnce(ctx, e.o.Log, e.fw, e.b, e.start, e.startVersion); berr != nil {
			return errors.Join(err, fmt.Errorf("booting back into %s: %w; the firewall runs %s: run 'fwab fw recover --target %s'", e.start, berr, e.booted, e.o.Target))
		}
		e.booted = e.start
	}
	if rerr := os.Remove(filepath.Join(e.o.StateDir, BootJournalFile)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// bootEnvOnce boots the firewall into environment name for the next boot
// only and checks that it runs version afterwards.
func bootEnvOnce(ctx context.Context, log io.Writer, fw Firewall, b BootEnvironments, name, version string) error {
	fmt.Fprintf(log, "booting boot environment %s (%s)\n", name, version)
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

// RecoverBootEnv is fw recover's last step: a sweep that died on another
// boot environment than the one the box started on left a boot journal in
// stateDir; boot the box back and check its version. It reports whether
// there was a journal.
func RecoverBootEnv(ctx context.Context, fw Firewall, stateDir string, log io.Writer) (bool, error) {
	path := filepath.Join(stateDir, BootJournalFile)
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
	b, ok := fw.(BootEnvironments)
	if !ok {
		return false, fmt.Errorf("%s names boot environment %s, but %T manages none", path, j.Start, fw)
	}
	list, err := b.BootEnvs(ctx)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(list, func(e BootEnv) bool { return e.Booted })
	pending := slices.ContainsFunc(list, func(e BootEnv) bool { return e.NextBoot && e.Name != j.Start })
	switch {
	case i < 0 || list[i].Name != j.Start:
		if err := bootEnvOnce(ctx, log, fw, b, j.Start, j.Version); err != nil {
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
