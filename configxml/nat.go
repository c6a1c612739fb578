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
	if e := c.find("nat/outbound/mode"); e != nil && e.Text() != "" {
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
	if value == "advanced" && c.manualOutboundRules() == 0 {
		src := c
		if c.before != nil {
			src = c.before // checked again after the set: was it the box's own?
		}
		if m, _ := getNATMode(src, ""); m != "advanced" {
			return fmt.Errorf("advanced needs manual rules, and the config has no enabled manual outbound NAT rule: the firewall would translate nothing (pfSense's GUI copies the automatic rules first, fwab does not; OPNsense's never does); use hybrid, or add manual rules (an xml: knob) in an earlier step")
		}
	}
	return nil
}

func setNATMode(c *Config, _ string, value string) error {
	outbound := c.ensure(c.top(), "nat/outbound")
	c.setLeaf(outbound, "mode", value, false)
	return nil
}

// outboundRules counts the manual outbound NAT rules the product takes
// as enabled: the legacy <nat><outbound><rule>s and OPNsense's MVC ones.
// pfSense skips a legacy rule with a <disabled> element at all; OPNsense
// one whose <disabled> is not empty in PHP's sense ("" and "0" are
// empty), and an MVC rule whose <enabled> is.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:2436 — `if (isset($obent['disabled'])) {`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Firewall/Rule.php:469 — `return empty($this->rule['disabled']);`
// upstream: opnsense/core@8cc69b21e0f4c2622fc8a62df2a15ba7cb1e731f src/opnsense/mvc/app/models/OPNsense/Firewall/FieldTypes/SourceNatRuleField.php:79 — `$result['disabled'] = empty((string)$this->enabled);`
func (c *Config) outboundRules() (legacy, mvc int) {
	phpEmpty := func(s string) bool { return s == "" || s == "0" }
	for _, r := range c.findAll("nat/outbound/rule", false) {
		d := r.SelectElement("disabled")
		if c.flavor == OPNsense && (d == nil || phpEmpty(d.Text())) || c.flavor != OPNsense && d == nil {
			legacy++
		}
	}
	for _, r := range c.findAll("OPNsense/Firewall/Filter/snatrules/rule", false) {
		if !phpEmpty(childText(r, "enabled")) {
			mvc++
		}
	}
	return legacy, mvc
}

// manualOutboundRules is how many manual outbound rules advanced mode
// translates with: every enabled one, of either kind.
func (c *Config) manualOutboundRules() int {
	legacy, mvc := c.outboundRules()
	return legacy + mvc
}

// hybridAddsRules reports whether hybrid mode adds rules to what automatic
// mode translates with: the enabled legacy rules, and the MVC ones from
// OPNsense 26.1.11 on. Before it, OPNsense loaded the MVC rules in every
// mode, automatic too.
//
// upstream: opnsense/core@6f3b49f68116ead7ca6b58846813daf378f9544b src/etc/inc/plugins.inc.d/pf.inc:177 — `in_array($config['nat']['outbound']['mode'], ['advanced', 'hybrid'])` now guards the MVC rules (first in 26.1.11; the 24.7 to 26.1.10 pf.inc registers them unconditionally)
func (c *Config) hybridAddsRules() bool {
	legacy, mvc := c.outboundRules()
	return legacy > 0 || mvc > 0 && c.productAtLeast("26.1.11")
}
