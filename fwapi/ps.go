package fwapi

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSuricataProcesses finds the Suricata processes in
// `ps ax -o pid,command` output. --netmap IF is inline IPS; -i IF is pcap,
// which serves both IDS and legacy IPS (the process cannot tell which: the
// config's blockoffenders can), reported as "ids".
func ParseSuricataProcesses(out string) ([]IDSInstance, error) {
	var ids []IDSInstance
	for i, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] == "PID" {
			continue
		}
		if !strings.HasSuffix(f[1], "/suricata") && f[1] != "suricata" {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("ps line %d: pid %q is not a number", i+1, f[0])
		}
		inst := IDSInstance{PID: pid, Mode: "ids", Rules: RulesUnknown}
		cfgIf := ""
		for j := 2; j < len(f); j++ {
			next := ""
			if j+1 < len(f) && !strings.HasPrefix(f[j+1], "-") {
				next = f[j+1]
			}
			switch {
			case f[j] == "--netmap":
				inst.Mode = "ips-inline"
				inst.Interface = next
			case strings.HasPrefix(f[j], "--netmap="):
				inst.Mode = "ips-inline"
				inst.Interface = strings.TrimPrefix(f[j], "--netmap=")
			case f[j] == "-i" || f[j] == "--pcap":
				inst.Interface = next
			case f[j] == "-c":
				inst.Config = next
				cfgIf = suricataConfigInterface(next)
			}
		}
		if inst.Interface == "" {
			// pfSense's inline mode names the interface only in the yaml:
			// -c /usr/local/etc/suricata/suricata_<uuid>_<if>/suricata.yaml
			inst.Interface = cfgIf
		}
		if inst.Interface == "" {
			return nil, fmt.Errorf("ps line %d: suricata without -i or --netmap: %q", i+1, strings.Join(f[1:], " "))
		}
		ids = append(ids, inst)
	}
	return ids, nil
}

// suricataConfigInterface takes the interface from pfSense's per-instance
// config folder name, suricata_<uuid>_<if>.
func suricataConfigInterface(path string) string {
	for _, part := range strings.Split(path, "/") {
		if rest, ok := strings.CutPrefix(part, "suricata_"); ok {
			if _, ifname, ok := strings.Cut(rest, "_"); ok {
				return ifname
			}
		}
	}
	return ""
}

// suricataRulesCmd counts, for each instance in order, the rules in the
// files pfSense's package builds for it beside its -c configuration (the
// enforcing rules, the flowbit-required rules, custom rules), one number
// a line: "-" where the instance shows no configuration or the folder is
// missing. A rule is a line that starts with an action; commented-out
// rules are not counted.
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:1308 — `if (file_exists("{$suricatacfgdir}/rules/".SURICATA_ENFORCING_RULES_FILENAME)) {` (flowbits at 1312, custom.rules at 1316)
func suricataRulesCmd(ids []IDSInstance) string {
	var b strings.Builder
	for _, i := range ids {
		if i.Config == "" {
			b.WriteString("echo -; ")
			continue
		}
		d := ShellQuote(strings.TrimSuffix(i.Config, "/suricata.yaml") + "/rules")
		b.WriteString("if [ -d " + d + " ]; then cat " + d + "/suricata.rules " + d + "/flowbit-required.rules " + d + "/custom.rules 2>/dev/null | grep -cE '^(alert|drop|reject|pass)[[:space:]]'; else echo -; fi; ")
	}
	b.WriteString("true")
	return b.String()
}

// applyRuleCounts sets each instance's Rules from suricataRulesCmd's
// output.
func applyRuleCounts(ids []IDSInstance, out string) error {
	lines := strings.Fields(out)
	if len(lines) != len(ids) {
		return fmt.Errorf("suricata rule counts: %d answers for %d instances: %q", len(lines), len(ids), out)
	}
	for i, l := range lines {
		if l == "-" {
			ids[i].Rules = RulesUnknown
			continue
		}
		n, err := strconv.Atoi(l)
		if err != nil {
			return fmt.Errorf("suricata rule counts: %q is not a number", l)
		}
		ids[i].Rules = n
	}
	return nil
}
