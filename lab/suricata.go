package lab

import (
	"os"
	"strings"

	"github.com/beevik/etree"
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
