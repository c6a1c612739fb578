package fwapi_test

import (
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
