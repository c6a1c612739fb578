package fwapi_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/fwapi"
)

func minimalConfig(t *testing.T, assignments ...string) *configxml.Config {
	t.Helper()
	c, err := configxml.LoadBytes([]byte(minimalPfSenseConfig))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if err := c.SetAll(assignments); err != nil {
		t.Fatalf("SetAll(%v): %v", assignments, err)
	}
	return c
}

var (
	offloadsOn  = []string{"RXCSUM", "TXCSUM", "VLAN_MTU", "TSO4", "TSO6", "LRO", "RXCSUM_IPV6", "TXCSUM_IPV6"}
	offloadsOff = []string{"VLAN_MTU", "JUMBO_MTU", "VLAN_HWCSUM", "LINKSTATE"}
)

func runtime(options []string, ids ...fwapi.IDSInstance) fwapi.RuntimeState {
	return fwapi.RuntimeState{
		Interfaces: map[string]fwapi.IfaceState{
			"igb0": {Name: "igb0", Options: options},
			"igb1": {Name: "igb1", Options: options},
			"lo0":  {Name: "lo0", Options: []string{"RXCSUM", "TXCSUM"}},
		},
		FilterRules: 5,
		IDS:         ids,
	}
}

func withPF(st fwapi.RuntimeState, status string) fwapi.RuntimeState {
	st.PF = status
	return st
}

// withCrypto gives the state the kernel's crypto modules: those named are
// there, every other one pfSense knows is not.
func withCrypto(st fwapi.RuntimeState, loaded ...string) fwapi.RuntimeState {
	st.CryptoModules = map[string]bool{}
	for _, m := range configxml.CryptoModules(configxml.PfSense) {
		st.CryptoModules[m] = slices.Contains(loaded, m)
	}
	return st
}

func rules(fs []configxml.Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Rule+" "+string(f.Severity))
	}
	return out
}

func TestVerifyRuntime(t *testing.T) {
	inline := fwapi.IDSInstance{Interface: "igb1", Mode: "ips-inline", PID: 99, Rules: fwapi.RulesUnknown}
	pcap := fwapi.IDSInstance{Interface: "igb1", Mode: "ids", PID: 98, Rules: fwapi.RulesUnknown}
	tests := []struct {
		name   string
		config []string
		state  fwapi.RuntimeState
		want   []string
	}{
		{
			name:   "offloads on everywhere, no IDS",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on"},
			state:  runtime(offloadsOn),
		},
		{
			name:   "inline IPS done right",
			config: []string{"offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline"},
			state:  runtime(offloadsOff, inline),
		},
		{
			name:   "config says offloads off, NIC disagrees, inline IPS running",
			config: []string{"offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline"},
			state:  runtime(offloadsOn, inline),
			want: []string{
				"FWAB101 error", "FWAB101 error", "FWAB101 error", "FWAB101 error", "FWAB101 error", "FWAB101 error",
				"FWAB103 error",
			},
		},
		{
			name:   "suricata not restarted after the switch to inline",
			config: []string{"offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline"},
			state:  runtime(offloadsOff, pcap),
			want:   []string{"FWAB102 error"},
		},
		{
			name:   "legacy IPS runs as pcap",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "ids@lan=ips-legacy"},
			state:  runtime(offloadsOn, pcap),
		},
		{
			name:   "IDS still running after being turned off",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on"},
			state:  runtime(offloadsOn, pcap),
			want:   []string{"FWAB102 error"},
		},
		{
			name:   "generated rules not loaded",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "rules@lan=20"},
			state:  runtime(offloadsOn),
			want:   []string{"FWAB104 error"},
		},
		{
			name:   "router mode while pf still filters",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "filter=disabled"},
			state:  withPF(runtime(offloadsOn), fwapi.PFEnabled),
			want:   []string{"FWAB110 error"},
		},
		{
			name:   "router mode with pf disabled",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "filter=disabled"},
			state:  withPF(runtime(offloadsOn), fwapi.PFDisabled),
		},
		{
			name:   "router mode after a point with rules: pf keeps the old ruleset, disabled",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "filter=disabled", "rules@lan=0"},
			state: func() fwapi.RuntimeState {
				st := withPF(runtime(offloadsOn), fwapi.PFDisabled)
				st.GeneratedRules = 1000
				return st
			}(),
		},
		{
			name:   "no accelerator asked, none in the kernel",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on"},
			state:  withCrypto(runtime(offloadsOn)),
		},
		{
			name:   "aesni asked and loaded",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "crypto.hardware=aesni"},
			state:  withCrypto(runtime(offloadsOn), "aesni"),
		},
		{
			name:   "switched to none but aesni still in the kernel: no reboot",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on"},
			state:  withCrypto(runtime(offloadsOn), "aesni"),
			want:   []string{"FWAB111 error"},
		},
		{
			name:   "both asked, cryptodev missing",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "crypto.hardware=aesni_cryptodev"},
			state:  withCrypto(runtime(offloadsOn), "aesni"),
			want:   []string{"FWAB111 error"},
		},
		{
			name:   "IDS running with no rules loaded",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "ids@lan=ids"},
			state:  runtime(offloadsOn, fwapi.IDSInstance{Interface: "igb1", Mode: "ids", PID: 98, Rules: 0}),
			want:   []string{"FWAB112 error"},
		},
		{
			name:   "IDS running with rules",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "ids@lan=ids"},
			state:  runtime(offloadsOn, fwapi.IDSInstance{Interface: "igb1", Mode: "ids", PID: 98, Rules: 342}),
		},
		{
			name:   "filter enabled but pf disabled",
			config: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on"},
			state:  withPF(runtime(offloadsOn), fwapi.PFDisabled),
			want:   []string{"FWAB110 error"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := minimalConfig(t, tc.config...)
			got := fwapi.VerifyRuntime(c, tc.state)
			if diff := cmp.Diff(tc.want, rules(got)); diff != "" {
				t.Errorf("VerifyRuntime findings mismatch (-want +got):\n%s\nfindings: %+v", diff, got)
			}
		})
	}
}

func TestVerifyRuntimeMissingInterface(t *testing.T) {
	c := minimalConfig(t, "offload.checksum=on", "offload.tso=on", "offload.lro=on")
	st := runtime(offloadsOn)
	delete(st.Interfaces, "igb0")
	if diff := cmp.Diff([]string{"FWAB107 error"}, rules(fwapi.VerifyRuntime(c, st))); diff != "" {
		t.Errorf("findings mismatch (-want +got):\n%s", diff)
	}
}

func TestSwanctlAlgorithms(t *testing.T) {
	for _, tt := range []struct{ proposal, encr, integ string }{
		{"aes128gcm16", "AES_GCM_16-128", ""},
		{"aes256gcm16", "AES_GCM_16-256", ""},
		{"aes128-sha1", "AES_CBC-128", "HMAC_SHA1_96"},
		{"aes256-sha256", "AES_CBC-256", "HMAC_SHA2_256_128"},
		{"3des-sha1", "3DES_CBC", "HMAC_SHA1_96"},
		{"chacha20poly1305", "CHACHA20_POLY1305", ""},
	} {
		p, err := configxml.ParseProposal(tt.proposal)
		if err != nil {
			t.Fatal(err)
		}
		if e, i := fwapi.SwanctlAlgorithms(p.ESP); e != tt.encr || i != tt.integ {
			t.Errorf("SwanctlAlgorithms(%s) = %s, %s; want %s, %s", tt.proposal, e, i, tt.encr, tt.integ)
		}
	}
}

// TestChangeVerifierIPsec: an ipsec change is accepted only when an SA with
// the asked-for algorithms is installed.
func TestChangeVerifierIPsec(t *testing.T) {
	c, err := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("ipsec@site-b", "aes256-sha256"); err != nil {
		t.Fatal(err)
	}
	change := []configxml.Change{{Knob: "ipsec@site-b", From: "aes256-sha256-modp2048/aes128gcm16", To: "aes256-sha256", Action: configxml.ActionIPsecRestart}}
	verify := fwapi.ChangeVerifier(c, change)
	for _, tt := range []struct {
		name string
		sas  []fwapi.IPsecSA
		ok   bool
	}{
		{"negotiated what was asked", []fwapi.IPsecSA{{Name: "con1", State: "INSTALLED", Encr: "AES_CBC-256", Integ: "HMAC_SHA2_256_128"}}, true},
		{"still the old cipher", []fwapi.IPsecSA{{Name: "con1", State: "INSTALLED", Encr: "AES_GCM_16-128"}}, false},
		{"no SA", nil, false},
	} {
		err := verify(t.Context(), fwapi.RuntimeState{IPsec: tt.sas})
		if (err == nil) != tt.ok {
			t.Errorf("%s: verify = %v; want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// minimalPfSenseConfig is a small, valid pfSense config.xml.
const minimalPfSenseConfig = `<?xml version="1.0"?>
<pfsense>
	<version>23.3</version>
	<lastchange></lastchange>
	<system>
		<hostname>fw1</hostname>
		<domain>lab.example</domain>
		<disablesegmentationoffloading></disablesegmentationoffloading>
		<disablelargereceiveoffloading></disablelargereceiveoffloading>
	</system>
	<interfaces>
		<wan>
			<enable></enable>
			<if>igb0</if>
			<ipaddr>198.19.0.1</ipaddr>
			<subnet>24</subnet>
		</wan>
		<lan>
			<enable></enable>
			<if>igb1</if>
			<ipaddr>198.18.1.1</ipaddr>
			<subnet>24</subnet>
		</lan>
	</interfaces>
	<filter>
		<rule>
			<type>pass</type>
			<interface>lan</interface>
			<ipprotocol>inet</ipprotocol>
			<source><network>lan</network></source>
			<destination><any></any></destination>
			<descr><![CDATA[Default allow LAN to any rule]]></descr>
		</rule>
	</filter>
	<nat><outbound><mode>automatic</mode></outbound></nat>
</pfsense>
`

// TestVerifyRuntimeOffloadOverride: an OPNsense interface that overrides
// the global offload flags (hw_settings_overwrite) is held to its own
// flags, the others to the global ones.
func TestVerifyRuntimeOffloadOverride(t *testing.T) {
	raw := string(fixtures.Read("configs/opnsense-25.7.xml")) // every offload disabled globally
	raw = strings.Replace(raw, "<if>igc1</if>", "<if>igc1</if><hw_settings_overwrite>1</hw_settings_overwrite>", 1)
	c, err := configxml.LoadBytes([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := c.OffloadFor("offload.tso", "igc1"); got != "on" {
		t.Fatalf("fixture edit: lan's OffloadFor(offload.tso) = %q, want on (an override with no flag)", got)
	}
	st := fwapi.RuntimeState{Interfaces: map[string]fwapi.IfaceState{
		"igc0": {Name: "igc0", Options: offloadsOff},
		"igc1": {Name: "igc1", Options: offloadsOn},
	}, FilterRules: 5}
	var got []string
	for _, f := range fwapi.VerifyRuntime(c, st) {
		if f.Rule == fwapi.RuleOffloadMismatch {
			got = append(got, f.Message)
		}
	}
	if len(got) > 0 {
		t.Errorf("each NIC runs what the config gives it, but verify says:\n%s", strings.Join(got, "\n"))
	}
	// lan with the global flags is a mismatch now.
	st.Interfaces["igc1"] = fwapi.IfaceState{Name: "igc1", Options: offloadsOff}
	n := 0
	for _, f := range fwapi.VerifyRuntime(c, st) {
		if f.Rule == fwapi.RuleOffloadMismatch {
			n++
			if !strings.Contains(f.Message, "igc1") || !strings.Contains(f.Message, "is on in the config") {
				t.Errorf("finding %q, want one naming igc1 and on", f.Message)
			}
		}
	}
	if n != 3 {
		t.Errorf("%d offload mismatches for lan running the global flags against its override, want 3", n)
	}
}
