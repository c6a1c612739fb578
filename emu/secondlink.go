package emu

import (
	"fmt"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// AddSecondLink gives a fresh lab's config the second link's ports: opt1
// (LAN2, igb2) and opt2 (WAN2, igb3) with the DUT's addresses, and a rule
// on opt1 that passes what LAN2's clients send, as the default LAN rule
// does for LAN (an OPT interface has no rules of its own, so pf blocks
// it). opt2 has no gateway: it is no WAN, so no outbound NAT applies.
//
// upstream: pfsensible/core@f26f674435c6d1a1736f8c202c6e4712a9a67380 tests/unit/plugins/modules/fixtures/pfsense_ipsec_config.xml:128 — a real config's OPT interface: `<opt1>` with `if`, `descr`, `enable`, `ipaddr` and `subnet`, as the lab's LAN has them
func (e *Emulator) AddSecondLink() error {
	path := e.path("/conf/config.xml")
	data, err := e.ReadFile("/conf/config.xml")
	if err != nil {
		return err
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		return err
	}
	root := c.Root()
	ifs := root.SelectElement("interfaces")
	filter := root.SelectElement("filter")
	if ifs == nil || filter == nil {
		return fmt.Errorf("%s has no interfaces or filter section", path)
	}
	for _, p := range []struct{ key, dev, descr, addr string }{{"opt1", "igb2", "LAN2", DUTLan2Addr}, {"opt2", "igb3", "WAN2", DUTWan2Addr}} {
		if ifs.SelectElement(p.key) != nil {
			continue
		}
		x := ifs.CreateElement(p.key)
		x.CreateElement("enable")
		x.CreateElement("if").SetText(p.dev)
		x.CreateElement("descr").SetText(p.descr)
		x.CreateElement("ipaddr").SetText(p.addr)
		x.CreateElement("subnet").SetText("24")
	}
	rule := etree.NewElement("rule")
	if c.Flavor() == configxml.OPNsense {
		rule.CreateAttr("uuid", "e3a1c8f0-5b7d-4c2e-8f6a-1d9b0c7e5b01")
	}
	rule.CreateElement("type").SetText("pass")
	rule.CreateElement("ipprotocol").SetText("inet")
	rule.CreateElement("descr").SetText("Default allow LAN2 to any rule")
	rule.CreateElement("interface").SetText("opt1")
	rule.CreateElement("source").CreateElement("network").SetText("opt1")
	rule.CreateElement("destination").CreateElement("any")
	filter.AddChild(rule)
	return atomicfile.WriteFile(path, c.Bytes(), 0o644)
}
