package fwapi_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// rulesConfig is orig with n generated rules on the LAN.
func rulesConfig(t *testing.T, orig []byte, n string) []byte {
	t.Helper()
	c, err := configxml.LoadBytes(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("rules@lan", n); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}

var rules5 = []configxml.Change{{Knob: "rules@lan", From: "0", To: "5", Action: configxml.ActionFilterReload}}

// steppedSession is a pfSense box with a session open in dir and one step
// applied (five generated rules on the LAN): orig is the box's config
// before the session, step the one it runs now.
func steppedSession(t *testing.T, dir string) (fake *labtest.Firewall, fw *fwapi.PfSense, s *fwapi.Session, orig, step []byte) {
	t.Helper()
	fake, fw = newPfSense(t, labtest.Options{})
	orig = fake.File(t, "/conf/config.xml")
	s = startSession(t, fw, dir, "alice@ws1")
	step = rulesConfig(t, orig, "5")
	if err := s.Apply(t.Context(), step, rules5, nil); err != nil {
		t.Fatal(err)
	}
	return fake, fw, s, orig, step
}

// emergencyEdit is an admin's edit of config: another hostname.
func emergencyEdit(config []byte) []byte {
	return bytes.Replace(config, []byte("<hostname>pfSense</hostname>"), []byte("<hostname>edge-emergency</hostname>"), 1)
}

// TestForeignEditStopsAndSurvives: an admin's edit made mid-session is
// never written over: the next step stops with what changed named, and the
// restore undoes only fwab's own change, keeping the edit.
func TestForeignEditStopsAndSurvives(t *testing.T) {
	t.Parallel()
	fake, _, s, orig, step := steppedSession(t, t.TempDir())
	edited := emergencyEdit(step)
	fake.PutFile(t, "/conf/config.xml", edited)
	err := s.Apply(t.Context(), rulesConfig(t, orig, "9"), []configxml.Change{{Knob: "rules@lan", From: "5", To: "9", Action: configxml.ActionFilterReload}}, nil)
	var foreign *fwapi.ForeignEditError
	if !errors.As(err, &foreign) || !strings.Contains(err.Error(), "system/hostname") || !foreign.StopsSweep() {
		t.Fatalf("a step after someone else's edit = %v, want a ForeignEditError naming system/hostname that stops the sweep", err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), edited) {
		t.Fatal("the refused step changed the box")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close after a foreign edit: %v", err)
	}
	want := emergencyEdit(orig)
	if got := fake.File(t, "/conf/config.xml"); !configxml.SameIgnoringRevision(got, want) {
		t.Errorf("after Close the box holds %d bytes; want the original with the admin's hostname (fwab's rules gone, the edit kept)", len(got))
	}
	if !strings.Contains(strings.Join(s.Merged, " "), "system/hostname") {
		t.Errorf("Merged = %q, want the admin's edit named", s.Merged)
	}
}

// TestForeignEditConflictWritesNothing: an edit of the very elements fwab
// changed is not merged: Close writes nothing, names the conflict, and
// releases the lock and the lease so that nothing restores over it later.
func TestForeignEditConflictWritesNothing(t *testing.T) {
	t.Parallel()
	fake, _, s, _, step := steppedSession(t, t.TempDir())
	// The admin edits one of fwab's generated rules.
	i := bytes.Index(step, []byte("fwab-generated"))
	if i < 0 {
		t.Fatal("no generated rule in the step's config")
	}
	edited := append(bytes.Clone(step[:i]), append([]byte("admin-kept "), step[i:]...)...)
	fake.PutFile(t, "/conf/config.xml", edited)
	err := s.Close(t.Context())
	var conflict *fwapi.ConflictError
	if !errors.As(err, &conflict) || len(conflict.Conflicts) == 0 || !strings.Contains(err.Error(), "settle those elements by hand") {
		t.Fatalf("Close over a conflicting edit = %v, want a ConflictError naming the elements and what to do", err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), edited) {
		t.Error("Close wrote over a conflicting edit")
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 || len(fake.Glob(fwapi.LeaseScript)) != 0 {
		t.Error("Close left the lock or the lease after a conflict (the lease would restore over the edit)")
	}
}

// TestCloseRemovesTheOriginalCopy: the local copy of the original config
// holds the box's secrets; once the session restored and verified it, it
// goes, unless KeepOriginal.
func TestCloseRemovesTheOriginalCopy(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		fake, fw := newPfSense(t, labtest.Options{})
		dir := t.TempDir()
		orig := fake.File(t, "/conf/config.xml")
		s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: owner("alice@ws1"), KeepOriginal: keep})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, fwapi.OriginalFile))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("the session's copy of the original: %v, %v; want mode 0600", fi, err)
		}
		if err := s.Apply(t.Context(), rulesConfig(t, orig, "5"), rules5, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		_, err = os.Stat(filepath.Join(dir, fwapi.OriginalFile))
		if kept := err == nil; kept != keep {
			t.Errorf("KeepOriginal %v: the copy is there after Close: %v", keep, kept)
		}
	}
}

// TestRecoverLeavesAnEditTheLeaseStoodDownOver: fwab gone, someone edits
// the box, the lease stands down; recover from the session's own machine
// then writes nothing either, ends the session and says why.
func TestRecoverLeavesAnEditTheLeaseStoodDownOver(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: owner("alice@ws1"), Lease: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(t.Context(), rulesConfig(t, orig, "5"), rules5, nil); err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	edit := emergencyEdit(orig)
	fake.PutFile(t, "/conf/config.xml", edit)
	for deadline := time.Now().Add(15 * time.Second); len(fake.Glob(fwapi.LeaseFired)) == 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the lease never ended")
		}
	}
	rep, err := fwapi.Recover(t.Context(), fw, fw, dir)
	if err == nil || !strings.Contains(err.Error(), "someone else's edit") || !strings.HasPrefix(rep.LeaseEnded, "stood-down") {
		t.Fatalf("Recover after the lease stood down = %+v, %v; want it to write nothing, say why, and report the stand-down", rep, err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), edit) {
		t.Error("Recover wrote over the edit the lease had stood down over")
	}
	if _, err := fwapi.Recover(t.Context(), fw, fw, dir); err == nil || !strings.Contains(err.Error(), "nothing to recover") {
		t.Errorf("a second Recover = %v, want nothing to recover (the session ended)", err)
	}
}

// TestRecoverFromBoxKeepsItsCopyWhenTheRestoreFails: a recover from
// another machine whose restore fails leaves the lease's original on the
// box, so that it can be tried again.
func TestRecoverFromBoxKeepsItsCopyWhenTheRestoreFails(t *testing.T) {
	t.Parallel()
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, t.TempDir(), "alice@ws1")
	if err := s.Apply(t.Context(), rulesConfig(t, orig, "5"), rules5, nil); err != nil {
		t.Fatal(err)
	}
	s.Abandon()
	fake.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "rc.filter_configure", Exit: 1, Stderr: "filter reload failed"}}})
	other := t.TempDir()
	if _, err := fwapi.RecoverWith(t.Context(), fw, fw, other, fwapi.RecoverOptions{Force: true}); err == nil {
		t.Fatal("a recover whose filter reload fails succeeded")
	}
	fake.SetFault(emu.Fault{})
	rep, err := fwapi.RecoverWith(t.Context(), fw, fw, other, fwapi.RecoverOptions{Force: true})
	if err != nil || !rep.Restored {
		t.Fatalf("the second recover from another machine = %+v, %v; want the original restored from the copy still on the box", rep, err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), orig) {
		t.Error("the box does not hold the original")
	}
}

// TestMergedRestoreMovesTheLease: once a restore merged someone else's
// edit, the lease holds the merged config, so that a lease that ends later
// restores that, never the bare original over the edit.
func TestMergedRestoreMovesTheLease(t *testing.T) {
	t.Parallel()
	fake, _, s, _, step := steppedSession(t, t.TempDir())
	fake.PutFile(t, "/conf/config.xml", emergencyEdit(step))
	if err := s.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	if held := fake.File(t, fwapi.LeaseOriginal); !bytes.Contains(held, []byte("edge-emergency")) {
		t.Error("after a merged restore the lease still holds the bare original")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverAfterAMergedRestoreWritesNothing: a session that merged
// someone else's edit into its restore and then died is not recovered to
// the bare original: recover writes nothing and says why.
func TestRecoverAfterAMergedRestoreWritesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fake, fw, s, _, step := steppedSession(t, dir)
	fake.PutFile(t, "/conf/config.xml", emergencyEdit(step))
	if err := s.Restore(t.Context()); err != nil {
		t.Fatal(err)
	}
	s.Abandon() // dies before it ends the session
	merged := fake.File(t, "/conf/config.xml")
	if _, err := fwapi.RecoverWith(t.Context(), fw, fw, dir, fwapi.RecoverOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "kept someone else's edit") {
		t.Fatalf("Recover after a merged restore = %v, want it to write nothing and say why", err)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), merged) {
		t.Error("Recover wrote the bare original over the merged config")
	}
}
