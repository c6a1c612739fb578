package fwapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// Runtime verification rules. Like the configxml lint rules, their IDs are
// stable so scripts may match on them.
const (
	RuleOffloadMismatch     = "FWAB101" // offload-mismatch
	RuleIDSMismatch         = "FWAB102" // ids-mismatch
	RuleInlineOffloadLive   = "FWAB103" // ips-inline-offload-live
	RuleRulesMismatch       = "FWAB104" // rules-mismatch
	RuleBlocklistMismatch   = "FWAB105" // blocklist-mismatch
	RuleNATMismatch         = "FWAB106" // nat-mismatch
	RuleInterfaceMissing    = "FWAB107" // interface-missing
	RuleIPsecNotEstablished = "FWAB108" // ipsec-not-established
	RuleIPsecMismatch       = "FWAB109" // ipsec-algorithm-mismatch
	RuleFilterMismatch      = "FWAB110" // filter-mismatch
	RuleCryptoMismatch      = "FWAB111" // crypto-mismatch
	RuleIDSNoRules          = "FWAB112" // ids-no-rules
)

// liveOffloadOptions are the ifconfig options that mean an offload is on;
// netmap (inline IPS) needs all of them off.
var liveOffloadOptions = []string{"TXCSUM", "RXCSUM", "TXCSUM_IPV6", "RXCSUM_IPV6", "TSO4", "TSO6", "LRO", "VLAN_HWTSO"}

// VerifyRuntime compares what the config says (the GUI's view) with what
// the firewall is really doing, and reports every mismatch and every unsafe
// combination: above all, inline IPS running on a NIC whose offloads are
// really on, whatever the config claims.
func VerifyRuntime(c *configxml.Config, st RuntimeState) []configxml.Finding {
	rc := &runtimeCheck{c: c, st: st}
	rc.checkInterfaces()
	rc.checkFilter()
	rc.checkOffloads()
	rc.checkIDS()
	rc.checkIDSRules()
	rc.checkInlineOffloads()
	// With pf disabled, whatever ruleset it still holds neither filters
	// nor translates (pfctl -d keeps the last one loaded): only FWAB110
	// speaks for the filter then.
	if st.PF != PFDisabled {
		rc.checkRules()
		rc.checkBlocklist()
		rc.checkNAT()
	}
	rc.checkIPsec()
	rc.checkCrypto()
	return rc.out
}

// runtimeCheck is one VerifyRuntime: the config, the state, the interfaces
// both know, and the findings so far.
type runtimeCheck struct {
	c   *configxml.Config
	st  RuntimeState
	ifs []assignedNIC // set by checkInterfaces
	out []configxml.Finding
}

// assignedNIC is an interface the config assigns and the firewall has.
type assignedNIC struct{ key, dev string }

func (rc *runtimeCheck) add(rule, name string, sev configxml.Severity, format string, args ...any) {
	rc.out = append(rc.out, configxml.Finding{Rule: rule, Name: name, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// checkInterfaces finds the NICs the config assigns and the runtime shows,
// and reports those the firewall lacks.
func (rc *runtimeCheck) checkInterfaces() {
	for _, i := range rc.c.Interfaces() {
		if i.Device == "" || !IsNIC(i.Device) {
			continue
		}
		if _, ok := rc.st.Interfaces[i.Device]; !ok {
			rc.add(RuleInterfaceMissing, "interface-missing", configxml.SeverityError,
				"interface %s is assigned to %s in the config but the firewall has no such device", i.Key, i.Device)
			continue
		}
		rc.ifs = append(rc.ifs, assignedNIC{i.Key, i.Device})
	}
}

// checkOffloads compares the offload flags the config gives each assigned
// NIC (the global ones, or an OPNsense interface's override) with the NIC.
func (rc *runtimeCheck) checkOffloads() {
	for _, knob := range []string{"offload.checksum", "offload.tso", "offload.lro"} {
		for _, a := range rc.ifs {
			s := rc.st.Interfaces[a.dev]
			want, err := rc.c.OffloadFor(knob, a.dev)
			if err != nil {
				continue
			}
			if knob == "offload.checksum" && rc.c.Flavor() == configxml.PfSense && configxml.PfSenseForcesChecksumOff(a.dev) {
				// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:573 — `stristr($iface, "vtnet") || stristr($iface, "ena")`: checksum offload is off there whatever the config says
				want = "off"
			}
			got := OffloadState(s, knob)
			switch {
			case got == want:
			case slices.Contains(rc.st.Management, a.dev):
				rc.add(RuleOffloadMismatch, "offload-mismatch", configxml.SeverityError,
					"%s is %s in the config but %s (%s) shows it %s: fwab leaves the NIC its SSH session runs over as it is; set offload_management: true in the target to change it too (as the GUI does; some drivers reset the link), or reach the firewall through another interface",
					knob, want, a.dev, a.key, got)
			default:
				rc.add(RuleOffloadMismatch, "offload-mismatch", configxml.SeverityError,
					"%s is %s in the config but %s (%s) shows it %s: options %s; reconfigure the interface or reboot",
					knob, want, a.dev, a.key, got, strings.Join(s.Options, ","))
			}
		}
	}
}

// idsByDevice is the running Suricata instances by interface.
func (rc *runtimeCheck) idsByDevice() map[string]IDSInstance {
	running := map[string]IDSInstance{}
	for _, i := range rc.st.IDS {
		running[i.Interface] = i
	}
	return running
}

// checkIDS compares each interface's IDS mode with the Suricata running
// on it.
func (rc *runtimeCheck) checkIDS() {
	running := rc.idsByDevice()
	for _, a := range rc.ifs {
		want, err := rc.c.Get("ids@" + a.key)
		if err != nil {
			continue
		}
		inst, on := running[a.dev]
		got := configxml.IDSOff
		if on {
			got = inst.Mode
		}
		if !idsModeMatches(want, got) {
			rc.add(RuleIDSMismatch, "ids-mismatch", configxml.SeverityError,
				"ids@%s is %s in the config but the firewall runs %s on %s; restart Suricata (its settings take effect only after a restart)",
				a.key, want, describeIDS(got, inst), a.dev)
		}
	}
}

// checkIDSRules reports a Suricata that runs with no rules: it starts,
// shows as running and inspects nothing, so an IDS point would measure the
// cost of the capture alone. pfSense's package builds the rules from the
// interface's enabled rulesets (fwab's new interfaces get the package's
// default events rules); OPNsense installs only the rulesets downloaded and
// enabled under Services → Intrusion Detection → Download.
func (rc *runtimeCheck) checkIDSRules() {
	running := rc.idsByDevice()
	for _, d := range slices.Sorted(maps.Keys(running)) {
		if running[d].Rules != 0 {
			continue
		}
		fix := "enable rulesets for the interface (Services → Suricata → the interface → Categories) and update the rules"
		if rc.c.Flavor() == configxml.OPNsense {
			fix = "enable and download rulesets (Services → Intrusion Detection → Administration → Download), then apply"
		}
		rc.add(RuleIDSNoRules, "ids-no-rules", configxml.SeverityError,
			"Suricata (%s) runs on %s with no rules loaded: it inspects nothing, so what it costs is the capture alone; %s", running[d].Mode, d, fix)
	}
}

// checkInlineOffloads reports the unsafe live combination, whatever the
// config says: inline IPS running on a NIC whose offloads are on.
func (rc *runtimeCheck) checkInlineOffloads() {
	running := rc.idsByDevice()
	for _, d := range slices.Sorted(maps.Keys(running)) {
		if running[d].Mode != configxml.IDSInlineIPS {
			continue
		}
		var live []string
		for _, o := range liveOffloadOptions {
			if rc.st.Interfaces[d].Has(o) {
				live = append(live, o)
			}
		}
		if len(live) > 0 {
			rc.add(RuleInlineOffloadLive, "ips-inline-offload-live", configxml.SeverityError,
				"inline IPS (netmap) runs on %s while its offloads are really on (%s): netmap corrupts or drops such traffic; turn checksum, TSO and LRO off and reconfigure or reboot",
				d, strings.Join(live, ","))
		}
	}
}

// checkRules compares the config's total of generated rules with the rules
// pf loaded.
func (rc *runtimeCheck) checkRules() {
	total, counted := 0, false
	for _, i := range rc.c.Interfaces() {
		v, err := rc.c.Get("rules@" + i.Key)
		if err != nil {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			continue
		}
		total += n
		counted = true
	}
	if counted && total != rc.st.GeneratedRules {
		rc.add(RuleRulesMismatch, "rules-mismatch", configxml.SeverityError,
			"the config holds %d fwab-generated rules but pf has %d loaded; reload the filter", total, rc.st.GeneratedRules)
	}
}

// checkBlocklist: pfBlockerNG's pfB_ tables are loaded exactly when it is
// on.
func (rc *runtimeCheck) checkBlocklist() {
	want, err := rc.c.Get("blocklist")
	if err != nil {
		return
	}
	entries := 0
	for name, n := range rc.st.Tables {
		if strings.HasPrefix(name, "pfB_") {
			entries += n
		}
	}
	switch {
	case want == "on" && entries == 0:
		rc.add(RuleBlocklistMismatch, "blocklist-mismatch", configxml.SeverityError,
			"blocklist is on in the config but no pfB_ table has entries; run a pfBlockerNG update")
	case want == "off" && entries > 0:
		rc.add(RuleBlocklistMismatch, "blocklist-mismatch", configxml.SeverityWarning,
			"blocklist is off in the config but pfB_ tables still hold %d entries", entries)
	}
}

// checkFilter compares the filter knob with pf's status: router mode is
// only measured when pf really stopped filtering.
func (rc *runtimeCheck) checkFilter() {
	want, err := rc.c.Get("filter")
	if err != nil || rc.st.PF == "" {
		return
	}
	switch {
	case want == configxml.FilterDisabled && rc.st.PF != PFDisabled:
		rc.add(RuleFilterMismatch, "filter-mismatch", configxml.SeverityError,
			"filter is disabled in the config but pfctl -si reports Status: %s: pf still filters; reload the filter", rc.st.PF)
	case want == configxml.FilterEnabled && rc.st.PF != PFEnabled:
		rc.add(RuleFilterMismatch, "filter-mismatch", configxml.SeverityError,
			"filter is enabled in the config but pfctl -si reports Status: %s: nothing is filtered; reload the filter", rc.st.PF)
	}
}

// checkCrypto compares crypto.hardware with the kernel's modules: each one
// the value names must be there, and every other one the flavor knows must
// be gone, which after a switch to none means the reboot really happened.
func (rc *runtimeCheck) checkCrypto() {
	want, err := rc.c.Get("crypto.hardware")
	if err != nil || rc.st.CryptoModules == nil {
		return
	}
	loads := configxml.CryptoLoads(rc.c.Flavor(), want)
	for _, m := range configxml.CryptoModules(rc.c.Flavor()) {
		has := rc.st.CryptoModules[m]
		switch {
		case slices.Contains(loads, m) && !has:
			rc.add(RuleCryptoMismatch, "crypto-mismatch", configxml.SeverityError,
				"crypto.hardware is %s in the config but the kernel has no %s module (kldstat -m %s): the boot did not load it; is /boot/kernel/%s.ko on the box, and did it reboot?", want, m, m, m)
		case !slices.Contains(loads, m) && has:
			rc.add(RuleCryptoMismatch, "crypto-mismatch", configxml.SeverityError,
				"crypto.hardware is %s in the config but the kernel still has the %s module: the reboot did not happen, or %s is compiled into this kernel and cannot be turned off", want, m, m)
		}
	}
}

// checkNAT: outbound NAT disabled means no nat rules at all.
func (rc *runtimeCheck) checkNAT() {
	if want, err := rc.c.Get("nat.outbound"); err == nil && want == "disabled" && len(rc.st.NATOutbound) > 0 {
		rc.add(RuleNATMismatch, "nat-mismatch", configxml.SeverityError,
			"nat.outbound is disabled in the config but pf has %d outbound NAT rules; reload the filter", len(rc.st.NATOutbound))
	}
}

// checkIPsec: a configured tunnel should have an installed child SA that
// negotiated the algorithms the config asks for.
func (rc *runtimeCheck) checkIPsec() {
	installed := rc.installedSAs()
	for _, kv := range rc.c.Values() {
		name, ok := strings.CutPrefix(kv.Knob, "ipsec@")
		if !ok || kv.Value == "none" || kv.Value == "" {
			continue
		}
		if len(installed) == 0 {
			rc.add(RuleIPsecNotEstablished, "ipsec-not-established", configxml.SeverityWarning,
				"ipsec@%s is %s in the config but no child SA is installed; restart IPsec or start traffic to bring it up", name, kv.Value)
			continue
		}
		p, err := configxml.ParseProposal(kv.Value)
		if err != nil {
			continue
		}
		encr, integ := SwanctlAlgorithms(p.ESP)
		var seen []string
		match := false
		for _, sa := range installed {
			seen = append(seen, strings.Trim(sa.Encr+"/"+sa.Integ, "/"))
			if sa.Encr == encr && sa.Integ == integ {
				match = true
			}
		}
		if !match {
			rc.add(RuleIPsecMismatch, "ipsec-algorithm-mismatch", configxml.SeverityError,
				"ipsec@%s asks for ESP %s (%s) but the installed SAs negotiated %s; restart IPsec on both ends",
				name, p.ESP, strings.Trim(encr+"/"+integ, "/"), strings.Join(seen, ", "))
		}
	}
}

// installedSAs is the child SAs in state INSTALLED, in the state's order.
func (rc *runtimeCheck) installedSAs() []IPsecSA {
	var sas []IPsecSA
	for _, sa := range rc.st.IPsec {
		if sa.State == "INSTALLED" {
			sas = append(sas, sa)
		}
	}
	return sas
}

// SwanctlAlgorithms names an ESP proposal's algorithms as swanctl
// --list-sas prints them: aes256-sha256 is AES_CBC-256 with
// HMAC_SHA2_256_128, aes128gcm16 is AES_GCM_16-128.
func SwanctlAlgorithms(esp configxml.Algos) (encr, integ string) {
	e := esp.Enc
	switch {
	case e == "3des":
		encr = "3DES_CBC"
	case e == "des":
		encr = "DES_CBC"
	case e == "chacha20poly1305":
		encr = "CHACHA20_POLY1305"
	case e == "blowfish":
		encr = "BLOWFISH_CBC-128"
	case e == "cast128":
		encr = "CAST_CBC-128"
	case strings.Contains(e, "gcm"):
		bits, icv, _ := strings.Cut(strings.TrimPrefix(e, "aes"), "gcm")
		encr = "AES_GCM_" + icv + "-" + bits
	default:
		encr = "AES_CBC-" + strings.TrimPrefix(e, "aes")
	}
	integ = map[string]string{
		"sha1": "HMAC_SHA1_96", "sha256": "HMAC_SHA2_256_128", "sha384": "HMAC_SHA2_384_192",
		"sha512": "HMAC_SHA2_512_256", "md5": "HMAC_MD5_96", "aesxcbc": "AES_XCBC_96",
	}[esp.Integ]
	return encr, integ
}

// idsModeMatches: a pcap Suricata serves both IDS and legacy IPS.
func idsModeMatches(want, got string) bool {
	if want == configxml.IDSLegacyIPS && got == configxml.IDSAlert {
		return true
	}
	return want == got
}

func describeIDS(mode string, inst IDSInstance) string {
	switch mode {
	case configxml.IDSOff:
		return "no Suricata"
	case configxml.IDSInlineIPS:
		return fmt.Sprintf("Suricata inline (netmap, pid %d)", inst.PID)
	default:
		return fmt.Sprintf("Suricata in pcap mode (pid %d)", inst.PID)
	}
}

// ChangeVerifier accepts a runtime state when VerifyRuntime finds no error
// caused by the changes themselves; findings about untouched knobs were
// there before and are not this change's fault.
func ChangeVerifier(c *configxml.Config, changes []configxml.Change) Verifier {
	return func(_ context.Context, st RuntimeState) error {
		var bad []string
		for _, f := range VerifyRuntime(c, st) {
			// A tunnel that did not come up is only a warning in general (it
			// may start on traffic), but not after fwab changed its cipher.
			if f.Severity != configxml.SeverityError && f.Rule != RuleIPsecNotEstablished {
				continue
			}
			for _, ch := range changes {
				if findingConcerns(f, ch) {
					bad = append(bad, f.Rule+": "+f.Message)
					break
				}
			}
		}
		if len(bad) > 0 {
			return errors.New(strings.Join(bad, "; "))
		}
		return nil
	}
}

func findingConcerns(f configxml.Finding, ch configxml.Change) bool {
	if ch.Knob == "config" {
		return true // a whole config switched: every mismatch is its
	}
	switch f.Rule {
	case RuleOffloadMismatch:
		return strings.HasPrefix(f.Message, ch.Knob+" ")
	case RuleIDSMismatch:
		return strings.HasPrefix(f.Message, ch.Knob+" ")
	case RuleInlineOffloadLive:
		// Made unsafe by this change: inline IPS switched on, or an
		// offload switched on.
		return strings.HasPrefix(ch.Knob, "ids@") && ch.To == configxml.IDSInlineIPS ||
			strings.HasPrefix(ch.Knob, "offload.") && ch.To == "on"
	case RuleRulesMismatch:
		return strings.HasPrefix(ch.Knob, "rules@")
	case RuleBlocklistMismatch:
		return ch.Knob == "blocklist"
	case RuleNATMismatch:
		return ch.Knob == "nat.outbound"
	case RuleFilterMismatch:
		return ch.Knob == "filter"
	case RuleCryptoMismatch:
		return ch.Knob == "crypto.hardware"
	case RuleIPsecMismatch, RuleIPsecNotEstablished:
		return strings.HasPrefix(ch.Knob, "ipsec@") && ch.To != "none" && strings.HasPrefix(f.Message, ch.Knob+" ")
	}
	return false
}
