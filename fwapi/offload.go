package fwapi

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// Offload changes are applied as each product's GUI applies them: the
// capability flags set on the NICs, nothing else. Neither product's
// interface reconfigure is used: it removes and re-adds every address,
// renews DHCP or re-dials PPPoE, and reloads routes, the resolver and
// dyndns, on the interface fwab's session runs over too.
//
// upstream: pfsense 2.7.2 src/usr/local/pfSense/include/www/system_advanced_network.inc:227 — the GUI saves the flags with `setup_microcode()` alone
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:736 — setup_microcode: `enable_hardware_offloading($if)` for each key of `get_configured_interface_list(true)` (2.6.0: 705; master: 739)
// upstream: opnsense-core 24.7 src/www/system_advanced_network.php:257 — the GUI applies them with `interfaces_hardware()` (25.7: same page; 26.1 and later: the Interfaces/Settings model and its reconfigure)
// upstream: opnsense-core 24.7 src/etc/inc/interfaces.inc:660 — interfaces_hardware: `configure_interface_hardware($device, $intf_details)` for each device of `get_interface_list()` (25.7: 689)
//
// Both GUIs change the NIC the browser's session runs over as well; fwab
// leaves the NICs its own session runs over as they are unless the target
// asks (offload_management), because a capability change may reset the
// link on some drivers, and says so in verify (FWAB101).

// phpName is what a device or interface name may hold to be put into the
// PHP fwab runs: FreeBSD device names (igb0, vlan0.100, igb0_vlan100,
// lagg0) and config keys (wan, lan, opt1).
var phpName = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// phpStringArray is a PHP array literal of names, for code inside a
// single-quoted shell word: double-quoted PHP strings of names phpName
// accepts, so nothing in them is special to sh or PHP.
func phpStringArray(names []string) (string, error) {
	q := make([]string, len(names))
	for i, n := range names {
		if !phpName.MatchString(n) {
			return "", fmt.Errorf("interface name %q: fwab passes only letters, digits, '_' and '.' to the firewall's PHP", n)
		}
		q[i] = `"` + n + `"`
	}
	return "array(" + strings.Join(q, ", ") + ")", nil
}

// pfOffloadApply is pfSense's setup_microcode() with the interfaces keys
// names left out.
func pfOffloadApply(skip []string) (string, error) {
	arr, err := phpStringArray(skip)
	if err != nil {
		return "", err
	}
	// upstream: pfsense 2.7.2 src/etc/rc.reload_interfaces:26 — `require_once("functions.inc");` after config.inc, as the product's own scripts load it
	return `/usr/local/bin/php -r 'require_once("config.inc"); require_once("functions.inc"); ` +
		`foreach (array_keys(get_configured_interface_list(true)) as $if) { if (!in_array($if, ` + arr + `)) { enable_hardware_offloading($if); } }'`, nil
}

// opnOffloadApply is OPNsense's interfaces_hardware() (24.7, 25.7) with
// the devices skip names left out.
func opnOffloadApply(skip []string) (string, error) {
	arr, err := phpStringArray(skip)
	if err != nil {
		return "", err
	}
	// upstream: opnsense-core 24.7 src/etc/rc.reload_all:30 — `require_once("config.inc");` then interfaces.inc (line 31), as the product's own scripts load them
	return `/usr/local/bin/php -r 'require_once("config.inc"); require_once("interfaces.inc"); $details = legacy_interfaces_details(); ` +
		`foreach (array_keys(get_interface_list()) as $dev) { if (!in_array($dev, ` + arr + `)) { configure_interface_hardware($dev, $details); } }'`, nil
}

// offloadSkip reads config.xml and, unless include, the devices the SSH
// session runs over (managementDevices): what an offload apply leaves
// alone.
func offloadSkip(ctx context.Context, read func(context.Context) ([]byte, error), run func(context.Context, string) (string, error), include bool) (*configxml.Config, []string, error) {
	raw, err := read(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := configxml.LoadBytes(raw)
	if err != nil {
		return nil, nil, fmt.Errorf("parse config.xml: %w", err)
	}
	if include {
		return cfg, nil, nil
	}
	devs, err := managementDevices(ctx, run, cfg)
	return cfg, devs, err
}

// managementDevices are the devices fwab's SSH session reaches the
// firewall through: the device whose address is the server address of
// $SSH_CONNECTION (from the config, else ifconfig -a), and every device
// underneath it (a VLAN's parent, a LAGG's members). None when the
// session arrives on an address no device has (a loopback, a tunnel).
// Without a config, the device alone, found by ifconfig -a.
//
// upstream: not settled — `$SSH_CONNECTION` is OpenSSH's (client addr, port, server addr, port), not product code; checked at run time: an answer without four fields means no management device
func managementDevices(ctx context.Context, run func(context.Context, string) (string, error), cfg *configxml.Config) ([]string, error) {
	out, err := run(ctx, `echo "$SSH_CONNECTION"`)
	if err != nil {
		return nil, err
	}
	f := strings.Fields(out)
	if len(f) < 4 {
		return nil, nil
	}
	addr := f[2]
	dev := ""
	if cfg != nil {
		for _, i := range cfg.Interfaces() {
			if i.IPAddr == addr {
				dev = i.Device
			}
		}
	}
	if dev == "" {
		ifc, err := run(ctx, "ifconfig -a")
		if err != nil {
			return nil, err
		}
		dev = deviceWithAddress(ifc, addr)
	}
	if dev == "" {
		return nil, nil
	}
	if cfg == nil {
		return []string{dev}, nil
	}
	return append([]string{dev}, cfg.UnderneathDevices(dev)...), nil
}

// deviceWithAddress is the device whose inet or inet6 line in ifconfig -a
// output holds addr (a link-local one with or without its %scope), or "".
func deviceWithAddress(ifconfigOut, addr string) string {
	dev := ""
	for _, line := range strings.Split(ifconfigOut, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			dev, _, _ = strings.Cut(line, ":")
			continue
		}
		w := strings.Fields(line)
		if len(w) < 2 || (w[0] != "inet" && w[0] != "inet6") {
			continue
		}
		if a, _, _ := strings.Cut(w[1], "%"); a == addr || w[1] == addr {
			return dev
		}
	}
	return ""
}

// keysOver are the config's interface keys whose device, or a device
// underneath it, is one of devs: the interfaces whose apply would touch
// them.
func keysOver(cfg *configxml.Config, devs []string) []string {
	var keys []string
	for _, i := range cfg.Interfaces() {
		if i.Device == "" {
			continue
		}
		all := append([]string{i.Device}, cfg.UnderneathDevices(i.Device)...)
		if slices.ContainsFunc(all, func(d string) bool { return slices.Contains(devs, d) }) {
			keys = append(keys, i.Key)
		}
	}
	return keys
}
