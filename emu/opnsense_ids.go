package emu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// OPNsense's Suricata runs from the files its IDS template renders, not
// from config.xml: /etc/rc.conf.d/suricata (enabled or not, netmap or pcap,
// the pcap interfaces) and suricata.yaml. Only a template reload writes
// them: the IDS service reconfigure, `configctl template reload
// OPNsense/IDS`, the boot. A start or restart (configctl ids, the service
// API, rc.reload_all's rc.freebsd stop and start) runs what is rendered, so
// a config.xml restored without a template reload leaves Suricata as the
// change before it rendered it. As rc.subr does, a start or restart of a
// service rendered off does nothing, and a stop stops a running one
// whatever is rendered.
//
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/+TARGETS:4 — `rc.conf.d:/etc/rc.conf.d/suricata`
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/rc.conf.d:3 — `suricata_enable="YES"` when `OPNsense.IDS.general.enabled`, else `suricata_enable="NO"`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:81 — the reconfigure renders first: `$backend->configdRun('template reload OPNsense/IDS')`, then installs rules and starts or restarts
// upstream: opnsense-core 26.1 src/etc/rc.reload_all:61 — `pass_safe('/usr/local/etc/rc.freebsd start');` after the stop: rc.conf.d services start again from what is rendered
// upstream: opnsense-core 26.1 src/opnsense/service/conf/actions.d/actions_ids.conf:50 — `command:/usr/local/etc/rc.d/suricata stop` (start :56, restart :62)
const opnSuricataConf = "/etc/rc.conf.d/suricata"

// opnSuricataCmd is the process a lab instance stands for on an emulator
// without engines.
const opnSuricataCmd = "/usr/local/bin/suricata -D --pidfile /var/run/suricata.pid -c /usr/local/etc/suricata/suricata.yaml"

// renderIDS is the IDS template reload: /etc/rc.conf.d/suricata from
// root, with the lab's engine plan in comment lines (mode, then devices).
func (e *Emulator) renderIDS(root *configxml.Config) error {
	plan, err := PlanIDS(root, e.Ports)
	if err != nil {
		return err
	}
	if err := e.renderUserRules(root); err != nil {
		return err
	}
	var b strings.Builder
	if len(plan) == 0 {
		b.WriteString("suricata_enable=\"NO\"\n")
	} else {
		b.WriteString("suricata_setup=\"/usr/local/opnsense/scripts/suricata/setup.sh\"\nsuricata_enable=\"YES\"\nsuricata_flags=\"-D\"\n")
		if len(plan[configxml.IDSInlineIPS]) > 0 {
			b.WriteString("# IPS mode, switch to netmap\nsuricata_netmap=\"YES\"\n")
		} else {
			b.WriteString("# IDS mode, pcap live mode\nsuricata_interface=\"" + strings.Join(slices.Concat(plan[configxml.IDSAlert], plan[configxml.IDSLegacyIPS]), " ") + "\"\n")
		}
		for _, m := range IDSModes {
			if devs := plan[m]; len(devs) > 0 {
				fmt.Fprintf(&b, "# fwab lab engine: %s %s\n", m, strings.Join(devs, " "))
			}
		}
	}
	p := e.path(opnSuricataConf)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, []byte(b.String()), 0o644)
}

// renderedIDS reads /etc/rc.conf.d/suricata: whether the service is
// enabled and the engines it runs. A box never rendered has it off.
func (e *Emulator) renderedIDS() (IDSPlan, bool, error) {
	data, err := os.ReadFile(e.path(opnSuricataConf))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	plan, enabled := IDSPlan{}, false
	for _, line := range strings.Split(string(data), "\n") {
		if line == `suricata_enable="YES"` {
			enabled = true
		}
		rest, ok := strings.CutPrefix(line, "# fwab lab engine: ")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return nil, false, fmt.Errorf("%s: bad engine line %q", opnSuricataConf, line)
		}
		m, err := idsMode(f[0])
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", opnSuricataConf, err)
		}
		plan[m] = f[1:]
	}
	return plan, enabled, nil
}

// opnSuricata is /usr/local/etc/rc.d/suricata ACTION over what is rendered.
func (e *Emulator) opnSuricata(ctx context.Context, action string) error {
	plan, enabled, err := e.renderedIDS()
	if err != nil {
		return err
	}
	running := e.idsRunning()
	switch {
	case action == "stop":
		e.opnSuricataSet(ctx, nil, false)
	case !enabled:
		// rc.subr: "Cannot 'start' suricata. Set suricata_enable to YES"
	case action == "start" && running:
	default: // start, restart
		if err := e.opnSuricataSet(ctx, plan, true); err != nil {
			return err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.applySlowdown(ctx)
}

// opnSuricataSet stops Suricata and, with start, runs plan's engines (or,
// without engines, records their instances).
func (e *Emulator) opnSuricataSet(ctx context.Context, plan IDSPlan, start bool) error {
	if e.IDS != nil {
		if !start {
			e.IDS.StopAll()
			return nil
		}
		return e.IDS.Restart(ctx, plan, e.Ports, nil)
	}
	e.smu.Lock()
	defer e.smu.Unlock()
	e.suricataRun = nil
	if !start {
		return nil
	}
	// One Suricata for every interface, as OPNsense's rc script starts it
	// (one pid file, /var/run/suricata.pid).
	pid := e.procs.reserve()
	for m, devs := range plan {
		for _, d := range devs {
			if e.suricataRun == nil {
				e.suricataRun = map[string]bakedInstance{}
			}
			e.suricataRun[d] = bakedInstance{dev: d, mode: m, cmd: opnSuricataCmd, pid: pid}
		}
	}
	return nil
}

// reconfigureIDS is the IDS service reconfigure: stop a running Suricata
// the config turned off, render, then restart or start it when enabled.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:76 — `if ($runStatus['status'] == "running" && (string)$mdlIDS->general->enabled == 0) {` then the stop
func (e *Emulator) reconfigureIDS(ctx context.Context) error {
	e.did(configxml.ActionIDSRestart)
	e.mu.Lock()
	root, err := e.configForApply()
	if err == nil {
		err = e.renderIDS(root)
	}
	e.mu.Unlock()
	if err != nil {
		return err
	}
	_, enabled, err := e.renderedIDS()
	if err != nil {
		return err
	}
	if !enabled {
		return e.opnSuricata(ctx, "stop")
	}
	if err := e.installRulesNow(); err != nil {
		return fmt.Errorf("error installing ids rules (%w)", err)
	}
	return e.opnSuricata(ctx, "restart")
}

// installRulesNow is `configctl ids install rules` (opnsense_rules.go).
func (e *Emulator) installRulesNow() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return err
	}
	return e.opnInstallRules(root)
}

// renderIDSNow is `configctl template reload OPNsense/IDS`.
func (e *Emulator) renderIDSNow() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return err
	}
	return e.renderIDS(root)
}
