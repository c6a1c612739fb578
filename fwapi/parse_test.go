package fwapi_test

import (
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/fixtures/transcripts"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/probe"
)

// transcript returns the recorded stdout of a pfSense command line.
func transcript(t testing.TB, cmd string) string {
	t.Helper()
	r, ok := transcripts.Lookup(cmd)
	if !ok {
		t.Fatalf("no transcript for %q", cmd)
	}
	return r.Stdout
}

func TestParseIfconfig(t *testing.T) {
	got, err := fwapi.ParseIfconfig(transcript(t, "ifconfig -a"))
	if err != nil {
		t.Fatal(err)
	}
	full := []string{"RXCSUM", "TXCSUM", "VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "VLAN_HWCSUM", "TSO4", "TSO6", "LRO", "WOL_MAGIC", "VLAN_HWFILTER", "VLAN_HWTSO", "RXCSUM_IPV6", "TXCSUM_IPV6", "HWSTATS", "MEXTPG"}
	want := []fwapi.IfaceState{
		{Name: "igb0", Options: full, Media: "1000baseT <full-duplex>"},
		{Name: "igb1", Options: full, Media: "1000baseT <full-duplex>"},
		{Name: "enc0", Options: []string{}},
		{Name: "lo0", Options: []string{"RXCSUM", "TXCSUM", "LINKSTATE", "RXCSUM_IPV6", "TXCSUM_IPV6"}},
		{Name: "pflog0", Options: []string{}},
		{Name: "pfsync0", Options: []string{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseIfconfig(ifconfig -a) mismatch (-want +got):\n%s", diff)
	}
}

func TestParseIfconfigCases(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []fwapi.IfaceState
		wantErr string
	}{
		{
			name: "offloads off, nd6 options ignored",
			in:   "vtnet1: flags=1008843<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST,LOWER_UP> metric 0 mtu 1500\n\toptions=800a8<VLAN_MTU,JUMBO_MTU,VLAN_HWCSUM,LINKSTATE>\n\tnd6 options=29<PERFORMNUD,IFDISABLED,AUTO_LINKLOCAL>\n",
			want: []fwapi.IfaceState{{Name: "vtnet1", Options: []string{"VLAN_MTU", "JUMBO_MTU", "VLAN_HWCSUM", "LINKSTATE"}}},
		},
		{
			name: "no options line at all",
			in:   "gif0: flags=8010<POINTOPOINT,MULTICAST> metric 0 mtu 1280\n",
			want: []fwapi.IfaceState{{Name: "gif0"}},
		},
		{name: "empty", in: "", want: nil},
		{name: "garbage header", in: "this is not ifconfig\n", wantErr: "does not start an interface"},
		{name: "options first", in: "\toptions=3<RXCSUM,TXCSUM>\n", wantErr: "options before any interface"},
		{name: "unterminated", in: "em0: flags=0\n\toptions=3<RXCSUM,TXCSUM\n", wantErr: "unterminated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fwapi.ParseIfconfig(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseIfconfig(%q) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseIfconfig(%q) mismatch (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestOffloadStateAndIsNIC(t *testing.T) {
	s := fwapi.IfaceState{Name: "igb1", Options: []string{"RXCSUM_IPV6", "LRO"}}
	for knob, want := range map[string]string{"offload.checksum": "on", "offload.tso": "off", "offload.lro": "on"} {
		if got := fwapi.OffloadState(s, knob); got != want {
			t.Errorf("OffloadState(%v, %q) = %q, want %q", s.Options, knob, got, want)
		}
	}
	for name, want := range map[string]bool{"igb0": true, "vtnet1": true, "ix0": true, "lo0": false, "enc0": false, "pflog0": false, "igb1.100": false, "lagg0": false, "ovpns1": false, "tun_wg0": false} {
		if got := fwapi.IsNIC(name); got != want {
			t.Errorf("IsNIC(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParsePfctlStatus(t *testing.T) {
	for in, want := range map[string]string{
		"Status: Enabled for 0 days 01:02:03           Debug: Urgent\n\nState Table\n": fwapi.PFEnabled,
		"Status: Disabled for 0 days 00:00:10           Debug: Urgent\n":               fwapi.PFDisabled,
	} {
		if got, err := fwapi.ParsePfctlStatus(in); err != nil || got != want {
			t.Errorf("ParsePfctlStatus(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "pfctl: /dev/pf: Permission denied\n", "Status: Paused\n"} {
		if got, err := fwapi.ParsePfctlStatus(in); err == nil {
			t.Errorf("ParsePfctlStatus(%q) = %q, nil; want an error", in, got)
		}
	}
}

func TestParsePfctl(t *testing.T) {
	rules, err := fwapi.ParsePfctlRules(transcript(t, "pfctl -sr"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (fwapi.FilterRules{Rules: 9, Generated: 2}); rules != want {
		t.Errorf("ParsePfctlRules = %+v, want %+v", rules, want)
	}
	nat, err := fwapi.ParsePfctlNAT(transcript(t, "pfctl -sn"))
	if err != nil {
		t.Fatal(err)
	}
	want := fwapi.NATRules{Rules: 2, Outbound: []string{
		"nat on igb0 inet from 198.18.1.0/24 to any port = isakmp -> 198.19.0.1 static-port",
		"nat on igb0 inet from 198.18.1.0/24 to any -> 198.19.0.1 port 1024:65535",
	}}
	if diff := cmp.Diff(want, nat); diff != "" {
		t.Errorf("ParsePfctlNAT mismatch (-want +got):\n%s", diff)
	}
	if _, err := fwapi.ParsePfctlRules("pfctl: /dev/pf: Permission denied\n"); err == nil {
		t.Errorf("ParsePfctlRules(error text) = nil error, want one")
	}
	if _, err := fwapi.ParsePfctlNAT("hello\n"); err == nil {
		t.Errorf("ParsePfctlNAT(hello) = nil error, want one")
	}
	counts, err := fwapi.ParsePfctlTableCounts("bogons        3\npfB_PRI1_v4        4\nsnort2c        0\n")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int{"bogons": 3, "pfB_PRI1_v4": 4, "snort2c": 0}, counts); diff != "" {
		t.Errorf("ParsePfctlTableCounts mismatch (-want +got):\n%s", diff)
	}
	if _, err := fwapi.ParsePfctlTableCounts("bogons x\n"); err == nil {
		t.Errorf("ParsePfctlTableCounts(bogons x) = nil error, want one")
	}
}

func TestParseSwanctlSAs(t *testing.T) {
	got, err := fwapi.ParseSwanctlSAs(transcript(t, "swanctl --list-sas"))
	if err != nil {
		t.Fatal(err)
	}
	want := []fwapi.IPsecSA{
		{IKE: "con1000", Name: "con1000_1", State: "INSTALLED", Encr: "AES_GCM_16-128", BytesIn: 91234567, BytesOut: 1834567890, Proposals: "AES_GCM_16-128"},
		{IKE: "con2000", Name: "con2000_1", State: "INSTALLED", Encr: "AES_CBC-256", Integ: "HMAC_SHA2_256_128", BytesIn: 0, BytesOut: 840, Proposals: "AES_CBC-256/HMAC_SHA2_256_128/MODP_2048"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSwanctlSAs mismatch (-want +got):\n%s", diff)
	}
	if got, err := fwapi.ParseSwanctlSAs(""); err != nil || len(got) != 0 {
		t.Errorf("ParseSwanctlSAs(\"\") = %v, %v; want none, nil", got, err)
	}
	if _, err := fwapi.ParseSwanctlSAs("connecting to 'unix:///var/run/charon.vici' failed: No such file or directory\n"); err == nil {
		t.Errorf("ParseSwanctlSAs(charon down) = nil error, want one")
	}
}

func TestCPUTimes(t *testing.T) {
	before, err := fwapi.ParseCPUTimes("100 0 50 10 840 200 0 0 0 800\n")
	if err != nil {
		t.Fatal(err)
	}
	after, err := fwapi.ParseCPUTimes("160 0 70 20 850 200 0 0 0 900\n")
	if err != nil {
		t.Fatal(err)
	}
	per, total, err := fwapi.CPUBusy(before, after)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]float64{90, 0}, per); diff != "" {
		t.Errorf("CPUBusy per CPU mismatch (-want +got):\n%s", diff)
	}
	if want := 45.0; math.Abs(total-want) > 1e-9 {
		t.Errorf("CPUBusy total = %v, want %v", total, want)
	}
	for _, bad := range []string{"", "1 2 3", "1 2 3 4 x"} {
		if _, err := fwapi.ParseCPUTimes(bad); err == nil {
			t.Errorf("ParseCPUTimes(%q) = nil error, want one", bad)
		}
	}
	if _, _, err := fwapi.CPUBusy(after, before); err == nil {
		t.Errorf("CPUBusy(backwards) = nil error, want one")
	}
	temp, err := fwapi.ParseTemperature(transcript(t, "sysctl -n dev.cpu.0.temperature"))
	if err != nil || temp != 47 {
		t.Errorf("ParseTemperature = %v, %v; want 47, nil", temp, err)
	}
	if _, err := fwapi.ParseTemperature("sysctl: unknown oid 'dev.cpu.0.temperature'"); err == nil {
		t.Errorf("ParseTemperature(unknown oid) = nil error, want one")
	}
	vals, err := fwapi.ParseSysctlValues(transcript(t, "sysctl -n vm.stats.vm.v_page_count vm.stats.vm.v_free_count"),
		"vm.stats.vm.v_page_count", "vm.stats.vm.v_free_count")
	if err != nil {
		t.Fatal(err)
	}
	if vals["vm.stats.vm.v_page_count"] != "2038806" || vals["vm.stats.vm.v_free_count"] != "1626348" {
		t.Errorf("ParseSysctlValues = %v", vals)
	}
	if _, err := fwapi.ParseSysctlValues("4\n", "a", "b"); err == nil {
		t.Errorf("ParseSysctlValues(too few) = nil error, want one")
	}
}

func TestParseNetstatMbufs(t *testing.T) {
	got, err := fwapi.ParseNetstatMbufs(transcript(t, "netstat -m"))
	if err != nil || got != 1834 {
		t.Errorf("ParseNetstatMbufs = %d, %v; want 1834, nil", got, err)
	}
	if _, err := fwapi.ParseNetstatMbufs("netstat: kvm not available\n"); err == nil {
		t.Errorf("ParseNetstatMbufs(no line) = nil error, want one")
	}
}

func TestParseNetstatLinks(t *testing.T) {
	got, err := fwapi.ParseNetstatLinks(transcript(t, fwapi.NetstatLinks))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]probe.LinkCounters{"igb0": {}, "igb1": {InErrors: 17, OutErrors: 2}, "enc0": {}, "lo0": {}}
	if !maps.Equal(got, want) {
		t.Errorf("ParseNetstatLinks = %v, want %v", got, want)
	}
	for _, bad := range []string{
		"netstat: unknown option -- -\n",
		`{"statistics": {"interface": []}}`,
		`{"statistics": {"interface": [{"name":"igb0","network":"<Link#1>","received-packets":5}]}}`,
	} {
		if _, err := fwapi.ParseNetstatLinks(bad); err == nil {
			t.Errorf("ParseNetstatLinks(%q) = nil error, want one", bad)
		}
	}
}

func TestParseSuricataProcesses(t *testing.T) {
	got, err := fwapi.ParseSuricataProcesses(transcript(t, "ps ax -o pid,command"))
	if err != nil {
		t.Fatal(err)
	}
	want := []fwapi.IDSInstance{
		{Interface: "igb1", Mode: "ips-inline", PID: 51234, Config: "/usr/local/etc/suricata/suricata_41877_igb1/suricata.yaml", Rules: fwapi.RulesUnknown},
		{Interface: "igb0", Mode: "ids", PID: 51890, Config: "/usr/local/etc/suricata/suricata_29103_igb0/suricata.yaml", Rules: fwapi.RulesUnknown},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSuricataProcesses mismatch (-want +got):\n%s", diff)
	}
	if got, err := fwapi.ParseSuricataProcesses("  PID COMMAND\n 1 /sbin/init\n"); err != nil || len(got) != 0 {
		t.Errorf("ParseSuricataProcesses(no suricata) = %v, %v; want none", got, err)
	}
	if _, err := fwapi.ParseSuricataProcesses("12 /usr/local/bin/suricata -D\n"); err == nil {
		t.Errorf("ParseSuricataProcesses(no interface) = nil error, want one")
	}
}

func TestParsePkgInfo(t *testing.T) {
	got, err := fwapi.ParsePkgInfo("pfSense-2.7.2                  Meta package to install pfSense required ports\npfSense-pkg-suricata-7.0.2_2   IDS/IPS Suricata\nphp82-8.2.11                   PHP Scripting Language (8.2.X branch)\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []fwapi.Package{{Name: "pfSense", Version: "2.7.2"}, {Name: "pfSense-pkg-suricata", Version: "7.0.2_2"}, {Name: "php82", Version: "8.2.11"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParsePkgInfo mismatch (-want +got):\n%s", diff)
	}
	for _, in := range []string{"pkg: No packages installed\n", "nohyphen comment\n", "trailing- x\n"} {
		if _, err := fwapi.ParsePkgInfo(in); err == nil && in != "pkg: No packages installed\n" {
			t.Errorf("ParsePkgInfo(%q) = nil error; want one", in)
		}
	}
}

func TestIfconfigMediaAndDuplex(t *testing.T) {
	ifs, err := fwapi.ParseIfconfig("igb0: flags=8843<UP> metric 0 mtu 1500\n\tmedia: Ethernet autoselect (1000baseT <full-duplex>)\n" +
		"igb1: flags=8843<UP> metric 0 mtu 1500\n\tmedia: Ethernet autoselect (100baseTX <half-duplex>)\n" +
		"igb2: flags=8802<BROADCAST> metric 0 mtu 1500\n\tmedia: Ethernet autoselect\n")
	if err != nil {
		t.Fatal(err)
	}
	var media []string
	for _, i := range ifs {
		media = append(media, i.Media)
	}
	if diff := cmp.Diff([]string{"1000baseT <full-duplex>", "100baseTX <half-duplex>", "autoselect"}, media); diff != "" {
		t.Errorf("media mismatch (-want +got):\n%s", diff)
	}
	inv := fwapi.Inventory{NICs: []fwapi.NICInventory{{Name: "igb0", Driver: "igb", Media: ifs[0].Media}, {Name: "igb1", Driver: "igb", Media: ifs[1].Media}}}
	if w := inv.LinkWarnings(); len(w) != 1 || !strings.Contains(w[0], "igb1") || !strings.Contains(w[0], "not full duplex") {
		t.Errorf("LinkWarnings = %q; want one naming igb1", w)
	}
}

// TestIfconfigSupportedMedia: ifconfig -m lists what the NIC can do; a
// link that negotiated less (a 10 GbE NIC at 1 GbE, a gigabit NIC at 100
// Mbit/s) is warned of, a link at its NIC's best is not.
func TestIfconfigSupportedMedia(t *testing.T) {
	out := "ix0: flags=8843<UP> metric 0 mtu 1500\n\tmedia: Ethernet autoselect (1000baseT <full-duplex>)\n\tstatus: active\n" +
		"\tsupported media:\n\t\tmedia autoselect\n\t\tmedia 10Gbase-T mediaopt full-duplex\n\t\tmedia 2500Base-T mediaopt full-duplex\n\t\tmedia 1000baseT mediaopt full-duplex\n\t\tmedia 100baseTX mediaopt full-duplex\n" +
		"\tnd6 options=29<PERFORMNUD,IFDISABLED,AUTO_LINKLOCAL>\n" +
		"em0: flags=8843<UP> metric 0 mtu 1500\n\tmedia: Ethernet autoselect (1000baseT <full-duplex>)\n" +
		"\tsupported media:\n\t\tmedia autoselect\n\t\tmedia 1000baseT\n\t\tmedia 1000baseT mediaopt full-duplex\n\t\tmedia 100baseTX mediaopt full-duplex\n\t\tmedia 10baseT/UTP\n" +
		"igb1: flags=8843<UP> metric 0 mtu 1500\n\tmedia: Ethernet autoselect (100baseTX <full-duplex>)\n" +
		"\tsupported media:\n\t\tmedia autoselect\n\t\tmedia 1000baseT mediaopt full-duplex\n\t\tmedia 100baseTX mediaopt full-duplex\n\t\tmedia 10baseT/UTP mediaopt full-duplex\n"
	ifs, err := fwapi.ParseIfconfig(out)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"1000baseT", "100baseTX", "10baseT/UTP"}, ifs[1].Supported); diff != "" {
		t.Errorf("em0 supported media mismatch (-want +got):\n%s", diff)
	}
	var inv fwapi.Inventory
	for _, i := range ifs {
		inv.NICs = append(inv.NICs, fwapi.NICInventory{Name: i.Name, Media: i.Media, Best: fwapi.BestMedia(i.Supported)})
	}
	if inv.NICs[0].Best != "10Gbase-T" || inv.NICs[1].Best != "1000baseT" {
		t.Errorf("best media %q, %q; want 10Gbase-T, 1000baseT", inv.NICs[0].Best, inv.NICs[1].Best)
	}
	w := inv.LinkWarnings()
	if len(w) != 2 || !strings.Contains(w[0], "ix0") || !strings.Contains(w[0], "below the 10Gbase-T") || !strings.Contains(w[1], "igb1") {
		t.Errorf("LinkWarnings = %q; want ix0 and igb1 below their best, em0 not", w)
	}
}
