package configxml

import "fmt"

// Outbound NAT mode: <nat><outbound><mode>, the same on both products; a
// missing mode means automatic (firewall.md A-b, B-b). On OPNsense any mode
// but automatic and hybrid (so advanced and disabled) generates no automatic
// rules, and only advanced and hybrid add the manual ones.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:2426 — `config_get_path('nat/outbound/mode')`, then cases disabled, advanced, hybrid, automatic
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:196 — manual rules when the mode is `array("advanced", "hybrid")`
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:208 — automatic rules when the mode is `empty($config['nat']['outbound']['mode'])` or automatic or hybrid
// upstream: opnsense-core 26.7 src/opnsense/mvc/app/models/OPNsense/Firewall/Filter.xml:441 — MVC outbound rules live in `<snatrules>`

func getNATMode(c *Config, _ string) (string, error) {
	if e := c.doc.Root().FindElement("nat/outbound/mode"); e != nil && e.Text() != "" {
		return e.Text(), nil
	}
	return "automatic", nil
}

// validateNATMode refuses advanced where no enabled manual rule exists:
// the firewall would translate nothing. The pfSense GUI copies the
// automatic rules into manual ones when it switches to advanced; fwab does
// not (the copy needs the box's runtime state: DHCP routers, VPN
// networks), and OPNsense's GUI never did.
//
// upstream: pfsense 2.7.2 src/usr/local/pfSense/include/www/firewall_nat_out.inc:45 — `if ($post['mode'] == "advanced" && ($mode == "automatic" || $mode == "hybrid"))`: the automatic rules are copied first (2.6.0: 45; master: 141)
// upstream: not settled — OPNsense's outbound NAT page is not in the upstream copy; opnsense/core@30366b8bee0a4740b40fd6c18eee5821bbebb25c removed its copy (2018), so advanced with no rules translates nothing; checked at run time by fwapi.VerifyRuntime's NAT check (pfctl -sn)
func validateNATMode(c *Config, _, value string) error {
	if value == "advanced" && c.outboundRules() == 0 {
		if m, _ := getNATMode(c, ""); m != "advanced" {
			return fmt.Errorf("advanced needs manual rules, and the config has no enabled manual outbound NAT rule: the firewall would translate nothing (pfSense's GUI copies the automatic rules first, fwab does not; OPNsense's never does); use hybrid, or add manual rules (an xml: knob) in an earlier step")
		}
	}
	return nil
}

func setNATMode(c *Config, _ string, value string) error {
	outbound := c.ensure(c.doc.Root(), "nat/outbound")
	c.setLeaf(outbound, "mode", value, false)
	return nil
}

// outboundRules counts the manual outbound NAT rules that are not disabled.
func (c *Config) outboundRules() int {
	n := 0
	for _, r := range c.doc.Root().FindElements("nat/outbound/rule") {
		if r.SelectElement("disabled") == nil {
			n++
		}
	}
	for _, r := range c.doc.Root().FindElements("OPNsense/Firewall/Filter/snatrules/rule") {
		if childText(r, "enabled") != "0" {
			n++
		}
	}
	return n
}
