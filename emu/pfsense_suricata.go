package emu

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/beevik/etree"
	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// What the Suricata package's sync (sync_suricata_package_config) does to
// config.xml, as the lab emulates it: its log-limit cron job is installed
// on every sync where it is missing, through install_cron_job(), which
// saves config.xml with write_config(). (The rule-update and blocked-host
// jobs follow settings the lab's configs leave at never.)
//
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:798 — the log-limit job's `suricata_cron_job_exists` check, then install_cron_job at 804
// upstream: not settled — suricata.inc is not in the upstream copy (read in the file index at that commit); checked at run time by fwapi's package-write adoption, which accepts only the package's cron items
const suricataLogLimitCmd = "/usr/bin/nice -n20 /usr/local/bin/php-cgi -f /usr/local/pkg/suricata/suricata_check_cron_misc.inc"

// suricataCronLocked installs the log-limit job when config.xml lacks it
// (the caller holds e.mu).
func (e *Emulator) suricataCronLocked() error {
	data, err := os.ReadFile(e.path("/conf/config.xml"))
	if err != nil {
		return err
	}
	if strings.Contains(string(data), suricataLogLimitCmd) {
		return nil
	}
	return e.pfWriteConfigLocked("Installed cron job for "+suricataLogLimitCmd, func(doc *etree.Document) {
		ensureCronItem(doc, cronItem{minute: "*/5", hour: "*", mday: "*", month: "*", wday: "*", who: "root", command: suricataLogLimitCmd})
	})
}

// suricataRC is the package's rc script, which suricata_create_rc() writes
// at every package sync with each enabled interface's run mode in it.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/service-utils.inc:34 — `define("RCFILEPREFIX", "/usr/local/etc/rc.d/");` where the script lives
// upstream: not settled — the script's content (`$run_mode = $value['ips_mode'] == 'ips_mode_inline' ? '--netmap' : '-i ' . $if_real;`, enabled interfaces only, rebuilt on each sync) is from an older copy of suricata.inc (pfsense/FreeBSD-ports@e2173cf2, line not verified); checked at run time by fwapi.VerifyRuntime, which reads the running mode from ps after the apply
const suricataRC = "/usr/local/etc/rc.d/suricata.sh"

// bakedInstance is one interface's start line in the rc script, and the
// lab engine mode it stands for.
type bakedInstance struct {
	dev, mode, cmd string
	dir            string // its folder, /usr/local/etc/suricata/suricata_<uuid>_<if>
	logDir         string // its log folder, /var/log/suricata/suricata_<if><uuid>
	pid            int    // while it runs: a new one at each start
}

// bakeSuricataRC is sync_suricata_package_config's create_rc: it writes the
// rc script for the enabled interfaces of root, each with its mode as it
// is now. The lab engine mode is kept in a comment line per interface.
// With rebuild (the global $rebuild_rules set, as fwab's sync sets it) the
// interfaces' rule files are written again; without (the boot's sync) the
// files of the last rebuild stay, as suricata_prepare_rule_files returns
// at once.
//
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:3262 — `if (!$rebuild_rules)`, the return before any rule file is written
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:66 — `sync_package($package['name']);`, the boot's sync, which sets no $rebuild_rules
//
// A config without any Suricata interface entry writes nothing: the
// package's sync returns first (configxml.SuricataConfigured), and the rc
// script of the last sync that had one stays, as on the box.
func (e *Emulator) bakeSuricataRC(root *configxml.Config, rebuild bool) error {
	if !root.SuricataConfigured() {
		return nil
	}
	var b strings.Builder
	enabled := false
	b.WriteString("#!/bin/sh\n# This file was automatically generated\n# by the pfSense service handler (emulated by fwab lab).\n")
	for i, ifc := range root.Interfaces() {
		v, err := root.Get("ids@" + ifc.Key)
		if err != nil || v == configxml.IDSOff || v == "" {
			continue
		}
		enabled = true
		runMode := "-i " + ifc.Device
		if v == configxml.IDSInlineIPS {
			runMode = "--netmap"
		}
		// The package names the folders by the entry's uuid; one without
		// (a config not made by the GUI) is numbered by its position.
		uuid := root.SuricataUUID(ifc.Key)
		if uuid == "" {
			uuid = strconv.Itoa(10000 + i)
		}
		dir := fmt.Sprintf("/usr/local/etc/suricata/suricata_%s_%s", uuid, ifc.Device)
		// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:28 — "{$suricatalogdir}suricata_{$if_real}{$suricata_uuid}", made by every sync
		logDir := fmt.Sprintf("/var/log/suricata/suricata_%s%s", ifc.Device, uuid)
		if err := os.MkdirAll(e.path(logDir), 0o755); err != nil {
			return err
		}
		if rebuild {
			if err := e.buildSuricataRules(root, ifc.Key, dir+"/rules"); err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "# fwab-lab %s %s %s %s\n/usr/local/bin/suricata %s -D -c %s/suricata.yaml --pidfile /var/run/suricata_%s%s.pid\n",
			ifc.Device, v, dir, logDir, runMode, dir, ifc.Device, uuid)
	}
	if !enabled {
		// upstream: not settled — suricata_create_rc() ends `if (!$no_enabled_interface) { … } else { unlink_if_exists("{$rcdir}suricata.sh"); }` in pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc (read in the file index, about character 137,000; no line numbers); checked at run time by fwapi, which runs the script only where it exists
		if err := os.Remove(e.path(suricataRC)); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(e.path(suricataRC)), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(e.path(suricataRC), []byte(b.String()), 0o755)
}

// buildSuricataRules is the sync's rule build for one interface: the
// enforcing rules file in its folder, from the rulesets enabled for it,
// and custom.rules from the interface's custom rules. The lab has no
// ruleset files (its engines load a generated ruleset of their own), so
// it writes one stand-in rule per enabled ruleset: an interface without
// rulesets gets an empty file, as on the box. The custom rules are
// written as they are, and the engines load them (they match by content).
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:1304 — `suricata_prepare_rule_files($suricatacfg, $suricatacfgdir);`
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:3442 — `@file_put_contents("{$suricatacfgdir}/rules/custom.rules", base64_decode($suricatacfg['customrules']));` (an empty file without custom rules, :3446)
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:1316 — `if (file_exists("{$suricatacfgdir}/rules/custom.rules")) {`, then listed in rule-files when not empty
func (e *Emulator) buildSuricataRules(root *configxml.Config, iface, dir string) error {
	var b strings.Builder
	for i, name := range root.SuricataRulesets(iface) {
		fmt.Fprintf(&b, "alert ip any any -> any any (msg:\"fwab lab stand-in for %s\"; sid:%d; rev:1;)\n", name, 9000001+i)
	}
	if err := os.MkdirAll(e.path(dir), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(e.path(dir+"/suricata.rules"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	custom, err := root.SuricataCustomRules(iface)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(e.path(dir+"/custom.rules"), []byte(custom), 0o644)
}

// idsInstances are what the running instances read and write: the
// custom.rules files Suricata loads (those that are not empty, as the
// package lists them) and each one's fast log.
func (e *Emulator) idsInstances(instances []bakedInstance) map[string]IDSInstance {
	out := map[string]IDSInstance{}
	for _, b := range instances {
		in := IDSInstance{AlertLog: e.path(b.logDir + "/alerts.log")}
		f := e.path(b.dir + "/rules/custom.rules")
		if st, err := os.Stat(f); err == nil && st.Size() > 0 {
			in.Rules = append(in.Rules, f)
		}
		out[b.dev] = in
	}
	return out
}

// bakedSuricata reads the rc script's instances.
func (e *Emulator) bakedSuricata() ([]bakedInstance, error) {
	data, err := os.ReadFile(e.path(suricataRC))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []bakedInstance
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "#" && f[1] == "fwab-lab" && i+1 < len(lines) {
			out = append(out, bakedInstance{dev: f[2], mode: f[3], dir: f[4], logDir: f[5], cmd: lines[i+1]})
		}
	}
	return out, nil
}

func (e *Emulator) suricataBaked(ctx context.Context, action string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.suricataBakedLocked(ctx, action)
}

// suricataBakedLocked runs the baked script: stop ends the instances it
// lists (an interface the last sync dropped keeps running), start starts
// those it lists that do not run, restart is stop then start.
func (e *Emulator) suricataBakedLocked(ctx context.Context, action string) error {
	baked, err := e.bakedSuricata()
	if err != nil {
		return err
	}
	e.smu.Lock()
	if action == "stop" || action == "restart" {
		for _, b := range baked {
			delete(e.suricataRun, b.dev)
		}
	}
	if action == "start" || action == "restart" {
		for _, b := range baked {
			if _, ok := e.suricataRun[b.dev]; !ok {
				if e.suricataRun == nil {
					e.suricataRun = map[string]bakedInstance{}
				}
				// Suricata opens its outputs as it starts: the fast
				// log, appended to, in the folder the sync made.
				if err := touchAppend(e.path(b.logDir + "/alerts.log")); err != nil {
					e.smu.Unlock()
					return err
				}
				b.pid = e.procs.reserve()
				e.suricataRun[b.dev] = b
			}
		}
	}
	plan := IDSPlan{}
	var running []bakedInstance
	for _, b := range e.suricataRun {
		running = append(running, b)
		m, err := idsMode(b.mode)
		if err != nil {
			e.smu.Unlock()
			return err
		}
		plan[m] = append(plan[m], b.dev)
	}
	e.smu.Unlock()
	if e.IDS == nil {
		return nil
	}
	for m := range plan {
		sort.Strings(plan[m])
	}
	// The lab's engines are one per mode: they follow the instances the
	// script left running.
	return e.IDS.Restart(ctx, plan, e.Ports, e.idsInstances(running))
}

// touchAppend makes the file at path if it is not there and leaves what
// it holds, as a program that opens it to append does.
func touchAppend(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}
