package configxml

import (
	"fmt"
	"strings"

	"github.com/beevik/etree"
)

// offloadKnob builds offload.checksum/tso/lro. The value says whether the
// offload is on at the NIC: "off" means the product's disable* flag is set.
//
//   - pfSense and OPNsense ≤25.7: <system><disable…/>, isset-style: present
//     means disabled, whatever its text (firewall.md gotcha 2, A-a, B-a).
//   - OPNsense ≥26.1: <OPNsense><Interfaces><settings><disable…>1|0, a
//     BooleanField whose default when absent is 1: disabled (B-a).
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:572 — `config_path_enabled('system','disablechecksumoffloading')` (2.6.0: line 528, by isset; master: line 575)
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:601 — `config_path_enabled('system','disablesegmentationoffloading')`
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:609 — `config_path_enabled('system','disablelargereceiveoffloading')`
// upstream: pfsense 2.7.2 src/usr/local/pfSense/include/www/system_advanced_network.inc:198 — the GUI sets `$config['system']['disablechecksumoffloading'] = true;` and deletes it with `config_del_path('system/disablechecksumoffloading')`
// upstream: opnsense/core@6a3e447378d418e8e7afdc2c66dc14d2024fd732 src/etc/config.xml.sample:227 — 24.7's factory config has `<disablechecksumoffloading>1</disablechecksumoffloading>` in <system> (25.7: opnsense/core@5bc96393 line 37)
// upstream: not settled — whether OPNsense ≤25.7 reads <system><disable…> by presence or by a non-empty, non-0 text (interfaces.inc is not in the upstream copy); fwab writes 1 or removes the element, which read the same either way, and checked at run time by fwapi.VerifyRuntime (FWAB101), which compares the NIC's live options with the config
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:7 — `<disablechecksumoffloading type="BooleanField">`, Default 1 (the same in 26.7; no such model in 24.7, 25.7)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:11 — `<disablesegmentationoffloading type="BooleanField">`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:15 — `<disablelargereceiveoffloading type="BooleanField">`
func offloadKnob(name, flag, doc string) *KnobSpec {
	return &KnobSpec{
		Name: name, Values: onOff, Action: ActionInterfaces, InConfig: true,
		flavors: []Flavor{PfSense, OPNsense},
		Doc:     doc + "; applied by reconfiguring interfaces (pfSense advises a reboot)",
		get: func(c *Config, _ string) (string, error) {
			if c.offloadMVC() {
				e := c.doc.Root().FindElement("OPNsense/Interfaces/settings/" + flag)
				if e == nil || e.Text() != "0" {
					return "off", nil
				}
				return "on", nil
			}
			if c.doc.Root().FindElement("system/"+flag) != nil {
				return "off", nil
			}
			return "on", nil
		},
		validate: func(c *Config, _ string, value string) error {
			if !c.offloadMVC() && c.doc.Root().SelectElement("system") == nil {
				return fmt.Errorf("the config has no <system> element")
			}
			if name == "offload.checksum" && value == "on" && c.flavor == PfSense {
				for _, i := range c.Interfaces() {
					if PfSenseForcesChecksumOff(i.Device) {
						return fmt.Errorf("interface %s is on %s: pfSense always disables checksum offload on vtnet and ena NICs, whatever <system><disablechecksumoffloading> says (pfsense-utils.inc hardware_offloading_applyflags), so on would measure a state pfSense never runs", i.Key, i.Device)
					}
				}
			}
			return nil
		},
		set: func(c *Config, _ string, value string) error {
			root := c.doc.Root()
			if c.offloadMVC() {
				settings := c.ensure(root, "OPNsense/Interfaces/settings")
				v := "1"
				if value == "on" {
					v = "0"
				}
				c.setLeaf(settings, flag, v, false)
				return nil
			}
			system := root.SelectElement("system")
			if system == nil {
				return fmt.Errorf("the config has no <system> element")
			}
			if value == "on" {
				c.removeElements(system, func(e *etree.Element) bool { return e.Tag == flag })
				return nil
			}
			text := ""
			if c.flavor == OPNsense {
				text = "1"
			}
			c.insertChild(system, leaf(flag, text), "")
			return nil
		},
	}
}

// offloadMVC reports whether offload flags live in OPNsense's MVC model.
func (c *Config) offloadMVC() bool {
	return c.flavor == OPNsense && c.productAtLeast("26.1")
}

// PfSenseForcesChecksumOff reports whether pfSense turns checksum offload
// off on the NIC dev whatever the config says: its name contains vtnet or
// ena, case-insensitively (PHP's stristr, a substring match, so a VLAN such
// as vtnet0.10 matches too).
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:573 — `stristr($iface, "vtnet") || stristr($iface, "ena")` forces TXCSUM, RXCSUM and their IPv6 forms off (2.6.0: line 529; master: line 576)
func PfSenseForcesChecksumOff(dev string) bool {
	d := strings.ToLower(dev)
	return strings.Contains(d, "vtnet") || strings.Contains(d, "ena")
}

// OffloadDevices are the devices pfSense applies its offload flags to, in
// its order: the <interfaces> entries in document order (disabled ones
// too), each preceded by its first parent as get_parent_interface finds it
// (the VLAN's parent for a VLAN, the first member for a LAGG), each device
// once. Unassigned NICs are not in it. A LAGG's other members get the flags
// through the LAGG itself: FreeBSD's lagg passes a capability change on to
// every port.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:734 — setup_microcode walks `get_configured_interface_list(true)` (2.6.0: line 703; master: line 737)
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/util.inc:1635 — get_configured_interface_list keeps config order: `foreach (config_get_path('interfaces', []) as $if => $if_detail)` (2.6.0: line 1477; master: line 2403)
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:647 — `$realhwif = get_parent_interface($interface);` the parent first, then the VLAN (2.6.0: line 605; master: line 650)
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:651 — `hardware_offloading_applyflags($realhwif[0]);` only the first parent
// upstream: pfsense 2.7.2 src/etc/inc/interfaces.inc:5796 — `$lagg = interface_is_type($realif, 'lagg');` a LAGG's parents are its members
//
// (FreeBSD's lagg_ioctl, case SIOCSIFCAP, passes the request to each port:
// sys/net/if_lagg.c as read at freebsd/freebsd-src@01b359d4665d9590a25420bd4f12b9b672ea5d30.)
func (c *Config) OffloadDevices() []string {
	var out []string
	seen := map[string]bool{}
	add := func(d string) {
		if d != "" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, i := range c.Interfaces() {
		if p := c.lowerDevices(i.Device); len(p) > 0 {
			add(p[0])
		}
		add(i.Device)
	}
	return out
}

// UnderneathDevices are the devices dev runs on, recursively: a VLAN's
// parent, a LAGG's members. Changing a capability on any of them can reset
// dev's link.
func (c *Config) UnderneathDevices(dev string) []string {
	var out []string
	for _, p := range c.lowerDevices(dev) {
		out = append(out, p)
		out = append(out, c.UnderneathDevices(p)...)
	}
	return out
}

// lowerDevices are dev's parents as pfSense's get_parent_interface finds
// them: the VLAN's parent, else the LAGG's members; none for a NIC.
//
// upstream: pfsense 2.7.2 src/etc/inc/interfaces.inc:5788 — `$vlan = interface_is_vlan($realif);` first
// upstream: pfsense 2.7.2 src/etc/inc/interfaces.inc:5798 — then the LAGG's members: `explode(",", $lagg['members'])`
func (c *Config) lowerDevices(dev string) []string {
	root := c.doc.Root()
	for _, v := range root.FindElements("vlans/vlan") {
		if childText(v, "vlanif") == dev && childText(v, "if") != "" {
			return []string{childText(v, "if")}
		}
	}
	for _, l := range root.FindElements("laggs/lagg") {
		if childText(l, "laggif") == dev && childText(l, "members") != "" {
			var members []string
			for _, m := range strings.Split(childText(l, "members"), ",") {
				if m = strings.TrimSpace(m); m != "" {
					members = append(members, m)
				}
			}
			return members
		}
	}
	return nil
}
