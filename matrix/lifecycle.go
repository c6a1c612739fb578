package matrix

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/store"
)

// Session is the firewall side of a run. ApplyChecked applies a config
// commit-confirmed and checks that it took effect; Close puts back the
// config the session started from and verifies it. fwapi.Session is one.
type Session interface {
	ApplyChecked(ctx context.Context, config []byte, changes []configxml.Change) error
	Close(ctx context.Context) error
}

// ErrSpecChanged is in the chain of the error that refuses to resume a run
// with a spec other than the one it was made from.
var ErrSpecChanged = errors.New("the run was made from a different spec")

// ErrOtherFirewall is in the chain of the error that refuses to resume a
// run on a target, testbed or original config other than its own.
var ErrOtherFirewall = errors.New("the run was measured on another firewall or config")

// CheckResume returns run id of st if spec may continue it: the run exists
// and was made from the same spec; otherwise the error wraps
// store.ErrNotFound or ErrSpecChanged. A resumed run keeps its seed, so
// plan it with the returned run's Seed. Nothing is written.
func CheckResume(ctx context.Context, st *store.Store, id int64, spec *Spec) (store.Run, error) {
	r, err := st.Run(ctx, id)
	if err != nil {
		return r, err
	}
	if r.SpecHash != spec.Hash() {
		return r, fmt.Errorf("run %d: %w", id, ErrSpecChanged)
	}
	return r, nil
}

// Run is a sweep from start to end as the results database records it.
// Execute takes it through these steps, in this order:
//
//  1. Record the run: a new one, described by New with the plan's spec and
//     seed, and its points; or, with Resume, that run, checked as
//     CheckResume does and against New (the same target, testbed and
//     original config, else ErrOtherFirewall), reopened, and given its
//     points if a sweep killed between creating it and adding them left
//     it with none.
//  2. Begin starts the firewall session. If it fails, nothing on the
//     firewall has changed: the run is marked failed and Execute returns.
//  3. The loop (Sweep) runs every step not yet measured against the
//     session.
//  4. Swept is told the loop's figures; then the firewall is restored
//     (Session.Close), however the loop ended, a panic in the loop or in
//     Swept too (SweepErr is then a *PanicError).
//  5. Only then is the final status recorded: cancelled when ctx was
//     cancelled, failed when the loop or the restore failed, done
//     otherwise.
type Run struct {
	Store *store.Store
	Plan  *Plan
	// Resume is the run to continue; 0 records a new run.
	Resume int64
	// New describes a new run: target, firmware, config hash, fwab's
	// version. Its Spec and Seed come from Plan.
	New store.Run
	// Begin starts the firewall session, once the run is recorded under
	// id. An error from it means the firewall was not changed.
	Begin func(ctx context.Context, id int64) (Session, error)
	// Sweep is the loop. Execute runs a copy with Plan, Store, Run and
	// Apply set to the run's and the session's.
	Sweep Sweep
	// Swept, when set, gets the loop's figures as it ends, before the
	// firewall is restored.
	Swept func(Stats)
}

// Outcome is how a run that began ended.
type Outcome struct {
	Run    int64
	Status store.RunStatus
	// SweepErr is the loop's error (ctx's error when cancelled), or the
	// error recording the final status; nil when the run is complete.
	SweepErr error
	// RestoreErr says the firewall's original config could not be put
	// back; nil when it was restored and verified.
	RestoreErr error
	Stats      Stats
}

// Err is the error a run that ended this way reports: the failed restore
// first, since the firewall needs attention, with the loop's error after
// it; nil when the run is complete and the firewall restored.
func (o Outcome) Err() error {
	if o.RestoreErr == nil {
		return o.SweepErr
	}
	err := fmt.Errorf("restoring the original config: %w", o.RestoreErr)
	if o.SweepErr != nil && !errors.Is(o.SweepErr, context.Canceled) {
		err = fmt.Errorf("%w\nand before that: %v", err, o.SweepErr)
	}
	return err
}

// Execute runs the sweep as Run describes. Its error means the run did not
// begin: it could not be recorded, or Begin failed (then the run is marked
// failed and the firewall was not changed). Once the session has begun,
// every ending is in the Outcome.
func (r *Run) Execute(ctx context.Context) (Outcome, error) {
	id, err := r.record(ctx)
	if err != nil {
		return Outcome{}, err
	}
	out := Outcome{Run: id}
	session, err := r.Begin(ctx, id)
	if err != nil {
		if ferr := r.Store.FinishRun(context.WithoutCancel(ctx), id, store.Failed); ferr != nil {
			return out, errors.Join(err, ferr)
		}
		return out, err
	}

	sweep := r.Sweep
	sweep.Plan, sweep.Store, sweep.Run, sweep.Apply = r.Plan, r.Store, id, session.ApplyChecked
	out.SweepErr = recovered(func() error { return sweep.Execute(ctx) })
	out.Stats = sweep.Stats
	if r.Swept != nil {
		if err := recovered(func() error { r.Swept(out.Stats); return nil }); err != nil && out.SweepErr == nil {
			out.SweepErr = err
		}
	}
	var p *PanicError
	if errors.As(out.SweepErr, &p) {
		r.Store.RecordEvent(context.WithoutCancel(ctx), id, store.Event{Time: time.Now(), Kind: "error", Point: -1, Message: "sweep stopped by a bug in fwab: " + p.Error()})
	}

	// The firewall goes back to how it was found, whatever happened, and
	// only then does the run get its final status.
	out.RestoreErr = session.Close(ctx)
	out.Status = store.Done
	switch {
	case errors.Is(out.SweepErr, context.Canceled):
		out.Status = store.Cancelled
	case out.SweepErr != nil || out.RestoreErr != nil:
		out.Status = store.Failed
	}
	if err := r.Store.FinishRun(context.WithoutCancel(ctx), id, out.Status); err != nil && out.SweepErr == nil {
		out.SweepErr = err
	}
	return out, nil
}

// PanicError is the SweepErr of a run whose loop (or Swept) panicked: a
// bug in fwab, which the run survives only to restore the firewall and
// record its status. Value and Stack are the panic's.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// recovered runs f, turning a panic in it into a *PanicError.
func recovered(f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return f()
}

// sameFirewall refuses to resume prior on the firewall a new run would
// record as now: on another target, testbed or original config its
// samples would be merged with another box's, or another setup's. What
// prior did not record (runs of an older fwab) is not compared.
func sameFirewall(prior, now store.Run) error {
	var diffs, fixes []string
	if prior.Target != now.Target {
		diffs = append(diffs, fmt.Sprintf("target: the run has %s, this sweep %s", prior.Target, now.Target))
		fixes = append(fixes, "resume it on its own target (--target "+prior.Target+")")
	}
	if prior.Testbed != "" && prior.Testbed != now.Testbed {
		diffs = append(diffs, fmt.Sprintf("testbed: the run has %s, this sweep %s", prior.Testbed, now.Testbed))
		if prior.Target == now.Target {
			fixes = append(fixes, "put back the CPU, NICs and endpoints the run was measured with")
		}
	}
	if prior.ConfigHash != "" && prior.ConfigHash != now.ConfigHash {
		diffs = append(diffs, fmt.Sprintf("original config: the run started from sha256 %s, the firewall now has %s", short(prior.ConfigHash), short(now.ConfigHash)))
		fixes = append(fixes, "put back the config the run started from")
	}
	if len(diffs) == 0 {
		return nil
	}
	fixes = append(fixes, "start a new run (without --resume)")
	return fmt.Errorf("run %d cannot be resumed here: %w:\n  %s\n%s", prior.ID, ErrOtherFirewall, strings.Join(diffs, "\n  "), strings.Join(fixes, "; or "))
}

// short is a hash as fwab prints it.
func short(hash string) string {
	if len(hash) > 16 {
		return hash[:16]
	}
	return hash
}

// record creates the run, or reopens the one to resume, and makes sure it
// has its points.
func (r *Run) record(ctx context.Context) (int64, error) {
	if r.Resume == 0 {
		meta := r.New
		meta.Spec, meta.Seed = string(r.Plan.Spec.Raw()), int64(r.Plan.Seed)
		id, err := r.Store.CreateRun(ctx, meta)
		if err != nil {
			return 0, err
		}
		return id, r.Store.AddPoints(ctx, id, r.Plan.StorePoints())
	}
	prior, err := CheckResume(ctx, r.Store, r.Resume, r.Plan.Spec)
	if err != nil {
		return 0, err
	}
	if prior.Seed != int64(r.Plan.Seed) {
		return 0, fmt.Errorf("run %d was planned with seed %d, not %d: plan a resumed run with its own seed", r.Resume, prior.Seed, r.Plan.Seed)
	}
	if err := sameFirewall(prior, r.New); err != nil {
		return 0, err
	}
	if err := r.Store.Reopen(ctx, r.Resume); err != nil {
		return 0, err
	}
	// A sweep killed between creating the run and adding its points left
	// a run without points.
	pts, err := r.Store.Points(ctx, r.Resume)
	if err != nil {
		return 0, err
	}
	if len(pts) == 0 {
		if err := r.Store.AddPoints(ctx, r.Resume, r.Plan.StorePoints()); err != nil {
			return 0, err
		}
	}
	return r.Resume, nil
}
