package emu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
)

func TestPlanIDS(t *testing.T) {
	tests := []struct {
		name    string
		knobs   []string
		want    IDSPlan
		wantErr string
	}{
		{name: "factory config runs nothing", want: IDSPlan{}},
		{name: "ids on lan", knobs: []string{"ids@lan=ids"}, want: IDSPlan{configxml.IDSAlert: {"igb1"}}},
		{name: "inline on lan", knobs: []string{"ids@lan=ips-inline"}, want: IDSPlan{configxml.IDSInlineIPS: {"igb1"}}},
		{name: "legacy on wan", knobs: []string{"ids@wan=ips-legacy"}, want: IDSPlan{configxml.IDSLegacyIPS: {"igb0"}}},
		{name: "one engine per mode", knobs: []string{"ids@lan=ids", "ids@wan=ids"}, want: IDSPlan{configxml.IDSAlert: {"igb0", "igb1"}}},
		{name: "inline and ids", knobs: []string{"ids@lan=ips-inline", "ids@wan=ids"}, want: IDSPlan{configxml.IDSInlineIPS: {"igb1"}, configxml.IDSAlert: {"igb0"}}},
		{name: "back to off", knobs: []string{"ids@lan=ids", "ids@lan=off"}, want: IDSPlan{}},
		{name: "inline and legacy at once", knobs: []string{"ids@lan=ips-inline", "ids@wan=ips-legacy"}, wantErr: "one of the two blocking modes at a time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := configxml.LoadBytes(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.knobs {
				if err := c.SetAll([]string{k}); err != nil {
					t.Fatalf("SetAll(%s): %v", k, err)
				}
			}
			c, err = configxml.LoadBytes(c.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			got, err := PlanIDS(c, testPorts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PlanIDS() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlanIDS(): %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanIDS() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSuricataCustomRulesFollowRebuilds: a package sync with
// $rebuild_rules set writes each interface's custom.rules from config.xml;
// one without it, and the boot's, leave the file of the last rebuild.
func TestSuricataCustomRulesFollowRebuilds(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	const rebuild = `/usr/local/bin/php -r 'require_once("/usr/local/pkg/suricata/suricata.inc"); global $g, $rebuild_rules, $suricata_gui_include, $pkg_interface; $suricata_gui_include = false; $pkg_interface = "console"; $g["suricata_postinstall"] = true; $rebuild_rules = true; sync_suricata_package_config(); $rebuild_rules = false;'`
	const noRebuild = `/usr/local/bin/php -r 'require_once("/usr/local/pkg/suricata/suricata.inc"); sync_suricata_package_config();'`
	setRules := func(rules string) {
		t.Helper()
		c, err := parseConfig([]byte(f.mustRun(t, "cat /conf/config.xml", "")), configxml.PfSense)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetSuricataCustomRules("lan", rules); err != nil {
			t.Fatal(err)
		}
		// As fwab writes it: the config cache dropped with the write.
		f.mustRun(t, "cat > /conf/config.xml.fwab && mv /conf/config.xml.fwab /conf/config.xml && rm -f /tmp/config.cache", string(c.Bytes()))
	}
	onDisk := func() string {
		t.Helper()
		files, _ := filepath.Glob(filepath.Join(f.em.Root, "usr/local/etc/suricata/suricata_*_igb1/rules/custom.rules"))
		if len(files) != 1 {
			t.Fatalf("custom.rules of igb1: %q, want one file", files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	const first, second = "drop udp any any -> any any (content:\"one\"; sid:1;)\n", "drop udp any any -> any any (content:\"two\"; sid:2;)\n"
	f.setKnobs(t, "ids@lan=ids")
	f.mustRun(t, "rm -f /tmp/config.cache", "")
	setRules(first)
	f.mustRun(t, rebuild, "")
	if got := onDisk(); got != first {
		t.Fatalf("after a rebuilding sync, custom.rules = %q, want %q", got, first)
	}
	setRules(second)
	f.mustRun(t, noRebuild, "")
	f.em.Reboot(t.Context())
	if got := onDisk(); got != first {
		t.Errorf("after a sync without $rebuild_rules and a boot, custom.rules = %q, want the last rebuild's %q", got, first)
	}
	// The emulator's own shell: SSH listens again only a moment later.
	var out, errOut strings.Builder
	if code := f.em.Exec(t.Context(), rebuild, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("sync after the boot: exit %d %s", code, errOut.String())
	}
	if got := onDisk(); got != second {
		t.Errorf("after a rebuilding sync, custom.rules = %q, want %q", got, second)
	}
}
