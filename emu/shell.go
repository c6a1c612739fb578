package emu

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// call is one command invocation inside the emulated shell.
type call struct {
	args   []string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	dir    string
}

type command func(ctx context.Context, c *call) error

// status makes an exit status error.
func status(n uint8) error {
	if n == 0 {
		return nil
	}
	return interp.ExitStatus(n)
}

func (c *call) errorf(n uint8, format string, args ...any) error {
	fmt.Fprintf(c.stderr, format+"\n", args...)
	return status(n)
}

// shellPath is the emulated shell's PATH, as on pfSense.
var shellPath = []string{"/sbin", "/bin", "/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"}

// commands maps absolute firewall paths to their implementation: the
// FreeBSD tools both products have, plus the product's own.
func (e *Emulator) commands() map[string]command {
	cmds := e.freebsdCommands()
	if e.opnsense() {
		maps.Copy(cmds, e.opnCommands())
	} else {
		maps.Copy(cmds, e.pfSenseCommands())
	}
	return cmds
}

// freebsdCommands are the base system's tools the emulator knows.
func (e *Emulator) freebsdCommands() map[string]command {
	return map[string]command{
		"/bin/cat":                e.cmdCat,
		"/bin/cp":                 e.cmdCp,
		"/bin/mv":                 e.cmdMv,
		"/bin/rm":                 e.cmdRm,
		"/bin/mkdir":              e.cmdMkdir,
		"/bin/rmdir":              e.cmdRmdir,
		"/bin/ls":                 e.cmdLs,
		"/usr/bin/wc":             e.cmdWc,
		"/usr/bin/head":           e.cmdHead,
		"/usr/bin/grep":           e.cmdGrep,
		"/sbin/sha256":            e.cmdSha256,
		"/bin/date":               e.cmdDate,
		"/bin/hostname":           e.cmdHostname,
		"/usr/bin/uname":          e.cmdUname,
		"/bin/sleep":              e.cmdSleep,
		"/bin/sync":               func(context.Context, *call) error { return nil },
		"/bin/sh":                 e.cmdSh,
		"/usr/sbin/daemon":        e.cmdDaemon,
		"/bin/kill":               e.cmdKill,
		"/bin/pkill":              e.cmdPkill,
		"/bin/ps":                 e.cmdPs,
		"/bin/pgrep":              e.cmdPgrep,
		"/sbin/ifconfig":          e.cmdIfconfig,
		"/sbin/pfctl":             e.cmdPfctl,
		"/usr/sbin/pkg":           e.cmdPkg,
		"/sbin/sysctl":            e.cmdSysctl,
		"/usr/bin/netstat":        e.cmdNetstat,
		"/sbin/shutdown":          e.cmdShutdown,
		"/sbin/kldstat":           e.cmdKldstat,
		"/sbin/bectl":             e.cmdBectl,
		"/sbin/zfs":               e.cmdZfs,
		"/sbin/reboot":            e.cmdReboot,
		"/usr/local/sbin/swanctl": e.cmdSwanctl,
		"/usr/bin/b64decode":      e.cmdB64decode,
		"/bin/chmod":              e.cmdChmod,
		"/usr/bin/logger":         e.cmdLogger,
		"/bin/ln":                 e.cmdLn,
		"/usr/bin/lockf":          e.cmdLockf,
		"/usr/bin/timeout":        e.cmdTimeout,
	}
}

// pfSenseCommands are pfSense's rc scripts, PHP tools and packages.
func (e *Emulator) pfSenseCommands() map[string]command {
	return map[string]command{
		"/usr/local/bin/php":              e.cmdPhp,
		"/etc/rc.filter_configure_sync":   e.cmdFilterReload,
		"/etc/rc.filter_configure":        e.cmdFilterReload,
		"/etc/rc.reload_interfaces":       e.cmdReloadInterfaces,
		"/etc/rc.reload_all":              e.cmdReloadInterfaces,
		"/usr/local/sbin/pfSsh.php":       e.cmdPfSsh,
		"/usr/local/etc/rc.d/suricata.sh": e.cmdSuricataRC,
		"/usr/local/sbin/pfSense-upgrade": e.cmdUpgrade,
		"/usr/local/sbin/pkg-static":      e.cmdPkgStatic,
	}
}

// lookup finds a command by absolute path or, for a bare name, along PATH.
func (e *Emulator) lookup(cmds map[string]command, name string) (command, bool) {
	c, _, ok := e.resolve(cmds, name)
	return c, ok
}

// resolve is lookup with the command's absolute path.
func (e *Emulator) resolve(cmds map[string]command, name string) (command, string, bool) {
	if strings.Contains(name, "/") {
		p := filepath.Clean(name)
		c, ok := cmds[p]
		return c, p, ok
	}
	for _, d := range shellPath {
		if c, ok := cmds[d+"/"+name]; ok {
			return c, d + "/" + name, true
		}
	}
	return nil, "", false
}

// Exec runs one command line as the firewall's /bin/sh would, in four
// steps: parse the line (POSIX sh), set up the interpreter on the
// firewall's filesystem, run it (each external command dispatched to the
// emulated tool, see dispatch), and turn the result into an exit status.
func (e *Emulator) Exec(ctx context.Context, line string, stdin io.Reader, stdout, stderr io.Writer) int {
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(strings.NewReader(line), "")
	if err != nil {
		fmt.Fprintf(stderr, "sh: %v\n", err)
		return 2
	}
	r, err := e.runner(stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sh: %v\n", err)
		return 2
	}
	return exitStatus(r.Run(ctx, file), stderr)
}

// exitStatus is the status sh exits with after err.
func exitStatus(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var st interp.ExitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return 143
	}
	fmt.Fprintf(stderr, "sh: %v\n", err)
	return 2
}

// runner is the one shell interpreter set-up: pfSense's environment, the
// emulated commands for everything external, and the firewall's
// filesystem for redirections, tests and globs. params are $1...
func (e *Emulator) runner(stdin io.Reader, stdout, stderr io.Writer, params ...string) (*interp.Runner, error) {
	cmds, base := e.commands(), e.freebsdCommands()
	opts := []interp.RunnerOption{
		interp.StdIO(stdin, stdout, stderr),
		interp.Env(e.shellEnv()),
		interp.Dir("/"),
		interp.CallHandler(builtinAsCommand),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
			return func(ctx context.Context, args []string) error { return e.dispatch(ctx, cmds, args) }
		}),
		interp.OpenHandler(e.open),
		interp.StatHandler(e.stat),
		interp.ReadDirHandler2(func(ctx context.Context, path string) ([]fs.DirEntry, error) {
			return os.ReadDir(e.path(e.abs(ctx, path)))
		}),
		interp.AccessHandler(func(ctx context.Context, path string, mode interp.AccessMode) error {
			// As root, as fwab is on the box: read and write always,
			// execute only with an execute bit (or a folder), as access(2).
			if _, ok := base[path]; ok {
				return nil // a tool of the base system, which the emulator runs without a file
			}
			fi, err := os.Stat(e.path(path))
			if err == nil && mode&interp.AccessExec != 0 && !fi.IsDir() && fi.Mode().Perm()&0o111 == 0 {
				err = fs.ErrPermission
			}
			return e.fbErr(err, path)
		}),
	}
	if len(params) > 0 {
		opts = append(opts, interp.Params(append([]string{"--"}, params...)...))
	}
	return interp.New(opts...)
}

// shellEnv is root's environment in a pfSense exec session, with sshd's
// SSH_CONNECTION ("client port server port"): the server address is that
// of the interface SSHVia names, or 127.0.0.1.
func (e *Emulator) shellEnv() expand.Environ {
	server := "127.0.0.1"
	if e.SSHVia != "" {
		if root, err := parseConfigFile(e); err == nil {
			for _, i := range root.Interfaces() {
				if i.Key == e.SSHVia && i.IPAddr != "" {
					server = i.IPAddr
				}
			}
		}
	}
	return expand.ListEnviron(
		"PATH="+strings.Join(shellPath, ":"),
		"HOME=/root", "USER=root", "SHELL=/bin/sh", "TERM=dumb",
		"SSH_CONNECTION=127.0.0.1 50022 "+server+" 22",
	)
}

// parseConfigFile reads /conf/config.xml as it is now.
func parseConfigFile(e *Emulator) (*configxml.Config, error) {
	data, err := os.ReadFile(e.path("/conf/config.xml"))
	if err != nil {
		return nil, err
	}
	return parseConfig(data, e.flavor())
}

// builtinAsCommand sends kill, a shell builtin the interpreter does not
// have, to the emulated /bin/kill.
func builtinAsCommand(ctx context.Context, args []string) ([]string, error) {
	if args[0] == "kill" {
		args[0] = "/bin/kill"
	}
	return args, nil
}

// dispatch runs one external command: the emulated tool found on PATH,
// or sh's "command not found" (127).
func (e *Emulator) dispatch(ctx context.Context, cmds map[string]command, args []string) error {
	hc := interp.HandlerCtx(ctx)
	cl := &call{args: args, stdin: hc.Stdin, stdout: hc.Stdout, stderr: hc.Stderr, dir: hc.Dir}
	c, path, ok := e.resolve(cmds, args[0])
	if !ok && strings.Contains(args[0], "/") {
		return e.execFile(ctx, cl)
	}
	if !ok {
		fmt.Fprintf(hc.Stderr, "sh: %s: command not found\n", args[0])
		return interp.ExitStatus(127)
	}
	e.sawCommand(append([]string{path}, args[1:]...))
	return c(ctx, cl)
}

// execFile runs a script of the firewall's filesystem named by its path,
// as execve(2) does: only with an execute bit (a hook written 0644 fails
// with "Permission denied", exit 126, as both products' boots meet it), and
// through /bin/sh (every script fwab writes or the products run this way
// is a #!/bin/sh one).
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:77 — `fwrite($shell, "{$rcfile} start >>/tmp/bootup_messages 2>&1 &")`: run by path, not through sh
// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/rc.syshook:71 — `if ! ${_SYSHOOK} "${@}"; then`: run by path
func (e *Emulator) execFile(ctx context.Context, c *call) error {
	name := c.abs(c.args[0])
	fi, err := os.Stat(e.path(name))
	switch {
	case err != nil:
		return c.errorf(127, "sh: %s: command not found", c.args[0])
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return c.errorf(126, "sh: %s: Permission denied", c.args[0])
	}
	return e.cmdSh(ctx, &call{args: append([]string{"/bin/sh", name}, c.args[1:]...), stdin: c.stdin, stdout: c.stdout, stderr: c.stderr, dir: c.dir})
}

// open opens a firewall file for a redirection; writes meet the injected
// disk fault.
func (e *Emulator) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if path == "/dev/null" {
		return devNull{}, nil
	}
	p := e.abs(ctx, path)
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0 {
		if err := e.writeFault(p, false); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(e.path(p), flag, perm)
	return f, e.fbErr(err, p)
}

// stat is test(1) and friends on the firewall's filesystem.
func (e *Emulator) stat(ctx context.Context, name string, follow bool) (fs.FileInfo, error) {
	fi, err := os.Stat(e.path(e.abs(ctx, name)))
	return fi, e.fbErr(err, e.abs(ctx, name))
}

func (e *Emulator) abs(ctx context.Context, p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(interp.HandlerCtx(ctx).Dir, p)
}

func (c *call) abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(c.dir, p)
}

// fbErr rewrites a path error so it names the firewall path, not the lab's.
func (e *Emulator) fbErr(err error, fwPath string) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: pe.Op, Path: fwPath, Err: pe.Err}
	}
	return err
}

// errText is how FreeBSD tools print an error about a file.
func errText(err error) string {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "No such file or directory"
	case errors.Is(err, fs.ErrExist):
		return "File exists"
	case errors.Is(err, fs.ErrPermission):
		return "Permission denied"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		s := pe.Err.Error()
		if s != "" {
			return strings.ToUpper(s[:1]) + s[1:]
		}
	}
	return err.Error()
}

func (c *call) fail(tool, path string, err error) error {
	return c.errorf(1, "%s: %s: %s", tool, path, errText(err))
}

// flags splits leading single-letter options (-f, -rf) from operands.
// allowed lists the letters the tool accepts.
func (c *call) flags(allowed string) (map[rune]bool, []string, error) {
	set := map[rune]bool{}
	args := c.args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		if args[0] == "--" {
			args = args[1:]
			break
		}
		for _, r := range args[0][1:] {
			if !strings.ContainsRune(allowed, r) {
				return nil, nil, c.errorf(64, "%s: illegal option -- %c", filepath.Base(c.args[0]), r)
			}
			set[r] = true
		}
		args = args[1:]
	}
	return set, args, nil
}

func (e *Emulator) cmdCat(ctx context.Context, c *call) error {
	_, files, err := c.flags("")
	if err != nil {
		return err
	}
	if len(files) == 0 {
		_, err := io.Copy(c.stdout, c.stdin)
		return err
	}
	var rc uint8
	for _, f := range files {
		if f == "-" {
			if _, err := io.Copy(c.stdout, c.stdin); err != nil {
				return err
			}
			continue
		}
		fh, err := os.Open(e.path(c.abs(f)))
		if err == nil {
			var fi os.FileInfo
			if fi, err = fh.Stat(); err == nil && fi.IsDir() {
				err = &fs.PathError{Op: "read", Path: f, Err: errors.New("is a directory")}
			}
			if err == nil {
				_, err = io.Copy(c.stdout, fh)
			}
			fh.Close()
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "cat: %s: %s\n", f, errText(err))
			rc = 1
		}
	}
	return status(rc)
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(dst, data, fi.Mode().Perm())
}

// target resolves cp/mv's destination: into a directory keeps the name.
func (e *Emulator) target(c *call, src, dst string) string {
	d := e.path(c.abs(dst))
	if fi, err := os.Stat(d); err == nil && fi.IsDir() {
		return filepath.Join(d, filepath.Base(src))
	}
	return d
}

func (e *Emulator) cmdCp(ctx context.Context, c *call) error {
	_, args, err := c.flags("fpv")
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return c.errorf(64, "usage: cp [-fpv] source_file target_file")
	}
	src := e.path(c.abs(args[0]))
	if fi, err := os.Stat(src); err != nil {
		return c.fail("cp", args[0], err)
	} else if fi.IsDir() {
		return c.errorf(1, "cp: %s is a directory (not copied).", args[0])
	}
	if err := e.writeFault(c.abs(args[1]), false); err != nil {
		return c.fail("cp", args[1], err)
	}
	if err := copyFile(src, e.target(c, args[0], args[1])); err != nil {
		return c.fail("cp", args[1], err)
	}
	return nil
}

func (e *Emulator) cmdMv(ctx context.Context, c *call) error {
	_, args, err := c.flags("f")
	if err != nil {
		return err
	}
	if len(args) != 2 {
		return c.errorf(64, "usage: mv [-f] source target")
	}
	src := e.path(c.abs(args[0]))
	if _, err := os.Stat(src); err != nil {
		return c.errorf(1, "mv: rename %s to %s: %s", args[0], args[1], errText(err))
	}
	if err := errors.Join(e.writeFault(c.abs(args[0]), true), e.writeFault(c.abs(args[1]), false)); err != nil {
		return c.errorf(1, "mv: rename %s to %s: %s", args[0], args[1], errText(err))
	}
	if err := os.Rename(src, e.target(c, args[0], args[1])); err != nil {
		return c.errorf(1, "mv: rename %s to %s: %s", args[0], args[1], errText(err))
	}
	return nil
}

func (e *Emulator) cmdRm(ctx context.Context, c *call) error {
	fl, args, err := c.flags("frR")
	if err != nil {
		return err
	}
	if len(args) == 0 && !fl['f'] {
		return c.errorf(64, "usage: rm [-f | -i] [-dIPRrvWx] file ...")
	}
	var rc uint8
	for _, a := range args {
		p := c.abs(a)
		if p == "/" || p == "/conf" || p == "/cf" || p == "/cf/conf" {
			fmt.Fprintf(c.stderr, "rm: %s: Operation not permitted\n", a)
			rc = 1
			continue
		}
		hp := e.path(p)
		fi, err := os.Lstat(hp)
		if err == nil {
			err = e.writeFault(p, true)
		}
		if err != nil {
			if !fl['f'] || !errors.Is(err, fs.ErrNotExist) {
				fmt.Fprintf(c.stderr, "rm: %s: %s\n", a, errText(err))
				rc = 1
			}
			continue
		}
		if fi.IsDir() {
			if !fl['r'] && !fl['R'] {
				fmt.Fprintf(c.stderr, "rm: %s: is a directory\n", a)
				rc = 1
				continue
			}
			err = os.RemoveAll(hp)
		} else {
			err = os.Remove(hp)
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "rm: %s: %s\n", a, errText(err))
			rc = 1
		}
	}
	return status(rc)
}

// cmdRmdir is rmdir(1): removes empty directories only.
func (e *Emulator) cmdRmdir(ctx context.Context, c *call) error {
	_, args, err := c.flags("")
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return c.errorf(64, "usage: rmdir [-pv] directory ...")
	}
	var rc uint8
	for _, a := range args {
		p := c.abs(a)
		hp := e.path(p)
		fi, err := os.Lstat(hp)
		switch {
		case err == nil && !fi.IsDir():
			err = syscall.ENOTDIR
		case err == nil:
			if err = e.writeFault(p, true); err == nil {
				err = syscall.Rmdir(hp) // ENOTEMPTY when it has entries
			}
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "rmdir: %s: %s\n", a, errText(err))
			rc = 1
		}
	}
	return status(rc)
}

func (e *Emulator) cmdMkdir(ctx context.Context, c *call) error {
	fl, args, err := c.flags("p")
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return c.errorf(64, "usage: mkdir [-pv] [-m mode] directory_name ...")
	}
	var rc uint8
	for _, a := range args {
		hp := e.path(c.abs(a))
		if err := e.writeFault(c.abs(a), false); err != nil {
			fmt.Fprintf(c.stderr, "mkdir: %s: %s\n", a, errText(err))
			rc = 1
			continue
		}
		if fl['p'] {
			err = os.MkdirAll(hp, 0o755)
		} else {
			err = os.Mkdir(hp, 0o755)
		}
		if err != nil {
			fmt.Fprintf(c.stderr, "mkdir: %s: %s\n", a, errText(err))
			rc = 1
		}
	}
	return status(rc)
}

func (e *Emulator) cmdLs(ctx context.Context, c *call) error {
	fl, args, err := c.flags("1latr")
	if err != nil {
		return err
	}
	if len(args) == 0 {
		args = []string{"."}
	}
	var rc uint8
	for _, a := range args {
		hp := e.path(c.abs(a))
		fi, err := os.Stat(hp)
		if err != nil {
			fmt.Fprintf(c.stderr, "ls: %s: %s\n", a, errText(err))
			rc = 1
			continue
		}
		if !fi.IsDir() {
			e.lsLine(c, fl['l'], a, fi)
			continue
		}
		ents, err := os.ReadDir(hp)
		if err != nil {
			fmt.Fprintf(c.stderr, "ls: %s: %s\n", a, errText(err))
			rc = 1
			continue
		}
		infos := make([]fs.FileInfo, 0, len(ents))
		for _, d := range ents {
			if strings.HasPrefix(d.Name(), ".") && !fl['a'] {
				continue
			}
			if i, err := d.Info(); err == nil {
				infos = append(infos, i)
			}
		}
		if fl['t'] {
			sort.SliceStable(infos, func(i, j int) bool { return infos[i].ModTime().After(infos[j].ModTime()) })
		}
		if fl['r'] {
			for i, j := 0, len(infos)-1; i < j; i, j = i+1, j-1 {
				infos[i], infos[j] = infos[j], infos[i]
			}
		}
		for _, i := range infos {
			e.lsLine(c, fl['l'], i.Name(), i)
		}
	}
	return status(rc)
}

func (e *Emulator) lsLine(c *call, long bool, name string, fi fs.FileInfo) {
	if !long {
		fmt.Fprintln(c.stdout, name)
		return
	}
	fmt.Fprintf(c.stdout, "%s  1 root  wheel  %8d %s %s\n", fi.Mode().String(), fi.Size(), fi.ModTime().UTC().Format("Jan _2 15:04"), name)
}

// inputs opens the named files, or stdin when there are none.
func (e *Emulator) inputs(c *call, tool string, files []string, each func(name string, r io.Reader) error) uint8 {
	if len(files) == 0 {
		if err := each("", c.stdin); err != nil {
			return 2
		}
		return 0
	}
	var rc uint8
	for _, f := range files {
		fh, err := os.Open(e.path(c.abs(f)))
		if err != nil {
			fmt.Fprintf(c.stderr, "%s: %s: %s\n", tool, f, errText(err))
			rc = 1
			continue
		}
		err = each(f, fh)
		fh.Close()
		if err != nil {
			rc = 1
		}
	}
	return rc
}

func (e *Emulator) cmdWc(ctx context.Context, c *call) error {
	fl, files, err := c.flags("lcw")
	if err != nil {
		return err
	}
	return status(e.inputs(c, "wc", files, func(name string, r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		var fields []string
		all := !fl['l'] && !fl['w'] && !fl['c']
		if fl['l'] || all {
			fields = append(fields, fmt.Sprintf("%8d", strings.Count(string(data), "\n")))
		}
		if fl['w'] || all {
			fields = append(fields, fmt.Sprintf("%8d", len(strings.Fields(string(data)))))
		}
		if fl['c'] || all {
			fields = append(fields, fmt.Sprintf("%8d", len(data)))
		}
		line := strings.Join(fields, "")
		if name != "" {
			line += " " + name
		}
		fmt.Fprintln(c.stdout, line)
		return nil
	}))
}

func (e *Emulator) cmdHead(ctx context.Context, c *call) error {
	n := 10
	args := c.args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch {
		case args[0] == "-n" && len(args) > 1:
			v, err := strconv.Atoi(args[1])
			if err != nil || v < 0 {
				return c.errorf(1, "head: illegal line count -- %s", args[1])
			}
			n, args = v, args[2:]
		case strings.HasPrefix(args[0], "-n"):
			v, err := strconv.Atoi(args[0][2:])
			if err != nil {
				return c.errorf(1, "head: illegal line count -- %s", args[0][2:])
			}
			n, args = v, args[1:]
		default:
			v, err := strconv.Atoi(args[0][1:])
			if err != nil {
				return c.errorf(64, "usage: head [-n lines | -c bytes] [file ...]")
			}
			n, args = v, args[1:]
		}
	}
	return status(e.inputs(c, "head", args, func(name string, r io.Reader) error {
		br := bufio.NewReader(r)
		for i := 0; i < n; i++ {
			line, err := br.ReadString('\n')
			io.WriteString(c.stdout, line)
			if err != nil {
				break
			}
		}
		// Drain stdin so a writer on the other side of a pipe does not block.
		if name == "" {
			_, _ = io.Copy(io.Discard, br)
		}
		return nil
	}))
}

// breToERE turns a POSIX basic regular expression into Go syntax: in a BRE
// + ? | ( ) { } are literal and \( \) \{ \} are the operators.
func breToERE(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		ch := p[i]
		if ch == '\\' && i+1 < len(p) {
			n := p[i+1]
			if strings.IndexByte("(){}|+?", n) >= 0 {
				b.WriteByte(n)
			} else {
				b.WriteByte('\\')
				b.WriteByte(n)
			}
			i++
			continue
		}
		if strings.IndexByte("+?|(){}", ch) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(ch)
	}
	return b.String()
}

func (e *Emulator) cmdGrep(ctx context.Context, c *call) error {
	fl, args, err := c.flags("cEvqiF")
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return c.errorf(2, "usage: grep [-cEFiqv] pattern [file ...]")
	}
	pat := args[0]
	switch {
	case fl['F']:
		pat = regexp.QuoteMeta(pat)
	case !fl['E']:
		pat = breToERE(pat)
	}
	if fl['i'] {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		return c.errorf(2, "grep: %v", err)
	}
	files := args[1:]
	matched := false
	rc := e.inputs(c, "grep", files, func(name string, r io.Reader) error {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		count := 0
		for sc.Scan() {
			if re.MatchString(sc.Text()) != fl['v'] {
				count++
				matched = true
				if !fl['c'] && !fl['q'] {
					if len(files) > 1 {
						fmt.Fprintf(c.stdout, "%s:", name)
					}
					fmt.Fprintln(c.stdout, sc.Text())
				}
			}
		}
		if fl['c'] {
			if len(files) > 1 {
				fmt.Fprintf(c.stdout, "%s:", name)
			}
			fmt.Fprintln(c.stdout, count)
		}
		return sc.Err()
	})
	if rc != 0 {
		return status(2)
	}
	if !matched {
		return status(1)
	}
	return nil
}

func (e *Emulator) cmdSha256(ctx context.Context, c *call) error {
	fl, files, err := c.flags("q")
	if err != nil {
		return err
	}
	return status(e.inputs(c, "sha256", files, func(name string, r io.Reader) error {
		h := sha256.New()
		if _, err := io.Copy(h, r); err != nil {
			return err
		}
		sum := hex.EncodeToString(h.Sum(nil))
		if fl['q'] || name == "" {
			fmt.Fprintln(c.stdout, sum)
		} else {
			fmt.Fprintf(c.stdout, "SHA256 (%s) = %s\n", name, sum)
		}
		return nil
	}))
}

func (e *Emulator) cmdDate(ctx context.Context, c *call) error {
	now := time.Now().UTC()
	switch {
	case len(c.args) == 1:
		fmt.Fprintln(c.stdout, now.Format("Mon Jan _2 15:04:05 MST 2006"))
	case len(c.args) == 2 && c.args[1] == "+%s":
		fmt.Fprintln(c.stdout, now.Unix())
	default:
		return c.errorf(1, "date: only 'date' and 'date +%%s' are emulated")
	}
	return nil
}

func (e *Emulator) hostname() string {
	fallback, name := "pfSense.home.arpa", "pfSense"
	if e.opnsense() {
		fallback, name = "OPNsense.localdomain", "OPNsense"
	}
	data, err := os.ReadFile(e.path("/conf/config.xml"))
	if err != nil {
		return fallback
	}
	c, err := parseConfig(data, e.flavor())
	if err != nil {
		return fallback
	}
	h, d := text(c.Root(), "system/hostname"), text(c.Root(), "system/domain")
	if h == "" {
		h = name
	}
	if d != "" {
		h += "." + d
	}
	return h
}

func (e *Emulator) cmdHostname(ctx context.Context, c *call) error {
	if len(c.args) > 1 {
		return c.errorf(1, "hostname: setting the host name is not emulated; edit config.xml")
	}
	fmt.Fprintln(c.stdout, e.hostname())
	return nil
}

func (e *Emulator) cmdUname(ctx context.Context, c *call) error {
	p, _ := e.profile()
	switch {
	case len(c.args) == 1 || (len(c.args) == 2 && c.args[1] == "-s"):
		fmt.Fprintln(c.stdout, "FreeBSD")
	case len(c.args) == 2 && c.args[1] == "-r":
		fmt.Fprintln(c.stdout, p.FreeBSD)
	case len(c.args) == 2 && c.args[1] == "-m":
		fmt.Fprintln(c.stdout, "amd64")
	case len(c.args) == 2 && c.args[1] == "-a":
		fmt.Fprintf(c.stdout, "FreeBSD %s %s FreeBSD %s #1 RELENG_%s: Mon Jan  1 00:00:00 UTC 2024     root@freebsd:/var/jenkins/workspace/pfSense-CE-snapshots/obj/amd64/sys/pfSense amd64\n",
			e.hostname(), p.FreeBSD, p.FreeBSD, strings.ReplaceAll(strings.TrimSuffix(p.Version, "-RELEASE"), ".", "_"))
	default:
		return c.errorf(64, "usage: uname [-amrs]")
	}
	return nil
}

func (e *Emulator) cmdSleep(ctx context.Context, c *call) error {
	if len(c.args) != 2 {
		return c.errorf(64, "usage: sleep seconds")
	}
	s, err := strconv.ParseFloat(c.args[1], 64)
	if err != nil || s < 0 {
		return c.errorf(64, "usage: sleep seconds")
	}
	select {
	case <-time.After(time.Duration(s * float64(time.Second))):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// cmdTimeout is timeout(1): `timeout [-s SIGNAL] SECONDS COMMAND ARGS...`
// runs the command and ends it when the time is up, with exit status 124.
// The emulator ends it by its context: a command that waits on a mutex
// (the emulated package sync on the config) is not cut short, only
// reported as timed out when it returns late.
//
// upstream: not settled — FreeBSD timeout(1), base since 10.3, not in the upstream copy; fwab checks at run time that it is there (`[ -x /usr/bin/timeout ]`)
func (e *Emulator) cmdTimeout(ctx context.Context, c *call) error {
	args := c.args[1:]
	if len(args) >= 2 && args[0] == "-s" {
		args = args[2:]
	}
	if len(args) < 2 {
		return c.errorf(125, "usage: timeout [-s signal] duration command [arg ...]")
	}
	s, err := strconv.ParseFloat(strings.TrimSuffix(args[0], "s"), 64)
	if err != nil || s < 0 {
		return c.errorf(125, "timeout: invalid duration %q", args[0])
	}
	run, cancel := context.WithTimeout(ctx, time.Duration(s*float64(time.Second)))
	defer cancel()
	err = e.dispatch(run, e.commands(), args[1:])
	if run.Err() != nil && ctx.Err() == nil {
		return status(124)
	}
	return err
}

// cmdSh runs `sh -c LINE`, `sh -s` (the script on stdin) or `sh FILE
// ARGS...` with the same commands.
func (e *Emulator) cmdSh(ctx context.Context, c *call) error {
	var src io.Reader
	var params []string
	name := ""
	switch {
	case len(c.args) >= 3 && c.args[1] == "-c":
		src = strings.NewReader(c.args[2])
		if len(c.args) > 4 {
			params = c.args[4:]
		}
	case len(c.args) == 2 && c.args[1] == "-s":
		// The script on standard input, as fwab sends every command
		// (fwapi.RemoteShell); its commands get what follows it (nothing).
		data, err := io.ReadAll(c.stdin)
		if err != nil {
			return c.errorf(2, "sh: %v", err)
		}
		src, c.stdin = strings.NewReader(string(data)), strings.NewReader("")
	case len(c.args) >= 2 && !strings.HasPrefix(c.args[1], "-"):
		data, err := os.ReadFile(e.path(c.abs(c.args[1])))
		if err != nil {
			return c.errorf(127, "sh: cannot open %s: %s", c.args[1], errText(err))
		}
		src, name, params = strings.NewReader(string(data)), c.args[1], c.args[2:]
	default:
		return c.errorf(2, "sh: only 'sh -c command', 'sh -s' and 'sh file' are emulated")
	}
	file, err := syntax.NewParser(syntax.Variant(syntax.LangPOSIX)).Parse(src, name)
	if err != nil {
		return c.errorf(2, "sh: %v", err)
	}
	r, err := e.runner(c.stdin, c.stdout, c.stderr, params...)
	if err != nil {
		return c.errorf(2, "sh: %v", err)
	}
	return status(uint8(exitStatus(r.Run(ctx, file), c.stderr)))
}

// cmdDaemon is FreeBSD daemon(8) with -f and -p: the command runs detached
// from the session and survives it.
func (e *Emulator) cmdDaemon(ctx context.Context, c *call) error {
	args := c.args[1:]
	pidfile := ""
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-f":
			args = args[1:]
		case "-p":
			if len(args) < 2 {
				return c.errorf(64, "usage: daemon [-f] [-p pidfile] command arguments ...")
			}
			pidfile, args = args[1], args[2:]
		default:
			return c.errorf(64, "daemon: only -f and -p are emulated")
		}
	}
	if len(args) == 0 {
		return c.errorf(64, "usage: daemon [-f] [-p pidfile] command arguments ...")
	}
	cmds := e.commands()
	if _, ok := e.lookup(cmds, args[0]); !ok {
		return c.errorf(1, "daemon: execvp: %s: No such file or directory", args[0])
	}
	bg, cancel := context.WithCancel(context.Background())
	p := e.procs.add(strings.Join(args, " "), cancel)
	hostPid := ""
	if pidfile != "" {
		hostPid = e.path(c.abs(pidfile))
		if err := e.writeFault(c.abs(pidfile), false); err != nil {
			cancel()
			e.procs.remove(p.pid)
			return c.fail("daemon", pidfile, err)
		}
		if err := atomicfile.WriteFile(hostPid, []byte(strconv.Itoa(p.pid)+"\n"), 0o600); err != nil {
			cancel()
			e.procs.remove(p.pid)
			return c.fail("daemon", pidfile, err)
		}
	}
	go func() {
		defer close(p.done)
		defer e.procs.remove(p.pid)
		defer cancel()
		r, err := e.runner(devNull{}, io.Discard, io.Discard)
		if err != nil {
			return
		}
		// Run the command inside a runner so it gets a handler context.
		quoted := make([]string, len(args))
		for i, a := range args {
			q, err := syntax.Quote(a, syntax.LangPOSIX)
			if err != nil {
				return
			}
			quoted[i] = q
		}
		file, err := syntax.NewParser().Parse(strings.NewReader(strings.Join(quoted, " ")), "")
		if err != nil {
			return
		}
		err = r.Run(bg, file)
		e.logger().Info("daemon exited", "pid", p.pid, "command", p.command, "status", exitStatus(err, io.Discard))
		if hostPid != "" {
			if b, rerr := os.ReadFile(hostPid); rerr == nil && strings.TrimSpace(string(b)) == strconv.Itoa(p.pid) {
				_ = os.Remove(hostPid)
			}
		}
	}()
	return nil
}

func (e *Emulator) killByPID(c *call, tool, arg string) uint8 {
	pid, err := strconv.Atoi(arg)
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: illegal process id: %s\n", tool, arg)
		return 2
	}
	if systemProcess(pid) {
		fmt.Fprintf(c.stderr, "%s: %d: Operation not permitted\n", tool, pid)
		return 1
	}
	if !e.procs.kill(pid) {
		fmt.Fprintf(c.stderr, "%s: %d: No such process\n", tool, pid)
		return 1
	}
	return 0
}

func (e *Emulator) cmdKill(ctx context.Context, c *call) error {
	args := c.args[1:]
	if len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-0":
			// Signal 0 sends nothing: it asks whether the process is there.
			return e.killZero(c, args[1:])
		case "-9", "-15", "-TERM", "-KILL", "-s":
			if args[0] == "-s" && len(args) > 1 {
				args = args[1:]
			}
			args = args[1:]
		default:
			return c.errorf(2, "kill: unknown signal %s; valid: -9 -15 -TERM -KILL", args[0])
		}
	}
	if len(args) == 0 {
		return c.errorf(2, "usage: kill [-s signal_name] pid ...")
	}
	var rc uint8
	for _, a := range args {
		if r := e.killByPID(c, "kill", a); r != 0 {
			rc = r
		}
	}
	return status(rc)
}

func (e *Emulator) cmdPkill(ctx context.Context, c *call) error {
	if len(c.args) != 3 || c.args[1] != "-F" {
		return c.errorf(2, "pkill: only 'pkill -F pidfile' is emulated")
	}
	data, err := os.ReadFile(e.path(c.abs(c.args[2])))
	if err != nil {
		return c.errorf(2, "pkill: Cannot open pidfile `%s': %s", c.args[2], errText(err))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return c.errorf(2, "pkill: Invalid pidfile `%s'", c.args[2])
	}
	if !e.procs.kill(pid) {
		return status(1) // no process matched
	}
	return nil
}

// The processes every pfSense shows; they cannot be killed here.
var systemProcesses = []struct {
	pid int
	cmd string
}{
	{1, "/sbin/init"},
	{312, "/usr/local/sbin/check_reload_status"},
	{401, "/usr/sbin/syslogd -O rfc5424 -s -f /etc/syslog.conf"},
	{455, "/usr/local/sbin/sshd -f /etc/ssh/sshd_config"},
	{512, "php-fpm: master process (/usr/local/lib/php-fpm.conf) (php-fpm)"},
	{623, "/usr/local/sbin/nginx -c /var/etc/nginx-webConfigurator.conf"},
	{711, "/usr/local/sbin/dpinger -S -r 0 -i WANGW -B 198.19.0.1 198.19.0.2"},
	{804, "/usr/local/sbin/unbound -c /var/unbound/unbound.conf"},
	{912, "/usr/sbin/cron -s"},
}

func systemProcess(pid int) bool {
	for _, p := range systemProcesses {
		if p.pid == pid {
			return true
		}
	}
	return false
}

func (e *Emulator) processList() [][2]string {
	var out [][2]string
	for _, p := range systemProcesses {
		out = append(out, [2]string{strconv.Itoa(p.pid), p.cmd})
	}
	ps := e.procs.list()
	sort.Slice(ps, func(i, j int) bool { return ps[i].pid < ps[j].pid })
	for _, p := range ps {
		out = append(out, [2]string{strconv.Itoa(p.pid - 1), "daemon: " + p.command + "[" + strconv.Itoa(p.pid) + "] (daemon)"}, [2]string{strconv.Itoa(p.pid), p.command})
	}
	out = append(out, e.charonProcesses()...)
	return append(out, e.suricataProcesses()...)
}

func (e *Emulator) cmdPs(ctx context.Context, c *call) error {
	args := strings.Join(c.args[1:], " ")
	if args != "ax -o pid,command" && args != "axo pid,command" && args != "-ax -o pid,command" {
		return c.errorf(1, "ps: only 'ps ax -o pid,command' is emulated")
	}
	fmt.Fprintln(c.stdout, "  PID COMMAND")
	for _, p := range e.processList() {
		fmt.Fprintf(c.stdout, "%5s %s\n", p[0], p[1])
	}
	return nil
}

func (e *Emulator) cmdPgrep(ctx context.Context, c *call) error {
	fl, args, err := c.flags("lf")
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return c.errorf(2, "usage: pgrep [-lf] pattern")
	}
	re, err := regexp.Compile(args[0])
	if err != nil {
		return c.errorf(2, "pgrep: %v", err)
	}
	found := false
	for _, p := range e.processList() {
		if strings.HasPrefix(p[1], "daemon: ") {
			continue
		}
		subject := p[1]
		if !fl['f'] {
			subject = filepath.Base(strings.Fields(p[1])[0])
		}
		if re.MatchString(subject) {
			found = true
			if fl['l'] {
				fmt.Fprintf(c.stdout, "%s %s\n", p[0], p[1])
			} else {
				fmt.Fprintln(c.stdout, p[0])
			}
		}
	}
	if !found {
		return status(1)
	}
	return nil
}

func (e *Emulator) cmdShutdown(ctx context.Context, c *call) error {
	if len(c.args) != 3 || c.args[1] != "-r" || c.args[2] != "now" {
		return c.errorf(1, "shutdown: only 'shutdown -r now' is emulated")
	}
	return e.cmdReboot(ctx, &call{args: []string{"reboot"}, stdout: c.stdout, stderr: c.stderr})
}

func (e *Emulator) cmdReboot(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return c.errorf(1, "reboot: options are not emulated")
	}
	fmt.Fprintf(c.stdout, "Shutdown NOW!\nshutdown: [pid %d]\n", 4000+time.Now().Second())
	e.rebootSoon()
	return nil
}

// rebootSoon reboots after the current command has returned its output and
// exit status.
func (e *Emulator) rebootSoon() {
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.Reboot(context.Background())
	}()
}

// cmdLogger is logger(1) with -t: the message goes to the system log file
// the GUI shows (pfSense /var/log/system.log, OPNsense
// /var/log/system/latest.log), as "TAG: message".
//
// upstream: not settled — logger(1) and syslogd are FreeBSD base and the file each product's syslog writes is its own configuration; checked at run time by nothing fwab needs: the watchdog's log lines are for the admin, and fwab reads the lease's state from its fired file
func (e *Emulator) cmdLogger(ctx context.Context, c *call) error {
	args := c.args[1:]
	tag := "root"
	if len(args) >= 2 && args[0] == "-t" {
		tag, args = args[1], args[2:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return c.errorf(1, "logger: only 'logger [-t tag] message ...' is emulated")
	}
	line := time.Now().UTC().Format(time.Stamp) + " " + e.hostname() + " " + tag + ": " + strings.Join(args, " ") + "\n"
	p := e.path(e.systemLog())
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return c.fail("logger", e.systemLog(), err)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return c.fail("logger", e.systemLog(), err)
	}
	defer f.Close()
	_, err = f.WriteString(line)
	return err
}

func (e *Emulator) systemLog() string {
	if e.opnsense() {
		return "/var/log/system/latest.log"
	}
	return "/var/log/system.log"
}

// SystemLog is the emulated box's system log (what logger wrote).
func (e *Emulator) SystemLog() string {
	data, _ := os.ReadFile(e.path(e.systemLog()))
	return string(data)
}

// killZero is kill -0: success when every pid names a process.
//
// upstream: not settled — kill(1) is FreeBSD base, not product source; checked at run time by the disarm's answer, which fwab reads back (running or dead) instead of assuming either
func (e *Emulator) killZero(c *call, pids []string) error {
	if len(pids) == 0 {
		return c.errorf(2, "usage: kill [-s signal_name] pid ...")
	}
	live := map[string]bool{}
	for _, p := range e.processList() {
		live[p[0]] = true
	}
	var rc uint8
	for _, a := range pids {
		if _, err := strconv.Atoi(a); err != nil {
			fmt.Fprintf(c.stderr, "kill: illegal process id: %s\n", a)
			rc = 2
			continue
		}
		if !live[a] {
			fmt.Fprintf(c.stderr, "kill: %s: No such process\n", a)
			rc = 1
		}
	}
	return status(rc)
}

// cmdLn is ln(1) making a hard link, which fails when the link's name
// exists: link(2) is atomic, so "write a file, ln it to a name" is how
// two parties claim one name and say who they are in the same step.
//
// upstream: not settled — ln(1) is FreeBSD base, not product source; checked at run time by reading the claim back (holderOf): fwab acts on who holds it, never on the exit status alone
func (e *Emulator) cmdLn(ctx context.Context, c *call) error {
	if len(c.args) != 3 || strings.HasPrefix(c.args[1], "-") {
		return c.errorf(1, "ln: only 'ln source target' (a hard link) is emulated")
	}
	src, dst := c.abs(c.args[1]), c.abs(c.args[2])
	if err := e.writeFault(dst, false); err != nil {
		return c.fail("ln", c.args[2], err)
	}
	if err := os.Link(e.path(src), e.path(dst)); err != nil {
		return c.errorf(1, "ln: %s: %s", c.args[2], errText(err))
	}
	return nil
}

// LastLines is the last n lines of a command's output on one line, joined
// by " | ", for logs and errors.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
