package matrix

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// fakeSession is the firewall side of a run: it applies to a fakeFirewall
// and records, as the run restores the firewall, what the database said
// of the run at that moment.
type fakeSession struct {
	*fakeFirewall
	st       *store.Store
	log      *[]string
	closeErr error
	closes   int
	// statusAtRestore is the run's status while Close ran.
	statusAtRestore store.RunStatus
}

func (s *fakeSession) ApplyChecked(ctx context.Context, config []byte, changes []configxml.Change) error {
	return s.Apply(ctx, config, changes)
}

func (s *fakeSession) Close(ctx context.Context) error {
	s.closes++
	*s.log = append(*s.log, "restore")
	if runs, err := s.st.Runs(context.WithoutCancel(ctx)); err == nil && len(runs) > 0 {
		s.statusAtRestore = runs[0].Status
	}
	return s.closeErr
}

type runFixture struct {
	run      *Run
	session  *fakeSession
	st       *store.Store
	spec     *Spec
	calls    int
	log      []string // begin, swept, restore, in the order they happened
	beganID  int64
	beginErr error
}

// newRun is a run of spec on a fake firewall, recording into st (a new
// database when nil).
func newRun(t *testing.T, st *store.Store, spec string, seed uint64) *runFixture {
	t.Helper()
	s, err := Parse(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	cfg := pfSense(t)
	plan, err := NewPlan(context.Background(), s, cfg, seed)
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st, err = store.Open(t.Context(), filepath.Join(t.TempDir(), "results.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
	}
	f := &runFixture{st: st, spec: s}
	f.session = &fakeSession{fakeFirewall: &fakeFirewall{config: cfg.Bytes()}, st: st, log: &f.log}
	f.run = &Run{
		Store: st, Plan: plan,
		New: store.Run{Target: "fake", FwabVersion: "test", ConfigHash: "c0ffee"},
		Begin: func(ctx context.Context, id int64) (Session, error) {
			f.log = append(f.log, "begin")
			f.beganID = id
			if f.beginErr != nil {
				return nil, f.beginErr
			}
			return f.session, nil
		},
		Sweep: Sweep{Config: cfg},
		Swept: func(Stats) { f.log = append(f.log, "swept") },
	}
	f.run.Sweep.Measure = measureFrom(t, f.session.fakeFirewall, &f.calls)
	return f
}

func (f *runFixture) status(t *testing.T, id int64) store.RunStatus {
	t.Helper()
	r, err := f.st.Run(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status
}

func (f *runFixture) samples(t *testing.T, id int64) int {
	t.Helper()
	s, err := f.st.Samples(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return len(s)
}

func TestRunNew(t *testing.T) {
	f := newRun(t, nil, twoPoints, 9)
	out, err := f.run.Execute(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if out.Err() != nil || out.Status != store.Done || out.Run != f.beganID || out.Run == 0 {
		t.Fatalf("Outcome = %+v, Begin told run %d; want run done", out, f.beganID)
	}
	r, err := f.st.Run(t.Context(), out.Run)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != store.Done || r.Spec != string(f.spec.Raw()) || r.SpecHash != f.spec.Hash() || r.Seed != 9 || r.Target != "fake" || r.ConfigHash != "c0ffee" {
		t.Errorf("recorded run = %+v; want the plan's spec and seed and New's target and hash, done", r)
	}
	points, _ := f.st.Points(t.Context(), out.Run)
	if len(points) != 3 {
		t.Errorf("%d points recorded; want 3", len(points))
	}
	if n := f.samples(t, out.Run); n != 20 || out.Stats.Samples != 20 { // 3 points × 2 probes × 3 rounds + the drift check
		t.Errorf("%d samples, stats say %d; want 20", n, out.Stats.Samples)
	}
	if got := strings.Join(f.log, " "); got != "begin swept restore" {
		t.Errorf("steps %q; want begin swept restore", got)
	}
}

// TestRunRestoresBeforeTheFinalStatus: whatever the outcome, the firewall
// is restored while the run still reads "running", and only then does it
// get its final status, which says how it ended.
func TestRunRestoresBeforeTheFinalStatus(t *testing.T) {
	diskFull := diskError{full: true}
	tests := []struct {
		name        string
		apply       error // every apply fails with this
		cancelAfter int   // cancel during this probe call; 0 never
		restoreErr  error
		want        store.RunStatus
		wantErr     string // in Err()
		notErr      string // not in Err()
	}{
		{name: "complete", want: store.Done},
		{name: "loop fails", apply: diskFull, want: store.Failed, wantErr: "disk is full"},
		{name: "cancelled", cancelAfter: 4, want: store.Cancelled, wantErr: context.Canceled.Error()},
		{name: "restore fails", restoreErr: errors.New("hash mismatch"), want: store.Failed, wantErr: "restoring the original config: hash mismatch"},
		{name: "cancelled, restore fails", cancelAfter: 4, restoreErr: errors.New("ssh: connection lost"), want: store.Cancelled,
			wantErr: "restoring the original config: ssh: connection lost", notErr: "before that"},
		{name: "loop and restore fail", apply: diskFull, restoreErr: errors.New("hash mismatch"), want: store.Failed,
			wantErr: "restoring the original config: hash mismatch\nand before that: sweep stopped at point 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRun(t, nil, twoPoints, 9)
			f.session.closeErr = tt.restoreErr
			if tt.apply != nil {
				f.session.refuse = func([]configxml.Change) error { return tt.apply }
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tt.cancelAfter > 0 {
				measure := f.run.Sweep.Measure
				f.run.Sweep.Measure = func(c context.Context, pr ProbeRun) probe.Sample {
					if f.calls == tt.cancelAfter-1 {
						cancel()
					}
					return measure(c, pr)
				}
			}
			out, err := f.run.Execute(ctx)
			if err != nil {
				t.Fatalf("Execute: %v; want the ending in the Outcome", err)
			}
			if f.session.closes != 1 || f.session.statusAtRestore != store.Running {
				t.Errorf("restored %d times, the run %q meanwhile; want once, while running", f.session.closes, f.session.statusAtRestore)
			}
			if got := f.status(t, out.Run); got != tt.want || out.Status != tt.want {
				t.Errorf("status %q, Outcome says %q; want %q", got, out.Status, tt.want)
			}
			if (out.RestoreErr != nil) != (tt.restoreErr != nil) {
				t.Errorf("RestoreErr = %v; want %v", out.RestoreErr, tt.restoreErr)
			}
			err = out.Err()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Err() = %v; want %q", err, tt.wantErr)
			}
			if tt.notErr != "" && err != nil && strings.Contains(err.Error(), tt.notErr) {
				t.Errorf("Err() = %v; want no %q", err, tt.notErr)
			}
			if got := strings.Join(f.log, " "); got != "begin swept restore" {
				t.Errorf("steps %q; want begin swept restore", got)
			}
		})
	}
}

// TestRunBeginFails: a session that cannot start changed nothing, so
// nothing is restored and the run is marked failed.
func TestRunBeginFails(t *testing.T) {
	f := newRun(t, nil, twoPoints, 9)
	f.beginErr = errors.New("firewall locked by alice@lab")
	out, err := f.run.Execute(t.Context())
	if err == nil || !strings.Contains(err.Error(), "locked by alice") {
		t.Fatalf("Execute = %v; want Begin's error", err)
	}
	if got := f.status(t, f.beganID); got != store.Failed {
		t.Errorf("status %q; want failed", got)
	}
	if f.session.closes != 0 || f.calls != 0 || out.Run != f.beganID {
		t.Errorf("%d restores, %d probes, Outcome run %d; want none, none, %d", f.session.closes, f.calls, out.Run, f.beganID)
	}
}

// TestRunResume: an interrupted run, resumed with its spec and seed,
// measures only what is missing and ends done, under the same id.
func TestRunResume(t *testing.T) {
	first := newRun(t, nil, twoPoints, 9)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	measure := first.run.Sweep.Measure
	first.run.Sweep.Measure = func(c context.Context, pr ProbeRun) probe.Sample {
		if first.calls == 7 {
			cancel()
		}
		return measure(c, pr)
	}
	out, err := first.run.Execute(ctx)
	if err != nil || out.Status != store.Cancelled {
		t.Fatalf("first Execute = %+v, %v; want cancelled", out, err)
	}
	prior, err := CheckResume(t.Context(), first.st, out.Run, first.spec)
	if err != nil {
		t.Fatalf("CheckResume with the same spec: %v", err)
	}
	again := newRun(t, first.st, twoPoints, uint64(prior.Seed))
	again.run.Resume = out.Run
	out2, err := again.run.Execute(t.Context())
	if err != nil || out2.Err() != nil {
		t.Fatalf("resumed Execute = %+v, %v", out2, err)
	}
	if out2.Run != out.Run || again.beganID != out.Run || out2.Status != store.Done || again.status(t, out.Run) != store.Done {
		t.Errorf("resumed run %d (Begin told %d), %q; want run %d done", out2.Run, again.beganID, out2.Status, out.Run)
	}
	if n := again.samples(t, out.Run); n != 20 || again.calls != 20-7 {
		t.Errorf("%d samples after %d new probes; want 20 after 13", n, again.calls)
	}
	if runs, _ := again.st.Runs(t.Context()); len(runs) != 1 {
		t.Errorf("%d runs in the database; want the one resumed", len(runs))
	}
}

// TestRunResumeRefused: a run is resumed only with the spec and seed it
// was made from, and a refused resume changes nothing.
func TestRunResumeRefused(t *testing.T) {
	first := newRun(t, nil, twoPoints, 9)
	first.beginErr = errors.New("stop after recording")
	out, _ := first.run.Execute(t.Context())
	changed := strings.Replace(twoPoints, "repeats: 3", "repeats: 4", 1)
	other, err := Parse(strings.NewReader(changed))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckResume(t.Context(), first.st, out.Run, other); !errors.Is(err, ErrSpecChanged) {
		t.Errorf("CheckResume with a changed spec = %v; want ErrSpecChanged", err)
	}
	if _, err := CheckResume(t.Context(), first.st, out.Run+1, first.spec); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CheckResume of no run = %v; want store.ErrNotFound", err)
	}
	for _, tt := range []struct {
		name string
		spec string
		seed uint64
		want string
	}{
		{"changed spec", changed, 9, ErrSpecChanged.Error()},
		{"other seed", twoPoints, 10, "planned with seed 9, not 10"},
	} {
		r := newRun(t, first.st, tt.spec, tt.seed)
		r.run.Resume = out.Run
		if _, err := r.run.Execute(t.Context()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Execute = %v; want %q", tt.name, err, tt.want)
		}
		if len(r.log) != 0 || r.calls != 0 {
			t.Errorf("%s: steps %v, %d probes; want none", tt.name, r.log, r.calls)
		}
	}
	if got := first.status(t, out.Run); got != store.Failed {
		t.Errorf("status after refused resumes %q; want it left failed", got)
	}
}

// TestRunResumeAddsMissingPoints: a sweep killed between creating the run
// and adding its points left a run with none; resuming it adds them.
func TestRunResumeAddsMissingPoints(t *testing.T) {
	f := newRun(t, nil, twoPoints, 9)
	id, err := f.st.CreateRun(t.Context(), store.Run{Spec: string(f.spec.Raw()), Seed: 9, Target: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	f.run.Resume = id
	out, err := f.run.Execute(t.Context())
	if err != nil || out.Err() != nil {
		t.Fatalf("Execute = %+v, %v", out, err)
	}
	points, _ := f.st.Points(t.Context(), id)
	if len(points) != 3 || f.samples(t, id) != 20 || out.Status != store.Done {
		t.Errorf("%d points, %d samples, %q; want 3, 20, done", len(points), f.samples(t, id), out.Status)
	}
}
