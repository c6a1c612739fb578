package configxml

import (
	"slices"
	"strings"
	"testing"
)

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

// TestPfSenseNewIDSInterfaceHasDefaultRulesets: a Suricata interface fwab
// creates carries the package's default events rulesets, as the GUI's new
// interface does; one the user made keeps its own.
func TestPfSenseNewIDSInterfaceHasDefaultRulesets(t *testing.T) {
	c := load(t, "configs/pfsense-2.7.xml")
	if err := c.Set("ids@lan", IDSAlert); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(childText(c.suricataRule("lan"), "rulesets"), "||")
	if len(got) != len(suricataDefaultRules) || !slices.Contains(got, "decoder-events.rules") || !slices.Contains(got, "stream-events.rules") {
		t.Errorf("new interface's rulesets = %q, want the package's %d default events rulesets", got, len(suricataDefaultRules))
	}
	c.suricataRule("lan").SelectElement("rulesets").SetText("emerging-scan.rules")
	if err := c.Set("ids@lan", IDSInlineIPS); err != nil {
		t.Fatal(err)
	}
	if got := childText(c.suricataRule("lan"), "rulesets"); got != "emerging-scan.rules" {
		t.Errorf("an existing interface's rulesets = %q after a mode change, want its own kept", got)
	}
}
