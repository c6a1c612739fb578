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

// TestIPsecCanonicalIsTheConfig: two ipsec values have the same Canonical
// form exactly when they write the same settings (the config less its
// <revision>, which names the change), on both products. The
// matrix relies on it to skip comparing whole configs (Plan.opaqueKnobs),
// and a spec that lists one proposal twice, spelt two ways, is refused.
// strongSwan reads curve25519 and x25519 (curve448 and x448) as one group.
func TestIPsecCanonicalIsTheConfig(t *testing.T) {
	values := []string{
		"aes256-sha256-x25519/aes256gcm16", "aes256-sha256-curve25519/aes256gcm16", "AES256-SHA256-X25519/AES256GCM16",
		"aes256-sha256-x448/aes256gcm16", "aes256-sha256-curve448/aes256gcm16",
		"aes256-sha256-modp2048/aes256gcm16", "aes256gcm16",
		"chacha20poly1305-sha256-x25519/chacha20poly1305", "chacha20poly1305-sha256-curve25519/chacha20poly1305",
		"aes128gcm16-x25519", "aes128gcm16-curve25519",
	}
	for _, name := range []string{"configs/pfsense-2.7.xml", "configs/opnsense-26.1.xml"} {
		t.Run(name, func(t *testing.T) {
			configs := map[string]string{} // config, by canonical value
			var set int
			for _, v := range values {
				c := loadFixture(t, name)
				canon := Canonical("ipsec@site-b", v)
				err := c.Set("ipsec@site-b", v)
				if rev := c.Root().SelectElement("revision"); rev != nil {
					c.Root().RemoveChild(rev)
				}
				if prev, ok := configs[canon]; ok {
					if got := string(c.Bytes()); (err == nil) != (prev != "") || got != prev && err == nil {
						t.Errorf("%s: same Canonical (%s) as an earlier value, but a different config or verdict (err %v)", v, canon, err)
					}
					continue
				}
				if err != nil {
					configs[canon] = ""
					continue
				}
				set++
				configs[canon] = string(c.Bytes())
			}
			seen := map[string]string{}
			for canon, cfg := range configs {
				if cfg == "" {
					continue
				}
				if other, ok := seen[cfg]; ok {
					t.Errorf("%s and %s write the same config but have different Canonical forms", other, canon)
				}
				seen[cfg] = canon
			}
			if set < 3 {
				t.Errorf("only %d values were accepted; the test compares too little", set)
			}
		})
	}
}
