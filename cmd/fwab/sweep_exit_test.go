package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fwab/fwab/lab/labtest"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// sweepLab is one emulated pfSense (fw1 in targets) with the concurrent
// spec, for sweeps run in-process with the probe stubbed by measure.
type sweepLab struct {
	targets, spec, db string
	em                *labtest.Firewall
	original          []byte
}

func newSweepLab(t *testing.T, measure func(context.Context, matrix.ProbeRun) probe.Sample) *sweepLab {
	t.Helper()
	saved := stubProbe
	stubProbe = measure
	t.Cleanup(func() { stubProbe = saved })
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	targets, spec, ems := emulatorTargets(t, dir, 1, -1)
	return &sweepLab{targets: targets, spec: spec, db: filepath.Join(dir, "results.db"), em: ems[0], original: ems[0].StoredConfig(t)}
}

func (l *sweepLab) sweep(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return runFwab(t, append([]string{"sweep", l.spec, "--target", "fw1", "--targets", l.targets, "--db", l.db, "--progress=false"}, args...)...)
}

// restored fails the test unless the firewall holds its original config.
func (l *sweepLab) restored(t *testing.T) {
	t.Helper()
	if got := l.em.StoredConfig(t); !bytes.Equal(got, l.original) {
		t.Errorf("the firewall's config.xml is not the original after the sweep")
	}
}

// failingProbe fails its first n calls (every call when n < 0), as a probe
// whose tool cannot run does, and measures after that.
func failingProbe(n int64) func(context.Context, matrix.ProbeRun) probe.Sample {
	var calls atomic.Int64
	return func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
		if c := calls.Add(1); n < 0 || c <= n {
			return probe.Sample{Probe: "iperf3", Direction: pr.Iperf3.Direction, Failed: true, Reason: "iperf3 is not installed on client"}
		}
		return syntheticProbe(ctx, pr)
	}
}

// A sweep exits 0 only when every point was measured; with failed points
// it exits 1, its last line saying how many and where to look.
func TestSweepExitsOneWhenPointsFail(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fail  int64 // probe calls that fail first; -1 every one
		code  int
		last  string
		notes []string
	}{
		{"every point measured", 0, exitOK, "original config restored", nil},
		// A probe that fails twice (the sweep retries once) fails its point.
		{"one point failed", 2, exitFailure, "fwab: 1 of 3 points failed: see 'fwab runs show 1 --db ", nil},
		{"every point failed", -1, exitFailure, "fwab: 3 of 3 points failed: see 'fwab runs show 1 --db ", []string{"original config restored"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := newSweepLab(t, failingProbe(tt.fail))
			_, stderr, code := l.sweep(t)
			if code != tt.code {
				t.Errorf("exit %d, want %d:\n%s", code, tt.code, stderr)
			}
			if got := lastLines(stderr, 1); !strings.HasPrefix(got, tt.last) {
				t.Errorf("last line %q, want it to begin %q", got, tt.last)
			}
			for _, n := range tt.notes {
				if !strings.Contains(stderr, n) {
					t.Errorf("stderr has no %q:\n%s", n, stderr)
				}
			}
			l.restored(t)
			if _, runs := openRuns(t, l.db); len(runs) != 1 || runs[0].Status != store.Done {
				t.Errorf("runs %+v, want one done (every step ran)", runs)
			}
		})
	}
}
