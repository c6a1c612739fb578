package configxml

import "testing"

// TestPfSenseIDSClearsInlineMode: ids after ips-inline leaves
// ips_mode_legacy, since the package bakes --netmap on ips_mode alone.
func TestPfSenseIDSClearsInlineMode(t *testing.T) {
	c := load(t, "configs/pfsense-2.7.xml")
	if err := c.Set("ids@lan", IDSInlineIPS); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("ids@lan", IDSAlert); err != nil {
		t.Fatal(err)
	}
	r := c.suricataRule("lan")
	if got := childText(r, "ips_mode"); got != "ips_mode_legacy" {
		t.Errorf("ips_mode after ids = %q, want ips_mode_legacy", got)
	}
	if got := childText(r, "blockoffenders"); got != "off" {
		t.Errorf("blockoffenders after ids = %q, want off", got)
	}
}
