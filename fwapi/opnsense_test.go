package fwapi_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/fwapi/fwapitest"
	"github.com/fwab/fwab/probe"
)

// changes builds one change per action, with a knob named after it.
func changes(actions ...string) []configxml.Change {
	var out []configxml.Change
	for _, a := range actions {
		out = append(out, configxml.Change{Knob: "knob-for-" + a, From: "a", To: "b", Action: configxml.Action(a)})
	}
	return out
}

// newOPNsense starts a fake and connects the driver; withShell also gives it
// the fake's SSH side.
func newOPNsense(t *testing.T, fo fwapitest.OPNsenseOptions, withShell bool, do fwapi.OPNsenseOptions) (*fwapi.OPNsense, *fwapitest.OPNsense) {
	t.Helper()
	fake := fwapitest.NewOPNsense(t, fo)
	var ssh fwapi.Runner
	if withShell {
		ssh = fake.Shell()
	}
	if do.PollInterval == 0 {
		do.PollInterval = 20 * time.Millisecond
	}
	fw, err := fwapi.NewOPNsense(context.Background(), fake.Target(), ssh, do)
	if err != nil {
		t.Fatalf("NewOPNsense() error = %v", err)
	}
	t.Cleanup(func() { fw.Close() })
	return fw, fake
}

func TestOPNsenseInfo(t *testing.T) {
	for _, v := range []string{"25.7.11_2", "26.1.2", "26.7"} {
		t.Run(v, func(t *testing.T) {
			fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{Version: v}, false, fwapi.OPNsenseOptions{})
			got, err := fw.Info(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			want := fwapi.Info{Flavor: configxml.OPNsense, Version: v, Hostname: "fw1.lab.example", NICs: []string{"vtnet0", "vtnet1"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Info() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOPNsenseBadVersion(t *testing.T) {
	fake := fwapitest.NewOPNsense(t, fwapitest.OPNsenseOptions{Version: "unknown"})
	_, err := fwapi.NewOPNsense(context.Background(), fake.Target(), nil, fwapi.OPNsenseOptions{})
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
			actions:   []string{"ids-restart", "filter-reload", "interfaces-reconfigure", "ipsec-restart", "ids-restart", "none"},
			wantCalls: []string{"POST /api/interfaces/settings/reconfigure", "POST /api/firewall/filter/apply", "POST /api/ipsec/service/reconfigure", "POST /api/ids/service/reconfigure"}},
		{name: "26.7 filter", version: "26.7", actions: []string{"filter-reload"},
			wantCalls: []string{"POST /api/firewall/filter/apply"}},
		{name: "25.7 interfaces over ssh", version: "25.7.11", shell: true, actions: []string{"interfaces-reconfigure"},
			wantCalls: []string{"GET /api/core/backup/download/{host}"},
			wantSSH:   []string{"configctl interface reconfigure lan", "configctl interface reconfigure wan"}},
		{name: "nothing to do", version: "26.1.2", actions: []string{"none"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: tc.version}, tc.shell, fwapi.OPNsenseOptions{})
			before := len(fake.Requests())
			if err := fw.Apply(context.Background(), changes(tc.actions...)); err != nil {
				t.Fatalf("Apply(%v) error = %v", tc.actions, err)
			}
			var got []string
			for _, r := range fake.Requests()[before:] {
				got = append(got, r.Pattern)
			}
			if diff := cmp.Diff(tc.wantCalls, got); diff != "" {
				t.Errorf("Apply(%v) API calls (-want +got):\n%s", tc.actions, diff)
			}
			if tc.shell {
				if diff := cmp.Diff(tc.wantSSH, fake.Shell().Commands()); diff != "" {
					t.Errorf("Apply(%v) shell commands (-want +got):\n%s", tc.actions, diff)
				}
			}
		})
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
		{name: "firmware", version: "26.1.2", actions: []string{"firmware-upgrade"}, wantErr: "go through Upgrade"},
		{name: "unknown", version: "26.1.2", actions: []string{"reboot-everything"}, wantErr: `unknown action "reboot-everything"`},
		{name: "25.7 interfaces without ssh", version: "25.7", actions: []string{"filter-reload", "interfaces-reconfigure"}, wantErr: "OPNsense 25.7 reconfigures interfaces only from a shell (configctl): add an ssh section"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: tc.version}, false, fwapi.OPNsenseOptions{})
			before := len(fake.Requests())
			err := fw.Apply(context.Background(), changes(tc.actions...))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Apply(%v) error = %v, want one containing %q", tc.actions, err, tc.wantErr)
			}
			if n := len(fake.Requests()) - before; n != 0 {
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
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, false, fwapi.OPNsenseOptions{})
			fake.Fail("POST /api/ids/service/reconfigure", fwapitest.Fault{Body: tc.body})
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
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, true, fwapi.OPNsenseOptions{Now: func() time.Time { return time.Unix(1764470000, 123456789) }})
	got, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fwapitest.DefaultOPNsenseConfig) {
		t.Fatalf("ReadConfig() = %q, want the firewall's file byte for byte", got)
	}
	// Values a shell would act on, carried in the config: they must land in
	// the file as bytes and never run.
	next := bytes.Replace(got, []byte("<hostname>fw1</hostname>"), []byte("<hostname>fw1</hostname>\n    <descr>a'b\"c; $(touch /tmp/pwned) `touch /tmp/pwned2`\nline2</descr>"), 1)
	if err := fw.WriteConfig(ctx, next, "fwab: test"); err != nil {
		t.Fatalf("WriteConfig() error = %v", err)
	}
	if !bytes.Equal(fake.ConfigXML(), next) {
		t.Errorf("config.xml on the firewall = %q, want %q", fake.ConfigXML(), next)
	}
	back, err := os.ReadFile(filepath.Join(fake.Root(), "conf/backup/config-1764470000.1234.xml"))
	if err != nil || !bytes.Equal(back, fwapitest.DefaultOPNsenseConfig) {
		t.Errorf("backup conf/backup/config-1764470000.1234.xml = %q, %v; want the previous config", back, err)
	}
	for _, p := range []string{"conf/.config.xml.fwab-new", "tmp/pwned", "tmp/pwned2"} {
		if _, err := os.Stat(filepath.Join(fake.Root(), p)); err == nil {
			t.Errorf("%s exists on the firewall after WriteConfig", p)
		}
	}
	again, err := fw.ReadConfig(ctx)
	if err != nil || !bytes.Equal(again, next) {
		t.Errorf("ReadConfig() after WriteConfig = %q, %v; want the written bytes", again, err)
	}
}

func TestOPNsenseWriteConfigFaults(t *testing.T) {
	next := bytes.Replace(fwapitest.DefaultOPNsenseConfig, []byte("fw1"), []byte("fw2"), 1)
	tests := []struct {
		name    string
		shell   bool
		config  []byte
		fault   func(*fwapitest.Shell)
		wantErr string
	}{
		{name: "no ssh", config: next, wantErr: "OPNsense has no API that writes config.xml: add an ssh section"},
		{name: "pfSense config", shell: true, config: []byte("<?xml version=\"1.0\"?>\n<pfsense><version>23.3</version></pfsense>\n"), wantErr: "refusing a pfsense config.xml on an OPNsense firewall"},
		{name: "malformed", shell: true, config: []byte("<opnsense><system></opnsense>"), wantErr: "refusing a config.xml that does not load"},
		{name: "checksum mismatch", shell: true, config: next,
			fault: func(s *fwapitest.Shell) {
				s.Override("sha256", fwapitest.ShellResult{Stdout: strings.Repeat("0", 64) + "\n"})
			},
			wantErr: "SHA-256 is 000"},
		{name: "session lost before rename", shell: true, config: next,
			fault:   func(s *fwapitest.Shell) { s.Override("mv ", fwapitest.ShellResult{Err: fwapitest.ErrSessionLost}) },
			wantErr: "ssh: session lost"},
		{name: "disk full on upload", shell: true, config: next,
			fault: func(s *fwapitest.Shell) {
				s.Override("cat > ", fwapitest.ShellResult{Exit: 1, Stderr: "cat: write error: No space left on device"})
			},
			wantErr: "No space left on device"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, tc.shell, fwapi.OPNsenseOptions{})
			if tc.fault != nil {
				tc.fault(fake.Shell())
			}
			err := fw.WriteConfig(context.Background(), tc.config, "test")
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("WriteConfig() error = %v, want one containing %q", err, tc.wantErr)
			}
			if !bytes.Equal(fake.ConfigXML(), fwapitest.DefaultOPNsenseConfig) {
				t.Errorf("config.xml changed after a failed WriteConfig: %q", fake.ConfigXML())
			}
			if _, err := os.Stat(filepath.Join(fake.Root(), "conf/.config.xml.fwab-new")); err == nil {
				t.Error("the staged file was left on the firewall")
			}
		})
	}
}

func TestOPNsenseReadConfigWithoutBackupAPI(t *testing.T) {
	ctx := context.Background()
	fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{NoBackupAPI: true}, true, fwapi.OPNsenseOptions{})
	got, err := fw.ReadConfig(ctx)
	if err != nil || !bytes.Equal(got, fwapitest.DefaultOPNsenseConfig) {
		t.Fatalf("ReadConfig() over ssh = %q, %v; want the config", got, err)
	}
	fw2, _ := newOPNsense(t, fwapitest.OPNsenseOptions{NoBackupAPI: true}, false, fwapi.OPNsenseOptions{})
	if _, err := fw2.ReadConfig(ctx); err == nil || !strings.Contains(err.Error(), "Endpoint not found") {
		t.Fatalf("ReadConfig() without backup API and ssh: error = %v, want the 404 reported", err)
	}
}

func TestOPNsenseCommitConfirmed261(t *testing.T) {
	ctx := context.Background()
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.1.2", RollbackAfter: 300 * time.Millisecond}, false, fwapi.OPNsenseOptions{})
	fake.Expect("POST /api/firewall/filter/savepoint", "POST /api/firewall/filter/apply/{rev}", "POST /api/firewall/filter/cancel_rollback/{rev}")
	disarm, err := fw.ArmCommitConfirmed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fake.SetFilterModel("with 100 rules")
	if err := fw.Apply(ctx, changes("filter-reload")); err != nil {
		t.Fatal(err)
	}
	if !fake.RollbackArmed() {
		t.Fatal("after Apply under a savepoint the firewall's rollback timer is not running")
	}
	if err := disarm(ctx); err != nil {
		t.Fatalf("disarm() error = %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	saved, loaded, _ := fake.Filter()
	if fake.RolledBack() || saved != "with 100 rules" || loaded != "with 100 rules" {
		t.Errorf("after disarm: rolled back %v, filter saved %q loaded %q; want the change kept", fake.RolledBack(), saved, loaded)
	}
	// Later applies are plain again.
	if err := fw.Apply(ctx, changes("filter-reload")); err != nil {
		t.Fatal(err)
	}
	if n := fake.Calls("POST /api/firewall/filter/apply"); n != 1 {
		t.Errorf("plain filter applies after disarm = %d, want 1", n)
	}
}

// TestOPNsenseUnreachableMidApply: the apply reaches the firewall and starts
// its timer, the answer is lost; fwab says the firewall will roll back, and
// it does.
func TestOPNsenseUnreachableMidApply(t *testing.T) {
	ctx := context.Background()
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.1.2", RollbackAfter: 200 * time.Millisecond}, false, fwapi.OPNsenseOptions{})
	disarm, err := fw.ArmCommitConfirmed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fake.SetFilterModel("locks me out")
	fake.Fail("POST /api/firewall/filter/apply/{rev}", fwapitest.Fault{Drop: true, Times: 1})
	err = fw.Apply(ctx, changes("filter-reload"))
	var rp *fwapi.RollbackPendingError
	if !errors.As(err, &rp) {
		t.Fatalf("Apply() error = %v, want a *RollbackPendingError", err)
	}
	if !strings.Contains(err.Error(), "the firewall restores the MVC filter rules to savepoint "+rp.Revision+" by itself within 1m0s") {
		t.Errorf("Apply() error = %q, want it to say the firewall rolls back", err)
	}
	fake.SetDown(true)
	err = disarm(ctx)
	if !errors.As(err, &rp) {
		t.Errorf("disarm() while unreachable: error = %v, want a *RollbackPendingError", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for !fake.RolledBack() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	saved, loaded, _ := fake.Filter()
	if !fake.RolledBack() || saved != "default" || loaded != "default" {
		t.Errorf("firewall after the timer: rolled back %v, filter saved %q loaded %q; want the savepoint restored", fake.RolledBack(), saved, loaded)
	}
}

func TestOPNsenseCommitConfirmed267(t *testing.T) {
	ctx := context.Background()
	// 26.7 has no savepoint routes: calling one would fail the test as an
	// unexpected request.
	fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.7"}, false, fwapi.OPNsenseOptions{})
	if _, err := fw.ArmCommitConfirmed(ctx); err == nil || !strings.Contains(err.Error(), "OPNsense 26.7 has no filter savepoint API (removed in 26.7)") {
		t.Fatalf("ArmCommitConfirmed() on 26.7 without the SSH rollback: error = %v, want the version named", err)
	}

	var mu sync.Mutex
	var armed, disarmed int
	fw2, fake2 := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.7"}, false, fwapi.OPNsenseOptions{
		Rollback: func(ctx context.Context) (func(context.Context) error, error) {
			mu.Lock()
			armed++
			mu.Unlock()
			return func(context.Context) error { mu.Lock(); disarmed++; mu.Unlock(); return nil }, nil
		},
	})
	fake2.Expect("POST /api/firewall/filter/apply")
	disarm, err := fw2.ArmCommitConfirmed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw2.Apply(ctx, changes("filter-reload")); err != nil {
		t.Fatal(err)
	}
	if err := disarm(ctx); err != nil {
		t.Fatal(err)
	}
	if armed != 1 || disarmed != 1 {
		t.Errorf("SSH rollback armed %d, disarmed %d times; want 1 and 1", armed, disarmed)
	}
}

func TestOPNsenseRuntimeState(t *testing.T) {
	tests := []struct {
		name    string
		version string
		ids     fwapitest.IDSState
		wantIDS []fwapi.IDSInstance
	}{
		{name: "26.1 netmap", version: "26.1.2", ids: fwapitest.IDSState{Enabled: true, Running: true, Mode: "netmap", Interfaces: []string{"lan"}},
			wantIDS: []fwapi.IDSInstance{{Interface: "vtnet1", Mode: "ips-inline"}}},
		{name: "26.1 pcap", version: "26.1.2", ids: fwapitest.IDSState{Enabled: true, Running: true, Mode: "pcap", Interfaces: []string{"lan", "wan"}},
			wantIDS: []fwapi.IDSInstance{{Interface: "vtnet1", Mode: "ids"}, {Interface: "vtnet0", Mode: "ids"}}},
		{name: "25.7 ips=1", version: "25.7.11", ids: fwapitest.IDSState{Enabled: true, Running: true, Mode: "netmap", Interfaces: []string{"wan"}},
			wantIDS: []fwapi.IDSInstance{{Interface: "vtnet0", Mode: "ips-inline"}}},
		{name: "enabled but stopped", version: "26.1.2", ids: fwapitest.IDSState{Enabled: true, Mode: "netmap", Interfaces: []string{"lan"}}},
		{name: "off", version: "26.7"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: tc.version}, true, fwapi.OPNsenseOptions{})
			fake.SetIDS(tc.ids)
			fake.Shell().SetOptions("vtnet0", []string{"VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "VLAN_HWCSUM", "LINKSTATE"})
			fake.Shell().SetOptions("vtnet1", []string{"RXCSUM", "TXCSUM", "VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "VLAN_HWCSUM", "TSO4", "LRO", "LINKSTATE"})
			fake.SetSAs([]fwapitest.FakeSA{{Phase1: "con1", Name: "con1-child1", State: "INSTALLED", EncrAlg: "AES_GCM_16", KeySize: "128", BytesIn: 10, BytesOut: 20}})
			got, err := fw.RuntimeState(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			sortIDS := func(s []fwapi.IDSInstance) {
				slices.SortFunc(s, func(a, b fwapi.IDSInstance) int { return strings.Compare(a.Interface, b.Interface) })
			}
			sortIDS(got.IDS)
			sortIDS(tc.wantIDS)
			want := fwapi.RuntimeState{
				Version: tc.version,
				Interfaces: map[string]fwapi.IfaceState{
					"vtnet0": {Name: "vtnet0", Options: []string{"VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "VLAN_HWCSUM", "LINKSTATE"}},
					"vtnet1": {Name: "vtnet1", Options: []string{"RXCSUM", "TXCSUM", "VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "VLAN_HWCSUM", "TSO4", "LRO", "LINKSTATE"}},
					"lo0":    {Name: "lo0", Options: []string{"RXCSUM", "TXCSUM", "LINKSTATE", "RXCSUM_IPV6", "TXCSUM_IPV6"}},
				},
				FilterRules: 12,
				NATRules:    1,
				NATOutbound: []string{"nat on vtnet0 inet from 198.18.1.0/24 to any -> 198.19.0.1 port 1024:65535"},
				IPsec:       []fwapi.IPsecSA{{Name: "con1-child1", State: "INSTALLED", Encr: "AES_GCM_16-128", BytesIn: 10, BytesOut: 20, Proposals: "AES_GCM_16-128"}},
				IDS:         tc.wantIDS,
				Tables:      map[string]int{"bogons": 3, "sshlockout": 0},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RuntimeState() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOPNsenseRuntimeStateWithoutSSH(t *testing.T) {
	fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{}, false, fwapi.OPNsenseOptions{})
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
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, true, fwapi.OPNsenseOptions{})
			fake.Shell().SetPF(1, nil, map[string]int{name: 7})
			st, err := fw.RuntimeState(context.Background())
			if err != nil {
				t.Fatalf("RuntimeState() error = %v", err)
			}
			if got := st.Tables[name]; got != 7 {
				t.Errorf("table %q has %d entries, want 7 (tables %v)", name, got, st.Tables)
			}
			for _, ex := range fake.Shell().Execs() {
				if ex[0] == "touch" {
					t.Errorf("the shell ran %q", ex)
				}
			}
			if _, err := os.Stat(filepath.Join(fake.Root(), "tmp/pwned")); err == nil {
				t.Error("tmp/pwned exists: a value was executed")
			}
		})
	}
}

func TestOPNsenseMetrics(t *testing.T) {
	fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{}, true, fwapi.OPNsenseOptions{Now: func() time.Time { return time.Unix(100, 0) }})
	got, err := fw.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The fake's two kern.cp_times samples: cpu0 busy 150 of 1000 ticks,
	// cpu1 100 of 1000.
	want := probe.DUTMetrics{Time: time.Unix(100, 0), CPUPercent: 12.5, PerCPU: []float64{15, 10}, TempCelsius: 47, MemUsedPct: 25, MbufsInUse: 1024}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Metrics() mismatch (-want +got):\n%s", diff)
	}
	fw2, _ := newOPNsense(t, fwapitest.OPNsenseOptions{}, false, fwapi.OPNsenseOptions{})
	if _, err := fw2.Metrics(context.Background()); err == nil || !strings.Contains(err.Error(), "add an ssh section") {
		t.Errorf("Metrics() without ssh: error = %v, want the ssh section named", err)
	}
}

func TestOPNsenseRebootWaitReady(t *testing.T) {
	ctx := context.Background()
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{RebootDowntime: 300 * time.Millisecond}, false, fwapi.OPNsenseOptions{})
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
	if fake.Reboots() != 1 {
		t.Errorf("reboots = %d, want 1", fake.Reboots())
	}
	fake.SetDown(true)
	if err := fw.WaitReady(ctx, 200*time.Millisecond); err == nil || !strings.Contains(err.Error(), "not ready within 200ms") {
		t.Errorf("WaitReady() on a down firewall: error = %v, want a timeout", err)
	}
}

func TestOPNsenseUpgrade(t *testing.T) {
	tests := []struct {
		name      string
		fake      fwapitest.OPNsenseOptions
		version   string
		timeout   time.Duration
		wantRoute string
		wantErr   string
		wantLog   []string
	}{
		{name: "minor update", fake: fwapitest.OPNsenseOptions{Version: "26.1.2", UpgradeTo: "26.1.3"}, version: "26.1.3",
			wantRoute: "POST /api/core/firmware/update", wantLog: []string{"firmware update from 26.1.2", "[1/2] Fetching packages", "rebooting into the new release", "firewall runs 26.1.3"}},
		{name: "major upgrade", fake: fwapitest.OPNsenseOptions{Version: "26.1.2", UpgradeTo: "26.7"}, version: "26.7",
			wantRoute: "POST /api/core/firmware/upgrade", wantLog: []string{"firmware upgrade from 26.1.2", "firewall runs 26.7"}},
		{name: "latest", fake: fwapitest.OPNsenseOptions{Version: "26.1.2", UpgradeTo: "26.1.4"},
			wantRoute: "POST /api/core/firmware/update", wantLog: []string{"firewall runs 26.1.4"}},
		{name: "wrong version afterwards", fake: fwapitest.OPNsenseOptions{Version: "26.1.2", UpgradeTo: "26.1.3"}, version: "26.1.5",
			wantRoute: "POST /api/core/firmware/update", wantErr: "runs 26.1.3 after the upgrade, want 26.1.5"},
		{name: "fails on the firewall", fake: fwapitest.OPNsenseOptions{Version: "26.1.2", UpgradeFails: true},
			wantRoute: "POST /api/core/firmware/update", wantErr: "upgrade failed on the firewall: ***GOT REQUEST TO UPDATE*** | Currently running OPNsense 26.1.2 | [1/2] Fetching packages | [2/2] Fetching packages | Failed to update the repository catalogue."},
		{name: "timeout", fake: fwapitest.OPNsenseOptions{Version: "26.1.2", UpgradePolls: 1000}, timeout: 300 * time.Millisecond,
			wantRoute: "POST /api/core/firmware/update", wantErr: "no result within 300ms"},
		{name: "downgrade refused", fake: fwapitest.OPNsenseOptions{Version: "26.1.2"}, version: "25.7", wantErr: "older than the running 26.1.2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fw, fake := newOPNsense(t, tc.fake, false, fwapi.OPNsenseOptions{UpgradeTimeout: tc.timeout})
			if tc.wantRoute != "" {
				fake.Expect(tc.wantRoute)
			}
			var log []string
			err := fw.Upgrade(context.Background(), tc.version, func(s string) { log = append(log, s) })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Upgrade(%q) error = %v, want one containing %q", tc.version, err, tc.wantErr)
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
			version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(name), "opnsense-"), ".xml")
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: version, Config: fixtures.Read(name)}, true, fwapi.OPNsenseOptions{})
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
			fake.Expect("POST /api/firewall/filter/apply")
			if err := fw.Apply(ctx, ch); err != nil {
				t.Fatalf("Apply(%+v) error = %v", ch, err)
			}
		})
	}
}

func TestOPNsenseRebootThatNeverStarts(t *testing.T) {
	ctx := context.Background()
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, false, fwapi.OPNsenseOptions{RebootDownWithin: 200 * time.Millisecond})
	// The firewall says ok but does not reboot.
	fake.Fail("POST /api/core/firmware/reboot", fwapitest.Fault{Body: `{"status":"ok"}`})
	if err := fw.Reboot(ctx); err != nil {
		t.Fatal(err)
	}
	err := fw.WaitReady(ctx, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "still answers 200ms after the reboot request: the reboot did not start") {
		t.Fatalf("WaitReady() error = %v, want the failed reboot reported", err)
	}
}

func TestOPNsenseCommitConfirmed261WithSSHRollback(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var events []string
	record := func(s string) { mu.Lock(); events = append(events, s); mu.Unlock() }
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.1.2"}, false, fwapi.OPNsenseOptions{
		Rollback: func(ctx context.Context) (func(context.Context) error, error) {
			record("ssh armed")
			return func(context.Context) error { record("ssh disarmed"); return nil }, nil
		},
	})
	fake.Expect("POST /api/firewall/filter/savepoint", "POST /api/firewall/filter/cancel_rollback/{rev}")
	if !fw.RollbackCoversAll() {
		t.Error("RollbackCoversAll() = false with the SSH rollback configured")
	}
	disarm, err := fw.ArmCommitConfirmed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := disarm(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ssh armed", "ssh disarmed"}, events); diff != "" {
		t.Errorf("SSH rollback events (-want +got):\n%s", diff)
	}

	// The SSH rollback failing to arm cancels the savepoint again.
	fw2, fake2 := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.1.2"}, false, fwapi.OPNsenseOptions{
		Rollback: func(ctx context.Context) (func(context.Context) error, error) {
			return nil, errors.New("lock held by fwab on host-b")
		},
	})
	fake2.Expect("POST /api/firewall/filter/cancel_rollback/{rev}")
	if _, err := fw2.ArmCommitConfirmed(ctx); err == nil || !strings.Contains(err.Error(), "lock held by fwab on host-b") {
		t.Fatalf("ArmCommitConfirmed() error = %v, want the SSH rollback's error", err)
	}
}

func TestOPNsenseUpgradeCancelled(t *testing.T) {
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{UpgradePolls: 1000}, false, fwapi.OPNsenseOptions{})
	fake.Expect("POST /api/core/firmware/update")
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	err := fw.Upgrade(ctx, "", func(string) { once.Do(func() { time.AfterFunc(100*time.Millisecond, cancel) }) })
	if !errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "no result within") {
		t.Fatalf("Upgrade() after cancel: error = %v, want context.Canceled and no timeout claim", err)
	}
}

// TestOPNsenseFirewallHelper: the fwapitest helper gives a working driver
// with its SSH side.
func TestOPNsenseFirewallHelper(t *testing.T) {
	var fw fwapi.Firewall
	fw, fake := fwapitest.NewOPNsenseFirewall(t, fwapitest.OPNsenseOptions{Version: "26.7"}, fwapi.OPNsenseOptions{})
	if _, err := fw.Metrics(context.Background()); err != nil {
		t.Fatalf("Metrics() through the helper's SSH side: %v", err)
	}
	if len(fake.Shell().Commands()) == 0 {
		t.Error("the helper's driver ran nothing on the shell fake")
	}
}

// TestOPNsenseOffloadApply: an offload change reaches the NICs, through the
// firewall's own reconfigure (from config.xml) and explicit ifconfig.
func TestOPNsenseOffloadApply(t *testing.T) {
	tests := []struct {
		name    string
		version string
		shell   bool
		wantSSH []string
	}{
		{name: "26.1 with ssh", version: "26.1.2", shell: true,
			wantSSH: []string{"ifconfig vtnet0 tso lro", "ifconfig vtnet1 tso lro"}},
		{name: "26.1 API only", version: "26.1.2"},
		{name: "25.7 configctl", version: "25.7.11", shell: true,
			wantSSH: []string{"configctl interface reconfigure lan", "configctl interface reconfigure wan", "ifconfig vtnet0 tso lro", "ifconfig vtnet1 tso lro"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: tc.version}, tc.shell, fwapi.OPNsenseOptions{})
			sh := fake.Shell() // the fake's NIC state, whether or not the driver has ssh
			for _, nic := range []string{"vtnet0", "vtnet1"} {
				sh.SetOptions(nic, []string{"RXCSUM", "TXCSUM", "LRO", "LINKSTATE"})
			}
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
			if err := os.WriteFile(filepath.Join(fake.Root(), "conf/config.xml"), after.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			ch, _ := configxml.Diff(before, after)
			// The default config has every offload off: checksum stays off.
			var knobs []string
			for _, c := range ch {
				knobs = append(knobs, c.Knob+"="+c.To)
			}
			if diff := cmp.Diff([]string{"offload.tso=on", "offload.lro=on"}, knobs); diff != "" {
				t.Fatalf("config changes (-want +got):\n%s", diff)
			}
			fake.ResetActions()
			if err := fw.Apply(ctx, ch); err != nil {
				t.Fatalf("Apply(%+v) error = %v", ch, err)
			}
			if diff := cmp.Diff([]configxml.Action{configxml.ActionInterfaces}, fake.Actions()); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			for _, nic := range []string{"vtnet0", "vtnet1"} {
				got := sh.Options(nic)
				slices.Sort(got)
				if diff := cmp.Diff([]string{"LINKSTATE", "LRO", "TSO4", "TSO6"}, got); diff != "" {
					t.Errorf("%s options after Apply (-want +got):\n%s", nic, diff)
				}
			}
			if tc.shell {
				var got []string
				for _, c := range sh.Commands() {
					if strings.HasPrefix(c, "configctl") || strings.HasPrefix(c, "ifconfig") {
						got = append(got, c)
					}
				}
				if diff := cmp.Diff(tc.wantSSH, got); diff != "" {
					t.Errorf("shell commands (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestOPNsenseOffloadOffExplicit: switching an offload off runs the "-" form.
func TestOPNsenseOffloadOffExplicit(t *testing.T) {
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, true, fwapi.OPNsenseOptions{})
	sh := fake.Shell()
	sh.SetOptions("vtnet1", []string{"RXCSUM", "TXCSUM", "RXCSUM_IPV6", "TXCSUM_IPV6", "LINKSTATE"})
	// Config untouched: only the explicit ifconfig can switch the flags.
	fake.Fail("POST /api/interfaces/settings/reconfigure", fwapitest.Fault{Body: `{"status":"ok"}`})
	err := fw.Apply(context.Background(), []configxml.Change{{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces}})
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.Options("vtnet1"); !slices.Equal(got, []string{"LINKSTATE"}) {
		t.Errorf("vtnet1 options = %v, want [LINKSTATE]", got)
	}
	if !slices.Contains(sh.Commands(), "ifconfig vtnet1 -txcsum -rxcsum -txcsum6 -rxcsum6") {
		t.Errorf("commands %q lack the explicit ifconfig", sh.Commands())
	}
}

func TestOPNsenseOffloadBadValue(t *testing.T) {
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, true, fwapi.OPNsenseOptions{})
	err := fw.Apply(context.Background(), []configxml.Change{{Knob: "offload.tso", To: "off; reboot", Action: configxml.ActionInterfaces}})
	if err == nil || !strings.Contains(err.Error(), `offload.tso="off; reboot": want on or off`) {
		t.Fatalf("Apply() error = %v, want the bad value named", err)
	}
	if n := len(fake.Shell().Commands()); n != 0 {
		t.Errorf("%d shell commands ran before the refusal", n)
	}
}

// TestOPNsenseRulesApply: generated rules written to config.xml show in the
// loaded rule count after the filter apply, and not before.
func TestOPNsenseRulesApply(t *testing.T) {
	for _, v := range []string{"25.7.11", "26.1.2", "26.7"} {
		t.Run(v, func(t *testing.T) {
			ctx := context.Background()
			fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{Version: v, Config: fixtures.Read("configs/opnsense-" + v[:4] + ".xml")}, true, fwapi.OPNsenseOptions{})
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
		})
	}
}

// TestOPNsenseSavepointScope pins down what a filter savepoint undoes on
// 26.1: MVC filter rules, not the legacy rules configxml generates there.
// That is why the SSH rollback is armed too where configured.
func TestOPNsenseSavepointScope(t *testing.T) {
	ctx := context.Background()
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.1.2", RollbackAfter: 200 * time.Millisecond, Config: fixtures.Read("configs/opnsense-26.1.xml")}, true, fwapi.OPNsenseOptions{})
	if fw.RollbackCoversAll() {
		t.Error("RollbackCoversAll() = true without the SSH rollback")
	}
	st0, err := fw.RuntimeState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.ArmCommitConfirmed(ctx); err != nil {
		t.Fatal(err)
	}
	raw, _ := fw.ReadConfig(ctx)
	before, _ := configxml.LoadBytes(raw)
	after, _ := configxml.LoadBytes(raw)
	if err := after.Set("rules@lan", "20"); err != nil {
		t.Fatal(err)
	}
	// An MVC rule too, standing for a rule added through the API.
	mvc := bytes.Replace(after.Bytes(), []byte("</opnsense>"), []byte("  <OPNsense><Firewall><Filter><rules><rule uuid=\"0b5e6c4c-0000-4000-8000-000000000001\"><action>block</action></rule></rules></Filter></Firewall></OPNsense>\n</opnsense>"), 1)
	if err := fw.WriteConfig(ctx, mvc, "test"); err != nil {
		t.Fatal(err)
	}
	ch, _ := configxml.Diff(before, after)
	if err := fw.Apply(ctx, ch); err != nil {
		t.Fatal(err)
	}
	st1, _ := fw.RuntimeState(ctx)
	if st1.FilterRules != st0.FilterRules+21 {
		t.Fatalf("loaded rules after apply = %d, want %d+21", st1.FilterRules, st0.FilterRules)
	}
	// Not disarmed: the timer fires.
	deadline := time.Now().Add(3 * time.Second)
	for !fake.RolledBack() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !fake.RolledBack() {
		t.Fatal("the savepoint timer did not fire")
	}
	st2, err := fw.RuntimeState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st2.FilterRules != st0.FilterRules+20 {
		t.Errorf("loaded rules after the savepoint rollback = %d, want %d+20: the MVC rule undone, the 20 legacy rules kept", st2.FilterRules, st0.FilterRules)
	}
}

// OPNsense lists lo0 among its <interfaces> (and VLANs are devices too):
// Info reports the physical NICs only.
func TestOPNsenseInfoSkipsLoopbackAndVLANs(t *testing.T) {
	cfg := strings.Replace(string(fwapitest.DefaultOPNsenseConfig), "  </interfaces>",
		"    <lo0>\n      <if>lo0</if>\n      <ipaddr>127.0.0.1</ipaddr>\n      <subnet>8</subnet>\n    </lo0>\n"+
			"    <opt1>\n      <if>vtnet1.100</if>\n    </opt1>\n  </interfaces>", 1)
	fw, _ := newOPNsense(t, fwapitest.OPNsenseOptions{Config: []byte(cfg)}, false, fwapi.OPNsenseOptions{})
	got, err := fw.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vtnet0", "vtnet1"}; !slices.Equal(got.NICs, want) {
		t.Errorf("Info().NICs = %v, want %v", got.NICs, want)
	}
}

func TestOPNsenseCall(t *testing.T) {
	fw, fake := newOPNsense(t, fwapitest.OPNsenseOptions{}, false, fwapi.OPNsenseOptions{})
	fake.SetIDS(fwapitest.IDSState{Enabled: true, Mode: "pcap", Interfaces: []string{"lan"}})
	if err := fw.Call(context.Background(), "/api/ids/service/reconfigure", nil); err != nil {
		t.Fatalf("Call(reconfigure): %v", err)
	}
	if !fake.IDS().Running {
		t.Errorf("Call(/api/ids/service/reconfigure) did not start the IDS")
	}
	if err := fw.Call(context.Background(), "ids/service/reconfigure", nil); err == nil || !strings.Contains(err.Error(), "must start with /api/") {
		t.Errorf("Call(relative path) = %v, want a refusal naming /api/", err)
	}
}
