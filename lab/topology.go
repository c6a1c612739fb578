// Package lab is fwab's embedded lab: four Linux network namespaces wired
// like a firewall between a LAN client and a WAN server, and an emulated
// pfSense that keeps a real config.xml, answers over SSH the commands a real
// pfSense answers, and applies its config to a real Linux data plane
// (nftables, ethtool, tc) in the DUT namespace.
//
// Only addresses in 198.18.0.0/15, the RFC 2544 benchmarking range, are used.
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The lab's fixed addressing (all in 198.18.0.0/15).
const (
	ClientAddr = "198.18.1.10" // LAN client, in <prefix>-lan
	DUTLanAddr = "198.18.1.1"  // DUT, LAN side
	DUTWanAddr = "198.19.0.1"  // DUT, WAN side
	PeerAddr   = "198.19.0.2"  // upstream router, DUT side
	PeerWanGW  = "198.19.1.1"  // upstream router, server side
	ServerAddr = "198.19.1.10" // WAN server, in <prefix>-wan

	LanNet    = "198.18.1.0/24"
	WanNet    = "198.19.0.0/24"
	ServerNet = "198.19.1.0/24"

	// The second link (Topology.Pairs 2): its own client and server on
	// two more DUT ports, opt1 and opt2, routed by the DUT alone.
	Client2Addr  = "198.18.2.10" // in <prefix>-lan2
	DUTLan2Addr  = "198.18.2.1"  // DUT, opt1
	DUTWan2Addr  = "198.19.2.1"  // DUT, opt2
	Server2Addr  = "198.19.2.10" // in <prefix>-wan2
	Lan2Net      = "198.18.2.0/24"
	Server2Net   = "198.19.2.0/24"
	subnetLength = "/24"
)

// DefaultPrefix names the lab's namespaces fwab-lan, fwab-dut, fwab-peer and
// fwab-wan.
const DefaultPrefix = "fwab"

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

// Topology names a lab's namespaces and veth interfaces. Tests use a random
// prefix so that runs never collide.
type Topology struct {
	Prefix string
	// Pairs is how many client/server pairs cross the DUT: 1 (0 too), or
	// 2 with a second link, lan2 → opt1, opt2 → wan2, independent of the
	// first as the E302 review's two 10G sets were.
	Pairs int
}

// Roles of the four namespaces, in the order traffic crosses them, and of
// the second link's two.
var (
	roles      = []string{"lan", "dut", "peer", "wan"}
	pair2Roles = []string{"lan2", "wan2"}
)

// Validate checks that the prefix makes legal namespace and interface names
// (interface names are limited to 15 bytes).
func (t Topology) Validate() error {
	if !prefixRE.MatchString(t.Prefix) {
		return fmt.Errorf("lab prefix %q: use 1 to 12 lower-case letters and digits, starting with a letter", t.Prefix)
	}
	if t.Pairs < 0 || t.Pairs > 2 {
		return fmt.Errorf("lab links %d: the lab has 1 or 2 client/server pairs", t.Pairs)
	}
	return nil
}

// second reports whether the topology has the second link.
func (t Topology) second() bool { return t.Pairs == 2 }

// Namespace returns the namespace of a role: lan, dut, peer or wan.
func (t Topology) Namespace(role string) string { return t.Prefix + "-" + role }

// Namespaces returns the lab's namespace names: four, and the second
// link's two.
func (t Topology) Namespaces() []string {
	var out []string
	for _, r := range roles {
		out = append(out, t.Namespace(r))
	}
	if t.second() {
		for _, r := range pair2Roles {
			out = append(out, t.Namespace(r))
		}
	}
	return out
}

// Veth names. The DUT's LAN side is <prefix>d0 and its WAN side <prefix>d1.
func (t Topology) ClientIf() string  { return t.Prefix + "l0" }
func (t Topology) DUTLanIf() string  { return t.Prefix + "d0" }
func (t Topology) DUTWanIf() string  { return t.Prefix + "d1" }
func (t Topology) PeerDUTIf() string { return t.Prefix + "p0" }
func (t Topology) PeerWanIf() string { return t.Prefix + "p1" }
func (t Topology) ServerIf() string  { return t.Prefix + "w0" }

// The second link's veths: client2 <prefix>l1 to the DUT's <prefix>d2
// (opt1), the DUT's <prefix>d3 (opt2) to server2 <prefix>w1.
func (t Topology) Client2If() string { return t.Prefix + "l1" }
func (t Topology) DUTLan2If() string { return t.Prefix + "d2" }
func (t Topology) DUTWan2If() string { return t.Prefix + "d3" }
func (t Topology) Server2If() string { return t.Prefix + "w1" }

// Veths lists every veth end with its namespace.
func (t Topology) Veths() [][2]string {
	v := [][2]string{
		{t.Namespace("lan"), t.ClientIf()},
		{t.Namespace("dut"), t.DUTLanIf()},
		{t.Namespace("dut"), t.DUTWanIf()},
		{t.Namespace("peer"), t.PeerDUTIf()},
		{t.Namespace("peer"), t.PeerWanIf()},
		{t.Namespace("wan"), t.ServerIf()},
	}
	if t.second() {
		v = append(v, [2]string{t.Namespace("lan2"), t.Client2If()}, [2]string{t.Namespace("dut"), t.DUTLan2If()},
			[2]string{t.Namespace("dut"), t.DUTWan2If()}, [2]string{t.Namespace("wan2"), t.Server2If()})
	}
	return v
}

// WireVeths are the veth ends that send to the DUT, with their
// namespaces. A wire carries frames no larger than the MTU, but a veth
// hands its peer whole TSO segments (up to 64 KiB): with TSO on at these
// ends the DUT would forward a few large segments whatever its LRO flag
// says. Create turns TSO off on them (software GSO cuts the segments into
// frames as they leave), so the DUT's LRO (the GRO of its veths) decides
// whether it routes and filters each frame or the segments it coalesced,
// as a real NIC's LRO does.
func (t Topology) WireVeths() [][2]string {
	v := [][2]string{{t.Namespace("lan"), t.ClientIf()}, {t.Namespace("peer"), t.PeerDUTIf()}}
	if t.second() {
		v = append(v, [2]string{t.Namespace("lan2"), t.Client2If()}, [2]string{t.Namespace("wan2"), t.Server2If()})
	}
	return v
}

// Create builds the namespaces, veths, addresses and routes. It fails if any
// of the namespaces exists already: call Destroy first.
func (t Topology) Create(ctx context.Context) error {
	if err := t.Validate(); err != nil {
		return err
	}
	existing, err := t.ExistingNamespaces(ctx)
	if err != nil {
		return err
	}
	if len(existing) > 0 {
		return fmt.Errorf("lab namespaces already exist: %s (run 'fwab lab down' first)", strings.Join(existing, ", "))
	}
	lan, dut, peer, wan := t.Namespace("lan"), t.Namespace("dut"), t.Namespace("peer"), t.Namespace("wan")
	steps := [][]string{}
	for _, ns := range t.Namespaces() {
		steps = append(steps, []string{"ip", "netns", "add", ns}, []string{"ip", "-n", ns, "link", "set", "lo", "up"})
	}
	steps = append(steps,
		[]string{"ip", "link", "add", t.ClientIf(), "netns", lan, "type", "veth", "peer", "name", t.DUTLanIf(), "netns", dut},
		[]string{"ip", "link", "add", t.DUTWanIf(), "netns", dut, "type", "veth", "peer", "name", t.PeerDUTIf(), "netns", peer},
		[]string{"ip", "link", "add", t.PeerWanIf(), "netns", peer, "type", "veth", "peer", "name", t.ServerIf(), "netns", wan},
		[]string{"ip", "-n", lan, "addr", "add", ClientAddr + "/24", "dev", t.ClientIf()},
		[]string{"ip", "-n", dut, "addr", "add", DUTLanAddr + "/24", "dev", t.DUTLanIf()},
		[]string{"ip", "-n", dut, "addr", "add", DUTWanAddr + "/24", "dev", t.DUTWanIf()},
		[]string{"ip", "-n", peer, "addr", "add", PeerAddr + "/24", "dev", t.PeerDUTIf()},
		[]string{"ip", "-n", peer, "addr", "add", PeerWanGW + "/24", "dev", t.PeerWanIf()},
		[]string{"ip", "-n", wan, "addr", "add", ServerAddr + "/24", "dev", t.ServerIf()},
	)
	if t.second() {
		lan2, wan2 := t.Namespace("lan2"), t.Namespace("wan2")
		steps = append(steps,
			[]string{"ip", "link", "add", t.Client2If(), "netns", lan2, "type", "veth", "peer", "name", t.DUTLan2If(), "netns", dut},
			[]string{"ip", "link", "add", t.DUTWan2If(), "netns", dut, "type", "veth", "peer", "name", t.Server2If(), "netns", wan2},
			[]string{"ip", "-n", lan2, "addr", "add", Client2Addr + subnetLength, "dev", t.Client2If()},
			[]string{"ip", "-n", dut, "addr", "add", DUTLan2Addr + subnetLength, "dev", t.DUTLan2If()},
			[]string{"ip", "-n", dut, "addr", "add", DUTWan2Addr + subnetLength, "dev", t.DUTWan2If()},
			[]string{"ip", "-n", wan2, "addr", "add", Server2Addr + subnetLength, "dev", t.Server2If()},
		)
	}
	for _, v := range t.Veths() {
		steps = append(steps, []string{"ip", "-n", v[0], "link", "set", v[1], "up"})
	}
	for _, v := range t.WireVeths() {
		steps = append(steps, []string{"ip", "netns", "exec", v[0], "ethtool", "-K", v[1], "tso", "off"})
	}
	if t.second() {
		// Both ends of the second link are the DUT's own subnets: it
		// routes between them with no peer, and no NAT (opt2 is no WAN).
		steps = append(steps,
			[]string{"ip", "-n", t.Namespace("lan2"), "route", "add", "default", "via", DUTLan2Addr},
			[]string{"ip", "-n", t.Namespace("wan2"), "route", "add", "default", "via", DUTWan2Addr},
		)
	}
	steps = append(steps,
		[]string{"ip", "-n", lan, "route", "add", "default", "via", DUTLanAddr},
		[]string{"ip", "-n", wan, "route", "add", "default", "via", PeerWanGW},
		// The DUT reaches the server network through the peer, as configured
		// in config.xml's static route; the peer routes the LAN back through
		// the DUT, so traffic flows with outbound NAT disabled too, and with
		// NAT the server sees the DUT's WAN address instead of the client's.
		[]string{"ip", "-n", dut, "route", "add", ServerNet, "via", PeerAddr},
		[]string{"ip", "-n", peer, "route", "add", LanNet, "via", DUTWanAddr},
		[]string{"ip", "netns", "exec", dut, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
		[]string{"ip", "netns", "exec", peer, "sysctl", "-qw", "net.ipv4.ip_forward=1"},
	)
	for _, s := range steps {
		if _, err := run(ctx, nil, s[0], s[1:]...); err != nil {
			return fmt.Errorf("build lab topology: %w", err)
		}
	}
	return nil
}

// ExistingNamespaces lists which of the lab's namespaces exist.
func (t Topology) ExistingNamespaces(ctx context.Context) ([]string, error) {
	out, err := run(ctx, nil, "ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			have[f[0]] = true
		}
	}
	var found []string
	// The second link's namespaces are looked for whatever Pairs says, so
	// that Destroy removes them after any lab.
	all := Topology{Prefix: t.Prefix, Pairs: 2}
	for _, ns := range all.Namespaces() {
		if have[ns] {
			found = append(found, ns)
		}
	}
	return found, nil
}

// Destroy kills every process left inside the lab's namespaces (a process
// keeps a deleted namespace alive), then deletes the namespaces; their veths
// go with them. Missing parts are not an error, so Destroy also cleans up
// after a crashed Create.
func (t Topology) Destroy(ctx context.Context) error {
	if err := t.Validate(); err != nil {
		return err
	}
	existing, err := t.ExistingNamespaces(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range existing {
		if err := killNamespacePIDs(ctx, ns); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range existing {
		if _, err := run(ctx, nil, "ip", "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killNamespacePIDs ends the processes running in a namespace: SIGTERM,
// then SIGKILL for those still there after a second.
func killNamespacePIDs(ctx context.Context, ns string) error {
	pids := func() []int {
		out, err := run(ctx, nil, "ip", "netns", "pids", ns)
		if err != nil {
			return nil
		}
		var ps []int
		for _, f := range strings.Fields(out) {
			if p, err := strconv.Atoi(f); err == nil {
				ps = append(ps, p)
			}
		}
		return ps
	}
	ps := pids()
	for _, p := range ps {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	for i := 0; i < 20 && len(ps) > 0; i++ {
		time.Sleep(100 * time.Millisecond)
		ps = pids()
	}
	for _, p := range ps {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if len(ps) > 0 {
		time.Sleep(200 * time.Millisecond)
		if left := pids(); len(left) > 0 {
			return fmt.Errorf("namespace %s: processes %v did not exit", ns, left)
		}
	}
	return nil
}

// run runs a system command and returns its standard output. The error
// carries the command line and its standard error.
func run(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 600 {
			msg = msg[:600] + "…"
		}
		return stdout.String(), fmt.Errorf("%s %s: %s: %w", name, strings.Join(shortArgs(args), " "), msg, err)
	}
	return stdout.String(), nil
}

func shortArgs(args []string) []string {
	if len(args) <= 12 {
		return args
	}
	return append(append([]string{}, args[:12]...), "…")
}

// DUTVeths maps the DUT's interfaces, by the lab's name for them (lan,
// wan), onto their veths. A link speed applies to every one of them.
func (t Topology) DUTVeths() map[string]string {
	v := map[string]string{"lan": t.DUTLanIf(), "wan": t.DUTWanIf()}
	if t.second() {
		v["opt1"], v["opt2"] = t.DUTLan2If(), t.DUTWan2If()
	}
	return v
}

// A LinkSpeed is a line rate an emulated NIC of the DUT can have, and the
// subtype FreeBSD's ifconfig prints for it on the media line.
type LinkSpeed struct {
	Name  string  // as --link takes it: 100m, 1g, 2.5g, 10g, unlimited
	Mbit  float64 // line rate; 0: unlimited (the veth's own speed)
	Media string  // ifconfig media subtype
}

// LinkSpeeds are the speeds a lab interface can have. unlimited leaves the
// veth unshaped; its media line stays what the lab always printed.
var LinkSpeeds = []LinkSpeed{
	{Name: "100m", Mbit: 100, Media: "100baseTX"},
	{Name: "1g", Mbit: 1000, Media: "1000baseT"},
	{Name: "2.5g", Mbit: 2500, Media: "2500Base-T"},
	{Name: "10g", Mbit: 10000, Media: "10Gbase-T"},
	{Name: "unlimited", Media: "10Gbase-T"},
}

// LinkSpec is one DUT interface's emulated NIC: its speed and duplex, and
// the best speed the NIC lists when the link negotiated less. The zero
// value is unlimited, full duplex. Its text form is the speed's name, with
// @NIC for a faster NIC and /half for half duplex (100m@1g/half).
type LinkSpec struct {
	Speed      LinkSpeed
	NIC        LinkSpeed // the best the NIC lists; zero: Speed
	HalfDuplex bool
}

// linkSpeedNames lists the valid speeds for error messages.
func linkSpeedNames() string {
	names := make([]string, len(LinkSpeeds))
	for i, s := range LinkSpeeds {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// ParseLinkSpec reads a link: a speed (100m, 1g, 2.5g, 10g, unlimited),
// optionally followed by /half or /full. Empty is unlimited.
func ParseLinkSpec(s string) (LinkSpec, error) {
	if s == "" {
		return LinkSpec{Speed: LinkSpeeds[len(LinkSpeeds)-1]}, nil
	}
	speed, duplex, hasDuplex := strings.Cut(strings.ToLower(s), "/")
	speed, nic, hasNIC := strings.Cut(speed, "@")
	var l LinkSpec
	lookup := func(name string) (LinkSpeed, bool) {
		for _, v := range LinkSpeeds {
			if v.Name == name {
				return v, true
			}
		}
		return LinkSpeed{}, false
	}
	var found bool
	if l.Speed, found = lookup(speed); !found {
		return LinkSpec{}, fmt.Errorf("link speed %q: want one of %s (optionally @NIC-SPEED and /half)", s, linkSpeedNames())
	}
	if hasNIC {
		if l.NIC, found = lookup(nic); !found || l.NIC.Mbit == 0 {
			return LinkSpec{}, fmt.Errorf("link %q: NIC speed %q, want one of %s but unlimited", s, nic, linkSpeedNames())
		}
		if l.Speed.Mbit == 0 || l.NIC.Mbit < l.Speed.Mbit {
			return LinkSpec{}, fmt.Errorf("link %q: a link cannot negotiate more than its NIC lists; write LINK@NIC with LINK at most NIC (100m@1g)", s)
		}
		if l.NIC == l.Speed {
			l.NIC = LinkSpeed{}
		}
	}
	if hasDuplex {
		switch duplex {
		case "half":
			l.HalfDuplex = true
		case "full":
		default:
			return LinkSpec{}, fmt.Errorf("link %q: duplex %q, want half or full", s, duplex)
		}
	}
	if l.HalfDuplex && l.Speed.Mbit == 0 {
		return LinkSpec{}, fmt.Errorf("link %q: an unlimited link has no duplex to force; give a speed (1g/half)", s)
	}
	return l, nil
}

func (l LinkSpec) String() string {
	name := l.Speed.Name
	if name == "" {
		name = "unlimited"
	}
	if l.NIC.Name != "" {
		name += "@" + l.NIC.Name
	}
	if l.HalfDuplex {
		return name + "/half"
	}
	return name
}

// MarshalText writes the text form (lab.json).
func (l LinkSpec) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads the text form.
func (l *LinkSpec) UnmarshalText(b []byte) error {
	v, err := ParseLinkSpec(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Unlimited reports whether the link is left unshaped.
func (l LinkSpec) Unlimited() bool { return l.Speed.Mbit == 0 }

// Media is what ifconfig prints in the media line's parentheses, as
// pfSense's get_interface_info reads it back
// (`media: Ethernet autoselect (1000baseT <full-duplex>)`).
func (l LinkSpec) Media() string {
	sub := l.Speed.Media
	if sub == "" {
		sub = LinkSpeeds[len(LinkSpeeds)-1].Media
	}
	if l.HalfDuplex {
		return sub + " <half-duplex>"
	}
	return sub + " <full-duplex>"
}

// SupportedMedia is what `ifconfig -m` lists under "supported media:" for
// the NIC, best first: every lab speed up to the NIC's, each in both
// duplexes (unlimited lists 10 GbE, the media line it prints).
func (l LinkSpec) SupportedMedia() []string {
	best := l.NIC
	if best.Name == "" {
		best = l.Speed
	}
	if best.Mbit == 0 {
		best = LinkSpeeds[len(LinkSpeeds)-2]
	}
	var out []string
	for i := len(LinkSpeeds) - 1; i >= 0; i-- {
		v := LinkSpeeds[i]
		if v.Mbit == 0 || v.Mbit > best.Mbit {
			continue
		}
		out = append(out, v.Media+" mediaopt full-duplex", v.Media+" mediaopt half-duplex")
	}
	return out
}

// Appliance is a named lab profile: the link of every DUT interface and the
// CPU budget of the firewall's services, bundled for a common case.
type Appliance struct {
	Name   string
	Link   LinkSpec
	DUTCPU float64 // cores; 0: none
	Models string  // what it stands for, for --help and the README
}

// Appliances are the named profiles; the first is the default of Up.
var Appliances = []Appliance{
	{Name: "unlimited", Models: "the lab as it always was: veths at whatever this machine forwards, the services on all of its cores"},
	{Name: "1g-small", Link: LinkSpec{Speed: speedNamed("1g")}, DUTCPU: 1,
		Models: "a small appliance with 1 GbE ports (a T730, an APU): every DUT port at 1000baseT full duplex, the services on one core's budget"},
}

// speedNamed is the LinkSpeed of that name; it panics on a name
// LinkSpeeds lacks, which only a change to the tables above can cause.
func speedNamed(name string) LinkSpeed {
	for _, v := range LinkSpeeds {
		if v.Name == name {
			return v
		}
	}
	panic("lab: no link speed " + name)
}

// LookupAppliance returns a named profile; empty is the default.
func LookupAppliance(name string) (Appliance, error) {
	if name == "" {
		return Appliances[0], nil
	}
	names := make([]string, len(Appliances))
	for i, a := range Appliances {
		if a.Name == name {
			return a, nil
		}
		names[i] = a.Name
	}
	return Appliance{}, fmt.Errorf("lab profile %q: want one of %s", name, strings.Join(names, ", "))
}
