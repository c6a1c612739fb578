package fwapi_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// newPfSense starts an emulated pfSense and a driver connected to it.
func newPfSense(t *testing.T, o labtest.Options) (*labtest.Firewall, *fwapi.PfSense) {
	t.Helper()
	em := labtest.Start(t, o)
	sh, err := fwapi.DialSSH(t.Context(), em.SSHConfig())
	if err != nil {
		t.Fatalf("DialSSH: %v", err)
	}
	fw := fwapi.NewPfSense(sh, fwapi.PfSenseOptions{MetricsInterval: 50 * time.Millisecond, RebootGrace: 10 * time.Second})
	t.Cleanup(func() { fw.Close() })
	return em, fw
}

// guiOffloadApply is what an offload change runs: the GUI's
// setup_microcode() walk, leaving out the LAN the session runs over.
var guiOffloadApply = []string{
	"rm -f /tmp/config.cache",
	"cat /conf/config.xml",
	`echo "$SSH_CONNECTION"`,
	`/usr/local/bin/php -r 'require_once("config.inc"); require_once("functions.inc"); foreach (array_keys(get_configured_interface_list(true)) as $if) { if (!in_array($if, array("lan"))) { enable_hardware_offloading($if); } }'`,
}

func TestPfSenseApplyOffloadCommands(t *testing.T) {
	tests := []struct {
		name    string
		changes []configxml.Change
		want    []string
		actions []configxml.Action
	}{
		{
			name: "checksum and tso off",
			changes: []configxml.Change{
				{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces},
				{Knob: "offload.tso", From: "on", To: "off", Action: configxml.ActionInterfaces},
			},
			want:    guiOffloadApply,
			actions: []configxml.Action{configxml.ActionInterfaces},
		},
		{
			name:    "lro on",
			changes: []configxml.Change{{Knob: "offload.lro", From: "off", To: "on", Action: configxml.ActionInterfaces}},
			want:    guiOffloadApply,
			actions: []configxml.Action{configxml.ActionInterfaces},
		},
		{
			name:    "rules only reload the filter",
			changes: []configxml.Change{{Knob: "rules@lan", From: "0", To: "100", Action: configxml.ActionFilterReload}},
			want:    []string{"rm -f /tmp/config.cache", "/etc/rc.filter_configure_sync"},
			actions: []configxml.Action{configxml.ActionFilterReload},
		},
		{
			name:    "xml escape hatch with no action runs nothing",
			changes: []configxml.Change{{Knob: "xml:/pfsense/system/timezone", From: "UTC", To: "Etc/UTC", Action: configxml.ActionNone}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			em, fw := newPfSense(t, labtest.Options{})
			em.ResetCommands()
			em.ResetActions()
			if err := fw.Apply(t.Context(), tc.changes); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if diff := cmp.Diff(tc.want, em.Commands()); diff != "" {
				t.Errorf("commands mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.actions, em.Actions()); diff != "" {
				t.Errorf("service actions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPfSenseApplyRefusesBadOffloadValue(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	em.ResetCommands()
	err := fw.Apply(t.Context(), []configxml.Change{{Knob: "offload.tso", To: "maybe", Action: configxml.ActionInterfaces}})
	if err == nil || !strings.Contains(err.Error(), `offload.tso="maybe": want on or off`) {
		t.Fatalf("Apply(tso=maybe) = %v, want an error naming the value", err)
	}
	for _, c := range em.Commands() {
		if strings.HasPrefix(c, "ifconfig igb") {
			t.Errorf("a refused value still ran %q", c)
		}
	}
}

func TestPfSenseWriteConfigBackupAndCache(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	ctx := t.Context()
	em.PutFile(t, "/tmp/config.cache", []byte("stale"))
	old := em.StoredConfig(t)
	updated := bytes.Replace(old, []byte("<hostname>pfSense</hostname>"), []byte("<hostname>fw2</hostname>"), 1)
	if bytes.Equal(updated, old) {
		t.Fatal("the factory config has no <hostname>pfSense</hostname>")
	}
	if err := fw.WriteConfig(ctx, updated, "test"); err != nil {
		t.Fatal(err)
	}
	backups := em.Glob("/conf/backup/config-*.xml")
	if len(backups) != 1 {
		t.Fatalf("backups = %v, want one config-<time>.xml", backups)
	}
	if got := em.File(t, backups[0]); !bytes.Equal(got, old) {
		t.Errorf("backup %s does not hold the previous config", backups[0])
	}
	if len(em.Glob("/tmp/config.cache")) != 0 {
		t.Errorf("/tmp/config.cache survived WriteConfig")
	}
	if left := em.Glob("/conf/.config.xml.fwab-tmp-*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestPfSenseRuntimeState(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	applyKnobs(t, fw, "rules@lan=7", "blocklist=on", "offload.checksum=off")
	st, err := fw.RuntimeState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.GeneratedRules != 7 || st.NATRules != 2 || st.FilterRules <= st.GeneratedRules {
		t.Errorf("rules: filter %d generated %d nat %d; want more than 7, 7, 2", st.FilterRules, st.GeneratedRules, st.NATRules)
	}
	if got := st.Tables[emu.BlocklistSet]; got != 1000 {
		t.Errorf("Tables[%s] = %d, want the emulator's 1000 entries (tables %v)", emu.BlocklistSet, got, st.Tables)
	}
	if st.Version != em.Version() {
		t.Errorf("Version = %q, want %q", st.Version, em.Version())
	}
	if got := fwapi.OffloadState(st.Interfaces["igb0"], "offload.checksum"); got != "off" {
		t.Errorf("igb0 checksum offload = %s, want off (options %v)", got, st.Interfaces["igb0"].Options)
	}
	if !slices.Equal(st.Management, []string{"igb1"}) {
		t.Errorf("Management = %v, want [igb1]: the LAN the session runs over, left as it was", st.Management)
	}
	if len(st.IPsec) != 0 || len(st.IDS) != 0 {
		t.Errorf("IPsec %v, IDS %v; want none on the factory config", st.IPsec, st.IDS)
	}
}

func TestPfSenseMetrics(t *testing.T) {
	_, fw := newPfSense(t, labtest.Options{})
	m, err := fw.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(m.PerCPU) == 0 || m.MemUsedPct <= 0 || m.MemUsedPct > 100 || m.MbufsInUse <= 0 {
		t.Errorf("Metrics = %+v, want per-CPU figures, memory in use and mbufs", m)
	}
}

func TestPfSenseMetricsWithoutTemperatureSensor(t *testing.T) {
	_, fw := newPfSense(t, labtest.Options{Fault: emu.Fault{Commands: []emu.CommandFault{
		{On: "sysctl -n dev.cpu.0.temperature", Stderr: "sysctl: unknown oid 'dev.cpu.0.temperature'\n", Exit: 1},
	}}})
	m, err := fw.Metrics(t.Context())
	if err != nil {
		t.Fatalf("Metrics on a box without a sensor: %v", err)
	}
	if m.TempCelsius != 0 {
		t.Errorf("TempCelsius = %v, want 0 (unknown)", m.TempCelsius)
	}
}

func TestPfSenseCommandNotFound(t *testing.T) {
	_, fw := newPfSense(t, labtest.Options{Fault: emu.Fault{Commands: []emu.CommandFault{
		{On: "swanctl", Stderr: "sh: swanctl: command not found\n", Exit: 127},
	}}})
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
	em, fw := newPfSense(t, labtest.Options{Fault: emu.Fault{Commands: []emu.CommandFault{
		{On: "pfblockerng.php update", Stderr: "Could not open input file: /usr/local/www/pfblockerng/pfblockerng.php\n", Exit: 1},
	}}})
	err := fw.Apply(t.Context(), []configxml.Change{{Knob: "blocklist", To: "on", Action: configxml.ActionBlocklistUpdate}})
	if err == nil || !strings.Contains(err.Error(), "blocklist-update") || !strings.Contains(err.Error(), "Could not open input file") {
		t.Fatalf("Apply(blocklist) without pfBlockerNG = %v, want an error naming the action and the firewall's message", err)
	}
	if a := em.Actions(); len(a) != 0 {
		t.Errorf("service actions %v, want none: the package is missing", a)
	}
}

func TestPfSenseRebootAndWaitReady(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	ctx := t.Context()
	booted := em.Commands()
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fw.WaitReady(ctx, 10*time.Second); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	if !strings.Contains(strings.Join(em.Commands()[len(booted):], "\n"), "shutdown -r now") {
		t.Errorf("commands %q lack the reboot", em.Commands())
	}
	if _, err := fw.Info(ctx); err != nil {
		t.Errorf("Info after the reboot: %v", err)
	}
}

// TestPfSenseWaitReadyInRouterMode: a box booted with the filter disabled
// is ready with pf disabled (pfctl -si says Disabled, by its config).
func TestPfSenseWaitReadyInRouterMode(t *testing.T) {
	_, fw := newPfSense(t, labtest.Options{})
	ctx := t.Context()
	data, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("filter", configxml.FilterDisabled); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, c.Bytes(), "router mode"); err != nil {
		t.Fatal(err)
	}
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fw.WaitReady(ctx, 10*time.Second); err != nil {
		t.Fatalf("WaitReady in router mode: %v", err)
	}
	if st, err := fw.RuntimeState(ctx); err != nil || st.PF != fwapi.PFDisabled {
		t.Errorf("RuntimeState after the reboot: PF %q, %v; want Disabled", st.PF, err)
	}
}

func TestPfSenseWaitReadyTimesOutBeforeReboot(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	em.PutFile(t, "/var/run/fwab.reboot-pending", []byte("1\n"))
	err := fw.WaitReady(t.Context(), 1500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "reboot not started yet") {
		t.Fatalf("WaitReady with the marker still there = %v, want a timeout naming the reason", err)
	}
}

func TestPfSenseUpgrade(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	var lines []string
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := fw.Upgrade(ctx, "2.8.0-RELEASE", func(s string) { lines = append(lines, s) }); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if len(lines) < 3 || !strings.Contains(strings.Join(lines, "\n"), "Upgrading pfSense-kernel") || lines[len(lines)-1] != "version 2.8.0-RELEASE" {
		t.Errorf("progress = %q", lines)
	}
	cmds := strings.Join(em.Commands(), "\n")
	if !strings.Contains(cmds, "/usr/local/sbin/pfSense-upgrade -c\n") || !strings.Contains(cmds, "/usr/local/sbin/pfSense-upgrade -y\n") {
		t.Errorf("commands %q lack the check and the upgrade without a version", em.Commands())
	}
	if em.Version() != "2.8.0-RELEASE" {
		t.Errorf("the emulator runs %s after the upgrade, want 2.8.0-RELEASE", em.Version())
	}
	if em.Boots() != 3 {
		t.Errorf("boots = %d: Upgrade returned before the major upgrade's second reboot", em.Boots())
	}
}

// TestPfSenseUpgradeRefusesOtherVersion: the branch offers 2.8.0, the user
// asks for 2.8.1; pfSense-upgrade cannot be told a version, so nothing
// changes and both versions are named.
func TestPfSenseUpgradeRefusesOtherVersion(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	err := fw.Upgrade(t.Context(), "2.8.1-RELEASE", nil)
	var refused *fwapi.UpgradeRefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "asked for 2.8.1-RELEASE") || !strings.Contains(err.Error(), "would install 2.8.0") {
		t.Fatalf("Upgrade(2.8.1) = %v, want a refusal naming 2.8.1 and 2.8.0", err)
	}
	for _, c := range em.Commands() {
		if strings.Contains(c, "pfSense-upgrade -y") {
			t.Errorf("a refused upgrade ran %q", c)
		}
	}
	if em.Version() != "2.7.2-RELEASE" || em.Boots() != 1 {
		t.Errorf("the emulator runs %s after %d boots: something changed", em.Version(), em.Boots())
	}
}

func TestPfSenseUpgradeNeedsCheckMode(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{Fault: emu.Fault{Commands: []emu.CommandFault{
		{On: "pfSense-upgrade -h", Stdout: "Usage: pfSense-upgrade [-y]\n"},
	}}})
	err := fw.Upgrade(t.Context(), "2.8.0-RELEASE", nil)
	if err == nil || !strings.Contains(err.Error(), "lists no -c") {
		t.Fatalf("Upgrade without -c in the usage = %v, want a refusal", err)
	}
	if em.Version() != "2.7.2-RELEASE" {
		t.Errorf("the emulator runs %s", em.Version())
	}
}

func TestNormalizePfSenseVersion(t *testing.T) {
	for in, want := range map[string]string{"2.7.2_1": "2.7.2", "2.8.0,1": "2.8.0", "2.7.2-RELEASE\n": "2.7.2", "23.09.1": "23.09.1", "2.8.0_2,1": "2.8.0"} {
		if got := fwapi.NormalizePfSenseVersion(in); got != want {
			t.Errorf("NormalizePfSenseVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPfSenseWriteConfigConnectionLost(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{Fault: emu.Fault{Commands: []emu.CommandFault{
		{On: "cat > ", Drop: true, DropAfter: 512},
	}}})
	old := em.StoredConfig(t)
	err := fw.WriteConfig(t.Context(), bytes.Repeat([]byte("<!-- new -->\n"), 5000), "test")
	if !errors.Is(err, fwapi.ErrConnectionLost) {
		t.Fatalf("WriteConfig with the link cut = %v, want ErrConnectionLost", err)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, old) {
		t.Errorf("config.xml changed by a write that was cut off")
	}
	if left := em.Glob("/conf/.config.xml.fwab-tmp-*"); len(left) != 0 {
		t.Errorf("partial files left on the firewall: %v", left)
	}
}

func TestPfSenseHostileValuesAreQuoted(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	hostile := "2.8.0'; reboot; echo '$(reboot)`reboot`\nreboot"
	err := fw.Upgrade(t.Context(), hostile, nil)
	// The version never reaches a command line: the box's own offer is
	// compared with it, and it is refused, named whole.
	if err == nil || !strings.Contains(err.Error(), "asked for 2.8.0'; reboot; echo '$(reboot)`reboot`") {
		t.Fatalf("Upgrade(hostile) = %v, want a refusal naming the whole value", err)
	}
	if em.Version() != "2.7.2-RELEASE" || em.Boots() != 1 {
		t.Errorf("the emulator runs %s after %d boots: something upgraded or rebooted", em.Version(), em.Boots())
	}
}

// applyKnobs changes knobs as a sweep does: read the config, set the knobs
// with configxml, write it, apply the diff.
func applyKnobs(t *testing.T, fw fwapi.Firewall, assignments ...string) {
	t.Helper()
	if err := editAndApply(t, fw, func(c *configxml.Config) error { return c.SetAll(assignments) }); err != nil {
		t.Fatalf("%q: %v", assignments, err)
	}
}

// editAndApply edits the firewall's config with configxml.Edit, writes it
// and applies the changes; it returns Apply's error.
func editAndApply(t *testing.T, fw fwapi.Firewall, edit func(*configxml.Config) error) error {
	t.Helper()
	ctx := t.Context()
	data, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next, changes, err := configxml.Edit(data, "", edit)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, next, "test"); err != nil {
		t.Fatalf("WriteConfig: %v", err)
	}
	return fw.Apply(ctx, changes)
}

// TestPfSensePackageSaveOverForeignEditRefused: an edit by someone else
// between fwab's write and the package's run is not adopted with the
// package's own save: the baseline is what fwab wrote.
func TestPfSensePackageSaveOverForeignEditRefused(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	c, err := configxml.LoadBytes(em.StoredConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("blocklist", "on"); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(t.Context(), c.Bytes(), "test"); err != nil {
		t.Fatal(err)
	}
	em.PutFile(t, "/conf/config.xml", bytes.Replace(c.Bytes(), []byte("<hostname>pfSense</hostname>"), []byte("<hostname>edited</hostname>"), 1))
	err = fw.Apply(t.Context(), []configxml.Change{{Knob: "blocklist", To: "on", Action: configxml.ActionBlocklistUpdate}})
	if err == nil || !strings.Contains(err.Error(), "more than the package's own") {
		t.Errorf("Apply after a foreign edit = %v, want the package's save refused", err)
	}
	if _, ok := fw.AdoptedConfig(); ok {
		t.Errorf("a save over a foreign edit was adopted")
	}
}

// TestPfSenseWriteConfigBacksUpAsWriteConfigDoes: a config fwab writes is
// installed as pfSense's write_config() installs one: under the config
// lock, the old file backed up as config-<its revision time>.xml and
// recorded in backup.cache (which the GUI's backup page lists), no staged
// file left behind.
func TestPfSenseWriteConfigBacksUpAsWriteConfigDoes(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	old := em.StoredConfig(t)
	c, err := configxml.LoadBytes(old)
	if err != nil {
		t.Fatal(err)
	}
	revTime, err := c.Get("xml:revision/time")
	if err != nil || revTime == "" {
		t.Fatal("the lab config has no revision time")
	}
	if err := c.Set("rules@lan", "3"); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(t.Context(), c.Bytes(), "rules@lan=3"); err != nil {
		t.Fatal(err)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, c.Bytes()) {
		t.Fatal("config.xml is not the config written")
	}
	if got := em.File(t, "/conf/backup/config-"+revTime+".xml"); !bytes.Equal(got, old) {
		t.Errorf("/conf/backup/config-%s.xml holds %d bytes, want the old config (%d)", revTime, len(got), len(old))
	}
	if cache := string(em.File(t, "/conf/backup/backup.cache")); !strings.Contains(cache, "i:"+revTime+";") {
		t.Errorf("backup.cache = %q, want an entry for %s", cache, revTime)
	}
	if out, _, _ := em.Run(t, "ls -a /conf", ""); strings.Contains(out, "fwab-new") || strings.Contains(out, "fwab-tmp") {
		t.Errorf("staged files left in /conf:\n%s", out)
	}
}

// TestPfSenseWriteConfigChecksWhatIsInstalled: the install's exit status
// is not the word on whether config.xml was replaced (PHP's die() exits 0,
// a fault after the rename exits non-zero), so WriteConfig compares
// config.xml with what it wrote.
func TestPfSenseWriteConfigChecksWhatIsInstalled(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	old := em.StoredConfig(t)
	next := withLANRules(t, old, "3")
	em.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "backup_config();", Skip: true}}})
	err := fw.WriteConfig(t.Context(), next, "rules@lan=3")
	if err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("WriteConfig whose install did nothing but exited 0 = %v, want an error saying the config was not installed", err)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, old) {
		t.Error("config.xml changed")
	}
}

// TestPfSenseWriteConfigNeedsTheConfigLock: pfSense's lock() returns no
// handle when it cannot open or lock /tmp/config.lock, and 2.6 and 2.7's
// write_config goes on without the lock. fwab's install refuses instead,
// staging nothing: unlocked, a package or GUI save could interleave.
func TestPfSenseWriteConfigNeedsTheConfigLock(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{})
	old := em.StoredConfig(t)
	next := withLANRules(t, old, "3")
	if err := os.Mkdir(filepath.Join(em.Root, "tmp", "config.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := fw.WriteConfig(t.Context(), next, "rules@lan=3")
	if err == nil || !strings.Contains(err.Error(), "/tmp/config.lock") {
		t.Errorf("WriteConfig without the config lock = %v, want an error naming /tmp/config.lock", err)
	}
	if got := em.StoredConfig(t); !bytes.Equal(got, old) {
		t.Error("config.xml changed although pfSense's config lock could not be taken")
	}
	if out, _, _ := em.Run(t, "ls -a /conf", ""); strings.Contains(out, "fwab-new") || strings.Contains(out, "fwab-tmp") {
		t.Errorf("staged files left in /conf:\n%s", out)
	}
}

// withLANRules is cfg with n generated rules on the LAN.
func withLANRules(t *testing.T, cfg []byte, n string) []byte {
	t.Helper()
	c, err := configxml.LoadBytes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("rules@lan", n); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}
