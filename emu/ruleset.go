package emu

import (
	"bytes"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
)

// The nftables tables the lab owns in the DUT namespace. The blocklist has its
// own table so that listing the filter rules never has to list 100k prefixes.
const (
	FilterTable    = "fwab"
	BlocklistTable = "fwab_pfb"
	// BlocklistSet is the pf table name pfBlockerNG would use.
	BlocklistSet = "pfB_PRI1_v4"
	// DefaultBlocklistSize is how many prefixes the blocklist holds, like a
	// large pfBlockerNG IP feed.
	DefaultBlocklistSize = 100000
)

// Offloads are the NIC offload flags as pfSense names them. true = enabled.
type Offloads struct {
	TXCSUM bool // TXCSUM, TXCSUM_IPV6: veth tx-checksumming
	RXCSUM bool // RXCSUM, RXCSUM_IPV6: veth rx-checksumming
	TSO    bool // TSO4, TSO6: veth tcp-segmentation-offload
	LRO    bool // LRO: veth generic-receive-offload (veth LRO is fixed off)
}

// Ports maps the config's FreeBSD device names onto the DUT's veths.
type Ports struct {
	WanDev, LanDev   string // FreeBSD names in config.xml, igb0 and igb1
	WanVeth, LanVeth string
	// Extra are the second link's ports, opt1 and opt2 (Topology.Pairs 2).
	Extra []Port
}

// Port is one more DUT port: its FreeBSD name, veth and description.
type Port struct{ Dev, Veth, Descr string }

// Veth returns the veth behind a FreeBSD device name.
func (p Ports) Veth(dev string) (string, bool) {
	switch dev {
	case p.WanDev:
		return p.WanVeth, true
	case p.LanDev:
		return p.LanVeth, true
	}
	for _, x := range p.Extra {
		if x.Dev == dev {
			return x.Veth, true
		}
	}
	return "", false
}

// Ruleset is the data plane generated from one config.xml.
type Ruleset struct {
	// Script is one nft -f transaction: it replaces the lab's tables at once.
	Script string
	// PF maps each nft rule's comment key (fwab:f3, fwab:n0, fwab:b0) to the
	// line pfctl would print for it, so that pfctl reports the rules really
	// loaded in the kernel.
	PF map[string]string
	// Skipped explains config rules the lab cannot express, one per line.
	Skipped []string
}

// RulesetOptions control what the config alone does not decide.
type RulesetOptions struct {
	Ports Ports
	// Blocklist is true when pfBlockerNG's tables are loaded (its update ran
	// while enabled).
	Blocklist     bool
	BlocklistSize int // prefixes; 0 means DefaultBlocklistSize
}

// parseConfig parses config.xml of the emulated flavor. It is the one place
// the lab reads the XML format: knobs are read through configxml, the rest
// from its element tree.
func parseConfig(data []byte, want configxml.Flavor) (*configxml.Config, error) {
	c, err := configxml.LoadBytes(data)
	if err != nil {
		return nil, fmt.Errorf("parse config.xml: %w", err)
	}
	if c.Flavor() != want {
		return nil, fmt.Errorf("parse config.xml: a %s config; the lab emulates %s", c.Flavor(), want)
	}
	return c, nil
}

// knob reads a knob the lab's own config always has.
func knob(c *configxml.Config, name string) string {
	v, err := c.Get(name)
	if err != nil {
		return ""
	}
	return v
}

func text(e *etree.Element, path string) string {
	if e == nil {
		return ""
	}
	if c := e.FindElement(path); c != nil {
		return strings.TrimSpace(c.Text())
	}
	return ""
}

func present(e *etree.Element, path string) bool {
	return e != nil && e.FindElement(path) != nil
}

// OffloadsFor reads the offload.* knobs as they apply to the device dev:
// pfSense's <system><disable*offloading> flags (present = disabled), or an
// OPNsense interface's own flags where it overrides the global ones
// (configxml.Config.OffloadFor).
func OffloadsFor(c *configxml.Config, dev string) Offloads {
	on := func(k string) bool {
		v, err := c.OffloadFor(k, dev)
		return err == nil && v == "on"
	}
	csum := on("offload.checksum")
	return Offloads{TXCSUM: csum, RXCSUM: csum, TSO: on("offload.tso"), LRO: on("offload.lro")}
}

// BlocklistEnabled reads pfBlockerNG's master switch (the blocklist knob).
func BlocklistEnabled(c *configxml.Config) bool {
	return knob(c, "blocklist") == "on"
}

// iface is one configured interface with a static IPv4 address.
type iface struct {
	key, dev, veth string
	addr           netip.Prefix
}

func interfaces(c *configxml.Config, ports Ports) map[string]iface {
	out := map[string]iface{}
	for _, i := range c.Interfaces() {
		veth, ok := ports.Veth(i.Device)
		if !ok {
			continue
		}
		in := iface{key: i.Key, dev: i.Device, veth: veth}
		if a, err := netip.ParseAddr(i.IPAddr); err == nil {
			if bits, err := strconv.Atoi(i.Subnet); err == nil {
				in.addr = netip.PrefixFrom(a, bits)
			}
		}
		out[i.Key] = in
	}
	return out
}

// DownRuleset is the data plane of a firewall that is down or booting:
// the filter table drops everything it would forward.
var DownRuleset = fmt.Sprintf("table ip %s {}\ndelete table ip %s\ntable ip %s {\n\tchain forward {\n\t\ttype filter hook forward priority 0; policy drop;\n\t}\n}\n", FilterTable, FilterTable, FilterTable)

// BuildRuleset turns a pfSense config.xml into the lab's nftables ruleset.
// It is a pure function: same config, same text.
//
// It follows pf's semantics, which pfSense and OPNsense rely on: pf looks a
// packet up in its state table first, so only the first packet of a
// connection walks the rule list; that walk goes in config order and stops
// at the first matching quick rule (every interface rule is quick), and the
// non-quick default deny decides when none matches. In nft: the conntrack
// accept comes first, then the rules in config order, each ending in a
// verdict (which ends the walk), then the default deny. So the number of
// rules costs per new connection, not per packet of a long stream.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3387 — every non-floating
// rule gets `quick` (first match wins; 2.6.0: 3124; master: 4447).
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3559 — pass rules default
// to `keep state` (later packets match the state, not the rules).
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3782 — the default deny is
// non-quick: `block in {$log['block']} inet all`, overridden by any quick
// rule. pf's state lookup itself is FreeBSD's (not in the upstream copy).
func BuildRuleset(c *configxml.Config, opts RulesetOptions) (Ruleset, error) {
	if opts.BlocklistSize == 0 {
		opts.BlocklistSize = DefaultBlocklistSize
	}
	root := c.Root()
	ifs := interfaces(c, opts.Ports)
	rs := Ruleset{PF: map[string]string{}}
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\n", FilterTable, FilterTable)
	if knob(c, "filter") == configxml.FilterDisabled {
		// Router mode: pfctl -d and no ruleset at all, so no filter, NAT
		// or table is hooked in; the namespace just forwards.
		// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:377 — `mwexec("/sbin/pfctl -d", true);`, then return before any rule is loaded
		// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:306 — `mwexecfm('/sbin/pfctl -d');`, then return
		fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\n", BlocklistTable, BlocklistTable)
		rs.Script = b.String()
		return rs, nil
	}
	fmt.Fprintf(&b, "table ip %s {\n\tchain filter {\n\t\ttype filter hook forward priority filter; policy drop;\n", FilterTable)

	rs.PF["fwab:state"] = "pass out inet all flags S/SA keep state allow-opts ridentifier 1000000111 label \"let out anything IPv4 from firewall host itself\""
	b.WriteString("\t\tct state established,related accept comment \"fwab:state\"\n")
	// A TCP segment pf has no state for passes no rule unless it opens a
	// connection: pass rules match flags S/SA. So a connection whose state
	// was lost (a reboot) dies at the default deny, where conntrack would
	// pick it up mid-stream as new; a stray RST, FIN or SYN+ACK (conntrack's
	// invalid) is dropped too. Rules with flags or state of their own are
	// not emulated (filterRule), so every rule here has the default.
	// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3522 — `$aline['flags'] = "flags S/SA ";` for TCP pass rules without flags of their own
	// not settled — OPNsense's rules leave the flags to pf's default for pass rules, also flags S/SA (FreeBSD's pf.conf(5), not in the upstream copy)
	b.WriteString("\t\ttcp flags & (syn | ack) != syn drop\n")
	n := 0
	// OPNsense's MVC rules (26.x "Rules [new]", the only kind from 26.7)
	// come before the legacy ones, in sequence order: pf.inc registers them
	// from plugins_firewall, before filter_core_rules_user registers the
	// legacy rules at the same priority.
	// upstream: opnsense/core@821598263289e177b40971600f06f5a91d9faef3 src/etc/inc/plugins.inc.d/pf.inc:170 — `$mdlFilter->rules->rule->sortedBy(['sequence'])`, registered first
	// upstream: opnsense/core@821598263289e177b40971600f06f5a91d9faef3 src/etc/inc/filter.inc:192 — `filter_core_rules_user($fw);` after `plugins_firewall($fw)`
	rules := mvcRulesAsLegacy(root.FindElement("OPNsense/Firewall/Filter/rules"))
	if f := root.FindElement("filter"); f != nil {
		rules = append(rules, f.SelectElements("rule")...)
	}
	var lines []ruleLine
	for i, r := range rules {
		l, pf, why := filterRule(r, ifs)
		if why != "" {
			rs.Skipped = append(rs.Skipped, fmt.Sprintf("filter rule %d (%s): %s", i+1, text(r, "descr"), why))
			continue
		}
		key := fmt.Sprintf("fwab:f%d", n)
		n++
		rs.PF[key] = pf
		l.text = fmt.Sprintf("%s comment %q", l.text, key)
		lines = append(lines, l)
	}
	var runs []nftChain
	for _, l := range skipSteps(lines, 0, &runs) {
		b.WriteString("\t\t" + l + "\n")
	}
	rs.PF["fwab:deny"] = "block drop in log inet all ridentifier 1000000103 label \"Default deny rule IPv4\""
	b.WriteString("\t\tcounter drop comment \"fwab:deny\"\n\t}\n")
	for _, c := range runs {
		fmt.Fprintf(&b, "\tchain %s {\n", c.name)
		for _, l := range c.body {
			b.WriteString("\t\t" + l + "\n")
		}
		b.WriteString("\t}\n")
	}

	nat, skipped := natRules(c, ifs)
	rs.Skipped = append(rs.Skipped, skipped...)
	if len(nat) > 0 {
		b.WriteString("\tchain nat {\n\t\ttype nat hook postrouting priority srcnat; policy accept;\n")
		for i, r := range nat {
			key := fmt.Sprintf("fwab:n%d", i)
			rs.PF[key] = r.pf
			fmt.Fprintf(&b, "\t\t%s comment %q\n", r.nft, key)
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")

	fmt.Fprintf(&b, "table ip %s {}\ndelete table ip %s\n", BlocklistTable, BlocklistTable)
	if opts.Blocklist {
		wan, ok := ifs["wan"]
		if !ok {
			return Ruleset{}, fmt.Errorf("blocklist: the config has no wan interface on %s", opts.Ports.WanDev)
		}
		fmt.Fprintf(&b, "table ip %s {\n\tset %s {\n\t\ttype ipv4_addr\n\t\tflags interval\n\t\telements = {\n", BlocklistTable, BlocklistSet)
		for i, p := range blocklistPrefixes(opts.BlocklistSize) {
			if i > 0 {
				b.WriteString(",\n")
			}
			b.WriteString("\t\t\t" + p)
		}
		b.WriteString("\n\t\t}\n\t}\n")
		// pfBlockerNG's auto rules sit at the top of the rule list, and pf
		// looks a table up when a packet creates a state; packets of an
		// established state match the state. So the lookup happens for new
		// connections only, as for the filter rules.
		fmt.Fprintf(&b, "\tchain filter {\n\t\ttype filter hook forward priority filter - 10; policy accept;\n")
		fmt.Fprintf(&b, "\t\tct state new ip saddr @%s drop comment \"fwab:b0\"\n", BlocklistSet)
		fmt.Fprintf(&b, "\t\tct state new ip daddr @%s drop comment \"fwab:b1\"\n\t}\n}\n", BlocklistSet)
		rs.PF["fwab:b0"] = fmt.Sprintf("block drop in log quick on %s inet from <%s> to any ridentifier 1770000000 label \"USER_RULE: pfB_PRI1_v4 auto rule\"", wan.dev, BlocklistSet)
		rs.PF["fwab:b1"] = fmt.Sprintf("block drop out log quick on %s inet from any to <%s> ridentifier 1770000001 label \"USER_RULE: pfB_PRI1_v4 auto rule\"", wan.dev, BlocklistSet)
	}
	rs.Script = b.String()
	return rs, nil
}

// pfEnabled reads pf's status from an nft listing (or script): pf is
// enabled when the filter's state rule, which every loaded ruleset has, is
// hooked in.
func pfEnabled(listing string) bool {
	return slices.Contains(RuleKeys(listing), "fwab:state")
}

// blocklistPrefixes returns n disjoint /24s from 240.0.0.0/4, a reserved
// range that never carries traffic. Every other /24 is used so that no two
// are adjacent and the interval set keeps all n entries.
func blocklistPrefixes(n int) []string {
	out := make([]string, n)
	for i := range n {
		v := uint32(i) * 2
		out[i] = fmt.Sprintf("%d.%d.%d.0/24", 240+(v>>16), (v>>8)&0xff, v&0xff)
	}
	return out
}

// endpoint is a rule's source or destination as nft and pf text.
type endpoint struct {
	nft, pf string // nft match (empty for any); pf text ("any", "198.18.1.0/24")
	port    string // nft port match; pf port text
	pfPort  string
}

func parseEndpoint(e *etree.Element, dir string, ifs map[string]iface) (endpoint, string) {
	if e == nil {
		return endpoint{pf: "any"}, ""
	}
	var ep endpoint
	not := present(e, "not")
	op, pfNot := "", ""
	if not {
		op, pfNot = "!= ", "! "
	}
	switch {
	case present(e, "any"):
		ep.pf = "any"
		if not {
			return ep, "negated any"
		}
	case present(e, "network"):
		net := text(e, "network")
		key, ip := strings.TrimSuffix(net, "ip"), strings.HasSuffix(net, "ip")
		in, ok := ifs[key]
		if !ok || !in.addr.IsValid() {
			return ep, fmt.Sprintf("network %q is not a lab interface with a static address", net)
		}
		v := in.addr.Masked().String()
		if ip {
			v = in.addr.Addr().String()
		}
		ep.nft = fmt.Sprintf("ip %s %s%s", dir, op, v)
		ep.pf = pfNot + v
	case present(e, "address"):
		a := text(e, "address")
		if p, err := netip.ParsePrefix(a); err == nil && p.Addr().Is4() {
			a = p.Masked().String()
		} else if ad, err := netip.ParseAddr(a); err != nil || !ad.Is4() {
			return ep, fmt.Sprintf("address %q is not an IPv4 address or network (aliases are not emulated)", a)
		}
		ep.nft = fmt.Sprintf("ip %s %s%s", dir, op, a)
		ep.pf = pfNot + a
	default:
		ep.pf = "any"
	}
	if p := text(e, "port"); p != "" && p != "any" {
		lo, hi, found := strings.Cut(p, "-")
		if _, err := strconv.ParseUint(lo, 10, 16); err != nil {
			return ep, fmt.Sprintf("port %q is not a number or range (aliases are not emulated)", p)
		}
		if found {
			if _, err := strconv.ParseUint(hi, 10, 16); err != nil {
				return ep, fmt.Sprintf("port %q is not a number or range", p)
			}
			ep.port, ep.pfPort = lo+"-"+hi, lo+":"+hi
		} else {
			ep.port, ep.pfPort = lo, "= "+lo
		}
	}
	return ep, ""
}

// mvcRulesAsLegacy turns OPNsense MVC filter rules
// (<OPNsense><Firewall><Filter><rules><rule>, firewall.md B-c) into the
// equivalent <filter><rule> elements, sorted by sequence, so that one
// translation serves both.
func mvcRulesAsLegacy(parent *etree.Element) []*etree.Element {
	if parent == nil {
		return nil
	}
	type seqRule struct {
		seq  int
		uuid string
		r    *etree.Element
	}
	var list []seqRule
	for _, m := range parent.SelectElements("rule") {
		r := etree.NewElement("rule")
		leaf := func(tag, v string) {
			if v != "" {
				r.CreateElement(tag).SetText(v)
			}
		}
		if text(m, "enabled") == "0" {
			r.CreateElement("disabled")
		}
		// upstream: opnsense-core 26.7 src/opnsense/mvc/app/models/OPNsense/Firewall/Filter.xml:61 — `quick`
		// is a BooleanField, default 1; a non-quick rule is not first-match.
		if text(m, "quick") == "0" {
			r.CreateElement("fwab-nonquick")
		}
		// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/mvc/app/library/OPNsense/Firewall/FilterRule.php:206 — `if (!empty($rule['tcpflags_any'])) {`
		if text(m, "tcpflags_any") == "1" {
			r.CreateElement("tcpflags_any")
		}
		leaf("tcpflags2", text(m, "tcpflags2"))
		leaf("statetype", text(m, "statetype"))
		leaf("type", text(m, "action"))
		leaf("interface", text(m, "interface"))
		leaf("ipprotocol", text(m, "ipprotocol"))
		switch p := strings.ToLower(text(m, "protocol")); p {
		case "", "any":
		default:
			leaf("protocol", p)
		}
		for _, side := range []string{"source", "destination"} {
			e := r.CreateElement(side)
			switch net := text(m, side+"_net"); {
			case net == "" || net == "any":
				e.CreateElement("any")
			case strings.ContainsAny(net, "./:"):
				e.CreateElement("address").SetText(net)
			default:
				e.CreateElement("network").SetText(net)
			}
			if text(m, side+"_not") == "1" {
				e.CreateElement("not")
			}
			if p := text(m, side+"_port"); p != "" {
				e.CreateElement("port").SetText(p)
			}
		}
		leaf("descr", text(m, "description"))
		seq, _ := strconv.Atoi(text(m, "sequence"))
		list = append(list, seqRule{seq, strings.ToLower(m.SelectAttrValue("uuid", "")), r})
	}
	// Ties in sequence are ordered by uuid (upstream's sort key ends in the
	// node's uuid; a plain comparison stands in for PHP's natural order).
	// upstream: opnsense/core@821598263289e177b40971600f06f5a91d9faef3 src/opnsense/mvc/app/models/OPNsense/Base/FieldTypes/ArrayField.php:216 — `$sortKey .= $nodeKey;`
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].seq != list[j].seq {
			return list[i].seq < list[j].seq
		}
		return list[i].uuid < list[j].uuid
	})
	out := make([]*etree.Element, len(list))
	for i, l := range list {
		out[i] = l.r
	}
	return out
}

// ruleLine is one filter rule in nft: its text and the matches pf's skip
// steps group rules by, in pf's order of evaluation (interface, then
// protocol; "" matches every packet).
type ruleLine struct {
	text   string
	guards [2]string
}

// nftChain is a regular chain: a run of rules pf skips in one step.
type nftChain struct {
	name string
	body []string
}

// minSkipRun is the shortest run of rules given a chain of its own: a
// shorter run costs a packet that misses it little more than the jump.
const minSkipRun = 8

// skipSteps renders rules as pf evaluates them. pf computes, for each rule
// and field, the next rule that differs in that field, and a packet that
// misses a rule on its interface or protocol jumps there in one step; so a
// run of rules sharing an interface (and, inside it, a protocol) costs a
// packet on another interface (or of another protocol) one evaluation, not
// one per rule. nft has no skip steps: each run of at least minSkipRun rules
// goes into a chain of its own, entered by a jump guarded by the shared
// match, and a packet that misses the guard passes the whole run. Rule
// order, and so the first match, is unchanged: a verdict in a chain ends the
// walk, and a run that decides nothing returns to the rule after the jump.
// Address and port skip steps are not rendered (fwab's generated rules
// differ in source address, so pf walks them one by one for their protocol).
//
// upstream: pfsense/FreeBSD-src@8373a6df583c799e4e2448cc5ae28fc0955e8864 sys/netpfil/pf/pf.c:4668 — pf_test_rule: an interface mismatch moves to `r->skip[PF_SKIP_IFP].ptr`
// upstream: pfsense/FreeBSD-src@8373a6df583c799e4e2448cc5ae28fc0955e8864 sys/netpfil/pf/pf.c:4674 — a protocol mismatch moves to `r->skip[PF_SKIP_PROTO].ptr`
// upstream: pfsense/FreeBSD-src@8373a6df583c799e4e2448cc5ae28fc0955e8864 sys/netpfil/pf/pf.c:4677 — a source-address mismatch to `r->skip[PF_SKIP_SRC_ADDR].ptr`, which for rules that each name another source is the next rule
// upstream: pfsense/FreeBSD-src@8373a6df583c799e4e2448cc5ae28fc0955e8864 sys/netpfil/pf/pf.c:2504 — `pf_calc_skip_steps(struct pf_krulequeue *rules)` links each rule to the next that differs, field by field
func skipSteps(lines []ruleLine, level int, chains *[]nftChain) []string {
	if level == len(ruleLine{}.guards) {
		out := make([]string, len(lines))
		for i, l := range lines {
			out[i] = l.text
		}
		return out
	}
	var out []string
	for i := 0; i < len(lines); {
		j := i + 1
		for j < len(lines) && lines[j].guards[level] == lines[i].guards[level] {
			j++
		}
		g := lines[i].guards[level]
		if g == "" || j-i < minSkipRun {
			out = append(out, skipSteps(lines[i:j], level+1, chains)...)
		} else {
			k := len(*chains)
			*chains = append(*chains, nftChain{name: fmt.Sprintf("run%d", k)})
			body := skipSteps(lines[i:j], level+1, chains)
			(*chains)[k].body = body
			out = append(out, g+" jump "+(*chains)[k].name)
		}
		i = j
	}
	return out
}

// filterRule translates one <filter><rule>. why explains a skipped rule.
func filterRule(r *etree.Element, ifs map[string]iface) (l ruleLine, pf, why string) {
	if present(r, "disabled") {
		return ruleLine{}, "", "disabled"
	}
	switch text(r, "ipprotocol") {
	case "inet6":
		return ruleLine{}, "", "IPv6 only (the lab is IPv4)"
	case "", "inet", "inet46":
	default:
		return ruleLine{}, "", fmt.Sprintf("ipprotocol %q", text(r, "ipprotocol"))
	}
	if present(r, "floating") {
		return ruleLine{}, "", "floating rules are not emulated"
	}
	if present(r, "fwab-nonquick") {
		return ruleLine{}, "", "non-quick rules (quick off: the last match wins) are not emulated"
	}
	// The lab's ruleset gives every TCP pass rule pf's flags S/SA keep
	// state (BuildRuleset); a rule that says otherwise would pass what
	// the lab drops.
	// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3493 — `if (isset($rule['tcpflags_any'])) {` (flags any), else tcpflags2 gives flags of the rule's own
	// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3540 — `case "none":` … `" no state "`
	if present(r, "tcpflags_any") || text(r, "tcpflags2") != "" || text(r, "statetype") == "none" {
		return ruleLine{}, "", "rules with TCP flags or state of their own (flags any, no state) are not emulated"
	}
	in, ok := ifs[text(r, "interface")]
	if !ok {
		return ruleLine{}, "", fmt.Sprintf("interface %q is not in the lab", text(r, "interface"))
	}
	typ := text(r, "type")
	var verdict, pfAction string
	switch typ {
	case "pass":
		verdict, pfAction = "accept", "pass in quick"
	case "block":
		verdict, pfAction = "drop", "block drop in quick"
	case "reject":
		verdict, pfAction = "reject", "block return in quick"
	default:
		return ruleLine{}, "", fmt.Sprintf("type %q", typ)
	}
	proto := text(r, "protocol")
	var protoNft, protoPf string
	portProto := "th"
	switch proto {
	case "":
	case "tcp", "udp":
		protoNft, protoPf, portProto = "ip protocol "+proto, "proto "+proto, proto
	case "tcp/udp":
		protoNft, protoPf = "ip protocol { tcp, udp }", "proto { tcp udp }"
	case "icmp":
		protoNft, protoPf = "ip protocol icmp", "proto icmp"
	default:
		return ruleLine{}, "", fmt.Sprintf("protocol %q is not emulated", proto)
	}
	src, why := parseEndpoint(r.FindElement("source"), "saddr", ifs)
	if why != "" {
		return ruleLine{}, "", "source " + why
	}
	dst, why := parseEndpoint(r.FindElement("destination"), "daddr", ifs)
	if why != "" {
		return ruleLine{}, "", "destination " + why
	}
	if (src.port != "" || dst.port != "") && proto != "tcp" && proto != "udp" && proto != "tcp/udp" {
		return ruleLine{}, "", "ports without tcp or udp"
	}
	parts := []string{fmt.Sprintf("iifname %q", in.veth)}
	for _, p := range []string{protoNft, src.nft, dst.nft} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if src.port != "" {
		parts = append(parts, portProto+" sport "+src.port)
	}
	if dst.port != "" {
		parts = append(parts, portProto+" dport "+dst.port)
	}
	parts = append(parts, verdict)

	pfParts := []string{pfAction, "on", in.dev, "inet"}
	if protoPf != "" {
		pfParts = append(pfParts, protoPf)
	}
	pfParts = append(pfParts, "from", src.pf)
	if src.pfPort != "" {
		pfParts = append(pfParts, "port", src.pfPort)
	}
	pfParts = append(pfParts, "to", dst.pf)
	if dst.pfPort != "" {
		pfParts = append(pfParts, "port", dst.pfPort)
	}
	if t := text(r, "tracker"); t != "" {
		if v, err := strconv.ParseUint(t, 10, 32); err == nil {
			pfParts = append(pfParts, "ridentifier", strconv.FormatUint(v, 10))
		}
	}
	if typ == "pass" {
		if proto == "" || proto == "tcp" || proto == "tcp/udp" {
			pfParts = append(pfParts, "flags S/SA")
		}
		pfParts = append(pfParts, "keep state")
	}
	pfParts = append(pfParts, fmt.Sprintf("label %q", "USER_RULE: "+text(r, "descr")))
	l = ruleLine{text: strings.Join(parts, " "), guards: [2]string{fmt.Sprintf("iifname %q", in.veth), protoNft}}
	return l, strings.Join(pfParts, " "), ""
}

type natRule struct{ nft, pf string }

// NATMode returns the outbound NAT mode (the nat.outbound knob); a missing
// mode means automatic.
func NATMode(c *configxml.Config) string {
	if m := knob(c, "nat.outbound"); m != "" {
		return m
	}
	return "automatic"
}

// natRules follows pfSense's filter.inc: manual rules for hybrid and
// advanced (hybrid puts them first), automatic rules for automatic and
// hybrid, nothing for disabled.
func natRules(c *configxml.Config, ifs map[string]iface) ([]natRule, []string) {
	mode := NATMode(c)
	root := c.Root()
	var out []natRule
	var skipped []string
	wan, hasWan := ifs["wan"]
	if mode == "hybrid" || mode == "advanced" {
		if ob := root.FindElement("nat/outbound"); ob != nil {
			for i, r := range ob.SelectElements("rule") {
				nr, why := manualNAT(r, ifs)
				if why != "" {
					skipped = append(skipped, fmt.Sprintf("outbound NAT rule %d (%s): %s", i+1, text(r, "descr"), why))
					continue
				}
				out = append(out, nr)
			}
		}
	}
	if (mode == "automatic" || mode == "hybrid") && hasWan && wan.addr.IsValid() {
		keys := make([]string, 0, len(ifs))
		for k := range ifs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			in := ifs[k]
			if k == "wan" || !in.addr.IsValid() {
				continue
			}
			src := in.addr.Masked().String()
			out = append(out,
				natRule{
					nft: fmt.Sprintf("oifname %q ip saddr %s udp dport 500 masquerade", wan.veth, src),
					pf:  fmt.Sprintf("nat on %s inet proto udp from %s port = isakmp to any port = isakmp -> %s static-port", wan.dev, src, wan.addr.Addr()),
				},
				natRule{
					nft: fmt.Sprintf("oifname %q ip saddr %s masquerade", wan.veth, src),
					pf:  fmt.Sprintf("nat on %s inet from %s to any -> %s port 1024:65535", wan.dev, src, wan.addr.Addr()),
				})
		}
	}
	if mode != "automatic" && mode != "hybrid" && mode != "advanced" && mode != "disabled" {
		skipped = append(skipped, fmt.Sprintf("outbound NAT mode %q is not one of automatic, hybrid, advanced, disabled: no NAT", mode))
	}
	return out, skipped
}

func manualNAT(r *etree.Element, ifs map[string]iface) (natRule, string) {
	if present(r, "disabled") {
		return natRule{}, "disabled"
	}
	in, ok := ifs[text(r, "interface")]
	if !ok {
		return natRule{}, fmt.Sprintf("interface %q is not in the lab", text(r, "interface"))
	}
	parts := []string{fmt.Sprintf("oifname %q", in.veth)}
	srcPf := "any"
	if src := text(r, "source/network"); src != "" && src != "any" {
		p, err := netip.ParsePrefix(src)
		if err != nil || !p.Addr().Is4() {
			return natRule{}, fmt.Sprintf("source %q is not an IPv4 network (aliases are not emulated)", src)
		}
		srcPf = p.Masked().String()
		parts = append(parts, "ip saddr "+srcPf)
	}
	dstPf := "any"
	if d := r.FindElement("destination"); d != nil && !present(d, "any") {
		a := text(d, "address")
		if a == "" {
			a = text(d, "network")
		}
		p, err := netip.ParsePrefix(a)
		if err != nil {
			ad, err2 := netip.ParseAddr(a)
			if err2 != nil || !ad.Is4() {
				return natRule{}, fmt.Sprintf("destination %q is not an IPv4 address or network", a)
			}
			p = netip.PrefixFrom(ad, 32)
		}
		dstPf = p.Masked().String()
		op := ""
		if present(d, "not") {
			op, dstPf = "!= ", "! "+dstPf
		}
		parts = append(parts, "ip daddr "+op+p.Masked().String())
	}
	if present(r, "nonat") {
		parts = append(parts, "accept")
		return natRule{nft: strings.Join(parts, " "), pf: fmt.Sprintf("no nat on %s inet from %s to %s", in.dev, srcPf, dstPf)}, ""
	}
	target := text(r, "target")
	static := present(r, "staticnatport")
	var pfTarget string
	switch {
	case target == "":
		if !in.addr.IsValid() {
			return natRule{}, "interface address target on an interface without a static address"
		}
		pfTarget = in.addr.Addr().String()
		parts = append(parts, "masquerade")
	default:
		ad, err := netip.ParseAddr(target)
		if err != nil || !ad.Is4() {
			return natRule{}, fmt.Sprintf("target %q is not an IPv4 address (aliases and subnets are not emulated)", target)
		}
		pfTarget = ad.String()
		parts = append(parts, "snat to "+ad.String())
	}
	pf := fmt.Sprintf("nat on %s inet from %s to %s -> %s", in.dev, srcPf, dstPf, pfTarget)
	if static {
		pf += " static-port"
	} else {
		pf += " port 1024:65535"
	}
	return natRule{nft: strings.Join(parts, " "), pf: pf}, ""
}

var commentRE = regexp.MustCompile(`comment "(fwab:[a-z]+[0-9]*)"`)

var jumpRE = regexp.MustCompile(`\bjump (\S+)`)

// RuleKeys returns the fwab:… comment keys of the rules in an nft listing
// (or script) in the order a packet meets them: each chain a jump enters
// (skipSteps) is read in place of the jump, as pfctl -sr lists the rules.
func RuleKeys(listing string) []string {
	type item struct{ key, jump string }
	chains := map[string][]item{} // by "table/chain"
	var order []string
	jumped := map[string]bool{}
	var table, chain string
	for _, line := range strings.Split(listing, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "table":
			table, chain = f[2], ""
		case len(f) >= 2 && f[0] == "chain":
			chain = table + "/" + f[1]
			order = append(order, chain)
		case chain == "":
		case jumpRE.MatchString(line):
			to := table + "/" + jumpRE.FindStringSubmatch(line)[1]
			jumped[to] = true
			chains[chain] = append(chains[chain], item{jump: to})
		case commentRE.MatchString(line):
			chains[chain] = append(chains[chain], item{key: commentRE.FindStringSubmatch(line)[1]})
		}
	}
	var keys []string
	var walk func(chain string, depth int)
	walk = func(chain string, depth int) {
		for _, it := range chains[chain] {
			switch {
			case it.key != "":
				keys = append(keys, it.key)
			case depth < len(ruleLine{}.guards):
				walk(it.jump, depth+1)
			}
		}
	}
	for _, c := range order {
		if !jumped[c] {
			walk(c, 0)
		}
	}
	return keys
}

// TableSections returns the named "table ip NAME { ... }" blocks of an nft
// listing, in the order of names.
func TableSections(listing string, names ...string) string {
	sections := map[string]string{}
	var cur string
	var b strings.Builder
	flush := func() {
		if cur != "" {
			sections[cur] = b.String()
		}
		b.Reset()
	}
	for _, line := range strings.SplitAfter(listing, "\n") {
		if strings.HasPrefix(line, "table ") {
			flush()
			f := strings.Fields(line)
			cur = ""
			if len(f) >= 3 && f[1] == "ip" {
				cur = f[2]
			}
		}
		b.WriteString(line)
	}
	flush()
	var out strings.Builder
	for _, n := range names {
		out.WriteString(sections[n])
	}
	return out.String()
}

var setNameRE = regexp.MustCompile(`(?m)^\s*set (\S+) \{`)

// SetNames returns the names of the sets in an nft listing.
func SetNames(listing string) []string {
	var out []string
	for _, m := range setNameRE.FindAllStringSubmatch(listing, -1) {
		out = append(out, m[1])
	}
	return out
}

// SetElementsOf returns the elements of the named set in an nft listing.
func SetElementsOf(listing, name string) []string {
	i := strings.Index(listing, "set "+name+" {")
	if i < 0 {
		return nil
	}
	rest := listing[i:]
	j := strings.Index(rest, "elements = {")
	end := strings.Index(rest, "\n\t}")
	if j < 0 || (end >= 0 && j > end) {
		return nil
	}
	rest = rest[j+len("elements = {"):]
	k := strings.Index(rest, "}")
	if k < 0 {
		return nil
	}
	return strings.FieldsFunc(rest[:k], func(r rune) bool { return r == ',' || r == '\n' || r == '\t' || r == ' ' })
}

// pfLines writes the pf text for the rule keys found, in order, filtered by
// key kind ('f' for filter and blocklist rules, 'n' for NAT).
func pfLines(keys []string, table map[string]string, nat bool) []byte {
	var b bytes.Buffer
	for _, k := range keys {
		isNAT := strings.HasPrefix(k, "fwab:n")
		if isNAT != nat {
			continue
		}
		line, ok := table[k]
		if !ok {
			line = "# rule " + k + " (loaded outside fwab's emulator)"
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
