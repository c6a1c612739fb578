package emu

import (
	"bytes"
	"context"
	"crypto/md5"
	_ "embed"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/fwab/fwab/configxml"
)

//go:embed assets/opnsense/firmware.yaml
var defaultOPNsenseProfiles []byte

// DefaultProfilesFor returns the embedded firmware profiles of a flavor:
// for OPNsense 26.1.2, 26.1.5, and 26.7.1 with a 10 % slowdown.
func DefaultProfilesFor(flavor configxml.Flavor) []Profile {
	p, err := ParseProfiles(bytes.NewReader(DefaultProfilesYAMLFor(flavor)))
	if err != nil {
		panic("lab: embedded firmware profiles: " + err.Error())
	}
	return p
}

// DefaultProfilesYAMLFor is the embedded profiles file of a flavor.
func DefaultProfilesYAMLFor(flavor configxml.Flavor) []byte {
	if flavor == configxml.OPNsense {
		return append([]byte(nil), defaultOPNsenseProfiles...)
	}
	return DefaultProfilesYAML()
}

// opnSeries is the release series of an OPNsense version: 26.1.2_1 is 26.1.
func opnSeries(v string) string {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}

// opnCommands are OPNsense's own commands (B-g): configctl actions,
// opnsense-version, and the rc scripts.
func (e *Emulator) opnCommands() map[string]command {
	return map[string]command{
		"/usr/local/sbin/configctl":        e.cmdConfigctl,
		"/usr/local/sbin/opnsense-version": e.cmdOPNsenseVersion,
		"/usr/local/etc/rc.reload_all":     e.cmdOPNReloadAll,
		"/usr/local/etc/rc.filter_configure": func(ctx context.Context, c *call) error {
			return e.cmdFilterReload(ctx, c)
		},
		"/usr/local/etc/rc.d/suricata": e.cmdSuricataRC,
		"/usr/local/bin/php":           e.cmdPhp,
	}
}

// cmdOPNsenseVersion prints "OPNsense 26.1.2 (amd64)"; -v the version, -n
// the package name, -N the product name.
func (e *Emulator) cmdOPNsenseVersion(ctx context.Context, c *call) error {
	v := e.Version()
	switch {
	case len(c.args) == 1:
		fmt.Fprintf(c.stdout, "OPNsense %s (amd64)\n", v)
	case len(c.args) == 2 && c.args[1] == "-v":
		fmt.Fprintln(c.stdout, v)
	case len(c.args) == 2 && c.args[1] == "-n":
		fmt.Fprintln(c.stdout, "opnsense")
	case len(c.args) == 2 && c.args[1] == "-N":
		fmt.Fprintln(c.stdout, "OPNsense")
	case len(c.args) == 2 && c.args[1] == "-nv":
		fmt.Fprintf(c.stdout, "opnsense %s\n", v)
	default:
		return c.errorf(1, "usage: opnsense-version [-n|-N|-v|-nv]")
	}
	return nil
}

// cmdOPNReloadAll is /usr/local/etc/rc.reload_all: interfaces (offloads),
// the filter and IPsec, from config.xml.
func (e *Emulator) cmdOPNReloadAll(ctx context.Context, c *call) error {
	if len(c.args) != 1 {
		return c.errorf(1, "%s: takes no arguments", c.args[0])
	}
	if err := e.reloadAll(ctx); err != nil {
		return c.errorf(1, "%s: %v", c.args[0], err)
	}
	// rc.freebsd stop, then start: Suricata as it is rendered.
	// upstream: opnsense-core 26.1 src/etc/rc.reload_all:60 — `pass_safe('/usr/local/etc/rc.freebsd stop');`
	if err := e.opnSuricata(ctx, "restart"); err != nil {
		return c.errorf(1, "%s: suricata: %v", c.args[0], err)
	}
	// upstream: opnsense-core 24.7 src/etc/rc.reload_all:53 — `interfaces_configure(true)`: every interface
	e.managementReconfigured(c.args[0])
	return nil
}

// reloadAll applies interfaces, filter and IPsec from config.xml.
func (e *Emulator) reloadAll(ctx context.Context) error {
	e.did(ActionReloadAll)
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return err
	}
	if err := e.applyInterfaces(ctx, root); err != nil {
		return err
	}
	if err := e.applyFilter(ctx, root); err != nil {
		return err
	}
	// rc.reload_all's plugins_configure('vpn') is ipsec_configure_do: a
	// reload in the background, as the reconfigure.
	return e.applyIPsecBackground(ctx, root, ipsecReload)
}

// reloadFilter loads the filter rules and NAT from config.xml.
func (e *Emulator) reloadFilter(ctx context.Context) error {
	e.did(configxml.ActionFilterReload)
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return err
	}
	if err := e.applyFilter(ctx, root); err != nil {
		return err
	}
	return e.applySlowdown(ctx)
}

// reconfigureInterfaces applies config.xml's offload settings to the
// interface with the given key, or to all when key is empty, then reloads
// the filter (networking_reload, B-a).
func (e *Emulator) reconfigureInterfaces(ctx context.Context, key string) error {
	if key == "" {
		e.did(configxml.ActionInterfaces)
	} else {
		e.did(ActionInterfaceReconfigure)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return err
	}
	if key == "" {
		if err := e.applyInterfaces(ctx, root); err != nil {
			return err
		}
		if err := e.applyFilter(ctx, root); err != nil {
			return err
		}
		return e.applySlowdown(ctx)
	}
	for _, i := range root.Interfaces() {
		if i.Key != key {
			continue
		}
		veth, ok := e.Ports.Veth(i.Device)
		if !ok {
			return nil // lo0 and other interfaces outside the lab: nothing to do
		}
		o := OffloadsFor(root, i.Device)
		if err := e.DataPlane.SetOffloads(ctx, veth, o); err != nil {
			return err
		}
		e.logger().Info("interface reconfigured", "key", key, "device", i.Device, "txcsum", o.TXCSUM, "tso", o.TSO, "lro", o.LRO)
		return e.applySlowdown(ctx)
	}
	return fmt.Errorf("no interface %q in config.xml", key)
}

// restartIPsec is ipsec/service/restart and start: strongSwan stopped
// and started from config.xml before the call returns, every SA on the box
// re-established.
func (e *Emulator) restartIPsec(ctx context.Context) error {
	return e.configureIPsec(ctx, false)
}

// reconfigureIPsec is ipsec/service/reconfigure: the configuration is
// generated, and strongSwan reloaded (started when it is not running) in
// the background; established SAs stay on what they negotiated.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/ServiceController.php:59 — `reconfigureForceRestart()`, which returns 0: a reload, not a restart
// upstream: opnsense-core 26.1 src/etc/inc/plugins.inc.d/ipsec.inc:1462 — `mwexecfb('/usr/local/etc/rc.d/strongswan onereload');`
func (e *Emulator) reconfigureIPsec(ctx context.Context) error {
	return e.configureIPsec(ctx, true)
}

func (e *Emulator) configureIPsec(ctx context.Context, reload bool) error {
	e.did(configxml.ActionIPsecRestart)
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return err
	}
	if reload {
		err = e.applyIPsecBackground(ctx, root, ipsecReload)
	} else {
		err = e.applyIPsec(ctx, root, ipsecRestart)
	}
	if err != nil {
		return err
	}
	return e.applySlowdown(ctx)
}

// cmdConfigctl runs the configd actions the lab emulates (B-g):
// filter reload, interface reconfigure KEY, interface settings configure,
// ids start|stop|restart|status|install rules, template reload
// OPNsense/IDS, ipsec restart|reload. configctl prints OK
// (or the action's output) and exits 0 even when the action fails, as
// configd does; the failure is in the output.
func (e *Emulator) cmdConfigctl(ctx context.Context, c *call) error {
	a := c.args[1:]
	var err error
	switch {
	case len(a) >= 2 && a[0] == "filter" && a[1] == "reload":
		err = e.reloadFilter(ctx)
	case len(a) == 3 && a[0] == "interface" && a[1] == "reconfigure":
		if err = e.reconfigureInterfaces(ctx, a[2]); err == nil {
			defer e.managementReconfigured("configctl interface reconfigure", a[2])
		}
	case len(a) == 3 && a[0] == "interface" && a[1] == "settings" && a[2] == "configure":
		err = e.reconfigureInterfaces(ctx, "")
	case len(a) == 2 && a[0] == "ids" && a[1] == "status":
		if e.idsRunning() {
			fmt.Fprintln(c.stdout, "suricata is running as pid 4242.")
		} else {
			fmt.Fprintln(c.stdout, "suricata is not running.")
		}
		return nil
	case len(a) == 2 && a[0] == "ids" && (a[1] == "start" || a[1] == "stop" || a[1] == "restart"):
		err = e.suricata(ctx, a[1])
	case len(a) == 3 && a[0] == "ids" && a[1] == "install" && a[2] == "rules":
		err = e.installRulesNow()
	case len(a) == 3 && a[0] == "template" && a[1] == "reload" && a[2] == "OPNsense/IDS":
		err = e.renderIDSNow()
	case len(a) == 2 && a[0] == "ipsec" && a[1] == "restart":
		err = e.restartIPsec(ctx)
	case len(a) == 2 && a[0] == "ipsec" && (a[1] == "reload" || a[1] == "reconfigure"):
		err = e.reconfigureIPsec(ctx)
	default:
		fmt.Fprintln(c.stdout, "Action not found")
		return nil
	}
	if err != nil {
		fmt.Fprintf(c.stdout, "Execute error: %v\n", err)
		return nil
	}
	fmt.Fprintln(c.stdout, "OK")
	return nil
}

// idsRunning reports whether an inspection engine (Suricata) runs.
func (e *Emulator) idsRunning() bool {
	return len(e.suricataProcesses()) > 0
}

// opnRuleLabels turns the ruleset's pf lines into OPNsense's: each rule's
// label is a 32-hex hash of the rule without its description (legacy rules;
// MVC rules carry their uuid), and /tmp/rules.debug holds each rule with its
// description as a trailing comment. The hash is a stand-in of the same
// shape, not Util::calcRuleHash (PHP's JSON of the rule); like it, rules
// that differ only in their description share a label.
//
// upstream: opnsense-core 26.1 src/etc/inc/filter.lib.inc:692 — `$rule['label'] = OPNsense\Firewall\Util::calcRuleHash($rule);` (24.7: 620; 26.7: 696)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Firewall/FieldTypes/FilterRuleField.php:55 — MVC rules: `'label' => $this->getAttribute('uuid')`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Firewall/FilterRule.php:70 — `'descr' => 'parseComment'`, the last part of the line
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Firewall/Rule.php:173 — parseComment: `"# " . preg_replace("/\r|\n/", "", $value)`
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:172 — the ruleset file `/tmp/rules.debug`
func opnRuleLabels(pf map[string]string) (map[string]string, []byte) {
	out := make(map[string]string, len(pf))
	var dbg strings.Builder
	keys := make([]string, 0, len(pf))
	for k := range pf {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		line := pf[k]
		i := strings.Index(line, ` label "`)
		if i < 0 {
			out[k] = line
			dbg.WriteString(line + "\n")
			continue
		}
		rest := line[i+len(` label "`):]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			out[k] = line
			continue
		}
		descr := strings.TrimPrefix(rest[:j], "USER_RULE: ")
		bare := line[:i] + rest[j+1:]
		sum := md5.Sum([]byte(bare))
		labelled := line[:i] + ` label "` + hex.EncodeToString(sum[:]) + `"` + rest[j+1:]
		out[k] = labelled
		dbg.WriteString(labelled)
		if descr != "" {
			dbg.WriteString(" # " + descr)
		}
		dbg.WriteString("\n")
	}
	return out, []byte(dbg.String())
}
