package fwapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// TestPfSenseAlerts: a box without Suricata has no alert log; once an
// interface runs it, its instance is counted, and the driver counts the
// lines of the sid and destination port asked for, on through the log
// job's rotation (the renamed log, which Suricata writes on into until
// it reopens, and the new one).
func TestPfSenseAlerts(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	logs, err := fw.Alerts(t.Context(), 1990001, 35000)
	if err != nil || len(logs) != 0 {
		t.Fatalf("Alerts before Suricata = %v, %v; want none", logs, err)
	}
	setIDS(t, em, fw, configxml.IDSAlert)
	logs, err = fw.Alerts(t.Context(), 1990001, 35000)
	if err != nil || len(logs) != 1 {
		t.Fatalf("Alerts with Suricata on lan = %v, %v; want one instance", logs, err)
	}
	var dir string
	for d, n := range logs {
		dir = d
		if !strings.HasPrefix(d, "/var/log/suricata/suricata_igb1") || n != 0 {
			t.Fatalf("instance %s: %d; want lan's (igb1), no alert", d, n)
		}
	}
	canary := func(port int) string {
		return fmt.Sprintf("12/04/2026-21:10:00.000001  [wDrop] [**] [1:1990001:1] fwab canary [**] [Classification: (null)] [Priority: 3] {UDP} 198.18.0.2:40000 -> 198.19.0.2:%d\n", port)
	}
	other := "12/04/2026-21:10:00.000002  [**] [1:2100498:7] GPL ATTACK_RESPONSE id check returned root [**] [Classification: Potentially Bad Traffic] [Priority: 2] {TCP} 198.18.0.2:40001 -> 198.19.0.2:35000\n"
	count := func(what string, want uint64) {
		t.Helper()
		logs, err := fw.Alerts(t.Context(), 1990001, 35000)
		if err != nil || logs[dir] != want {
			t.Errorf("%s: Alerts = %v, %v; want %d in %s", what, logs, err, want, dir)
		}
	}
	em.PutFile(t, dir+"/alerts.log", []byte(canary(35000)+other+canary(35002)+canary(35000)))
	count("two of port 35000 among others", 2)
	// The log job renames the full log and makes a new one; an older
	// rotated log (an hour before) is not counted.
	em.Run(t, "mv "+dir+"/alerts.log "+dir+"/alerts.log.2026_1204_2110", "")
	em.PutFile(t, dir+"/alerts.log.2026_1204_2010", []byte(canary(35000)))
	em.PutFile(t, dir+"/alerts.log", []byte(canary(35000)))
	count("after a rotation", 3)
}

func TestParseAlertLogs(t *testing.T) {
	logs, err := fwapi.ParseAlertLogs("3 /var/log/suricata/suricata_igb150000\n0 /var/log/suricata/suricata_igb060000\n")
	if err != nil || len(logs) != 2 || logs["/var/log/suricata/suricata_igb150000"] != 3 {
		t.Errorf("ParseAlertLogs = %v, %v", logs, err)
	}
	if _, err := fwapi.ParseAlertLogs("three /x\n"); err == nil || !strings.Contains(err.Error(), `"three /x" is not "COUNT FOLDER"`) {
		t.Errorf("a line that does not parse: %v", err)
	}
}
