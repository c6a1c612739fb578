package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// A panic in the sweep loop (a bug) restores the firewall before fwab
// ends: exit 2, the panic and where it happened on stderr, the run failed
// and the firewall unlocked, so the next sweep runs.
func TestSweepPanicRestores(t *testing.T) {
	var calls atomic.Int64
	l := newSweepLab(t, func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
		if calls.Add(1) == 3 {
			var s []int
			_ = s[pr.Iperf3.Parallel+5] // a bug in the loop
		}
		return syntheticProbe(ctx, pr)
	})
	stderr, code := "", -1
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Errorf("the panic went past fwab, the firewall left as it was: %v", p)
			}
		}()
		_, stderr, code = l.sweep(t)
	}()
	if code != exitPanic {
		t.Errorf("exit %d, want %d", code, exitPanic)
	}
	for _, want := range []string{"panic: runtime error: index out of range", "sweep_panic_test.go:", "original config restored", "a bug in fwab"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr)
		}
	}
	t.Logf("stderr ends:\n%s", lastLines(stderr, 3))
	l.restored(t)
	if _, runs := openRuns(t, l.db); len(runs) != 1 || runs[0].Status != store.Failed {
		t.Errorf("runs %+v, want one failed", runs)
	}
	stubProbe = syntheticProbe
	if _, stderr, code := l.sweep(t); code != exitOK {
		t.Errorf("the sweep after the panic: exit %d, want 0:\n%s", code, stderr)
	}
}
