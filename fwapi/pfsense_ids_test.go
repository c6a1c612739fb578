package fwapi_test

import (
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
