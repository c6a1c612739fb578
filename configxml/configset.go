package configxml

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/beevik/etree"
)

// The config knob is bench-lab's "configuration sets" and the T730
// author's "my services" run: each value is a whole config.xml, pushed as
// it is and applied with every service action it may need; other knobs
// apply on top of it. The sweep (matrix) reads the files and switches
// between them; in a config the knob has no value of its own.

// ActionReloadAll is the planning cost of a config switch: every service
// action the configs involve (ReloadActions). It names no single command;
// a switch's changes name the concrete actions.
const ActionReloadAll Action = "reload-all"

// ConfigRunning is the config knob's value before a sweep switches: the
// config the firewall runs.
const ConfigRunning = "(running)"

// errConfigKnob is what the config knob answers inside a config.
var errConfigKnob = errors.New("config is a whole config.xml that a sweep switches to (axes: {config: [a.xml, b.xml]}), not a value inside one")

func getConfigKnob(*Config, string) (string, error)    { return "", errConfigKnob }
func setConfigKnob(*Config, string, string) error      { return errConfigKnob }
func validateConfigKnob(*Config, string, string) error { return errConfigKnob }

// ReloadActions are the service actions a switch from one whole config to
// another runs, in the products' order: interfaces, the filter, IPsec,
// and the packages either config has (Suricata; pfBlockerNG on pfSense).
// OPNsense's IDS is part of its core, so it always restarts.
func ReloadActions(from, to *Config) []Action {
	has := func(path string) bool {
		return from.find(path) != nil || to.find(path) != nil
	}
	out := []Action{ActionInterfaces, ActionFilterReload}
	if to.flavor == PfSense && has("installedpackages/pfblockerng") {
		out = append(out, ActionBlocklistUpdate)
	}
	out = append(out, ActionIPsecRestart)
	if to.flavor == OPNsense || has("installedpackages/suricata") {
		out = append(out, ActionIDSRestart)
	}
	return out
}

// reachPaths are the parts of a config that decide how fwab reaches the
// box: SSH, the web GUI (and OPNsense's API behind it), and the users with
// their passwords, keys and API keys.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3845 — the SSH port from `config_get_path('system/ssh/port')`
// upstream: pfsense 2.7.2 src/etc/inc/auth.inc:293 — the users from `config_get_path('system/user', [])`
// upstream: pfsense 2.7.2 src/etc/inc/auth.inc:77 — GUI settings under `config_path_enabled('system/webgui'`
// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/etc/config.xml.sample:20 — `<user>` (line 30 `<webgui>`, line 45 `<ssh>`) below `<system>`
var reachPaths = []string{"system/ssh", "system/webgui", "system/user"}

// ReachDiff names what differs between two configs in how fwab reaches the
// box: SSH and web GUI settings, users and their keys, and each interface's
// device and address. A config set that differs there could lock fwab out
// of the firewall, so a sweep refuses it. Nil when nothing differs.
func ReachDiff(running, set *Config) []string {
	var out []string
	if running.flavor != set.flavor {
		return []string{fmt.Sprintf("the set is a %s config, the firewall runs %s", set.flavor, running.flavor)}
	}
	for _, p := range reachPaths {
		a, b := canonicalAll(running.findAll(p, false)), canonicalAll(set.findAll(p, false))
		if !slices.Equal(a, b) {
			out = append(out, fmt.Sprintf("<%s> differs (%d element(s) running, %d in the set)", p, len(a), len(b)))
		}
	}
	setIfs := map[string]Interface{}
	for _, i := range set.Interfaces() {
		setIfs[i.Key] = i
	}
	for _, i := range running.Interfaces() {
		s, ok := setIfs[i.Key]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("interface %s (%s) is missing from the set", i.Key, i.Device))
		case s.Device != i.Device:
			out = append(out, fmt.Sprintf("interface %s is %s on the firewall, %s in the set", i.Key, i.Device, s.Device))
		case s.IPAddr != i.IPAddr || s.Subnet != i.Subnet:
			out = append(out, fmt.Sprintf("interface %s's address is %s/%s on the firewall, %s/%s in the set", i.Key, i.IPAddr, i.Subnet, s.IPAddr, s.Subnet))
		}
		delete(setIfs, i.Key)
	}
	for _, k := range slices.Sorted(maps.Keys(setIfs)) {
		out = append(out, fmt.Sprintf("interface %s (%s) is in the set but not assigned on the firewall", k, setIfs[k].Device))
	}
	return out
}

// canonicalAll writes each element as indented XML, so that two configs
// that differ only in whitespace compare equal.
func canonicalAll(els []*etree.Element) []string {
	out := make([]string, len(els))
	for i, e := range els {
		d := etree.NewDocument()
		d.SetRoot(e.Copy())
		d.Indent(1)
		s, _ := d.WriteToString()
		out[i] = strings.TrimSpace(s)
	}
	return out
}
