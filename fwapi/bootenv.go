package fwapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Boot environments: two firmwares on one box, on a ZFS root, through
// FreeBSD's bectl(8). pfSense CE installed on ZFS has bectl (its upgrade
// does not manage environments); OPNsense 24.7 and later wrap the same
// bectl in its Snapshots API, whose activate is permanent — fwab needs
// activate -t (the next boot only, so that a hung boot returns the box to
// where it started), which only the shell offers, so both products take
// the ssh section of the target for this.
//
// upstream: opnsense-core 26.7 src/opnsense/scripts/system/bectl.py:65 — the API's activate runs `['bectl', 'activate', '--', inputargs.beName]`, no -t
// upstream: freebsd/freebsd-src@b1ea63e2e3c92d1346af067f5cf609e3e062f8b9 sbin/bectl/bectl.c:76 — `bectl activate [-t] beName`: -t activates for the next boot only

// BootEnv is one boot environment.
type BootEnv struct {
	Name     string `json:"name"`
	Booted   bool   `json:"booted"`    // bectl's N: running now
	NextBoot bool   `json:"next_boot"` // R: the next boot's
	Created  string `json:"created"`
	// Mountpoint is where the environment is mounted: "/" for the booted
	// one, "-" for one that is not mounted.
	Mountpoint string `json:"mountpoint"`
	// Version is the firmware the environment holds, read from its own
	// version file; "" when it could not be read (Reason says why).
	Version string `json:"version"`
	Reason  string `json:"reason,omitempty"`
}

// BootEnvironments is what a driver offers where the box keeps boot
// environments.
type BootEnvironments interface {
	BootEnvs(ctx context.Context) ([]BootEnv, error)
	CreateBootEnv(ctx context.Context, name string) error
	// ActivateBootEnvOnce makes the next boot, and only that one, boot name.
	ActivateBootEnvOnce(ctx context.Context, name string) error
	// BootEnvSpace is the room the running system's dataset has.
	BootEnvSpace(ctx context.Context) (PoolSpace, error)
	// BootEnvConfig reads the config.xml environment name boots with.
	BootEnvConfig(ctx context.Context, name string) ([]byte, error)
}

// PoolSpace is what zfs reports of the dataset mounted at /: the bytes
// still available to it (the pool's free space, less quotas and
// reservations) and the bytes it and its children refer to (the running
// system's size).
type PoolSpace struct {
	Available, Referenced int64
}

var (
	_ BootEnvironments = (*PfSense)(nil)
	_ BootEnvironments = (*OPNsense)(nil)
)

// ErrNoBootEnvs is returned where the box has no boot environments.
var ErrNoBootEnvs = errors.New("the firewall keeps no boot environments (bectl check failed: its root is not on ZFS); two firmwares cannot live on it, so compare them with two sequential runs (fwab fw upgrade between them)")

// bootEnvShell runs bectl through a driver's shell.
type bootEnvShell struct {
	run func(ctx context.Context, cmd string) ([]byte, error)
	// versionFile is where an environment keeps its firmware version;
	// parse reads it.
	versionFile string
	parse       func([]byte) string
	// configFile is config.xml's real path in an environment (not
	// through a link that leads out of it).
	configFile string
}

func (b bootEnvShell) check(ctx context.Context) error {
	if _, err := b.run(ctx, "bectl check"); err != nil {
		var ce *CommandError
		if errors.As(err, &ce) || strings.Contains(err.Error(), "exit status") {
			return ErrNoBootEnvs
		}
		return fmt.Errorf("bectl check: %w", err)
	}
	return nil
}

// list reads `bectl list -H` and each environment's version: the booted
// one's from the root, every other one's through bectl mount.
func (b bootEnvShell) list(ctx context.Context) ([]BootEnv, error) {
	envs, err := b.envs(ctx)
	if err != nil {
		return nil, err
	}
	for i := range envs {
		envs[i].Version, envs[i].Reason = b.version(ctx, envs[i])
	}
	return envs, nil
}

// envs reads `bectl list -H` alone, without the versions.
func (b bootEnvShell) envs(ctx context.Context) ([]BootEnv, error) {
	if err := b.check(ctx); err != nil {
		return nil, err
	}
	out, err := b.run(ctx, "bectl list -H")
	if err != nil {
		return nil, fmt.Errorf("bectl list: %w", err)
	}
	return parseBectlList(string(out))
}

func (b bootEnvShell) version(ctx context.Context, e BootEnv) (string, string) {
	data, err := b.readFile(ctx, e, b.versionFile)
	if err != nil {
		return "", err.Error()
	}
	if v := b.parse(data); v != "" {
		return v, ""
	}
	return "", fmt.Sprintf("%s in %s says no version", b.versionFile, e.Name)
}

// readFile reads path in environment e: the booted one's from the root,
// any other one's through bectl mount (and umount after).
func (b bootEnvShell) readFile(ctx context.Context, e BootEnv, path string) ([]byte, error) {
	dir := ""
	switch {
	case e.Booted:
	case strings.HasPrefix(e.Mountpoint, "/"):
		// Mounted already (a fwab killed between its mount and umount):
		// bectl refuses a second mount; read it where it is.
		dir = e.Mountpoint
	default:
		out, err := b.run(ctx, "bectl mount "+ShellQuote(e.Name))
		if err != nil {
			return nil, fmt.Errorf("bectl mount %s: %v", e.Name, err)
		}
		// bectl prints "Successfully mounted NAME at PATH".
		_, at, ok := strings.Cut(strings.TrimSpace(string(out)), " at ")
		if !ok || !strings.HasPrefix(at, "/") {
			b.run(ctx, "bectl umount "+ShellQuote(e.Name))
			return nil, fmt.Errorf("bectl mount %s said %q: no mount point", e.Name, strings.TrimSpace(string(out)))
		}
		dir = at
		defer b.run(context.WithoutCancel(ctx), "bectl umount "+ShellQuote(e.Name))
	}
	data, err := b.run(ctx, "cat "+ShellQuote(dir+path))
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %v", path, e.Name, err)
	}
	return data, nil
}

// config reads environment name's own config.xml; the list it finds
// the environment in needs no versions (no mount of the others).
func (b bootEnvShell) config(ctx context.Context, name string) ([]byte, error) {
	envs, err := b.envs(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range envs {
		if e.Name == name {
			return b.readFile(ctx, e, b.configFile)
		}
	}
	return nil, fmt.Errorf("no boot environment named %s on the firewall", name)
}

// parseBectlList reads `bectl list -H`: name, active (N, R, NR or -),
// mountpoint, space and creation, one tab between each.
func parseBectlList(out string) ([]BootEnv, error) {
	var envs []BootEnv
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 5 {
			return nil, fmt.Errorf("bectl list -H: line %q has %d columns, want 5 (name, active, mountpoint, space, created)", line, len(f))
		}
		envs = append(envs, BootEnv{Name: f[0], Booted: strings.Contains(f[1], "N"), NextBoot: strings.Contains(f[1], "R"), Mountpoint: f[2], Created: f[4]})
	}
	if len(envs) == 0 {
		return nil, errors.New("bectl list -H listed no boot environment")
	}
	return envs, nil
}

func (b bootEnvShell) create(ctx context.Context, name string) error {
	if err := checkBootEnvName(name); err != nil {
		return err
	}
	envs, err := b.list(ctx)
	if err != nil {
		return err
	}
	for _, e := range envs {
		if e.Name == name {
			return fmt.Errorf("a boot environment named %s exists already (it holds %s): destroy it on the box (bectl destroy %s) or keep it", name, orUnknown(e.Version), name)
		}
	}
	if _, err := b.run(ctx, "bectl create -r "+ShellQuote(name)); err != nil {
		return fmt.Errorf("bectl create %s: %w", name, err)
	}
	return nil
}

func (b bootEnvShell) activateOnce(ctx context.Context, name string) (booted bool, err error) {
	envs, err := b.list(ctx)
	if err != nil {
		return false, err
	}
	var names []string
	for _, e := range envs {
		if e.Name == name {
			if _, err := b.run(ctx, "bectl activate -t "+ShellQuote(name)); err != nil {
				return false, fmt.Errorf("bectl activate -t %s: %w", name, err)
			}
			return e.Booted, nil
		}
		names = append(names, e.Name)
	}
	return false, fmt.Errorf("no boot environment named %s on the firewall (it has %s)", name, strings.Join(names, ", "))
}

// space reads the running system's room through zfs list: the bytes
// available to its dataset, and the bytes that dataset and its children
// refer to (bectl create -r copies them all).
//
// upstream: openzfs/zfs@e73402e031a02f0801176501a469435399ce51f6 man/man8/zfs-list.8:53 — "If specified, you can list property information by the absolute pathname or the relative pathname": / names the booted environment's dataset whatever the pool is called; -H tabs, -p exact bytes
// upstream: openzfs/zfs@be7657e3f2788c4e5edb635d0bc5c24eff9eb2db man/man8/zfs-list.8:104 — `-r`: "Recursively display any children of the dataset on the command line" (pfSense keeps /cf and /var/db/pkg in children of its environment)
// upstream: openzfs/zfs@be7657e3f2788c4e5edb635d0bc5c24eff9eb2db man/man8/zfs-list.8:151 — `-t filesystem`: filesystems only, not the snapshots a pool with listsnapshots=on would list beside them
func (b bootEnvShell) space(ctx context.Context) (PoolSpace, error) {
	const cmd = "zfs list -Hp -r -t filesystem -o available,referenced /" // -t: not the snapshots bectl clones from, where the pool lists them
	out, err := b.run(ctx, cmd)
	if err != nil {
		return PoolSpace{}, fmt.Errorf("zfs list /: %w", err)
	}
	var ps PoolSpace
	for i, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var avail, refer int64
		if f := strings.Fields(line); len(f) != 2 {
			return PoolSpace{}, fmt.Errorf("%s said %q: want two numbers a line", cmd, strings.TrimSpace(string(out)))
		} else if _, err := fmt.Sscan(f[0]+" "+f[1], &avail, &refer); err != nil {
			return PoolSpace{}, fmt.Errorf("%s said %q: %v", cmd, strings.TrimSpace(string(out)), err)
		}
		if i == 0 {
			ps.Available = avail
		}
		ps.Referenced += refer
	}
	return ps, nil
}

func orUnknown(v string) string {
	if v == "" {
		return "an unknown version"
	}
	return v
}

// checkBootEnvName refuses what bectl would not take as a name, or what
// the shell would read otherwise.
func checkBootEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, " \t\n/@'\"`$;&|<>\\") || strings.HasPrefix(name, "-") {
		return fmt.Errorf("boot environment name %q: use letters, digits, '.', '-', '_' and '+'", name)
	}
	return nil
}

func (p *PfSense) bootEnvShell() bootEnvShell {
	return bootEnvShell{
		run: func(ctx context.Context, cmd string) ([]byte, error) { return p.sh.Output(ctx, cmd) },
		// /etc/version, trimmed, as Info reads it.
		versionFile: pfVersionFile,
		parse:       func(b []byte) string { return strings.TrimSpace(string(b)) },
		// upstream: pfsense master src/etc/pfSense-rc:286 — `/bin/ln -s /cf/conf /conf`: an absolute link, so in a mounted environment MOUNT/conf is the running system's folder and MOUNT/cf/conf the environment's own
		configFile: "/cf/conf/config.xml",
	}
}

// BootEnvs lists the box's boot environments with their versions.
func (p *PfSense) BootEnvs(ctx context.Context) ([]BootEnv, error) {
	return p.bootEnvShell().list(ctx)
}

// CreateBootEnv makes a boot environment of the running system.
func (p *PfSense) CreateBootEnv(ctx context.Context, name string) error {
	return p.bootEnvShell().create(ctx, name)
}

// ActivateBootEnvOnce makes the next boot boot name, once.
func (p *PfSense) ActivateBootEnvOnce(ctx context.Context, name string) error {
	booted, err := p.bootEnvShell().activateOnce(ctx, name)
	if err == nil {
		// The packages hook a reboot leaves lives in this environment's
		// /usr/local: another one's boot does not run it.
		p.mu.Lock()
		p.otherBootEnv = !booted
		p.mu.Unlock()
	}
	return err
}

// BootEnvConfig reads the config.xml environment name boots with.
func (p *PfSense) BootEnvConfig(ctx context.Context, name string) ([]byte, error) {
	return p.bootEnvShell().config(ctx, name)
}

// BootEnvSpace is the room the running system's dataset has.
func (p *PfSense) BootEnvSpace(ctx context.Context) (PoolSpace, error) {
	return p.bootEnvShell().space(ctx)
}

// opnVersionFile is where OPNsense keeps its product metadata.
//
// upstream: not settled — the path of the core package's metadata, /usr/local/opnsense/version/core, is in the package's build, not in the sources read; checked at run time: an environment whose file is missing or has no product_version is listed with its version unknown and the reason
const opnVersionFile = "/usr/local/opnsense/version/core"

func (o *OPNsense) bootEnvShell() bootEnvShell {
	return bootEnvShell{
		run:         func(ctx context.Context, cmd string) ([]byte, error) { return o.shell(ctx, cmd, nil) },
		versionFile: opnVersionFile,
		configFile:  opnConfigPath,
		parse: func(b []byte) string {
			var meta struct {
				Version string `json:"product_version"`
			}
			if json.Unmarshal(b, &meta) != nil {
				return ""
			}
			return meta.Version
		},
	}
}

// BootEnvs lists the box's boot environments with their versions.
func (o *OPNsense) BootEnvs(ctx context.Context) ([]BootEnv, error) {
	return o.bootEnvShell().list(ctx)
}

// CreateBootEnv makes a boot environment of the running system.
func (o *OPNsense) CreateBootEnv(ctx context.Context, name string) error {
	return o.bootEnvShell().create(ctx, name)
}

// ActivateBootEnvOnce makes the next boot boot name, once.
func (o *OPNsense) ActivateBootEnvOnce(ctx context.Context, name string) error {
	booted, err := o.bootEnvShell().activateOnce(ctx, name)
	if err == nil {
		// The start hook a reboot leaves lives in this environment's
		// /usr/local: another one's boot does not run it.
		o.mu.Lock()
		o.otherBootEnv = !booted
		o.mu.Unlock()
	}
	return err
}

// BootEnvSpace is the room the running system's dataset has.
func (o *OPNsense) BootEnvSpace(ctx context.Context) (PoolSpace, error) {
	return o.bootEnvShell().space(ctx)
}

// BootEnvConfig reads the config.xml environment name boots with.
func (o *OPNsense) BootEnvConfig(ctx context.Context, name string) ([]byte, error) {
	return o.bootEnvShell().config(ctx, name)
}
