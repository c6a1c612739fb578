package emu

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
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// Boot environments, as FreeBSD's bectl(8) keeps them on a ZFS root: each
// is a clone of the root file system, one of them booted, one the pool
// boots next (bootfs), and optionally one the next boot only uses
// (activate -t: the loader's bootonce, cleared as it boots). The lab keeps
// the booted environment in its root folder and every other one in
// bootenvs/NAME beside it; a reboot into another environment swaps them.
//
// What is not in a boot environment is shared by all: FreeBSD's ZFS layout
// puts /tmp, /var/log, /var/tmp and the like in datasets of their own
// outside ROOT, and pfSense's puts /var/db there as well, so that e.g. the
// RRD and DHCP lease databases survive a switch. The lab shares the same
// folders (sharedDirs): a result that depends on them sees the same files
// in both firmwares.
//
// upstream: freebsd/freebsd-src@b1ea63e2e3c92d1346af067f5cf609e3e062f8b9 sbin/bectl/bectl.c:76 — usage `bectl activate [-t] beName`, `bectl create [-r] [-e {nonActiveBe | beName@snapshot}] beName`, `bectl check`
// upstream: opnsense-core 26.7 src/opnsense/scripts/system/bectl.py:58 — `['bectl', 'list', '-H']`
// upstream: opnsense-core 26.7 src/opnsense/scripts/system/bectl.py:89 — `parts = line.split("\t")`: five columns, name, active, mountpoint, size, created
// upstream: opnsense-core 26.7 src/opnsense/mvc/app/controllers/OPNsense/Core/Api/SnapshotsController.php:274 — `$be['active'] != '-'`: the Active column is `-` for an environment neither booted (N) nor booted next (R)
// upstream: not settled — which folders pfSense's ZFS install keeps outside its boot environments (/var/db, /var/log, /tmp, /var/tmp here) is not in the sources read; checked at run time by fwapi's BootEnvs, which reads each environment's version from the environment itself (bectl mount) rather than trusting this list

// sharedDirs are the root's folders outside every boot environment.
var sharedDirs = []string{"tmp", "var/run", "var/log", "var/db", "var/tmp"}

// bootEnvState is bootenvs/state.json.
type bootEnvState struct {
	// UFS: the root is not on ZFS, so there are no boot environments
	// (bectl check fails, as libbe_init does without a ZFS root).
	UFS      bool                 `json:"ufs,omitempty"`
	Booted   string               `json:"booted"`
	BootFS   string               `json:"bootfs"`             // the pool's bootfs: every boot's environment
	BootOnce string               `json:"bootonce,omitempty"` // the next boot's only, then cleared
	Envs     map[string]time.Time `json:"envs"`               // name: creation
	Mounts   map[string]string    `json:"mounts,omitempty"`   // name: where bectl mount put it
	// PoolFree is the pool's free space in bytes; 0 is defaultPoolFree.
	PoolFree int64 `json:"pool_free,omitempty"`
}

// The emulated pool: every environment refers to bootEnvSize bytes (the
// Space column of bectl list), and the pool has defaultPoolFree bytes free
// unless a test sets another figure (SetPoolFree).
const (
	bootEnvSize     int64 = 1299227607 // 1.21 GiB, a pfSense root's size
	defaultPoolFree int64 = 12 << 30
)

// pfSenseBootEnvChildren are the datasets pfSense's ZFS layout keeps under
// each environment, with the bytes each refers to: bectl create -r copies
// them with it, so keeping an environment can cost their size too.
//
// upstream: not settled — pfSense's installer layout (its ROOT/default/cf and ROOT/default/var_db_pkg datasets) is not in the sources read; fwab reads whatever children the box has at run time (zfs list -r)
var pfSenseBootEnvChildren = []struct {
	name string
	size int64
}{{"cf", 3 << 20}, {"var_db_pkg", 41 << 20}}

func (e *Emulator) bootEnvDir(name string) string {
	return filepath.Join(filepath.Dir(e.Root), "bootenvs", name)
}

func (e *Emulator) bootEnvStateFile() string { return e.bootEnvDir("state.json") }

// loadBootEnvs reads the state; a lab without one has the one environment
// a fresh install on ZFS has, "default", booted.
func (e *Emulator) loadBootEnvs() (bootEnvState, error) {
	b, err := os.ReadFile(e.bootEnvStateFile())
	if errors.Is(err, fs.ErrNotExist) {
		return bootEnvState{Booted: "default", BootFS: "default", Envs: map[string]time.Time{"default": time.Now().Truncate(time.Minute)}}, nil
	}
	if err != nil {
		return bootEnvState{}, err
	}
	var s bootEnvState
	if err := json.Unmarshal(b, &s); err != nil {
		return bootEnvState{}, fmt.Errorf("%s: %w", e.bootEnvStateFile(), err)
	}
	return s, nil
}

func (e *Emulator) saveBootEnvs(s bootEnvState) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(e.bootEnvStateFile()), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(e.bootEnvStateFile(), b, 0o644)
}

// SetUFS makes the emulated root a UFS one (no boot environments) or a
// ZFS one again.
func (e *Emulator) SetUFS(ufs bool) error {
	return e.updateBootEnvs(func(s *bootEnvState) { s.UFS = ufs })
}

// updateBootEnvs changes the state with f, under the emulator's lock.
func (e *Emulator) updateBootEnvs(f func(*bootEnvState)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.loadBootEnvs()
	if err != nil {
		return err
	}
	f(&s)
	return e.saveBootEnvs(s)
}

// SetPoolFree sets the pool's free space, in bytes.
func (e *Emulator) SetPoolFree(bytes int64) error {
	return e.updateBootEnvs(func(s *bootEnvState) { s.PoolFree = bytes })
}

// BootEnv is what a test can see of an emulated boot environment.
type BootEnv struct {
	Name           string
	Booted, BootFS bool
	BootOnce       bool
}

// BootEnvs lists the environments by name.
func (e *Emulator) BootEnvs() ([]BootEnv, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.loadBootEnvs()
	if err != nil {
		return nil, err
	}
	var out []BootEnv
	for _, n := range slices.Sorted(maps.Keys(s.Envs)) {
		out = append(out, BootEnv{Name: n, Booted: n == s.Booted, BootFS: n == s.BootFS, BootOnce: n == s.BootOnce})
	}
	return out, nil
}

// beNameRE is what libbe accepts in a name, roughly: no slashes, spaces or
// shell characters.
var beNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:+-]*$`)

// cmdBectl is bectl(8): check, list [-H], create [-r] [-e SOURCE] NAME,
// activate [-t] NAME, activate -T, destroy NAME, mount NAME [DIR] and
// umount NAME.
func (e *Emulator) cmdBectl(_ context.Context, c *call) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.loadBootEnvs()
	if err != nil {
		return c.errorf(1, "bectl: %v", err)
	}
	args := c.args[1:]
	if len(args) == 0 {
		fmt.Fprint(c.stderr, bectlUsage)
		return status(64)
	}
	if s.UFS {
		if args[0] == "check" {
			return status(255)
		}
		return c.errorf(255, `libbe_init("") failed.`)
	}
	cmd, args := args[0], args[1:]
	flags, args := bectlFlags(args)
	save := func() error {
		if err := e.saveBootEnvs(s); err != nil {
			return c.errorf(1, "bectl %s: %v", cmd, err)
		}
		return nil
	}
	switch cmd {
	case "check":
		return nil
	case "list":
		tab := strings.Contains(flags, "H")
		if !tab {
			fmt.Fprintf(c.stdout, "%-15s %-6s %-10s %-5s %s\n", "BE", "Active", "Mountpoint", "Space", "Created")
		}
		for _, n := range slices.Sorted(maps.Keys(s.Envs)) {
			active := ""
			if n == s.Booted {
				active += "N"
			}
			next := s.BootFS
			if s.BootOnce != "" {
				next = s.BootOnce
			}
			if n == next {
				active += "R"
			}
			if active == "" {
				active = "-"
			}
			mnt := "-"
			if n == s.Booted {
				mnt = "/"
			} else if m, ok := s.Mounts[n]; ok {
				mnt = m
			}
			created := s.Envs[n].Format("2006-01-02 15:04")
			if tab {
				fmt.Fprintf(c.stdout, "%s\t%s\t%s\t%s\t%s\n", n, active, mnt, zfsSize(bootEnvSize), created)
			} else {
				fmt.Fprintf(c.stdout, "%-15s %-6s %-10s %-5s %s\n", n, active, mnt, zfsSize(bootEnvSize), created)
			}
		}
		return nil
	case "create":
		if len(args) != 1 {
			fmt.Fprintf(c.stderr, "bectl create: wrong number of arguments\n%s", bectlUsage)
			return status(64)
		}
		name, source := args[0], s.Booted
		if i := strings.Index(flags, "e="); i >= 0 {
			source = strings.SplitN(flags[i+2:], ";", 2)[0]
		}
		if _, ok := s.Envs[name]; ok || !beNameRE.MatchString(name) {
			return c.errorf(1, "Failed to create bootenv %s", name)
		}
		if _, ok := s.Envs[source]; !ok {
			return c.errorf(1, "Failed to create bootenv %s from snapshot %s", name, source)
		}
		if err := e.copyBootEnv(source, s.Booted, name); err != nil {
			os.RemoveAll(e.bootEnvDir(name))
			return c.errorf(1, "Failed to create bootenv %s (%v)", name, err)
		}
		s.Envs[name] = time.Now().Truncate(time.Minute)
		return save()
	case "activate":
		if strings.Contains(flags, "T") && len(args) == 0 {
			s.BootOnce = ""
			fmt.Fprintln(c.stdout, "Temporary activation removed")
			return save()
		}
		if len(args) != 1 {
			fmt.Fprintf(c.stderr, "bectl activate: wrong number of arguments\n%s", bectlUsage)
			return status(64)
		}
		name, temp := args[0], strings.Contains(flags, "t")
		if _, ok := s.Envs[name]; !ok {
			fmt.Fprintf(c.stdout, "Did not successfully activate boot environment %s\n", name)
			if temp {
				fmt.Fprintln(c.stdout, "for next boot")
			}
			return status(1)
		}
		if temp {
			s.BootOnce = name
		} else {
			s.BootFS, s.BootOnce = name, ""
		}
		fmt.Fprintf(c.stdout, "Successfully activated boot environment %s\n", name)
		if temp {
			fmt.Fprintln(c.stdout, "for next boot")
		}
		return save()
	case "destroy":
		if len(args) != 1 {
			fmt.Fprintf(c.stderr, "bectl destroy: wrong number of arguments\n%s", bectlUsage)
			return status(64)
		}
		name := args[0]
		if _, ok := s.Envs[name]; !ok || name == s.Booted || name == s.BootFS {
			return c.errorf(1, "bectl destroy: cannot destroy %s", name)
		}
		if err := os.RemoveAll(e.bootEnvDir(name)); err != nil {
			return c.errorf(1, "bectl destroy: %v", err)
		}
		delete(s.Envs, name)
		if s.BootOnce == name {
			s.BootOnce = ""
		}
		return save()
	case "mount":
		if len(args) < 1 || len(args) > 2 {
			fmt.Fprintf(c.stderr, "bectl mount: missing argument(s)\n%s", bectlUsage)
			return status(64)
		}
		name := args[0]
		at := fmt.Sprintf("/tmp/be_mount.%04x", time.Now().UnixNano()&0xffff)
		if len(args) == 2 {
			at = args[1]
		}
		if _, ok := s.Envs[name]; !ok || name == s.Booted || s.Mounts[name] != "" {
			return c.errorf(1, "Failed to mount bootenv %s at %s", name, at)
		}
		if err := e.mountBootEnv(name, at); err != nil {
			return c.errorf(1, "Failed to mount bootenv %s at %s", name, at)
		}
		if s.Mounts == nil {
			s.Mounts = map[string]string{}
		}
		s.Mounts[name] = at
		fmt.Fprintf(c.stdout, "Successfully mounted %s at %s\n", name, at)
		return save()
	case "umount", "unmount":
		if len(args) != 1 || s.Mounts[args[0]] == "" {
			return c.errorf(1, "Failed to unmount bootenv %s", strings.Join(args, " "))
		}
		// The mount point holds links only: RemoveAll follows none.
		os.RemoveAll(e.path(s.Mounts[args[0]]))
		delete(s.Mounts, args[0])
		return save()
	}
	fmt.Fprintf(c.stderr, "Unknown command: %s\n%s", cmd, bectlUsage)
	return status(64)
}

// mountBootEnv shows environment name's files at the folder at (shared
// folders are not mounted, as with bectl's shallow view of a clone). On
// OPNsense that is a link to the environment's folder. On pfSense /conf is
// an absolute link to /cf/conf, so at/conf is the running system's config
// folder and at/cf/conf the environment's own: the mount point holds a
// link per entry, with conf pointing where the absolute link leads.
//
// upstream: pfsense master src/etc/pfSense-rc:286 — `/bin/ln -s /cf/conf /conf`
func (e *Emulator) mountBootEnv(name, at string) error {
	dir, src := e.path(at), e.bootEnvDir(name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	// The mount point takes the place of an empty folder (or an old link)
	// only: a folder with files in it is refused, never emptied.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if e.opnsense() {
		return os.Symlink(src, dir)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(dir, "cf"), 0o755); err != nil {
		return err
	}
	for _, ent := range entries {
		link, to := filepath.Join(dir, ent.Name()), filepath.Join(src, ent.Name())
		if ent.Name() == "conf" {
			link, to = filepath.Join(dir, "cf", "conf"), filepath.Join(src, "conf")
		}
		if err := os.Symlink(to, link); err != nil {
			return err
		}
	}
	return os.Symlink(e.path("/conf"), filepath.Join(dir, "conf"))
}

const bectlUsage = "Usage:\tbectl {-h | -? | subcommand [args...]}\n" +
	"\tbectl activate [-t] beName\n\tbectl activate [-T]\n\tbectl check\n" +
	"\tbectl create [-r] [-e {nonActiveBe | beName@snapshot}] beName\n" +
	"\tbectl destroy [-Fo] {beName | beName@snapshot}\n" +
	"\tbectl list [-aDHs] [{-c property | -C property}]\n" +
	"\tbectl mount beName [mountpoint]\n\tbectl {umount | unmount} [-f] beName\n"

// bectlFlags splits leading getopt flags from the operands: single
// letters are returned as they are, -e SOURCE as "e=SOURCE;".
func bectlFlags(args []string) (string, []string) {
	var flags strings.Builder
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		for i := 1; i < len(a); i++ {
			if a[i] == 'e' {
				src := a[i+1:]
				if src == "" && len(args) > 0 {
					src, args = args[0], args[1:]
				}
				flags.WriteString("e=" + src + ";")
				break
			}
			flags.WriteByte(a[i])
		}
	}
	return flags.String(), args
}

// copyBootEnv copies environment src (the root when it is the booted one)
// to a new environment dst.
func (e *Emulator) copyBootEnv(src, booted, dst string) error {
	from := e.bootEnvDir(src)
	if src == booted {
		from = e.Root
	}
	return copyTree(from, e.bootEnvDir(dst), func(rel string) bool { return src == booted && isShared(rel) })
}

func isShared(rel string) bool {
	return slices.ContainsFunc(sharedDirs, func(d string) bool { return rel == d || strings.HasPrefix(rel, d+"/") })
}

// copyTree copies the files, folders and links under from to to, leaving
// out what skip names (paths relative to from, with slashes).
func copyTree(from, to string, skip func(rel string) bool) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(p, target)
		}
		return nil // sockets and the like are not part of an environment
	})
}

// switchBootEnv is the loader's choice at a reboot: the bootonce
// environment if one is set (and the setting is cleared), else the pool's
// bootfs. When that is not the booted one, the root's environment files go
// to its folder and the other environment's come into the root; shared
// folders stay.
func (e *Emulator) switchBootEnv() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.loadBootEnvs()
	if err != nil || s.UFS {
		return err
	}
	next := s.BootFS
	if s.BootOnce != "" {
		next, s.BootOnce = s.BootOnce, ""
	}
	if _, ok := s.Envs[next]; !ok {
		e.logger().Error("boot: the boot environment to boot is gone; booting the current one", "be", next)
		next = s.Booted
	}
	for name, at := range s.Mounts {
		os.Remove(e.path(at))
		delete(s.Mounts, name)
	}
	if next != s.Booted {
		e.logger().Info("boot: switching boot environment", "from", s.Booted, "to", next)
		old := e.bootEnvDir(s.Booted)
		if err := os.RemoveAll(old); err != nil {
			return err
		}
		if err := copyTree(e.Root, old, isShared); err != nil {
			return err
		}
		if err := clearTree(e.Root, isShared); err != nil {
			return err
		}
		if err := copyTree(e.bootEnvDir(next), e.Root, func(string) bool { return false }); err != nil {
			return err
		}
		if err := os.RemoveAll(e.bootEnvDir(next)); err != nil {
			return err
		}
		s.Booted = next
	}
	return e.saveBootEnvs(s)
}

// clearTree removes what is under root except what keep names and the
// folders that lead to it.
func clearTree(root string, keep func(rel string) bool) error {
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	return clearEntries(root, "", entries, keep)
}

func clearEntries(root, prefix string, entries []fs.DirEntry, keep func(string) bool) error {
	for _, d := range entries {
		rel := prefix + d.Name()
		if keep(rel) {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(rel))
		holdsKept := d.IsDir() && slices.ContainsFunc(sharedDirs, func(s string) bool { return strings.HasPrefix(s, rel+"/") })
		if !holdsKept {
			if err := os.RemoveAll(p); err != nil {
				return err
			}
			continue
		}
		sub, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		if err := clearEntries(root, rel+"/", sub, keep); err != nil {
			return err
		}
	}
	return nil
}

// cmdZfs is zfs(8)'s list, as far as fwab asks it: zfs list [-Hpr]
// [-t type,...] [-o property,...] [dataset|path ...], over the pool's datasets zroot,
// zroot/ROOT and zroot/ROOT/NAME for each environment (with pfSense's
// children of it); a path names the dataset mounted there (/ the booted
// environment's), -r adds its descendants.
//
// upstream: openzfs/zfs@e73402e031a02f0801176501a469435399ce51f6 man/man8/zfs-list.8:53 — "If specified, you can list property information by the absolute pathname or the relative pathname"; -H tabs, -p exact numbers
// upstream: openzfs/zfs@be7657e3f2788c4e5edb635d0bc5c24eff9eb2db man/man8/zfs-list.8:104 — `-r`: "Recursively display any children of the dataset on the command line"
// upstream: openzfs/zfs@be7657e3f2788c4e5edb635d0bc5c24eff9eb2db man/man8/zfs-list.8:151 — `-t type`: filesystem, snapshot, volume, bookmark or all (fs, snap, vol as aliases)
func (e *Emulator) cmdZfs(_ context.Context, c *call) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, err := e.loadBootEnvs()
	if err != nil {
		return c.errorf(1, "zfs: %v", err)
	}
	if s.UFS {
		return c.errorf(1, "internal error: failed to initialize ZFS library")
	}
	args := c.args[1:]
	if len(args) == 0 || args[0] != "list" {
		return c.errorf(2, "usage: zfs list [-r] [-Hp] [-o property[,property]...] [-t type[,type]...] [filesystem|volume|snapshot|path] ...")
	}
	scripted, exact, recursive, noFilesystems, props := false, false, false, false, []string{"name", "used", "available", "referenced", "mountpoint"}
	var targets []string
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-o" && i+1 < len(args):
			i++
			props = strings.Split(args[i], ",")
		case a == "-t" && i+1 < len(args):
			// The emulated pool keeps filesystems only: another type lists
			// nothing.
			i++
			noFilesystems = true
			for _, ty := range strings.Split(args[i], ",") {
				switch ty {
				case "filesystem", "fs", "all":
					noFilesystems = false
				case "snapshot", "snap", "volume", "vol", "bookmark":
				default:
					return c.errorf(2, "invalid type '%s'", ty)
				}
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for _, f := range a[1:] {
				switch f {
				case 'H':
					scripted = true
				case 'p':
					exact = true
				case 'r':
					recursive = true
				default:
					return c.errorf(2, "invalid option '%c'", f)
				}
			}
		default:
			targets = append(targets, a)
		}
	}
	free := cmp.Or(s.PoolFree, defaultPoolFree)
	used := bootEnvSize * int64(len(s.Envs))
	type dataset struct {
		name, mountpoint string
		used, refer      int64
	}
	all := []dataset{{"zroot", "/zroot", used, 96 << 10}, {"zroot/ROOT", "none", used, 96 << 10}}
	for _, n := range slices.Sorted(maps.Keys(s.Envs)) {
		mnt := "-"
		if n == s.Booted {
			mnt = "/"
		}
		all = append(all, dataset{"zroot/ROOT/" + n, mnt, bootEnvSize, bootEnvSize})
		if e.flavor() == configxml.PfSense {
			for _, ch := range pfSenseBootEnvChildren {
				all = append(all, dataset{"zroot/ROOT/" + n + "/" + ch.name, "-", ch.size, ch.size})
			}
		}
	}
	var rows []dataset
	if len(targets) == 0 {
		rows = all
	}
	for _, t := range targets {
		i := slices.IndexFunc(all, func(d dataset) bool { return d.name == t || strings.HasPrefix(t, "/") && d.mountpoint == t })
		if i < 0 {
			return c.errorf(1, "cannot open '%s': dataset does not exist", t)
		}
		rows = append(rows, all[i])
		if recursive {
			for _, d := range all {
				if strings.HasPrefix(d.name, all[i].name+"/") {
					rows = append(rows, d)
				}
			}
		}
	}
	if noFilesystems {
		rows = nil
	}
	size := func(n int64) string {
		if exact {
			return strconv.FormatInt(n, 10)
		}
		return zfsSize(n)
	}
	var lines [][]string
	if !scripted {
		var head []string
		for _, p := range props {
			head = append(head, strings.ToUpper(p))
		}
		lines = append(lines, head)
	}
	for _, d := range rows {
		var line []string
		for _, p := range props {
			switch p {
			case "name":
				line = append(line, d.name)
			case "used":
				line = append(line, size(d.used))
			case "available", "avail":
				line = append(line, size(free))
			case "referenced", "refer":
				line = append(line, size(d.refer))
			case "mountpoint":
				line = append(line, d.mountpoint)
			default:
				return c.errorf(2, "bad property list: invalid property '%s'", p)
			}
		}
		lines = append(lines, line)
	}
	for _, l := range lines {
		sep := "\t"
		if !scripted {
			sep = "  "
		}
		fmt.Fprintln(c.stdout, strings.Join(l, sep))
	}
	return nil
}

// zfsSize is a size as zfs prints it without -p: three digits and a
// binary unit (1.21G, 12.0G, 96K).
func zfsSize(n int64) string {
	units := "BKMGTPE"
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	switch {
	case u == 0:
		return fmt.Sprintf("%dB", n)
	case v < 10:
		return fmt.Sprintf("%.2f%c", v, units[u])
	case v < 100:
		return fmt.Sprintf("%.1f%c", v, units[u])
	}
	return fmt.Sprintf("%.0f%c", v, units[u])
}
