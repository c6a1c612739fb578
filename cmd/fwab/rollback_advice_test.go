package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
)

// TestRollbackAdvice: a sweep's rollback deadline follows what its
// actions took on the target; a deadline the user gave that an action
// approaches is warned about, with the deadline to give instead.
func TestRollbackAdvice(t *testing.T) {
	plan := &matrix.Plan{
		Steps: []matrix.Step{{Actions: []configxml.Action{configxml.ActionFilterReload}}, {Actions: []configxml.Action{configxml.ActionIDSRestart}}},
		Measured: map[configxml.Action]time.Duration{
			configxml.ActionFilterReload: 2 * time.Second,
			configxml.ActionIDSRestart:   75 * time.Second,
			configxml.ActionReboot:       10 * time.Minute, // not in this plan
		},
	}
	after, notes := rollbackAdvice(plan, fwapi.DefaultRollbackAfter, false)
	if after != 230*time.Second || len(notes) != 1 || !strings.Contains(notes[0], "ids-restart took 1m15s") {
		t.Errorf("unset deadline with a 75 s IDS restart = %v, %q; want 3×75 s rounded up to 230s, and a note naming ids-restart", after, notes)
	}
	after, notes = rollbackAdvice(plan, 100*time.Second, true)
	if after != 100*time.Second || len(notes) != 1 || !strings.Contains(notes[0], "warning") || !strings.Contains(notes[0], "--rollback-after 3m50s") {
		t.Errorf("a given 100 s deadline with a 75 s IDS restart = %v, %q; want it kept, with a warning giving 3m50s", after, notes)
	}
	if after, notes = rollbackAdvice(plan, 10*time.Minute, true); after != 10*time.Minute || len(notes) != 0 {
		t.Errorf("a given 10 min deadline = %v, %q; want it kept silently", after, notes)
	}
	plan.Measured = nil
	if after, notes = rollbackAdvice(plan, fwapi.DefaultRollbackAfter, false); after != fwapi.DefaultRollbackAfter || len(notes) != 0 {
		t.Errorf("no measured costs = %v, %q; want the default, silently", after, notes)
	}
}

// TestRollbackAdviceSumsAStep: one rollback covers a whole step, so a
// step that reboots and then restarts the IDS needs a deadline for both
// (configxml.Effective gives such a step both actions).
func TestRollbackAdviceSumsAStep(t *testing.T) {
	plan := &matrix.Plan{
		Steps: []matrix.Step{{Actions: []configxml.Action{configxml.ActionReboot, configxml.ActionIDSRestart}}, {Actions: []configxml.Action{configxml.ActionFilterReload}}},
		Measured: map[configxml.Action]time.Duration{
			configxml.ActionFilterReload: 2 * time.Second,
			configxml.ActionReboot:       60 * time.Second,
			configxml.ActionIDSRestart:   40 * time.Second,
		},
	}
	after, notes := rollbackAdvice(plan, fwapi.DefaultRollbackAfter, false)
	if want := fwapi.RollbackFor(100 * time.Second); after != want || len(notes) != 1 || !strings.Contains(notes[0], "reboot + ids-restart took 1m40s") {
		t.Errorf("a reboot (60 s) and an IDS restart (40 s) in one step = %v, %q; want %v for their 100 s and a note naming both", after, notes, want)
	}
}

// TestRollbackAdviceCountsTheCanary: the canary adds an IDS restart at
// run time to a step whose point runs inline IPS and restarts no IDS of
// its own (its rule goes into the config, and Suricata must load it), so
// the deadline covers one there too.
func TestRollbackAdviceCountsTheCanary(t *testing.T) {
	inline := &matrix.Point{Values: matrix.KnobValues{{Knob: "ids@lan", Value: configxml.IDSInlineIPS}, {Knob: "rules@lan", Value: "100"}}}
	plan := &matrix.Plan{
		Spec:  &matrix.Spec{Canary: &matrix.CanarySpec{}},
		Steps: []matrix.Step{{Point: inline, Actions: []configxml.Action{configxml.ActionFilterReload}}},
		Measured: map[configxml.Action]time.Duration{
			configxml.ActionFilterReload: 2 * time.Second,
			configxml.ActionIDSRestart:   40 * time.Second,
		},
	}
	after, notes := rollbackAdvice(plan, fwapi.DefaultRollbackAfter, false)
	if want := fwapi.RollbackFor(42 * time.Second); after != want || len(notes) != 1 || !strings.Contains(notes[0], "filter-reload + ids-restart") {
		t.Errorf("a filter reload at an inline-IPS point with the canary = %v, %q; want %v for it and the canary's IDS restart", after, notes, want)
	}
	// A detect-only point carries the rule too (its alerts are counted).
	plan.Steps[0].Point = &matrix.Point{Values: matrix.KnobValues{{Knob: "ids@lan", Value: configxml.IDSAlert}, {Knob: "rules@lan", Value: "100"}}}
	if after, notes := rollbackAdvice(plan, fwapi.DefaultRollbackAfter, false); after != fwapi.RollbackFor(42*time.Second) || len(notes) != 1 {
		t.Errorf("a filter reload at a detect-only point with the canary = %v, %q; want the canary's IDS restart counted", after, notes)
	}
	plan.Spec.Canary = nil
	if after, _ := rollbackAdvice(plan, fwapi.DefaultRollbackAfter, false); after != fwapi.RollbackFor(2*time.Second) && after != fwapi.DefaultRollbackAfter {
		t.Errorf("the same step without the canary = %v; want no IDS restart counted", after)
	}
}
