package emu

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// The IDS rules of the emulated OPNsense. The rulesets a user downloaded
// (Services → Intrusion Detection → Download, rule-updater.py) are files
// in the rule source folder; `ids install rules` (installRules.py, which
// the IDS service reconfigure runs before it starts Suricata) writes each
// into the folder Suricata loads, each rule commented out or given another
// action where config.xml's rule settings say, removes what is no longer
// downloaded and lists the files in installed_rules.yaml, which
// suricata.yaml includes. Nothing is installed before the first install;
// a box where nothing was downloaded runs Suricata with no rules at all.
//
// The lab's box has two ET Open rulesets downloaded, stand-ins of a few
// rules each, as a box set up for IDS has (EmulatorOptions.NoIDSRules: none,
// as after a fresh install). Its engines load their generated rules either
// way; rule policies are not emulated.
//
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/scripts/suricata/installRules.py:41 — `rule_target_dir = ('%s../opnsense.rules' % rule_source_directory)`
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/scripts/suricata/installRules.py:70 — a disabled rule: `rule = ('#%s' % rule[i:])`; every rule then `output_data.append(rule)` at 85
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/scripts/suricata/installRules.py:102 — `os.remove(filename)` for target files no longer installed
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/suricata.yaml:419 — `default-rule-path: /usr/local/etc/suricata/opnsense.rules`, installed_rules.yaml included at 428
const (
	opnRuleSourceDir  = "/usr/local/etc/suricata/rules"
	opnRuleTargetDir  = "/usr/local/etc/suricata/opnsense.rules"
	opnInstalledRules = "/usr/local/etc/suricata/installed_rules.yaml"
)

// opnDownloadedRulesets are the lab box's downloaded rulesets: file name
// and rule count.
var opnDownloadedRulesets = []struct {
	file  string
	rules int
}{{"emerging-scan.rules", 4}, {"emerging-policy.rules", 3}}

// seedIDSRules puts the lab's downloaded rulesets in the rule source
// folder of a new box.
func (e *Emulator) seedIDSRules() error {
	if e.NoIDSRules {
		return nil
	}
	if _, err := os.Stat(e.path(opnRuleSourceDir)); err == nil {
		return nil
	}
	if err := os.MkdirAll(e.path(opnRuleSourceDir), 0o755); err != nil {
		return err
	}
	sid := 2000001
	for _, rs := range opnDownloadedRulesets {
		var b strings.Builder
		for range rs.rules {
			fmt.Fprintf(&b, "alert ip any any -> any any (msg:\"fwab lab stand-in for ET open/%s\"; sid:%d; rev:1;)\n", strings.TrimSuffix(rs.file, ".rules"), sid)
			sid++
		}
		if err := atomicfile.WriteFile(e.path(opnRuleSourceDir+"/"+rs.file), []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

var sidRE = regexp.MustCompile(`\bsid:\s*(\d+)\s*;`)

// opnRuleSetting is one <OPNsense><IDS><rules><rule>: a rule's sid turned
// on or off, or given another action.
type opnRuleSetting struct{ enabled, action string }

// opnRuleSettings reads config.xml's rule settings by sid.
//
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/rules.config:7 — `{%      for rule in helpers.toList('OPNsense.IDS.rules.rule') %}` with `enabled=`, `action=`, `sid=`
func opnRuleSettings(root *configxml.Config) map[string]opnRuleSetting {
	out := map[string]opnRuleSetting{}
	for _, r := range root.Root().FindElements("OPNsense/IDS/rules/rule") {
		out[text(r, "sid")] = opnRuleSetting{enabled: cmp.Or(text(r, "enabled"), "0"), action: text(r, "action")}
	}
	return out
}

// opnInstallRules is `configctl ids install rules` for config root.
func (e *Emulator) opnInstallRules(root *configxml.Config) error {
	settings := opnRuleSettings(root)
	sources, err := filepath.Glob(e.path(opnRuleSourceDir) + "/*.rules")
	if err != nil {
		return err
	}
	slices.Sort(sources)
	if err := os.MkdirAll(e.path(opnRuleTargetDir), 0o755); err != nil {
		return err
	}
	var installed []string
	for _, src := range sources {
		data, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		for i, l := range lines {
			m := sidRE.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			s, ok := settings[m[1]]
			if !ok {
				continue
			}
			rule := strings.TrimLeft(l, "# ")
			if s.enabled == "0" {
				rule = "#" + rule
			}
			if s.action != "" && !strings.Contains(strings.ReplaceAll(rule, " ", ""), "flowbits:noalert;") {
				comment := strings.HasPrefix(rule, "#")
				_, rest, _ := strings.Cut(strings.TrimPrefix(rule, "#"), " ")
				rule = s.action + " " + rest
				if comment {
					rule = "#" + rule
				}
			}
			lines[i] = rule
		}
		name := filepath.Base(src)
		installed = append(installed, name)
		if err := atomicfile.WriteFile(e.path(opnRuleTargetDir+"/"+name), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			return err
		}
	}
	var y strings.Builder
	y.WriteString("%YAML 1.1\n---\nrule-files:\n")
	for _, n := range installed {
		y.WriteString(" - " + n + "\n")
	}
	if err := atomicfile.WriteFile(e.path(opnInstalledRules), []byte(y.String()), 0o644); err != nil {
		return err
	}
	stale, _ := filepath.Glob(e.path(opnRuleTargetDir) + "/*.rules")
	for _, p := range stale {
		if !slices.Contains(installed, filepath.Base(p)) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// renderUserRules is the IDS template's OPNsense.rules: the user-defined
// rules of config.xml that are enabled, in the rule source folder, where
// the next install takes them like a downloaded ruleset.
//
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/+TARGETS:1 — `OPNsense.rules:/usr/local/etc/suricata/rules/OPNsense.rules`
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/OPNsense.rules:10 — `{%          if rule.enabled|default('0') == '1' %}`, then the rule with `sid:{{` 4294967295 - loop.index
func (e *Emulator) renderUserRules(root *configxml.Config) error {
	var b strings.Builder
	b.WriteString("# AUTO GENERATED, DO NOT EDIT.\n#\n# OPNsense.rules\n# User defined rules\n#\n\n# -- User defined rules\n")
	for i, r := range root.Root().FindElements("OPNsense/IDS/userDefinedRules/rule") {
		if text(r, "enabled") != "1" {
			continue
		}
		fmt.Fprintf(&b, "%s ip %s any -> %s any (msg:%q; sid:%d; rev:1;)\n", cmp.Or(text(r, "action"), "alert"), cmp.Or(text(r, "source"), "any"), cmp.Or(text(r, "destination"), "any"), text(r, "description"), uint64(4294967295)-uint64(i+1))
	}
	if err := os.MkdirAll(e.path(opnRuleSourceDir), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(e.path(opnRuleSourceDir+"/OPNsense.rules"), []byte(b.String()), 0o644)
}
