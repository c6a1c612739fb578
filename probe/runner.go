package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Runner runs commands on an endpoint host. Arguments are passed as a vector
// and never re-split: implementations that go through a shell quote each one
// (see Quote).
type Runner interface {
	// Run runs argv to completion and returns its standard output. A command
	// that exits non-zero returns an *ExitError carrying its standard error.
	Run(ctx context.Context, argv []string) ([]byte, error)
	// Start starts argv in the background. Cancelling ctx kills it.
	Start(ctx context.Context, argv []string) (Process, error)
}

// Process is a command started by a Runner.
type Process interface {
	// Done is closed when the process has exited.
	Done() <-chan struct{}
	// Wait waits for the process to exit and returns its standard output.
	Wait() ([]byte, error)
	// Kill stops the process; Wait still returns what it printed.
	Kill() error
}

// ExitError is a command that ran and exited with a non-zero status.
type ExitError struct {
	Argv   []string
	Code   int
	Stderr string
}

func (e *ExitError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	if msg == "" {
		return fmt.Sprintf("%s exited with status %d", e.name(), e.Code)
	}
	return fmt.Sprintf("%s exited with status %d: %s", e.name(), e.Code, msg)
}

func (e *ExitError) name() string {
	if len(e.Argv) == 0 {
		return "command"
	}
	return e.Argv[0]
}

// ErrNotFound is matched (errors.Is) by errors for a command that does not
// exist on the endpoint host.
var ErrNotFound = errors.New("command not found")

// notFoundError is a missing command, however the host reported it.
type notFoundError struct {
	cmd    string
	detail string
}

func (e *notFoundError) Error() string {
	if e.detail == "" {
		return fmt.Sprintf("%s: command not found", e.cmd)
	}
	return fmt.Sprintf("%s: command not found (%s)", e.cmd, e.detail)
}

func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

// classify turns the ways a missing command shows up (exec's lookup error,
// exit status 127 from a shell, ip-netns's "exec of ... failed") into
// ErrNotFound, and other exit statuses into *ExitError.
func classify(argv []string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	name := "command"
	if len(argv) > 0 {
		name = argv[0]
	}
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return &notFoundError{cmd: name}
	}
	var ee *exec.ExitError
	code := -1
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if x, ok := err.(*ExitError); ok {
		code = x.Code
		if stderr == "" {
			stderr = x.Stderr
		}
	} else {
		return err
	}
	s := strings.TrimSpace(stderr)
	if code == 127 || (strings.Contains(s, "exec of") && strings.Contains(s, "No such file")) {
		return &notFoundError{cmd: name, detail: s}
	}
	return &ExitError{Argv: argv, Code: code, Stderr: stderr}
}

// Local runs commands on this machine, inside a network namespace when Netns
// is set (through "ip netns exec", which needs root).
type Local struct {
	// Netns is the network namespace; empty means the current one.
	Netns string
	// Path is the command search path; empty means this process's PATH.
	Path string
}

// String names the host in messages.
func (l Local) String() string {
	if l.Netns == "" {
		return "localhost"
	}
	return "netns " + l.Netns
}

func (l Local) command(ctx context.Context, argv []string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	name := argv[0]
	if l.Path != "" && !strings.Contains(name, "/") {
		found := ""
		for _, dir := range filepath.SplitList(l.Path) {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				found = p
				break
			}
		}
		if found == "" {
			return nil, &notFoundError{cmd: name, detail: "not in " + l.Path}
		}
		name = found
	}
	full := append([]string{name}, argv[1:]...)
	if l.Netns != "" {
		full = append([]string{"ip", "netns", "exec", l.Netns}, full...)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	if l.Path != "" {
		cmd.Env = append(os.Environ(), "PATH="+l.Path)
	}
	// Own process group, so that a kill reaches children (ip netns exec
	// execs, but a shell wrapper might not).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	return cmd, nil
}

// Run implements Runner.
func (l Local) Run(ctx context.Context, argv []string) ([]byte, error) {
	cmd, err := l.command(ctx, argv)
	if err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &limitedBuffer{max: 64 << 10, buf: &stderr}
	err = cmd.Run()
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil {
		return stdout.Bytes(), fmt.Errorf("%s: %w", argv[0], ctxErr)
	}
	return stdout.Bytes(), classify(argv, err, stderr.String())
}

// Start implements Runner.
func (l Local) Start(ctx context.Context, argv []string) (Process, error) {
	cmd, err := l.command(ctx, argv)
	if err != nil {
		return nil, err
	}
	p := &localProcess{argv: argv, cmd: cmd, done: make(chan struct{})}
	cmd.Stdout = &p.stdout
	cmd.Stderr = &limitedBuffer{max: 64 << 10, buf: &p.stderr}
	if err := cmd.Start(); err != nil {
		return nil, classify(argv, err, "")
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

type localProcess struct {
	argv   []string
	cmd    *exec.Cmd
	stdout bytes.Buffer
	stderr bytes.Buffer
	done   chan struct{}
	err    error
	kill   sync.Once
	killed atomic.Bool
}

func (p *localProcess) Done() <-chan struct{} { return p.done }

func (p *localProcess) Wait() ([]byte, error) {
	<-p.done
	if p.killed.Load() {
		return p.stdout.Bytes(), nil
	}
	return p.stdout.Bytes(), classify(p.argv, p.err, p.stderr.String())
}

func (p *localProcess) Kill() error {
	var err error
	p.kill.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		p.killed.Store(true)
		err = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	})
	return err
}

// limitedBuffer keeps the first max bytes written and drops the rest, so a
// chatty command cannot exhaust memory.
type limitedBuffer struct {
	max int
	buf *bytes.Buffer
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
		} else {
			b.buf.Write(p)
		}
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)

// Shell is what a remote host offers: one /bin/sh command line at a time. An
// SSH client session satisfies it (the command line is the exec request).
type Shell interface {
	// Start starts the command line; its process follows the Process rules.
	Start(ctx context.Context, cmdline string) (Process, error)
}

// ShellRunner adapts a Shell to a Runner, quoting every argument with Quote.
type ShellRunner struct {
	Shell Shell
}

// Run implements Runner.
func (r ShellRunner) Run(ctx context.Context, argv []string) ([]byte, error) {
	p, err := r.Start(ctx, argv)
	if err != nil {
		return nil, err
	}
	return p.Wait()
}

// Start implements Runner.
func (r ShellRunner) Start(ctx context.Context, argv []string) (Process, error) {
	if len(argv) == 0 {
		return nil, errors.New("empty command")
	}
	p, err := r.Shell.Start(ctx, Quote(argv))
	if err != nil {
		return nil, err
	}
	return shellProcess{Process: p, argv: argv}, nil
}

// shellProcess reports errors in terms of the command, not of the shell.
type shellProcess struct {
	Process
	argv []string
}

func (p shellProcess) Wait() ([]byte, error) {
	out, err := p.Process.Wait()
	if err == nil {
		return out, nil
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return out, classify(p.argv, &ExitError{Argv: p.argv, Code: ee.Code, Stderr: ee.Stderr}, "")
	}
	if errors.Is(err, ErrNotFound) {
		return out, &notFoundError{cmd: p.argv[0], detail: err.Error()}
	}
	return out, err
}

// Quote renders argv as one POSIX shell command line in which every argument
// stays one word, whatever it contains: each is single-quoted, and single
// quotes inside are written as '\”. Plain words (letters, digits, and
// -_./:,+@%) are left bare for readable logs.
func Quote(argv []string) string {
	var b strings.Builder
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(quoteWord(a))
	}
	return b.String()
}

func quoteWord(s string) string {
	if s == "" {
		return "''"
	}
	plain := true
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-_./:,+@%", r):
		default:
			plain = false
		}
		if !plain {
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
