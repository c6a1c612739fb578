package emu_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

func TestFwapiDrivesTheEmulator(t *testing.T) {
	f := labtest.Start(t, labtest.Options{SSHVia: emu.NoManagement, RebootDelay: time.Second})
	fw := f.Open(t).(*fwapi.PfSense)
	ctx := context.Background()

	info, err := fw.Info(ctx)
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Version != "2.7.2-RELEASE" || info.Hostname != "pfSense.lab.fwab.test" || !slices.Equal(info.NICs, []string{"igb0", "igb1"}) {
		t.Errorf("Info = %+v", info)
	}

	labtest.ApplyKnobs(t, fw, "rules@lan=25", "nat.outbound=disabled", "offload.checksum=off", "blocklist=on")
	st, err := fw.RuntimeState(ctx)
	if err != nil {
		t.Fatalf("RuntimeState: %v", err)
	}
	if st.GeneratedRules != 25 {
		t.Errorf("RuntimeState.GeneratedRules = %d, want 25", st.GeneratedRules)
	}
	if st.NATRules != 0 {
		t.Errorf("RuntimeState.NATRules = %d, want 0 (nat.outbound=disabled)", st.NATRules)
	}
	if got := fwapi.OffloadState(st.Interfaces["igb1"], "offload.checksum"); got != "off" {
		t.Errorf("igb1 checksum offload = %s, want off (options %v)", got, st.Interfaces["igb1"].Options)
	}
	if got := st.Tables[emu.BlocklistSet]; got != 1000 {
		t.Errorf("RuntimeState.Tables[%s] = %d, want 1000", emu.BlocklistSet, got)
	}
	if st.Version != "2.7.2-RELEASE" {
		t.Errorf("RuntimeState.Version = %q", st.Version)
	}

	labtest.ApplyKnobs(t, fw, "rules@lan=0", "nat.outbound=automatic", "offload.checksum=on", "blocklist=off")
	st, err = fw.RuntimeState(ctx)
	if err != nil {
		t.Fatalf("RuntimeState: %v", err)
	}
	if st.GeneratedRules != 0 || st.NATRules != 2 || len(st.Tables) != 0 {
		t.Errorf("after undoing: generated %d, NAT %d, tables %v; want 0, 2, none", st.GeneratedRules, st.NATRules, st.Tables)
	}
	if got := fwapi.OffloadState(st.Interfaces["igb0"], "offload.checksum"); got != "on" {
		t.Errorf("igb0 checksum offload = %s, want on", got)
	}

	m, err := fw.Metrics(ctx)
	if err != nil {
		t.Fatalf("Metrics: %v", err)
	}
	if m.MemUsedPct <= 0 || m.MemUsedPct >= 100 || m.CPUPercent < 0 || m.CPUPercent > 100 || m.MbufsInUse <= 0 {
		t.Errorf("Metrics = %+v", m)
	}
}

func TestFwapiLockAndRollbackOnTheEmulator(t *testing.T) {
	f := labtest.Start(t, labtest.Options{SSHVia: emu.NoManagement, RebootDelay: time.Second})
	fw := f.Open(t).(*fwapi.PfSense)
	ctx := context.Background()
	owner := fwapi.LockOwner{Owner: "test@lab", PID: 1, Time: time.Now(), Token: "t1"}
	if err := fw.Lock(ctx, owner); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	other := owner
	other.Token = "t2"
	if err := fw.Lock(ctx, other); err == nil {
		t.Errorf("a second Lock succeeded while the first holds the lock")
	}
	good, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Written first: a write once the timer has run out is refused.
	bad := strings.Replace(string(good), "<hostname>pfSense</hostname>", "<hostname>unconfirmed</hostname>", 1)
	if err := fw.WriteConfig(ctx, []byte(bad), "change never confirmed"); err != nil {
		t.Fatal(err)
	}
	if err := fw.ArmRollback(ctx, good, time.Second); err != nil {
		t.Fatalf("ArmRollback: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		fired, _, err := fw.RollbackFired(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the armed rollback did not fire")
		}
		time.Sleep(200 * time.Millisecond)
	}
	now, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if string(now) != string(good) {
		t.Errorf("after the rollback fired, config.xml is not the previous one")
	}
	// Armed and disarmed in time: nothing happens.
	if err := fw.ArmRollback(ctx, good, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, []byte(bad), "confirmed change"); err != nil {
		t.Fatal(err)
	}
	if err := fw.Disarm(ctx); err != nil {
		t.Fatalf("Disarm: %v", err)
	}
	time.Sleep(3 * time.Second)
	if now, _ := fw.ReadConfig(ctx); string(now) != bad {
		t.Errorf("a disarmed rollback changed config.xml")
	}
	if err := fw.Unlock(ctx, owner); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}

func TestFwapiUpgradeOnTheEmulator(t *testing.T) {
	f := labtest.Start(t, labtest.Options{SSHVia: emu.NoManagement, RebootDelay: time.Second})
	fw := f.Open(t).(*fwapi.PfSense)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var lines []string
	if err := fw.Upgrade(ctx, "2.8.0-RELEASE", func(l string) { lines = append(lines, l) }); err != nil {
		t.Fatalf("Upgrade: %v (progress %q)", err, lines)
	}
	info, err := fw.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "2.8.0-RELEASE" {
		t.Errorf("version after Upgrade = %q, want 2.8.0-RELEASE", info.Version)
	}
}

// TestFwapiUpgradeFindsTheKernelPackage: a Netgate model's kernel package
// has its own name, and a debug kernel may sit beside it; the upgrade waits
// on the stage annotation of the kernel that runs, as pfSense-upgrade
// finds it, not on a fixed name, and for the last stage, which reinstalls
// the packages with SSH up and pkg's database locked, and for the boot's
// package start after it.
func TestFwapiUpgradeFindsTheKernelPackage(t *testing.T) {
	f := labtest.Start(t, labtest.Options{SSHVia: emu.NoManagement, Version: "2.6.0-RELEASE", KernelPackage: "pfSense-kernel-pfSense-3100", Stage3Time: time.Second})
	fw := f.Open(t).(*fwapi.PfSense)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var lines []string
	// 2.6 to 2.7 is a major upgrade: the base stage reboots again.
	if err := fw.Upgrade(ctx, "2.7.2-RELEASE", func(l string) { lines = append(lines, l) }); err != nil {
		t.Fatalf("Upgrade: %v (progress %q)", err, lines)
	}
	if out, _, _ := f.Run(t, "pkg-static annotate -q -S pfSense-kernel-pfSense-3100 next_stage", ""); out != "" {
		t.Errorf("next_stage after the upgrade = %q, want none (progress %q)", out, lines)
	}
	if _, _, code := f.Run(t, "test -e "+fwapi.PfPackagesHook, ""); code == 0 {
		t.Errorf("Upgrade returned before the boot started the packages (%s is still there; progress %q)", fwapi.PfPackagesHook, lines)
	}
}
