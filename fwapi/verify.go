package fwapi

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
)

// liveOffloadOptions are the ifconfig options that mean an offload is on;
// netmap (inline IPS) needs all of them off.
var liveOffloadOptions = []string{"TXCSUM", "RXCSUM", "TXCSUM_IPV6", "RXCSUM_IPV6", "TSO4", "TSO6", "LRO", "VLAN_HWTSO"}

// VerifyRuntime compares what the config says (the GUI's view) with what
// the firewall is really doing, and reports every mismatch and every unsafe
// combination: above all, inline IPS running on a NIC whose offloads are
// really on, whatever the config claims.
func VerifyRuntime(c *configxml.Config, st RuntimeState) []configxml.Finding {
	var out []configxml.Finding
	add := func(rule, name string, sev configxml.Severity, format string, args ...any) {
		out = append(out, configxml.Finding{Rule: rule, Name: name, Severity: sev, Message: fmt.Sprintf(format, args...)})
	}
	// Interfaces the config assigns and the runtime shows.
	type assigned struct{ key, dev string }
	var ifs []assigned
	for _, i := range c.Interfaces() {
		if i.Device == "" || !IsNIC(i.Device) {
			continue
		}
		if _, ok := st.Interfaces[i.Device]; !ok {
			add(RuleInterfaceMissing, "interface-missing", configxml.SeverityError,
				"interface %s is assigned to %s in the config but the firewall has no such device", i.Key, i.Device)
			continue
		}
		ifs = append(ifs, assigned{i.Key, i.Device})
	}

	// Offloads: the config's global flags against every assigned NIC.
	for _, knob := range []string{"offload.checksum", "offload.tso", "offload.lro"} {
		want, err := c.Get(knob)
		if err != nil {
			continue
		}
		for _, a := range ifs {
			s := st.Interfaces[a.dev]
			if got := OffloadState(s, knob); got != want {
				add(RuleOffloadMismatch, "offload-mismatch", configxml.SeverityError,
					"%s is %s in the config but %s (%s) shows it %s: options %s; reconfigure the interface or reboot",
					knob, want, a.dev, a.key, got, strings.Join(s.Options, ","))
			}
		}
	}

	// IDS per interface, and the unsafe live combination.
	running := map[string]IDSInstance{}
	for _, i := range st.IDS {
		running[i.Interface] = i
	}
	for _, a := range ifs {
		want, err := c.Get("ids@" + a.key)
		if err != nil {
			continue
		}
		inst, on := running[a.dev]
		got := configxml.IDSOff
		if on {
			got = inst.Mode
		}
		if !idsModeMatches(want, got) {
			add(RuleIDSMismatch, "ids-mismatch", configxml.SeverityError,
				"ids@%s is %s in the config but the firewall runs %s on %s; restart Suricata (its settings take effect only after a restart)",
				a.key, want, describeIDS(got, inst), a.dev)
		}
	}
	devs := make([]string, 0, len(running))
	for d := range running {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	for _, d := range devs {
		inst := running[d]
		if inst.Mode != configxml.IDSInlineIPS {
			continue
		}
		var live []string
		for _, o := range liveOffloadOptions {
			if st.Interfaces[d].Has(o) {
				live = append(live, o)
			}
		}
		if len(live) > 0 {
			add(RuleInlineOffloadLive, "ips-inline-offload-live", configxml.SeverityError,
				"inline IPS (netmap) runs on %s while its offloads are really on (%s): netmap corrupts or drops such traffic; turn checksum, TSO and LRO off and reconfigure or reboot",
				d, strings.Join(live, ","))
		}
	}

	// Generated rules: the config's total against the rules pf loaded.
	total, counted := 0, false
	for _, i := range c.Interfaces() {
		v, err := c.Get("rules@" + i.Key)
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
	if counted && total != st.GeneratedRules {
		add(RuleRulesMismatch, "rules-mismatch", configxml.SeverityError,
			"the config holds %d fwab-generated rules but pf has %d loaded; reload the filter", total, st.GeneratedRules)
	}

	// pfBlockerNG: its pfB_ tables are loaded exactly when it is on.
	if want, err := c.Get("blocklist"); err == nil {
		entries := 0
		for name, n := range st.Tables {
			if strings.HasPrefix(name, "pfB_") {
				entries += n
			}
		}
		switch {
		case want == "on" && entries == 0:
			add(RuleBlocklistMismatch, "blocklist-mismatch", configxml.SeverityError,
				"blocklist is on in the config but no pfB_ table has entries; run a pfBlockerNG update")
		case want == "off" && entries > 0:
			add(RuleBlocklistMismatch, "blocklist-mismatch", configxml.SeverityWarning,
				"blocklist is off in the config but pfB_ tables still hold %d entries", entries)
		}
	}

	// Outbound NAT: disabled means no nat rules at all.
	if want, err := c.Get("nat.outbound"); err == nil && want == "disabled" && len(st.NATOutbound) > 0 {
		add(RuleNATMismatch, "nat-mismatch", configxml.SeverityError,
			"nat.outbound is disabled in the config but pf has %d outbound NAT rules; reload the filter", len(st.NATOutbound))
	}

	// IPsec: a configured tunnel should have an installed child SA.
	installed := 0
	for _, sa := range st.IPsec {
		if sa.State == "INSTALLED" {
			installed++
		}
	}
	for _, kv := range c.Values() {
		name, ok := strings.CutPrefix(kv.Knob, "ipsec@")
		if !ok || kv.Value == "none" || kv.Value == "" {
			continue
		}
		if installed == 0 {
			add(RuleIPsecNotEstablished, "ipsec-not-established", configxml.SeverityWarning,
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
		for _, sa := range st.IPsec {
			if sa.State != "INSTALLED" {
				continue
			}
			seen = append(seen, strings.Trim(sa.Encr+"/"+sa.Integ, "/"))
			if sa.Encr == encr && sa.Integ == integ {
				match = true
			}
		}
		if !match {
			add(RuleIPsecMismatch, "ipsec-algorithm-mismatch", configxml.SeverityError,
				"ipsec@%s asks for ESP %s (%s) but the installed SAs negotiated %s; restart IPsec on both ends",
				name, p.ESP, strings.Trim(encr+"/"+integ, "/"), strings.Join(seen, ", "))
		}
	}
	return out
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
	case RuleIPsecMismatch, RuleIPsecNotEstablished:
		return strings.HasPrefix(ch.Knob, "ipsec@") && ch.To != "none" && strings.HasPrefix(f.Message, ch.Knob+" ")
	}
	return false
}
