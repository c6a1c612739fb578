package matrix

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// A panic in the loop (a bug) restores the firewall like any other ending
// and fails the run, the panic in the Outcome and the run's events.
func TestRunPanicRestores(t *testing.T) {
	f := newRun(t, nil, twoPoints, 9)
	f.run.Sweep.Measure = func(context.Context, ProbeRun) probe.Sample { panic("a bug") }
	out, err := f.run.Execute(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var p *PanicError
	if !errors.As(out.SweepErr, &p) || p.Value != "a bug" || !strings.Contains(string(p.Stack), "panic_test.go") {
		t.Errorf("SweepErr = %v; want a *PanicError with the panic's value and stack", out.SweepErr)
	}
	if f.session.closes != 1 || out.Status != store.Failed || f.status(t, out.Run) != store.Failed {
		t.Errorf("%d restores, status %q (%q recorded); want 1, failed", f.session.closes, out.Status, f.status(t, out.Run))
	}
	if strings.Join(f.log, " ") != "begin swept restore" {
		t.Errorf("steps %v; want begin, swept, restore", f.log)
	}
	events, _ := f.st.Events(t.Context(), out.Run)
	if len(events) == 0 || !strings.Contains(events[len(events)-1].Message, "bug in fwab: panic: a bug") {
		t.Errorf("events %+v; want the panic last", events)
	}
}
