package fwapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// leaseBox is one emulated box of a flavor with its guard, as the drivers
// build it (pfSense's restores its packages; both have boot hooks).
func leaseBox(t *testing.T, flavor configxml.Flavor) (*labtest.Firewall, fwapi.ShellGuard) {
	t.Helper()
	em := labtest.Start(t, labtest.Options{Product: flavor})
	sh := dial(t, em.SSHConfig())
	if flavor == configxml.OPNsense {
		g := fwapi.OPNsenseShellGuard(sh)
		g.RunWait = 20 * time.Second
		return em, g
	}
	fw := fwapi.NewPfSense(sh, fwapi.PfSenseOptions{})
	g := fw.ShellGuard
	g.RunWait = 20 * time.Second
	return em, g
}

func forFlavors(t *testing.T, test func(t *testing.T, flavor configxml.Flavor)) {
	for _, f := range []configxml.Flavor{configxml.PfSense, configxml.OPNsense} {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			test(t, f)
		})
	}
}

// lockAndLease locks the box and takes a lease of length on orig, as a
// session's start does, for ci@runner.
func lockAndLease(t *testing.T, g fwapi.ShellGuard, orig []byte, length time.Duration) {
	t.Helper()
	o := owner("ci@runner")
	if err := g.Lock(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if err := g.TakeLease(t.Context(), o, orig, length); err != nil {
		t.Fatalf("TakeLease: %v", err)
	}
}

func waitLeaseEnded(t *testing.T, g fwapi.ShellGuard, within time.Duration) fwapi.LeaseInfo {
	t.Helper()
	var info fwapi.LeaseInfo
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var err error
		if info, err = g.LeaseStatus(t.Context()); err == nil && info.Ended != "" && info.Ended != "running" {
			return info
		}
	}
	t.Fatalf("the lease did not end within %v: %+v", within, info)
	return info
}

// TestLeaseExpiresAndRestores: fwab gone (no renewal), the box restores
// the session's original config by itself and frees its lock.
func TestLeaseExpiresAndRestores(t *testing.T) {
	t.Parallel()
	forFlavors(t, func(t *testing.T, flavor configxml.Flavor) {
		em, g := leaseBox(t, flavor)
		ctx := t.Context()
		orig := em.StoredConfig(t)
		lockAndLease(t, g, orig, 3*time.Second)
		changed := append(bytes.Clone(orig), "<!-- changed -->\n"...)
		if err := g.ExpectConfigs(ctx, fwapi.SHA256Hex(orig), fwapi.SHA256Hex(changed)); err != nil {
			t.Fatal(err)
		}
		em.PutFile(t, "/conf/config.xml", changed)
		info := waitLeaseEnded(t, g, 20*time.Second)
		if !strings.HasPrefix(info.Ended, "restored") {
			t.Fatalf("the lease ended %q, want restored", info.Ended)
		}
		if !bytes.Equal(em.StoredConfig(t), orig) {
			t.Error("the expired lease did not restore the original config")
		}
		if len(em.Glob(fwapi.LockDir)) != 0 {
			t.Error("the expired lease left its session's lock")
		}
		if !strings.Contains(em.SystemLog(), "original config was restored") {
			t.Errorf("the system log does not say the lease restored the box:\n%s", em.SystemLog())
		}
		var lost *fwapi.LeaseLostError
		if err := g.RenewLease(ctx, time.Minute); !errors.As(err, &lost) {
			t.Errorf("RenewLease after the lease ended = %v, want a LeaseLostError", err)
		}
	})
}

// TestLeaseRenewedHolds: a renewed lease never fires; a released one is
// gone from the box with all its files.
func TestLeaseRenewedHolds(t *testing.T) {
	t.Parallel()
	forFlavors(t, func(t *testing.T, flavor configxml.Flavor) {
		em, g := leaseBox(t, flavor)
		ctx := t.Context()
		orig := em.StoredConfig(t)
		if err := g.TakeLease(ctx, owner("ci@runner"), orig, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		changed := append(bytes.Clone(orig), "<!-- changed -->\n"...)
		if err := g.ExpectConfigs(ctx, fwapi.SHA256Hex(changed)); err != nil {
			t.Fatal(err)
		}
		em.PutFile(t, "/conf/config.xml", changed)
		for range 8 {
			time.Sleep(500 * time.Millisecond)
			if err := g.RenewLease(ctx, 2*time.Second); err != nil {
				t.Fatalf("RenewLease: %v", err)
			}
		}
		if !bytes.Equal(em.StoredConfig(t), changed) {
			t.Fatal("a lease renewed in time restored the config")
		}
		if err := g.ReleaseLease(ctx); err != nil {
			t.Fatalf("ReleaseLease: %v", err)
		}
		time.Sleep(3 * time.Second)
		if !bytes.Equal(em.StoredConfig(t), changed) {
			t.Error("a released lease restored the config")
		}
		for _, f := range []string{fwapi.LeaseScript, fwapi.LeaseOriginal, fwapi.LeaseExpires, fwapi.LeaseClaim, fwapi.LeaseBootHook, fwapi.OPNsenseLeaseBootHook} {
			if len(em.Glob(f)) != 0 {
				t.Errorf("ReleaseLease left %s", f)
			}
		}
	})
}

// TestLeaseStandsDownOverForeignEdit: config.xml changed by someone else
// (not a config fwab wrote) is left alone, and the system log says why.
func TestLeaseStandsDownOverForeignEdit(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.PfSense)
	orig := em.StoredConfig(t)
	if err := g.TakeLease(t.Context(), owner("ci@runner"), orig, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	foreign := append(bytes.Clone(orig), "<!-- an admin's emergency rule -->\n"...)
	em.PutFile(t, "/conf/config.xml", foreign)
	info := waitLeaseEnded(t, g, 20*time.Second)
	if !strings.HasPrefix(info.Ended, "stood-down") {
		t.Errorf("the lease over a foreign edit ended %q, want stood-down", info.Ended)
	}
	if !bytes.Equal(em.StoredConfig(t), foreign) {
		t.Error("the lease overwrote someone else's edit")
	}
	if !strings.Contains(em.SystemLog(), "someone else changed it") {
		t.Errorf("the system log does not say why the lease stood down:\n%s", em.SystemLog())
	}
}

// TestLeaseSurvivesReboot: a box that reboots while fwab is gone still
// restores itself: the boot hook (executable) starts the watchdog again.
func TestLeaseSurvivesReboot(t *testing.T) {
	t.Parallel()
	forFlavors(t, func(t *testing.T, flavor configxml.Flavor) {
		em, g := leaseBox(t, flavor)
		orig := em.StoredConfig(t)
		if err := g.TakeLease(t.Context(), owner("ci@runner"), orig, 4*time.Second); err != nil {
			t.Fatal(err)
		}
		changed := append(bytes.Clone(orig), "<!-- changed -->\n"...)
		if err := g.ExpectConfigs(t.Context(), fwapi.SHA256Hex(changed)); err != nil {
			t.Fatal(err)
		}
		em.PutFile(t, "/conf/config.xml", changed)
		em.Reboot(t.Context())
		waitLeaseEnded(t, g, 20*time.Second)
		if !bytes.Equal(em.StoredConfig(t), orig) {
			t.Fatalf("the lease did not restore the box after a reboot; the boot printed:\n%s", em.BootConsole())
		}
	})
}

// TestLeaseTakesTheRollbackHandOff: a lease that ends while a step's
// rollback is armed takes the rollback's hand-off, so the two never
// restore over each other; the original wins.
func TestLeaseTakesTheRollbackHandOff(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.OPNsense)
	ctx := t.Context()
	orig := em.StoredConfig(t)
	// Long enough that the steps below are done before it ends on a
	// loaded machine: a lease that ends first stands down over "step",
	// which it was never told of.
	if err := g.TakeLease(ctx, owner("ci@runner"), orig, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	step := append(bytes.Clone(orig), "<!-- step 1 -->\n"...)
	next := append(bytes.Clone(orig), "<!-- step 2 -->\n"...)
	em.PutFile(t, "/conf/config.xml", step)
	if err := g.ArmRollback(ctx, step, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := g.ExpectConfigs(ctx, fwapi.SHA256Hex(step), fwapi.SHA256Hex(next)); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", next)
	waitLeaseEnded(t, g, 20*time.Second)
	if !bytes.Equal(em.StoredConfig(t), orig) {
		t.Fatal("the lease did not restore the original")
	}
	if out, _, _ := em.Run(t, "cat "+fwapi.RollbackClaim, ""); !strings.HasPrefix(out, "lease ") {
		t.Error("the lease did not take the rollback's hand-off")
	}
	if err := g.Disarm(ctx); err != nil {
		t.Errorf("Disarm after the lease took the hand-off = %v, want nil (the rollback never ran)", err)
	}
}

// TestTakeLeaseRefusesAnother: a lease still held by another session is
// not replaced; the error names its owner and end.
func TestTakeLeaseRefusesAnother(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.PfSense)
	orig := em.StoredConfig(t)
	if err := g.TakeLease(t.Context(), owner("alice@ws1"), orig, time.Minute); err != nil {
		t.Fatal(err)
	}
	var held *fwapi.LeaseHeldError
	err := g.TakeLease(t.Context(), owner("bob@ws2"), orig, time.Minute)
	if !errors.As(err, &held) || !strings.Contains(err.Error(), "alice@ws1") {
		t.Fatalf("a second TakeLease = %v, want a LeaseHeldError naming alice@ws1", err)
	}
	if err := g.ReleaseLease(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverRefusesALiveSession: recover does not break a session whose
// lease holds and whose process still runs on this host, unless forced.
func TestRecoverRefusesALiveSession(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	o := owner("alice@ws1")
	o.PID = os.Getpid()
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: o, RollbackAfter: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	var alive *fwapi.SessionAliveError
	if _, err := fwapi.Recover(t.Context(), fw, fw, dir); !errors.As(err, &alive) || !strings.Contains(err.Error(), "still runs on this host") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Recover of a live session = %v, want it refused, naming the process and --force", err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), changedConfig(orig)) {
		t.Fatal("a refused recover changed the box")
	}
	rep, err := fwapi.RecoverWith(t.Context(), fw, fw, dir, fwapi.RecoverOptions{Force: true})
	if err != nil || !rep.Restored {
		t.Fatalf("Recover --force = %+v, %v; want the original restored", rep, err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), orig) {
		t.Error("Recover --force did not restore the original")
	}
}

// TestRecoverFromAnotherMachine: with no journal (another machine), recover
// works from what the lease keeps on the box; a session that may still run
// elsewhere needs --force; afterwards the first machine finds nothing left
// but its journal to close.
func TestRecoverFromAnotherMachine(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	dir, other := t.TempDir(), t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	// fwab dies here (no Close); another machine recovers.
	var alive *fwapi.SessionAliveError
	if _, err := fwapi.Recover(t.Context(), fw, fw, other); !errors.As(err, &alive) || !strings.Contains(err.Error(), "alice@ws1") {
		t.Fatalf("Recover from another machine of a lease that holds = %v, want it refused naming alice@ws1", err)
	}
	rep, err := fwapi.RecoverWith(t.Context(), fw, fw, other, fwapi.RecoverOptions{Force: true})
	if err != nil || !rep.FromBox || !rep.Restored || rep.SHA256 != fwapi.SHA256Hex(orig) {
		t.Fatalf("Recover --force from another machine = %+v, %v; want the original restored from the box", rep, err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), orig) {
		t.Error("the box does not hold the original after a recover from another machine")
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 || len(fake.Glob(fwapi.LeaseScript)) != 0 {
		t.Error("the recover from another machine left the lock or the lease")
	}
	if _, err := fwapi.Recover(t.Context(), fw, fw, other); err == nil || !strings.Contains(err.Error(), "nothing to recover") {
		t.Errorf("a second recover from another machine = %v, want nothing to recover", err)
	}
	// The first machine's journal shows a written config, so its recover
	// applies the original once more (the running state may lag the file)
	// and closes the journal.
	if _, err := fwapi.Recover(t.Context(), fw, fw, dir); err != nil {
		t.Errorf("the first machine's recover afterwards = %v, want its journal closed", err)
	}
	if _, err := fwapi.Recover(t.Context(), fw, fw, dir); err == nil || !strings.Contains(err.Error(), "nothing to recover") {
		t.Errorf("the first machine's second recover = %v, want nothing to recover", err)
	}
}

// TestRecoverAfterTheLeaseRestored: fwab killed and never run again; the
// lease ends and the box restores itself; a recover from another machine
// then says there is nothing left to do.
func TestRecoverAfterTheLeaseRestored(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.OPNsense)
	ctx := t.Context()
	orig := em.StoredConfig(t)
	lockAndLease(t, g, orig, 2*time.Second)
	changed := append(bytes.Clone(orig), "<!-- changed -->\n"...)
	if err := g.ExpectConfigs(ctx, fwapi.SHA256Hex(changed)); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", changed)
	waitLeaseEnded(t, g, 20*time.Second)
	fw := em.Open(t)
	rep, err := fwapi.Recover(ctx, fw, g, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "nothing to recover") || !strings.Contains(err.Error(), "ci@runner") || !strings.HasPrefix(rep.LeaseEnded, "restored") {
		t.Fatalf("Recover after the lease restored the box = %+v, %v; want nothing to recover, naming the session", rep, err)
	}
	if len(em.Glob(fwapi.LeaseScript)) != 0 || len(em.Glob(fwapi.LockDir)) != 0 {
		t.Error("the recover left the ended lease's files or the lock")
	}
}

// TestRestoreChecksTheRunningState: a restore whose config.xml is back but
// whose service did not follow (the filter reload did nothing) is not
// "restored": Close says what the box runs instead.
func TestRestoreChecksTheRunningState(t *testing.T) {
	old := fwapi.RestoreSettle
	fwapi.RestoreSettle = 2 * time.Second
	t.Cleanup(func() { fwapi.RestoreSettle = old })
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	c, err := configxml.LoadBytes(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("rules@lan", "5"); err != nil {
		t.Fatal(err)
	}
	s := startSession(t, fw, t.TempDir(), "alice@ws1")
	changes := []configxml.Change{{Knob: "rules@lan", From: "0", To: "5", Action: configxml.ActionFilterReload}}
	if err := s.ApplyChecked(t.Context(), c.Bytes(), changes); err != nil {
		t.Fatal(err)
	}
	// The restore's filter reload answers success and does nothing.
	fake.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "rc.filter_configure", Stdout: "\n"}}})
	err = s.Close(t.Context())
	if err == nil || !strings.Contains(err.Error(), fwapi.RuleRulesMismatch) {
		t.Fatalf("Close with a filter that kept the sweep's rules = %v, want the restore refused naming %s", err, fwapi.RuleRulesMismatch)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), orig) {
		t.Error("config.xml is not the original (the check is about the running state)")
	}
}

// TestRollbackStandsDownOverForeignEdit: the step's rollback follows the
// lease's rule: over a config.xml no fwab session left there it restores
// nothing, logs why, and Disarm says it did not restore.
func TestRollbackStandsDownOverForeignEdit(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.OPNsense)
	ctx := t.Context()
	orig := em.StoredConfig(t)
	if err := g.TakeLease(ctx, owner("ci@runner"), orig, time.Minute); err != nil {
		t.Fatal(err)
	}
	next := append(bytes.Clone(orig), "<!-- step -->\n"...)
	if err := g.ExpectConfigs(ctx, fwapi.SHA256Hex(orig), fwapi.SHA256Hex(next)); err != nil {
		t.Fatal(err)
	}
	if err := g.ArmRollback(ctx, orig, time.Second); err != nil {
		t.Fatal(err)
	}
	foreign := append(bytes.Clone(orig), "<!-- an admin's edit -->\n"...)
	em.PutFile(t, "/conf/config.xml", foreign)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
			break
		}
	}
	if !bytes.Equal(em.StoredConfig(t), foreign) {
		t.Error("the rollback wrote over someone else's edit")
	}
	var ran *fwapi.RollbackRanError
	if err := g.Disarm(ctx); !errors.As(err, &ran) || !ran.Failed || !strings.Contains(err.Error(), "someone else") {
		t.Errorf("Disarm after the rollback stood down = %v, want a failed RollbackRanError saying why", err)
	}
	if !strings.Contains(em.SystemLog(), "rollback: config.xml") {
		t.Errorf("the system log does not say why the rollback stood down:\n%s", em.SystemLog())
	}
	g.ReleaseLease(ctx)
}

// TestRollbackWaitsOutAWriteUnderWay: a write that held the config lock
// when the rollback fired is let finish before the rollback reads
// config.xml. OPNsense writes in place, so a read in the middle sees half
// a file, which is no config the session wrote: the rollback would stand
// down and leave the change on the box.
func TestRollbackWaitsOutAWriteUnderWay(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.OPNsense)
	ctx := t.Context()
	orig := em.StoredConfig(t)
	if err := g.TakeLease(ctx, owner("ci@runner"), orig, time.Minute); err != nil {
		t.Fatal(err)
	}
	next := append(bytes.Clone(orig), "<!-- step -->\n"...)
	if err := g.ExpectConfigs(ctx, fwapi.SHA256Hex(orig), fwapi.SHA256Hex(next)); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/tmp/next.xml", next)
	em.PutFile(t, "/tmp/half.xml", next[:len(next)/2])
	// The write: half of next in place, a pause, then all of it, as a
	// slow in-place write under the lock looks from outside.
	sh := dial(t, em.SSHConfig())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _, _, _ = sh.Run(context.Background(), "lockf -k /conf/config.xml /bin/sh -c 'cat /tmp/half.xml > /conf/config.xml; sleep 3; cat /tmp/next.xml > /conf/config.xml'", nil)
	}()
	for start := time.Now(); !bytes.Equal(em.StoredConfig(t), next[:len(next)/2]); time.Sleep(20 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the test's write never began")
		}
	}
	if err := g.ArmRollback(ctx, orig, time.Second); err != nil {
		t.Fatal(err)
	}
	<-done
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
			break
		}
	}
	if !bytes.Equal(em.StoredConfig(t), orig) {
		t.Errorf("the rollback did not restore the original after a write of the session's that was under way when it fired; the system log:\n%s", em.SystemLog())
	}
	var ran *fwapi.RollbackRanError
	if err := g.Disarm(ctx); !errors.As(err, &ran) || ran.Failed {
		t.Errorf("Disarm after the rollback = %v, want a RollbackRanError that restored", err)
	}
	g.ReleaseLease(ctx)
}

// TestRollbackRestoresAgainAfterASaveDuringItsReload: a product save
// that lands between the rollback's restore and its reload (a package
// sync the step's apply started, still at work) has the reload apply the
// step's config again (the file is put back after the package lines, the
// running rules are not); the rollback finds config.xml changed after its
// reload, puts the saved config back and reloads once more.
func TestRollbackRestoresAgainAfterASaveDuringItsReload(t *testing.T) {
	t.Parallel()
	forFlavors(t, func(t *testing.T, flavor configxml.Flavor) {
		em, g := leaseBox(t, flavor)
		ctx := t.Context()
		rules := func() int {
			out, _, code := em.Run(t, "pfctl -sr", "")
			if code != 0 {
				t.Fatalf("pfctl -sr: exit %d", code)
			}
			return strings.Count(out, "\n")
		}
		prev := em.StoredConfig(t)
		before := rules()
		c, err := configxml.LoadBytes(prev)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Set("rules@lan", "25"); err != nil {
			t.Fatal(err)
		}
		step := c.Bytes()
		em.PutFile(t, "/tmp/step.xml", step)
		em.PutFile(t, "/conf/config.xml", step)
		// The save lands as the reload starts, once.
		g.Reload = "[ -f /tmp/saved ] || { : > /tmp/saved; cp /tmp/step.xml /conf/config.xml; }; " + g.Reload
		if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
				break
			}
		}
		if _, _, code := em.Run(t, "test -f /tmp/saved", ""); code != 0 {
			t.Fatal("the test's save never ran")
		}
		if !bytes.Equal(em.StoredConfig(t), prev) {
			t.Error("the rollback did not end on the previous config.xml")
		}
		if got := rules(); got != before {
			t.Errorf("after the rollback the firewall runs %d rules, want the previous config's %d: the reload applied the save that landed during the restore", got, before)
		}
	})
}

// writeJournal writes a state folder's journal as a crashed session left it.
func writeJournal(t *testing.T, dir string, entries ...fwapi.JournalEntry) {
	t.Helper()
	var b bytes.Buffer
	for _, e := range entries {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, fwapi.JournalFile), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverUnstartedReleasesItsLease: fwab killed after it took its
// lease but before it recorded the session's start changed nothing; its
// recover releases the lease with the lock, so that the next session can
// start.
func TestRecoverUnstartedReleasesItsLease(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.OPNsense)
	ctx := t.Context()
	o := owner("ci@runner")
	if err := g.Lock(ctx, o); err != nil {
		t.Fatal(err)
	}
	if err := g.TakeLease(ctx, o, em.StoredConfig(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeJournal(t, dir, fwapi.JournalEntry{Time: time.Now(), Event: "locking", Target: "fw1", Owner: &o})
	if _, err := fwapi.Recover(ctx, em.Open(t), g, dir); err != nil {
		t.Fatalf("Recover of a session killed before its start: %v", err)
	}
	if len(em.Glob(fwapi.LeaseScript)) != 0 || len(em.Glob(fwapi.LockDir)) != 0 {
		t.Error("the recover of an unstarted session left its lease or its lock")
	}
}

// TestSecondSessionOnThisMachineNamesTheLiveOne: a second fwab on the same
// machine, while the first still runs, is told who holds the target, not
// to recover it.
func TestSecondSessionOnThisMachineNamesTheLiveOne(t *testing.T) {
	t.Parallel()
	_, fw := newPfSense(t, labtest.Options{})
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	dir := t.TempDir()
	o := owner("alice@ws1")
	o.PID = live.Process.Pid
	writeJournal(t, dir, fwapi.JournalEntry{Time: time.Now(), Event: "locking", Target: "fw1", Owner: &o}, fwapi.JournalEntry{Time: time.Now(), Event: "start", Target: "fw1"})
	_, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: owner("bob@ws1")})
	if err == nil || !strings.Contains(err.Error(), "another fwab on this machine") || !strings.Contains(err.Error(), fmt.Sprintf("pid=%d", o.PID)) || strings.Contains(err.Error(), "recover") {
		t.Fatalf("a second session beside a live one = %v, want it told who holds the target, not to recover", err)
	}
}

// TestReleaseLeaseKeepsTheEndWhenTheCleanupAnswerIsLost: a lease that
// ended while fwab was away is reported by ReleaseLease even when the
// answer to clearing its files is lost: the files are gone then, so the
// report is the only word fwab gets that the box restored itself.
func TestReleaseLeaseKeepsTheEndWhenTheCleanupAnswerIsLost(t *testing.T) {
	t.Parallel()
	em, g := leaseBox(t, configxml.OPNsense)
	orig := em.StoredConfig(t)
	lockAndLease(t, g, orig, 2*time.Second)
	waitLeaseEnded(t, g, 20*time.Second)
	cleanup := "rm -f " + fwapi.ShellQuote(fwapi.LeaseScript)
	lossy := &lostAnswer{Shell: g.Sh, lose: func(cmd string, _ []byte) bool { return strings.Contains(cmd, cleanup) }}
	g.Sh = lossy
	var lost *fwapi.LeaseLostError
	if err := g.ReleaseLease(t.Context()); !errors.As(err, &lost) {
		t.Errorf("ReleaseLease after the lease ended, the cleanup's answer lost = %v, want a LeaseLostError among the errors", err)
	}
	if !lossy.lost {
		t.Fatal("no answer was lost: the test did not test the case")
	}
}
