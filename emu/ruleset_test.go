package emu

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/beevik/etree"
	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/golden"
)

// labConfig returns the factory config with edit applied to its tree.
func labConfig(t *testing.T, edit func(root *etree.Element)) *configxml.Config {
	t.Helper()
	c, err := parseConfig(DefaultConfig(), configxml.PfSense)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(c.Root())
	}
	return c
}

// knobConfig returns the factory config with knob assignments made through
// configxml, as fwab makes them.
func knobConfig(t *testing.T, assignments ...string) *configxml.Config {
	t.Helper()
	c, err := parseConfig(DefaultConfig(), configxml.PfSense)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAll(assignments); err != nil {
		t.Fatalf("SetAll(%q): %v", assignments, err)
	}
	// Reload from bytes, as the emulator reads what was written.
	c, err = parseConfig(c.Bytes(), configxml.PfSense)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// addGeneratedRules appends n rules shaped like configxml's rules@IF=N.
func addGeneratedRules(root *etree.Element, iface string, n int) {
	f := root.FindElement("filter")
	for i := range n {
		r := f.CreateElement("rule")
		r.CreateElement("type").SetText("block")
		r.CreateElement("interface").SetText(iface)
		r.CreateElement("ipprotocol").SetText("inet")
		r.CreateElement("protocol").SetText("tcp")
		r.CreateElement("source").CreateElement("address").SetText(fmt.Sprintf("198.18.%d.%d", 128+i/256, i%256))
		d := r.CreateElement("destination")
		d.CreateElement("address").SetText("198.19.200.1")
		d.CreateElement("port").SetText(fmt.Sprint(1024 + i))
		r.CreateElement("tracker").SetText(fmt.Sprint(4100000000 + i))
		r.CreateElement("descr").CreateCData(fmt.Sprintf("fwab-generated %d", i))
	}
}

func setText(root *etree.Element, path, value string) {
	e := root.FindElement(path)
	if e == nil {
		parts := strings.Split(path, "/")
		e = root
		for _, p := range parts {
			c := e.SelectElement(p)
			if c == nil {
				c = e.CreateElement(p)
			}
			e = c
		}
	}
	e.SetText(value)
}

// xPorts are a lab's ports with the prefix x.
var xPorts = Ports{WanDev: "igb0", LanDev: "igb1", WanVeth: "xd1", LanVeth: "xd0"}

func TestBuildRulesetGolden(t *testing.T) {
	ports := localPorts(NICs{}) // the lab's names, as the golden files have them
	tests := []struct {
		name      string
		edit      func(root *etree.Element)
		knobs     []string
		blocklist bool
	}{
		{name: "default"},
		{name: "rules-lan-3", knobs: []string{"rules@lan=3"}},
		{name: "knobs-nat-disabled-blocklist-not-updated", knobs: []string{"nat.outbound=disabled", "offload.checksum=off", "blocklist=on"}},
		{name: "nat-disabled", edit: func(r *etree.Element) { setText(r, "nat/outbound/mode", "disabled") }},
		{name: "nat-advanced-empty", edit: func(r *etree.Element) { setText(r, "nat/outbound/mode", "advanced") }},
		{name: "nat-hybrid-manual", edit: func(r *etree.Element) {
			setText(r, "nat/outbound/mode", "hybrid")
			ob := r.FindElement("nat/outbound")
			m := ob.CreateElement("rule")
			m.CreateElement("interface").SetText("wan")
			m.CreateElement("source").CreateElement("network").SetText("198.18.1.0/24")
			m.CreateElement("destination").CreateElement("address").SetText("198.19.1.10")
			m.CreateElement("target").SetText("198.19.0.1")
			m.CreateElement("staticnatport")
			m.CreateElement("descr").CreateCData("to the server, static port")
			n := ob.CreateElement("rule")
			n.CreateElement("interface").SetText("wan")
			n.CreateElement("source").CreateElement("network").SetText("198.18.1.128/25")
			n.CreateElement("destination").CreateElement("any")
			n.CreateElement("nonat")
			n.CreateElement("descr").CreateCData("no nat for the upper half")
			a := ob.CreateElement("rule")
			a.CreateElement("interface").SetText("wan")
			a.CreateElement("source").CreateElement("network").SetText("LAN_ALIAS")
			a.CreateElement("descr").CreateCData("alias source")
		}},
		{name: "blocklist", blocklist: true},
		{name: "rules-mixed", edit: func(r *etree.Element) {
			f := r.FindElement("filter")
			add := func(typ, iface, proto string, fill func(r *etree.Element)) {
				e := f.CreateElement("rule")
				e.CreateElement("type").SetText(typ)
				e.CreateElement("interface").SetText(iface)
				e.CreateElement("ipprotocol").SetText("inet")
				if proto != "" {
					e.CreateElement("protocol").SetText(proto)
				}
				fill(e)
				e.CreateElement("descr").CreateCData(typ + " on " + iface)
			}
			add("reject", "wan", "tcp/udp", func(e *etree.Element) {
				s := e.CreateElement("source")
				s.CreateElement("network").SetText("lan")
				s.CreateElement("not")
				d := e.CreateElement("destination")
				d.CreateElement("network").SetText("wanip")
				d.CreateElement("port").SetText("8000-8080")
			})
			add("block", "opt1", "", func(e *etree.Element) { e.CreateElement("source").CreateElement("any") })
			add("block", "lan", "", func(e *etree.Element) { e.CreateElement("source").CreateElement("address").SetText("bogons") })
			add("pass", "wan", "icmp", func(e *etree.Element) {
				e.CreateElement("source").CreateElement("any")
				e.CreateElement("destination").CreateElement("any")
			})
			add("block", "lan", "tcp", func(e *etree.Element) {
				e.CreateElement("disabled")
				e.CreateElement("source").CreateElement("any")
			})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := labConfig(t, tt.edit)
			if tt.knobs != nil {
				root = knobConfig(t, tt.knobs...)
			}
			rs, err := BuildRuleset(root, RulesetOptions{Ports: ports, Blocklist: tt.blocklist, BlocklistSize: 4})
			if err != nil {
				t.Fatalf("BuildRuleset: %v", err)
			}
			var b strings.Builder
			b.WriteString(rs.Script)
			b.WriteString("\n# pfctl -sr / -sn lines by rule key\n")
			for _, k := range RuleKeys(rs.Script) {
				fmt.Fprintf(&b, "# %s %s\n", k, rs.PF[k])
			}
			for _, s := range rs.Skipped {
				fmt.Fprintf(&b, "# skipped: %s\n", s)
			}
			golden.File(t, "ruleset-"+tt.name+".nft", []byte(b.String()))
			again, _ := BuildRuleset(root, RulesetOptions{Ports: ports, Blocklist: tt.blocklist, BlocklistSize: 4})
			if again.Script != rs.Script {
				t.Errorf("BuildRuleset(%s) is not deterministic", tt.name)
			}
		})
	}
}

func TestBuildRulesetOrderAndCount(t *testing.T) {
	root := labConfig(t, func(r *etree.Element) { addGeneratedRules(r, "lan", 500) })
	rs, err := BuildRuleset(root, RulesetOptions{Ports: xPorts})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range RuleKeys(rs.Script) {
		if !strings.HasPrefix(k, "fwab:n") {
			keys = append(keys, k)
		}
	}
	// 500 generated + the LAN pass rule + state + default deny.
	if got, want := len(keys), 503; got != want {
		t.Fatalf("rules in script = %d, want %d", got, want)
	}
	if strings.Contains(rs.Script, "set ") {
		t.Errorf("generated rules must be evaluated one by one, not as a set")
	}
}

// filterChain returns the rule lines of the fwab table's filter chain, in
// order, without the chain's header.
func filterChain(t *testing.T, script string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(script, "\tchain filter {\n")
	if !ok {
		t.Fatalf("no filter chain in:\n%s", script)
	}
	body, _, _ := strings.Cut(rest, "\t}\n")
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "type ") {
			out = append(out, l)
		}
	}
	return out
}

// TestBuildRulesetPfSemantics: the data plane follows pf. A packet of an
// established connection matches its state before any rule; only a new
// connection walks the rules, in config order, and the first quick rule
// that matches decides (every rule ends in a verdict, which ends nft's
// walk); the default deny comes last. A block rule after a pass rule that
// matches the same packet is never reached.
func TestBuildRulesetPfSemantics(t *testing.T) {
	root := labConfig(t, func(r *etree.Element) {
		// The factory LAN pass rule comes first; this block rule after it
		// matches traffic the pass rule already passed.
		f := r.FindElement("filter")
		b := f.CreateElement("rule")
		b.CreateElement("type").SetText("block")
		b.CreateElement("interface").SetText("lan")
		b.CreateElement("ipprotocol").SetText("inet")
		b.CreateElement("source").CreateElement("any")
		b.CreateElement("destination").CreateElement("any")
		b.CreateElement("descr").SetText("after the pass rule")
	})
	rs, err := BuildRuleset(root, RulesetOptions{Ports: xPorts})
	if err != nil {
		t.Fatal(err)
	}
	chain := filterChain(t, rs.Script)
	if !strings.HasPrefix(chain[0], "ct state established,related accept") {
		t.Errorf("first rule of the filter chain is %q, want the state accept: an established flow's packets must not walk the rules", chain[0])
	}
	pass := slices.IndexFunc(chain, func(l string) bool { return strings.Contains(l, "198.18.1.0/24 accept") })
	block := slices.IndexFunc(chain, func(l string) bool { return strings.Contains(l, `iifname "xd0" drop`) })
	if pass < 0 || block < 0 || pass > block {
		t.Errorf("LAN pass rule at %d, the block rule after it at %d: want config order (pass first, so the block is not reached)\n%s", pass, block, strings.Join(chain, "\n"))
	}
	for _, l := range chain {
		verdict := strings.Fields(strings.Split(l, " comment ")[0])
		if v := verdict[len(verdict)-1]; v != "accept" && v != "drop" && v != "reject" {
			t.Errorf("rule %q ends in %q, not a verdict: it would not end the walk", l, v)
		}
	}
	if last := chain[len(chain)-1]; !strings.Contains(last, `"fwab:deny"`) {
		t.Errorf("last rule is %q, want the default deny", last)
	}
}

// TestBuildRulesetSkipsNonQuickMVCRules: an OPNsense rule with quick off
// is not first-match in pf (the last matching non-quick rule wins); the lab
// does not emulate that and says so instead of rendering it first-match.
func TestBuildRulesetSkipsNonQuickMVCRules(t *testing.T) {
	root := labConfig(t, func(r *etree.Element) {
		rules := r.CreateElement("OPNsense").CreateElement("Firewall").CreateElement("Filter").CreateElement("rules")
		m := rules.CreateElement("rule")
		for _, kv := range [][2]string{{"enabled", "1"}, {"action", "block"}, {"quick", "0"}, {"interface", "lan"}, {"ipprotocol", "inet"}, {"sequence", "10"}, {"description", "non-quick"}} {
			m.CreateElement(kv[0]).SetText(kv[1])
		}
	})
	rs, err := BuildRuleset(root, RulesetOptions{Ports: xPorts})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rs.Skipped, func(s string) bool { return strings.Contains(s, "non-quick") && strings.Contains(s, "quick") }) {
		t.Errorf("a non-quick MVC rule was not skipped: skipped %q\n%s", rs.Skipped, rs.Script)
	}
}

// TestBuildRulesetMVCBeforeLegacy: OPNsense registers its MVC rules
// before the legacy ones, ordered by sequence and then uuid, so an MVC
// block rule on LAN comes before the legacy LAN pass rule, and of two MVC
// rules with one sequence the lower uuid comes first.
func TestBuildRulesetMVCBeforeLegacy(t *testing.T) {
	root := labConfig(t, func(r *etree.Element) {
		rules := r.CreateElement("OPNsense").CreateElement("Firewall").CreateElement("Filter").CreateElement("rules")
		for _, m := range []struct{ uuid, src, descr string }{{"b0000000-0000-4000-8000-000000000001", "198.18.200.2", "mvc-b"}, {"a0000000-0000-4000-8000-000000000001", "198.18.200.1", "mvc-a"}} {
			e := rules.CreateElement("rule")
			e.CreateAttr("uuid", m.uuid)
			for _, kv := range [][2]string{{"enabled", "1"}, {"action", "block"}, {"quick", "1"}, {"interface", "lan"}, {"ipprotocol", "inet"}, {"sequence", "5"}, {"source_net", m.src}, {"description", m.descr}} {
				e.CreateElement(kv[0]).SetText(kv[1])
			}
		}
	})
	rs, err := BuildRuleset(root, RulesetOptions{Ports: xPorts})
	if err != nil {
		t.Fatal(err)
	}
	at := func(what string) int { return strings.Index(rs.Script, what) }
	a, b, pass := at("198.18.200.1"), at("198.18.200.2"), at("ip saddr 198.18.1.0/24 accept")
	if a < 0 || b < 0 || pass < 0 || !(a < b && b < pass) {
		t.Errorf("positions mvc-a %d, mvc-b %d, legacy pass %d: want mvc-a, mvc-b, then the legacy pass rule\n%s", a, b, pass, rs.Script)
	}
}

func TestBlocklistPrefixes(t *testing.T) {
	p := blocklistPrefixes(DefaultBlocklistSize)
	if len(p) != DefaultBlocklistSize {
		t.Fatalf("len = %d, want %d", len(p), DefaultBlocklistSize)
	}
	seen := map[string]bool{}
	for _, s := range p {
		if !strings.HasPrefix(s, "24") || !strings.HasSuffix(s, ".0/24") {
			t.Fatalf("prefix %s is not a /24 in 240.0.0.0/4", s)
		}
		first := strings.Split(s, ".")[0]
		if first < "240" || first > "255" {
			t.Fatalf("prefix %s is outside 240.0.0.0/4", s)
		}
		if seen[s] {
			t.Fatalf("prefix %s twice", s)
		}
		seen[s] = true
	}
	if got, want := p[1], "240.0.2.0/24"; got != want {
		t.Errorf("p[1] = %s, want %s (every other /24, so none are adjacent)", got, want)
	}
}

func TestOffloadsFor(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(r *etree.Element)
		knobs []string
		want  Offloads
	}{
		{name: "knobs all on", knobs: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on"}, want: Offloads{TXCSUM: true, RXCSUM: true, TSO: true, LRO: true}},
		{name: "knob tso on", knobs: []string{"offload.tso=on"}, want: Offloads{TXCSUM: true, RXCSUM: true, TSO: true}},
		{name: "factory: checksum on, TSO and LRO off", want: Offloads{TXCSUM: true, RXCSUM: true}},
		{name: "all off", edit: func(r *etree.Element) { r.FindElement("system").CreateElement("disablechecksumoffloading") },
			want: Offloads{}},
		{name: "all on", edit: func(r *etree.Element) {
			s := r.FindElement("system")
			s.RemoveChild(s.SelectElement("disablesegmentationoffloading"))
			s.RemoveChild(s.SelectElement("disablelargereceiveoffloading"))
		}, want: Offloads{TXCSUM: true, RXCSUM: true, TSO: true, LRO: true}},
		{name: "flag with a value is still present", edit: func(r *etree.Element) {
			r.FindElement("system").CreateElement("disablechecksumoffloading").SetText("1")
		}, want: Offloads{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := labConfig(t, tt.edit)
			if tt.knobs != nil {
				c = knobConfig(t, tt.knobs...)
			}
			if diff := cmp.Diff(tt.want, OffloadsFor(c, "igb1")); diff != "" {
				t.Errorf("OffloadsFor(igb1) (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetListingParsers(t *testing.T) {
	listing := "table ip fwab_pfb {\n\tset pfB_PRI1_v4 {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = { 240.0.0.0/24, 240.0.2.0/24,\n\t\t\t     240.0.4.0/24 }\n\t}\n\tchain filter {\n\t\tip saddr @pfB_PRI1_v4 drop comment \"fwab:b0\"\n\t}\n}\n"
	if diff := cmp.Diff([]string{"pfB_PRI1_v4"}, SetNames(listing)); diff != "" {
		t.Errorf("SetNames (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"240.0.0.0/24", "240.0.2.0/24", "240.0.4.0/24"}, SetElementsOf(listing, "pfB_PRI1_v4")); diff != "" {
		t.Errorf("SetElementsOf (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"fwab:b0"}, RuleKeys(listing)); diff != "" {
		t.Errorf("RuleKeys (-want +got):\n%s", diff)
	}
}

func TestParseProfiles(t *testing.T) {
	tests := []struct {
		name, in, wantErr string
	}{
		{"ok", "profiles:\n  - version: 2.7.2-RELEASE\n  - version: 2.8.0-RELEASE\n    slowdown: {rate_mbit: 500}\n", ""},
		{"empty", "", "the file is empty"},
		{"no profiles", "profiles: []\n", "no profiles"},
		{"unknown field", "profiles:\n  - version: x\n    speed: 3\n", "field speed not found"},
		{"duplicate", "profiles:\n  - version: a\n  - version: a\n", "listed twice"},
		{"shell chars", "profiles:\n  - version: 'a;rm'\n", "shell characters"},
		{"both", "profiles:\n  - version: a\n    slowdown: {rate_mbit: 5, percent: 10}\n", "give one"},
		{"neither", "profiles:\n  - version: a\n    slowdown: {baseline_mbit: 5}\n", "needs rate_mbit or percent"},
		{"percent 100", "profiles:\n  - version: a\n    slowdown: {percent: 100}\n", "below 100"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseProfiles(strings.NewReader(tt.in))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("ParseProfiles = %v, want no error", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ParseProfiles = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
	p := DefaultProfiles()
	if len(p) != 3 || p[2].Slowdown == nil || p[2].Slowdown.Percent != 10 {
		t.Errorf("DefaultProfiles = %+v, want three with a 10%% slowdown last", p)
	}
}

func TestParseProfilesSlowdown(t *testing.T) {
	in := "profiles:\n  - version: a\n  - version: b\n    slowdown: {percent: 3}\n  - version: c\n    slowdown: {percent: 10, baseline_mbit: 2000}\n  - version: d\n    slowdown: {rate_mbit: 500}\n"
	got, err := ParseProfiles(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Profile{
		{Version: "a", FreeBSD: "14.0-CURRENT"},
		{Version: "b", FreeBSD: "14.0-CURRENT", Slowdown: &Slowdown{Percent: 3}},
		{Version: "c", FreeBSD: "14.0-CURRENT", Slowdown: &Slowdown{Percent: 10, BaselineMbit: 2000}},
		{Version: "d", FreeBSD: "14.0-CURRENT", Slowdown: &Slowdown{RateMbit: 500}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseProfiles (-want +got):\n%s", diff)
	}
	var tracking []bool
	for _, p := range got[1:] {
		tracking = append(tracking, p.Slowdown.Tracking())
	}
	if diff := cmp.Diff([]bool{true, false, false}, tracking); diff != "" {
		t.Errorf("Tracking (-want +got):\n%s", diff)
	}
}

func TestSlowdownCaps(t *testing.T) {
	const f1500 = 1514.0 / 1448.0
	tests := []struct {
		name           string
		s              Slowdown
		up, down       float64
		mtu            int
		wantWan, wantL float64
	}{
		{"tracking 10 %", Slowdown{Percent: 10}, 1000, 2000, 1500, 900 * f1500, 1800 * f1500},
		{"tracking 3 %", Slowdown{Percent: 3}, 5000, 7000, 1500, 4850 * f1500, 6790 * f1500},
		{"tracking, one direction unmeasured", Slowdown{Percent: 10}, 0, 2000, 1500, 0, 1800 * f1500},
		{"tracking, jumbo frames", Slowdown{Percent: 10}, 1000, 1000, 9000, 900 * 9014.0 / 8948.0, 900 * 9014.0 / 8948.0},
		{"tracking, unknown MTU", Slowdown{Percent: 10}, 1000, 1000, 0, 900 * f1500, 900 * f1500},
		{"fixed baseline ignores measurements", Slowdown{Percent: 10, BaselineMbit: 3000}, 1000, 2000, 1500, 2700 * f1500, 2700 * f1500},
		{"fixed wire rate", Slowdown{RateMbit: 500}, 1000, 2000, 1500, 500, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wan, lan := tt.s.Caps(tt.up, tt.down, tt.mtu)
			if !near(wan, tt.wantWan) || !near(lan, tt.wantL) {
				t.Errorf("Caps(%v, %v, %d) = %.3f, %.3f; want %.3f, %.3f", tt.up, tt.down, tt.mtu, wan, lan, tt.wantWan, tt.wantL)
			}
		})
	}
}

func TestTableSections(t *testing.T) {
	listing := "table inet other {\n\tchain c {\n\t}\n}\ntable ip fwab {\n\tchain filter {\n\t\tdrop comment \"fwab:f0\"\n\t}\n}\ntable ip fwab_pfb {\n\tset pfB_PRI1_v4 {\n\t}\n}\n"
	got := TableSections(listing, BlocklistTable, FilterTable)
	want := "table ip fwab_pfb {\n\tset pfB_PRI1_v4 {\n\t}\n}\ntable ip fwab {\n\tchain filter {\n\t\tdrop comment \"fwab:f0\"\n\t}\n}\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("TableSections (-want +got):\n%s", diff)
	}
}

// TestBuildRulesetFilterDisabled: router mode (<system><disablefilter>)
// loads no pf at all: no filter hook, no NAT, no blocklist tables, so the
// data plane forwards everything untranslated.
func TestBuildRulesetFilterDisabled(t *testing.T) {
	c := knobConfig(t, "filter=disabled", "nat.outbound=automatic", "rules@lan=5")
	rs, err := BuildRuleset(c, RulesetOptions{Ports: xPorts, Blocklist: true})
	if err != nil {
		t.Fatal(err)
	}
	if keys := RuleKeys(rs.Script); len(keys) != 0 {
		t.Errorf("router mode loads rules %v; want none", keys)
	}
	if strings.Contains(rs.Script, "hook") {
		t.Errorf("router mode hooks a chain:\n%s", rs.Script)
	}
	if pfEnabled(rs.Script) {
		t.Error("pfEnabled of router mode's script = true")
	}
	on, err := BuildRuleset(knobConfig(t), RulesetOptions{Ports: xPorts})
	if err != nil {
		t.Fatal(err)
	}
	if !pfEnabled(on.Script) {
		t.Error("pfEnabled of the factory config's script = false")
	}
}

// TestBuildRulesetSkipSteps: pf skips a run of rules that share an
// interface or a protocol in one step when a packet's interface or protocol
// differs, so fwab's generated TCP rules on the LAN cost a new TCP flow from
// the LAN one evaluation each, and a new UDP or ICMP flow from the LAN, or
// any flow from the WAN, next to nothing. The lab's ruleset must charge the
// same: the walk below follows the nft chains as nft does.
func TestBuildRulesetSkipSteps(t *testing.T) {
	c := knobConfig(t, "rules@lan=500")
	ports := xPorts
	rs, err := BuildRuleset(c, RulesetOptions{Ports: ports})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		iif, proto string
		min, max   int
	}{
		{ports.LanVeth, "tcp", 500, 520},
		{ports.LanVeth, "udp", 1, 10},
		{ports.LanVeth, "icmp", 1, 10},
		{ports.WanVeth, "tcp", 1, 10},
	} {
		got := rulesWalked(t, rs.Script, tt.iif, tt.proto)
		if got < tt.min || got > tt.max {
			t.Errorf("a new %s flow in on %s evaluates %d rules, want %d to %d", tt.proto, tt.iif, got, tt.min, tt.max)
		}
	}
	// The walk reads the rules in pf's order: pfctl -sr lists them so.
	keys := slices.DeleteFunc(RuleKeys(rs.Script), func(k string) bool { return strings.HasPrefix(k, "fwab:n") })
	if keys[0] != "fwab:state" || keys[len(keys)-1] != "fwab:deny" || len(keys) != 503 {
		t.Errorf("rule keys: %d, first %s, last %s; want 503 from fwab:state to fwab:deny", len(keys), keys[0], keys[len(keys)-1])
	}
	for i := 1; i < len(keys)-1; i++ {
		if want := fmt.Sprintf("fwab:f%d", i-1); keys[i] != want {
			t.Fatalf("rule key %d is %s, want %s: not in config order", i, keys[i], want)
		}
	}
}

// rulesWalked counts the rule lines the first packet of a new flow (in on
// iif, of protocol proto, from an address no generated rule names)
// evaluates in the fwab table before its verdict, following jumps whose
// guards (iifname, ip protocol) match. The flow is passed by the first
// accept rule on its interface that names no address, or dropped by the
// default deny.
func rulesWalked(t *testing.T, script, iif, proto string) int {
	t.Helper()
	body := TableSections(script, FilterTable)
	chains := map[string][]string{}
	var cur string
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(l, "chain "):
			cur = strings.Fields(l)[1]
		case l == "}" || l == "" || strings.HasPrefix(l, "type "):
		case cur != "":
			chains[cur] = append(chains[cur], l)
		}
	}
	guards := func(l string) bool {
		if m := regexp.MustCompile(`iifname "([^"]+)"`).FindStringSubmatch(l); m != nil && m[1] != iif {
			return false
		}
		if m := regexp.MustCompile(`ip protocol (\{[^}]*\}|\w+)`).FindStringSubmatch(l); m != nil && !strings.Contains(m[1], proto) {
			return false
		}
		return true
	}
	n := 0
	var walk func(chain string, depth int) bool
	walk = func(chain string, depth int) bool {
		if depth > 8 {
			t.Fatalf("jumps nest deeper than 8 at %s", chain)
		}
		for _, l := range chains[chain] {
			n++
			if strings.HasPrefix(l, "ct state") {
				continue
			}
			// A guarded jump is pf's skip step: the first rule of the run is
			// evaluated, and a mismatch skips the rest.
			if f := strings.Fields(l); len(f) >= 2 && f[len(f)-2] == "jump" {
				if guards(l) && walk(f[len(f)-1], depth+1) {
					return true
				}
				continue
			}
			if strings.Contains(l, `"fwab:deny"`) {
				return true
			}
			if guards(l) && strings.Contains(l, " accept ") && !strings.Contains(l, "saddr") {
				return true
			}
		}
		return false
	}
	if _, ok := chains["filter"]; !ok {
		t.Fatalf("no filter chain in:\n%s", body)
	}
	walk("filter", 0)
	return n
}

func TestIfcapOptions(t *testing.T) {
	_, names := ifcapOptions(Offloads{RXCSUM: true, LRO: true})
	if got := strings.Join(names, ","); got != "RXCSUM,VLAN_MTU,VLAN_HWTAGGING,JUMBO_MTU,LRO,WOL_MAGIC,VLAN_HWFILTER,RXCSUM_IPV6" {
		t.Errorf("ifcapOptions = %s", got)
	}
}

// TestBuildRulesetSkipsOwnFlagsAndState: the lab gives every TCP pass
// rule pf's default flags S/SA keep state (a segment without state that
// opens nothing is dropped before the rules); a rule with flags any, flags
// of its own or no state would pass what that drops, so it is skipped and
// named, legacy and MVC alike.
func TestBuildRulesetSkipsOwnFlagsAndState(t *testing.T) {
	root := labConfig(t, func(r *etree.Element) {
		filter := r.SelectElement("filter")
		for _, own := range [][2]string{{"tcpflags_any", ""}, {"tcpflags2", "syn,ack"}, {"statetype", "none"}} {
			rule := filter.CreateElement("rule")
			for _, kv := range [][2]string{{"type", "pass"}, {"interface", "lan"}, {"protocol", "tcp"}, own} {
				rule.CreateElement(kv[0]).SetText(kv[1])
			}
			rule.CreateElement("source").CreateElement("any")
			rule.CreateElement("destination").CreateElement("any")
		}
		rules := r.CreateElement("OPNsense").CreateElement("Firewall").CreateElement("Filter").CreateElement("rules")
		m := rules.CreateElement("rule")
		for _, kv := range [][2]string{{"enabled", "1"}, {"action", "pass"}, {"interface", "lan"}, {"ipprotocol", "inet"}, {"protocol", "TCP"}, {"tcpflags_any", "1"}, {"sequence", "10"}} {
			m.CreateElement(kv[0]).SetText(kv[1])
		}
	})
	rs, err := BuildRuleset(root, RulesetOptions{Ports: xPorts})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range rs.Skipped {
		if strings.Contains(s, "TCP flags or state of their own") {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d rules skipped for flags or state of their own, want 4: skipped %q", n, rs.Skipped)
	}
	if chain := filterChain(t, rs.Script); chain[1] != "tcp flags & (syn | ack) != syn drop" {
		t.Errorf("second rule of the filter chain is %q, want the flags S/SA drop right after the state accept", chain[1])
	}
}
