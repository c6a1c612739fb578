package fwapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fwab/fwab/probe"
)

// AlertReader counts the alerts the box's IDS instances logged for a
// rule and a destination port (probe.AlertLogs): for the IPS canary at
// points whose IDS only detects, the alerts of one round's triggers.
type AlertReader interface {
	Alerts(ctx context.Context, sid, port int) (probe.AlertLogs, error)
}

// pfAlertDirs are the log folders of pfSense's Suricata instances, one an
// interface, named by the interface and the instance's uuid. The fast log
// in each is alerts.log, appended to across restarts. The package's log
// job (every 5 minutes, with log management on) renames a full
// alerts.log to alerts.log.<date> (a name that sorts by time), makes a new
// one and signals Suricata to reopen it: until then Suricata writes on
// into the renamed file. Its size cleanup may delete the rotated files
// and empty the active one.
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:28 — "{$suricatalogdir}suricata_{$if_real}{$suricata_uuid}", the folder each sync makes
// upstream: pfsense/FreeBSD-ports@dcc5a40fb8c8d666df7bad4464615f3a2088f5de security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_yaml_template.inc:57 — "filename: alerts.log" under "- fast:", "enabled: yes" and "append: yes", with no setting to turn it off
// upstream: not settled — suricata_check_rotate_log() renames the log to `$log_file . "." . date('Y_md_Hi')`, touches a new one, then SIGHUPs Suricata, and suricata_check_dir_size_limit() deletes rotated logs and truncates active ones (pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_check_cron_misc.inc, read in the file index by character offset); checked at run time: fwab counts in alerts.log and the newest rotated one, and a count that went back makes the sample's canary say nothing
const pfAlertDirs = "/var/log/suricata/suricata_*"

// alertCountScript prints, for each instance folder under glob that has
// an alerts.log, the lines of rule sid with destination port in it and in
// its newest rotated log, and the folder. Suricata's fast log writes
// "[gid:sid:rev]" and ends each line with "-> dst:dport".
func alertCountScript(glob string, sid, port int) string {
	return fmt.Sprintf(`for d in %s; do [ -f "$d/alerts.log" ] || continue; last=; for r in "$d"/alerts.log.*; do [ -f "$r" ] && last=$r; done; echo "$(cat "$d/alerts.log" $last | grep -c -E '\[1:%d:[0-9]+\] .* -> .*:%d$') $d"; done`, glob, sid, port)
}

// ParseAlertLogs reads alertCountScript's answer.
func ParseAlertLogs(out string) (probe.AlertLogs, error) {
	logs := probe.AlertLogs{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if len(f) != 2 || err != nil {
			return nil, fmt.Errorf("alert logs: %q is not \"COUNT FOLDER\"", clip([]byte(line), 100))
		}
		logs[f[1]] = n
	}
	return logs, nil
}

// Alerts counts, in every Suricata instance's alert logs, the alerts of
// rule sid for traffic to port. A box without any instance has none.
func (p *PfSense) Alerts(ctx context.Context, sid, port int) (probe.AlertLogs, error) {
	out, err := p.output(ctx, alertCountScript(pfAlertDirs, sid, port))
	if err != nil {
		return nil, fmt.Errorf("pfsense alert logs: %w", err)
	}
	return ParseAlertLogs(out)
}
