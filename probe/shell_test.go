package probe

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// localStream has the shape of an SSH client's streaming run, backed by the
// local /bin/sh: what a remote host would do with the command line.
func localStream(ctx context.Context, cmdline string, w io.Writer) (int, []byte, error) {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", cmdline)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ctx.Err() != nil {
			return -1, []byte(stderr.String()), ctx.Err()
		}
		return ee.ExitCode(), []byte(stderr.String()), nil
	}
	return 0, []byte(stderr.String()), err
}

func TestStreamShell(t *testing.T) {
	r := ShellRunner{Shell: StreamShell(localStream)}
	out, err := r.Run(t.Context(), []string{"printf", "%s|", "a b", "$(id)", "it's"})
	if err != nil || string(out) != "a b|$(id)|it's|" {
		t.Errorf("Run() = %q, %v", out, err)
	}
	_, err = r.Run(t.Context(), []string{"fwab-no-such-command"})
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "fwab-no-such-command") {
		t.Errorf("Run(missing) = %v, want ErrNotFound naming the command", err)
	}
	_, err = r.Run(t.Context(), []string{"sh", "-c", "echo bad >&2; exit 4"})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 4 || !strings.Contains(ee.Stderr, "bad") || ee.Argv[0] != "sh" {
		t.Errorf("Run(exit 4) = %v, want an *ExitError for sh with code 4", err)
	}
	p, err := r.Start(t.Context(), []string{"sh", "-c", "echo up; exec sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	p.Kill()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Kill did not end the session")
	}
	if out, err := p.Wait(); err != nil || string(out) != "up\n" {
		t.Errorf("Wait() after Kill = %q, %v", out, err)
	}
}

func TestIperf3OverStreamShell(t *testing.T) {
	client, _ := loopback(t)
	server := Endpoint{Name: "server", Addr: "127.0.0.1", Runner: ShellRunner{Shell: StreamShell(localStream)}}
	s := Iperf3{Duration: time.Second}.Run(t.Context(), client, server)
	if s.Failed || s.ServerResult == nil {
		t.Fatalf("Run() failed=%v reason %q, server report %v", s.Failed, s.Reason, s.ServerResult != nil)
	}
}
