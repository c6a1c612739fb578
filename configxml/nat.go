package configxml

// Outbound NAT mode: <nat><outbound><mode>, the same on both products; a
// missing mode means automatic (firewall.md A-b, B-b).

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
