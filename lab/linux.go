package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/fwab/fwab/emu"
)

// LinuxDataPlane applies to the DUT namespace of a topology.
type LinuxDataPlane struct {
	Topo Topology
	// TmpDir holds ruleset files for nft -f (they are large with a blocklist).
	TmpDir string
	// CPU is the cgroup ruleset loads run in (the DUT's service budget:
	// pfBlockerNG's loader and pfctl are userspace work); nil: none.
	CPU *CPUGroup
}

var _ emu.DataPlane = (*LinuxDataPlane)(nil)

func (d *LinuxDataPlane) ns() string { return d.Topo.Namespace("dut") }

func (d *LinuxDataPlane) inNS(ctx context.Context, stdin []byte, name string, args ...string) (string, error) {
	return run(ctx, stdin, "ip", append([]string{"netns", "exec", d.ns(), name}, args...)...)
}

func (d *LinuxDataPlane) LoadRuleset(ctx context.Context, script string) error {
	f, err := os.CreateTemp(d.TmpDir, "ruleset-*.nft")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	argv := d.CPU.Wrap("ip", "netns", "exec", d.ns(), "nft", "-f", f.Name())
	_, err = run(ctx, nil, argv[0], argv[1:]...)
	return err
}

// Listing uses `nft -t list ruleset`: listing a table dumps its set
// elements from the kernel even with -t (0.8 s for the blocklist), the terse
// ruleset does not (5 ms).
func (d *LinuxDataPlane) Listing(ctx context.Context) (string, error) {
	out, err := d.inNS(ctx, nil, "nft", "-t", "list", "ruleset")
	if err != nil {
		return "", err
	}
	return emu.TableSections(out, emu.BlocklistTable, emu.FilterTable), nil
}

func (d *LinuxDataPlane) SetElements(ctx context.Context, set string) ([]string, error) {
	out, err := d.inNS(ctx, nil, "nft", "list", "set", "ip", emu.BlocklistTable, set)
	if err != nil {
		return nil, err
	}
	return emu.SetElementsOf(out, set), nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// Offload mapping on veth (measured on the lab's kernel): tx-checksumming
// and rx-checksumming are TXCSUM and RXCSUM; tcp-segmentation-offload is
// TSO4/TSO6; veth's large-receive-offload is fixed off, so LRO maps to
// generic-receive-offload.
func (d *LinuxDataPlane) SetOffloads(ctx context.Context, veth string, o emu.Offloads) error {
	// Checksum first: TSO needs tx checksumming and ethtool refuses TSO on
	// without it.
	if _, err := d.inNS(ctx, nil, "ethtool", "-K", veth, "tx", onOff(o.TXCSUM), "rx", onOff(o.RXCSUM)); err != nil {
		return err
	}
	_, err := d.inNS(ctx, nil, "ethtool", "-K", veth, "tso", onOff(o.TSO && o.TXCSUM), "gro", onOff(o.LRO))
	return err
}

func (d *LinuxDataPlane) Offloads(ctx context.Context, veth string) (emu.Offloads, error) {
	out, err := d.inNS(ctx, nil, "ethtool", "-k", veth)
	if err != nil {
		return emu.Offloads{}, err
	}
	return parseEthtoolFeatures(out), nil
}

// parseEthtoolFeatures reads `ethtool -k` output.
func parseEthtoolFeatures(out string) emu.Offloads {
	f := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f[strings.TrimSpace(k)] = strings.HasPrefix(strings.TrimSpace(v), "on")
	}
	return emu.Offloads{
		TXCSUM: f["tx-checksumming"],
		RXCSUM: f["rx-checksumming"],
		TSO:    f["tcp-segmentation-offload"],
		LRO:    f["generic-receive-offload"] || f["large-receive-offload"],
	}
}

func (d *LinuxDataPlane) Link(ctx context.Context, veth string) (emu.VethState, error) {
	out, err := run(ctx, nil, "ip", "-n", d.ns(), "-s", "-j", "addr", "show", "dev", veth)
	if err != nil {
		return emu.VethState{}, err
	}
	type counters struct {
		Bytes   uint64 `json:"bytes"`
		Packets uint64 `json:"packets"`
		Errors  uint64 `json:"errors"`
		Dropped uint64 `json:"dropped"`
	}
	var links []struct {
		MTU       int    `json:"mtu"`
		Address   string `json:"address"`
		OperState string `json:"operstate"`
		AddrInfo  []struct {
			Family    string `json:"family"`
			Local     string `json:"local"`
			PrefixLen int    `json:"prefixlen"`
		} `json:"addr_info"`
		Stats struct {
			RX counters `json:"rx"`
			TX counters `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) == 0 {
		return emu.VethState{}, fmt.Errorf("ip addr show %s: unexpected output", veth)
	}
	rx, tx := links[0].Stats.RX, links[0].Stats.TX
	l := emu.VethState{MTU: links[0].MTU, MAC: links[0].Address, Up: links[0].OperState == "UP", Stats: emu.LinkStats{
		InPackets: rx.Packets, InErrors: rx.Errors, InDrops: rx.Dropped, InBytes: rx.Bytes,
		OutPackets: tx.Packets, OutErrors: tx.Errors, OutDrops: tx.Dropped, OutBytes: tx.Bytes,
	}}
	for _, a := range links[0].AddrInfo {
		if p, err := netip.ParseAddr(a.Local); err == nil && a.Family == "inet" {
			l.Addrs = append(l.Addrs, netip.PrefixFrom(p, a.PrefixLen))
		}
	}
	return l, nil
}

// Shape sets a tbf cap. The burst holds 25 ms at the rate: tbf needs at
// least one timer tick's worth at high rates, and on a busy machine its
// watchdog runs late, which a short burst turns into lost rate. A full
// bucket at the start of a probe lets 25 ms more through: under 1 % of a
// 3 s probe.
func (d *LinuxDataPlane) Shape(ctx context.Context, veth string, rateMbit float64) error {
	_, _ = d.inNS(ctx, nil, "tc", "qdisc", "del", "dev", veth, "root")
	if rateMbit <= 0 {
		return nil
	}
	burst := int(math.Max(rateMbit*1e6/8*0.025, 262144))
	_, err := d.inNS(ctx, nil, "tc", "qdisc", "add", "dev", veth, "root", "tbf",
		"rate", fmt.Sprintf("%dkbit", int(rateMbit*1000)), "burst", strconv.Itoa(burst), "latency", "50ms")
	return err
}

func (d *LinuxDataPlane) Reset(ctx context.Context) error {
	// One transaction: the filter table goes from the last ruleset to
	// dropping everything, with no moment of unfiltered forwarding.
	_, err := d.inNS(ctx, []byte(fmt.Sprintf("table ip %s {}\ndelete table ip %s\n%s", emu.BlocklistTable, emu.BlocklistTable, emu.DownRuleset)), "nft", "-f", "-")
	for _, v := range []string{d.Topo.DUTLanIf(), d.Topo.DUTWanIf()} {
		_ = d.Shape(ctx, v, 0)
	}
	return errors.Join(err, d.flushStates())
}

// flushStates empties the DUT's connection-tracking table, as a reboot
// empties pf's (kernel memory): ctnetlink's IPCTNL_MSG_CT_DELETE without
// a tuple, what conntrack -F sends; with nfgenmsg version 0 the kernel
// flushes every family, not only the one named.
func (d *LinuxDataPlane) flushStates() error {
	ns, err := os.Open(filepath.Join("/var/run/netns", d.ns()))
	if err != nil {
		return fmt.Errorf("flush states: %w", err)
	}
	defer ns.Close()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(ns.Fd())})
	if err != nil {
		return fmt.Errorf("flush states: %w", err)
	}
	defer c.Close()
	const ctnetlink, ctDelete = 1, 2 // NFNL_SUBSYS_CTNETLINK, IPCTNL_MSG_CT_DELETE
	_, err = c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(ctnetlink<<8 | ctDelete), Flags: netlink.Request | netlink.Acknowledge},
		Data:   []byte{unix.AF_INET, 0, 0, 0}, // nfgenmsg: family, NFNETLINK_V0, res_id
	})
	if err != nil {
		return fmt.Errorf("flush states (ctnetlink): %w", err)
	}
	return nil
}

func (d *LinuxDataPlane) StateCount(ctx context.Context) (int, error) {
	out, err := d.inNS(ctx, nil, "cat", "/proc/sys/net/netfilter/nf_conntrack_count")
	if err != nil {
		return 0, nil // no conntrack yet: no states
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// MeasureMbit runs one iperf3 run of 1 s after 1 s left out (-O 1) from
// the LAN client to the WAN server (reverse: server to client): the running
// configuration's steady rate. Plain 1 s runs were biased low against the
// sweep's probes, by up to half with 1000 rules (a connection's first
// second is slower).
func (d *LinuxDataPlane) MeasureMbit(ctx context.Context, reverse bool) (float64, error) {
	return iperfMbit(ctx, d.Topo, 1, 1, reverse)
}

// IperfMbit runs one iperf3 TCP test of secs seconds from the lab's client to
// its server through the DUT (reverse: server to client) with a one-off
// server on a fresh port, and returns the received rate in Mbit/s.
func IperfMbit(ctx context.Context, t Topology, secs int, reverse bool) (float64, error) {
	return iperfMbit(ctx, t, secs, 0, reverse)
}

// iperfMbit is IperfMbit leaving out the first omit seconds (iperf3 -O:
// TCP slow start, and the first packets of a connection through a large
// ruleset).
func iperfMbit(ctx context.Context, t Topology, secs, omit int, reverse bool) (float64, error) {
	port := 20000 + int(time.Now().UnixNano()/1000%20000)
	srvCtx, cancel := context.WithTimeout(ctx, time.Duration(secs+omit+15)*time.Second)
	defer cancel()
	dir, err := os.MkdirTemp("", "fwab-iperf")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	pidfile, logfile := filepath.Join(dir, "s.pid"), filepath.Join(dir, "s.log")
	if _, err := run(srvCtx, nil, "ip", "netns", "exec", t.Namespace("wan"), "iperf3", "-s", "-1", "-D",
		"-B", emu.ServerAddr, "-p", strconv.Itoa(port), "--pidfile", pidfile, "--logfile", logfile); err != nil {
		return 0, err
	}
	defer func() {
		if b, err := os.ReadFile(pidfile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = killPID(pid)
			}
		}
	}()
	args := []string{"netns", "exec", t.Namespace("lan"), "iperf3", "-c", emu.ServerAddr, "-p", strconv.Itoa(port),
		"-t", strconv.Itoa(secs), "-J", "--connect-timeout", "3000"}
	if reverse {
		args = append(args, "-R")
	}
	if omit > 0 {
		args = append(args, "-O", strconv.Itoa(omit))
	}
	// iperf3 -D returns before the server listens; under load that can
	// take a while.
	var out string
	for attempt := 0; ; attempt++ {
		out, err = run(srvCtx, nil, "ip", args...)
		// iperf3 -J may exit 0 with the error in its JSON.
		if attempt == 50 || !strings.Contains(out, "Connection refused") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		slog, _ := os.ReadFile(logfile)
		return 0, fmt.Errorf("%w (server log: %q)", err, slog)
	}
	return parseIperfMbit(out)
}

func parseIperfMbit(out string) (float64, error) {
	var r struct {
		End struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
		Error string `json:"error"`
	}
	if i := strings.LastIndex(out, "\n}"); i >= 0 {
		out = out[:i+2]
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return 0, fmt.Errorf("iperf3 output: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	return r.End.SumReceived.BitsPerSecond / 1e6, nil
}
