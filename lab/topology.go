// Package lab is fwab's embedded lab: four Linux network namespaces wired
// like a firewall between a LAN client and a WAN server, and the machine
// side of the emulated firewall (package emu): the real Linux data plane
// its config is applied to (nftables, ethtool, tc) in the DUT namespace,
// its strongSwan charons, inspection engines and CPU budget, and the
// daemon that serves it.
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

	"github.com/fwab/fwab/emu"
)

// subnetLength is the prefix length of every lab subnet.
const subnetLength = "/24"

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
		[]string{"ip", "-n", lan, "addr", "add", emu.ClientAddr + "/24", "dev", t.ClientIf()},
		[]string{"ip", "-n", dut, "addr", "add", emu.DUTLanAddr + "/24", "dev", t.DUTLanIf()},
		[]string{"ip", "-n", dut, "addr", "add", emu.DUTWanAddr + "/24", "dev", t.DUTWanIf()},
		[]string{"ip", "-n", peer, "addr", "add", emu.PeerAddr + "/24", "dev", t.PeerDUTIf()},
		[]string{"ip", "-n", peer, "addr", "add", emu.PeerWanGW + "/24", "dev", t.PeerWanIf()},
		[]string{"ip", "-n", wan, "addr", "add", emu.ServerAddr + "/24", "dev", t.ServerIf()},
	)
	if t.second() {
		lan2, wan2 := t.Namespace("lan2"), t.Namespace("wan2")
		steps = append(steps,
			[]string{"ip", "link", "add", t.Client2If(), "netns", lan2, "type", "veth", "peer", "name", t.DUTLan2If(), "netns", dut},
			[]string{"ip", "link", "add", t.DUTWan2If(), "netns", dut, "type", "veth", "peer", "name", t.Server2If(), "netns", wan2},
			[]string{"ip", "-n", lan2, "addr", "add", emu.Client2Addr + subnetLength, "dev", t.Client2If()},
			[]string{"ip", "-n", dut, "addr", "add", emu.DUTLan2Addr + subnetLength, "dev", t.DUTLan2If()},
			[]string{"ip", "-n", dut, "addr", "add", emu.DUTWan2Addr + subnetLength, "dev", t.DUTWan2If()},
			[]string{"ip", "-n", wan2, "addr", "add", emu.Server2Addr + subnetLength, "dev", t.Server2If()},
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
			[]string{"ip", "-n", t.Namespace("lan2"), "route", "add", "default", "via", emu.DUTLan2Addr},
			[]string{"ip", "-n", t.Namespace("wan2"), "route", "add", "default", "via", emu.DUTWan2Addr},
		)
	}
	steps = append(steps,
		[]string{"ip", "-n", lan, "route", "add", "default", "via", emu.DUTLanAddr},
		[]string{"ip", "-n", wan, "route", "add", "default", "via", emu.PeerWanGW},
		// The DUT reaches the server network through the peer, as configured
		// in config.xml's static route; the peer routes the LAN back through
		// the DUT, so traffic flows with outbound NAT disabled too, and with
		// NAT the server sees the DUT's WAN address instead of the client's.
		[]string{"ip", "-n", dut, "route", "add", emu.ServerNet, "via", emu.PeerAddr},
		[]string{"ip", "-n", peer, "route", "add", emu.LanNet, "via", emu.DUTWanAddr},
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

// Appliance is a named lab profile: the link of every DUT interface and the
// CPU budget of the firewall's services, bundled for a common case.
type Appliance struct {
	Name   string
	Link   emu.LinkSpec
	DUTCPU float64 // cores; 0: none, or CPU's calibration
	// CPU, when set, is the appliance's CPU: `lab up` calibrates the
	// budget against this machine (Calibrate) instead of DUTCPU.
	CPU    *CPURef
	Models string // what it stands for, for --help and the README
}

// The published 7-Zip runs the appliances' CPU figures come from: one run
// per core design, its decompression rating per MHz of the clock the run
// measured.
//
//   - Jaguar/Puma (AMD's GX SoCs): a GX-420CA (Jaguar, 4 cores, 2.0 GHz)
//     in an HP t620 Plus, 7-Zip 16.02 `7z b`, "CPU Freq: 1990 1993 1992",
//     "Avr: 377 1239 4675 | 397 1735 6884": 1735 MIPS a thread (R/U)
//     decompressing at 1992 MHz. Puma (GX-424CC, GX-412TC) is Jaguar with
//     higher clocks and power management; its work per clock is unchanged
//     (notebookcheck.com, AMD A8-6410: "Die Pro-MHz-Leistung hat sich im
//     Vergleich zum Vorgänger nicht verändert").
//   - Skylake (the Xeon D-2100's core): a Pentium G4600 (Kaby Lake, the
//     Skylake core, 3.6 GHz without turbo) in sbc-bench's results, 7-Zip
//     16.02 `7za b -mmt1`: "Avr: 100 5213 5213 | 100 3682 3682".
const (
	jaguarSource  = "GX-420CA, 1735 MIPS a thread at 1992 MHz: https://gist.github.com/Jackadminx/87f60e42f22361c7d19b1fb4ae4be854; Puma = Jaguar per MHz: https://notebookcheck.com/AMD-A-Series-A8-6410-Notebook-Prozessor.122363.0.html"
	skylakeSource = "Pentium G4600, 3682 MIPS at 3600 MHz: https://github.com/ThomasKaiser/sbc-bench/blob/53f795176f2876cffac8cfd93395ee01e031f6ee/results/2jVw.txt (line 203)"
)

// Appliances are the named profiles; the first is the default of Up.
var Appliances = []Appliance{
	{Name: "unlimited", Models: "the lab as it always was: veths at whatever this machine forwards, the services on all of its cores"},
	{Name: "1g-small", Link: emu.LinkSpec{Speed: speedNamed("1g")}, DUTCPU: 1,
		Models: "a small appliance with 1 GbE ports: every DUT port at 1000baseT full duplex, the services on one of this machine's cores (not calibrated: t730 and apu2 are)"},
	{Name: "t730", Link: emu.LinkSpec{Speed: speedNamed("1g")},
		CPU:    &CPURef{Model: "AMD GX-424CC", Cores: 4, MHz: 2400, Column: RatingDecompress, PerMHz: 1735.0 / 1992, Source: jaguarSource},
		Models: "an HP t730 thin client (AMD GX-424CC, 4 Puma cores at 2.4 GHz; Intel i350 1 GbE ports, as in the T730 review): 1000baseT ports, the services on one GX-424CC core's budget, calibrated at lab up"},
	{Name: "apu2", Link: emu.LinkSpec{Speed: speedNamed("1g")},
		CPU:    &CPURef{Model: "AMD GX-412TC", Cores: 4, MHz: 1000, Column: RatingDecompress, PerMHz: 1735.0 / 1992, Source: jaguarSource},
		Models: "a PC Engines APU2 (AMD GX-412TC, 4 Puma cores at 1.0 GHz, 1.4 GHz boost not counted; Intel i210/i211 1 GbE): 1000baseT ports, one GX-412TC core's budget, calibrated at lab up"},
	{Name: "e302", Link: emu.LinkSpec{Speed: speedNamed("10g")},
		CPU:    &CPURef{Model: "Intel Xeon D-2123IT", Cores: 4, MHz: 2200, Column: RatingDecompress, PerMHz: 3682.0 / 3600, Source: skylakeSource},
		Models: "a Xeon D-2123IT box as in the E302 review (4 Skylake cores at 2.2 GHz base, 3.0 GHz turbo not counted; 10 GbE): 10GbaseT ports, one D-2123IT core's budget, calibrated at lab up"},
}

// speedNamed is the emu.LinkSpeed of that name; it panics on a name
// emu.LinkSpeeds lacks, which only a change to the tables above can cause.
func speedNamed(name string) emu.LinkSpeed {
	for _, v := range emu.LinkSpeeds {
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

// Ports maps the lab config's igb0 (wan) and igb1 (lan) onto the DUT's
// veths, and with a second link igb2 (opt1) and igb3 (opt2).
func (t Topology) Ports() emu.Ports {
	p := emu.Ports{WanDev: "igb0", LanDev: "igb1", WanVeth: t.DUTWanIf(), LanVeth: t.DUTLanIf()}
	if t.second() {
		p.Extra = []emu.Port{{Dev: "igb2", Veth: t.DUTLan2If(), Descr: "LAN2"}, {Dev: "igb3", Veth: t.DUTWan2If(), Descr: "WAN2"}}
	}
	return p
}
