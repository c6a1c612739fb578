package fwapi_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/fwapi/fwapitest"
)

// newPfSense starts a fake pfSense and a driver connected to it.
func newPfSense(t *testing.T) (*fwapitest.PfSense, *fwapi.PfSense) {
	t.Helper()
	fake := fwapitest.NewPfSense(t, fwapitest.MinimalPfSenseConfig)
	sh, err := fwapi.DialSSH(t.Context(), fake.Config(t))
	if err != nil {
		t.Fatalf("DialSSH: %v", err)
	}
	fw := fwapi.NewPfSense(sh, fwapi.PfSenseOptions{MetricsInterval: 50 * time.Millisecond})
	t.Cleanup(func() { fw.Close() })
	return fake, fw
}

func TestPfSenseDriverSuite(t *testing.T) {
	fwapitest.RunDriverSuite(t, func(t *testing.T) fwapitest.Fixture {
		fake, fw := newPfSense(t)
		return fwapitest.Fixture{
			FW:           fw,
			Flavor:       configxml.PfSense,
			Actions:      fake.Actions,
			ResetActions: fake.ResetActions,
			StoredConfig: func() []byte { return fake.ReadFile(t, "/conf/config.xml") },
		}
	})
}

func TestPfSenseApplyOffloadCommands(t *testing.T) {
	tests := []struct {
		name    string
		changes []configxml.Change
		want    []string
	}{
		{
			name: "checksum and tso off",
			changes: []configxml.Change{
				{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces},
				{Knob: "offload.tso", From: "on", To: "off", Action: configxml.ActionInterfaces},
			},
			want: []string{
				"rm -f /tmp/config.cache",
				"/etc/rc.reload_interfaces",
				"ifconfig -a",
				"ifconfig igb0 -txcsum -rxcsum -txcsum6 -rxcsum6 -tso",
				"ifconfig igb1 -txcsum -rxcsum -txcsum6 -rxcsum6 -tso",
			},
		},
		{
			name:    "lro on",
			changes: []configxml.Change{{Knob: "offload.lro", From: "off", To: "on", Action: configxml.ActionInterfaces}},
			want: []string{
				"rm -f /tmp/config.cache",
				"/etc/rc.reload_interfaces",
				"ifconfig -a",
				"ifconfig igb0 lro",
				"ifconfig igb1 lro",
			},
		},
		{
			name:    "rules only reload the filter",
			changes: []configxml.Change{{Knob: "rules@lan", From: "0", To: "100", Action: configxml.ActionFilterReload}},
			want:    []string{"rm -f /tmp/config.cache", "/etc/rc.filter_configure_sync"},
		},
		{
			name:    "xml escape hatch with no action runs nothing",
			changes: []configxml.Change{{Knob: "xml:/pfsense/system/timezone", From: "UTC", To: "Etc/UTC", Action: configxml.ActionNone}},
			want:    nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake, fw := newPfSense(t)
			fake.ResetCommands()
			if err := fw.Apply(t.Context(), tc.changes); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if diff := cmp.Diff(tc.want, fake.Commands()); diff != "" {
				t.Errorf("commands mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPfSenseApplyRefusesBadOffloadValue(t *testing.T) {
	fake, fw := newPfSense(t)
	fake.ResetCommands()
	err := fw.Apply(t.Context(), []configxml.Change{{Knob: "offload.tso", To: "maybe", Action: configxml.ActionInterfaces}})
	if err == nil || !strings.Contains(err.Error(), `offload.tso="maybe": want on or off`) {
		t.Fatalf("Apply(tso=maybe) = %v, want an error naming the value", err)
	}
	for _, c := range fake.Commands() {
		if strings.HasPrefix(c, "ifconfig igb") {
			t.Errorf("a refused value still ran %q", c)
		}
	}
}

func TestPfSenseWriteConfigBackupAndCache(t *testing.T) {
	fake, fw := newPfSense(t)
	ctx := t.Context()
	fake.WriteFile(t, "/tmp/config.cache", []byte("stale"))
	old := fake.ReadFile(t, "/conf/config.xml")
	updated := bytes.Replace(old, []byte("<hostname>fw1</hostname>"), []byte("<hostname>fw2</hostname>"), 1)
	if err := fw.WriteConfig(ctx, updated, "test"); err != nil {
		t.Fatal(err)
	}
	backups := fake.Glob("/conf/backup/config-*.xml")
	if len(backups) != 1 {
		t.Fatalf("backups = %v, want one config-<time>.xml", backups)
	}
	if got := fake.ReadFile(t, backups[0]); !bytes.Equal(got, old) {
		t.Errorf("backup %s does not hold the previous config", backups[0])
	}
	if len(fake.Glob("/tmp/config.cache")) != 0 {
		t.Errorf("/tmp/config.cache survived WriteConfig")
	}
	if left := fake.Glob("/conf/.config.xml.fwab-tmp-*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestPfSenseRuntimeState(t *testing.T) {
	_, fw := newPfSense(t)
	st, err := fw.RuntimeState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.FilterRules != 9 || st.GeneratedRules != 2 || st.NATRules != 2 || len(st.NATOutbound) != 2 {
		t.Errorf("rules: filter %d generated %d nat %d outbound %d; want 9, 2, 2, 2", st.FilterRules, st.GeneratedRules, st.NATRules, len(st.NATOutbound))
	}
	if len(st.IPsec) != 2 || st.IPsec[0].Encr != "AES_GCM_16-128" {
		t.Errorf("IPsec = %+v", st.IPsec)
	}
	wantIDS := []fwapi.IDSInstance{{Interface: "igb1", Mode: "ips-inline", PID: 51234}, {Interface: "igb0", Mode: "ids", PID: 51890}}
	if diff := cmp.Diff(wantIDS, st.IDS); diff != "" {
		t.Errorf("IDS mismatch (-want +got):\n%s", diff)
	}
	wantTables := map[string]int{"bogons": 3, "bogonsv6": 1, "pfB_PRI1_v4": 4, "pfB_Top_v4": 2, "snort2c": 0, "sshguard": 0, "virusprot": 0}
	if diff := cmp.Diff(wantTables, st.Tables); diff != "" {
		t.Errorf("Tables mismatch (-want +got):\n%s", diff)
	}
	if st.Version != fwapitest.PfSenseVersion {
		t.Errorf("Version = %q, want %q", st.Version, fwapitest.PfSenseVersion)
	}
	if !st.Interfaces["igb1"].Has("TXCSUM") {
		t.Errorf("igb1 options = %v, want TXCSUM among them", st.Interfaces["igb1"].Options)
	}
}

func TestPfSenseMetrics(t *testing.T) {
	_, fw := newPfSense(t)
	m, err := fw.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The fake's CPUs are 10, 20, 30 and 40 % busy.
	if diff := cmp.Diff([]float64{10, 20, 30, 40}, m.PerCPU); diff != "" {
		t.Errorf("PerCPU mismatch (-want +got):\n%s", diff)
	}
	if m.CPUPercent != 25 || m.TempCelsius != 47 || m.MbufsInUse != 1834 {
		t.Errorf("Metrics = %+v, want CPU 25, 47 °C, 1834 mbufs", m)
	}
	if want := 100 * float64(2038806-1626348) / 2038806; m.MemUsedPct != want {
		t.Errorf("MemUsedPct = %v, want %v", m.MemUsedPct, want)
	}
}

func TestPfSenseMetricsWithoutTemperatureSensor(t *testing.T) {
	fake, fw := newPfSense(t)
	fake.Transcript("sysctl -n dev.cpu.0.temperature", fwapitest.Reply{Stderr: "sysctl: unknown oid 'dev.cpu.0.temperature'\n", Exit: 1})
	m, err := fw.Metrics(t.Context())
	if err != nil {
		t.Fatalf("Metrics on a box without a sensor: %v", err)
	}
	if m.TempCelsius != 0 {
		t.Errorf("TempCelsius = %v, want 0 (unknown)", m.TempCelsius)
	}
}

func TestPfSenseCommandNotFound(t *testing.T) {
	fake, fw := newPfSense(t)
	fake.NotFound("swanctl")
	_, err := fw.RuntimeState(t.Context())
	var ce *fwapi.CommandError
	if !errors.As(err, &ce) || ce.Exit != 127 {
		t.Fatalf("RuntimeState with no swanctl = %v, want a *CommandError with exit 127", err)
	}
	if !strings.Contains(err.Error(), "command not found on the firewall") || !strings.Contains(err.Error(), "swanctl") {
		t.Errorf("error %q does not say which command is missing", err)
	}
}

func TestPfSensePackageMissing(t *testing.T) {
	fake, fw := newPfSense(t)
	fake.Transcript("/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php update",
		fwapitest.Reply{Stderr: "Could not open input file: /usr/local/www/pfblockerng/pfblockerng.php\n", Exit: 1})
	err := fw.Apply(t.Context(), []configxml.Change{{Knob: "blocklist", To: "on", Action: configxml.ActionBlocklistUpdate}})
	if err == nil || !strings.Contains(err.Error(), "blocklist-update") || !strings.Contains(err.Error(), "Could not open input file") {
		t.Fatalf("Apply(blocklist) without pfBlockerNG = %v, want an error naming the action and the firewall's message", err)
	}
}

func TestPfSenseRebootAndWaitReady(t *testing.T) {
	fake, fw := newPfSense(t)
	ctx := t.Context()
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fw.WaitReady(ctx, 10*time.Second); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if diff := cmp.Diff([]configxml.Action{"reboot"}, fake.Actions()); diff != "" {
		t.Errorf("actions mismatch (-want +got):\n%s", diff)
	}
}

func TestPfSenseWaitReadyTimesOutBeforeReboot(t *testing.T) {
	fake, fw := newPfSense(t)
	fake.WriteFile(t, "/var/run/fwab.reboot-pending", []byte("1\n"))
	err := fw.WaitReady(t.Context(), 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "reboot not started yet") {
		t.Fatalf("WaitReady with the marker still there = %v, want a timeout naming the reason", err)
	}
}

func TestPfSenseUpgrade(t *testing.T) {
	fake, fw := newPfSense(t)
	var lines []string
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := fw.Upgrade(ctx, "2.8.0-RELEASE", func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if len(lines) < 3 || !strings.Contains(strings.Join(lines, "\n"), "Upgrading pfSense-base") || lines[len(lines)-1] != "version 2.8.0-RELEASE" {
		t.Errorf("progress = %q", lines)
	}
	if !strings.Contains(strings.Join(fake.Commands(), "\n"), "/usr/local/sbin/pfSense-upgrade -y 2.8.0-RELEASE") {
		t.Errorf("commands %q lack the upgrade", fake.Commands())
	}
}

func TestPfSenseUpgradeWrongVersion(t *testing.T) {
	fake, fw := newPfSense(t)
	fake.Handle("/usr/local/sbin/pfSense-upgrade", func(_ context.Context, s *fwapitest.SSHServer, _ []string, _ io.Reader, stdout, _ io.Writer) int {
		io.WriteString(stdout, "Your system is up to date\n")
		return 0
	})
	fw = fwapi.NewPfSense(fw.Shell(), fwapi.PfSenseOptions{RebootGrace: time.Second})
	err := fw.Upgrade(t.Context(), "2.8.1-RELEASE", nil)
	if err == nil || !strings.Contains(err.Error(), `reports version "2.7.2-RELEASE"`) {
		t.Fatalf("Upgrade that did nothing = %v, want an error naming the version found", err)
	}
}

func TestPfSenseWriteConfigConnectionLost(t *testing.T) {
	fake, fw := newPfSense(t)
	old := fake.ReadFile(t, "/conf/config.xml")
	fake.DropConnectionOn("cat > ", 512)
	err := fw.WriteConfig(t.Context(), bytes.Repeat([]byte("<!-- new -->\n"), 5000), "test")
	if !errors.Is(err, fwapi.ErrConnectionLost) {
		t.Fatalf("WriteConfig with the link cut = %v, want ErrConnectionLost", err)
	}
	if got := fake.ReadFile(t, "/conf/config.xml"); !bytes.Equal(got, old) {
		t.Errorf("config.xml changed by a write that was cut off")
	}
	if left := fake.Glob("/conf/.config.xml.fwab-tmp-*"); len(left) != 0 {
		t.Errorf("partial files left on the firewall: %v", left)
	}
}

func TestPfSenseHostileValuesAreQuoted(t *testing.T) {
	fake, fw := newPfSense(t)
	hostile := "2.8.0'; reboot; echo '$(reboot)`reboot`\nreboot"
	var got []string
	fake.Handle("/usr/local/sbin/pfSense-upgrade", func(_ context.Context, _ *fwapitest.SSHServer, args []string, _ io.Reader, _, _ io.Writer) int {
		got = args
		return 1
	})
	// The fake fails the test on "reboot", which it does not know.
	if err := fw.Upgrade(t.Context(), hostile, nil); err == nil {
		t.Fatalf("Upgrade with a failing pfSense-upgrade = nil error")
	}
	if diff := cmp.Diff([]string{"/usr/local/sbin/pfSense-upgrade", "-y", hostile}, got); diff != "" {
		t.Errorf("pfSense-upgrade arguments mismatch (-want +got):\n%s", diff)
	}
	if len(fake.Glob("/var/run/fwab.reboot-pending")) != 0 {
		t.Errorf("a failed upgrade left the reboot marker: WaitReady would wait for a reboot that never comes")
	}
	owner := fwapi.LockOwner{Owner: "eve'; rm -rf /conf; echo '", PID: 1, Time: time.Unix(1700000000, 0), Token: "t"}
	if err := fw.Lock(t.Context(), owner); err != nil {
		t.Fatal(err)
	}
	want := "owner=eve'; rm -rf /conf; echo '\npid=1\ntime=2023-11-14T22:13:20Z\ntoken=t\n"
	if got := string(fake.ReadFile(t, "/var/run/fwab.lock/owner")); got != want {
		t.Errorf("owner file = %q, want %q", got, want)
	}
	if len(fake.Glob("/conf/config.xml")) != 1 {
		t.Errorf("/conf/config.xml is gone: the owner name was executed")
	}
}
