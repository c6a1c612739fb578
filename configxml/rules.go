package configxml

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// Generated rules (rules@IF=N) are ordinary block rules that match no real
// traffic: TCP from an address in 198.18.128.0/17 to 198.19.200.1 on a high
// port. The firewall still evaluates them, which is the cost being measured.
// They carry a description starting with GeneratedPrefix and, on pfSense, a
// tracker in a reserved range, so that exactly they are removed again.
const (
	GeneratedPrefix = "fwab-generated"
	maxRules        = 200_000
	trackerBase     = 4_100_000_000
	trackerPerIf    = 10_000_000
)

// generatedRule is what rule i on an interface matches.
func generatedRule(i int) (src, dst, port string) {
	src = fmt.Sprintf("198.18.%d.%d", 128+(i/256)%128, i%256)
	return src, "198.19.200.1", strconv.Itoa(10000 + i/32768)
}

func validateRules(c *Config, iface string, value string) error {
	n, err := strconv.Atoi(value)
	if err != nil || n < 0 {
		return fmt.Errorf("invalid value %q: give a rule count N ≥ 0", value)
	}
	if n > maxRules {
		return fmt.Errorf("%d rules is more than the %d fwab generates", n, maxRules)
	}
	return c.trackersFree(iface, n)
}

// trackersFree refuses a count whose generated rules would take a tracker
// a rule fwab did not generate has already: pfSense gives a duplicate a
// new tracker and its per-rule counters mix (FWAB005). No GUI gives out
// trackers that high, so only a hand-made config meets this.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3687 — `$rule['tracker']` becomes the rule's ridentifier and label
func (c *Config) trackersFree(iface string, n int) error {
	if c.flavor != PfSense || n == 0 {
		return nil
	}
	first := uint64(trackerBase + slices.Index(c.interfaceKeys(), iface)*trackerPerIf + 1)
	i := 0
	for _, r := range c.indexOf("filter") {
		if r.tag != "rule" {
			continue
		}
		i++
		t, err := strconv.ParseUint(r.tracker, 10, 64)
		if err != nil || t < first || t >= first+uint64(n) || c.generatedRule(r, iface) {
			continue
		}
		return fmt.Errorf("generated rule %d would take tracker %d, which filter rule %d already has: give at most %d rules on %s, or give that rule another tracker", t-first+1, t, i, t-first, iface)
	}
	return nil
}

// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:4256 — `config_get_path('filter/rule', [])`
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3687 — `$rule['tracker']` becomes the rule's ridentifier and label
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:65 — legacy rules are `$config['filter']['rule'][$i]` (24.7 and 26.7 the same)
// upstream: opnsense/core@d9ac167d3b2a603dd28500db089f94fc00fad74e src/etc/config.xml.sample:117 — 26.7's factory config keeps its rules in `<OPNsense><Firewall><Filter><rules>`
// upstream: opnsense-core 26.7 src/opnsense/mvc/app/models/OPNsense/Firewall/Filter.xml:20 — `<rule type=".\FilterRuleField">` below rules, mount //OPNsense/Firewall/Filter
// upstream: opnsense-core 26.7 src/opnsense/mvc/app/models/OPNsense/Firewall/Filter.xml:43 — `<sequence type=".\FilterSequenceField">`, 1…999999

// rulesMVC reports whether filter rules live in OPNsense's MVC model (26.7 on).
func (c *Config) rulesMVC() bool {
	return c.flavor == OPNsense && c.productAtLeast("26.7")
}

func (c *Config) isGenerated(r *etree.Element, iface string) bool {
	if c.rulesMVC() {
		return strings.HasPrefix(childText(r, "description"), GeneratedPrefix+" ") && childText(r, "interface") == iface
	}
	return c.generatedRule(childOf(r, span{}), iface)
}

// generatedRule is isGenerated for a legacy rule from its index entry.
func (c *Config) generatedRule(r child, iface string) bool {
	if r.tag != "rule" || !strings.HasPrefix(r.descr, GeneratedPrefix+" ") || r.iface != iface {
		return false
	}
	if c.flavor == PfSense {
		t, err := strconv.ParseUint(r.tracker, 10, 64)
		return err == nil && t >= trackerBase
	}
	return true
}

func (c *Config) ruleParent() *etree.Element {
	if c.rulesMVC() {
		return c.find("OPNsense/Firewall/Filter/rules")
	}
	return c.section("filter")
}

func getRules(c *Config, iface string) (string, error) {
	n := 0
	count := func(r *etree.Element) bool {
		if c.isGenerated(r, iface) {
			n++
		}
		return true
	}
	switch {
	case c.rulesMVC():
		if p := c.ruleParent(); p != nil {
			for _, r := range p.SelectElements("rule") {
				count(r)
			}
		}
	default:
		// From the index: <filter> may hold tens of thousands of
		// rules, and an unread one is not built.
		for _, r := range c.indexOf("filter") {
			if c.generatedRule(r, iface) {
				n++
			}
		}
	}
	return strconv.Itoa(n), nil
}

func setRules(c *Config, iface, value string) error {
	n, _ := strconv.Atoi(value) // validated
	parent := c.ruleParent()
	if parent == nil {
		if c.rulesMVC() {
			parent = c.ensure(c.top(), "OPNsense/Firewall/Filter/rules")
		} else {
			parent = c.ensure(c.top(), "filter")
		}
	}
	c.removeElements(parent, func(e *etree.Element) bool { return e.Tag == "rule" && c.isGenerated(e, iface) })
	ifIndex := 0
	for i, key := range c.interfaceKeys() {
		if key == iface {
			ifIndex = i
		}
	}
	seq := 1
	if c.rulesMVC() {
		seq = firstSequence(parent, iface)
	}
	rules := make([]*etree.Element, n)
	for i := range rules {
		switch {
		case c.rulesMVC():
			rules[i] = mvcRule(iface, ifIndex, i, seq)
		case c.flavor == OPNsense:
			rules[i] = legacyRule(iface, i, "", false)
			rules[i].CreateAttr("uuid", generatedUUID(ifIndex, i))
		default:
			rules[i] = legacyRule(iface, i, strconv.Itoa(trackerBase+ifIndex*trackerPerIf+i+1), true)
		}
	}
	// Legacy rules go before the interface's own rules, so that its traffic
	// walks them before the rule that passes it (pf stops at the first quick
	// match: rules behind a pass-all rule are never evaluated, and cost
	// nothing). MVC rules are ordered by sequence instead: see mvcRule.
	if !c.rulesMVC() {
		for _, r := range parent.SelectElements("rule") {
			if childText(r, "interface") == iface && r.SelectElement("floating") == nil {
				c.insertChildrenBefore(parent, rules, r)
				return nil
			}
		}
	}
	c.insertChildren(parent, rules, "rule")
	return nil
}

// legacyRule is a <filter><rule> as pfSense's GUI writes one (firewall.md
// A-c); OPNsense's legacy rules have the same shape without the CDATA.
func legacyRule(iface string, i int, tracker string, cdata bool) *etree.Element {
	src, dst, port := generatedRule(i)
	r := elem("rule")
	if tracker != "" {
		r.AddChild(leaf("tracker", tracker))
	}
	for _, e := range []*etree.Element{
		leaf("type", "block"),
		leaf("interface", iface),
		leaf("ipprotocol", "inet"),
		leaf("protocol", "tcp"),
		elem("source", leaf("address", src)),
		elem("destination", leaf("address", dst), leaf("port", port)),
		textLeaf("descr", fmt.Sprintf("%s %d", GeneratedPrefix, i+1), cdata),
	} {
		r.AddChild(e)
	}
	return r
}

// firstSequence is the lowest sequence among iface's MVC rules (1 when it
// has none): the generated rules take it, so that they come first.
func firstSequence(parent *etree.Element, iface string) int {
	low := 0
	for _, r := range parent.SelectElements("rule") {
		if childText(r, "interface") != iface {
			continue
		}
		if n, err := strconv.Atoi(childText(r, "sequence")); err == nil && n >= 1 && (low == 0 || n < low) {
			low = n
		}
	}
	return max(low, 1)
}

// mvcRule is an OPNsense 26.7 <Firewall><Filter><rules><rule> (firewall.md
// B-c). OPNsense orders MVC rules by sequence and breaks ties by uuid, so
// the generated rules share the interface's lowest sequence (see
// firstSequence) and carry uuids that sort before others: they come before
// the interface's own rules, as legacy ones do (see setRules).
//
// upstream: opnsense/core@821598263289e177b40971600f06f5a91d9faef3 src/etc/inc/plugins.inc.d/pf.inc:170 — MVC rules registered `sortedBy(['sequence'])`, before the legacy rules (filter.inc:192 registers those after plugins_firewall)
// upstream: opnsense/core@821598263289e177b40971600f06f5a91d9faef3 src/opnsense/mvc/app/models/OPNsense/Base/FieldTypes/ArrayField.php:216 — `$sortKey .= $nodeKey;` ties in sequence are ordered by uuid (natural, case-insensitive)
func mvcRule(iface string, ifIndex, i, seq int) *etree.Element {
	src, dst, port := generatedRule(i)
	r := elem("rule",
		leaf("enabled", "1"),
		leaf("sequence", strconv.Itoa(seq)),
		leaf("action", "block"),
		leaf("quick", "1"),
		leaf("interface", iface),
		leaf("direction", "in"),
		leaf("ipprotocol", "inet"),
		leaf("protocol", "TCP"),
		leaf("source_net", src),
		leaf("destination_net", dst),
		leaf("destination_port", port),
		leaf("description", fmt.Sprintf("%s %d", GeneratedPrefix, i+1)),
	)
	r.CreateAttr("uuid", fmt.Sprintf("00000000-%04x-4000-8000-%012d", ifIndex, i))
	return r
}

// generatedUUID is a stable, valid version-4-shaped UUID for rule i.
func generatedUUID(ifIndex, i int) string {
	return fmt.Sprintf("f0ab%04x-0000-4000-8000-%012x", ifIndex, i)
}
