package emu

import (
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
)

// ipsecConfig is the factory config with knobs set (product 2.6.0 so that
// 3DES is allowed where a test asks for it).
func ipsecConfig(t *testing.T, product string, assignments ...string) *configxml.Config {
	t.Helper()
	c, err := configxml.LoadBytes(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetProduct(product); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAll(assignments); err != nil {
		t.Fatalf("SetAll(%q): %v", assignments, err)
	}
	return c
}

func TestLabTunnel(t *testing.T) {
	tests := []struct {
		name        string
		knobs       []string
		xmlEdit     func(c *configxml.Config)
		want        string // ESP proposal of the chosen tunnel; "" = none
		wantSkipped int
	}{
		{name: "factory: the fwab tunnel is disabled", want: ""},
		{name: "enabled", knobs: []string{"ipsec@fwab=aes256-sha256"}, want: "aes256-sha256"},
		{name: "none again", knobs: []string{"ipsec@fwab=aes128gcm16", "ipsec@fwab=none"}, want: ""},
		{
			name:  "other remote gateway is not the lab's peer",
			knobs: []string{"ipsec@fwab=aes128gcm16"},
			xmlEdit: func(c *configxml.Config) {
				c.Root().FindElement("ipsec/phase1/remote-gateway").SetText("198.19.0.99")
			},
			want: "", wantSkipped: 1,
		},
		{
			name:  "phase 2 disabled",
			knobs: []string{"ipsec@fwab=aes128gcm16"},
			xmlEdit: func(c *configxml.Config) {
				c.Root().FindElement("ipsec/phase2").CreateElement("disabled")
			},
			want: "", wantSkipped: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ipsecConfig(t, "2.7.2")
			for _, k := range tt.knobs {
				if err := c.Set(strings.Split(k, "=")[0], strings.Split(k, "=")[1]); err != nil {
					t.Fatal(err)
				}
			}
			if tt.xmlEdit != nil {
				tt.xmlEdit(c)
			}
			got, skipped := LabTunnel(c)
			gotESP := ""
			if got != nil {
				gotESP = got.Proposal.ESP.String()
			}
			if gotESP != tt.want || len(skipped) != tt.wantSkipped {
				t.Errorf("LabTunnel = %q, skipped %q; want %q with %d skipped", gotESP, skipped, tt.want, tt.wantSkipped)
			}
		})
	}
}
