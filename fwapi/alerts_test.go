package fwapi_test

import (
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// TestPfSenseAlerts: a box without Suricata has no alert log; once an
// interface runs it, its instance's alerts.log is there, empty, and the
// driver counts the lines of the sid asked for in it.
func TestPfSenseAlerts(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	logs, err := fw.Alerts(t.Context(), 1990001)
	if err != nil || len(logs) != 0 {
		t.Fatalf("Alerts before Suricata = %v, %v; want none", logs, err)
	}
	setIDS(t, em, fw, configxml.IDSAlert)
	logs, err = fw.Alerts(t.Context(), 1990001)
	if err != nil || len(logs) != 1 {
		t.Fatalf("Alerts with Suricata on lan = %v, %v; want one log", logs, err)
	}
	var path string
	for p, l := range logs {
		path = p
		if !strings.HasPrefix(p, "/var/log/suricata/suricata_igb1") || !strings.HasSuffix(p, "/alerts.log") || l.Bytes != 0 || l.Count != 0 {
			t.Fatalf("log %s %+v: want lan's (igb1) alerts.log, empty", p, l)
		}
	}
	lines := "12/04/2026-21:10:00.000001  [wDrop] [**] [1:1990001:1] fwab canary [**] [Classification: (null)] [Priority: 3] {UDP} 198.18.0.2:40000 -> 198.19.0.2:35000\n" +
		"12/04/2026-21:10:00.000002  [**] [1:2100498:7] GPL ATTACK_RESPONSE id check returned root [**] [Classification: Potentially Bad Traffic] [Priority: 2] {TCP} 198.18.0.2:40001 -> 198.19.0.2:80\n" +
		"12/04/2026-21:10:00.000003  [wDrop] [**] [1:1990001:1] fwab canary [**] [Classification: (null)] [Priority: 3] {UDP} 198.18.0.2:40002 -> 198.19.0.2:35000\n"
	em.PutFile(t, path, []byte(lines))
	logs, err = fw.Alerts(t.Context(), 1990001)
	if l := logs[path]; err != nil || l.Count != 2 || l.Bytes != int64(len(lines)) {
		t.Errorf("Alerts after three lines = %+v, %v; want 2 of sid 1990001 in %d bytes", l, err, len(lines))
	}
}

func TestParseAlertLogs(t *testing.T) {
	logs, err := fwapi.ParseAlertLogs("     812 3 /var/log/suricata/suricata_igb150000/alerts.log\n       0 0 /var/log/suricata/suricata_igb060000/alerts.log\n")
	if err != nil || len(logs) != 2 || logs["/var/log/suricata/suricata_igb150000/alerts.log"].Count != 3 || logs["/var/log/suricata/suricata_igb150000/alerts.log"].Bytes != 812 {
		t.Errorf("ParseAlertLogs = %v, %v", logs, err)
	}
	if _, err := fwapi.ParseAlertLogs("812 three /x\n"); err == nil || !strings.Contains(err.Error(), `"812 three /x" is not "BYTES COUNT PATH"`) {
		t.Errorf("a line that does not parse: %v", err)
	}
}
