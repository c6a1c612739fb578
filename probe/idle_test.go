package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestIdle: an idle phase samples the DUT and the power meter for its
// duration and nothing else; with nothing to sample, or a DUT that never
// answers, it is a failed sample that says why.
func TestIdle(t *testing.T) {
	dut := func(context.Context) (DUTMetrics, error) {
		return DUTMetrics{Time: time.Now(), CPUPercent: 3, TempCelsius: 41}, nil
	}
	w := Watch{DUT: dut, DUTEvery: 20 * time.Millisecond, Power: ManualPower(18), PowerEvery: 20 * time.Millisecond}
	s := Idle(t.Context(), 150*time.Millisecond, Endpoint{}, Endpoint{}, w)
	if s.Failed || s.Probe != IdleProbe || s.Result != nil {
		t.Fatalf("Idle = %+v, want a sample of probe %q with no traffic result", s, IdleProbe)
	}
	if len(s.DUT) < 2 || len(s.Power) < 2 || s.Power[0].Watts != 18 || s.DUT[0].CPUPercent != 3 {
		t.Errorf("Idle: %d DUT readings, %d power readings (%+v); want several of each", len(s.DUT), len(s.Power), s.Power)
	}
	if s.Elapsed < 150*time.Millisecond {
		t.Errorf("Idle took %v, want at least its 150ms", s.Elapsed)
	}

	if s := Idle(t.Context(), time.Second, Endpoint{}, Endpoint{}, Watch{}); !s.Failed || !strings.Contains(s.Reason, "nothing to sample") {
		t.Errorf("Idle with nothing to watch = %+v, want failed: nothing to sample", s)
	}
	broken := Watch{DUT: func(context.Context) (DUTMetrics, error) { return DUTMetrics{}, errors.New("ssh: connection lost") }, DUTEvery: 20 * time.Millisecond}
	if s := Idle(t.Context(), 60*time.Millisecond, Endpoint{}, Endpoint{}, broken); !s.Failed || !strings.Contains(s.Reason, "ssh: connection lost") {
		t.Errorf("Idle with a failing DUT = %+v, want failed with the read's error", s)
	}
}
