package configxml

import (
	"fmt"

	"github.com/beevik/etree"
)

// The filter knob is the E302 review's "router mode": <system><disablefilter>
// present means pf is off. A filter reload then disables pf (pfctl -d) and
// returns before loading any rules, so nothing is filtered and, the NAT
// rules being part of the same ruleset, nothing is translated either.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:374 — `config_path_enabled('system','disablefilter')`: pfctl -e when absent, otherwise pfctl -d and return (2.6.0: line 323; master: line 955)
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:379 — `Filter is disabled.  Not loading rules.`
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:492 — NAT goes into the same ruleset, `$rules .= "{$natrules}\n";`, which a disabled filter never loads: router mode has no NAT
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:303 — `if (!isset($config['system']['disablefilter']))`: pfctl -e, otherwise pfctl -d and return (24.7: line 263; 25.7: line 281; 26.7: line 308)
// upstream: not settled — whether pfSense's config_path_enabled reads the element's text (array_path_enabled is not in the upstream copy); fwab writes an empty element or removes it, and checked at run time by fwapi.VerifyRuntime (FWAB110), which reads `pfctl -si`'s Status line

const (
	FilterEnabled  = "enabled"
	FilterDisabled = "disabled"
)

func getFilter(c *Config, _ string) (string, error) {
	if c.find("system/disablefilter") != nil {
		return FilterDisabled, nil
	}
	return FilterEnabled, nil
}

func validateFilter(c *Config, _, _ string) error {
	if c.section("system") == nil {
		return fmt.Errorf("the config has no <system> element")
	}
	return nil
}

func setFilter(c *Config, _ string, value string) error {
	system := c.section("system")
	if system == nil {
		return fmt.Errorf("the config has no <system> element")
	}
	c.removeElements(system, func(e *etree.Element) bool { return e.Tag == "disablefilter" })
	if value == FilterDisabled {
		text := ""
		if c.flavor == OPNsense {
			text = "1"
		}
		c.insertChild(system, leaf("disablefilter", text), "")
	}
	return nil
}

// NeedsFilter reports why a knob value needs pf running, or "" when it
// does not: with the filter disabled no rule, NAT or table is loaded, so
// such a point would measure a state the firewall is not in.
func NeedsFilter(knob, value string) string {
	ref, err := ParseRef(knob)
	if err != nil {
		return ""
	}
	value = Canonical(knob, value)
	switch ref.Name {
	case "nat.outbound":
		// Every mode but disabled translates (automatic is the default, so
		// it is refused only when a point sets it).
		if value != "disabled" {
			return fmt.Sprintf("%s=%s is outbound NAT, and NAT rules are pf rules: a disabled filter loads none (use nat.outbound=disabled)", knob, value)
		}
	case "rules":
		if value != "0" {
			return fmt.Sprintf("%s=%s adds filter rules, which a disabled filter never loads", ref, value)
		}
	case "blocklist":
		if value == "on" {
			return fmt.Sprintf("%s=on blocks with pf tables and rules, which a disabled filter never loads", knob)
		}
	}
	return ""
}
