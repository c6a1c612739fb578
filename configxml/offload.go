package configxml

import (
	"fmt"

	"github.com/beevik/etree"
)

// offloadKnob builds offload.checksum/tso/lro. The value says whether the
// offload is on at the NIC: "off" means the product's disable* flag is set.
//
//   - pfSense and OPNsense ≤25.7: <system><disable…/>, isset-style: present
//     means disabled, whatever its text (firewall.md gotcha 2, A-a, B-a).
//   - OPNsense ≥26.1: <OPNsense><Interfaces><settings><disable…>1|0, a
//     BooleanField whose default when absent is 1: disabled (B-a).
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
		validate: func(c *Config, _ string, _ string) error {
			if !c.offloadMVC() && c.doc.Root().SelectElement("system") == nil {
				return fmt.Errorf("the config has no <system> element")
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
