package fwapi

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/fwab/fwab/probe"
)

// AlertReader reads the alert logs of the box's IDS instances
// (probe.AlertLogs): for the IPS canary at points whose IDS only
// detects, the alerts it logged for the triggers.
type AlertReader interface {
	Alerts(ctx context.Context, sid int) (probe.AlertLogs, error)
}

// pfAlertLogs are the alert logs of pfSense's Suricata instances: each
// interface logs to a folder of its own, named by the interface and the
// instance's uuid, and the fast log in it is alerts.log, appended to
// across restarts.
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:28 — "{$suricatalogdir}suricata_{$if_real}{$suricata_uuid}", the folder each sync makes
// upstream: pfsense/FreeBSD-ports@0dd3b91c02eb5eef1d47f40f3e6c04831476b10f security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_yaml_template.inc:47 — "filename: alerts.log" under "- fast:" with "append: yes"
// upstream: not settled — that template is an old one, and the package's current one is not in the file index; checked at run time: a point whose IDS has no alerts.log gets a warning in place of a count
const pfAlertLogs = "/var/log/suricata/suricata_*/alerts.log"

// alertCountScript prints, for each alert log that exists, its size, its
// lines of rule sid (Suricata's fast log writes "[gid:sid:rev]") and its
// path.
func alertCountScript(glob string, sid int) string {
	return fmt.Sprintf(`for f in %s; do [ -f "$f" ] || continue; echo "$(wc -c < "$f") $(grep -c '\[1:%d:' "$f") $f"; done`, glob, sid)
}

// ParseAlertLogs reads alertCountScript's answer.
func ParseAlertLogs(out string) (probe.AlertLogs, error) {
	logs := probe.AlertLogs{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("alert logs: %q is not \"BYTES COUNT PATH\"", clip([]byte(line), 100))
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		n, err2 := strconv.ParseUint(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("alert logs: %q is not \"BYTES COUNT PATH\"", clip([]byte(line), 100))
		}
		logs[f[2]] = probe.AlertLog{Bytes: size, Count: n}
	}
	return logs, nil
}

// Alerts reads the alert logs of every Suricata instance: their sizes
// and their alerts of rule sid. A box without any has none.
func (p *PfSense) Alerts(ctx context.Context, sid int) (probe.AlertLogs, error) {
	out, err := p.output(ctx, alertCountScript(pfAlertLogs, sid))
	if err != nil {
		return nil, fmt.Errorf("pfsense alert logs: %w", err)
	}
	return ParseAlertLogs(out)
}
