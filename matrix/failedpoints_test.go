package matrix

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
)

// FailedPoints counts a point whose apply failed and one with a failed
// probe sample, not one whose idle phase alone failed.
func TestFailedPoints(t *testing.T) {
	f := newSweep(t, twoPoints+"idle: 1s\n")
	f.fw.refuse = func(changes []configxml.Change) error {
		for _, c := range changes {
			if c.Knob == "rules@lan" && c.To == "100" {
				return errors.New("verify: pfctl shows 2 rules, want 102")
			}
		}
		return nil
	}
	f.sweep.Idle = func(context.Context, time.Duration) probe.Sample {
		return probe.Sample{Probe: probe.IdleProbe, Failed: true, Reason: "no DUT metrics"}
	}
	measure := f.sweep.Measure
	f.sweep.Measure = func(ctx context.Context, pr ProbeRun) probe.Sample {
		c, _ := configxml.LoadBytes(f.fw.config)
		if v, _ := c.Get("rules@lan"); v == "200" && pr.Name == "down" {
			return probe.Sample{Probe: "iperf3", Failed: true, Reason: "iperf3 is not installed on client"}
		}
		return measure(ctx, pr)
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	failed, points, err := FailedPoints(t.Context(), f.st, f.sweep.Run)
	if err != nil || points != 3 || !slices.Equal(failed, []int{1, 2}) {
		t.Errorf("FailedPoints = %v of %d, %v; want [1 2] of 3", failed, points, err)
	}
}

// TestFailedPointsInvalidSamples: invalid samples (the firewall changed
// under them) fail their point only when they are more than half of it.
func TestFailedPointsInvalidSamples(t *testing.T) {
	f := newSweep(t, twoPoints)
	measure := f.sweep.Measure
	f.sweep.Measure = func(ctx context.Context, pr ProbeRun) probe.Sample {
		c, _ := configxml.LoadBytes(f.fw.config)
		v, _ := c.Get("rules@lan")
		// Point 1: its down probes; point 2: every probe.
		if v == "200" || v == "100" && pr.Name == "down" {
			return probe.Sample{Probe: "iperf3", Failed: true, Reason: probe.InvalidReason + "suricata restarted (pid 812 → 1403)"}
		}
		return measure(ctx, pr)
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	failed, points, err := FailedPoints(t.Context(), f.st, f.sweep.Run)
	if err != nil || points != 3 || !slices.Equal(failed, []int{2}) {
		t.Errorf("FailedPoints = %v of %d, %v; want [2] of 3 (point 1 has half its samples invalid, point 2 all)", failed, points, err)
	}
}
