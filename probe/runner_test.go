package probe

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shShell runs command lines with the local /bin/sh, as an SSH server runs
// exec requests with the user's shell.
type shShell struct{ path string }

func (s shShell) Start(ctx context.Context, cmdline string) (Process, error) {
	return Local{Path: s.path}.Start(ctx, []string{"/bin/sh", "-c", cmdline})
}

func TestQuoteThroughShell(t *testing.T) {
	nasty := [][]string{
		{"printf", "%s\n", "plain"},
		{"printf", "%s\n", "it's", `"double"`, "back\\slash"},
		{"printf", "%s\n", "$(touch /tmp/fwab-quote-pwned)", "`touch /tmp/fwab-quote-pwned`", "${HOME}", "$HOME"},
		{"printf", "%s\n", "a; touch /tmp/fwab-quote-pwned", "b && c", "d | e", "f > g", "h < i"},
		{"printf", "%s\n", "line1\nline2", "tab\there", "", " ", "*", "?", "[a]", "~", "#x", "!x", "a=b"},
		{"printf", "%s\n", "'", "''", "'\\''", "-n", "--", "--option=value"},
	}
	r := ShellRunner{Shell: shShell{}}
	for _, argv := range nasty {
		out, err := r.Run(t.Context(), argv)
		if err != nil {
			t.Fatalf("Run(%q) error = %v", argv, err)
		}
		want := strings.Join(argv[2:], "\n") + "\n"
		if string(out) != want {
			t.Errorf("Run(%q) through sh -c %q = %q, want %q", argv, Quote(argv), out, want)
		}
	}
	if _, err := os.Stat("/tmp/fwab-quote-pwned"); err == nil {
		os.Remove("/tmp/fwab-quote-pwned")
		t.Fatal("a quoted argument was executed by the shell")
	}
}

func TestQuote(t *testing.T) {
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"iperf3", "-c", "198.19.1.10", "-p", "20001"}, "iperf3 -c 198.19.1.10 -p 20001"},
		{[]string{"echo", ""}, "echo ''"},
		{[]string{"echo", "it's"}, `echo 'it'\''s'`},
		{[]string{"echo", "a b"}, "echo 'a b'"},
		{[]string{"FOO=bar", "x"}, "'FOO=bar' x"},
		{[]string{"echo", "$(id)"}, "echo '$(id)'"},
	}
	for _, tt := range tests {
		if got := Quote(tt.argv); got != tt.want {
			t.Errorf("Quote(%q) = %s, want %s", tt.argv, got, tt.want)
		}
	}
}

func TestLocalRun(t *testing.T) {
	out, err := Local{}.Run(t.Context(), []string{"sh", "-c", "echo out; echo err >&2"})
	if err != nil || string(out) != "out\n" {
		t.Errorf("Run(echo) = %q, %v; want %q, nil", out, err, "out\n")
	}
	_, err = Local{}.Run(t.Context(), []string{"sh", "-c", "echo failing >&2; exit 3"})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 || !strings.Contains(ee.Error(), "failing") {
		t.Errorf("Run(exit 3) error = %v, want an *ExitError with code 3 and its stderr", err)
	}
}

func TestNotFound(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		name   string
		runner Runner
	}{
		{"local lookup", Local{Path: empty}},
		{"local exec", Local{}},
		{"through a shell", ShellRunner{Shell: shShell{path: empty}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			argv := []string{"fwab-no-such-command", "--version"}
			if tt.name == "through a shell" || tt.name == "local lookup" {
				argv[0] = "iperf3"
			}
			_, err := tt.runner.Run(t.Context(), argv)
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("Run(%q) error = %v, want ErrNotFound", argv, err)
			}
			if !strings.Contains(err.Error(), argv[0]) {
				t.Errorf("error %q does not name the command %q", err, argv[0])
			}
			p, err := tt.runner.Start(t.Context(), argv)
			if err == nil {
				_, err = p.Wait()
			}
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("Start+Wait(%q) error = %v, want ErrNotFound", argv, err)
			}
		})
	}
}

func TestLocalStartKill(t *testing.T) {
	p, err := Local{}.Start(t.Context(), []string{"sh", "-c", "echo started; exec sleep 30"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
		t.Fatal("process exited early")
	case <-time.After(200 * time.Millisecond):
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill() = %v", err)
	}
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("process still running 5s after Kill")
	}
	out, err := p.Wait()
	if err != nil || string(out) != "started\n" {
		t.Errorf("Wait() after Kill = %q, %v; want %q, nil", out, err, "started\n")
	}
}

func TestLocalPathLookup(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "hello")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := Local{Path: dir}.Run(t.Context(), []string{"hello", "a b"})
	if diff := cmp.Diff("hi a b\n", string(out)); diff != "" || err != nil {
		t.Errorf("Run(hello) err %v, output (-want +got):\n%s", err, diff)
	}
}
