package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Trafgen is the rate search's packet generator for small frames:
// netsniff-ng's trafgen writes whole Ethernet frames (IPv4/UDP, of each
// size of the mix in its share) to the sender's interface through
// AF_PACKET. It too makes a system call a frame, but no socket, UDP or
// route lookup of its own and no receiving application: iperf3 offers a
// quarter of the frames trafgen does at 64 bytes on the lab. What
// arrived is counted at the receiver's interface, by an nftables counter
// on its ingress hook for the trial's flow alone (the interface's
// rx_packets counts ARP and everything else too).
//
// The rate: trafgen's own --rate sends a second's packets at once and
// sleeps for the rest of the second, and its --gap sleeps after every
// packet (a nanosleep costs some 15 µs on a virtual machine). Neither
// offers a steady rate:
//
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:597 — shaper_delay: `if (sh->sent >= sh->rate …)` sleeps out the rest of a one-second window
//
// So frames go through the kernel's queueing (--qdisc-path) into a tbf
// on the sender's interface set to the trial's rate, which releases them
// evenly; trafgen, finding the queue full, sends the frame again (so the
// generator loses nothing itself), and the tbf is removed when the trial
// has drained it:
//
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:682 — on ENOBUFS xmit_slowpath does sched_yield() and `goto retry`
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:972 — without --qdisc-path the socket bypasses the qdisc (PACKET_QDISC_BYPASS)
//
// The sender's interface must have its system's default root qdisc (or
// none): one set by hand is not replaced. The tbf carries fwab's handle
// (PaceHandle), so one a killed fwab left is known as its own and
// removed. trafgen runs on the sender's CPU 0.
type Trafgen struct {
	Binary string // default "trafgen"
}

// PaceHandle is the handle of the tbf that paces trafgen's frames.
const PaceHandle = "fab0:"

// Name is the generator's name as results record it.
func (Trafgen) Name() string { return "trafgen" }

func (g Trafgen) binary() string {
	if g.Binary == "" {
		return "trafgen"
	}
	return g.Binary
}

// trafgenPath is where a trial's frames go: out of the sender's interface
// to the next hop's MAC address, and in at the receiver's interface.
type trafgenPath struct {
	Dev     string // the sender's interface
	Src     string // its address on the way to the receiver
	NextMAC string // the next hop's (the firewall's) MAC address
	RxDev   string // the receiver's interface
	MTU     int    // the sender's interface's MTU, where read (pkt-gen)
}

// routeGet is `ip -j route get ADDR`'s answer.
type routeGet struct {
	Dev     string `json:"dev"`
	Gateway string `json:"gateway"`
	Prefsrc string `json:"prefsrc"`
}

// resolve finds the path: the sender's route and next hop, the next hop's
// MAC address (a ping fills the neighbour table), the sender's root
// qdisc, and the receiver's interface.
//
// upstream: not settled — iproute2's JSON keys (dev, gateway, prefsrc, lladdr) as `ip -j` prints them on Debian 12 (iproute2 6.1); checked at run time: an answer without them is an error that names the command
func (g Trafgen) resolve(ctx context.Context, sender, receiver Endpoint) (trafgenPath, error) {
	var p trafgenPath
	r, err := linuxRoute(ctx, sender, receiver.Addr)
	if err != nil {
		return p, err
	}
	p.Dev, p.Src = r.Dev, r.Prefsrc
	if p.Src == "" {
		p.Src = sender.Addr
	}
	hop := r.Gateway
	if hop == "" {
		hop = receiver.Addr
	}
	// One echo makes the kernel resolve the next hop; its answer does
	// not matter (a firewall may drop ping), the neighbour entry does.
	_, _ = sender.Runner.Run(ctx, []string{"ping", "-c", "1", "-W", "1", "-I", p.Dev, hop})
	out, err := sender.Runner.Run(ctx, []string{"ip", "-j", "neigh", "show", hop, "dev", p.Dev})
	if err != nil {
		return p, fmt.Errorf("%s: ip -j neigh show %s: %w", sender, hop, err)
	}
	var neigh []struct {
		LLAddr string `json:"lladdr"`
	}
	if err := json.Unmarshal(out, &neigh); err != nil || len(neigh) == 0 || neigh[0].LLAddr == "" {
		return p, fmt.Errorf("%s: the next hop %s on %s has no MAC address in the neighbour table (%q): trafgen writes whole frames and needs it; check that %s answers ARP", sender, hop, p.Dev, strings.TrimSpace(string(out)), hop)
	}
	p.NextMAC = neigh[0].LLAddr
	if err := g.checkQdisc(ctx, sender, p.Dev); err != nil {
		return p, err
	}
	if p.RxDev, err = rxDev(ctx, sender, receiver); err != nil {
		return p, err
	}
	return p, nil
}

// linuxRoute is the route on Linux host e to address to.
func linuxRoute(ctx context.Context, e Endpoint, to string) (routeGet, error) {
	out, err := e.Runner.Run(ctx, []string{"ip", "-j", "route", "get", to})
	if err != nil {
		return routeGet{}, fmt.Errorf("%s: ip -j route get %s: %w", e, to, err)
	}
	var r []routeGet
	if err := json.Unmarshal(out, &r); err != nil || len(r) == 0 || r[0].Dev == "" {
		return routeGet{}, fmt.Errorf("%s: ip -j route get %s: no route in %q", e, to, strings.TrimSpace(string(out)))
	}
	return r[0], nil
}

// rxDev is the (Linux) receiver's interface the sender's frames arrive
// on, whose counters it checks it can read.
func rxDev(ctx context.Context, sender, receiver Endpoint) (string, error) {
	r, err := linuxRoute(ctx, receiver, sender.Addr)
	if err != nil {
		return "", err
	}
	if _, err := rxDrops(ctx, receiver, r.Dev); err != nil {
		return "", err
	}
	return r.Dev, nil
}

// checkQdisc makes sure the sender's root qdisc is one the pacing tbf may
// replace: none, the system's default (net.core.default_qdisc, mq's or
// pfifo_fast's), or a tbf fwab left (PaceHandle), which it removes.
func (g Trafgen) checkQdisc(ctx context.Context, sender Endpoint, dev string) error {
	out, err := sender.Runner.Run(ctx, []string{"tc", "qdisc", "show", "dev", dev, "root"})
	if err != nil {
		return fmt.Errorf("%s: tc qdisc show dev %s root: %w", sender, dev, err)
	}
	kind, handle := qdiscKind(string(out))
	if kind == "tbf" && handle == PaceHandle {
		_, err := sender.Runner.Run(ctx, []string{"tc", "qdisc", "del", "dev", dev, "root"})
		return err
	}
	allowed := []string{"", "noqueue", "mq", "pfifo_fast"}
	if def, err := sender.Runner.Run(ctx, []string{"cat", "/proc/sys/net/core/default_qdisc"}); err == nil {
		allowed = append(allowed, strings.TrimSpace(string(def)))
	}
	if !slices.Contains(allowed, kind) {
		return fmt.Errorf("%s: %s's root qdisc is %s, not the system's default (%s): the trafgen generator paces its frames with a tbf there and would replace it; run it from an interface with its default qdisc", sender, dev, kind, allowed[len(allowed)-1])
	}
	return nil
}

// qdiscKind is the kind and handle in `tc qdisc show`'s first line:
// "qdisc noqueue 0: root refcnt 2" is noqueue, 0:.
func qdiscKind(out string) (kind, handle string) {
	f := strings.Fields(firstLine(out))
	if len(f) >= 3 && f[0] == "qdisc" {
		return f[1], f[2]
	}
	return "", ""
}

// rxDrops are the frames the receiver's interface could not take in
// (rx_missed_errors: the NIC's ring was full; rx_fifo_errors: its FIFO
// overran), which count against the endpoint, not the firewall. Frames
// the host dropped later (rx_dropped) were received and counted.
//
// upstream: not settled — the counters rx_missed_errors and rx_fifo_errors under /sys/class/net/<iface>/statistics (Linux's sysfs-class-net-statistics ABI, not in the sources read); checked at run time: a counter that cannot be read is an error that names the file
func rxDrops(ctx context.Context, e Endpoint, dev string) (int64, error) {
	dir := "/sys/class/net/" + dev + "/statistics/"
	out, err := e.Runner.Run(ctx, []string{"cat", dir + "rx_missed_errors", dir + "rx_fifo_errors"})
	if err != nil {
		return 0, fmt.Errorf("%s: reading %s's receive counters (%s): %w", e, dev, dir, err)
	}
	var sum int64
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return 0, fmt.Errorf("%s: %s's receive counters: %q is not two numbers", e, dev, strings.TrimSpace(string(out)))
	}
	for _, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %s's receive counters: %v", e, dev, err)
		}
		sum += v
	}
	return sum, nil
}

// arrivals counts the trial's frames as they reach the receiver's
// interface: an nftables table of its own with a counter on the
// interface's ingress hook for UDP to the discard port at the receiver's
// address (the firewall may translate the source). The table is
// removed with stop.
//
// upstream: not settled — nftables' netdev family and ingress hook as nft 1.0.6 takes them (`type filter hook ingress device "eth0" priority 0`) and its JSON counter {"counter": {"packets": N}}; checked at run time: nft's error ends the trial with it
type arrivals struct {
	e     Endpoint
	table string
}

func countArrivals(ctx context.Context, e Endpoint, dev string) (arrivals, error) {
	var b [4]byte
	rand.Read(b[:])
	a := arrivals{e: e, table: "fwab_trafgen_" + hex.EncodeToString(b[:])}
	cmd := fmt.Sprintf(`add table netdev %[1]s; add chain netdev %[1]s in { type filter hook ingress device "%[2]s" priority 0; }; add rule netdev %[1]s in ip daddr %[3]s udp dport %[4]d counter`, a.table, dev, e.Addr, udpPort)
	if _, err := e.Runner.Run(ctx, []string{"nft", cmd}); err != nil {
		a.stop(ctx)
		return a, fmt.Errorf("%s: counting arrivals with nft: %w", e, err)
	}
	return a, nil
}

var nftCounterRE = regexp.MustCompile(`"counter":\s*\{\s*"packets":\s*(\d+)`)

func (a arrivals) count(ctx context.Context) (int64, error) {
	out, err := a.e.Runner.Run(ctx, []string{"nft", "-j", "list", "table", "netdev", a.table})
	if err != nil {
		return 0, fmt.Errorf("%s: nft list table netdev %s: %w", a.e, a.table, err)
	}
	m := nftCounterRE.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("%s: nft list table netdev %s: no counter in %q", a.e, a.table, lastLines(string(out), 2))
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

// stop removes the table, also when ctx has ended.
func (a arrivals) stop(ctx context.Context) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = a.e.Runner.Run(cctx, []string{"nft", "delete", "table", "netdev", a.table})
}

// udpPort is the trial's destination, the discard port (RFC 863); the
// receiver need not listen, its interface counts the frames.
const udpPort = 9

// trafgenPacket is trafgen's packet configuration for frames: one packet
// per frame of the mix's weights, sent round robin, each an IPv4/UDP
// datagram to the receiver filling its frame (trafgen writes frames
// without the FCS the NIC adds). trafgen fills in lengths and checksums.
//
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen_lexer.l:266 — "eth"; :272 "ip4"|"ipv4"; :276 "udp"; their fields da, saddr, daddr, ttl, sp, dp at :161–226, df a bare flag (trafgen_parser.y:1088)
func trafgenPacket(p trafgenPath, dst string, frames Frames) string {
	var b strings.Builder
	for _, sz := range frames.Sizes {
		for range sz.Weight {
			fmt.Fprintf(&b, "{ eth(da=%s), ipv4(saddr=%s, daddr=%s, ttl=64, df), udp(sp=%d, dp=%d), fill(0x00, %d) } ",
				p.NextMAC, p.Src, dst, 49152+udpPort, udpPort, UDPPayload(sz.Frame))
		}
	}
	return strings.TrimSpace(b.String())
}

// trafgenArgs is the command line that sends n frames through the
// kernel's queue on one CPU, leaving the host's socket memory and IRQ
// affinity as they are (long options: trafgen 0.6.8's short -A is
// missing from its option string). A gap of 0 sends with sendto, which
// sends a frame again when the queue is full, not through the TX ring,
// whose flush gives up on a full queue. timeout ends it should fwab's
// session end first (an SSH session's end does not stop it), and it runs
// in /tmp, where 0.6.8 makes (and removes) its mmap file.
//
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:767 — xmit_fastpath_or_die ignores ENOBUFS on the ring's flush (the frames are lost, yet counted) and panics on other errors
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:1297 — a shaper set (--gap too) falls back to the slow path on one CPU
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:111 — short_options "d:c:n:t:vJhS:rk:i:o:VRs:P:eE:pu:g:CHQqD:b:" has no A; long "no-sock-mem" at :128
func (g Trafgen) trafgenArgs(p trafgenPath, dst string, frames Frames, n int64, limit time.Duration) []string {
	return []string{"timeout", "-s", "INT", strconv.Itoa(int(limit.Round(time.Second) / time.Second)), "env", "-C", "/tmp",
		g.binary(), "--dev", p.Dev, "--qdisc-path", "--cpus", "1", "--no-sock-mem", "--notouch-irq",
		"--gap", "0", "--num", strconv.FormatInt(n, 10), trafgenPacket(p, dst, frames)}
}

// pacing is the tbf that releases fps frames a second evenly: tbf counts
// a frame's bytes without the FCS. Its bucket holds a millisecond at the
// rate, or 8 of the largest frames, whichever is more: the most that
// leaves at the sender's line rate at once, which the firewall's receive
// ring takes (a 100 Mbit/s millisecond is 12.5 kB). A 250 µs bucket
// (or 4 frames) kept the rate as well in TestTrafgenNetns on a quiet
// machine (1.009 of the cap, 32,000 frames a second asked and offered);
// whether it does at the lab's rates is not measured, so the millisecond
// stays. Its queue is twice the bucket, which trafgen keeps full.
type pacing struct {
	bps          float64 // bits/s, as tbf counts
	burst, limit int     // bytes
}

func newPacing(frames Frames, fps float64) pacing {
	bps := fps * 8 * frames.mean(func(n int) float64 { return float64(n - 4) })
	largest := 0
	for _, s := range frames.Sizes {
		largest = max(largest, s.Frame)
	}
	burst := int(math.Max(bps/8/1000, float64(8*largest)))
	return pacing{bps: bps, burst: burst, limit: 2 * burst}
}

// drain is how long the full queue takes to empty at the rate.
func (p pacing) drain() time.Duration {
	return time.Duration(float64(p.limit) * 8 / p.bps * float64(time.Second))
}

// args set the tbf on dev, with fwab's handle.
//
// upstream: not settled — tc-tbf(8)'s rate/burst/limit as iproute2 6.1 takes them ("rate 98208000bit burst 3069 limit 6138"); checked at run time: tc's error ends the trial with it
func (p pacing) args(dev string) []string {
	return []string{"tc", "qdisc", "replace", "dev", dev, "root", "handle", PaceHandle, "tbf",
		"rate", strconv.FormatFloat(math.Round(p.bps), 'f', 0, 64) + "bit", "burst", strconv.Itoa(p.burst), "limit", strconv.Itoa(p.limit)}
}

var tcBacklogRE = regexp.MustCompile(`backlog \S+ (\d+)p`)

// unpace waits (up to 2 s) until the tbf has sent what it holds, then
// removes it, also when ctx has ended.
func unpace(ctx context.Context, sender Endpoint, dev string) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for i := 0; i < 40 && ctx.Err() == nil; i++ {
		out, err := sender.Runner.Run(cctx, []string{"tc", "-s", "qdisc", "show", "dev", dev, "root"})
		if m := tcBacklogRE.FindStringSubmatch(string(out)); err != nil || m == nil || m[1] == "0" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err := sender.Runner.Run(cctx, []string{"tc", "qdisc", "del", "dev", dev, "root"})
	return err
}

// trafgenReport is what trafgen prints as it exits.
type trafgenReport struct {
	Packets int64
	Elapsed time.Duration // the sending loop's time, CPU0's line
}

var (
	trafgenPacketsRE = regexp.MustCompile(`(?m)^\s*(\d+) packets outgoing`)
	trafgenTimeRE    = regexp.MustCompile(`(?m)^\s*(\d+) sec, (\d+) usec on CPU\d+`)
)

// parseTrafgen reads trafgen's exit report:
//
//	  300000 packets outgoing
//	18000000 bytes outgoing
//	       1 sec, 316612 usec on CPU0 (300000 packets)
//
// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:1369 — printf("\r%12llu packets outgoing\n") and "%12lu sec, %lu usec on CPU%d (%llu packets)"
func parseTrafgen(out string) (trafgenReport, error) {
	out = strings.ReplaceAll(out, "\r", "\n")
	m := trafgenPacketsRE.FindStringSubmatch(out)
	t := trafgenTimeRE.FindStringSubmatch(out)
	if m == nil || t == nil {
		return trafgenReport{}, fmt.Errorf("trafgen's report has no packet count or time: %q", lastLines(out, 4))
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	sec, _ := strconv.ParseInt(t[1], 10, 64)
	usec, _ := strconv.ParseInt(t[2], 10, 64)
	return trafgenReport{Packets: n, Elapsed: time.Duration(sec)*time.Second + time.Duration(usec)*time.Microsecond}, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Check makes sure trafgen and tc run on the sender and the path resolves
// (route, next hop, qdisc, the receiver's counters). It returns trafgen's
// version line ("trafgen 0.6.8, …").
func (g Trafgen) Check(ctx context.Context, sender, receiver Endpoint) (string, error) {
	if sender.Runner == nil || receiver.Runner == nil {
		return "", errors.New("the trafgen generator needs a way to run commands on both endpoints (set netns or ssh)")
	}
	// trafgen prints its version and exits 1.
	//
	// upstream: netsniff-ng/netsniff-ng@1af7ae33 trafgen.c:309 — version() ends in die()
	out, err := sender.Runner.Run(ctx, []string{g.binary(), "--version"})
	var exit *ExitError
	if errors.As(err, &exit) && strings.HasPrefix(string(out), "trafgen ") {
		err = nil
	}
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", &fixError{fmt.Sprintf("trafgen is not installed on %s (%v): install it there (Debian: apt-get install netsniff-ng); the trafgen generator runs on Linux senders only", sender, err), err}
		}
		return "", fmt.Errorf("%s: trafgen --version: %w", sender, err)
	}
	if _, err := sender.Runner.Run(ctx, []string{"tc", "-V"}); err != nil {
		return "", fmt.Errorf("%s: tc -V: %w (the trafgen generator paces with tc: install iproute2)", sender, err)
	}
	if _, err := receiver.Runner.Run(ctx, []string{"nft", "--version"}); err != nil {
		return "", fmt.Errorf("%s: nft --version: %w (the trafgen generator counts arrivals with nftables: install nftables)", receiver, err)
	}
	path, err := g.resolve(ctx, sender, receiver)
	if err != nil {
		return "", err
	}
	if err := firstTrial(ctx, g, path, sender, receiver); err != nil {
		return "", err
	}
	return strings.TrimSpace(firstLine(string(out))), nil
}

// frameGenerator is a packet generator's own part: finding the path and
// sending one trial over it.
type frameGenerator interface {
	Name() string
	resolve(ctx context.Context, sender, receiver Endpoint) (trafgenPath, error)
	trial(ctx context.Context, path trafgenPath, sender, receiver Endpoint, frames Frames, rate float64, d time.Duration) (TrialResult, error)
}

// firstTrial is a generator's check that its frames arrive: a tenth of a
// second at 1,000 frames a second, which the firewall passes as UDP to
// the discard port from the sender with no session of its own (direction
// down needs a rule or a port forward for it).
func firstTrial(ctx context.Context, g frameGenerator, path trafgenPath, sender, receiver Endpoint) error {
	frames := OneFrameSize(128)
	res, err := g.trial(ctx, path, sender, receiver, frames, 1000*8*frames.MeanPayload(), 100*time.Millisecond)
	switch {
	case err != nil:
		return fmt.Errorf("a first trial of 100 frames: %w", err)
	case res.Offered == 0:
		return fmt.Errorf("a first trial of 100 frames: %s on %s sent nothing", g.Name(), sender)
	case res.Loss > 50:
		return fmt.Errorf("%.0f%% of 100 frames from %s to UDP port %d of %s did not arrive: the firewall must pass them with no session of their own (%s sends without one; for direction down a rule or a port forward from the WAN side)", res.Loss, sender, udpPort, receiver, g.Name())
	}
	return nil
}

// lazyTrial is a generator's Trial: the path is resolved at the first
// trial, and a trial's error names its rate.
func lazyTrial(g frameGenerator, sender, receiver Endpoint, frames Frames) Trial {
	var (
		once sync.Once
		path trafgenPath
		perr error
	)
	return func(ctx context.Context, rate float64, d time.Duration) (TrialResult, error) {
		once.Do(func() { path, perr = g.resolve(ctx, sender, receiver) })
		if perr != nil {
			return TrialResult{}, perr
		}
		res, err := g.trial(ctx, path, sender, receiver, frames, rate, d)
		if err != nil {
			return res, fmt.Errorf("trial at %.4g bit/s of %s: %w", rate, frames, err)
		}
		return res, nil
	}
}

// Trial is a rate search's trial with trafgen from sender to receiver:
// the frames' rate for the trial's duration (rate in bits/s of UDP
// payload, as the search counts), loss the frames sent that did not reach
// the receiver's interface. The path is resolved at the first trial. A
// trial whose receiving interface missed at least half of what was lost
// (its ring or FIFO full) is generator-bound.
func (g Trafgen) Trial(sender, receiver Endpoint, frames Frames) Trial {
	return lazyTrial(g, sender, receiver, frames)
}

func (g Trafgen) trial(ctx context.Context, path trafgenPath, sender, receiver Endpoint, frames Frames, rate float64, d time.Duration) (TrialResult, error) {
	fps := frames.FramesPerSecond(rate)
	n := max(1, int64(math.Round(fps*d.Seconds())))
	count, drops, err := startCount(ctx, receiver, path.RxDev)
	if err != nil {
		return TrialResult{}, err
	}
	defer count.stop(ctx)
	pace := newPacing(frames, fps)
	_, err = sender.Runner.Run(ctx, pace.args(path.Dev))
	var out []byte
	if err == nil {
		out, err = sender.Runner.Run(ctx, g.trafgenArgs(path, receiver.Addr, frames, n, 2*d+10*time.Second))
	} else {
		err = fmt.Errorf("pacing on %s: %w", sender, err)
	}
	// The tbf goes whatever happened, once it has sent what it holds.
	if derr := unpace(ctx, sender, path.Dev); derr != nil && err == nil {
		return TrialResult{}, fmt.Errorf("removing the pacing tbf from %s on %s: %w (remove it by hand: tc qdisc del dev %s root)", path.Dev, sender, derr, path.Dev)
	}
	if err != nil {
		return TrialResult{}, fmt.Errorf("trafgen on %s: %w", sender, err)
	}
	rep, err := parseTrafgen(string(out))
	if err != nil {
		return TrialResult{}, err
	}
	got, err := settledArrivals(ctx, count)
	if err != nil {
		return TrialResult{}, err
	}
	var took time.Duration
	if rep.Elapsed > 0 {
		// trafgen's loop ends with the queue full: the last frames go
		// out as it drains.
		took = rep.Elapsed + pace.drain()
	}
	return frameTrialResult(ctx, receiver, path.RxDev, frames, rep.Packets, got, took, drops), nil
}

// startCount starts counting a trial's frames at the receiver's rxDev
// (arrivals), and reads its drop counters before the trial.
func startCount(ctx context.Context, receiver Endpoint, rxDev string) (arrivals, int64, error) {
	drops, err := rxDrops(ctx, receiver, rxDev)
	if err != nil {
		return arrivals{}, 0, err
	}
	count, err := countArrivals(ctx, receiver, rxDev)
	return count, drops, err
}

// frameTrialResult is a packet generator's trial: sent frames over took
// (0: not known), got of them counted at the receiver's rxDev, whose
// drop counters read dropsBefore at the start. A trial whose receiving
// interface missed at least half of what was lost is generator-bound.
func frameTrialResult(ctx context.Context, receiver Endpoint, rxDev string, frames Frames, sent, got int64, took time.Duration, dropsBefore int64) TrialResult {
	var res TrialResult
	if took > 0 {
		res.Offered = float64(sent) * 8 * frames.MeanPayload() / took.Seconds()
	}
	lost := max(0, sent-got)
	if sent > 0 {
		res.Loss = 100 * float64(lost) / float64(sent)
	}
	if after, err := rxDrops(ctx, receiver, rxDev); err == nil {
		res.ReceiverDrops = max(0, after-dropsBefore)
	}
	if res.ReceiverDrops > 0 && lost > 0 && 2*res.ReceiverDrops >= lost {
		res.GeneratorBound = true
	}
	return res
}

// settledArrivals reads the arrivals once frames still queued in the
// firewall have come: two readings 50 ms apart that agree, for at most
// 2 s.
func settledArrivals(ctx context.Context, a arrivals) (int64, error) {
	last, err := a.count(ctx)
	for i := 0; err == nil && i < 40; i++ {
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		var c int64
		if c, err = a.count(ctx); err == nil {
			if c == last {
				return c, nil
			}
			last = c
		}
	}
	return last, err
}
