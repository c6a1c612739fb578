package fwapi_test

import (
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// TestWaitReadyWaitsForThePackages: pfSense's boot answers SSH and loads
// pf (rc.bootup) before it starts the packages (rc.start_packages, after
// pfSense-upgrade's boot stages). WaitReady after a Reboot must return
// only once the boot has started them, Suricata among them: an
// ids-restart at once would race the boot's own sync and start, and a
// probe would measure a box without its IPS.
func TestWaitReadyWaitsForThePackages(t *testing.T) {
	em := labtest.Start(t, labtest.Options{PackageStartDelay: 2 * time.Second})
	fw := em.Open(t)
	p := fw.(*fwapi.PfSense)
	ctx := t.Context()
	setIDS(t, em, p, configxml.IDSAlert)
	if got := idsModes(t, p); got["igb1"] != configxml.IDSAlert {
		t.Fatalf("Suricata does not run on lan before the reboot: %v", got)
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
	if got := idsModes(t, p); got["igb1"] != configxml.IDSAlert {
		t.Errorf("WaitReady returned with Suricata running %v, before the boot started the packages; want ids on igb1", got)
	}
	if _, _, code := em.Run(t, "test -e "+fwapi.PfPackagesHook, ""); code == 0 {
		t.Errorf("%s is still there after the boot ran it", fwapi.PfPackagesHook)
	}
}

// TestPackagesHookOnlyInTheNewBoot: rc.start_packages runs outside the
// boot too (a WAN address change), so the hook may run between fwab's
// Reboot and the reboot itself: there it must leave no marker and stay,
// for the boot that follows.
func TestPackagesHookOnlyInTheNewBoot(t *testing.T) {
	em := labtest.Start(t, labtest.Options{})
	if err := em.WriteFile(fwapi.PfPackagesHook, []byte(fwapi.PfPackagesHookScript)); err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) int {
		t.Helper()
		_, _, code := em.Run(t, cmd, "")
		return code
	}
	run("chmod 755 " + fwapi.PfPackagesHook + " && date +%s > /var/run/fwab.reboot-pending")
	if code := run(fwapi.PfPackagesHook + " start"); code != 0 {
		t.Fatalf("the hook before the reboot: exit %d", code)
	}
	if run("test -e "+fwapi.PfPackagesStarted) == 0 || run("test -e "+fwapi.PfPackagesHook) != 0 {
		t.Error("the hook ran before the reboot marked the packages started, or removed itself")
	}
	run("rm -f /var/run/fwab.reboot-pending") // as the boot's tmpfs does
	if code := run(fwapi.PfPackagesHook + " stop"); code != 0 || run("test -e "+fwapi.PfPackagesStarted) == 0 {
		t.Errorf("the hook with stop (the shutdown's stop_packages): exit %d, or it marked the packages started", code)
	}
	run(fwapi.PfPackagesHook + " start")
	if run("test -e "+fwapi.PfPackagesStarted) != 0 || run("test -e "+fwapi.PfPackagesHook) == 0 {
		t.Error("the hook in the new boot did not mark the packages started and remove itself")
	}
}
