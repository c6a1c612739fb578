package fwapi_test

import (
	"path"
	"testing"
	"time"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// TestOPNsenseWaitReadyWaitsForTheStartHooks: OPNsense's API answers from
// rc.bootup's early plugins, before the start syshooks start Suricata
// (20-freebsd); after fwab's Reboot, WaitReady returns only once the
// boot's start hooks ran, and the hook that says so is gone.
func TestOPNsenseWaitReadyWaitsForTheStartHooks(t *testing.T) {
	fw, em := newOPNsense(t, labtest.Options{Version: "26.1.2", PackageStartDelay: 2 * time.Second}, true, fwapi.OPNsenseOptions{})
	ctx := t.Context()
	labtest.ApplyKnobs(t, fw, "ids@lan=ids")
	running := func() bool {
		t.Helper()
		st, err := fw.RuntimeState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return len(st.IDS) > 0
	}
	if !running() {
		t.Fatal("Suricata does not run before the reboot")
	}
	boots := em.Boots()
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fw.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if em.Boots() == boots {
		t.Fatal("WaitReady returned before the box rebooted")
	}
	if !running() {
		t.Error("WaitReady returned before the boot's start hooks started Suricata")
	}
	if _, _, code := em.Run(t, "test -e "+fwapi.OPNsenseStartedHook, ""); code == 0 {
		t.Errorf("%s is still there after the boot ran it", fwapi.OPNsenseStartedHook)
	}
}

// TestOPNsenseStartedHookOnlyInTheNewBoot: a boot still starting when
// fwab reboots the box runs its start hooks too; there the hook must
// leave no mark and stay, for the boot of fwab's reboot. It sorts after
// every start hook the products and their plugins ship.
func TestOPNsenseStartedHookOnlyInTheNewBoot(t *testing.T) {
	_, em := newOPNsense(t, labtest.Options{Version: "26.1.2"}, true, fwapi.OPNsenseOptions{})
	if err := em.WriteFile(fwapi.OPNsenseStartedHook, []byte(fwapi.OPNsenseStartedHookScript)); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) int {
		t.Helper()
		_, _, code := em.Run(t, cmd, "")
		return code
	}
	run("chmod 755 " + fwapi.OPNsenseStartedHook + " && date +%s > /var/run/fwab.reboot-pending")
	if code := run(fwapi.OPNsenseStartedHook); code != 0 {
		t.Fatalf("the hook before the reboot: exit %d", code)
	}
	if run("test -e "+fwapi.PfPackagesStarted) == 0 || run("test -e "+fwapi.OPNsenseStartedHook) != 0 {
		t.Error("the hook ran before the reboot marked the services started, or removed itself")
	}
	run("rm -f /var/run/fwab.reboot-pending") // as the boot's rc.subr.d/var does
	run(fwapi.OPNsenseStartedHook)
	if run("test -e "+fwapi.PfPackagesStarted) != 0 || run("test -e "+fwapi.OPNsenseStartedHook) == 0 {
		t.Error("the hook in the new boot did not mark the services started and remove itself")
	}
	for _, hook := range []string{"20-freebsd", "95-beep", "99-fwab-rollback", "99-qfeeds"} {
		if path.Base(fwapi.OPNsenseStartedHook) <= hook {
			t.Errorf("%s does not sort after %s", fwapi.OPNsenseStartedHook, hook)
		}
	}
}
