package emu

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// OPNsense root's login shell hands an SSH command string to /bin/csh
// (tcsh on FreeBSD). The emulated OPNsense runs that string through a real
// tcsh (Debian's package), so what tcsh rejects (a multi-line quoted
// argument, a `!` history event, sh syntax) fails here as on a real box,
// and what tcsh runs comes back to the emulated commands: tcsh's ~/.tcshrc
// aliases every emulated command, by name and by path, to a hand-off stub
// (this program run again, see init), which passes its argv and its three
// standard descriptors over a Unix socket to the emulator and exits with
// the emulated command's status. tcsh's PATH is an empty folder, so a
// command the emulator does not know is "Command not found.".
//
// upstream: opnsense-core 26.1 src/sbin/opnsense-shell:37 — `exec ${CMD_SHELL} -${OPT} "${OPTARG}"`, CMD_SHELL=/bin/csh at :25 (same lines 24.7–26.7)
// upstream: opnsense-core 26.1 src/sbin/opnsense-shell:25 — `CMD_SHELL="/bin/csh"`

const (
	handoffSockEnv = "FWAB_LAB_CSH_HANDOFF" // the emulator's socket
	handoffCmdEnv  = "FWAB_LAB_CSH_COMMAND" // the firewall path the stub stands for
)

func init() {
	sock, name := os.Getenv(handoffSockEnv), os.Getenv(handoffCmdEnv)
	if sock == "" || name == "" {
		return
	}
	os.Exit(handoffStub(sock, name, os.Args[1:]))
}

// handoffStub is the program tcsh runs for an emulated command.
func handoffStub(sock, name string, args []string) int {
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: lab hand-off: %v\n", name, err)
		return 126
	}
	defer conn.Close()
	msg, _ := json.Marshal(append([]string{name}, args...))
	rights := syscall.UnixRights(0, 1, 2)
	if _, _, err := conn.WriteMsgUnix(msg, rights, nil); err != nil {
		fmt.Fprintf(os.Stderr, "%s: lab hand-off: %v\n", name, err)
		return 126
	}
	var st [1]byte
	if _, err := io.ReadFull(conn, st[:]); err != nil {
		fmt.Fprintf(os.Stderr, "%s: lab hand-off: %v\n", name, err)
		return 126
	}
	return int(st[0])
}

// TcshPath is the tcsh the emulated OPNsense runs root's commands with; ""
// when it is not installed (then commands go to the POSIX shell directly,
// and tests of the csh behaviour skip).
func TcshPath() string {
	p, err := exec.LookPath("tcsh")
	if err != nil {
		return ""
	}
	return p
}

var aliasName = regexp.MustCompile(`^[A-Za-z0-9._/+-]+$`)

var tcshWarn sync.Once

// loginShell runs an SSH command line as root's login shell does: on
// OPNsense through csh (when tcsh is installed), on pfSense through /bin/sh
// (rc.initial's `-c`).
func (e *Emulator) loginShell(ctx context.Context, line string, stdin io.Reader, stdout, stderr io.Writer) int {
	if !e.opnsense() {
		return e.Exec(ctx, line, stdin, stdout, stderr)
	}
	tcsh := TcshPath()
	if tcsh == "" {
		tcshWarn.Do(func() {
			e.logger().Warn("tcsh is not installed: the emulated OPNsense runs SSH commands with sh instead of csh (run make setup)")
		})
		return e.Exec(ctx, line, stdin, stdout, stderr)
	}
	code, err := e.cshRun(ctx, tcsh, line, stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "fwab lab: csh: %v\n", err)
		return 126
	}
	return code
}

func (e *Emulator) cshRun(ctx context.Context, tcsh, line string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "fwab-csh-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	empty := filepath.Join(dir, "bin")
	if err := os.Mkdir(empty, 0o755); err != nil {
		return 0, err
	}
	stub := filepath.Join(dir, "stub")
	if err := os.Symlink(self, stub); err != nil {
		return 0, err
	}
	cmds := e.commands()
	names := make([]string, 0, len(cmds))
	for p := range cmds {
		names = append(names, p)
	}
	sort.Strings(names)
	var rc bytes.Buffer
	inPath := map[string]bool{}
	for _, d := range shellPath {
		inPath[d] = true
	}
	for _, p := range names {
		if !aliasName.MatchString(p) {
			continue
		}
		target := fmt.Sprintf("/usr/bin/env %s=%s %s", handoffCmdEnv, p, stub)
		fmt.Fprintf(&rc, "alias %s '%s'\n", p, target)
		if inPath[path.Dir(p)] {
			fmt.Fprintf(&rc, "alias %s '%s'\n", path.Base(p), target)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, ".tcshrc"), rc.Bytes(), 0o644); err != nil {
		return 0, err
	}
	sock := filepath.Join(dir, "handoff.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.AcceptUnix()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				e.serveHandoff(ctx, cmds, conn)
			}()
		}
	}()
	cmd := exec.CommandContext(ctx, tcsh, "-c", line)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + empty, "HOME=" + dir, "USER=root", "SHELL=/usr/local/sbin/opnsense-shell", "TERM=dumb",
		handoffSockEnv + "=" + sock,
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	ln.Close()
	wg.Wait()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		if ctx.Err() != nil {
			return 143, nil
		}
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// serveHandoff runs one command tcsh handed back: its argv and its
// standard input, output and error descriptors.
func (e *Emulator) serveHandoff(ctx context.Context, cmds map[string]command, conn *net.UnixConn) {
	defer conn.Close()
	buf := make([]byte, 1<<20)
	oob := make([]byte, syscall.CmsgSpace(3*4))
	n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
	if err != nil {
		return
	}
	var files []*os.File
	if msgs, err := syscall.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			fds, err := syscall.ParseUnixRights(&m)
			if err != nil {
				continue
			}
			for _, fd := range fds {
				files = append(files, os.NewFile(uintptr(fd), "handoff"))
			}
		}
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var args []string
	if err := json.Unmarshal(buf[:n], &args); err != nil || len(args) == 0 || len(files) != 3 {
		conn.Write([]byte{126})
		return
	}
	c, ok := e.lookup(cmds, args[0])
	code := 127
	if ok {
		err := c(ctx, &call{args: args, stdin: files[0], stdout: files[1], stderr: files[2], dir: "/root"})
		code = exitStatus(err, files[2])
	}
	conn.Write([]byte{byte(code)})
}

// cmdB64decode is FreeBSD b64decode(1) -p: the base64-framed input
// (`begin-base64 MODE NAME` … `====`) decoded to standard output.
func (e *Emulator) cmdB64decode(ctx context.Context, c *call) error {
	if len(c.args) != 2 || c.args[1] != "-p" {
		return c.errorf(1, "usage: b64decode -p (only -p from standard input is emulated)")
	}
	data, err := io.ReadAll(c.stdin)
	if err != nil {
		return c.errorf(1, "b64decode: %v", err)
	}
	lines := strings.Split(string(data), "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "begin-base64 ") {
			start = i
			break
		}
	}
	if start < 0 {
		return c.errorf(1, "b64decode: stdin: no \"begin-base64\" line")
	}
	var enc strings.Builder
	for _, l := range lines[start+1:] {
		if l == "====" {
			out, err := base64.StdEncoding.DecodeString(enc.String())
			if err != nil {
				return c.errorf(1, "b64decode: stdin: %v", err)
			}
			_, err = c.stdout.Write(out)
			return err
		}
		enc.WriteString(strings.TrimSpace(l))
	}
	return c.errorf(1, "b64decode: stdin: short file")
}

// cmdChmod is chmod(1) with an octal mode.
func (e *Emulator) cmdChmod(ctx context.Context, c *call) error {
	if len(c.args) < 3 {
		return c.errorf(1, "usage: chmod mode file ...")
	}
	mode, err := strconv.ParseUint(c.args[1], 8, 32)
	if err != nil {
		return c.errorf(1, "chmod: invalid file mode: %s", c.args[1])
	}
	for _, f := range c.args[2:] {
		if err := os.Chmod(e.path(c.abs(f)), os.FileMode(mode)); err != nil {
			return c.fail("chmod", f, err)
		}
	}
	return nil
}
