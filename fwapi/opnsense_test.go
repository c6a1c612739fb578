package fwapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/fixtures/api"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// changes builds one change per action, with a knob named after it.
func changes(actions ...string) []configxml.Change {
	var out []configxml.Change
	for _, a := range actions {
		out = append(out, configxml.Change{Knob: "knob-for-" + a, From: "a", To: "b", Action: configxml.Action(a)})
	}
	return out
}

// newOPNsense starts an emulated OPNsense and connects the driver through
// its REST API; withShell gives the driver the SSH side too.
func newOPNsense(t *testing.T, o labtest.Options, withShell bool, do fwapi.OPNsenseOptions) (*fwapi.OPNsense, *labtest.Firewall) {
	t.Helper()
	o.Product = configxml.OPNsense
	em := labtest.Start(t, o)
	var ssh fwapi.Runner
	if withShell {
		ssh = dial(t, em.SSHConfig())
	}
	if do.PollInterval == 0 {
		do.PollInterval = 20 * time.Millisecond
	}
	fw, err := fwapi.NewOPNsense(context.Background(), em.APITarget(t), ssh, do)
	if err != nil {
		t.Fatalf("NewOPNsense() error = %v", err)
	}
	t.Cleanup(func() { fw.Close() })
	return fw, em
}

// since returns what happened after a mark taken with len(...).
func since[T any](all []T, mark int) []T { return all[mark:] }

func TestOPNsenseInfo(t *testing.T) {
	for _, v := range []string{"25.7.11_2", "26.1.2", "26.7"} {
		t.Run(v, func(t *testing.T) {
			fw, _ := newOPNsense(t, labtest.Options{Version: v}, false, fwapi.OPNsenseOptions{})
			got, err := fw.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := fwapi.Info{Flavor: configxml.OPNsense, Version: v, Hostname: "OPNsense.lab.fwab.test", NICs: []string{"igb0", "igb1"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Info() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOPNsenseBadVersion(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense, Version: "unknown"})
	_, err := fwapi.NewOPNsense(context.Background(), em.APITarget(t), nil, fwapi.OPNsenseOptions{})
	if err == nil || !strings.Contains(err.Error(), `cannot read the firmware version "unknown"`) {
		t.Fatalf("NewOPNsense() error = %v, want the version named", err)
	}
}

func TestOPNsenseApply(t *testing.T) {
	tests := []struct {
		name      string
		version   string
		shell     bool
		actions   []string
		wantCalls []string // routes, in order
		wantSSH   []string
	}{
		{name: "filter", version: "26.1.2", actions: []string{"filter-reload", "filter-reload"},
			wantCalls: []string{"POST /api/firewall/filter/apply"}},
		{name: "each action once, in order", version: "26.1.2",
			actions: []string{"ids-restart", "filter-reload", "interfaces-reconfigure", "ipsec-restart", "ids-restart", "none"},
			wantCalls: []string{"POST /api/interfaces/settings/reconfigure", "POST /api/firewall/filter/apply", "POST /api/ipsec/service/reconfigure",
				"GET /api/core/backup/download/{host}", // the config enables no IPsec connection: nothing more to check
				"POST /api/ids/service/reconfigure"}},
		{name: "26.7 filter", version: "26.7.1", actions: []string{"filter-reload"},
			wantCalls: []string{"POST /api/firewall/filter/apply"}},
		{name: "25.7 interfaces over ssh", version: "25.7.11", shell: true, actions: []string{"interfaces-reconfigure"},
			wantSSH: []string{"cat /conf/config.xml", `echo "$SSH_CONNECTION"`, `/usr/local/bin/php -r 'require_once("config.inc"); require_once("interfaces.inc"); $details = legacy_interfaces_details(); foreach (array_keys(get_interface_list()) as $dev) { if (!in_array($dev, array("igb1"))) { configure_interface_hardware($dev, $details); } }'`}},
		{name: "nothing to do", version: "26.1.2", actions: []string{"none"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{Version: tc.version}, tc.shell, fwapi.OPNsenseOptions{})
			calls, cmds := len(em.Requests()), len(em.Commands())
			if err := fw.Apply(context.Background(), changes(tc.actions...)); err != nil {
				t.Fatalf("Apply(%v) error = %v", tc.actions, err)
			}
			if diff := cmp.Diff(tc.wantCalls, since(em.Requests(), calls), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Apply(%v) API calls (-want +got):\n%s", tc.actions, diff)
			}
			if tc.shell {
				if diff := cmp.Diff(tc.wantSSH, since(em.Commands(), cmds), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("Apply(%v) shell commands (-want +got):\n%s", tc.actions, diff)
				}
			}
		})
	}
}

// TestOPNsenseRebootThenIDS: a step that reboots and changes the IDS
// reconfigures the IDS after the boot, as on pfSense (configxml.Effective):
// whether OPNsense's boot installs the rules the config names is not
// settled, so fwab does not rely on it; nothing else runs.
func TestOPNsenseRebootThenIDS(t *testing.T) {
	fw, em := newOPNsense(t, labtest.Options{Version: "26.1.2"}, true, fwapi.OPNsenseOptions{})
	calls := len(em.Requests())
	if err := fw.Apply(context.Background(), changes("ids-restart", "reboot", "filter-reload")); err != nil {
		t.Fatal(err)
	}
	got := since(em.Requests(), calls)
	reboot := slices.Index(got, "POST /api/core/firmware/reboot")
	ids := slices.Index(got, "POST /api/ids/service/reconfigure")
	if reboot < 0 || ids < reboot || slices.Contains(got, "POST /api/firewall/filter/apply") {
		t.Errorf("Apply(reboot, ids-restart, filter-reload) API calls %q; want the reboot, then the IDS reconfigured, and no filter apply (the boot loads it)", got)
	}
}

func TestOPNsenseApplyRefusals(t *testing.T) {
	tests := []struct {
		name    string
		version string
		actions []string
		wantErr string
	}{
		{name: "blocklist", version: "26.1.2", actions: []string{"filter-reload", "blocklist-update"}, wantErr: "pfBlockerNG is pfSense-only"},
		{name: "firmware", version: "26.1.2", actions: []string{"firmware-switch"}, wantErr: "go through Upgrade"},
		{name: "unknown", version: "26.1.2", actions: []string{"reboot-everything"}, wantErr: `unknown action "reboot-everything"`},
		{name: "25.7 interfaces without ssh", version: "25.7.11", actions: []string{"filter-reload", "interfaces-reconfigure"}, wantErr: "OPNsense 25.7.11 applies offload settings only from a shell (its GUI's interfaces_hardware): add an ssh section"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{Version: tc.version}, false, fwapi.OPNsenseOptions{})
			before := len(em.Requests())
			err := fw.Apply(context.Background(), changes(tc.actions...))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Apply(%v) error = %v, want one containing %q", tc.actions, err, tc.wantErr)
			}
			if n := len(em.Requests()) - before; n != 0 {
				t.Errorf("Apply(%v) sent %d requests before refusing, want none", tc.actions, n)
			}
		})
	}
}

func TestOPNsenseFailureInsideHTTP200(t *testing.T) {
	tests := []struct {
		name            string
		body            string
		wantValidations map[string]string
		want            string
	}{
		{name: "validations", body: `{"result":"failed","validations":{"ids.general.interfaces":"Interface lan is not netmap capable.","ids.general.homenet":["Invalid network address.","Field required."]}}`,
			wantValidations: map[string]string{"ids.general.interfaces": "Interface lan is not netmap capable.", "ids.general.homenet": "Invalid network address.; Field required."},
			want:            "validation failed: ids.general.homenet: Invalid network address.; Field required.; ids.general.interfaces: Interface lan is not netmap capable.;"},
		{name: "status failed", body: `{"status":"failed"}`, want: `the firewall reported "failed"`},
		{name: "status error", body: `{"status":"error","message":"template generation failed"}`, want: "template generation failed"},
		{name: "not json", body: `<html>oops</html>`, want: "not JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{}, false, fwapi.OPNsenseOptions{})
			em.SetFault(emu.Fault{Requests: []emu.RequestFault{{Route: "POST /api/ids/service/reconfigure", Body: tc.body}}})
			err := fw.Apply(context.Background(), changes("ids-restart"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Apply() error = %v, want one containing %q", err, tc.want)
			}
			var ae *fwapi.APIError
			if tc.wantValidations != nil {
				if !errors.As(err, &ae) {
					t.Fatalf("Apply() error %v is not an *APIError", err)
				}
				if diff := cmp.Diff(tc.wantValidations, ae.Validations); diff != "" {
					t.Errorf("Validations (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestOPNsenseReadWriteConfig(t *testing.T) {
	ctx := context.Background()
	fw, em := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{Now: func() time.Time { return time.Unix(1764470000, 123456789) }})
	orig := em.StoredConfig(t)
	got, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, orig) {
		t.Fatalf("ReadConfig() = %q, want the firewall's file byte for byte", got)
	}
	// Values a shell would act on, carried in the config: they must land in
	// the file as bytes and never run.
	next := bytes.Replace(got, []byte("<hostname>OPNsense</hostname>"), []byte("<hostname>OPNsense</hostname>\n    <descr>a'b\"c; $(touch /tmp/pwned) `touch /tmp/pwned2`\nline2</descr>"), 1)
	if bytes.Equal(next, got) {
		t.Fatal("the factory config has no <hostname>OPNsense</hostname>")
	}
	if err := fw.WriteConfig(ctx, next, "fwab: test"); err != nil {
		t.Fatalf("WriteConfig() error = %v", err)
	}
	if !bytes.Equal(em.StoredConfig(t), next) {
		t.Errorf("config.xml on the firewall = %q, want %q", em.StoredConfig(t), next)
	}
	// Named by the box's clock, with fwab's fraction.
	backups := em.Glob("/conf/backup/config-*.1234.xml")
	if len(backups) != 1 {
		t.Fatalf("backups named with WriteConfig's fraction: %q, want one", backups)
	}
	if back, err := em.ReadFile(backups[0]); err != nil || !bytes.Equal(back, next) {
		t.Errorf("backup %s = %q, %v; want the new config, as Config::save() backs up", backups[0], back, err)
	}
	for _, p := range []string{"/conf/.config.xml.fwab-new", "/tmp/pwned", "/tmp/pwned2"} {
		if len(em.Glob(p)) != 0 {
			t.Errorf("%s exists on the firewall after WriteConfig", p)
		}
	}
	again, err := fw.ReadConfig(ctx)
	if err != nil || !bytes.Equal(again, next) {
		t.Errorf("ReadConfig() after WriteConfig = %q, %v; want the written bytes", again, err)
	}
}

func TestOPNsenseWriteConfigFaults(t *testing.T) {
	factory := emu.FactoryConfigAt(configxml.OPNsense, "26.1.2", emu.NICs{})
	next := bytes.Replace(factory, []byte("<hostname>OPNsense</hostname>"), []byte("<hostname>fw2</hostname>"), 1)
	tests := []struct {
		name    string
		shell   bool
		config  []byte
		fault   emu.CommandFault
		wantErr string
	}{
		{name: "no ssh", config: next, wantErr: "OPNsense has no API that writes config.xml: add an ssh section"},
		{name: "pfSense config", shell: true, config: []byte("<?xml version=\"1.0\"?>\n<pfsense><version>23.3</version></pfsense>\n"), wantErr: "refusing a pfsense config.xml on an OPNsense firewall"},
		{name: "malformed", shell: true, config: []byte("<opnsense><system></opnsense>"), wantErr: "refusing a config.xml that does not load"},
		{name: "checksum mismatch", shell: true, config: next,
			fault:   emu.CommandFault{On: "sha256", Stdout: strings.Repeat("0", 64) + "\n"},
			wantErr: "checksum of the copy on the firewall is \"000"},
		{name: "session lost before rename", shell: true, config: next,
			fault:   emu.CommandFault{On: "mv ", Drop: true},
			wantErr: "connection"},
		{name: "disk full on upload", shell: true, config: next,
			fault:   emu.CommandFault{On: "cat > ", Exit: 1, Stderr: "cat: write error: No space left on device"},
			wantErr: "No space left on device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := labtest.Options{}
			if tc.fault.On != "" {
				o.Fault.Commands = []emu.CommandFault{tc.fault}
			}
			fw, em := newOPNsense(t, o, tc.shell, fwapi.OPNsenseOptions{})
			err := fw.WriteConfig(context.Background(), tc.config, "test")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WriteConfig() error = %v, want one containing %q", err, tc.wantErr)
			}
			if !bytes.Equal(em.StoredConfig(t), factory) {
				t.Errorf("config.xml changed after a failed WriteConfig: %q", em.StoredConfig(t))
			}
			if len(em.Glob("/conf/.config.xml.fwab-new")) != 0 {
				t.Error("the staged file was left on the firewall")
			}
		})
	}
}

// TestOPNsenseReadConfigIsConfigXML: the backup download streams the newest
// /conf/backup/config-*.xml; ReadConfig must read /conf/config.xml itself,
// even when a newer backup (a leftover of another run) differs from it.
func TestOPNsenseReadConfigIsConfigXML(t *testing.T) {
	ctx := context.Background()
	fw, em := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{})
	stale := bytes.Replace(em.StoredConfig(t), []byte("<hostname>OPNsense</hostname>"), []byte("<hostname>stale</hostname>"), 1)
	em.PutFile(t, "/conf/backup/config-9999999999.0000.xml", stale)
	got, err := fw.ReadConfig(ctx)
	if err != nil || !bytes.Equal(got, em.StoredConfig(t)) {
		t.Fatalf("ReadConfig() = %.80q, %v; want /conf/config.xml, not the newest backup", got, err)
	}
	// Without SSH the driver can only download, and the emulated API
	// answers as upstream's does: the newest backup.
	fw2, em2 := newOPNsense(t, labtest.Options{}, false, fwapi.OPNsenseOptions{})
	stale2 := bytes.Replace(em2.StoredConfig(t), []byte("<hostname>OPNsense</hostname>"), []byte("<hostname>stale</hostname>"), 1)
	em2.PutFile(t, "/conf/backup/config-9999999999.0000.xml", stale2)
	if got, err := fw2.ReadConfig(ctx); err != nil || !bytes.Equal(got, stale2) {
		t.Errorf("backup download = %.80q, %v; want the newest backup", got, err)
	}
}

// idsOn is config.xml with Suricata enabled on the given interfaces in
// the release's form of the mode (mode on 26.1+, ips before).
func idsOn(t *testing.T, em *labtest.Firewall, mode string, ifaces string) {
	t.Helper()
	cfg := em.StoredConfig(t)
	cfg = bytes.Replace(cfg, []byte("<enabled>0</enabled>\n        <mode>pcap</mode>"), []byte("<enabled>1</enabled>\n        <mode>"+mode+"</mode>"), 1)
	ips := map[string]string{"netmap": "1", "pcap": "0"}[mode]
	cfg = bytes.Replace(cfg, []byte("<enabled>0</enabled>\n        <ips>0</ips>"), []byte("<enabled>1</enabled>\n        <ips>"+ips+"</ips>"), 1)
	cfg = bytes.Replace(cfg, []byte("<interfaces/>"), []byte("<interfaces>"+ifaces+"</interfaces>"), 1)
	if !bytes.Contains(cfg, []byte("<interfaces>"+ifaces+"</interfaces>")) {
		t.Fatal("the factory config has no IDS section to enable")
	}
	em.PutFile(t, "/conf/config.xml", cfg)
}

func TestOPNsenseRuntimeState(t *testing.T) {
	running := emu.RequestFault{Route: "GET /api/ids/service/status", Body: string(api.Body("opnsense/ids_service_status.json"))}
	sas := []emu.RequestFault{
		{Route: "GET /api/ipsec/sessions/search_phase1", Body: string(api.Body("opnsense/sessions_phase1.json"))},
		{Route: "POST /api/ipsec/sessions/search_phase2", Body: string(api.Body("opnsense/sessions_phase2.json"))},
	}
	tests := []struct {
		name    string
		version string
		mode    string // "" leaves the IDS off
		ifaces  string
		stopped bool
		wantIDS []fwapi.IDSInstance
	}{
		{name: "26.1 netmap", version: "26.1.2", mode: "netmap", ifaces: "lan", wantIDS: []fwapi.IDSInstance{{Interface: "igb1", Mode: "ips-inline", Rules: 0}}},
		{name: "26.1 pcap", version: "26.1.2", mode: "pcap", ifaces: "lan,wan", wantIDS: []fwapi.IDSInstance{{Interface: "igb0", Mode: "ids", Rules: 0}, {Interface: "igb1", Mode: "ids", Rules: 0}}},
		{name: "25.7 ips=1", version: "25.7.11", mode: "netmap", ifaces: "wan", wantIDS: []fwapi.IDSInstance{{Interface: "igb0", Mode: "ips-inline", Rules: 0}}},
		{name: "enabled but stopped", version: "26.1.2", mode: "netmap", ifaces: "lan", stopped: true},
		{name: "off", version: "26.7.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{Version: tc.version}, true, fwapi.OPNsenseOptions{})
			if tc.mode != "" {
				idsOn(t, em, tc.mode, tc.ifaces)
			}
			// Without Suricata engines (root) the emulator's IDS never
			// runs: the status route says what a running one would. The
			// config was written without a reconfigure, so no rule was
			// installed: the count is 0.
			f := emu.Fault{Requests: sas}
			if !tc.stopped {
				f.Requests = append(f.Requests, running)
			}
			em.SetFault(f)
			got, err := fw.RuntimeState(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got.IDS, func(a, b fwapi.IDSInstance) int { return strings.Compare(a.Interface, b.Interface) })
			if diff := cmp.Diff(tc.wantIDS, got.IDS); diff != "" {
				t.Errorf("RuntimeState().IDS mismatch (-want +got):\n%s", diff)
			}
			if got.Version != tc.version {
				t.Errorf("Version = %q, want %q", got.Version, tc.version)
			}
			for _, nic := range []string{"igb0", "igb1", "lo0"} {
				if _, ok := got.Interfaces[nic]; !ok {
					t.Errorf("Interfaces lack %s: %v", nic, got.Interfaces)
				}
			}
			// The factory config: offloads off, one LAN rule, automatic NAT.
			if fwapi.OffloadState(got.Interfaces["igb1"], "offload.checksum") != "off" || got.FilterRules == 0 || got.NATRules == 0 {
				t.Errorf("RuntimeState() = %+v, want checksum offload off and rules loaded", got)
			}
			if len(got.IPsec) == 0 || got.IPsec[0].Encr == "" {
				t.Errorf("IPsec = %+v, want the SAs the sessions API lists", got.IPsec)
			}
		})
	}
}

func TestOPNsenseRuntimeStateWithoutSSH(t *testing.T) {
	fw, _ := newOPNsense(t, labtest.Options{}, false, fwapi.OPNsenseOptions{})
	got, err := fw.RuntimeState(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != "26.1.2" || got.Interfaces != nil || got.FilterRules != 0 {
		t.Errorf("RuntimeState() without ssh = %+v, want the version only", got)
	}
}

// TestOPNsenseHostileTableName: pf table names read from the firewall that
// carry shell syntax are read as data, never run.
func TestOPNsenseHostileTableName(t *testing.T) {
	for _, name := range []string{"pfB_x;touch${IFS}/tmp/pwned", "a$(touch${IFS}/tmp/pwned)", "b`touch${IFS}/tmp/pwned`", "c'd", `e"f`, "g|touch${IFS}/tmp/pwned", "h&&touch${IFS}/tmp/pwned"} {
		t.Run(name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{})
			// A table of that name loaded in the data plane, seven entries.
			set := "table inet fwab {\n\tset " + name + " {\n\t\ttype ipv4_addr\n\t\telements = { 198.18.9.1, 198.18.9.2, 198.18.9.3, 198.18.9.4, 198.18.9.5, 198.18.9.6, 198.18.9.7 }\n\t}\n}\n"
			if err := em.DataPlane.LoadRuleset(context.Background(), set); err != nil {
				t.Fatal(err)
			}
			st, err := fw.RuntimeState(context.Background())
			if err != nil {
				t.Fatalf("RuntimeState() error = %v", err)
			}
			if got := st.Tables[name]; got != 7 {
				t.Errorf("table %q has %d entries, want 7 (tables %v)", name, got, st.Tables)
			}
			if len(em.Glob("/tmp/pwned")) != 0 {
				t.Error("/tmp/pwned exists: a value was executed")
			}
		})
	}
}

func TestOPNsenseMetrics(t *testing.T) {
	fw, _ := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{Now: func() time.Time { return time.Unix(100, 0) }})
	got, err := fw.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !got.Time.Equal(time.Unix(100, 0)) || len(got.PerCPU) == 0 || got.MemUsedPct <= 0 || got.MemUsedPct > 100 || got.MbufsInUse <= 0 {
		t.Errorf("Metrics() = %+v, want the time given, per-CPU figures, memory and mbufs", got)
	}
	fw2, _ := newOPNsense(t, labtest.Options{}, false, fwapi.OPNsenseOptions{})
	if _, err := fw2.Metrics(context.Background()); err == nil || !strings.Contains(err.Error(), "add an ssh section") {
		t.Errorf("Metrics() without ssh: error = %v, want the ssh section named", err)
	}
}

func TestOPNsenseRebootWaitReady(t *testing.T) {
	ctx := context.Background()
	fw, em := newOPNsense(t, labtest.Options{RebootDelay: 300 * time.Millisecond}, false, fwapi.OPNsenseOptions{})
	boots := em.Boots()
	start := time.Now()
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fw.WaitReady(ctx, 10*time.Second); err != nil {
		t.Fatalf("WaitReady() error = %v", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("WaitReady() returned after %v, before the firewall went down and came back", took)
	}
	if n := em.Boots() - boots; n != 1 {
		t.Errorf("reboots = %d, want 1", n)
	}
	em.SetFault(emu.Fault{LinkDown: true})
	if err := fw.WaitReady(ctx, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not ready within 200ms") {
		t.Errorf("WaitReady() on a down firewall: error = %v, want a timeout", err)
	}
}

func TestOPNsenseUpgrade(t *testing.T) {
	profiles := func(vs ...string) []emu.Profile {
		var p []emu.Profile
		for _, v := range vs {
			p = append(p, emu.Profile{Version: v, FreeBSD: "14.3-RELEASE-p7"})
		}
		return p
	}
	running := emu.Fault{Requests: []emu.RequestFault{{Route: "GET /api/core/firmware/upgradestatus", Body: string(api.Body("opnsense/upgradestatus_running.json"))}}}
	failed := emu.Fault{Requests: []emu.RequestFault{{Route: "GET /api/core/firmware/upgradestatus", Body: string(api.Body("opnsense/upgradestatus_error.json"))}}}
	tests := []struct {
		name      string
		emu       labtest.Options
		version   string
		timeout   time.Duration
		wantRoute string
		wantErr   string
		wantLog   []string
	}{
		{name: "minor update", emu: labtest.Options{Profiles: profiles("26.1.2", "26.1.3")}, version: "26.1.3",
			wantRoute: "POST /api/core/firmware/update", wantLog: []string{"firmware update from 26.1.2", "rebooting into the new release", "firewall runs 26.1.3"}},
		{name: "major upgrade", emu: labtest.Options{Profiles: profiles("26.1.2", "26.7.1")}, version: "26.7.1",
			wantRoute: "POST /api/core/firmware/upgrade", wantLog: []string{"firmware upgrade from 26.1.2", "firewall runs 26.7.1"}},
		{name: "latest", emu: labtest.Options{Profiles: profiles("26.1.2", "26.1.4")},
			wantRoute: "POST /api/core/firmware/update", wantLog: []string{"firewall runs 26.1.4"}},
		{name: "version not offered", emu: labtest.Options{Profiles: profiles("26.1.2", "26.1.3")}, version: "26.1.5",
			wantRoute: "POST /api/core/firmware/status", wantErr: "you asked for 26.1.5, but the firewall's firmware update would install 26.1.3: nothing changed"},
		// "error" is only an empty progress file upstream: polled on
		// until the timeout, which reports the last log.
		{name: "fails on the firewall", emu: labtest.Options{Profiles: profiles("26.1.2", "26.1.3"), Fault: failed}, timeout: 2 * time.Second,
			wantRoute: "POST /api/core/firmware/update", wantErr: "Failed to update the repository catalogue"},
		{name: "timeout", emu: labtest.Options{Profiles: profiles("26.1.2", "26.1.3"), Fault: running}, timeout: 300 * time.Millisecond,
			wantRoute: "POST /api/core/firmware/update", wantErr: "no result within 300ms"},
		{name: "downgrade refused", emu: labtest.Options{Profiles: profiles("26.1.2")}, version: "25.7", wantErr: "older than the running 26.1.2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A reboot long enough for the driver to see it go down.
			tc.emu.RebootDelay = 2 * time.Second
			fw, em := newOPNsense(t, tc.emu, false, fwapi.OPNsenseOptions{UpgradeTimeout: tc.timeout})
			var log []string
			err := fw.Upgrade(context.Background(), tc.version, func(s string) { log = append(log, s) })
			if tc.wantRoute != "" && !slices.Contains(em.Requests(), tc.wantRoute) {
				t.Errorf("requests %q lack %s", em.Requests(), tc.wantRoute)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Upgrade(%q) error = %v, want one containing %q", tc.version, err, tc.wantErr)
				}
				if tc.name == "version not offered" {
					if slices.Contains(em.Requests(), "POST /api/core/firmware/update") || em.Version() != "26.1.2" {
						t.Errorf("a refused upgrade changed the firewall: requests %q, version %s", em.Requests(), em.Version())
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Upgrade(%q) error = %v", tc.version, err)
			}
			for _, w := range tc.wantLog {
				if !slices.Contains(log, w) {
					t.Errorf("progress %q missing from %q", w, log)
				}
			}
		})
	}
}

// TestOPNsenseConfigRoundTripFixtures edits each OPNsense fixture with
// configxml, writes it, reads it back and applies what changed.
func TestOPNsenseConfigRoundTripFixtures(t *testing.T) {
	for _, name := range fixtures.Configs() {
		if !strings.Contains(name, "opnsense") {
			continue
		}
		t.Run(filepath.Base(name), func(t *testing.T) {
			ctx := context.Background()
			version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "opnsense-"), ".xml") + ".1"
			fw, em := newOPNsense(t, labtest.Options{Version: version, Config: fixtures.Read(name), NICs: emu.NICs{WAN: "igc", LAN: "igc"}}, true, fwapi.OPNsenseOptions{})
			info, err := fw.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if info.Hostname != "opn-lab.bench.example" || !slices.Equal(info.NICs, []string{"igc0", "igc1"}) {
				t.Errorf("Info() = %+v, want opn-lab.bench.example on igc0, igc1", info)
			}
			raw, err := fw.ReadConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before, err := configxml.LoadBytes(raw)
			if err != nil {
				t.Fatal(err)
			}
			after, err := configxml.LoadBytes(raw)
			if err != nil {
				t.Fatal(err)
			}
			if err := after.Set("nat.outbound", "hybrid"); err != nil {
				t.Fatal(err)
			}
			if err := fw.WriteConfig(ctx, after.Bytes(), "fwab: nat.outbound=hybrid"); err != nil {
				t.Fatal(err)
			}
			got, err := fw.ReadConfig(ctx)
			if err != nil || !bytes.Equal(got, after.Bytes()) {
				t.Fatalf("ReadConfig() after WriteConfig differs from the written bytes (err %v)", err)
			}
			ch, _ := configxml.Diff(before, after)
			em.ResetActions()
			if err := fw.Apply(ctx, ch); err != nil {
				t.Fatalf("Apply(%+v) error = %v", ch, err)
			}
			if diff := cmp.Diff([]configxml.Action{configxml.ActionFilterReload}, em.Actions()); diff != "" {
				t.Errorf("service actions mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOPNsenseRebootThatNeverStarts(t *testing.T) {
	ctx := context.Background()
	// The firewall says ok but does not reboot.
	f := emu.Fault{Requests: []emu.RequestFault{{Route: "POST /api/core/firmware/reboot", Body: `{"status":"ok"}`}}}
	fw, _ := newOPNsense(t, labtest.Options{Fault: f}, false, fwapi.OPNsenseOptions{RebootDownWithin: 200 * time.Millisecond})
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	err := fw.WaitReady(ctx, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "still answers 200ms after the reboot request: the reboot did not start") {
		t.Fatalf("WaitReady() error = %v, want the failed reboot reported", err)
	}
}

func TestOPNsenseUpgradeCancelled(t *testing.T) {
	running := emu.Fault{Requests: []emu.RequestFault{{Route: "GET /api/core/firmware/upgradestatus", Body: string(api.Body("opnsense/upgradestatus_running.json"))}}}
	fw, em := newOPNsense(t, labtest.Options{Fault: running}, false, fwapi.OPNsenseOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	err := fw.Upgrade(ctx, "", func(string) { once.Do(func() { time.AfterFunc(100*time.Millisecond, cancel) }) })
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "no result within") {
		t.Fatalf("Upgrade() after cancel: error = %v, want context.Canceled and no timeout claim", err)
	}
	if !slices.Contains(em.Requests(), "POST /api/core/firmware/update") {
		t.Errorf("requests %q lack the update", em.Requests())
	}
}

// nicOffloads reads the offload flags of the emulated NICs with ifconfig.
func nicOffloads(t *testing.T, em *labtest.Firewall, nic string) []string {
	t.Helper()
	out, _, _ := em.Run(t, "ifconfig "+nic, "")
	ifs, err := fwapi.ParseIfconfig(out)
	if err != nil || len(ifs) != 1 {
		t.Fatalf("ifconfig %s: %v (%q)", nic, err, out)
	}
	var got []string
	for _, o := range ifs[0].Options {
		if slices.Contains([]string{"RXCSUM", "TXCSUM", "TSO4", "TSO6", "LRO", "RXCSUM_IPV6", "TXCSUM_IPV6"}, o) {
			got = append(got, o)
		}
	}
	slices.Sort(got)
	return got
}

// TestOPNsenseOffloadApply: an offload change reaches the NICs through the
// GUI's own apply (26.1+: the Interfaces settings reconfigure; before:
// interfaces_hardware's walk), and fwab sets no flag with ifconfig itself.
func TestOPNsenseOffloadApply(t *testing.T) {
	tests := []struct {
		name    string
		version string
		shell   bool
		wantSSH []string
		actions []configxml.Action
	}{
		{name: "26.1 with ssh", version: "26.1.2", shell: true, actions: []configxml.Action{configxml.ActionInterfaces}},
		{name: "26.1 API only", version: "26.1.2", actions: []configxml.Action{configxml.ActionInterfaces}},
		{name: "25.7 interfaces_hardware", version: "25.7.11", shell: true,
			wantSSH: []string{`/usr/local/bin/php -r 'require_once("config.inc"); require_once("interfaces.inc"); $details = legacy_interfaces_details(); foreach (array_keys(get_interface_list()) as $dev) { if (!in_array($dev, array())) { configure_interface_hardware($dev, $details); } }'`},
			actions: []configxml.Action{configxml.ActionInterfaces}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fw, em := newOPNsense(t, labtest.Options{Version: tc.version}, tc.shell, fwapi.OPNsenseOptions{OffloadSSHInterface: true})
			raw, err := fw.ReadConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := configxml.LoadBytes(raw)
			after, _ := configxml.LoadBytes(raw)
			for knob, v := range map[string]string{"offload.checksum": "off", "offload.tso": "on", "offload.lro": "on"} {
				if err := after.Set(knob, v); err != nil {
					t.Fatal(err)
				}
			}
			em.PutFile(t, "/conf/config.xml", after.Bytes())
			ch, _ := configxml.Diff(before, after)
			// The factory config has every offload off: checksum stays off.
			var knobs []string
			for _, c := range ch {
				knobs = append(knobs, c.Knob+"="+c.To)
			}
			if diff := cmp.Diff([]string{"offload.tso=on", "offload.lro=on"}, knobs); diff != "" {
				t.Fatalf("config changes (-want +got):\n%s", diff)
			}
			em.ResetActions()
			cmds := len(em.Commands())
			if err := fw.Apply(ctx, ch); err != nil {
				t.Fatalf("Apply(%+v) error = %v", ch, err)
			}
			if diff := cmp.Diff(tc.actions, em.Actions()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			var got []string
			for _, c := range since(em.Commands(), cmds) {
				if strings.HasPrefix(c, "configctl") || strings.HasPrefix(c, "ifconfig igb") || strings.HasPrefix(c, "/usr/local/bin/php") {
					got = append(got, c)
				}
			}
			if diff := cmp.Diff(tc.wantSSH, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("shell commands (-want +got):\n%s", diff)
			}
			for _, nic := range []string{"igb0", "igb1"} {
				if diff := cmp.Diff([]string{"LRO", "TSO4", "TSO6"}, nicOffloads(t, em, nic)); diff != "" {
					t.Errorf("%s offloads after Apply (-want +got):\n%s", nic, diff)
				}
			}
		})
	}
}

func TestOPNsenseOffloadBadValue(t *testing.T) {
	fw, em := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{})
	cmds := len(em.Commands())
	err := fw.Apply(context.Background(), []configxml.Change{{Knob: "offload.tso", To: "off; reboot", Action: configxml.ActionInterfaces}})
	if err == nil || !strings.Contains(err.Error(), `offload.tso="off; reboot": want on or off`) {
		t.Fatalf("Apply() error = %v, want the bad value named", err)
	}
	if n := len(em.Commands()) - cmds; n != 0 {
		t.Errorf("%d shell commands ran before the refusal", n)
	}
}

// TestOPNsenseRulesApply: generated rules written to config.xml show in the
// loaded rule count after the filter apply, and not before.
func TestOPNsenseRulesApply(t *testing.T) {
	for _, v := range []string{"25.7.11", "26.1.2", "26.7.1"} {
		t.Run(v, func(t *testing.T) {
			ctx := context.Background()
			o := labtest.Options{Version: v, Config: fixtures.Read("configs/opnsense-" + v[:4] + ".xml"), NICs: emu.NICs{WAN: "igc", LAN: "igc"}}
			fw, _ := newOPNsense(t, o, true, fwapi.OPNsenseOptions{})
			st0, err := fw.RuntimeState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := fw.ReadConfig(ctx)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := configxml.LoadBytes(raw)
			after, _ := configxml.LoadBytes(raw)
			if err := after.Set("rules@lan", "50"); err != nil {
				t.Fatal(err)
			}
			if err := fw.WriteConfig(ctx, after.Bytes(), "rules@lan=50"); err != nil {
				t.Fatal(err)
			}
			st1, err := fw.RuntimeState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st1.FilterRules != st0.FilterRules {
				t.Errorf("loaded rules changed from %d to %d before any apply", st0.FilterRules, st1.FilterRules)
			}
			ch, _ := configxml.Diff(before, after)
			if err := fw.Apply(ctx, ch); err != nil {
				t.Fatal(err)
			}
			st2, err := fw.RuntimeState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st2.FilterRules != st0.FilterRules+50 {
				t.Errorf("loaded rules after applying rules@lan=50: %d, want %d+50", st2.FilterRules, st0.FilterRules)
			}
			// OPNsense labels rules with a hash or uuid, not the
			// description: fwab's are found through /tmp/rules.debug.
			if st2.GeneratedRules != st0.GeneratedRules+50 {
				t.Errorf("fwab-generated rules loaded after rules@lan=50: %d, want %d+50", st2.GeneratedRules, st0.GeneratedRules)
			}
			for _, f := range fwapi.VerifyRuntime(after, st2) {
				if strings.Contains(f.Message, "fwab-generated") {
					t.Errorf("VerifyRuntime after rules@lan=50: %s %s", f.Rule, f.Message)
				}
			}
		})
	}
}

// OPNsense lists lo0 among its <interfaces> (and VLANs are devices too):
// Info reports the physical NICs only.
func TestOPNsenseInfoSkipsLoopbackAndVLANs(t *testing.T) {
	cfg := strings.Replace(string(emu.FactoryConfigAt(configxml.OPNsense, "26.1.2", emu.NICs{})), "  </interfaces>",
		"    <opt1>\n      <if>igb1.100</if>\n    </opt1>\n  </interfaces>", 1)
	fw, _ := newOPNsense(t, labtest.Options{Config: []byte(cfg)}, false, fwapi.OPNsenseOptions{})
	got, err := fw.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"igb0", "igb1"}; !slices.Equal(got.NICs, want) {
		t.Errorf("Info().NICs = %v, want %v", got.NICs, want)
	}
}

func TestOPNsenseCall(t *testing.T) {
	fw, em := newOPNsense(t, labtest.Options{}, false, fwapi.OPNsenseOptions{})
	em.ResetActions()
	if err := fw.Call(context.Background(), "/api/ids/service/reconfigure", nil); err != nil {
		t.Fatalf("Call(reconfigure): %v", err)
	}
	if diff := cmp.Diff([]configxml.Action{configxml.ActionIDSRestart}, em.Actions()); diff != "" {
		t.Errorf("Call(/api/ids/service/reconfigure) service actions (-want +got):\n%s", diff)
	}
	if err := fw.Call(context.Background(), "ids/service/reconfigure", nil); err == nil || !strings.Contains(err.Error(), "must start with /api/") {
		t.Errorf("Call(relative path) = %v, want a refusal naming /api/", err)
	}
}

// TestOPNsenseIPsecApplyChecksTheService: the IPsec reconfigure answers ok
// whether it started strongSwan or stopped it, so after it the driver asks
// whether IPsec is on and running when the config enables a connection,
// and then brings the tunnel under test up on the new proposal. This lab
// has no strongSwan, so a running service still has no SA: the apply says
// so once the (short) IPsec timeout has passed.
func TestOPNsenseIPsecApplyChecksTheService(t *testing.T) {
	tests := []struct {
		name     string
		noSwitch bool              // remove <ipsec><enable>, keep the connection enabled
		fault    *emu.RequestFault // the status route's answer
		want     string            // "" is success
	}{
		{name: "switch on, running, no SA", want: "did not come up with ESP AES_GCM_16-256 within 1s"},
		{name: "switch off", noSwitch: true, want: "<ipsec><enable> is not set"},
		{name: "did not start", fault: &emu.RequestFault{Route: "GET /api/ipsec/service/status", Body: `{"status":"stopped"}`}, want: `strongSwan is "stopped" 1s after the reconfigure, with connection site enabled`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{IPsecTimeout: time.Second})
			if tc.fault != nil {
				em.SetFault(emu.Fault{Requests: []emu.RequestFault{*tc.fault}})
			}
			err := editAndApply(t, fw, func(c *configxml.Config) error {
				c.DefineTunnel(configxml.TunnelSpec{Name: "site", Interface: "wan", LocalAddr: "198.18.1.1", RemoteAddr: "198.18.1.2",
					LocalNet: "198.18.10.0/24", RemoteNet: "198.18.20.0/24", LocalID: "a.test", RemoteID: "b.test", PSK: "test-psk"})
				if err := c.Set("ipsec@site", "aes256gcm16"); err != nil {
					return err
				}
				if tc.noSwitch {
					sw := c.Root().FindElement("ipsec/enable")
					sw.Parent().RemoveChild(sw)
				}
				return nil
			})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Apply: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Apply() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestOPNsenseWriteConfigAsConfigSave: WriteConfig replaces config.xml the
// way OPNsense's own Config::save() does: only while it holds the config
// lock (the flock on /conf/config.xml, which a GUI or API save holds while
// it writes), and then /conf/backup keeps <system><backupcount> backups,
// its own among them.
func TestOPNsenseWriteConfigAsConfigSave(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1764470000, 0)
	fw, em := newOPNsense(t, labtest.Options{}, true, fwapi.OPNsenseOptions{Now: func() time.Time { return now }})
	for _, p := range em.Glob("/conf/backup/config-*.xml") {
		if err := os.Remove(em.Path(p)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 4 {
		em.PutFile(t, fmt.Sprintf("/conf/backup/config-%d.0001.xml", now.Unix()-100+int64(i)), []byte("<opnsense/>\n"))
	}
	orig := em.StoredConfig(t)
	next := bytes.Replace(orig, []byte("<backupcount>100</backupcount>"), []byte("<backupcount>2</backupcount>"), 1)
	if bytes.Equal(next, orig) {
		t.Fatal("the factory config has no <backupcount>100</backupcount>")
	}

	// Someone else holds the config lock for a second.
	held := make(chan struct{})
	go func() {
		defer close(held)
		em.Run(t, "lockf -k /conf/config.xml sleep 1", "")
	}()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if _, _, code := em.Run(t, "lockf -k -s -t 0 /conf/config.xml true", ""); code == 75 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the test's lockf never held the config lock")
		}
	}
	done := make(chan error, 1)
	go func() { done <- fw.WriteConfig(ctx, next, "fwab: test") }()
	time.Sleep(400 * time.Millisecond)
	if !bytes.Equal(em.StoredConfig(t), orig) {
		t.Errorf("WriteConfig replaced config.xml while another writer held the config lock")
	}
	<-held
	if err := <-done; err != nil {
		t.Fatalf("WriteConfig() error = %v", err)
	}
	if !bytes.Equal(em.StoredConfig(t), next) {
		t.Fatalf("config.xml after WriteConfig is not what it wrote")
	}
	var got []string
	for _, p := range em.Glob("/conf/backup/config-*.xml") {
		got = append(got, path.Base(p))
	}
	// fwab's own backup is named by the box's clock, with fwab's fraction.
	slices.Sort(got)
	if len(got) != 2 || got[0] != fmt.Sprintf("config-%d.0001.xml", now.Unix()-97) || !strings.HasSuffix(got[1], ".0000.xml") {
		t.Errorf("backups after WriteConfig with backupcount 2 = %q, want config-%d.0001.xml (the newest before) and its own", got, now.Unix()-97)
	}
}

// TestOPNsenseIDSRulesCounted: the runtime state counts the rules
// OPNsense installed for Suricata (one rule set for every interface), and
// verify says when there are none: a box where no ruleset was downloaded
// runs Suricata with nothing to match.
func TestOPNsenseIDSRulesCounted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		noRules   bool
		wantRules int
	}{
		{"downloaded", false, 7},
		{"nothing downloaded", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fw, em := newOPNsense(t, labtest.Options{NoIDSRules: tc.noRules}, true, fwapi.OPNsenseOptions{})
			labtest.ApplyKnobs(t, fw, "ids@lan=ids")
			st, err := fw.RuntimeState(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if len(st.IDS) != 1 || st.IDS[0].Rules != tc.wantRules {
				t.Fatalf("RuntimeState.IDS = %+v, want one instance with %d rules", st.IDS, tc.wantRules)
			}
			c, err := configxml.LoadBytes(em.StoredConfig(t))
			if err != nil {
				t.Fatal(err)
			}
			var noRules bool
			for _, f := range fwapi.VerifyRuntime(c, st) {
				noRules = noRules || f.Rule == fwapi.RuleIDSNoRules
			}
			if noRules != (tc.wantRules == 0) {
				t.Errorf("verify reports FWAB112 %v with %d rules", noRules, tc.wantRules)
			}
		})
	}
}
