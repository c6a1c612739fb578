package fwapi_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// pfSuricataRC is the Suricata package's rc script on pfSense, which its
// sync writes only for a config with an enabled Suricata interface.
const pfSuricataRC = "/usr/local/etc/rc.d/suricata.sh"

// noSuricataBox starts an emulated pfSense and checks that its config has
// no Suricata interface and the box no Suricata rc script: the box the
// tests below need, with the package installed but never set up.
func noSuricataBox(t *testing.T) *labtest.Firewall {
	t.Helper()
	em := labtest.Start(t, labtest.Options{})
	c, err := configxml.LoadBytes(em.StoredConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.SuricataConfigured() {
		t.Fatal("the lab's config starts with a Suricata interface; these tests need a box without (no installedpackages/suricata/rule)")
	}
	if len(em.Glob(pfSuricataRC)) != 0 {
		t.Fatalf("the lab's box starts with %s; these tests need a box where Suricata was never set up", pfSuricataRC)
	}
	return em
}

// checkNoSuricata fails the test unless the box is as one where Suricata
// was never set up: no instance running, no rc script that a start (the
// next boot's rc.start_packages) would run.
func checkNoSuricata(t *testing.T, em *labtest.Firewall, fw *fwapi.PfSense, after string) {
	t.Helper()
	if got := idsModes(t, fw); len(got) != 0 {
		t.Errorf("after %s Suricata runs %v, want nothing, as before the change", after, got)
	}
	if len(em.Glob(pfSuricataRC)) != 0 {
		t.Errorf("after %s %s is there, which the box did not have before the change (the next boot would start the change's instance again)", after, pfSuricataRC)
	}
}

// TestLeaseRestoresABoxWithoutSuricata: a session on a box whose original
// config has no Suricata interface adds the first one, and fwab dies (the
// lease is no longer renewed, nor released). The lease's watchdog
// restores the original; its package lines must be fitted to that
// original (ShellGuard.ForRestore, pfForRestore): the package's sync of a
// config without an interface returns before it writes the rc script, so
// a watchdog that resynced and started Suricata, as for a config that has
// one, would run the failed change's script again. The box must end
// without Suricata running and without suricata.sh.
func TestLeaseRestoresABoxWithoutSuricata(t *testing.T) {
	t.Parallel()
	em := noSuricataBox(t)
	fw := em.Open(t).(*fwapi.PfSense)
	ctx := t.Context()
	orig := em.StoredConfig(t)
	s, err := fwapi.StartSession(ctx, fw, fw, fwapi.SessionOptions{
		Target: "fw1", Dir: t.TempDir(), Owner: owner("ci@runner"),
		RollbackAfter: 30 * time.Second, ReconnectWait: 5 * time.Second,
		// Renewed every second while the session lives; it ends 3 s after
		// fwab is gone.
		Lease: 3 * time.Second,
	})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	next, changes, err := configxml.Edit(orig, "", func(c *configxml.Config) error { return c.Set("ids@lan", configxml.IDSAlert) })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, next, changes, nil); err != nil {
		t.Fatalf("Apply ids@lan=%s: %v", configxml.IDSAlert, err)
	}
	if got := idsModes(t, fw); got["igb1"] != configxml.IDSAlert {
		t.Fatalf("the change did not start Suricata on lan: %v", got)
	}
	if len(em.Glob(pfSuricataRC)) != 1 {
		t.Fatalf("the change's sync did not write %s", pfSuricataRC)
	}
	// fwab dies here: no more renewals, no Close.
	s.Abandon()
	info := waitLeaseEnded(t, fw.ShellGuard, 30*time.Second)
	if !strings.HasPrefix(info.Ended, "restored") {
		t.Fatalf("the lease ended %q, want restored", info.Ended)
	}
	if !bytes.Equal(em.StoredConfig(t), orig) {
		t.Fatal("the expired lease did not restore the original config")
	}
	checkNoSuricata(t, em, fw, "the lease's restore")
}

// TestRebootRollbackToABoxWithoutSuricata: a step that only a boot
// applies (crypto.hardware) adds the first Suricata interface, and its
// rollback, which reboots, restores a config with none. The boot's
// rc.start_packages syncs the package (which, for a config without an
// interface, returns before it writes or removes the rc script) and then
// runs every rc script it finds, so the rollback must remove the failed
// change's suricata.sh before the reboot (BeforeReboot = pfNoSuricata):
// the box must come back without Suricata running and without the script.
func TestRebootRollbackToABoxWithoutSuricata(t *testing.T) {
	t.Parallel()
	em := noSuricataBox(t)
	fw := em.Open(t).(*fwapi.PfSense)
	ctx := t.Context()
	prev := em.StoredConfig(t)
	err := labtest.EditAndApply(t, fw, "", func(c *configxml.Config) error {
		return c.SetAll([]string{"ids@lan=" + configxml.IDSAlert, "crypto.hardware=aesni"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsModes(t, fw); got["igb1"] != configxml.IDSAlert {
		t.Fatalf("the change did not start Suricata on lan after its boot: %v", got)
	}
	if len(em.Glob(pfSuricataRC)) != 1 {
		t.Fatalf("the change's boot did not write %s", pfSuricataRC)
	}
	// Armed once the change is in force, so that it fires on it.
	boots := em.Boots()
	if err := fw.ArmRollbackReboot(ctx, prev, time.Second); err != nil {
		t.Fatal(err)
	}
	// The script puts the config back before it reboots: once the box
	// has rebooted, the restore is done.
	deadline := time.Now().Add(30 * time.Second)
	for em.Boots() == boots && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if em.Boots() == boots {
		t.Fatal("the rollback did not reboot the box within 30 s")
	}
	if err := fw.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if fired, _, err := fw.RollbackFired(ctx); err != nil || !fired {
		t.Fatalf("after the reboot the rollback does not say it ran: %v, %v", fired, err)
	}
	// Not fatal: what runs after the boot is the point of the test.
	if !bytes.Equal(em.StoredConfig(t), prev) {
		t.Error("after the rollback's reboot config.xml is not the restored config")
	}
	checkNoSuricata(t, em, fw, "the rollback's reboot")
}
