package configxml

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// Severity of a lint finding.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Finding is one lint result. Rule IDs are stable: scripts may match on them.
type Finding struct {
	Rule     string   `json:"rule"`
	Name     string   `json:"name"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Path     string   `json:"path,omitempty"`
}

// LintRule is one check Lint runs.
type LintRule struct {
	ID, Name string
	Severity Severity
	Doc      string
	check    func(c *Config) []Finding
	// knobs are the knobs (by name, without the qualifier) whose values
	// can change the rule's findings: a plan lints each distinct
	// combination of them once (matrix.NewPlan). config and xml can
	// change anything, so every rule sees them.
	knobs []string
}

// Sees reports whether a knob's value can change the rule's findings; knob
// is a reference such as "ids@lan", "offload.tso" or "xml:system/hostname".
func (r LintRule) Sees(knob string) bool {
	ref, err := ParseRef(knob)
	if err != nil {
		return true // not a knob: whatever it is may change anything
	}
	return ref.Name == "config" || ref.Name == "xml" || slices.Contains(r.knobs, ref.Name)
}

// Run runs the rule alone.
func (r LintRule) Run(c *Config) []Finding {
	fs := r.check(c)
	for i := range fs {
		fs[i].Rule, fs[i].Name, fs[i].Severity = r.ID, r.Name, r.Severity
	}
	return fs
}

// LintRules are the checks, in ID order.
var LintRules = []LintRule{
	{"FWAB001", "ips-inline-offload", SeverityError,
		"inline IPS (netmap) with a hardware offload still on: netmap needs checksum, TSO and LRO off",
		lintInlineOffload, []string{"ids", "offload.checksum", "offload.tso", "offload.lro"}},
	{"FWAB002", "ipsec-algorithm-version", SeverityError,
		"an IPsec algorithm the product version does not offer (3DES, Blowfish, CAST128 and MD5 are gone from pfSense 2.7)",
		lintAlgorithms, []string{"ipsec"}},
	{"FWAB003", "ids-unknown-interface", SeverityError,
		"IDS configured on an interface that does not exist",
		lintIDSInterfaces, []string{"ids"}},
	{"FWAB004", "advanced-nat-no-rules", SeverityWarning,
		"advanced outbound NAT with no manual rules: nothing is translated at all",
		lintAdvancedNAT, []string{"nat.outbound"}},
	{"FWAB005", "duplicate-tracker", SeverityWarning,
		"two filter rules share a tracker; pfSense renumbers them and per-rule statistics mix",
		lintTrackers, nil}, // rules counts take trackers no rule has (trackersFree)
	{"FWAB006", "hybrid-nat-no-rules", SeverityWarning,
		"hybrid outbound NAT with no manual rules: it translates exactly as automatic does",
		lintHybridNAT, []string{"nat.outbound"}},
}

// Lint runs every rule and returns the findings, errors first.
func Lint(c *Config) []Finding {
	var out []Finding
	for _, r := range LintRules {
		out = append(out, r.Run(c)...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity == SeverityError && out[j].Severity != SeverityError })
	return out
}

// LintChanged runs the rules that see one of the knobs given (knob
// references or knob=value assignments; see LintRule.Sees): the findings
// an edit of those knobs can add or remove. The rest are the same as
// before the edit, and FWAB005 alone reads every filter rule.
func LintChanged(c *Config, knobs []string) []Finding {
	var out []Finding
	for _, r := range LintRules {
		if slices.ContainsFunc(knobs, func(k string) bool { k, _, _ = strings.Cut(k, "="); return r.Sees(k) }) {
			out = append(out, r.Run(c)...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Severity == SeverityError && out[j].Severity != SeverityError })
	return out
}

// SafetyRules are the rules whose findings make a write refuse unless the
// rule is allowed by its ID (`config set --allow`, a spec's allow:): a
// config that breaks one is unsafe on a running firewall, not merely odd.
// Inline IPS through netmap with an offload on corrupts or drops traffic.
var SafetyRules = []string{"FWAB001"}

// Blocking returns the findings of safety rules that allowed does not name.
func Blocking(fs []Finding, allowed []string) []Finding {
	var out []Finding
	for _, f := range fs {
		if slices.Contains(SafetyRules, f.Rule) && !slices.Contains(allowed, f.Rule) {
			out = append(out, f)
		}
	}
	return out
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

func lintInlineOffload(c *Config) []Finding {
	// Where the offload switches live: <system> up to OPNsense 25.7 and on
	// pfSense, the Interfaces settings model from OPNsense 26.1, and an
	// OPNsense interface's own element where it overrides them.
	global := "system"
	if c.offloadMVC() {
		global = "OPNsense/Interfaces/settings"
	}
	overrides := c.offloadOverrides()
	var out []Finding
	for _, i := range c.Interfaces() {
		if m, _ := getIDS(c, i.Key); m != IDSInlineIPS {
			continue
		}
		var on []string
		for _, k := range []string{"offload.checksum", "offload.tso", "offload.lro"} {
			if v, _ := c.OffloadFor(k, i.Device); v == "on" {
				on = append(on, k)
			}
		}
		if len(on) == 0 {
			continue
		}
		verb := "is"
		if len(on) > 1 {
			verb = "are"
		}
		path := global
		if slices.ContainsFunc(overrides, func(e *etree.Element) bool { return e.Tag == i.Key }) {
			path = "interfaces/" + i.Key
		}
		out = append(out, Finding{
			Message: fmt.Sprintf("ids@%s is ips-inline but %s %s still on; set them off (offload.checksum=off offload.tso=off offload.lro=off) and reconfigure the interfaces", i.Key, strings.Join(on, ", "), verb),
			Path:    path,
		})
	}
	return out
}

func lintAlgorithms(c *Config) []Finding {
	var out []Finding
	check := func(alg, path string) {
		if alg == "" {
			return
		}
		if why := c.algorithmProblem(alg); why != "" {
			out = append(out, Finding{Message: fmt.Sprintf("%s: %s", alg, why), Path: path})
		}
	}
	if c.flavor == PfSense {
		for i, p1 := range c.findAll("ipsec/phase1", false) {
			if p1.SelectElement("disabled") != nil {
				continue
			}
			for j, item := range p1.FindElements("encryption/item") {
				path := fmt.Sprintf("ipsec/phase1[%d]/encryption/item[%d]", i+1, j+1)
				check(pfDecryption(childText(item, "encryption-algorithm/name"), childText(item, "encryption-algorithm/keylen")), path)
				check(childText(item, "hash-algorithm"), path)
			}
		}
		for i, p2 := range c.findAll("ipsec/phase2", false) {
			if p2.SelectElement("disabled") != nil {
				continue
			}
			path := fmt.Sprintf("ipsec/phase2[%d]", i+1)
			for _, o := range p2.SelectElements("encryption-algorithm-option") {
				check(pfDecryption(childText(o, "name"), childText(o, "keylen")), path)
			}
			for _, h := range p2.SelectElements("hash-algorithm-option") {
				check(trimHMAC(h.Text()), path)
			}
		}
		return out
	}
	for _, t := range c.swanctlTunnels() {
		for _, a := range []Algos{t.Proposal.IKE, t.Proposal.ESP} {
			check(a.Enc, "OPNsense/Swanctl ("+t.Name+")")
			check(a.Integ, "OPNsense/Swanctl ("+t.Name+")")
		}
	}
	return out
}

func trimHMAC(s string) string {
	if len(s) > 5 && s[:5] == "hmac_" {
		return s[5:]
	}
	return s
}

func lintIDSInterfaces(c *Config) []Finding {
	var out []Finding
	if c.flavor == PfSense {
		for i, r := range c.findAll("installedpackages/suricata/rule", false) {
			if iface := childText(r, "interface"); !c.hasInterface(iface) && childText(r, "enable") == "on" {
				out = append(out, Finding{
					Message: fmt.Sprintf("Suricata runs on interface %q, which does not exist; interfaces: %v", iface, c.interfaceKeys()),
					Path:    fmt.Sprintf("installedpackages/suricata/rule[%d]", i+1),
				})
			}
		}
		return out
	}
	if g := c.find("OPNsense/IDS/general"); g != nil {
		for _, iface := range splitList(childText(g, "interfaces")) {
			if !c.hasInterface(iface) {
				out = append(out, Finding{
					Message: fmt.Sprintf("IDS listens on interface %q, which does not exist; interfaces: %v", iface, c.interfaceKeys()),
					Path:    "OPNsense/IDS/general/interfaces",
				})
			}
		}
	}
	return out
}

func lintAdvancedNAT(c *Config) []Finding {
	if m, _ := getNATMode(c, ""); m == "advanced" && c.manualOutboundRules() == 0 {
		return []Finding{{
			Message: "outbound NAT is advanced but there are no enabled manual rules, so no traffic is translated; add rules or use hybrid",
			Path:    "nat/outbound",
		}}
	}
	return nil
}

// lintHybridNAT finds hybrid outbound NAT with no manual rule: the
// automatic rules alone, the same pf ruleset as automatic, so a point of
// each would measure one thing twice.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:2432 — `case "hybrid":` adds the manual rules
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:2555 — `($natomode == "hybrid")` adds the automatic ones too
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:196 — manual rules for `array("advanced", "hybrid")`
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:209 — the standard outbound rules for `array("automatic", "hybrid")`
func lintHybridNAT(c *Config) []Finding {
	if m, _ := getNATMode(c, ""); m == "hybrid" && !c.hybridAddsRules() {
		return []Finding{{
			Message: "outbound NAT is hybrid but there are no enabled manual rules, so it translates exactly as automatic does; add manual rules, or measure automatic alone",
			Path:    "nat/outbound",
		}}
	}
	return nil
}

func lintTrackers(c *Config) []Finding {
	seen := map[string]int{}
	var out []Finding
	i := 0
	for _, r := range c.indexOf("filter") {
		if r.tag != "rule" {
			continue
		}
		i++
		t := r.tracker
		if t == "" {
			continue
		}
		if n, err := strconv.ParseUint(t, 10, 64); err == nil {
			t = strconv.FormatUint(n, 10) // 0100000101 and 100000101 are the same tracker
		}
		if first, dup := seen[t]; dup {
			out = append(out, Finding{
				Message: fmt.Sprintf("rules %d and %d share tracker %s", first, i, t),
				Path:    fmt.Sprintf("filter/rule[%d]/tracker", i),
			})
			continue
		}
		seen[t] = i
	}
	return out
}
