package configxml

import (
	"fmt"
	"slices"
	"strings"

	"github.com/beevik/etree"
)

// offloadKnob builds offload.checksum/tso/lro. The value says whether the
// offload is on at the NICs: "off" means the product's disable* flag is set.
//
//   - pfSense and OPNsense ≤25.7: <system><disable…/>, isset-style: present
//     means disabled, whatever its text (firewall.md gotcha 2, A-a, B-a).
//   - OPNsense ≥26.1: <OPNsense><Interfaces><settings><disable…>1|0, a
//     BooleanField whose default when absent is 1: disabled (B-a).
//   - OPNsense, every version: an interface with hw_settings_overwrite
//     takes the flags from its own element instead (offloadOverride).
//     While such an interface runs another value than the others, the
//     knob reads "mixed"; a Set writes the global flag and every
//     override, so all NICs then run the value set.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:572 — `config_path_enabled('system','disablechecksumoffloading')` (2.6.0: line 528, by isset; master: line 575)
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:601 — `config_path_enabled('system','disablesegmentationoffloading')`
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:609 — `config_path_enabled('system','disablelargereceiveoffloading')`
// upstream: pfsense 2.7.2 src/usr/local/pfSense/include/www/system_advanced_network.inc:198 — the GUI sets `$config['system']['disablechecksumoffloading'] = true;` and deletes it with `config_del_path('system/disablechecksumoffloading')`
// upstream: opnsense/core@6a3e447378d418e8e7afdc2c66dc14d2024fd732 src/etc/config.xml.sample:227 — 24.7's factory config has `<disablechecksumoffloading>1</disablechecksumoffloading>` in <system> (25.7: opnsense/core@5bc96393 line 37)
// upstream: opnsense-core 24.7 src/etc/inc/interfaces.lib.inc:571 — ≤25.7 reads them by presence: `if (isset($hwsettings['disablechecksumoffloading']) && $csum_set)` (25.7: interfaces.inc:635)
// upstream: opnsense-core 24.7 src/www/system_advanced_network.php:209 — the GUI writes `$config['system']['disablechecksumoffloading'] = true;` or unsets it (25.7: line 200)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:7 — `<disablechecksumoffloading type="BooleanField">`, Default 1 (the same in 26.7; no such model in 24.7, 25.7)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:11 — `<disablesegmentationoffloading type="BooleanField">`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:15 — `<disablelargereceiveoffloading type="BooleanField">`
func offloadKnob(name, flag, doc string) *KnobSpec {
	return &KnobSpec{
		Name: name, Values: onOff, Action: ActionInterfaces, InConfig: true,
		flavors: []Flavor{PfSense, OPNsense},
		Doc:     doc + "; applied by reconfiguring interfaces (pfSense advises a reboot); reads mixed while OPNsense interfaces override it with another value",
		get: func(c *Config, _ string) (string, error) {
			return c.offloadKnobValue(flag), nil
		},
		parts: offloadParts,
		validate: func(c *Config, _ string, value string) error {
			if !c.offloadMVC() && c.section("system") == nil {
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
			// An override is written as the GUI writes it: the flag true
			// (1) or absent, which both readings take alike.
			// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/www/interfaces.php:1343 — `$new_config['disablechecksumoffloading'] = true;` only under `hw_settings_overwrite`
			for _, ifc := range c.offloadOverrides() {
				if value == "on" {
					c.removeElements(ifc, func(e *etree.Element) bool { return e.Tag == flag })
				} else {
					c.setLeaf(ifc, flag, "1", false)
				}
			}
			if c.offloadMVC() {
				settings := c.ensure(c.top(), "OPNsense/Interfaces/settings")
				v := "1"
				if value == "on" {
					v = "0"
				}
				c.setLeaf(settings, flag, v, false)
				return nil
			}
			system := c.section("system")
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

// offloadFlags are the config's disable flag of each offload knob.
var offloadFlags = map[string]string{
	"offload.checksum": "disablechecksumoffloading",
	"offload.tso":      "disablesegmentationoffloading",
	"offload.lro":      "disablelargereceiveoffloading",
}

// OffloadFor is the value ("on" or "off") the offload knob has on the
// device dev: an OPNsense interface's override where it has one
// (offloadOverride), else the global flag.
func (c *Config) OffloadFor(knob, dev string) (string, error) {
	flag, ok := offloadFlags[knob]
	if !ok {
		return "", fmt.Errorf("%s is not an offload knob (offload.checksum, offload.tso, offload.lro)", knob)
	}
	for _, ifc := range c.offloadOverrides() {
		if childText(ifc, "if") == dev {
			return c.overrideValue(ifc, flag), nil
		}
	}
	return c.offloadGlobal(flag), nil
}

// offloadKnobValue is the knob's value: the one every interface runs, or
// "mixed" when an override makes them differ.
func (c *Config) offloadKnobValue(flag string) string {
	global := c.offloadGlobal(flag)
	over := c.offloadOverrides()
	if len(over) == 0 {
		return global
	}
	seen := map[string]bool{}
	for _, e := range c.section("interfaces").ChildElements() {
		if dev := childText(e, "if"); dev == "" || opnSkipsHardware(dev) {
			continue
		}
		v := global
		if slices.Contains(over, e) {
			v = c.overrideValue(e, flag)
		}
		seen[v] = true
	}
	if len(seen) > 1 {
		return "mixed"
	}
	for v := range seen {
		return v
	}
	return global
}

// opnSkipsHardware reports whether OPNsense sets no capability flags on
// the device: VLANs, QinQ, loopback, VXLAN, IPsec and path-named devices.
//
// upstream: opnsense-core 26.1 src/etc/inc/interfaces.inc:583 — `strstr($device, 'vlan') || strpos($device, 'qinq') === 0 ||` (24.7: interfaces.lib.inc:539)
func opnSkipsHardware(dev string) bool {
	return strings.Contains(dev, "vlan") || strings.HasPrefix(dev, "qinq") || strings.HasPrefix(dev, "lo") ||
		strings.HasPrefix(dev, "vxlan") || strings.HasPrefix(dev, "ipsec") || strings.HasPrefix(dev, "/")
}

// offloadParts: an offload is read from the global flags (pfSense's
// <system>, OPNsense's settings model), OPNsense's per-interface
// overrides and the VLANs and LAGGs under them; a change writes the flags
// and removes the overrides.
func offloadParts(c *Config, _ string) ([]string, []string) {
	reads := []string{"system", "OPNsense/Interfaces", "interfaces", "vlans", "laggs"}
	writes := []string{"system", "OPNsense/Interfaces"}
	if len(c.offloadOverrides()) > 0 {
		writes = append(writes, "interfaces")
	}
	return reads, writes
}

// offloadGlobal is the knob's value from the global flag alone.
func (c *Config) offloadGlobal(flag string) string {
	if c.offloadMVC() {
		if e := c.find("OPNsense/Interfaces/settings/" + flag); e == nil || e.Text() != "0" {
			return "off"
		}
		return "on"
	}
	if c.find("system/"+flag) != nil {
		return "off"
	}
	return "on"
}

// offloadOverrides are the OPNsense <interfaces> entries that override the
// global offload flags: hw_settings_overwrite neither absent nor empty in
// PHP's sense ("" and "0" are empty). pfSense has no such override.
//
// upstream: opnsense-core 24.7 src/etc/inc/interfaces.lib.inc:556 — `if (!empty($ifconf['hw_settings_overwrite'])) {` then `$hwsettings = $ifconf;` (25.7: interfaces.inc:620)
// upstream: opnsense-core 26.1 src/etc/inc/interfaces.inc:602 — `if (!empty($ifconf['hw_settings_overwrite'])) {` (26.7: line 596)
func (c *Config) offloadOverrides() []*etree.Element {
	ifs := c.section("interfaces")
	if c.flavor != OPNsense || ifs == nil {
		return nil
	}
	var out []*etree.Element
	for _, e := range ifs.ChildElements() {
		if phpNonEmpty(e, "hw_settings_overwrite") {
			out = append(out, e)
		}
	}
	return out
}

// overrideValue reads an override's flag: by presence up to 25.7, as
// interfaces_hardware's isset(); by value from 26.1, where an absent flag
// is '0' and !empty() decides.
//
// upstream: opnsense-core 26.1 src/etc/inc/interfaces.inc:605 — `if (!isset($ifconf[$key])) {` then `$hwsettings[$key] = '0';`
// upstream: opnsense-core 26.1 src/etc/inc/interfaces.inc:626 — `if (!empty($hwsettings['disablechecksumoffloading']) && $csum_set) {`
func (c *Config) overrideValue(ifc *etree.Element, flag string) string {
	off := ifc.SelectElement(flag) != nil
	if c.offloadMVC() {
		off = phpNonEmpty(ifc, flag)
	}
	if off {
		return "off"
	}
	return "on"
}

// phpNonEmpty is PHP's !empty() on a child element's text: present, and
// neither "" nor "0".
func phpNonEmpty(e *etree.Element, tag string) bool {
	c := e.SelectElement(tag)
	if c == nil {
		return false
	}
	t := strings.TrimSpace(c.Text())
	return t != "" && t != "0"
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
	for _, v := range c.findAll("vlans/vlan", false) {
		if childText(v, "vlanif") == dev && childText(v, "if") != "" {
			return []string{childText(v, "if")}
		}
	}
	for _, l := range c.findAll("laggs/lagg", false) {
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
