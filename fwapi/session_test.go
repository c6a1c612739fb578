package fwapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

func owner(name string) fwapi.LockOwner {
	return fwapi.LockOwner{Owner: name, PID: 1234, Time: time.Now(), Token: name + "-token"}
}

func startSession(t *testing.T, fw *fwapi.PfSense, dir string, who string) *fwapi.Session {
	t.Helper()
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: dir, Owner: owner(who),
		RollbackAfter: time.Second, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	return s
}

func events(t *testing.T, dir string) []string {
	t.Helper()
	j, err := fwapi.ReadJournal(dir)
	if err != nil {
		t.Fatalf("ReadJournal: %v", err)
	}
	var ev []string
	for _, e := range j {
		ev = append(ev, e.Event)
	}
	return ev
}

var rulesChange = []configxml.Change{{Knob: "rules@lan", From: "0", To: "1", Action: configxml.ActionFilterReload}}

func changedConfig(orig []byte) []byte {
	return bytes.Replace(orig, []byte("<hostname>pfSense</hostname>"), []byte("<hostname>pfSense-changed</hostname>"), 1)
}

func TestSessionApplyConfirmAndRestore(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	if s.OriginalSHA256() != fwapi.SHA256Hex(orig) {
		t.Errorf("OriginalSHA256 = %s, want %s", s.OriginalSHA256(), fwapi.SHA256Hex(orig))
	}
	next := changedConfig(orig)
	verified := false
	err := s.Apply(t.Context(), next, rulesChange, func(ctx context.Context, st fwapi.RuntimeState) error {
		verified = true
		return nil
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if !verified {
		t.Errorf("the verifier was not called")
	}
	if fake.Running(fwapi.RollbackPIDFile) {
		t.Errorf("the rollback is still armed after a confirmed apply")
	}
	time.Sleep(1500 * time.Millisecond) // past the rollback delay: it must not fire
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, next) {
		t.Fatalf("config after a confirmed apply is not the new one")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("Close did not restore the original config")
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("Close left the lock")
	}
	want := []string{"locking", "start", "leased", "armed", "written", "confirmed", "restored", "end"}
	if diff := cmp.Diff(want, events(t, dir)); diff != "" {
		t.Errorf("journal mismatch (-want +got):\n%s", diff)
	}
	acts := fake.Actions()
	if n := len(acts); n < 2 || acts[n-1] != configxml.ActionFilterReload {
		t.Errorf("restore actions = %v, want a filter reload at the end", acts)
	}
}

func TestSessionSecondWriterRefused(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	s := startSession(t, fw, t.TempDir(), "alice@ws1")
	defer s.Close(t.Context())
	sh2, err := fwapi.DialSSH(t.Context(), fake.SSHConfig())
	if err != nil {
		t.Fatal(err)
	}
	fw2 := fwapi.NewPfSense(sh2, fwapi.PfSenseOptions{})
	defer fw2.Close()
	_, err = fwapi.StartSession(t.Context(), fw2, fw2, fwapi.SessionOptions{Target: "fw1", Dir: t.TempDir(), Owner: owner("bob@ws2")})
	var locked *fwapi.LockedError
	if !errors.As(err, &locked) || !strings.Contains(err.Error(), "owner=alice@ws1 pid=1234") {
		t.Fatalf("second StartSession = %v, want a *LockedError naming alice@ws1 pid=1234", err)
	}
}

func TestSessionUnreachableDuringApplyRollsBack(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	// The filter reload cuts fwab off (a rule that locks out the
	// management address, say) for 2.5 seconds.
	fake.SetFault(emu.Fault{LinkDownOn: "/etc/rc.filter_configure_sync", LinkDownFor: 2500 * time.Millisecond})
	err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil)
	var rb *fwapi.RolledBackError
	if !errors.As(err, &rb) {
		t.Fatalf("Apply with the firewall cut off = %v, want *RolledBackError", err)
	}
	if !strings.Contains(err.Error(), "rollback fired") {
		t.Errorf("error %q does not say the rollback fired", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("config after the rollback is not the previous one")
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if ev := events(t, dir); !strings.Contains(strings.Join(ev, " "), "rolled-back") {
		t.Errorf("journal %v has no rolled-back entry", ev)
	}
}

func TestSessionVerifyFailureRestoresPrevious(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, t.TempDir(), "alice@ws1")
	defer s.Close(t.Context())
	err := s.Apply(t.Context(), changedConfig(orig), rulesChange, func(ctx context.Context, st fwapi.RuntimeState) error {
		return errors.New("want 1 generated rule, pf shows 0")
	})
	if err == nil || !strings.Contains(err.Error(), "want 1 generated rule") || !strings.Contains(err.Error(), "previous config restored") {
		t.Fatalf("Apply with a failing verifier = %v, want the reason and a restore", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("config after a failed verify is not the previous one")
	}
	if fake.Running(fwapi.RollbackPIDFile) {
		t.Errorf("rollback still armed after fwab restored the config itself")
	}
}

func TestSessionCloseAfterInterrupt(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, t.TempDir(), "alice@ws1")
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // Ctrl-C
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close with a cancelled context: %v", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("Close after an interrupt did not restore the original config")
	}
}

func TestRecoverAfterCrash(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	// fwab dies here: no Close. A new run refuses to start...
	if _, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: owner("alice@ws1")}); err == nil || !strings.Contains(err.Error(), "fwab fw recover --target fw1") {
		t.Fatalf("StartSession over an unfinished journal = %v, want a pointer to recover", err)
	}
	// ...and recover restores.
	rep, err := fwapi.Recover(t.Context(), fw, fw, dir)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if !rep.Restored || rep.SHA256 != fwapi.SHA256Hex(orig) {
		t.Errorf("Recover = %+v, want a restore of %s", rep, fwapi.SHA256Hex(orig))
	}
	if diff := cmp.Diff([]configxml.Action{configxml.ActionFilterReload}, rep.Actions); diff != "" {
		t.Errorf("Recover actions mismatch (-want +got):\n%s", diff)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("config after Recover is not the original")
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("Recover left the lock")
	}
	if _, err := fwapi.Recover(t.Context(), fw, fw, dir); err == nil || !strings.Contains(err.Error(), "nothing to recover") {
		t.Errorf("second Recover = %v, want nothing to recover", err)
	}
	s2 := startSession(t, fw, dir, "alice@ws1")
	if err := s2.Close(t.Context()); err != nil {
		t.Errorf("a session after recover: %v", err)
	}
}

func TestRecoverRefusesTamperedBackup(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	fake.ResetActions()
	if err := writeFile(dir+"/"+fwapi.OriginalFile, []byte("<pfsense/>")); err != nil {
		t.Fatal(err)
	}
	if _, err := fwapi.Recover(t.Context(), fw, fw, dir); err == nil || !strings.Contains(err.Error(), "refusing to write it") {
		t.Fatalf("Recover with a changed original.xml = %v, want a refusal", err)
	}
	if len(fake.Actions()) != 0 {
		t.Errorf("a refused Recover ran %v", fake.Actions())
	}
}

func writeFile(name string, data []byte) error { return os.WriteFile(name, data, 0o600) }

func TestSessionBriefDropDuringApplyFwabRestores(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: dir, Owner: owner("alice@ws1"), RollbackAfter: 60 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(t.Context())
	// The link drops while the filter reloads, and comes back at once.
	fake.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "/etc/rc.filter_configure_sync", Drop: true, Times: 1}}})
	start := time.Now()
	err = s.Apply(t.Context(), changedConfig(orig), rulesChange, nil)
	if err == nil || !strings.Contains(err.Error(), "fwab restored the previous config (sha256 verified)") || !errors.Is(err, fwapi.ErrConnectionLost) {
		t.Fatalf("Apply with a brief drop = %v, want fwab's own restore reported", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Apply took %v: it waited for the 60s rollback instead of restoring", d)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("config after the restore is not the previous one")
	}
	if fake.Running(fwapi.RollbackPIDFile) {
		t.Errorf("the rollback is still armed after fwab restored the config")
	}
}

func TestStartSessionRefusesTornJournal(t *testing.T) {
	_, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	if err := writeFile(dir+"/"+fwapi.JournalFile, []byte(`{"time":"2026-01-01T00:00:00Z","event":"start","sha256":"ab"}`+"\n"+`{"time":"2026-01-01T00:00:01Z","ev`)); err != nil {
		t.Fatal(err)
	}
	_, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: owner("a")})
	if err == nil || !strings.Contains(err.Error(), "fwab fw recover --target fw1") {
		t.Fatalf("StartSession over a torn journal = %v, want a pointer to recover", err)
	}
	if err := writeFile(dir+"/"+fwapi.JournalFile, []byte(`{"ev`)); err != nil {
		t.Fatal(err)
	}
	if _, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: owner("a")}); err == nil || !strings.Contains(err.Error(), "torn journal") {
		t.Fatalf("StartSession over an unreadable journal = %v, want a refusal", err)
	}
}

func TestOPNsenseShellGuard(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	prev := em.StoredConfig(t)
	sh := dial(t, em.SSHConfig())
	g := fwapi.OPNsenseShellGuard(sh)
	ctx := t.Context()
	if err := g.Lock(ctx, owner("ops@noc")); err != nil {
		t.Fatal(err)
	}
	if err := g.Lock(ctx, owner("other@x")); err == nil || !strings.Contains(err.Error(), "ops@noc") {
		t.Errorf("second Lock = %v, want the holder named", err)
	}
	if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", append(bytes.Clone(prev), "<!-- changed -->\n"...))
	em.ResetActions()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, prev) {
		t.Errorf("OPNsense rollback left %q", got)
	}
	// rc.reload_all, then Suricata rendered and started again (an IDS
	// stop records nothing).
	if diff := cmp.Diff([]configxml.Action{emu.ActionReloadAll, configxml.ActionIDSRestart}, em.Actions()); diff != "" {
		t.Errorf("rollback service actions mismatch (-want +got):\n%s", diff)
	}
}

// TestOPNsenseRollbackRerendersIDS: OPNsense's Suricata runs from its
// rendered templates, which rc.reload_all leaves as the failed change
// rendered them, so the rollback renders them from the restored config and
// restarts Suricata from them: a change that turned IDS on is undone.
func TestOPNsenseRollbackRerendersIDS(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	prev := em.StoredConfig(t) // IDS off
	c, err := configxml.LoadBytes(prev)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAll([]string{"ids@lan=ids", "ids@wan=ids"}); err != nil {
		t.Fatal(err)
	}
	g := fwapi.OPNsenseShellGuard(dial(t, em.SSHConfig()))
	ctx := t.Context()
	if err := g.Lock(ctx, owner("ops@noc")); err != nil {
		t.Fatal(err)
	}
	if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", c.Bytes())
	status := func() string {
		out, _, _ := em.Run(t, "configctl ids status", "")
		return strings.TrimSpace(out)
	}
	em.Run(t, "configctl template reload OPNsense/IDS", "")
	em.Run(t, "configctl ids restart", "")
	if got := status(); !strings.HasPrefix(got, "suricata is running") {
		t.Fatalf("the change: IDS status %q, want running", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, prev) {
		t.Fatal("the rollback did not restore config.xml")
	}
	if got := status(); got != "suricata is not running." {
		t.Errorf("after the rollback to a config with IDS off: status %q, want not running", got)
	}
}

func TestSessionApplyChecked(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{SSHVia: emu.NoManagement})
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, t.TempDir(), "alice@ws1")
	c, err := configxml.LoadBytes(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("offload.checksum", "off"); err != nil {
		t.Fatal(err)
	}
	ch := []configxml.Change{{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces}}
	if err := s.ApplyChecked(t.Context(), c.Bytes(), ch); err != nil {
		t.Fatalf("ApplyChecked(checksum off): %v", err)
	}
	// A NIC that ignores the request: the runtime keeps TXCSUM off, so
	// the check must fail and the previous config come back.
	fake.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "enable_hardware_offloading", Skip: true}}})
	if err := c.Set("offload.checksum", "on"); err != nil {
		t.Fatal(err)
	}
	out, _, _ := fake.Run(t, "ifconfig -a", "")
	ifs, err := fwapi.ParseIfconfig(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ifs {
		if fwapi.IsNIC(s.Name) && s.Has("TXCSUM") {
			t.Fatalf("the first apply left TXCSUM on %s", s.Name)
		}
	}
	prev := fake.File(t, "/conf/config.xml")
	ch[0].From, ch[0].To = "off", "on"
	err = s.ApplyChecked(t.Context(), c.Bytes(), ch)
	if err == nil || !strings.Contains(err.Error(), "FWAB101") {
		t.Fatalf("ApplyChecked with a NIC that ignores the change = %v, want FWAB101", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, prev) {
		t.Errorf("config not restored after a failed check")
	}
	// The NIC obeys again: the session's restore puts checksum offload
	// back on, and the running state shows it (a NIC still ignoring it
	// would fail the restore's check, FWAB101).
	fake.SetFault(emu.Fault{})
	if err := s.Close(t.Context()); err != nil {
		t.Errorf("Close once the NIC obeys again: %v", err)
	}
}

// TestRecoverCrashWhileLocking: fwab killed right after it took the lock,
// before it recorded the session's start. Recover releases that lock (and
// only a lock that is still its own), and a new session can start.
func TestRecoverCrashWhileLocking(t *testing.T) {
	tests := []struct {
		name     string
		holder   *fwapi.LockOwner // who holds the lock on the firewall
		wantLock bool             // a lock is left after Recover
	}{
		{name: "own lock", holder: ptr(owner("alice@ws1")), wantLock: false},
		{name: "no lock", holder: nil, wantLock: false},
		{name: "another fwab's lock", holder: ptr(owner("bob@ws2")), wantLock: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake, fw := newPfSense(t, labtest.Options{})
			dir := t.TempDir()
			me := owner("alice@ws1")
			line, _ := json.Marshal(fwapi.JournalEntry{Time: time.Now(), Event: "locking", Target: "fw1", Owner: &me})
			if err := writeFile(dir+"/"+fwapi.JournalFile, append(line, '\n')); err != nil {
				t.Fatal(err)
			}
			if tt.holder != nil {
				if err := fw.Lock(t.Context(), *tt.holder); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: me}); err == nil || !strings.Contains(err.Error(), "fwab fw recover") {
				t.Fatalf("StartSession over a crash while locking = %v, want a pointer to recover", err)
			}
			rep, err := fwapi.Recover(t.Context(), fw, fw, dir)
			if err != nil {
				t.Fatalf("Recover: %v", err)
			}
			if !rep.NotStarted || rep.Restored {
				t.Errorf("Recover = %+v, want NotStarted and no restore", rep)
			}
			if got := len(fake.Glob(fwapi.LockDir)) != 0; got != tt.wantLock {
				t.Errorf("lock left after Recover: %v, want %v", got, tt.wantLock)
			}
			if tt.wantLock {
				return
			}
			s := startSession(t, fw, dir, "alice@ws1")
			if err := s.Close(t.Context()); err != nil {
				t.Errorf("a session after recover: %v", err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestSessionCloseAfterRebootTookTheLock: a reboot of the firewall clears
// /var/run and with it the lock; Close still restores and ends cleanly.
func TestSessionCloseAfterRebootTookTheLock(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(fake.Path(fwapi.LockDir)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close after the lock went with a reboot: %v", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("Close did not restore the original config")
	}
	// The restore is a change too: the lock is taken again first.
	want := []string{"locking", "start", "leased", "armed", "written", "confirmed", "relocked", "restored", "end"}
	if diff := cmp.Diff(want, events(t, dir)); diff != "" {
		t.Errorf("journal mismatch (-want +got):\n%s", diff)
	}
	// Another fwab's lock is still left alone.
	s2 := startSession(t, fw, dir, "alice@ws1")
	if err := os.RemoveAll(fake.Path(fwapi.LockDir)); err != nil {
		t.Fatal(err)
	}
	if err := fw.Lock(t.Context(), owner("bob@ws2")); err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(t.Context()); err == nil || !strings.Contains(err.Error(), "bob@ws2") {
		t.Errorf("Close with another fwab's lock = %v, want it named and left", err)
	}
	if len(fake.Glob(fwapi.LockDir)) == 0 {
		t.Errorf("Close removed another fwab's lock")
	}
}

// TestRecoverAfterCrashDuringRestore: fwab died after the restore wrote the
// original config.xml back but before the service actions ran (found by
// make faults). The hash matches, yet the running firewall still has the
// change: recover must run the actions all the same.
func TestRecoverAfterCrashDuringRestore(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	if err := s.Apply(t.Context(), changedConfig(orig), rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	// The restore's write lands; fwab dies before the filter reload.
	fake.PutFile(t, "/conf/config.xml", orig)
	fake.ResetActions()
	rep, err := fwapi.Recover(t.Context(), fw, fw, dir)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if !slices.Contains(fake.Actions(), configxml.ActionFilterReload) {
		t.Errorf("Recover ran %v on a firewall whose config was written back but not applied; want the filter reload", fake.Actions())
	}
	if !rep.Restored {
		t.Errorf("Recover = %+v, want Restored (the running state was put back)", rep)
	}
}

// TestOPNsenseIDSReconfigureSavesItsCron: on a box that never had IDS set
// up, OPNsense's first ids/service/reconfigure creates the update cron and
// saves config.xml. The session adopts exactly that change for its hash
// checks and still restores the original at the end.
func TestOPNsenseIDSReconfigureSavesItsCron(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	orig := em.StoredConfig(t)
	if bytes.Contains(orig, []byte("<UpdateCron>")) && !bytes.Contains(orig, []byte("<UpdateCron/>")) && !bytes.Contains(orig, []byte("<UpdateCron></UpdateCron>")) {
		t.Fatalf("the factory config already has an UpdateCron")
	}
	fw := em.Open(t)
	g, ok := fw.(fwapi.Guard)
	if !ok {
		t.Fatalf("%T is no Guard", fw)
	}
	s, err := fwapi.StartSession(t.Context(), fw, g, fwapi.SessionOptions{
		Target: "opn", Dir: t.TempDir(), Owner: owner("alice@ws1"),
		RollbackAfter: 30 * time.Second, ReconnectWait: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := configxml.LoadBytes(orig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("ids@lan", "ids"); err != nil {
		t.Fatal(err)
	}
	ch := []configxml.Change{{Knob: "ids@lan", From: "off", To: "ids", Action: configxml.ActionIDSRestart}}
	if err := s.Apply(t.Context(), c.Bytes(), ch, nil); err != nil {
		t.Fatalf("Apply(ids@lan=ids) on a box without an IDS update cron: %v", err)
	}
	now := string(em.StoredConfig(t))
	if !strings.Contains(now, "<command>ids update</command>") || !strings.Contains(now, "<origin>IDS</origin>") {
		t.Errorf("the emulated reconfigure did not create the IDS update cron:\n%s", now)
	}
	// Any other change made by the reconfigure is refused.
	if err := s.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, orig) {
		t.Errorf("config.xml after Close differs from the original (sha256 %s, want %s)", fwapi.SHA256Hex(got), fwapi.SHA256Hex(orig))
	}
}

func rebootFirewall(t *testing.T, fake *labtest.Firewall) {
	t.Helper()
	boots := fake.Boots()
	fake.Reboot(t.Context())
	if fake.Boots() != boots+1 {
		t.Fatalf("the emulator did not reboot (boots %d, want %d)", fake.Boots(), boots+1)
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Fatalf("the reboot left %s in place", fwapi.LockDir)
	}
}

func TestSessionRelocksAfterReboot(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	defer s.Close(t.Context())
	first := changedConfig(orig)
	if err := s.Apply(t.Context(), first, rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	rebootFirewall(t, fake)
	second := bytes.Replace(first, []byte("pfSense-changed"), []byte("pfSense-changed-again"), 1)
	if err := s.Apply(t.Context(), second, rulesChange, nil); err != nil {
		t.Fatalf("Apply after the reboot: %v", err)
	}
	held, err := fake.ReadFile(fwapi.LockDir + "/owner")
	if err != nil || !strings.Contains(string(held), "token=alice@ws1-token\n") {
		t.Fatalf("after the reboot the next change did not take the lock again: owner file %q (%v)", held, err)
	}
	if ev := events(t, dir); !slices.Contains(ev, "relocked") {
		t.Errorf("journal %v has no relocked entry", ev)
	}
}

func TestSessionRefusesAfterRebootWhenAnotherWriterLocked(t *testing.T) {
	fake, fw := newPfSense(t, labtest.Options{})
	dir := t.TempDir()
	orig := fake.File(t, "/conf/config.xml")
	s := startSession(t, fw, dir, "alice@ws1")
	first := changedConfig(orig)
	if err := s.Apply(t.Context(), first, rulesChange, nil); err != nil {
		t.Fatal(err)
	}
	rebootFirewall(t, fake)
	if err := fw.Lock(t.Context(), owner("bob@ws2")); err != nil {
		t.Fatalf("bob's Lock after the reboot: %v", err)
	}
	fake.ResetCommands()
	second := bytes.Replace(first, []byte("pfSense-changed"), []byte("pfSense-changed-again"), 1)
	err := s.Apply(t.Context(), second, rulesChange, nil)
	var locked *fwapi.LockedError
	if !errors.As(err, &locked) || !strings.Contains(err.Error(), "bob@ws2") {
		t.Fatalf("Apply with bob's lock after the reboot = %v, want a *LockedError naming bob@ws2", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, first) {
		t.Errorf("Apply wrote config.xml although another writer holds the lock")
	}
	if fake.Running(fwapi.RollbackPIDFile) {
		t.Errorf("Apply armed a rollback although another writer holds the lock")
	}
	held, _ := fake.ReadFile(fwapi.LockDir + "/owner")
	if !strings.Contains(string(held), "token=bob@ws2-token\n") {
		t.Errorf("bob's lock was touched: owner file %q", held)
	}
	// Close does not restore over bob's session either: it says so and
	// keeps the journal open for recover.
	if err := s.Close(t.Context()); err == nil || !strings.Contains(err.Error(), "bob@ws2") {
		t.Errorf("Close with bob's lock = %v, want it refused naming bob@ws2", err)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, first) {
		t.Errorf("Close wrote config.xml although another writer holds the lock")
	}
}

// TestRelockAfterOPNsenseReboot: OPNsense's boot deletes the files below
// /var/run but keeps the directories, so the lock directory survives a
// reboot, empty. The session that held it takes it again; a lock
// directory made after the boot without an owner file yet is another
// writer between its mkdir and its owner file, and stays refused.
func TestRelockAfterOPNsenseReboot(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	ctx := t.Context()
	g := fwapi.ShellGuard{Sh: dial(t, em.SSHConfig())}
	if err := g.Lock(ctx, owner("alice@ws1")); err != nil {
		t.Fatal(err)
	}
	em.Reboot(ctx)
	if len(em.Glob(fwapi.LockDir)) != 1 || len(em.Glob(fwapi.LockDir+"/*")) != 0 {
		t.Fatalf("after the reboot: %v, %v; want the lock directory kept, empty", em.Glob(fwapi.LockDir), em.Glob(fwapi.LockDir+"/*"))
	}
	g = fwapi.ShellGuard{Sh: dial(t, em.SSHConfig())}
	retaken, err := g.Relock(ctx, owner("alice@ws1"))
	if err != nil || !retaken {
		t.Fatalf("Relock after the reboot = %v, %v; want the lock taken again", retaken, err)
	}
	held, err := em.ReadFile(fwapi.LockDir + "/owner")
	if err != nil || !strings.Contains(string(held), "token=alice@ws1-token\n") {
		t.Fatalf("owner file after Relock: %q (%v)", held, err)
	}
	if _, _, code := em.Run(t, "rm -r "+fwapi.LockDir+" && mkdir "+fwapi.LockDir, ""); code != 0 {
		t.Fatal("could not make a fresh lock directory")
	}
	var locked *fwapi.LockedError
	if _, err := g.Relock(ctx, owner("alice@ws1")); !errors.As(err, &locked) {
		t.Errorf("Relock with a lock directory made after the boot = %v, want a *LockedError", err)
	}
}

// TestPfSensePackageSavesAreAdopted: pfBlockerNG's update and Suricata's
// sync save config.xml themselves (their aliases, rules and cron jobs,
// under a new revision); the session adopts exactly that, verifies, and
// restores the original at the end.
func TestPfSensePackageSavesAreAdopted(t *testing.T) {
	for _, knob := range []struct {
		name, value string
		action      configxml.Action
		owned       string // what the package adds to config.xml
	}{
		{"blocklist", "on", configxml.ActionBlocklistUpdate, "<name>pfB_PRI1_v4</name>"},
		{"ids@lan", "ids", configxml.ActionIDSRestart, "suricata_check_cron_misc.inc"},
	} {
		t.Run(knob.name, func(t *testing.T) {
			fake, fw := newPfSense(t, labtest.Options{})
			orig := fake.File(t, "/conf/config.xml")
			s := startSession(t, fw, t.TempDir(), "alice@ws1")
			c, err := configxml.LoadBytes(orig)
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Set(knob.name, knob.value); err != nil {
				t.Fatal(err)
			}
			ch := []configxml.Change{{Knob: knob.name, To: knob.value, Action: knob.action}}
			if err := s.Apply(t.Context(), c.Bytes(), ch, nil); err != nil {
				t.Fatalf("Apply(%s=%s): %v", knob.name, knob.value, err)
			}
			if now := fake.File(t, "/conf/config.xml"); !bytes.Contains(now, []byte(knob.owned)) {
				t.Errorf("the emulated package did not save %s into config.xml", knob.owned)
			}
			if _, ok := fw.AdoptedConfig(); !ok {
				t.Errorf("AdoptedConfig() not set after the package saved config.xml")
			}
			if err := s.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
				t.Errorf("config.xml after Close differs from the original")
			}
		})
	}
}
