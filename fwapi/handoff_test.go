package fwapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// slowGuard is OPNsense's guard on an emulated box whose rollback takes
// two seconds between taking the hand-off and restoring the config (a
// Suricata that is slow to stop, on pfSense), so that a Disarm can meet
// it half-way.
func slowGuard(t *testing.T) (*labtest.Firewall, fwapi.ShellGuard, []byte, []byte) {
	t.Helper()
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	g := fwapi.OPNsenseShellGuard(dial(t, em.SSHConfig()))
	g.BeforeRestore = []string{"sleep 2"}
	g.RunWait = 20 * time.Second
	prev := em.StoredConfig(t)
	changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)
	return em, g, prev, changed
}

// armAndChange arms the rollback to prev after the delay and puts the
// changed config on the box, as a step does.
func armAndChange(t *testing.T, em *labtest.Firewall, g fwapi.ShellGuard, prev, changed []byte, after time.Duration) {
	t.Helper()
	if err := g.ArmRollback(t.Context(), prev, after); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", changed)
}

// waitClaimed waits until the rollback has woken up and taken the
// hand-off (on code without one: until it is half-way, in its slow step).
func waitClaimed(t *testing.T, em *labtest.Firewall) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if out, _, _ := em.Run(t, "cat "+fwapi.RollbackClaim+" 2>/dev/null", ""); strings.HasPrefix(out, "rollback ") {
			return
		}
	}
	t.Fatal("the rollback never took the hand-off")
}

// TestDisarmDuringRollbackWaitsForIt: a Disarm that comes while the
// rollback is restoring must not kill it half-way and report "not fired":
// it waits for the rollback and says it ran, and the previous config is
// back.
func TestDisarmDuringRollbackWaitsForIt(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	ctx := t.Context()
	armAndChange(t, em, g, prev, changed, time.Second)
	waitClaimed(t, em)
	var ran *fwapi.RollbackRanError
	if err := g.Disarm(ctx); !errors.As(err, &ran) {
		t.Fatalf("Disarm while the rollback restores = %v, want a RollbackRanError (the rollback must finish and be reported)", err)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, prev) {
		t.Errorf("after Disarm met the rollback half-way the box holds %d bytes, not the previous config", len(got))
	}
	if err := g.Disarm(ctx); err != nil {
		t.Errorf("a second Disarm = %v, want nil (the rollback was reported once)", err)
	}
}

// TestDisarmWinsEvenWhenTheKillMisses: once Disarm holds the hand-off,
// a rollback timer it failed to stop (its pid file lost) stands down when
// it wakes.
func TestDisarmWinsEvenWhenTheKillMisses(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	ctx := t.Context()
	armAndChange(t, em, g, prev, changed, time.Second)
	em.Run(t, "rm -f "+fwapi.RollbackPIDFile, "")
	if err := g.Disarm(ctx); err != nil {
		t.Fatalf("Disarm before the deadline = %v, want nil", err)
	}
	// Past the timer (1 s) and the slow step (2 s) of a rollback that
	// went on regardless.
	time.Sleep(3500 * time.Millisecond)
	if got := em.StoredConfig(t); !bytes.Equal(got, changed) {
		t.Error("a rollback that lost the hand-off restored the config all the same")
	}
	if fired, at, err := g.RollbackFired(ctx); err != nil || fired {
		t.Errorf("RollbackFired() = %v, %q, %v after Disarm won; want false", fired, at, err)
	}
}

// TestRollbackCutShortByRebootFinishesAtBoot: a reboot in the middle of a
// restore (the rollback holds the hand-off) does not lose it: the boot
// hook finishes the restore at once.
func TestRollbackCutShortByRebootFinishesAtBoot(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	ctx := t.Context()
	if err := g.ArmRollback(ctx, prev, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", changed)
	// The timer is far off: take the hand-off as the woken rollback does,
	// and run the rest of it, then cut it short with a reboot.
	claim := fwapi.RollbackClaim
	em.Run(t, "pkill -F "+fwapi.RollbackPIDFile+"; echo \"rollback $(date +%s)\" > "+claim+".rollback && ln "+claim+".rollback "+claim+" && daemon -f -p "+fwapi.RollbackPIDFile+" /bin/sh "+fwapi.RollbackScript+" resume", "")
	em.Reboot(ctx)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !bytes.Equal(em.StoredConfig(t), prev); {
		time.Sleep(50 * time.Millisecond)
	}
	if !bytes.Equal(em.StoredConfig(t), prev) {
		t.Fatalf("the restore a reboot cut short was not finished at boot; the boot printed:\n%s", em.BootConsole())
	}
	var ran *fwapi.RollbackRanError
	if err := g.Disarm(ctx); !errors.As(err, &ran) {
		t.Errorf("Disarm after the boot finished the rollback = %v, want a RollbackRanError", err)
	}
}

// TestSessionRefusesToConfirmNearTheDeadline: a change whose apply and
// verification end within the margin before the rollback's deadline is
// not confirmed (that confirmation would race the rollback): the session
// undoes it and says why.
func TestSessionRefusesToConfirmNearTheDeadline(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	after := 3 * time.Second
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: t.TempDir(), Owner: owner("alice@ws1"), RollbackAfter: after, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	slow := after - fwapi.ConfirmMargin(after)/2
	err = s.Apply(t.Context(), changedConfig(orig), rulesChange, func(ctx context.Context, st fwapi.RuntimeState) error {
		time.Sleep(slow)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "not confirmed") || !strings.Contains(err.Error(), "--rollback-after") {
		t.Fatalf("Apply verified %v after arming a %v rollback = %v, want it refused with the deadline named", slow, after, err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Error("the change refused at the deadline was left on the box")
	}
}

// lateWriter is a firewall whose WriteConfig starts after a pause, as a
// write behind a slow link or a busy box does.
type lateWriter struct {
	fwapi.Firewall
	pause time.Duration
}

func (w *lateWriter) WriteConfig(ctx context.Context, config []byte, description string) error {
	time.Sleep(w.pause)
	return w.Firewall.WriteConfig(ctx, config, description)
}

// TestSessionWriteAfterTheRollbackFired: a step whose write reaches the
// box after its rollback has fired is refused there (it would survive the
// restore's reload); the session reports the rollback, not a failed
// restore of its own, and the box keeps the previous config.
func TestSessionWriteAfterTheRollbackFired(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	dir := t.TempDir()
	w := &lateWriter{Firewall: fw}
	s, err := fwapi.StartSession(t.Context(), w, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: dir, Owner: owner("alice@ws1"), RollbackAfter: time.Second, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	w.pause = 3 * time.Second
	err = s.Apply(t.Context(), changedConfig(orig), rulesChange, nil)
	var claimed *fwapi.RollbackClaimedError
	if !errors.As(err, &claimed) || strings.Contains(err.Error(), "also failed") {
		t.Errorf("Apply whose write came after the rollback fired = %v; want the write refused and the rollback reported", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Error("a write that came after the rollback fired is on the box")
	}
	if ev := events(t, dir); !slices.Contains(ev, "rolled-back") {
		t.Errorf("journal %v has no rolled-back entry", ev)
	}
}

// lostApply is a firewall whose first Apply runs during, then reports
// the connection lost, as a reload that reconfigured the management link
// does.
type lostApply struct {
	fwapi.Firewall
	during func()
	once   sync.Once
}

func (l *lostApply) Apply(ctx context.Context, changes []configxml.Change) error {
	first := false
	l.once.Do(func() { first = true })
	if !first {
		return l.Firewall.Apply(ctx, changes)
	}
	l.during()
	return fwapi.ErrConnectionLost
}

// TestSessionWaitsForARollbackAtWork: the box answers again after a lost
// apply while its rollback is still restoring (held up here by a save
// holding the config lock past the session's wait). The session's own
// restore is refused on the box; it waits for the rollback and reports
// it, instead of writing again until its wait runs out and telling the
// user to recover a box that restored itself. A rollback that then finds
// its saved copy corrupt restores nothing: the session restores.
func TestSessionWaitsForARollbackAtWork(t *testing.T) {
	t.Parallel()
	for _, corrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("corrupt=%v", corrupt), func(t *testing.T) {
			t.Parallel()
			sessionWaitsForARollbackAtWork(t, corrupt)
		})
	}
}

func sessionWaitsForARollbackAtWork(t *testing.T, corrupt bool) {
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	sh, err := fwapi.DialSSH(t.Context(), fake.SSHConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	held := make(chan struct{})
	w := &lostApply{Firewall: fw, during: func() {
		// A save holds the lock from before the rollback fires until
		// past the session's wait (its deadline and ReconnectWait).
		go func() {
			defer close(held)
			_, _, _, _ = sh.Run(context.Background(), "lockf -k /tmp/config.lock sleep 8", nil)
		}()
		for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
			if _, _, code := fake.Run(t, "lockf -k -s -t 0 /tmp/config.lock true", ""); code == 75 {
				break
			}
			if time.Since(start) > 5*time.Second {
				t.Error("the test's lockf never held the lock")
				return
			}
		}
		if corrupt {
			fake.PutFile(t, fwapi.RollbackConfig, []byte("<pfsense>torn"))
		}
		for start := time.Now(); len(fake.Glob(fwapi.RollbackClaim)) == 0; time.Sleep(50 * time.Millisecond) {
			if time.Since(start) > 10*time.Second {
				t.Error("the rollback never fired")
				return
			}
		}
	}}
	s, err := fwapi.StartSession(t.Context(), w, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: t.TempDir(), Owner: owner("alice@ws1"), RollbackAfter: time.Second, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	err = s.Apply(t.Context(), changedConfig(orig), rulesChange, nil)
	<-held
	var ran *fwapi.RollbackRanError
	switch {
	case !errors.As(err, &ran) || ran.Failed != corrupt || strings.Contains(err.Error(), "could not confirm") || strings.Contains(err.Error(), "could not be confirmed"):
		t.Errorf("Apply lost while its rollback restored = %v; want the rollback reported", err)
	case corrupt && !strings.Contains(err.Error(), "fwab restored the previous config"):
		t.Errorf("Apply lost while its rollback found its copy corrupt = %v; want fwab's restore said", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Error("the previous config is not on the box")
	}
}

func TestConfirmMargin(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ after, want time.Duration }{
		{time.Second, 250 * time.Millisecond},
		{3 * time.Second, 750 * time.Millisecond},
		{5 * time.Second, time.Second},
		{120 * time.Second, 12 * time.Second},
		{time.Hour, 30 * time.Second},
	} {
		if got := fwapi.ConfirmMargin(c.after); got != c.want {
			t.Errorf("ConfirmMargin(%v) = %v, want %v", c.after, got, c.want)
		}
	}
}

// TestSSHOutputCapped: a command that prints more than the client keeps
// fails with the cap named, instead of filling fwab's memory.
func TestSSHOutputCapped(t *testing.T) {
	t.Parallel()
	em := labtest.Start(t, labtest.Options{})
	cfg := em.SSHConfig()
	cfg.MaxOutput = 1024
	sh := dial(t, cfg)
	em.PutFile(t, "/tmp/small", bytes.Repeat([]byte("x"), 1000))
	em.PutFile(t, "/tmp/big", bytes.Repeat([]byte("x"), 4096))
	if out, _, code, err := sh.Run(t.Context(), "cat /tmp/small", nil); err != nil || code != 0 || len(out) != 1000 {
		t.Fatalf("cat of 1000 bytes under a 1024-byte cap = %d bytes, exit %d, %v", len(out), code, err)
	}
	var big *fwapi.OutputTooLargeError
	if _, _, _, err := sh.Run(t.Context(), "cat /tmp/big", nil); !errors.As(err, &big) || !strings.Contains(err.Error(), "1024 bytes") {
		t.Fatalf("cat of 4096 bytes under a 1024-byte cap = %v, want an OutputTooLargeError naming the cap", err)
	}
	if out, _, code, err := sh.Run(t.Context(), "echo still here", nil); err != nil || code != 0 || string(out) != "still here\n" {
		t.Errorf("the next command after a capped one = %q, exit %d, %v", out, code, err)
	}
}

// TestDisarmTakesOverADeadRollback: a rollback that took the hand-off and
// died before it finished (killed; a boot that skipped its hook) is not
// waited for: Disarm says so at once and takes the hand-off over, so no
// later boot resumes it, and the next Disarm is clean.
func TestDisarmTakesOverADeadRollback(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	ctx := t.Context()
	armAndChange(t, em, g, prev, changed, time.Second)
	waitClaimed(t, em)
	em.Run(t, "pkill -F "+fwapi.RollbackPIDFile+"; rm -f "+fwapi.RollbackPIDFile, "")
	start := time.Now()
	var broken *fwapi.RollbackBrokenError
	if err := g.Disarm(ctx); !errors.As(err, &broken) {
		t.Fatalf("Disarm of a rollback that died half-way = %v, want a RollbackBrokenError", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Disarm waited %v for a rollback that was gone", d)
	}
	if err := g.Disarm(ctx); err != nil {
		t.Errorf("the next Disarm = %v, want nil", err)
	}
	em.Reboot(ctx)
	time.Sleep(3 * time.Second)
	if got := em.StoredConfig(t); !bytes.Equal(got, changed) {
		t.Error("a boot resumed the rollback Disarm had taken over")
	}
}

// lostAnswer is a shell whose connection drops once, right after the box
// ran a command that lose picks (by the command or its answer): the
// command ran, its answer never came (a reload resetting the management
// link does this).
type lostAnswer struct {
	fwapi.Shell
	lose func(cmd string, out []byte) bool
	lost bool
}

func (s *lostAnswer) Run(ctx context.Context, cmd string, stdin io.Reader) ([]byte, []byte, int, error) {
	out, errOut, code, err := s.Shell.Run(ctx, cmd, stdin)
	if err == nil && !s.lost && s.lose(cmd, out) {
		s.lost = true
		return nil, nil, 0, fmt.Errorf("ssh: %w", fwapi.ErrConnectionLost)
	}
	return out, errOut, code, err
}

// answering loses the answer that starts with word.
func answering(word string) func(string, []byte) bool {
	return func(_ string, out []byte) bool { return bytes.HasPrefix(out, []byte(word)) }
}

// TestDisarmSurvivesALostAnswer: Disarm waiting for a running rollback
// polls the box; when the poll that finds it fired loses its answer, the
// next poll must still say the rollback ran, not take the hand-off and
// report "disarmed" over a box that was rolled back.
func TestDisarmSurvivesALostAnswer(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	lossy := &lostAnswer{Shell: g.Sh, lose: answering("fired")}
	g.Sh = lossy
	ctx := t.Context()
	armAndChange(t, em, g, prev, changed, time.Second)
	waitClaimed(t, em)
	var ran *fwapi.RollbackRanError
	if err := g.Disarm(ctx); !errors.As(err, &ran) {
		t.Fatalf("Disarm whose poll lost the answer 'fired' = %v, want a RollbackRanError", err)
	}
	if !lossy.lost {
		t.Fatal("no answer was lost: the test did not test the case")
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, prev) {
		t.Errorf("the box holds %d bytes, not the previous config", len(got))
	}
	if err := g.Disarm(ctx); err != nil {
		t.Errorf("a second Disarm = %v, want nil (the rollback was reported once)", err)
	}
}

// TestDisarmReportsADeadRollbackDespiteALostAnswer: a rollback that died
// half-way while Disarm waited for it is taken over and reported broken;
// when that report's answer is lost, the next poll must report it again,
// not answer "disarmed" as if the change stood untouched.
func TestDisarmReportsADeadRollbackDespiteALostAnswer(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	lossy := &lostAnswer{Shell: g.Sh, lose: answering("dead")}
	g.Sh = lossy
	armAndChange(t, em, g, prev, changed, time.Second)
	waitClaimed(t, em)
	go func() {
		time.Sleep(300 * time.Millisecond) // Disarm has found it running
		em.Run(t, "pkill -F "+fwapi.RollbackPIDFile, "")
	}()
	var broken *fwapi.RollbackBrokenError
	if err := g.Disarm(t.Context()); !errors.As(err, &broken) {
		t.Fatalf("Disarm after the rollback died and the report was lost = %v, want a RollbackBrokenError", err)
	}
	if !lossy.lost {
		t.Fatal("no answer was lost: the test did not test the case")
	}
}

// TestDisarmRetriesALostAnswer: Disarm's command is safe to run again, so
// a first answer lost on the way back is asked for again instead of being
// reported as a failure to disarm (which a session takes to mean the
// rollback will still restore the previous config).
func TestDisarmRetriesALostAnswer(t *testing.T) {
	t.Parallel()
	em, g, prev, changed := slowGuard(t)
	armAndChange(t, em, g, prev, changed, 30*time.Second)
	lossy := &lostAnswer{Shell: g.Sh, lose: answering("disarmed")}
	g.Sh = lossy
	if err := g.Disarm(t.Context()); err != nil {
		t.Fatalf("Disarm whose first answer was lost = %v, want nil (disarmed)", err)
	}
	if !lossy.lost {
		t.Fatal("no answer was lost: the test did not test the case")
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, changed) {
		t.Error("the change did not stand after a successful Disarm")
	}
}

// TestSessionStepRefusedBeforeItWrote: a step whose write the box refused
// before writing anything (pfSense's config lock could not be taken)
// leaves config.xml as it was, so the session disarms its rollback and
// says so, instead of leaving it armed to reload an unchanged config.
func TestSessionStepRefusedBeforeItWrote(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	dir := t.TempDir()
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: dir, Owner: owner("alice@ws1"), RollbackAfter: 2 * time.Second, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	if err := os.Mkdir(filepath.Join(fake.Root, "tmp", "config.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	fake.ResetActions()
	err = s.Apply(t.Context(), changedConfig(orig), rulesChange, nil)
	var lockErr *fwapi.ConfigLockError
	var stopper interface{ StopsSweep() bool }
	if !errors.As(err, &lockErr) || strings.Contains(err.Error(), "also failed") || !errors.As(err, &stopper) || !stopper.StopsSweep() {
		t.Errorf("Apply whose write the box refused = %v; want a *ConfigLockError that stops the sweep, and no failed restore", err)
	}
	if ev := events(t, dir); !slices.Contains(ev, "not-written") {
		t.Errorf("journal %v has no not-written entry", ev)
	}
	time.Sleep(3 * time.Second) // past the rollback's deadline
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Error("config.xml changed")
	}
	if _, err := fake.ReadFile(fwapi.RollbackFired); err == nil {
		t.Error("the rollback fired over an unchanged config")
	}
	if a := fake.Actions(); len(a) > 0 {
		t.Errorf("the box ran %v for a step that wrote nothing", a)
	}
	// The lock is back: the session's end has nothing of its own to undo.
	if err := os.Remove(filepath.Join(fake.Root, "tmp", "config.lock")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a := fake.Actions(); len(a) > 0 {
		t.Errorf("the session's end ran %v after a step that wrote nothing", a)
	}
}

// disarmFailsAfterArm is a guard whose first Disarm after each arm fails,
// as one over a connection that drops does.
type disarmFailsAfterArm struct {
	fwapi.Guard
	mu    sync.Mutex
	armed bool
}

func (d *disarmFailsAfterArm) ArmRollback(ctx context.Context, previous []byte, after time.Duration) error {
	d.mu.Lock()
	d.armed = true
	d.mu.Unlock()
	return d.Guard.ArmRollback(ctx, previous, after)
}

func (d *disarmFailsAfterArm) Disarm(ctx context.Context) error {
	d.mu.Lock()
	fail := d.armed
	d.armed = false
	d.mu.Unlock()
	if fail {
		return errors.New("disarm: connection reset")
	}
	return d.Guard.Disarm(ctx)
}

// TestSessionStepRefusedAndNotDisarmed: when the disarm after a refused
// step fails too, the step stays the session's to undo, so the session's
// end disarms the rollback instead of leaving it armed behind it.
func TestSessionStepRefusedAndNotDisarmed(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	s, err := fwapi.StartSession(t.Context(), fw, &disarmFailsAfterArm{Guard: fw}, fwapi.SessionOptions{
		Target: "fw1", Dir: t.TempDir(), Owner: owner("alice@ws1"), RollbackAfter: 2 * time.Second, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(fake.Root, "tmp", "config.lock")
	if err := os.Mkdir(lock, 0o755); err != nil {
		t.Fatal(err)
	}
	err = s.Apply(t.Context(), changedConfig(orig), rulesChange, nil)
	var lockErr *fwapi.ConfigLockError
	if !errors.As(err, &lockErr) || !strings.Contains(err.Error(), "could not be disarmed") {
		t.Errorf("Apply whose write was refused and whose disarm failed = %v; want both said", err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := fake.ReadFile(fwapi.RollbackScript); err == nil {
		t.Error("the session ended with the step's rollback still armed")
	}
	time.Sleep(3 * time.Second) // past the rollback's deadline
	if _, err := fake.ReadFile(fwapi.RollbackFired); err == nil {
		t.Error("the step's rollback outlived the session and fired")
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Error("config.xml is not the original")
	}
}
