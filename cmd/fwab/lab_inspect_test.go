package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/lab/inspect"
)

func TestLabInspectUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"lab", "inspect"}, `unknown inspection mode ""`},
		{[]string{"lab", "inspect", "--mode", "ips"}, "use inline, ids or legacy"},
		{[]string{"lab", "inspect", "--mode", "inline", "--rules", "0"}, "rule count 0 out of range"},
		{[]string{"lab", "inspect", "--mode", "ids", "--rules", "10"}, "ids mode needs at least one interface"},
		{[]string{"lab", "inspect", "--mode", "legacy", "--iface", "d0", "--failopen", "--rules", "10"}, "fail-open applies to inline mode only"},
		{[]string{"lab", "inspect", "--mode", "inline", "extra"}, "accepts 0 arg(s)"},
	}
	for _, tt := range tests {
		_, stderr, code := fwab(t, "", tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("fwab %v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

func TestLabInspectHidden(t *testing.T) {
	stdout, _, _ := fwab(t, "", "lab", "--help")
	if strings.Contains(stdout, "inspect") {
		t.Errorf("fwab lab --help lists the hidden inspect command:\n%s", stdout)
	}
}

// TestLabInspectRuns runs the engine in IDS mode on the loopback interface
// (a passive capture: nothing is sent), waits for its status file, stops it
// and checks the counters line.
func TestLabInspectRuns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: opens an AF_PACKET capture")
	}
	status := filepath.Join(t.TempDir(), "status.json")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out bytes.Buffer
	errOut := &syncBuffer{}
	done := make(chan int)
	go func() {
		done <- run(ctx, []string{"lab", "inspect", "--mode", "ids", "--iface", "lo", "--rules", "100", "--seed", "3", "--status", status},
			strings.NewReader(""), &out, errOut)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(status); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("no status file after 10s; stderr: %s", errOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := inspect.ReadStatus(status)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode != "ids" || st.Rules != 100 || st.Seed != 3 || !st.Running {
		t.Errorf("status %+v: want mode ids, 100 rules, seed 3, running", st)
	}
	// SIGUSR1 asks for a status line on stderr; the command registered for
	// it before the status file appeared.
	syscall.Kill(os.Getpid(), syscall.SIGUSR1)
	for i := 0; !strings.Contains(errOut.String(), "mode=ids rules=100 packets="); i++ {
		if i == 100 {
			t.Errorf("no status line on stderr 2s after SIGUSR1: %q", errOut.String())
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d after cancel, want 0; stderr: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "mode=ids rules=100 packets=") {
		t.Errorf("stdout %q, want the final counters line", out.String())
	}
	if st, err := inspect.ReadStatus(status); err != nil || st.Running {
		t.Errorf("status after exit: running %v, err %v; want not running", st.Running, err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
