package configxml

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
