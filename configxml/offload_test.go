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
			lan := c.doc.Root().FindElement("interfaces/lan/if")
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
	root := c.doc.Root()
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
