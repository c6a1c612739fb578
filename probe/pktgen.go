package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// PktGen is the rate search's packet generator on a FreeBSD sender:
// netmap's pkt-gen writes IPv4/UDP frames of one size straight into the
// interface's transmit ring, at a rate it paces itself (a burst every
// period), with no system call a frame. What arrived is counted at the
// receiver's interface as for trafgen (an nftables counter for the
// trial's flow), so the receiver must be a Linux host.
//
// netmap takes the interface from the host's network stack while pkt-gen
// holds it: nothing else is sent or received on it (ARP, SSH) until
// pkt-gen exits. So the sender's interface must not carry the SSH session
// fwab runs pkt-gen over, and the next hop's MAC address is read from the
// ARP table before the trial.
//
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:3032 — -i: a name without a prefix is opened as `netmap:<name>`
type PktGen struct {
	Binary string // default "pkt-gen"
}

func (g PktGen) binary() string {
	if g.Binary == "" {
		return "pkt-gen"
	}
	return g.Binary
}

// Name is the generator's name as results record it.
func (PktGen) Name() string { return "pkt-gen" }

// pktgenSrcPort is the trials' UDP source port, as trafgen's.
const pktgenSrcPort = 49152 + udpPort

// pktgenArgs is the command line that sends n frames of one size at fps
// frames a second from p.Dev to dst's discard port through the next hop's
// MAC address. -l is the frame without its FCS; -b sends a millisecond's
// frames (at least 8) at a time, as trafgen's tbf releases them, where
// pkt-gen's default (512, or rate/300) sends 3 ms of them back to back at
// line rate; -w 2 gives the link two seconds to come back in netmap mode
// (pkt-gen's own default); timeout ends it should fwab's session end
// first: SIGINT makes pkt-gen print its report and exit 0, and
// --preserve-status keeps that status (timeout's own is 124).
//
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2500 — `-l pkt_size`: "Packet size in bytes excluding CRC"
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2495 — `-n count`: "the number of packets to receive or transmit"
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:3117 — -R: `g.tx_rate = atoi(optarg);`, packets a second
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:3097 — -b: `g.burst = atoi(optarg);`, capped to rate/300 at :3358
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:568 — sigint_h stops the threads; main prints the report and returns 0
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2511 — -d and -s take `ip[:port]`, -D the destination MAC (:2517)
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2967 — `g.wait_link = 2;`
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:3352 — with a rate, bursts of at most rate/300 frames, one every burst/rate seconds
func (g PktGen) pktgenArgs(p trafgenPath, dst string, frame int, fps float64, n int64, limit time.Duration) []string {
	rate := max(1, int64(math.Round(fps)))
	return []string{"timeout", "--preserve-status", "-s", "INT", strconv.Itoa(int(limit.Round(time.Second) / time.Second)),
		g.binary(), "-i", p.Dev, "-f", "tx", "-l", strconv.Itoa(frame - 4),
		"-s", p.Src + ":" + strconv.Itoa(pktgenSrcPort), "-d", dst + ":" + strconv.Itoa(udpPort), "-D", p.NextMAC,
		"-R", strconv.FormatInt(rate, 10), "-b", strconv.FormatInt(max(8, rate/1000), 10), "-n", strconv.FormatInt(n, 10), "-w", "2"}
}

// pktgenReport is what pkt-gen prints as it exits.
type pktgenReport struct {
	Packets int64
	Elapsed time.Duration
}

var pktgenSentRE = regexp.MustCompile(`(?m)^Sent (\d+) packets \d+ bytes \d+ events \d+ bytes each in ([0-9.]+) seconds\.`)

// parsePktGen reads pkt-gen's exit report of a transmission:
//
//	Sent 300000 packets 18000000 bytes 1172 events 60 bytes each in 2.02 seconds.
//
// and "Sent nothing." when it sent no frame.
//
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2454 — `printf("%s %llu packets %llu bytes %llu events %d bytes each in %.2f seconds.\n"`, msg "Sent" (:2838)
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2448 — `printf("%s nothing.\n", msg);`
func parsePktGen(out string) (pktgenReport, error) {
	if strings.Contains(out, "Sent nothing.") {
		return pktgenReport{}, nil
	}
	m := pktgenSentRE.FindStringSubmatch(out)
	if m == nil {
		return pktgenReport{}, fmt.Errorf("pkt-gen's report has no \"Sent … packets … in … seconds.\" line: %q", lastLines(out, 4))
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	sec, err := strconv.ParseFloat(m[2], 64)
	if err != nil {
		return pktgenReport{}, fmt.Errorf("pkt-gen's report: %v", err)
	}
	return pktgenReport{Packets: n, Elapsed: time.Duration(sec * float64(time.Second))}, nil
}

// freebsdRoute is what `route -n get ADDR` says of the way to ADDR:
//
//	   route to: 198.18.1.2
//	destination: 198.18.1.0
//	    gateway: 198.18.0.1
//	  interface: vtnet1
//
// upstream: not settled — FreeBSD's route(8) output is not in the sources read (FreeBSD base); checked at run time: an answer without "interface:" is an error that names the command
func freebsdRoute(out string) (dev, gateway string) {
	for _, line := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "interface":
			dev = strings.TrimSpace(v)
		case "gateway":
			gateway = strings.TrimSpace(v)
		}
	}
	return dev, gateway
}

var (
	inetRE = regexp.MustCompile(`(?m)^\s*inet (\d+\.\d+\.\d+\.\d+) `)
	mtuRE  = regexp.MustCompile(` mtu (\d+)`)
	arpRE  = regexp.MustCompile(` at ([0-9a-fA-F]{1,2}(?::[0-9a-fA-F]{1,2}){5}) on (\S+)`)
)

// ifAddrs are the IPv4 addresses `ifconfig DEV inet` lists.
//
// upstream: not settled — FreeBSD's ifconfig(8) output ("\tinet 198.18.0.2 netmask 0xffffff00 broadcast …") is not in the sources read; checked at run time: an interface with no address is an error
func ifAddrs(out string) []string {
	var addrs []string
	for _, m := range inetRE.FindAllStringSubmatch(out, -1) {
		addrs = append(addrs, m[1])
	}
	return addrs
}

// resolve finds the path on a FreeBSD sender: its route and next hop, its
// address on that interface, the next hop's MAC address (a ping fills the
// ARP table), and the receiver's interface. It refuses an interface that
// carries the SSH session pkt-gen would run over.
//
// upstream: not settled — arp(8)'s "? (198.18.0.1) at 58:9c:fc:00:00:01 on vtnet1 expires in 1199 seconds [ethernet]" and SSH_CONNECTION's "client port server port" (OpenSSH's sshd) are not in the sources read; checked at run time: an answer without them is an error that names the command
func (g PktGen) resolve(ctx context.Context, sender, receiver Endpoint) (trafgenPath, error) {
	var p trafgenPath
	// pkt-gen takes an IPv4 address and ignores one it cannot parse.
	//
	// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:371 — extract_ipv4_addr leaves the address as it was when inet_pton fails
	if a, err := netip.ParseAddr(receiver.Addr); err != nil || !a.Is4() {
		return p, &fixError{fmt.Sprintf("%s: pkt-gen sends IPv4 only, to an address: give the receiver's IPv4 address, not %q", receiver, receiver.Addr), nil}
	}
	out, err := sender.Runner.Run(ctx, []string{"route", "-n", "get", receiver.Addr})
	if err != nil {
		return p, fmt.Errorf("%s: route -n get %s: %w", sender, receiver.Addr, err)
	}
	dev, gw := freebsdRoute(string(out))
	if dev == "" {
		return p, fmt.Errorf("%s: route -n get %s: no interface in %q", sender, receiver.Addr, strings.TrimSpace(string(out)))
	}
	p.Dev = dev
	out, err = sender.Runner.Run(ctx, []string{"ifconfig", dev, "inet"})
	if err != nil {
		return p, fmt.Errorf("%s: ifconfig %s inet: %w", sender, dev, err)
	}
	addrs := ifAddrs(string(out))
	if len(addrs) == 0 {
		return p, fmt.Errorf("%s: %s has no IPv4 address (ifconfig %s inet: %q)", sender, dev, dev, strings.TrimSpace(string(out)))
	}
	p.Src = addrs[0]
	if m := mtuRE.FindStringSubmatch(string(out)); m != nil {
		p.MTU, _ = strconv.Atoi(m[1])
	}
	for _, a := range addrs {
		if a == sender.Addr {
			p.Src = a
		}
	}
	// The session pkt-gen would run over: netmap would cut it off.
	if conn, err := sender.Runner.Run(ctx, []string{"sh", "-c", `echo "$SSH_CONNECTION"`}); err == nil {
		if f := strings.Fields(string(conn)); len(f) == 4 {
			for _, a := range addrs {
				if a == f[2] {
					return p, &fixError{fmt.Sprintf("%s: fwab's SSH session to it arrives on %s (%s), the interface pkt-gen would send from: netmap takes the interface from the host while pkt-gen runs, and the session would be cut off; reach the sender over another interface (a management port)", sender, dev, a), nil}
				}
			}
		}
	}
	hop := receiver.Addr
	if gw != "" && !strings.HasPrefix(gw, "link#") {
		if _, err := netip.ParseAddr(gw); err == nil {
			hop = gw
		}
	}
	// One echo resolves the next hop; its answer does not matter.
	_, _ = sender.Runner.Run(ctx, []string{"ping", "-c", "1", "-t", "1", hop})
	out, err = sender.Runner.Run(ctx, []string{"arp", "-n", hop})
	m := arpRE.FindStringSubmatch(string(out))
	if err != nil || m == nil || m[2] != dev {
		return p, fmt.Errorf("%s: the next hop %s on %s has no MAC address in the ARP table (arp -n %s: %q, %v): pkt-gen writes whole frames and needs it; check that %s answers ARP", sender, hop, dev, hop, strings.TrimSpace(string(out)), err, hop)
	}
	p.NextMAC = strings.ToLower(m[1])
	if p.RxDev, err = rxDev(ctx, sender, receiver); err != nil {
		return p, err
	}
	return p, nil
}

// frameOf is the one frame size pkt-gen sends: it has no weighted mix.
func (PktGen) frameOf(frames Frames) (int, error) {
	if len(frames.Sizes) != 1 || frames.Sizes[0].Weight != 1 {
		return 0, &fixError{fmt.Sprintf("pkt-gen sends frames of one size, not %s: give the ndr probe one frame size (frames: 64), or use a Linux sender with generator: trafgen for a mix", frames), nil}
	}
	return frames.Sizes[0].Frame, nil
}

// Check makes sure pkt-gen runs on the sender with netmap in its kernel,
// nft on the receiver, and the path resolves; then 100 frames must
// arrive. It returns pkt-gen's first line of usage ("Usage:"), pkt-gen
// having no version option.
//
// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:2978 — `-h`: `usage(0)`, which prints "Usage:" to stderr and exits with 0
func (g PktGen) Check(ctx context.Context, sender, receiver Endpoint) (string, error) {
	if sender.Runner == nil || receiver.Runner == nil {
		return "", errors.New("the pkt-gen generator needs a way to run commands on both endpoints (set netns or ssh)")
	}
	if os, err := sender.Runner.Run(ctx, []string{"uname", "-s"}); err != nil || strings.TrimSpace(string(os)) != "FreeBSD" {
		return "", &fixError{fmt.Sprintf("%s is not a FreeBSD host (uname -s: %q): pkt-gen's netmap is FreeBSD's here; use generator: trafgen on a Linux sender", sender, strings.TrimSpace(string(os))), err}
	}
	if _, err := sender.Runner.Run(ctx, []string{"sh", "-c", g.binary() + " -h 2>&1 | grep -q Usage:"}); err != nil {
		return "", &fixError{fmt.Sprintf("pkt-gen does not run on %s (%v): install it there (FreeBSD: pkg install pkt-gen, the net/pkt-gen port, or build /usr/src/tools/tools/netmap)", sender, err), err}
	}
	// upstream: luigirizzo/netmap@89607e14 sys/dev/netmap/netmap.c:560 — `SYSCTL_INT(_dev_netmap, OID_AUTO, admode, …)`, there when the kernel has netmap
	if _, err := sender.Runner.Run(ctx, []string{"sysctl", "-n", "dev.netmap.admode"}); err != nil {
		return "", &fixError{fmt.Sprintf("%s's kernel has no netmap (sysctl dev.netmap.admode: %v): pkt-gen needs `device netmap` (in GENERIC) or kldload netmap", sender, err), err}
	}
	// upstream: luigirizzo/netmap@89607e14 sys/dev/netmap/netmap.c:4633 — /dev/netmap is made `UID_ROOT, GID_WHEEL, 0600`
	if _, err := sender.Runner.Run(ctx, []string{"test", "-r", "/dev/netmap", "-a", "-w", "/dev/netmap"}); err != nil {
		return "", &fixError{fmt.Sprintf("%s: fwab's user cannot open /dev/netmap (root's, mode 0600, unless devfs rules say otherwise): run the sender's SSH session as root, or give its user the device with a devfs rule", sender), err}
	}
	if _, err := receiver.Runner.Run(ctx, []string{"nft", "--version"}); err != nil {
		return "", fmt.Errorf("%s: nft --version: %w (the pkt-gen generator counts arrivals with nftables on a Linux receiver: install nftables)", receiver, err)
	}
	path, err := g.resolve(ctx, sender, receiver)
	if err != nil {
		return "", err
	}
	if err := firstTrial(ctx, g, path, sender, receiver); err != nil {
		return "", err
	}
	return "pkt-gen (netmap)", nil
}

// Trial is a rate search's trial with pkt-gen from sender to receiver, as
// Trafgen's: the path is resolved at the first trial.
func (g PktGen) Trial(sender, receiver Endpoint, frames Frames) Trial {
	return lazyTrial(g, sender, receiver, frames)
}

func (g PktGen) trial(ctx context.Context, path trafgenPath, sender, receiver Endpoint, frames Frames, rate float64, d time.Duration) (TrialResult, error) {
	frame, err := g.frameOf(frames)
	if err != nil {
		return TrialResult{}, err
	}
	// pkt-gen compares the frame without its FCS, Ethernet header
	// included, with the interface's MTU.
	//
	// upstream: luigirizzo/netmap@89607e14 apps/pkt-gen/pkt-gen.c:3290 — `if (mtu > 0 && g.pkt_size > mtu)`: "pkt_size (%d) must be <= mtu (%d)", and it exits
	if path.MTU > 0 && frame-4 > path.MTU {
		return TrialResult{}, &fixError{fmt.Sprintf("pkt-gen sends %d-byte frames (%d without the FCS) only from an interface whose MTU is at least %d; %s's %s has %d: raise it on the sender (ifconfig %s mtu %d), or leave out frame sizes above %d", frame, frame-4, frame-4, sender, path.Dev, path.MTU, path.Dev, frame-4, path.MTU+4), nil}
	}
	fps := frames.FramesPerSecond(rate)
	n := max(1, int64(math.Round(fps*d.Seconds())))
	count, drops, err := startCount(ctx, receiver, path.RxDev)
	if err != nil {
		return TrialResult{}, err
	}
	defer count.stop(ctx)
	out, err := sender.Runner.Run(ctx, g.pktgenArgs(path, receiver.Addr, frame, fps, n, 2*d+10*time.Second))
	if err != nil {
		return TrialResult{}, fmt.Errorf("pkt-gen on %s: %w", sender, err)
	}
	rep, err := parsePktGen(string(out))
	if err != nil {
		return TrialResult{}, err
	}
	got, err := settledArrivals(ctx, count)
	if err != nil {
		return TrialResult{}, err
	}
	return frameTrialResult(ctx, receiver, path.RxDev, frames, rep.Packets, got, rep.Elapsed, drops), nil
}
