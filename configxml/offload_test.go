package configxml

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// TestChecksumOnRefusedOnVirtioAndENA: pfSense forces checksum offload off
// on vtnet and ena NICs, so offload.checksum=on is refused there with the
// reason, and allowed on igb/ixl and on OPNsense.
func TestChecksumOnRefusedOnVirtioAndENA(t *testing.T) {
	tests := []struct {
		fixture, dev, value, want string
	}{
		{"configs/pfsense-2.7.xml", "vtnet1", "on", "pfSense always disables checksum offload on vtnet and ena"},
		{"configs/pfsense-2.7.xml", "ena0", "on", "interface lan is on ena0"},
		{"configs/pfsense-2.6.xml", "VTNET1.10", "on", "pfSense always disables"},
		{"configs/pfsense-2.7.xml", "vtnet1", "off", ""},
		{"configs/pfsense-2.7.xml", "ixl1", "on", ""},
		{"configs/pfsense-2.8.xml", "igb1", "on", ""},
		{"configs/opnsense-26.1.xml", "vtnet1", "on", ""},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.dev+"/"+tt.value, func(t *testing.T) {
			c := load(t, tt.fixture)
			lan := c.root().FindElement("interfaces/lan/if")
			if lan == nil {
				t.Fatal("fixture has no interfaces/lan/if")
			}
			lan.SetText(tt.dev)
			orig := c.Bytes()
			err := c.Check("offload.checksum", tt.value)
			if tt.want == "" {
				if err != nil {
					t.Errorf("Check = %v, want it accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check = %v; want an error containing %q", err, tt.want)
			}
			if err := c.Set("offload.checksum", tt.value); err == nil {
				t.Error("Set accepted what Check refused")
			}
			if !bytes.Equal(orig, c.Bytes()) {
				t.Error("a refused Set changed the config")
			}
		})
	}
	for dev, want := range map[string]bool{"vtnet0": true, "ena1": true, "vtnet0.100": true, "Ena0": true, "igb0": false, "ixl0": false, "em0": false} {
		if got := PfSenseForcesChecksumOff(dev); got != want {
			t.Errorf("PfSenseForcesChecksumOff(%q) = %v, want %v", dev, got, want)
		}
	}
}

// lagged is the pfSense 2.7 fixture with lan on lagg0 (igb1, igb3) and
// opt2 on VLAN 20 of it; opt1 stays on igb2.
func lagged(t *testing.T) *Config {
	t.Helper()
	c := load(t, "configs/pfsense-2.7.xml")
	root := c.root()
	root.FindElement("interfaces/wan/if").SetText("igb0")
	root.FindElement("interfaces/lan/if").SetText("lagg0")
	opt2 := root.FindElement("interfaces").CreateElement("opt2")
	opt2.CreateElement("if").SetText("lagg0.20")
	laggs := root.CreateElement("laggs").CreateElement("lagg")
	laggs.CreateElement("members").SetText("igb1,igb3")
	laggs.CreateElement("laggif").SetText("lagg0")
	laggs.CreateElement("proto").SetText("lacp")
	vlan := root.CreateElement("vlans").CreateElement("vlan")
	vlan.CreateElement("if").SetText("lagg0")
	vlan.CreateElement("tag").SetText("20")
	vlan.CreateElement("vlanif").SetText("lagg0.20")
	return c
}

// TestOffloadDevicesFollowGetParentInterface: pfSense applies offload
// flags to each assigned device after its first parent (a LAGG's first
// member, a VLAN's parent), once each, in config order.
func TestOffloadDevicesFollowGetParentInterface(t *testing.T) {
	c := lagged(t)
	got := c.OffloadDevices()
	want := []string{"igb0", "igb1", "lagg0", "igb2", "lagg0.20"}
	if !slices.Equal(got, want) {
		t.Errorf("OffloadDevices() = %v, want %v", got, want)
	}
}

// TestUnderneathDevices: what a device runs on, recursively, so the SSH
// session's link is spared on every device beneath it.
func TestUnderneathDevices(t *testing.T) {
	c := lagged(t)
	for dev, want := range map[string][]string{
		"lagg0.20": {"lagg0", "igb1", "igb3"},
		"lagg0":    {"igb1", "igb3"},
		"igb2":     nil,
	} {
		if got := c.UnderneathDevices(dev); !slices.Equal(got, want) {
			t.Errorf("UnderneathDevices(%s) = %v, want %v", dev, got, want)
		}
	}
}

// overrideLan gives the fixture's lan the GUI's per-interface offload
// override (Interfaces → [LAN] → "Overwrite global settings"), with the
// given flags present in it.
func overrideLan(t *testing.T, c *Config, flags ...string) string {
	t.Helper()
	lan := c.root().FindElement("interfaces/lan")
	lan.CreateElement("hw_settings_overwrite").SetText("1")
	for _, f := range flags {
		lan.CreateElement(f).SetText("1")
	}
	return childText(lan, "if")
}

// TestOffloadPerInterfaceOverride: an OPNsense interface with
// hw_settings_overwrite takes its offload flags from its own element, by
// presence up to 25.7 and by value from 26.1; the knob reads "mixed" while
// the NICs differ, and a Set reaches the override too, so every NIC then
// runs the value set.
func TestOffloadPerInterfaceOverride(t *testing.T) {
	for _, tt := range []struct {
		fixture string
		global  string // the fixture's offload.checksum
	}{
		{"configs/opnsense-24.7.xml", "off"},
		{"configs/opnsense-25.7.xml", "off"},
		{"configs/opnsense-26.1.xml", "on"},
		{"configs/opnsense-26.7.xml", ""},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			c := load(t, tt.fixture)
			global, err := c.Get("offload.checksum")
			if err != nil {
				t.Fatal(err)
			}
			if tt.global != "" && global != tt.global {
				t.Fatalf("fixture's offload.checksum = %s, want %s", global, tt.global)
			}
			other := map[string]string{"on": "off", "off": "on"}[global]
			// The override replaces every flag: TSO and LRO as the
			// global ones, so that only the checksum differs.
			var flags []string
			for _, k := range []string{"offload.tso", "offload.lro"} {
				if v, _ := c.Get(k); v == "off" {
					flags = append(flags, offloadFlags[k])
				}
			}
			if other == "off" {
				flags = append(flags, "disablechecksumoffloading")
			} // else the flag absent: not disabled
			lan := overrideLan(t, c, flags...)
			wan := c.root().FindElement("interfaces/wan/if").Text()
			for dev, want := range map[string]string{lan: other, wan: global} {
				if got, err := c.OffloadFor("offload.checksum", dev); err != nil || got != want {
					t.Errorf("OffloadFor(offload.checksum, %s) = %q, %v; want %q", dev, got, err, want)
				}
			}
			if got, _ := c.Get("offload.checksum"); got != "mixed" {
				t.Errorf("Get(offload.checksum) = %q with lan overriding %s to %s, want mixed", got, global, other)
			}
			if got, _ := c.Get("offload.tso"); got == "mixed" {
				t.Errorf("Get(offload.tso) = mixed, but lan's override has the global TSO value")
			}
			for _, v := range []string{other, global} {
				if err := c.Set("offload.checksum", v); err != nil {
					t.Fatal(err)
				}
				if got, _ := c.Get("offload.checksum"); got != v {
					t.Errorf("after Set %s: Get = %q", v, got)
				}
				for _, dev := range []string{lan, wan} {
					if got, _ := c.OffloadFor("offload.checksum", dev); got != v {
						t.Errorf("after Set %s: OffloadFor(%s) = %q", v, dev, got)
					}
				}
			}
		})
	}
	// Up to 25.7 the override is read by presence: a flag with text 0 is
	// still set. From 26.1 by value.
	for fixture, want := range map[string]string{"configs/opnsense-25.7.xml": "off", "configs/opnsense-26.1.xml": "on"} {
		c := load(t, fixture)
		lan := c.root().FindElement("interfaces/lan")
		lan.CreateElement("hw_settings_overwrite").SetText("1")
		lan.CreateElement("disablelargereceiveoffloading").SetText("0")
		if got, _ := c.OffloadFor("offload.lro", childText(lan, "if")); got != want {
			t.Errorf("%s: lan overriding with <disablelargereceiveoffloading>0: OffloadFor = %q, want %q", fixture, got, want)
		}
	}
	// An override without a flag runs that offload on, whatever the
	// global flag says.
	c := load(t, "configs/opnsense-25.7.xml")
	lan := overrideLan(t, c)
	if got, _ := c.OffloadFor("offload.tso", lan); got != "on" {
		t.Errorf("25.7: lan overriding with no TSO flag: OffloadFor = %q, want on (global off)", got)
	}
	// pfSense has no per-interface override: the element means nothing there.
	c = load(t, "configs/pfsense-2.7.xml")
	global, _ := c.Get("offload.tso")
	lan = overrideLan(t, c, "disablesegmentationoffloading", "disablechecksumoffloading")
	if got, _ := c.OffloadFor("offload.tso", lan); got != global {
		t.Errorf("pfSense: OffloadFor(offload.tso, lan) = %q, want the global %q", got, global)
	}
}

// TestInlineIPSLintSeesOverrides: FWAB001 looks at the offloads the
// inline interface really gets, an OPNsense override included, and names
// the override's element.
func TestInlineIPSLintSeesOverrides(t *testing.T) {
	c := load(t, "configs/opnsense-25.7.xml") // every offload disabled globally
	if err := c.SetAll([]string{"ids@wan=ips-inline", "ids@lan=ips-inline"}); err != nil {
		t.Fatal(err)
	}
	if fs := Lint(c); slices.ContainsFunc(fs, func(f Finding) bool { return f.Rule == "FWAB001" }) {
		t.Fatalf("global offloads off: FWAB001 already: %v", fs)
	}
	overrideLan(t, c, "disablechecksumoffloading", "disablelargereceiveoffloading") // TSO on
	var got []Finding
	for _, f := range Lint(c) {
		if f.Rule == "FWAB001" {
			got = append(got, f)
		}
	}
	if len(got) != 1 || !strings.Contains(got[0].Message, "ids@lan") || !strings.Contains(got[0].Message, "but offload.tso is still on") || got[0].Path != "interfaces/lan" {
		t.Errorf("lan's override leaves TSO on under inline IPS: FWAB001 findings %+v, want one naming ids@lan and offload.tso at interfaces/lan", got)
	}
}

// TestOffloadOverrideOnAVLANMeansNothing: OPNsense sets no capability on
// a VLAN (configure_interface_hardware skips vlan, qinq, lo, vxlan and
// ipsec devices), so an override on a VLAN interface does not make the
// knob mixed.
func TestOffloadOverrideOnAVLANMeansNothing(t *testing.T) {
	c := load(t, "configs/opnsense-25.7.xml")
	global, _ := c.Get("offload.tso")
	opt := c.root().FindElement("interfaces").CreateElement("opt9")
	opt.CreateElement("if").SetText("vlan0.20")
	opt.CreateElement("hw_settings_overwrite").SetText("1") // no flag: all on
	if got, _ := c.Get("offload.tso"); got != global {
		t.Errorf("Get(offload.tso) = %q with an override on a VLAN only, want the global %q", got, global)
	}
}
