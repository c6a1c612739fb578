package emu

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// IDSPlan is which inspection engines config.xml asks for: an ids@IF mode
// (configxml.IDSAlert, IDSLegacyIPS, IDSInlineIPS) → FreeBSD devices.
type IDSPlan map[string][]string

// IDSModes are the ids@IF modes an engine runs in, in the order they start.
var IDSModes = []string{configxml.IDSInlineIPS, configxml.IDSAlert, configxml.IDSLegacyIPS}

// idsMode checks that v is one of IDSModes.
func idsMode(v string) (string, error) {
	if !slices.Contains(IDSModes, v) {
		return "", fmt.Errorf("unknown inspection mode %q: use one of %s", v, strings.Join(IDSModes, ", "))
	}
	return v, nil
}

// PlanIDS reads ids@IF for every interface of the config.
func PlanIDS(c *configxml.Config, ports Ports) (IDSPlan, error) {
	plan := IDSPlan{}
	for _, ifc := range c.Interfaces() {
		v, err := c.Get("ids@" + ifc.Key)
		if err != nil {
			return nil, fmt.Errorf("ids@%s: %w", ifc.Key, err)
		}
		if v == configxml.IDSOff || v == "" {
			continue
		}
		m, err := idsMode(v)
		if err != nil {
			return nil, fmt.Errorf("ids@%s: %w", ifc.Key, err)
		}
		if _, ok := ports.Veth(ifc.Device); !ok {
			return nil, fmt.Errorf("ids@%s=%s: interface %s is not part of the lab (only %s and %s are)", ifc.Key, v, ifc.Device, ports.LanDev, ports.WanDev)
		}
		plan[m] = append(plan[m], ifc.Device)
	}
	for m := range plan {
		sort.Strings(plan[m])
	}
	if len(plan[configxml.IDSInlineIPS]) > 0 && len(plan[configxml.IDSLegacyIPS]) > 0 {
		return nil, fmt.Errorf("ips-inline on %s and ips-legacy on %s at once: the lab's engines share the DUT's steering rules, so it runs one of the two blocking modes at a time; set one of them to ids or off",
			strings.Join(plan[configxml.IDSInlineIPS], ","), strings.Join(plan[configxml.IDSLegacyIPS], ","))
	}
	return plan, nil
}

// suricata runs the Suricata service action: restart, start or stop. The
// inspection path changes the forwarding path, so a tracking slowdown
// measures it again afterwards.
//
// On pfSense the modes come from the rc script the last package sync
// baked (suricataRC), not from config.xml: a restart without a resync
// restarts the old mode, and stop stops only the interfaces that script
// knows.
func (e *Emulator) suricata(ctx context.Context, action string) error {
	if action != "stop" {
		e.did(configxml.ActionIDSRestart)
	}
	if !e.opnsense() {
		if err := e.suricataBaked(ctx, action); err != nil {
			return err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.applySlowdown(ctx)
	}
	return e.opnSuricata(ctx, action)
}

// bootIDS starts the engines config.xml asks for at boot. On pfSense the
// boot's rc.start_packages resyncs the package first, which bakes the rc
// script from config.xml; on OPNsense the boot renders the templates.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:66 — `sync_package($package['name']);` then start_service, for every package at boot
func (e *Emulator) bootIDS(ctx context.Context, root *configxml.Config) error {
	if !e.opnsense() {
		e.smu.Lock()
		e.suricataRun = nil
		e.smu.Unlock()
		if err := e.bakeSuricataRC(root, false); err != nil {
			return err
		}
		return e.suricataBakedLocked(ctx, "start")
	}
	// The boot renders every template, then starts the enabled services.
	if err := e.renderIDS(root); err != nil {
		return err
	}
	plan, enabled, err := e.renderedIDS()
	if err != nil {
		return err
	}
	return e.opnSuricataSet(ctx, plan, enabled)
}

// stopIDS stops the engines and forgets the instances the rc script
// started (reboot, shutdown of the emulator).
func (e *Emulator) stopIDS() {
	if e.IDS != nil {
		e.IDS.StopAll()
	}
	e.smu.Lock()
	e.suricataRun = nil
	e.smu.Unlock()
}

// KillService ends a service as a crash would (Fault.Kill): it stays
// down until something starts it again. The lab kills "suricata": every
// inspection engine (IDSPlane.Kill).
func (e *Emulator) KillService(name string) error {
	if name != "suricata" {
		return fmt.Errorf("kill %q: the lab kills suricata", name)
	}
	e.logger().Warn("fault: suricata killed")
	if e.IDS != nil {
		e.IDS.Kill()
		return nil
	}
	e.smu.Lock()
	defer e.smu.Unlock()
	e.suricataRun = nil
	return nil
}

// suricataProcesses lists the running engines as Suricata processes; on
// an emulator without engines, the instances the rc script started.
func (e *Emulator) suricataProcesses() [][2]string {
	if e.IDS == nil {
		e.smu.Lock()
		defer e.smu.Unlock()
		var out [][2]string
		seen := map[int]bool{} // OPNsense's one Suricata serves every interface
		for _, dev := range slices.Sorted(maps.Keys(e.suricataRun)) {
			if b := e.suricataRun[dev]; !seen[b.pid] {
				seen[b.pid] = true
				out = append(out, [2]string{strconv.Itoa(b.pid), b.cmd})
			}
		}
		return out
	}
	return e.IDS.SuricataProcesses()
}
