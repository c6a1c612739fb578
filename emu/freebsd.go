package emu

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
)

// FreeBSD interface capability bits (sys/net/if.h IFCAP_*), in the order
// ifconfig prints them.
var ifcaps = []struct {
	name string
	bit  uint32
}{
	{"RXCSUM", 0x1}, {"TXCSUM", 0x2}, {"VLAN_MTU", 0x8}, {"VLAN_HWTAGGING", 0x10},
	{"JUMBO_MTU", 0x20}, {"VLAN_HWCSUM", 0x80}, {"TSO4", 0x100}, {"TSO6", 0x200},
	{"LRO", 0x400}, {"WOL_MAGIC", 0x2000}, {"VLAN_HWFILTER", 0x10000},
	{"VLAN_HWTSO", 0x40000}, {"RXCSUM_IPV6", 0x200000}, {"TXCSUM_IPV6", 0x400000},
}

// ifcapOptions returns ifconfig's options= value for the offload state read
// from the veth: TXCSUM(_IPV6) from tx-checksumming, RXCSUM(_IPV6) from
// rx-checksumming, TSO4/TSO6 (and VLAN_HWTSO) from tcp-segmentation-offload,
// LRO from generic-receive-offload. The VLAN and WOL bits are fixed, as an
// igb(4) NIC shows them.
func ifcapOptions(o Offloads) (uint32, []string) {
	on := map[string]bool{
		"VLAN_MTU": true, "VLAN_HWTAGGING": true, "JUMBO_MTU": true, "WOL_MAGIC": true, "VLAN_HWFILTER": true,
		"RXCSUM": o.RXCSUM, "RXCSUM_IPV6": o.RXCSUM,
		"TXCSUM": o.TXCSUM, "TXCSUM_IPV6": o.TXCSUM, "VLAN_HWCSUM": o.TXCSUM,
		"TSO4": o.TSO, "TSO6": o.TSO, "VLAN_HWTSO": o.TSO,
		"LRO": o.LRO,
	}
	var v uint32
	var names []string
	for _, c := range ifcaps {
		if on[c.name] {
			v |= c.bit
			names = append(names, c.name)
		}
	}
	return v, names
}

type fbIface struct{ dev, veth, descr string }

func (e *Emulator) fbIfaces() []fbIface {
	ifs := []fbIface{{e.Ports.WanDev, e.Ports.WanVeth, "WAN"}, {e.Ports.LanDev, e.Ports.LanVeth, "LAN"}}
	for _, x := range e.Ports.Extra {
		ifs = append(ifs, fbIface{x.Dev, x.Veth, x.Descr})
	}
	if e.SpareNIC != "" {
		ifs = append(ifs, fbIface{dev: e.SpareNIC, descr: "spare"})
	}
	return ifs
}

// offloads reads a device's flags: the data plane's, or the spare NIC's.
func (e *Emulator) offloads(ctx context.Context, in fbIface) (Offloads, error) {
	if in.veth == "" {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.spareOffloads, nil
	}
	return e.DataPlane.Offloads(ctx, in.veth)
}

// printIfconfig prints one interface as FreeBSD's ifconfig does; media
// adds the NIC's supported media (ifconfig -m).
func (e *Emulator) printIfconfig(ctx context.Context, c *call, in fbIface, media bool) error {
	l := VethState{MTU: 1500, MAC: "02:00:00:00:00:99", Up: true}
	var err error
	if in.veth != "" {
		if l, err = e.DataPlane.Link(ctx, in.veth); err != nil {
			return c.errorf(1, "ifconfig: %s: %v", in.dev, err)
		}
	}
	o, err := e.offloads(ctx, in)
	if err != nil {
		return c.errorf(1, "ifconfig: %s: %v", in.dev, err)
	}
	flags := "1008843<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST,LOWER_UP>"
	if !l.Up {
		flags = "1008802<BROADCAST,SIMPLEX,MULTICAST,LOWER_UP>"
	}
	v, names := ifcapOptions(o)
	fmt.Fprintf(c.stdout, "%s: flags=%s metric 0 mtu %d\n", in.dev, flags, l.MTU)
	fmt.Fprintf(c.stdout, "\tdescription: %s\n", in.descr)
	fmt.Fprintf(c.stdout, "\toptions=%x<%s>\n", v, strings.Join(names, ","))
	fmt.Fprintf(c.stdout, "\tether %s\n", l.MAC)
	addrs := l.Addrs
	if len(addrs) == 0 {
		addrs = e.configAddrs(in.dev)
	}
	for _, a := range addrs {
		mask := ^uint32(0) << (32 - a.Bits())
		b := a.Addr().As4()
		bc := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | ^mask
		fmt.Fprintf(c.stdout, "\tinet %s netmask 0x%08x broadcast %s\n", a.Addr(), mask,
			netip.AddrFrom4([4]byte{byte(bc >> 24), byte(bc >> 16), byte(bc >> 8), byte(bc)}))
	}
	// upstream: pfsense RELENG_2_7_2 src/etc/inc/pfsense-utils.inc:1789 — get_interface_info reads the speed and duplex from the parentheses of `media:`
	fmt.Fprintf(c.stdout, "\tmedia: Ethernet autoselect (%s)\n", e.Links[in.veth].Media())
	if l.Up {
		fmt.Fprintln(c.stdout, "\tstatus: active")
	} else {
		fmt.Fprintln(c.stdout, "\tstatus: no carrier")
	}
	// upstream: not settled — `ifconfig -m`'s "supported media:" block is FreeBSD's ifconfig(8), not in the upstream copy; checked at run time by fwapi.ParseIfconfig, which compares only subtypes that name a rate
	if media {
		fmt.Fprintln(c.stdout, "\tsupported media:")
		fmt.Fprintln(c.stdout, "\t\tmedia autoselect")
		for _, m := range e.Links[in.veth].SupportedMedia() {
			fmt.Fprintf(c.stdout, "\t\tmedia %s\n", m)
		}
	}
	fmt.Fprintln(c.stdout, "\tnd6 options=29<PERFORMNUD,IFDISABLED,AUTO_LINKLOCAL>")
	return nil
}

// configAddrs is the static IPv4 address config.xml gives dev, for a
// data plane that holds none (the recording one): what the box's
// interface_configure set.
func (e *Emulator) configAddrs(dev string) []netip.Prefix {
	root, err := parseConfigFile(e)
	if err != nil {
		return nil
	}
	for _, i := range root.Interfaces() {
		if i.Device != dev {
			continue
		}
		if p, err := netip.ParsePrefix(i.IPAddr + "/" + i.Subnet); err == nil && p.Addr().Is4() {
			return []netip.Prefix{p}
		}
	}
	return nil
}

func (e *Emulator) printLoopback(c *call) {
	fmt.Fprint(c.stdout, "lo0: flags=1008049<UP,LOOPBACK,RUNNING,MULTICAST,LOWER_UP> metric 0 mtu 16384\n"+
		"\toptions=680003<RXCSUM,TXCSUM,LINKSTATE,RXCSUM_IPV6,TXCSUM_IPV6>\n"+
		"\tinet 127.0.0.1 netmask 0xff000000\n"+
		"\tgroups: lo\n"+
		"\tnd6 options=21<PERFORMNUD,AUTO_LINKLOCAL>\n")
}

// cmdIfconfig prints interfaces, or sets offload capabilities at run time
// (not in config.xml, exactly like ifconfig on pfSense).
func (e *Emulator) cmdIfconfig(ctx context.Context, c *call) error {
	args := c.args[1:]
	media := false
	if len(args) > 0 && slices.Contains([]string{"-am", "-ma"}, args[0]) {
		args, media = append([]string{"-a"}, args[1:]...), true
	}
	if i := slices.Index(args, "-m"); i >= 0 && i <= 1 {
		args, media = slices.Delete(slices.Clone(args), i, i+1), true
	}
	if len(args) == 0 || (len(args) == 1 && args[0] == "-a") {
		for _, in := range e.fbIfaces() {
			if err := e.printIfconfig(ctx, c, in, media); err != nil {
				return err
			}
		}
		e.printLoopback(c)
		return nil
	}
	if args[0] == "-l" {
		for _, in := range e.fbIfaces() {
			fmt.Fprintf(c.stdout, "%s ", in.dev)
		}
		fmt.Fprintln(c.stdout, "lo0")
		return nil
	}
	var in *fbIface
	for _, i := range e.fbIfaces() {
		if i.dev == args[0] {
			in = &i
		}
	}
	if args[0] == "lo0" && len(args) == 1 {
		e.printLoopback(c)
		return nil
	}
	if in == nil {
		return c.errorf(1, "ifconfig: interface %s does not exist", args[0])
	}
	if len(args) == 1 {
		return e.printIfconfig(ctx, c, *in, media)
	}
	o, err := e.offloads(ctx, *in)
	if err != nil {
		return c.errorf(1, "ifconfig: %s: %v", in.dev, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range args[1:] {
		val := true
		name := a
		if strings.HasPrefix(a, "-") {
			val, name = false, a[1:]
		}
		switch name {
		case "txcsum", "txcsum6":
			o.TXCSUM = val
		case "rxcsum", "rxcsum6":
			o.RXCSUM = val
		case "tso", "tso4", "tso6":
			o.TSO = val
		case "lro":
			o.LRO = val
		case "vlanhwtso", "vlanhwcsum", "vlanhwtag", "vlanhwfilter":
			// fixed on the emulated igb; accepted and ignored
		default:
			return c.errorf(1, "ifconfig: %s: bad value (the lab emulates txcsum rxcsum txcsum6 rxcsum6 tso tso4 tso6 lro vlanhwtso)", a)
		}
	}
	e.loggedOffload("ifconfig " + in.dev)
	defer e.capabilitiesChanged(in.dev)
	if in.veth == "" {
		e.spareOffloads = o
		return nil
	}
	if err := e.DataPlane.SetOffloads(ctx, in.veth, o); err != nil {
		return c.errorf(1, "ifconfig: %s: %v", in.dev, err)
	}
	return nil
}

// cmdPfctl reports the rules, NAT rules and tables loaded in the kernel, in
// pf's words.
func (e *Emulator) cmdPfctl(ctx context.Context, c *call) error {
	args := strings.Join(c.args[1:], " ")
	switch {
	case args == "-sr" || args == "-s rules":
		return e.pfRules(ctx, c, false)
	case args == "-sn" || args == "-s nat":
		return e.pfRules(ctx, c, true)
	case args == "-si" || args == "-s info":
		return e.pfInfo(ctx, c)
	case args == "-s Tables" || args == "-sT":
		listing, err := e.DataPlane.Listing(ctx)
		if err != nil {
			return c.errorf(1, "pfctl: %v", err)
		}
		names := SetNames(listing)
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintln(c.stdout, n)
		}
		return nil
	case len(c.args) == 5 && c.args[1] == "-t" && c.args[3] == "-T" && c.args[4] == "show":
		listing, err := e.DataPlane.Listing(ctx)
		if err != nil {
			return c.errorf(1, "pfctl: %v", err)
		}
		found := false
		for _, n := range SetNames(listing) {
			found = found || n == c.args[2]
		}
		if !found {
			return c.errorf(1, "pfctl: Table does not exist.")
		}
		els, err := e.DataPlane.SetElements(ctx, c.args[2])
		if err != nil {
			return c.errorf(1, "pfctl: %v", err)
		}
		var b strings.Builder
		for _, el := range els {
			b.WriteString("   ")
			b.WriteString(el)
			b.WriteByte('\n')
		}
		_, err = fmt.Fprint(c.stdout, b.String())
		return err
	}
	return c.errorf(1, "pfctl: the lab emulates -sr, -sn, -si, -s Tables and -t TABLE -T show")
}

func (e *Emulator) pfRules(ctx context.Context, c *call, nat bool) error {
	listing, err := e.DataPlane.Listing(ctx)
	if err != nil {
		return c.errorf(1, "pfctl: %v", err)
	}
	e.mu.Lock()
	table := e.pf
	e.mu.Unlock()
	_, err = c.stdout.Write(pfLines(RuleKeys(listing), table, nat))
	return err
}

// pfInfo is pfctl -si. The status comes from the data plane: Disabled when
// no filter is hooked in (router mode, <system><disablefilter>).
//
// upstream: not settled — the `Status:` line is FreeBSD pfctl's (not in the upstream copy); fwab reads only its Enabled or Disabled word, checked at run time by fwapi.ParsePfctlStatus, which refuses any other first line
func (e *Emulator) pfInfo(ctx context.Context, c *call) error {
	listing, err := e.DataPlane.Listing(ctx)
	if err != nil {
		return c.errorf(1, "pfctl: %v", err)
	}
	status := "Disabled"
	if pfEnabled(listing) {
		status = "Enabled"
	}
	states, _ := e.DataPlane.StateCount(ctx)
	e.mu.Lock()
	up := time.Since(e.booted)
	e.mu.Unlock()
	d := int(up.Hours()) / 24
	h, m, s := int(up.Hours())%24, int(up.Minutes())%60, int(up.Seconds())%60
	fmt.Fprintf(c.stdout, "Status: %s for %d days %02d:%02d:%02d           Debug: Urgent\n\n", status, d, h, m, s)
	fmt.Fprintln(c.stdout, "State Table                          Total             Rate")
	fmt.Fprintf(c.stdout, "  current entries                 %8d               \n", states)
	return nil
}

// cmdSysctl answers the readings fwab samples, from the host's /proc (the
// emulated box shares this machine's CPUs and memory).
func (e *Emulator) cmdSysctl(ctx context.Context, c *call) error {
	args := c.args[1:]
	if len(args) == 0 || args[0] != "-n" {
		return c.errorf(1, "sysctl: the lab emulates 'sysctl -n NAME...'")
	}
	var rc uint8
	for _, name := range args[1:] {
		v, ok := e.sysctlValue(name)
		if !ok {
			fmt.Fprintf(c.stderr, "sysctl: unknown oid '%s'\n", name)
			rc = 1
			continue
		}
		fmt.Fprintln(c.stdout, v)
	}
	return status(rc)
}

func meminfo() map[string]int64 {
	out := map[string]int64{}
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			out[strings.TrimSuffix(f[0], ":")] = v * 1024
		}
	}
	return out
}

// sysctlValue is one reading. With a CPU budget (Emulator.CPU) the CPUs
// are the budget's: hw.ncpu is the budget rounded up and kern.cp_times the
// services' cgroup usage against it (CPUGroup.CPTimes); forwarding's
// softirq time is not in it (it runs in whichever task's context sent the
// packet, on this machine's veths, and cannot be told apart per namespace).
func (e *Emulator) sysctlValue(name string) (string, bool) {
	if name == "kern.boottime" {
		// FreeBSD prints the struct timeval and its ctime(3).
		// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1886 — `preg_match("/sec = (\d+)/", $boottime, $matches);`
		e.mu.Lock()
		b := e.booted
		e.mu.Unlock()
		return fmt.Sprintf("{ sec = %d, usec = %d } %s", b.Unix(), b.Nanosecond()/1000, b.Format("Mon Jan _2 15:04:05 2006")), true
	}
	if g := e.CPU; g != nil {
		switch name {
		case "hw.ncpu":
			return strconv.Itoa(g.CPUs()), true
		case "kern.cp_times":
			v, err := g.CPTimes(time.Now())
			if err != nil {
				e.logger().Warn("sysctl kern.cp_times: the budget's usage", "err", err)
				return "", false
			}
			return v, true
		}
	}
	return sysctlValue(name)
}

func sysctlValue(name string) (string, bool) {
	switch name {
	case "hw.model":
		// The emulated box runs on this machine's CPUs.
		data, err := os.ReadFile("/proc/cpuinfo")
		if err != nil {
			return "", false
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				return strings.TrimSpace(v), true
			}
		}
		return "unknown CPU", true
	case "hw.ncpu":
		return strconv.Itoa(runtime.NumCPU()), true
	case "kern.cp_times":
		// Linux: user nice system idle iowait irq softirq; FreeBSD: user nice
		// sys intr idle, per CPU.
		data, err := os.ReadFile("/proc/stat")
		if err != nil {
			return "", false
		}
		var vals []string
		for _, line := range strings.Split(string(data), "\n") {
			f := strings.Fields(line)
			if len(f) < 8 || !strings.HasPrefix(f[0], "cpu") || f[0] == "cpu" {
				continue
			}
			n := make([]int64, 7)
			for i := range n {
				n[i], _ = strconv.ParseInt(f[i+1], 10, 64)
			}
			vals = append(vals, strconv.FormatInt(n[0], 10), strconv.FormatInt(n[1], 10), strconv.FormatInt(n[2], 10),
				strconv.FormatInt(n[5]+n[6], 10), strconv.FormatInt(n[3]+n[4], 10))
		}
		return strings.Join(vals, " "), true
	case "dev.cpu.0.temperature":
		for _, z := range []string{"/sys/class/thermal/thermal_zone0/temp", "/sys/class/hwmon/hwmon0/temp1_input"} {
			if b, err := os.ReadFile(z); err == nil {
				if v, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err == nil {
					return fmt.Sprintf("%.1fC", v/1000), true
				}
			}
		}
		return "", false // no sensor, like a VM without coretemp
	case "hw.physmem":
		return strconv.FormatInt(meminfo()["MemTotal"], 10), true
	case "hw.pagesize":
		return "4096", true
	case "vm.stats.vm.v_page_count":
		return strconv.FormatInt(meminfo()["MemTotal"]/4096, 10), true
	case "vm.stats.vm.v_free_count":
		return strconv.FormatInt(meminfo()["MemAvailable"]/4096, 10), true
	case "kern.ipc.nmbufs":
		return "3260460", true
	}
	return "", false
}

// cmdNetstat prints `netstat -m` and the interface statistics fwab reads.
// The mbuf figures are synthetic (Linux has no mbufs): a fixed pool whose
// use grows with the connection-state count.
func (e *Emulator) cmdNetstat(ctx context.Context, c *call) error {
	if strings.Join(c.args[1:], " ") == netstatLinks {
		return e.netstatLinks(ctx, c)
	}
	if len(c.args) != 2 || c.args[1] != "-m" {
		return c.errorf(1, "netstat: the lab emulates 'netstat -m' and 'netstat %s'", netstatLinks)
	}
	states, _ := e.DataPlane.StateCount(ctx)
	cur := 2048 + 4*states
	fmt.Fprintf(c.stdout, "%d/%d/%d mbufs in use (current/cache/total)\n", cur, 3000, cur+3000)
	fmt.Fprintf(c.stdout, "%d/%d/%d/%d mbuf clusters in use (current/cache/total/max)\n", cur/2, 1500, cur/2+1500, 1000000)
	fmt.Fprintf(c.stdout, "%d/%d mbuf+clusters out of packet secondary zone in use (current/cache)\n", cur/4, 1000)
	fmt.Fprintln(c.stdout, "0/0/0/0 4k (page size) jumbo clusters in use (current/cache/total/max)")
	fmt.Fprintf(c.stdout, "%dK/%dK/%dK bytes allocated to network (current/cache/total)\n", cur*2, 7000, cur*2+7000)
	fmt.Fprintln(c.stdout, "0/0/0 requests for mbufs denied (mbufs/clusters/mbuf+clusters)")
	fmt.Fprintln(c.stdout, "0 sendfile syscalls")
	return nil
}

// netstatLinks is the interface statistics command OPNsense's own
// Diagnostics page runs; fwab runs it on both products.
//
// upstream: opnsense-core 26.7 src/opnsense/service/conf/actions.d/actions_interface.conf:257 — `command:/usr/bin/netstat -i -n -W -b -d --libxo json` ([show.interfaces]; 24.7:219)
const netstatLinks = "-i -n -W -b -d --libxo json"

// netstatLinks prints each port's link-level row as FreeBSD's netstat -i
// does under libxo's JSON: the veth's counters, plus the input errors a
// fault adds, and the loopback. Address rows carry no error counters on
// FreeBSD (show_stat prints "-" for them), so none are printed.
//
// upstream: not settled — the keys (statistics.interface[], name, network "<Link#N>", received-errors, send-errors) are FreeBSD's usr.bin/netstat/if.c intpr(), not in the upstream copy; OPNsense's InterfaceController.php getInterfaceStatisticsAction reads statistics.interface[].name and address; checked at run time: fwapi.ParseNetstatLinks refuses an answer without a link row that has both counters
func (e *Emulator) netstatLinks(ctx context.Context, c *call) error {
	e.fmu.Lock()
	added, base := maps.Clone(e.linkErrs), maps.Clone(e.linkBase)
	e.fmu.Unlock()
	type row struct {
		Name       string `json:"name"`
		Flags      string `json:"flags"`
		MTU        int    `json:"mtu"`
		Network    string `json:"network"`
		Address    string `json:"address,omitempty"`
		InPackets  uint64 `json:"received-packets"`
		InErrors   uint64 `json:"received-errors"`
		InDrops    uint64 `json:"dropped-packets"`
		InBytes    uint64 `json:"received-bytes"`
		OutPackets uint64 `json:"sent-packets"`
		OutErrors  uint64 `json:"send-errors"`
		OutBytes   uint64 `json:"sent-bytes"`
		Collisions uint64 `json:"collisions"`
	}
	var rows []row
	for i, in := range e.fbIfaces() {
		l := VethState{MTU: 1500, MAC: "02:00:00:00:00:99", Up: true}
		if in.veth != "" {
			var err error
			if l, err = e.DataPlane.Link(ctx, in.veth); err != nil {
				return c.errorf(1, "netstat: %s: %v", in.dev, err)
			}
		}
		flags := "0x8843"
		if !l.Up || in.veth == "" { // the spare NIC is assigned to nothing: down
			flags = "0x8802"
		}
		st := l.Stats.Since(base[in.veth])
		rows = append(rows, row{in.dev, flags, l.MTU, fmt.Sprintf("<Link#%d>", i+1), l.MAC,
			st.InPackets, st.InErrors + added[in.dev], st.InDrops, st.InBytes, st.OutPackets, st.OutErrors, st.OutBytes, 0})
	}
	// The pseudo-interfaces every box has; their link rows carry the
	// name as the address.
	for _, p := range []struct {
		name, flags string
		mtu         int
	}{{"enc0", "0x0", 1536}, {"lo0", "0x8049", 16384}, {"pflog0", "0x100", 33152}} {
		rows = append(rows, row{Name: p.name, Flags: p.flags, MTU: p.mtu, Network: fmt.Sprintf("<Link#%d>", len(rows)+1), Address: p.name, InErrors: added[p.name]})
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false) // "<Link#1>" as libxo writes it
	return enc.Encode(map[string]any{"statistics": map[string]any{"interface": rows}})
}

// zeroLinkCounters starts the counters netstat shows from zero, as a
// boot does: the veths' counters now are the base, the faults' errors
// are gone.
func (e *Emulator) zeroLinkCounters(ctx context.Context) {
	base := map[string]LinkStats{}
	for _, in := range e.fbIfaces() {
		if in.veth == "" {
			continue
		}
		if l, err := e.DataPlane.Link(ctx, in.veth); err == nil {
			base[in.veth] = l.Stats
		}
	}
	e.fmu.Lock()
	e.linkBase, e.linkErrs = base, nil
	e.fmu.Unlock()
}

// cmdPhp runs pfBlockerNG's update: it loads or removes the blocklist table
// according to enable_cb, then reloads the filter.
func (e *Emulator) cmdPhp(ctx context.Context, c *call) error {
	if len(c.args) == 3 && c.args[1] == "-r" {
		return e.phpCode(ctx, c, c.args[2])
	}
	if e.opnsense() || len(c.args) != 3 || c.args[1] != "/usr/local/www/pfblockerng/pfblockerng.php" {
		return c.errorf(1, "php: the lab emulates only /usr/local/www/pfblockerng/pfblockerng.php update|updateip|cron on pfSense")
	}
	return e.pfBlockerNG(ctx, c, c.args[2])
}

func (e *Emulator) cmdFilterReload(ctx context.Context, c *call) error {
	return e.reload(ctx, c, false)
}

func (e *Emulator) cmdReloadInterfaces(ctx context.Context, c *call) error {
	return e.reload(ctx, c, true)
}

// reload is rc.filter_configure_sync, and with interfaces
// rc.reload_interfaces: the offloads first, then the rules, then the
// firmware's slowdown for the new configuration.
func (e *Emulator) reload(ctx context.Context, c *call, interfaces bool) error {
	if len(c.args) != 1 {
		return c.errorf(1, "%s: takes no arguments", c.args[0])
	}
	switch {
	case strings.HasSuffix(c.args[0], "rc.reload_all"):
		e.did(ActionReloadAll)
	case interfaces:
		e.did(configxml.ActionInterfaces)
	default:
		e.did(configxml.ActionFilterReload)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return c.errorf(1, "%s: %v", c.args[0], err)
	}
	if interfaces {
		if err := e.applyInterfaces(ctx, root); err != nil {
			return c.errorf(1, "%s: %v", c.args[0], err)
		}
		// interfaces_configure() ends with ipsec_configure(): a reload
		// in the background.
		// upstream: pfsense 2.7.2 src/etc/inc/interfaces.inc:1726 — `ipsec_configure();` inside interfaces_configure()
		if err := e.applyIPsecBackground(ctx, root, ipsecReload); err != nil {
			return c.errorf(1, "%s: %v", c.args[0], err)
		}
	}
	if err := e.applyFilter(ctx, root); err != nil {
		fmt.Fprintf(c.stdout, "There were error(s) loading the rules: %v\n", err)
		return status(1)
	}
	if err := e.applySlowdown(ctx); err != nil {
		return c.errorf(1, "%s: %v", c.args[0], err)
	}
	if interfaces {
		// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1070 — `interfaces_configure()` in reload_interfaces_sync (rc.reload_interfaces), and at 1127 in reload_all_sync (rc.reload_all): every interface
		e.managementReconfigured(c.args[0])
	}
	return nil
}

// cmdPfSsh runs pfSsh.php playback scripts. Restarting suricata restarts
// the IDS engines (ids.go); restartipsec and svc restart ipsec regenerate
// and restart strongSwan (ipsec.go); other services change nothing.
func (e *Emulator) cmdPfSsh(ctx context.Context, c *call) error {
	a := c.args[1:]
	switch {
	case len(a) == 2 && a[0] == "playback" && a[1] == "restartipsec":
		return e.cmdIPsecRestart(ctx, c)
	case len(a) == 4 && a[0] == "playback" && a[1] == "svc" && a[2] == "restart" && a[3] == "ipsec":
		return e.cmdIPsecRestart(ctx, c)
	case len(a) == 4 && a[0] == "playback" && a[1] == "svc" && a[2] == "restart":
		switch a[3] {
		case "suricata":
			if err := e.suricata(ctx, "restart"); err != nil {
				return c.errorf(1, "%v", err)
			}
			return nil
		case "ipsec", "sshd", "unbound", "dpinger", "ntpd":
			return nil
		}
		return c.errorf(1, "Could not find service: %s", a[3])
	}
	return c.errorf(1, "pfSsh.php: the lab emulates 'playback svc restart SERVICE' and 'playback restartipsec'")
}

// The script is the file the last sync wrote: where there is none (no
// enabled interface, or a box where Suricata was never set up) running it
// fails as a missing command does.
func (e *Emulator) cmdSuricataRC(ctx context.Context, c *call) error {
	if _, err := os.Stat(e.path(suricataRC)); err != nil {
		return c.errorf(127, "%s: not found", suricataRC)
	}
	if len(c.args) == 2 && (c.args[1] == "restart" || c.args[1] == "start" || c.args[1] == "stop") {
		if err := e.suricata(ctx, c.args[1]); err != nil {
			return c.errorf(1, "%v", err)
		}
		return nil
	}
	return c.errorf(1, "usage: suricata.sh start|stop|restart")
}

// pfUpgradeUsage is pfSense-upgrade's usage line (the copy read lacks -C,
// which 2.7.2's GUI passes; the lab lists it).
//
// upstream: not settled — the option set `46b:cdfi:hp:l:nr:RuUy`, the usage text, `-c` printing `${_new_version} version of ${product} is available` with exit 2, and no positional version come from pfsense/FreeBSD-ports@009c913849dd9b059a328e69864c01f01d2dd13b sysutils/pfSense-upgrade/files/pfSense-upgrade (older than 2.7.2's package; lines past 44 not verified); checked at run time by fwapi's Upgrade, which reads `pfSense-upgrade -h` and refuses without -c
const pfUpgradeUsage = "Usage: pfSense-upgrade [-46bdfhnRUy] [-l logfile] [-p socket] [-c|-u|[-i|-d] pkg_name]"

// upgradeStageFile keeps the emulated kernel package's next_stage
// annotation ("STAGE VERSION") in the package database, which survives a
// reboot.
const upgradeStageFile = "/var/db/pkg/fwab-next_stage"

// cmdUpgrade is pfSense-upgrade: its getopts option set, stopping at the
// first non-option and ignoring what follows (the real script never reads
// a positional argument); -c checks what the branch offers (the lab's
// branch offers the next profile, a real one its newest release); -y
// upgrades to it in stages: the kernel and a reboot, then at boot the
// base (a second reboot for a major upgrade), then the last stage.
func (e *Emulator) cmdUpgrade(ctx context.Context, c *call) error {
	const withArg = "blip" // b: i: l: p: r: take an argument
	action, yes := "upgrade", false
	args := c.args[1:]
	for len(args) > 0 && strings.HasPrefix(args[0], "-") && args[0] != "-" {
		a := args[0]
		args = args[1:]
		if a == "--" {
			break
		}
		for k := 1; k < len(a); k++ {
			o := a[k]
			if !strings.ContainsRune("46bcdfhinprlRuUyC", rune(o)) {
				fmt.Fprintf(c.stderr, "pfSense-upgrade: illegal option -- %c\n%s\n", o, pfUpgradeUsage)
				return status(1)
			}
			if strings.IndexByte(withArg, o) >= 0 || o == 'r' {
				if k+1 < len(a) {
					k = len(a)
				} else if len(args) > 0 {
					args = args[1:]
				} else {
					fmt.Fprintf(c.stderr, "pfSense-upgrade: option requires an argument -- %c\n%s\n", o, pfUpgradeUsage)
					return status(1)
				}
			}
			switch o {
			case 'h':
				fmt.Fprintln(c.stdout, pfUpgradeUsage)
				for _, l := range []string{"  -4          - Force IPv4", "  -6          - Force IPv6", "  -b          - Platform is booting",
					"  -c          - Check if upgrade is necessary", "  -C          - Check if upgrade is necessary on other branches",
					"  -n          - Dry run", "  -U          - Do not update repository information", "  -y          - Assume yes"} {
					fmt.Fprintln(c.stdout, l)
				}
				return nil
			case 'c', 'C':
				action = "check"
			case 'y':
				yes = true
			case 'u':
				action = "update"
			}
		}
	}
	// args (a version, say) are ignored, as by the real script.
	cur, i := e.profile()
	var next *Profile
	if i >= 0 && i+1 < len(e.Profiles) {
		next = &e.Profiles[i+1]
	}
	fmt.Fprintln(c.stdout, ">>> Updating repositories metadata... done.")
	switch action {
	case "check":
		if next == nil {
			fmt.Fprintln(c.stdout, "Your system is up to date")
			return nil
		}
		fmt.Fprintf(c.stdout, "%s version of pfSense is available\n", pkgVersion(next.Version))
		return status(2)
	case "update":
		return nil
	}
	if next == nil {
		fmt.Fprintln(c.stdout, "Your packages are up to date")
		return nil
	}
	if !yes {
		return c.errorf(1, "pfSense-upgrade: the lab cannot prompt over SSH; use -y")
	}
	fmt.Fprintf(c.stdout, ">>> Upgrading %s from %s to %s... done.\n", e.pfKernelPackage(), cur.Version, next.Version)
	if err := e.WriteFile(upgradeStageFile, []byte("2 "+next.Version+"\n")); err != nil {
		return c.errorf(1, "pfSense-upgrade: %v", err)
	}
	fmt.Fprintln(c.stdout, "Upgrade is complete.  Rebooting in 1 seconds.")
	e.logger().Info("upgrade stage 1", "from", cur.Version, "to", next.Version)
	e.rebootSoon()
	return nil
}

// pkgVersion is the package version pfSense-upgrade prints for a product
// version: 2.8.0-RELEASE is the package 2.8.0.
func pkgVersion(v string) string {
	p, _, _ := strings.Cut(v, "-")
	return p
}

// upgradeAtBoot runs the next upgrade stage at boot, as pfSense-rc runs
// `pfSense-upgrade -y -U -b 2` and `-b 3`: stage 2 installs the base
// (/etc/version) early in the boot, and reboots again when the major
// version changed; stage 3 reinstalls the packages late in the boot,
// after rc.bootup has started sshd: SSH answers while the annotation still
// says 3, for as long as the packages take (Stage3Time here).
//
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:401 — `&& /usr/local/sbin/${product_name}-upgrade -y -U -b 2`
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:482 — `/etc/rc.bootup`, which starts sshd, before stage 3
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:557 — `&& /usr/local/sbin/${product_name}-upgrade -y -U -b 3`
func (e *Emulator) upgradeAtBoot() {
	data, err := os.ReadFile(e.path(upgradeStageFile))
	if err != nil {
		return
	}
	stage, version, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	if stage == "2" {
		cur, _ := e.profile()
		for _, p := range e.Profiles {
			if p.Version == version {
				if err := e.writeVersion(p); err != nil {
					e.logger().Error("upgrade stage 2", "err", err)
					return
				}
			}
		}
		_ = e.WriteFile(upgradeStageFile, []byte("3 "+version+"\n"))
		if majorOf(cur.Version) != majorOf(version) {
			e.logger().Info("upgrade stage 2: major upgrade, rebooting again", "to", version)
			e.afterBoot(300*time.Millisecond, func() { e.Reboot(context.Background()) })
			return
		}
	}
	// Stage 3 runs as a process with its pid file, holding the package
	// database's lock while it reinstalls: pkg's queries fail until it ends.
	//
	// upstream: pfsense/FreeBSD-ports@314385e870766782a4df90631eac38bde9d693cf sysutils/pfSense-upgrade/files/pfSense-upgrade:2364 — `echo $$ > ${pid_file}` (`pid_file="/var/run/$(basename $0).pid"` at 2159)
	// upstream: pfsense/FreeBSD-ports@314385e870766782a4df90631eac38bde9d693cf sysutils/pfSense-upgrade/files/pfSense-upgrade:1663 — `_pkg annotate -q -D ${kernel_pkg} next_stage` once the packages are done
	boot := e.Boots() + 1 // this one, which Boot counts when it is done
	run, cancel := context.WithCancel(e.lifetime())
	p := e.procs.add("/bin/sh /usr/local/sbin/pfSense-upgrade -y -U -b 3", cancel)
	_ = e.WriteFile(pfUpgradePIDFile, []byte(strconv.Itoa(p.pid)+"\n"))
	e.pkgLocked.Store(true)
	go func() { // ended or killed (a reboot)
		<-run.Done()
		e.pkgLocked.Store(false)
		e.procs.remove(p.pid)
		close(p.done)
	}()
	e.afterBoot(cmp.Or(e.Stage3Time, time.Second), func() {
		defer cancel()
		// A reboot in the meantime cut stage 3 short: the next boot runs it.
		if e.Boots() == boot && run.Err() == nil {
			_ = os.Remove(e.path(upgradeStageFile))
			_ = os.Remove(e.path(pfUpgradePIDFile))
		}
	})
}

// pfUpgradePIDFile is pfSense-upgrade's pid file while it runs.
const pfUpgradePIDFile = "/var/run/pfSense-upgrade.pid"

// afterBoot runs f in the background, d after the boot under way has
// brought SSH back.
func (e *Emulator) afterBoot(d time.Duration, f func()) {
	go func() {
		for e.rebooting() {
			time.Sleep(50 * time.Millisecond)
		}
		select {
		case <-time.After(d):
			f()
		case <-e.lifetime().Done():
		}
	}()
}

// majorOf is a version's major.minor: 2.7 of 2.7.2-RELEASE.
func majorOf(v string) string {
	f := strings.SplitN(pkgVersion(v), ".", 3)
	if len(f) < 2 {
		return v
	}
	return f[0] + "." + f[1]
}

// cmdPkg answers `pkg info` with the one package the lab really runs: the
// product's own, at the running version. The emulated add-ons (Suricata,
// pfBlockerNG) are the lab's code, not packages, so they are not listed.
//
// upstream: not settled — the product's meta package names (`pfSense`, `opnsense`) and pkg's line layout are from the ports trees, not the upstream copy; checked at run time by fwapi.ParsePkgInfo, which refuses a line without NAME-VERSION
func (e *Emulator) cmdPkg(ctx context.Context, c *call) error {
	if len(c.args) != 2 || c.args[1] != "info" {
		return c.errorf(1, "pkg: the lab emulates only 'pkg info'")
	}
	v := strings.TrimSuffix(e.Version(), "-RELEASE")
	if e.opnsense() {
		fmt.Fprintf(c.stdout, "%-30s %s\n", "opnsense-"+v, "OPNsense release package")
	} else {
		fmt.Fprintf(c.stdout, "%-30s %s\n", "pfSense-"+v, "Meta package to install pfSense required ports")
	}
	return nil
}

// pfKernelPackage is the kernel package of the emulated pfSense; a
// Netgate model has its own (pfSense-kernel-pfSense-3100, say), which
// pfSense-upgrade finds with `pkg info` rather than by name. A debug
// kernel package sits beside it, which pfSense-upgrade filters out.
//
// upstream: pfsense/FreeBSD-ports@314385e870766782a4df90631eac38bde9d693cf sysutils/pfSense-upgrade/files/pfSense-upgrade:1110 — `export kernel_pkg=$(_pkg query %n $(_pkg info \` with `${product}-kernel-\* | grep -v -- -debug-))` at 1111
func (e *Emulator) pfKernelPackage() string {
	return cmp.Or(e.KernelPackage, "pfSense-kernel-pfSense")
}

// pfKernelPackages are the kernel packages `pkg info` lists, name-version:
// the running kernel and a debug kernel.
func (e *Emulator) pfKernelPackages() []string {
	v := pkgVersion(e.Version())
	return []string{e.pfKernelPackage() + "-" + v, "pfSense-kernel-debug-pfSense-" + v}
}

// cmdPkgStatic answers the pkg queries fwab makes: `info GLOB` and
// `query %n PKG...` over the kernel packages (pfSense-upgrade's way to find
// the kernel package), and `annotate -q -S PKG next_stage`.
func (e *Emulator) cmdPkgStatic(ctx context.Context, c *call) error {
	a := c.args[1:]
	if e.pkgLocked.Load() {
		return c.errorf(1, "pkg-static: Cannot get a read lock on a database, it is locked by another process")
	}
	switch {
	case len(a) == 2 && a[0] == "info":
		var found bool
		for _, p := range e.pfKernelPackages() {
			if ok, _ := path.Match(a[1], p); ok {
				fmt.Fprintln(c.stdout, p)
				found = true
			}
		}
		if !found {
			return c.errorf(1, "pkg-static: No package(s) matching %s", a[1])
		}
		return nil
	case len(a) == 4 && a[0] == "query" && a[1] == "-g" && a[2] == "%n":
		for _, p := range e.pfKernelPackages() {
			name := p[:strings.LastIndexByte(p, '-')]
			if ok, _ := path.Match(a[3], name); ok {
				fmt.Fprintln(c.stdout, name)
			}
		}
		return nil
	case len(a) >= 3 && a[0] == "query" && a[1] == "%n":
		for _, want := range a[2:] {
			i := slices.Index(e.pfKernelPackages(), want)
			if i < 0 {
				return c.errorf(1, "pkg-static: No package(s) matching %s", want)
			}
			name := e.pfKernelPackages()[i]
			fmt.Fprintln(c.stdout, name[:strings.LastIndexByte(name, '-')])
		}
		return nil
	case len(a) == 5 && a[0] == "annotate" && a[1] == "-q" && a[2] == "-S" && a[4] == "next_stage":
	default:
		return c.errorf(1, "pkg-static: the lab emulates only 'info GLOB', 'query [-g] %%n PKG...' and 'annotate -q -S PKG next_stage'")
	}
	if !slices.ContainsFunc(e.pfKernelPackages(), func(p string) bool { return p[:strings.LastIndexByte(p, '-')] == a[3] }) {
		// upstream: not settled — pkg(8)'s answer for a package that is not installed is FreeBSD's, not in the upstream copy; the harsher reading (an error); checked at run time by fwab's stage poll, which asks again on any pkg error
		return c.errorf(1, "pkg-static: No package(s) matching %s", a[3])
	}
	if a[3] != e.pfKernelPackage() {
		return nil // the debug kernel carries no stage
	}
	data, err := os.ReadFile(e.path(upgradeStageFile))
	if err != nil {
		return nil
	}
	stage, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	fmt.Fprintln(c.stdout, stage)
	return nil
}

// phpCode runs the PHP the lab emulates: the GUI's offload apply
// (offload.go), and the Suricata package's resync, which bakes the rc script from the config as it is now
// (pfSense reads /tmp/config.cache first).
// ipsecConfigurePHP is a call of pfSense's ipsec_configure() after the
// includes it needs: what the GUI's IPsec apply runs (without $restart:
// strongSwan reloaded) and restartipsec (with true: restarted).
var ipsecConfigurePHP = regexp.MustCompile(`^(?:require_once\("[a-z_]+\.inc"\); )+ipsec_configure\((true)?\);$`)

func (e *Emulator) phpCode(ctx context.Context, c *call, code string) error {
	if handled, err := e.offloadPHP(ctx, code); handled {
		if err != nil {
			return c.errorf(255, "php: %v", err)
		}
		return nil
	}
	if m := pfInstallConfigPHP.FindStringSubmatch(code); m != nil && !e.opnsense() {
		unlocked, _ := strconv.Atoi(m[2])
		refused, _ := strconv.Atoi(m[4])
		return e.pfInstallConfig(c, phpExit{m[1], unlocked}, m[3], refused, m[5], m[6], m[7])
	}
	if m := ipsecConfigurePHP.FindStringSubmatch(code); m != nil {
		how := ipsecReload
		if m[1] == "true" {
			how = ipsecRestart
		}
		return e.ipsecConfigure(ctx, c, how)
	}
	if !strings.Contains(code, `require_once("/usr/local/pkg/suricata/suricata.inc")`) || !strings.Contains(code, "sync_suricata_package_config();") {
		return c.errorf(255, "php: the lab emulates only the GUI's offload apply, require_once(...); ipsec_configure([true]); and require_once(\"/usr/local/pkg/suricata/suricata.inc\"); ... sync_suricata_package_config();")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return c.errorf(255, "php: %v", err)
	}
	// fwab's sync sets $rebuild_rules (fwapi's pfSuricataSync); a sync
	// without it leaves the rule files as they are.
	if err := e.bakeSuricataRC(root, strings.Contains(code, "$rebuild_rules = true;")); err != nil {
		return c.errorf(255, "php: %v", err)
	}
	if err := e.suricataCronLocked(); err != nil {
		return c.errorf(255, "php: %v", err)
	}
	return nil
}
