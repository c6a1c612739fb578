package fwapi_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

func waitConfig(t *testing.T, em *labtest.Firewall, want []byte, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if bytes.Equal(em.StoredConfig(t), want) {
			return
		}
	}
	t.Fatalf("the rollback did not restore the previous config within %v", within)
}

func waitFired(t *testing.T, fw *fwapi.PfSense) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if fired, _, err := fw.RollbackFired(t.Context()); err == nil && fired {
			return
		}
	}
	t.Fatal("RollbackFired never reported the rollback")
}

// TestPfSenseRollbackRestoresServices: rc.reload_all does not restart
// Suricata or reload pfBlockerNG, so the rollback does: Suricata runs as the
// restored config says, and Disarm afterwards says the rollback ran.
func TestPfSenseRollbackRestoresServices(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	prev := em.StoredConfig(t)
	// Time for the change's write to land first: a write once the timer
	// has run out is refused.
	if err := fw.ArmRollback(t.Context(), prev, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	em.ResetActions()
	setIDS(t, em, fw, configxml.IDSInlineIPS)
	if got := idsModes(t, fw)["igb1"]; got != "ips-inline" {
		t.Fatalf("the change did not start inline IPS: %q", got)
	}
	waitConfig(t, em, prev, 10*time.Second)
	waitFired(t, fw)
	if got := idsModes(t, fw); len(got) != 0 {
		t.Errorf("after the rollback Suricata still runs %v, want nothing (the restored config has no IDS)", got)
	}
	var blocklist bool
	for _, a := range em.Actions() {
		blocklist = blocklist || a == configxml.ActionBlocklistUpdate
	}
	if !blocklist {
		t.Errorf("the rollback did not reload pfBlockerNG: actions %v", em.Actions())
	}
	var ran *fwapi.RollbackRanError
	if err := fw.Disarm(t.Context()); !errors.As(err, &ran) {
		t.Errorf("Disarm after the rollback ran = %v, want a RollbackRanError", err)
	}
	if err := fw.Disarm(t.Context()); err != nil {
		t.Errorf("a second Disarm = %v, want nil", err)
	}
	if fired, _, _ := fw.RollbackFired(t.Context()); !fired {
		t.Error("RollbackFired forgot the rollback after Disarm reported it")
	}
}

// TestPfSenseRollbackSurvivesReboot: a reboot empties /var/run and ends the
// timer; the armed rollback still runs after the boot.
func TestPfSenseRollbackSurvivesReboot(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	prev := em.StoredConfig(t)
	// Written first: a write once the timer has run out is refused.
	changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)
	if err := fw.WriteConfig(t.Context(), changed, "test"); err != nil {
		t.Fatal(err)
	}
	if err := fw.ArmRollback(t.Context(), prev, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	em.Reboot(t.Context())
	waitConfig(t, em, prev, 15*time.Second)
}

// TestRollbackWaitsForTheConfigLock: the rollback puts the saved config
// back while it holds the product's config lock (pfSense lock('config'),
// OPNsense's flock on config.xml), never over a save under way.
func TestRollbackWaitsForTheConfigLock(t *testing.T) {
	for _, tc := range []struct {
		product configxml.Flavor
		lock    string
	}{
		{configxml.PfSense, "/tmp/config.lock"},
		{configxml.OPNsense, "/conf/config.xml"},
	} {
		t.Run(string(tc.product), func(t *testing.T) {
			em := labtest.Start(t, labtest.Options{Product: tc.product})
			fw := em.Open(t)
			g, ok := fw.(fwapi.Guard)
			if !ok {
				t.Fatalf("%T is no fwapi.Guard", fw)
			}
			prev := em.StoredConfig(t)
			next := bytes.Replace(prev, []byte("</hostname>"), []byte("</hostname><!-- changed -->"), 1)
			if err := fw.WriteConfig(t.Context(), next, "test"); err != nil {
				t.Fatal(err)
			}
			// A save holds the lock from before the rollback fires, for
			// longer than the rollback takes to fire.
			sh, err := fwapi.DialSSH(t.Context(), em.SSHConfig())
			if err != nil {
				t.Fatal(err)
			}
			held := make(chan struct{})
			go func() {
				defer close(held)
				_, _, _, _ = sh.Run(context.Background(), "lockf -k "+tc.lock+" sleep 6", nil)
			}()
			for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
				if _, _, code := em.Run(t, "lockf -k -s -t 0 "+tc.lock+" true", ""); code == 75 {
					break
				}
				if time.Since(start) > 5*time.Second {
					t.Fatal("the test's lockf never held the lock")
				}
			}
			if err := g.ArmRollback(t.Context(), prev, time.Second); err != nil {
				t.Fatal(err)
			}
			// The rollback claims the restore when it fires, then waits for
			// the lock.
			for start := time.Now(); len(em.Glob(fwapi.RollbackClaim)) == 0; time.Sleep(50 * time.Millisecond) {
				if time.Since(start) > 10*time.Second {
					t.Fatal("the rollback never fired")
				}
			}
			time.Sleep(500 * time.Millisecond)
			select {
			case <-held:
				t.Fatal("the test's save let the lock go before the check: the machine is too slow for this test")
			default:
			}
			if !bytes.Equal(em.StoredConfig(t), next) {
				t.Errorf("the rollback replaced config.xml while a save held %s", tc.lock)
			}
			<-held
			sh.Close()
			waitConfig(t, em, prev, 10*time.Second)
		})
	}
}
