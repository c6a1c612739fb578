package fwapi_test

import (
	"bytes"
	"strings"
	"time"

	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

func idsModes(t *testing.T, fw *fwapi.PfSense) map[string]string {
	t.Helper()
	st, err := fw.RuntimeState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, i := range st.IDS {
		out[i.Interface] = i.Mode
	}
	return out
}

func setIDS(t *testing.T, em *labtest.Firewall, fw *fwapi.PfSense, value string) {
	t.Helper()
	c, err := configxml.LoadBytes(em.StoredConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	from, _ := c.Get("ids@lan")
	if err := c.Set("ids@lan", value); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(t.Context(), c.Bytes(), "ids@lan="+value); err != nil {
		t.Fatal(err)
	}
	if err := fw.Apply(t.Context(), []configxml.Change{{Knob: "ids@lan", From: from, To: value, Action: configxml.ActionIDSRestart}}); err != nil {
		t.Fatalf("Apply ids@lan=%s: %v", value, err)
	}
}

// TestPfSenseIDSModeChangesTakeEffect: Suricata's rc script carries the run
// mode of the last package sync, so each ids@IF change must stop with the
// old script, resync and start; the emulator bakes the mode at sync time.
func TestPfSenseIDSModeChangesTakeEffect(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	for _, step := range []struct{ value, want string }{
		{configxml.IDSInlineIPS, "ips-inline"},
		{configxml.IDSAlert, "ids"},
		{configxml.IDSOff, ""},
	} {
		setIDS(t, em, fw, step.value)
		if got := idsModes(t, fw)["igb1"]; got != step.want {
			t.Errorf("after ids@lan=%s Suricata on igb1 runs %q, want %q", step.value, got, step.want)
		}
	}
}

// TestEmulatedSuricataRestartKeepsBakedMode: without a resync, a restart
// restarts what the last sync baked.
func TestEmulatedSuricataRestartKeepsBakedMode(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	setIDS(t, em, fw, configxml.IDSInlineIPS)
	c, err := configxml.LoadBytes(em.StoredConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("ids@lan", configxml.IDSAlert); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(t.Context(), c.Bytes(), "ids"); err != nil {
		t.Fatal(err)
	}
	if _, _, code := em.Run(t, "/usr/local/etc/rc.d/suricata.sh restart", ""); code != 0 {
		t.Fatalf("restart exit %d", code)
	}
	if got := idsModes(t, fw)["igb1"]; got != "ips-inline" {
		t.Errorf("a restart without resync runs %q, want the baked ips-inline", got)
	}
}

// TestPfSenseIDSRulesCounted: the runtime state counts the rules the
// package built for each running Suricata, and verify says when there are
// none: an interface fwab creates has the default events rulesets; one
// whose rulesets were all removed runs with nothing to match.
func TestPfSenseIDSRulesCounted(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	setIDS(t, em, fw, configxml.IDSAlert)
	rules := func() (int, []configxml.Finding) {
		t.Helper()
		st, err := fw.RuntimeState(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(st.IDS) != 1 {
			t.Fatalf("RuntimeState.IDS = %+v, want one instance", st.IDS)
		}
		c, err := configxml.LoadBytes(em.StoredConfig(t))
		if err != nil {
			t.Fatal(err)
		}
		var fs []configxml.Finding
		for _, f := range fwapi.VerifyRuntime(c, st) {
			if f.Rule == fwapi.RuleIDSNoRules {
				fs = append(fs, f)
			}
		}
		return st.IDS[0].Rules, fs
	}
	if n, fs := rules(); n <= 0 || len(fs) != 0 {
		t.Errorf("new interface: %d rules, findings %v; want the default rulesets' rules and no FWAB112", n, fs)
	}
	// The user removes every ruleset, and the package syncs.
	c, err := configxml.LoadBytes(em.StoredConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("xml:installedpackages/suricata/rule/rulesets", ""); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(t.Context(), c.Bytes(), "rulesets removed"); err != nil {
		t.Fatal(err)
	}
	if err := fw.Apply(t.Context(), []configxml.Change{{Knob: "ids@lan", From: "ids", To: "ids", Action: configxml.ActionIDSRestart}}); err != nil {
		t.Fatal(err)
	}
	if n, fs := rules(); n != 0 || len(fs) != 1 {
		t.Errorf("no rulesets: %d rules, findings %v; want 0 and one FWAB112", n, fs)
	}
}

// TestRebootStillRebuildsSuricataRules: a change that only a boot applies
// (crypto.hardware) beside a Suricata one. The boot syncs the package
// without rebuilding its rule files (rc.start_packages), so a driver that
// let the reboot stand for the ids-restart would leave the new config's
// custom rules off the disk: the driver still resyncs after the boot.
func TestRebootStillRebuildsSuricataRules(t *testing.T) {
	em := labtest.Start(t, labtest.Options{})
	fw := em.Open(t)
	const rule = "drop udp any any -> any any (msg:\"after the boot\"; content:\"fwab-canary-0011223344556677\"; sid:1990001; rev:1;)\n"
	err := labtest.EditAndApply(t, fw, "", func(c *configxml.Config) error {
		if err := c.SetAll([]string{"offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline", "crypto.hardware=aesni"}); err != nil {
			return err
		}
		return c.SetSuricataCustomRules("lan", rule)
	})
	if err != nil {
		t.Fatal(err)
	}
	files := em.Glob("/usr/local/etc/suricata/suricata_*_igb1/rules/custom.rules")
	if len(files) != 1 {
		t.Fatalf("custom.rules of igb1: %q, want one", files)
	}
	if got := string(em.File(t, files[0])); got != rule {
		t.Errorf("after the reboot, custom.rules = %q, want the config's %q", got, rule)
	}
	if got := idsModes(t, fw.(*fwapi.PfSense)); got["igb1"] != configxml.IDSInlineIPS {
		t.Errorf("Suricata modes %v, want inline on igb1", got)
	}
}

// TestRebootRollbackRebuildsSuricataRules: a rollback that reboots puts
// config.xml back, and the boot starts Suricata on the rule files it
// finds without rebuilding them, so the rollback must rebuild them from
// the restored config before it reboots; otherwise the failed change's
// rules (a canary's drop rule, say) stay in force with a config that no
// longer names them.
func TestRebootRollbackRebuildsSuricataRules(t *testing.T) {
	em := labtest.Start(t, labtest.Options{})
	fw := em.Open(t)
	ctx := t.Context()
	const before = "alert udp any any -> any any (msg:\"before\"; content:\"kept\"; sid:1990002; rev:1;)\n"
	const failed = "drop udp any any -> any any (msg:\"failed change\"; content:\"fwab-canary-0011223344556677\"; sid:1990001; rev:1;)\n" + before
	edit := func(rules string, more ...string) {
		t.Helper()
		err := labtest.EditAndApply(t, fw, "", func(c *configxml.Config) error {
			if err := c.SetAll(append([]string{"offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline"}, more...)); err != nil {
				return err
			}
			return c.SetSuricataCustomRules("lan", rules)
		})
		if err != nil {
			t.Fatal(err)
		}
		// The rules are no knob: their change is resynced as the sweep's
		// canary does (an ids-restart of its own).
		if err := fw.Apply(ctx, []configxml.Change{{Knob: "canary@lan", Action: configxml.ActionIDSRestart}}); err != nil {
			t.Fatal(err)
		}
	}
	edit(before)
	prev := em.StoredConfig(t)
	edit(failed, "crypto.hardware=aesni")
	files := em.Glob("/usr/local/etc/suricata/suricata_*_igb1/rules/custom.rules")
	if len(files) != 1 || string(em.File(t, files[0])) != failed {
		t.Fatalf("the failed change's rules did not take: %q: %q", files, em.File(t, files[0]))
	}
	// Armed once the change is in force, so that it fires on it.
	boots := em.Boots()
	if err := fw.(fwapi.RebootRollbacker).ArmRollbackReboot(ctx, prev, time.Second); err != nil {
		t.Fatal(err)
	}
	// The sync before the reboot is bounded, so that the reboot comes.
	if script := string(em.File(t, fwapi.RollbackScript)); !strings.Contains(script, "/usr/bin/timeout -s KILL 300 /usr/local/bin/php") {
		t.Errorf("the armed rollback does not bound Suricata's sync before its reboot:\n%s", script)
	}
	deadline := time.Now().Add(30 * time.Second)
	for (em.Boots() == boots || !bytes.Equal(em.StoredConfig(t), prev)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if err := fw.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(em.StoredConfig(t), prev) || em.Boots() == boots {
		t.Fatalf("the rollback did not restore the config and reboot (%d boots)", em.Boots()-boots)
	}
	if got := string(em.File(t, files[0])); got != before {
		t.Errorf("after the rollback's reboot, custom.rules = %q, want the restored config's %q", got, before)
	}
}

// TestRollbackOfAFirstSuricataInterface: on a box whose config has no
// Suricata interface (the package installed, never set up), a change that
// adds the first one and is rolled back must leave Suricata as it was:
// not running and without the rc script the change's sync wrote. The
// package's sync returns before it writes that script when the config
// has no interface, so the restored config's sync keeps the failed
// change's, and its start (the rollback's, the next boot's) runs the
// failed change's instance again.
func TestRollbackOfAFirstSuricataInterface(t *testing.T) {
	em := labtest.Start(t, labtest.Options{})
	fw := em.Open(t)
	ctx := t.Context()
	const rcPath = "/usr/local/etc/rc.d/suricata.sh"
	if _, _, code := em.Run(t, "test -e "+rcPath, ""); code == 0 {
		t.Skip("the lab's config starts with Suricata set up; this case needs a box without")
	}
	prev := em.StoredConfig(t)
	if err := fw.(fwapi.Guard).ArmRollback(ctx, prev, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := labtest.EditAndApply(t, fw, "", func(c *configxml.Config) error { return c.Set("ids@lan", "ids") }); err != nil {
		t.Fatal(err)
	}
	if got := idsModes(t, fw.(*fwapi.PfSense)); got["igb1"] != configxml.IDSAlert {
		t.Fatalf("the change did not start Suricata on lan: %v", got)
	}
	awaitRollback(t, em, fw, prev)
	if got := idsModes(t, fw.(*fwapi.PfSense)); len(got) != 0 {
		t.Errorf("after the rollback Suricata runs %v, want nothing, as before the change", got)
	}
	if _, _, code := em.Run(t, "test -e "+rcPath, ""); code == 0 {
		t.Errorf("after the rollback %s is there, which the box did not have before the change", rcPath)
	}
}

// TestRollbackOfTheLastSuricataInterfaceOff: a change that turns the last
// enabled Suricata interface off makes the package's sync remove its rc
// script; the rollback's sync of the restored config writes it again and
// starts Suricata as it ran before.
func TestRollbackOfTheLastSuricataInterfaceOff(t *testing.T) {
	em := labtest.Start(t, labtest.Options{})
	fw := em.Open(t)
	ctx := t.Context()
	setIDS(t, em, fw.(*fwapi.PfSense), configxml.IDSAlert)
	prev := em.StoredConfig(t)
	if err := fw.(fwapi.Guard).ArmRollback(ctx, prev, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	setIDS(t, em, fw.(*fwapi.PfSense), configxml.IDSOff)
	if got := idsModes(t, fw.(*fwapi.PfSense)); len(got) != 0 {
		t.Fatalf("ids@lan=off left Suricata running: %v", got)
	}
	awaitRollback(t, em, fw, prev)
	if got := idsModes(t, fw.(*fwapi.PfSense)); got["igb1"] != configxml.IDSAlert {
		t.Errorf("after the rollback Suricata runs %v, want ids on igb1 as before the change", got)
	}
}

// awaitRollback waits up to 30 s for the armed rollback to have run, and
// fails the test unless it put prev back.
func awaitRollback(t *testing.T, em *labtest.Firewall, fw fwapi.Firewall, prev []byte) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if fired, _, err := fw.(fwapi.Guard).RollbackFired(t.Context()); err == nil && fired {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !bytes.Equal(em.StoredConfig(t), prev) {
		t.Fatal("the rollback did not restore the config")
	}
}
