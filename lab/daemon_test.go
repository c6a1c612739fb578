package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitReadySaysHowTheDaemonEnded starts daemons that end before they
// are ready and checks that Up's error says how each ended: a daemon killed
// before it wrote a line leaves an empty serve.log, and only its wait
// status tells the user what happened.
func TestWaitReadySaysHowTheDaemonEnded(t *testing.T) {
	for _, tt := range []struct {
		name, script, want string
	}{
		{"killed", "kill -9 $$\n", "killed by signal killed"},
		{"exit", "echo 'no lab in here' >&2\nexit 3\n", "exit status 3: no lab in here"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "serve.sh")
			if err := os.WriteFile(exe, []byte("#!/bin/sh\n"+tt.script), 0o755); err != nil {
				t.Fatal(err)
			}
			o := Options{Executable: exe, ServeArgs: []string{}, Dir: dir}
			proc, err := startDaemon(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			_, err = waitReady(context.Background(), dir, proc, 10*time.Second)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("waitReady = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// TestWaitReadyKillsADaemonItGivesUpOn: a daemon that does not get ready
// in time is killed and reaped, not left running half-started.
func TestWaitReadyKillsADaemonItGivesUpOn(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "serve.sh")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	proc, err := startDaemon(context.Background(), Options{Executable: exe, ServeArgs: []string{}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := waitReady(context.Background(), dir, proc, 300*time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not start within") {
		t.Errorf("waitReady = %v, want it to give up", err)
	}
	if err := syscall.Kill(proc.Pid, 0); err == nil {
		t.Errorf("the daemon (pid %d) still runs", proc.Pid)
	}
}
