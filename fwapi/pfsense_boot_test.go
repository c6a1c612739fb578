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
