package fwapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
)

const vlanOverLAN = `<?xml version="1.0"?>
<pfsense>
  <interfaces>
    <wan><if>igb0</if><ipaddr>dhcp</ipaddr></wan>
    <lan><if>igb1</if><ipaddr>198.18.1.1</ipaddr><subnet>24</subnet></lan>
    <opt1><if>igb1.100</if><ipaddr>198.18.100.1</ipaddr><subnet>24</subnet></opt1>
    <opt2><if>igb2</if><ipaddr>198.18.2.1</ipaddr><subnet>24</subnet></opt2>
  </interfaces>
  <vlans><vlan><if>igb1</if><tag>100</tag><vlanif>igb1.100</vlanif></vlan></vlans>
</pfsense>`

// TestManagementDevices: the device $SSH_CONNECTION's server address is
// on, found in the config or (a DHCP address) in ifconfig -a, with what
// lies underneath it; and the interfaces whose apply would touch them.
func TestManagementDevices(t *testing.T) {
	cfg, err := configxml.LoadBytes([]byte(vlanOverLAN))
	if err != nil {
		t.Fatal(err)
	}
	ifconfig := "igb0: flags=8843<UP> metric 0 mtu 1500\n\tinet 198.19.7.7 netmask 0xffffff00\nigb1: flags=8843<UP> metric 0 mtu 1500\n\tinet 198.18.1.1 netmask 0xffffff00\n\tinet6 fe80::1%igb1 prefixlen 64 scopeid 0x2\n"
	cases := []struct {
		conn     string
		wantDevs []string
		wantKeys []string
	}{
		{"198.18.1.10 50022 198.18.1.1 22", []string{"igb1"}, []string{"lan", "opt1"}},
		{"198.18.100.10 50022 198.18.100.1 22", []string{"igb1.100", "igb1"}, []string{"lan", "opt1"}},
		{"198.19.7.10 50022 198.19.7.7 22", []string{"igb0"}, []string{"wan"}},
		{"fe80::10%igb1 50022 fe80::1%igb1 22", []string{"igb1"}, []string{"lan", "opt1"}}, // IPv6 link-local
		{"127.0.0.1 50022 127.0.0.1 22", nil, nil},
		{"", nil, nil}, // no SSH_CONNECTION: nothing to leave out
	}
	for _, c := range cases {
		run := func(_ context.Context, cmd string) (string, error) {
			switch cmd {
			case `echo "$SSH_CONNECTION"`:
				return c.conn + "\n", nil
			case "ifconfig -a":
				return ifconfig, nil
			}
			return "", errors.New("unexpected command " + cmd)
		}
		devs, err := managementDevices(t.Context(), run, cfg)
		if err != nil {
			t.Fatalf("%q: %v", c.conn, err)
		}
		if !slices.Equal(devs, c.wantDevs) {
			t.Errorf("%q: devices %v, want %v", c.conn, devs, c.wantDevs)
		}
		if keys := keysOver(cfg, devs); !slices.Equal(keys, c.wantKeys) {
			t.Errorf("%q: interfaces over them %v, want %v", c.conn, keys, c.wantKeys)
		}
	}
}

// TestOffloadApplyCommands: the GUI's own functions, the skipped names as
// a PHP array; a name that could escape the quoting is refused.
func TestOffloadApplyCommands(t *testing.T) {
	pf, err := pfOffloadApply([]string{"lan", "opt1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"get_configured_interface_list(true)", `array("lan", "opt1")`, "enable_hardware_offloading($if)"} {
		if !strings.Contains(pf, want) {
			t.Errorf("pfSense offload apply %q lacks %q", pf, want)
		}
	}
	opn, err := opnOffloadApply(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"get_interface_list()", "array()", "configure_interface_hardware($dev, $details)"} {
		if !strings.Contains(opn, want) {
			t.Errorf("OPNsense offload apply %q lacks %q", opn, want)
		}
	}
	for _, bad := range []string{`lan"); system("id`, "lan'", "$x", "a b", ""} {
		if _, err := pfOffloadApply([]string{bad}); err == nil {
			t.Errorf("pfOffloadApply(%q) = nil error, want a refusal", bad)
		}
	}
}
