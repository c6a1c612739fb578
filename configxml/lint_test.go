package configxml

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLint(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		product string
		set     []string
		want    []string // rule IDs
	}{
		{"clean pfSense", "configs/pfsense-2.7.xml", "", nil, nil},
		{"clean OPNsense", "configs/opnsense-26.1.xml", "", nil, nil},
		{"inline IPS with checksum offload on", "configs/pfsense-2.7.xml", "", []string{"ids@lan=ips-inline"}, []string{"FWAB001"}},
		{"inline IPS with every offload off", "configs/pfsense-2.7.xml", "", []string{"ids@lan=ips-inline", "offload.checksum=off"}, nil},
		{"OPNsense 26.1 inline IPS with checksum on", "configs/opnsense-26.1.xml", "", []string{"ids@wan=ips-inline"}, []string{"FWAB001"}},
		{"OPNsense 25.7 inline IPS, offloads off", "configs/opnsense-25.7.xml", "", []string{"ids@wan=ips-inline"}, nil},
		{"3DES on 2.7", "configs/pfsense-2.6.xml", "2.7.2", nil, []string{"FWAB002"}},
		{"3DES on 2.6", "configs/pfsense-2.6.xml", "2.6.0", nil, nil},
		{"ChaCha on 2.6", "configs/pfsense-2.8.xml", "2.6.0", nil, []string{"FWAB002"}},
		{"IDS on a missing interface", "configs/pfsense-2.7.xml", "", []string{"xml:installedpackages/suricata/rule/interface=opt9"}, []string{"FWAB003"}},
		{"OPNsense IDS on a missing interface", "configs/opnsense-26.1.xml", "", []string{"xml:OPNsense/IDS/general/interfaces=wan,opt7"}, []string{"FWAB003"}},
		{"advanced NAT with rules", "configs/pfsense-2.7.xml", "", []string{"nat.outbound=advanced"}, nil},
		{"advanced NAT without rules", "configs/opnsense-26.1.xml", "", []string{"xml:nat/outbound/mode=advanced"}, []string{"FWAB004"}},
		{"hybrid NAT without rules", "configs/opnsense-26.1.xml", "", []string{"nat.outbound=hybrid"}, []string{"FWAB006"}},
		{"hybrid NAT with rules", "configs/pfsense-2.7.xml", "", []string{"nat.outbound=hybrid"}, nil},
		{"duplicate tracker", "configs/pfsense-2.7.xml", "", []string{"xml:filter/rule[3]/tracker=100000101"}, []string{"FWAB005"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := load(t, tt.fixture)
			if tt.product != "" {
				c.SetProduct(tt.product)
			}
			if err := c.SetAll(tt.set); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range Lint(c) {
				got = append(got, f.Rule)
				if f.Message == "" || f.Name == "" {
					t.Errorf("finding %+v lacks a name or message", f)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Lint rules (-want +got):\n%s\nfindings: %+v", diff, Lint(c))
			}
		})
	}
}

// TestAdvancedNATNeedsManualRules: the knob refuses advanced where no
// enabled manual rule exists (the firewall would translate nothing: the
// pfSense GUI copies the automatic rules first, OPNsense's does not) and
// takes it where the config has manual rules.
func TestAdvancedNATNeedsManualRules(t *testing.T) {
	for _, fixture := range []string{"configs/opnsense-26.1.xml", "configs/opnsense-24.7.xml"} {
		c := load(t, fixture)
		before := string(c.Bytes())
		err := c.Set("nat.outbound", "advanced")
		if err == nil || !strings.Contains(err.Error(), "no enabled manual outbound NAT rule") || !strings.Contains(err.Error(), "hybrid") {
			t.Errorf("%s: Set(nat.outbound=advanced) = %v, want a refusal naming the missing manual rules and hybrid", fixture, err)
		}
		if string(c.Bytes()) != before {
			t.Errorf("%s: the refused Set changed the config", fixture)
		}
		if err := c.Set("nat.outbound", "disabled"); err != nil {
			t.Errorf("%s: Set(nat.outbound=disabled): %v", fixture, err)
		}
	}
	c := load(t, "configs/pfsense-2.7.xml")
	if err := c.Set("nat.outbound", "advanced"); err != nil {
		t.Errorf("pfsense-2.7.xml has manual rules: Set(nat.outbound=advanced): %v", err)
	}
}

func TestLintRuleIDsStable(t *testing.T) {
	var got []string
	for _, r := range LintRules {
		got = append(got, fmt.Sprintf("%s %s %s", r.ID, r.Name, r.Severity))
	}
	want := []string{
		"FWAB001 ips-inline-offload error",
		"FWAB002 ipsec-algorithm-version error",
		"FWAB003 ids-unknown-interface error",
		"FWAB004 advanced-nat-no-rules warning",
		"FWAB005 duplicate-tracker warning",
		"FWAB006 hybrid-nat-no-rules warning",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lint rules changed (-want +got); IDs are a public contract:\n%s", diff)
	}
}

func TestDiff(t *testing.T) {
	a := load(t, "configs/pfsense-2.7.xml")
	b := load(t, "configs/pfsense-2.7.xml")
	if k, p := Diff(a, b); len(k) != 0 || len(p) != 0 {
		t.Fatalf("Diff of identical configs = %v, %v", k, p)
	}
	b.DefineTunnel(TunnelSpec{Name: "lab", RemoteAddr: "198.19.0.2", LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24", PSK: "hunter2-psk"})
	if err := b.SetAll([]string{"offload.tso=on", "rules@lan=2", "ipsec@lab=aes128gcm16", "xml:system/user/bcrypt-hash=$2b$10$changedchanged"}); err != nil {
		t.Fatal(err)
	}
	knobs, paths := Diff(a, b)
	wantKnobs := []Change{
		{Knob: "offload.tso", From: "off", To: "on", Action: ActionInterfaces},
		{Knob: "rules@lan", From: "0", To: "2", Action: ActionFilterReload},
		{Knob: "ipsec@lab", From: "", To: "aes128gcm16", Action: ActionIPsecRestart},
	}
	if diff := cmp.Diff(wantKnobs, knobs); diff != "" {
		t.Errorf("knob changes (-want +got):\n%s", diff)
	}
	var text []string
	for _, p := range paths {
		text = append(text, p.String())
	}
	all := strings.Join(text, "\n")
	for _, want := range []string{
		"- system/disablesegmentationoffloading",
		`+ filter/rule[tracker=4110000001] (descr "fwab-generated 1")`,
		`+ filter/rule[tracker=4110000002] (descr "fwab-generated 2")`,
		`+ ipsec/phase1[2] (descr "lab")`,
		`~ system/user/bcrypt-hash: "(secret)" → "(secret)"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("path changes lack %q:\n%s", want, all)
		}
	}
	for _, secret := range []string{"hunter2-psk", "changedchanged", "fixture-psk"} {
		if strings.Contains(all, secret) {
			t.Errorf("diff shows secret %q:\n%s", secret, all)
		}
	}
}

func TestDiffMatchesOPNsenseByUUID(t *testing.T) {
	a := loadFixture(t, "configs/opnsense-26.7.xml")
	b := loadFixture(t, "configs/opnsense-26.7.xml")
	if err := b.Set("rules@lan", "1"); err != nil {
		t.Fatal(err)
	}
	_, paths := Diff(a, b)
	var added []string
	for _, p := range paths {
		if p.Kind == "added" {
			added = append(added, p.Path)
		}
	}
	want := []string{`OPNsense/Firewall/Filter/rules/rule[@uuid="00000000-0001-4000-8000-000000000000"]`}
	if diff := cmp.Diff(want, added); diff != "" {
		t.Errorf("added paths (-want +got):\n%s", diff)
	}
}

// TestLintRuleSees: a knob a rule does not see (LintRule.Sees) never
// changes its findings, whatever the other knobs are set to: plans lint
// each combination of the seen knobs once and take it for every point
// that shares it (matrix.NewPlan), so a missing name would let a point
// that breaks the rule through. Each pair of sample assignments is tried
// on every fixture, the first as the state (inline IPS, a weak cipher,
// advanced NAT make the rules fire), the second as the unseen change.
func TestLintRuleSees(t *testing.T) {
	for _, tt := range []struct{ fixture, product string }{
		{"configs/pfsense-2.6.xml", ""},
		{"configs/pfsense-2.6.xml", "2.7.2"}, // its tunnel's 3DES breaks FWAB002
		{"configs/pfsense-2.7.xml", ""},
		{"configs/opnsense-25.7.xml", ""},
		{"configs/opnsense-26.1.xml", ""},
	} {
		t.Run(tt.fixture+" "+tt.product, func(t *testing.T) {
			fresh := func() *Config {
				c := load(t, tt.fixture)
				if tt.product != "" {
					if err := c.SetProduct(tt.product); err != nil {
						t.Fatal(err)
					}
				}
				c.DefineTunnel(TunnelSpec{Name: "fwab", Interface: "wan", RemoteAddr: "198.19.0.2", LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24", LocalID: "a", RemoteID: "b", PSK: "k"})
				return c
			}
			var samples []string
			for _, k := range Knobs(fresh().Flavor()) {
				switch k.Name {
				case "config", "firmware", "xml":
					continue // seen by every rule, or not in config.xml
				case "rules":
					samples = append(samples, "rules@lan=0", "rules@lan=4", "rules@wan=3")
				case "ids":
					for _, v := range k.Values {
						samples = append(samples, "ids@lan="+v, "ids@wan="+v)
					}
				case "ipsec":
					for _, kv := range fresh().Values() {
						if strings.HasPrefix(kv.Knob, "ipsec@") {
							samples = append(samples, kv.Knob+"=aes128gcm16", kv.Knob+"=3des-sha1", kv.Knob+"=chacha20poly1305", kv.Knob+"=none")
						}
					}
				case "crypto.hardware":
					samples = append(samples, "crypto.hardware=none", "crypto.hardware=aesni")
				default:
					for _, v := range k.Values {
						samples = append(samples, k.Name+"="+v)
					}
				}
			}
			tried := 0
			for _, state := range append([]string{""}, samples...) {
				base := fresh()
				if state != "" && base.SetAll([]string{state}) != nil {
					continue // not valid on this fixture
				}
				before := map[string][]Finding{}
				for _, r := range LintRules {
					before[r.ID] = r.Run(base)
				}
				for _, change := range samples {
					knob, value, _ := strings.Cut(change, "=")
					c := fresh()
					set := []string{change}
					if state != "" {
						set = append([]string{state}, change)
					}
					if err := c.SetAll(set); err != nil {
						continue
					}
					tried++
					for _, r := range LintRules {
						if r.Sees(knob) {
							continue
						}
						if diff := cmp.Diff(before[r.ID], r.Run(c)); diff != "" {
							t.Errorf("%s does not see %s, but %s=%s on top of %q changed its findings (-before +after):\n%s", r.ID, knob, knob, value, state, diff)
						}
					}
				}
			}
			if tried < 50 {
				t.Fatalf("only %d combinations applied: the samples no longer fit the fixture", tried)
			}
		})
	}
}

// LintChanged runs the rules that see the knobs an edit names: an edit of
// the offloads or of a rules count (whose rules take trackers no rule has,
// TestRulesRefuseTakenTracker) says nothing of a duplicate tracker the
// config had, an xml: edit does; inline IPS with an offload on is found
// either way.
func TestLintChanged(t *testing.T) {
	c := load(t, "configs/pfsense-2.7.xml")
	if err := c.SetAll([]string{"xml:filter/rule[3]/tracker=100000101", "ids@lan=ips-inline"}); err != nil {
		t.Fatal(err)
	}
	ids := func(fs []Finding) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Rule)
		}
		return out
	}
	for _, tt := range []struct {
		knobs []string
		want  []string
	}{
		{[]string{"offload.tso=on"}, []string{"FWAB001"}},
		{[]string{"rules@lan=5"}, nil},
		{[]string{"ids@lan=ips-inline", "rules@lan"}, []string{"FWAB001"}},
		{[]string{"xml:system/hostname=fw"}, ids(Lint(c))},
		{[]string{"filter=enabled"}, nil},
	} {
		if got := ids(LintChanged(c, tt.knobs)); !slices.Equal(got, tt.want) {
			t.Errorf("LintChanged(%q) = %v, want %v", tt.knobs, got, tt.want)
		}
	}
}

// OPNsense has one IDS mode for every interface it listens on
// (OPNsense/IDS/general/mode, ips before 26.1): assignments that give two
// interfaces different modes are refused in either order, whatever the
// config had enabled before, and nothing changes.
func TestOPNsenseIDSOneMode(t *testing.T) {
	for _, name := range []string{"configs/opnsense-24.7.xml", "configs/opnsense-26.1.xml"} {
		for _, tt := range []struct {
			start []string // the config's IDS before the assignments
			set   []string
		}{
			{nil, []string{"ids@wan=ips-inline", "ids@lan=ids"}},
			{nil, []string{"ids@lan=ids", "ids@wan=ips-inline"}},
			{[]string{"xml:OPNsense/IDS/general/enabled=0"}, []string{"ids@wan=ips-inline", "ids@lan=ids"}},
			{[]string{"xml:OPNsense/IDS/general/enabled=0"}, []string{"ids@lan=ids", "ids@wan=ips-inline"}},
			{[]string{"ids@wan=off"}, []string{"ids@wan=ids", "ids@lan=ips-inline"}},
		} {
			set := tt.set
			c := load(t, name)
			if err := c.SetAll(tt.start); err != nil {
				t.Fatal(err)
			}
			before := c.Bytes()
			err := c.SetAll(set)
			if err == nil || !strings.Contains(err.Error(), "one IDS mode") {
				t.Errorf("%s: SetAll(%q) = %v, want the mixed modes refused", name, set, err)
			}
			if err := c.CheckAll(set); err == nil {
				t.Errorf("%s: CheckAll(%q) accepted mixed modes", name, set)
			}
			if !bytes.Equal(c.Bytes(), before) {
				t.Errorf("%s: a refused SetAll(%q) changed the config", name, set)
			}
		}
		c := load(t, name)
		if err := c.SetAll([]string{"ids@wan=ips-inline", "ids@lan=ips-inline"}); err != nil {
			t.Errorf("%s: one mode on two interfaces: %v", name, err)
		}
	}
}

// TestHybridNATRulesAsTheProductCounts: hybrid is automatic under another
// name unless it adds rules; which rules count follows each product: a
// pfSense rule with <disabled> at all is skipped, an OPNsense one only
// when <disabled> is not empty in PHP's sense, an MVC rule when <enabled>
// is; and OPNsense loads MVC rules in automatic mode too before 26.1.11.
func TestHybridNATRulesAsTheProductCounts(t *testing.T) {
	mvc := "xml:OPNsense/Firewall/Filter/snatrules/rule/enabled="
	legacy := "xml:nat/outbound/rule/disabled="
	for _, tt := range []struct {
		name, fixture, product string
		set                    []string
		warn                   bool
	}{
		{"OPNsense legacy rule with <disabled>0</disabled> counts", "configs/opnsense-26.1.xml", "", []string{legacy + "0"}, false},
		{"OPNsense legacy rule with <disabled>1</disabled> does not", "configs/opnsense-26.1.xml", "", []string{legacy + "1"}, true},
		{"pfSense rule with an empty <disabled> does not", "configs/pfsense-2.7.xml", "", []string{legacy}, true},
		{"MVC rule on 26.1.11 adds to hybrid", "configs/opnsense-26.1.xml", "26.1.11", []string{mvc + "1"}, false},
		{"MVC rule on 26.1.10 is in automatic too", "configs/opnsense-26.1.xml", "26.1.10", []string{mvc + "1"}, true},
		{"MVC rule with an empty <enabled> is off", "configs/opnsense-26.1.xml", "26.1.11", []string{mvc}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := load(t, tt.fixture)
			if tt.product != "" {
				if err := c.SetProduct(tt.product); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.SetAll(append(tt.set, "nat.outbound=hybrid")); err != nil {
				t.Fatal(err)
			}
			got := slices.ContainsFunc(Lint(c), func(f Finding) bool { return f.Rule == "FWAB006" })
			if got != tt.warn {
				t.Errorf("FWAB006 found = %v, want %v", got, tt.warn)
			}
		})
	}
}

// TestRulesRefuseTakenTracker: a rules count whose generated rules would
// take the tracker of a rule fwab did not generate is refused, so a count
// never adds a duplicate tracker (FWAB005 need not see rules counts).
func TestRulesRefuseTakenTracker(t *testing.T) {
	c := loadFixture(t, "configs/pfsense-2.7.xml")
	lan := slices.Index(c.interfaceKeys(), "lan")
	taken := strconv.Itoa(trackerBase + lan*trackerPerIf + 3)
	if err := c.SetAll([]string{"xml:filter/rule[1]/tracker=" + taken}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		value string
		ok    bool
	}{{"0", true}, {"2", true}, {"3", false}, {"50", false}} {
		err := c.CheckAll([]string{"rules@lan=" + tt.value})
		if (err == nil) != tt.ok {
			t.Errorf("rules@lan=%s: %v, want ok %v", tt.value, err, tt.ok)
		}
	}
	if err := c.CheckAll([]string{"rules@lan=3"}); err == nil || !strings.Contains(err.Error(), "at most 2 rules on lan") {
		t.Errorf("rules@lan=3: %v, want it to say at most 2", err)
	}
	// The same through an xml: assignment given with the count, in either
	// order: the count is checked on the config the set makes.
	fresh := loadFixture(t, "configs/pfsense-2.7.xml")
	for _, set := range [][]string{
		{"xml:filter/rule[1]/tracker=" + taken, "rules@lan=5"},
		{"rules@lan=5", "xml:filter/rule[1]/tracker=" + taken},
	} {
		if err := fresh.CheckAll(set); err == nil || !strings.Contains(err.Error(), "at most 2 rules on lan") {
			t.Errorf("CheckAll(%q) = %v, want the count refused", set, err)
		}
		if err := fresh.SetAll(set); err == nil || !strings.Contains(err.Error(), "at most 2 rules on lan") {
			t.Errorf("SetAll(%q) = %v, want the count refused", set, err)
		}
		fresh = loadFixture(t, "configs/pfsense-2.7.xml")
	}
	if err := fresh.CheckAll([]string{"xml:filter/rule[1]/tracker=" + taken, "rules@lan=2"}); err != nil {
		t.Errorf("a count below the tracker with it: %v", err)
	}
	if got, _ := fresh.Get("rules@lan"); got != "0" {
		t.Errorf("CheckAll changed the config: rules@lan = %s", got)
	}
	// Rules fwab generated keep their trackers: a count over them is fine.
	if err := c.SetAll([]string{"xml:filter/rule[1]/tracker=1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetAll([]string{"rules@lan=5"}); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAll([]string{"rules@lan=9"}); err != nil {
		t.Errorf("rules@lan=9 over 5 generated: %v", err)
	}
	if fs := Lint(c); slices.ContainsFunc(fs, func(f Finding) bool { return f.Rule == "FWAB005" }) {
		t.Errorf("generated rules share a tracker: %v", fs)
	}
}

// TestCheckedAfterOnAFaithfulCopy: the copy a set is checked on again
// holds what the config holds beside its document (the tunnels a spec
// defines), and a knob whose check allows the box's own state
// (nat.outbound already advanced) is held to the state before the set.
func TestCheckedAfterOnAFaithfulCopy(t *testing.T) {
	for _, name := range []string{"configs/pfsense-2.7.xml", "configs/opnsense-26.1.xml"} {
		c := loadFixture(t, name)
		c.DefineTunnel(TunnelSpec{Name: "newtun", Interface: "wan", RemoteAddr: "198.19.0.2", LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24", LocalID: "a", RemoteID: "b", PSK: "k"})
		set := []string{"ipsec@newtun=aes256gcm16", "xml:ipsec/client/enable=", "xml:interfaces/wan/descr=WAN2"}
		if err := c.CheckAll(set); err != nil {
			t.Errorf("%s: CheckAll(%q) = %v, want it valid", name, set, err)
		}
		if err := c.SetAll(set); err != nil {
			t.Errorf("%s: SetAll(%q) = %v, want it valid", name, set, err)
		}
	}
	c := loadFixture(t, "configs/pfsense-2.7.xml")
	orig := c.Bytes()
	set := []string{"nat.outbound=advanced", "xml:nat/outbound/rule[1]/disabled="}
	if err := c.SetAll(set); err == nil || !strings.Contains(err.Error(), "advanced needs manual rules") || strings.Contains(err.Error(), "partly changed") {
		t.Errorf("SetAll(%q) = %v, want advanced refused: the set leaves no enabled manual rule", set, err)
	}
	if !bytes.Equal(orig, c.Bytes()) {
		t.Error("a refused SetAll changed the config")
	}

	// OPNsense's MVC source NAT rules count for advanced too.
	opn := loadFixture(t, "configs/opnsense-26.1.xml")
	if err := opn.SetAll([]string{"xml:OPNsense/Firewall/Filter/snatrules/rule/enabled=1"}); err != nil {
		t.Fatal(err)
	}
	set = []string{"nat.outbound=advanced", "xml:OPNsense/Firewall/Filter/snatrules/rule[1]/enabled=0"}
	if err := opn.CheckAll(set); err == nil || !strings.Contains(err.Error(), "advanced needs manual rules") {
		t.Errorf("OPNsense CheckAll(%q) = %v, want advanced refused", set, err)
	}
	// A tunnel the set creates is checked as new: its interface's address.
	opn = loadFixture(t, "configs/opnsense-26.1.xml")
	opn.DefineTunnel(TunnelSpec{Name: "newtun", Interface: "wan", RemoteAddr: "198.19.0.2", LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24", LocalID: "a", RemoteID: "b", PSK: "k"})
	for _, set := range [][]string{
		{"ipsec@newtun=aes256gcm16", "xml:interfaces/wan/ipaddr=dhcp"},
		{"xml:interfaces/wan/ipaddr=dhcp", "ipsec@newtun=aes256gcm16"},
	} {
		if err := opn.CheckAll(set); err == nil || !strings.Contains(err.Error(), "local_addr") {
			t.Errorf("OPNsense CheckAll(%q) = %v, want the new tunnel refused for its address", set, err)
		}
	}
	// One thing set two ways is refused, whatever the order.
	for _, name := range []string{"configs/pfsense-2.7.xml", "configs/opnsense-26.1.xml"} {
		c := loadFixture(t, name)
		for _, set := range [][]string{
			{"nat.outbound=hybrid", "xml:nat/outbound/mode=automatic"},
			{"xml:nat/outbound/mode=automatic", "nat.outbound=hybrid"},
		} {
			if err := c.CheckAll(set); err == nil || !strings.Contains(err.Error(), "set one thing two ways") {
				t.Errorf("%s: CheckAll(%q) = %v, want it refused", name, set, err)
			}
		}
	}
}
