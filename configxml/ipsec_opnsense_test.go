package configxml

import (
	"strings"
	"testing"
)

// TestOPNsenseLegacyTunnelRefused: an OPNsense legacy tunnel (<ipsec>
// <phase1>, as 24.7's core and later the legacy plugin run it) is not one
// fwab edits: ipsec@ on its name is refused, on read and on change, with
// the reason and the way out, instead of reading "none" and creating a
// second connection to the same peer beside it.
func TestOPNsenseLegacyTunnelRefused(t *testing.T) {
	c := load(t, "configs/opnsense-24.7.xml")
	ipsec := c.root().SelectElement("ipsec")
	if ipsec == nil {
		ipsec = c.root().CreateElement("ipsec")
	}
	p1 := ipsec.CreateElement("phase1")
	p1.CreateElement("ikeid").SetText("1")
	p1.CreateElement("descr").SetText("Site B")
	p1.CreateElement("remote-gateway").SetText("198.18.9.1")
	orig := c.Bytes()
	if _, err := c.Get("ipsec@Site B"); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("Get(ipsec@Site B) = %v, want an error naming the legacy tunnel", err)
	}
	err := c.Set("ipsec@Site B", "aes128gcm16")
	if err == nil || !strings.Contains(err.Error(), "legacy") || !strings.Contains(err.Error(), "Connections") {
		t.Errorf("Set(ipsec@Site B) = %v, want a refusal naming the legacy tunnel and VPN → IPsec → Connections", err)
	}
	if string(orig) != string(c.Bytes()) {
		t.Error("a refused Set changed the config")
	}
	// ikeidN names an unnamed legacy tunnel, as for pfSense.
	p1.RemoveChild(p1.SelectElement("descr"))
	if _, err := c.Get("ipsec@ikeid1"); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("Get(ipsec@ikeid1) = %v, want an error naming the legacy tunnel", err)
	}
	// Other tunnels are untouched by the refusal.
	if v, err := c.Get("ipsec@fwab"); err != nil || v != "none" {
		t.Errorf("Get(ipsec@fwab) = %q, %v; want none (no such tunnel yet)", v, err)
	}
}
