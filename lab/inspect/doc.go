// Package inspect is the lab's IDS/IPS: the inspection engine the emulated
// pfSense runs where a real one runs Suricata, and the netfilter rules that
// steer the DUT's traffic to it.
//
// # Rules and matching
//
// GenerateRuleset makes N content rules from a seed (sid 9000000 upward,
// every tenth a drop rule, the rest alert rules). Each content is 8 to 16
// random bytes that are not all printable, so that neither iperf3's random
// payload nor its --repeating-payload digits nor its JSON control channel
// can hold one; TestNoContentInIperf3Payload checks this against recorded
// iperf3 traffic. A Matcher (Aho-Corasick: dense rows for the shallow
// states, sorted edges and failure links for the rest, four interleaved
// lanes per payload) finds every rule in a packet's transport payload in one
// pass. On this 2-core VM, over 1500-byte random payloads
// (go test -bench Scan): about 450 MB/s with 1k rules, 175 MB/s with 10k,
// 65 MB/s with 50k.
//
// # Modes
//
// The modes follow Suricata's on pfSense (the ids@IF knob):
//
//   - Inline (ips-inline): iptables-nft sends forwarded traffic in and out of
//     the inspected interfaces to NFQUEUE (the xt target: this kernel lacks
//     nft's queue expression). The engine binds one socket and goroutine per
//     queue with NFQA_CFG_F_GSO (without it the kernel segments every GSO
//     packet and throughput collapses) and a 32 MiB receive buffer (set with
//     SO_RCVBUFFORCE, since net.core.rmem_max cannot be raised inside a
//     netns), and gives every packet a verdict: accept, or drop when a drop
//     rule matches. Without a listener the queue drops traffic (fails
//     closed); fail-open (NFQA_CFG_F_FAIL_OPEN, plus --queue-bypass on the
//     rule) happens only when asked for.
//   - IDS (ids): an AF_PACKET socket on each inspected interface receives a
//     clone of every packet in and out. Forwarding never waits for the
//     engine; when the engine falls behind, the kernel drops the clones and
//     the engine reports them as missed (Suricata's capture drops). No
//     steering rules are needed.
//   - Legacy (ips-legacy): the same passive copy; after a drop rule
//     matched, the packet's source address is added with `nft add element`
//     to the set snort2c (snort2c6 for IPv6) of table inet fwab_ips, whose
//     forward chain drops traffic from and to those addresses: like
//     pfSense's snort2c table, after the fact (the offending packet itself
//     passes).
//
// # Inline IPS with offloads on
//
// On a real pfSense, Suricata's netmap inline mode needs checksum, TSO and
// LRO offloads off on the NIC. The lab's inline path (NFQUEUE with GSO)
// works whatever the veths' offload flags are, so the lab does not imitate
// the breakage. Instead the engine reads the flags with `ethtool -k` at
// start, logs a warning, and publishes them in its status (offloads, and a
// warning per interface), so the runtime state shows the unsafe combination
// and `fwab verify` can report it.
//
// # Status
//
// The engine rewrites a JSON status file (Status) every second once it is
// ready, and a last time at exit with running=false; its mode is spelled as
// the runtime state spells it (ips-inline, ids, ips-legacy). `fwab
// lab inspect` prints a status line on SIGUSR1 and its counters on SIGTERM.
//
// # Per packet and per byte, against Suricata inline
//
// What the engine does for each packet (inline): one netlink receive that
// copies the packet, its attributes parsed (allocating), the IPv4/IPv6 and
// TCP/UDP headers parsed, the flow looked up in a Go map by its 4-tuple
// (with a stream depth), and one netlink send for the verdict. No checksum
// check, no defragmentation, no TCP state or sequence tracking. Per byte:
// one Aho-Corasick pass over each packet's payload until its flow
// direction has passed the stream depth; no reassembly, so a pattern split
// across segments is missed and a retransmission is scanned twice.
//
// What Suricata does inline: per packet, decode with checksum checks, a
// flow hash lookup with timeouts, TCP state and sequence tracking,
// app-layer parsing and the packet's prefilter and rule evaluation; per
// byte, pattern matching over the reassembled stream up to the stream
// depth (1 MiB by default) and over packet payloads. pfSense runs it on
// netmap rings: no system call per packet.
//
// Both are bounded per byte by the stream depth: a long iperf3 flow is
// scanned for its first MiB and then only passed through, so the figures
// are set by the per-packet cost. There the engine costs more than
// Suricata, not less, and for other reasons: with the offloads off (as an
// inline point has them, and as the lab's wire carries frames, not TSO
// segments) about 50 µs a frame on this project's 2-core VM, 20,000
// frames a second on one core. A CPU profile puts 78 % of it in the NFQUEUE
// callback's two system calls (the verdict's sendmsg 40 %, recvmsg 28 %),
// 20 % in Go's scheduler, allocation and GC, and 1 % in the engine's own
// parse, flow lookup and scan; perf puts 41 % in the hypervisor's
// interrupt re-enable, which makes every system call and wake-up dear
// here. The verdict's sendmsg also runs the next hop's softirq: the
// receiving iperf3's TCP input is charged to the DUT's budget (15 %).
// Suricata's NFQ mode batches its verdicts, and netmap mode makes none; the
// engine has neither, so a calibrated profile's inline figures are lower
// than the appliance's (BENCHMARKS.md, the T730 table). Nothing here is
// tuned to close that gap.
//
// # Figures
//
// iperf3 -t 3, one TCP stream, client — dut — server namespaces on the
// 2-core VM, medians of 5 rounds with the modes interleaved in each round
// (FWAB_INSPECT_RUNS=5 FWAB_INSPECT_SECONDS=3 go test -run
// TestThroughputByMode -v), Mbit/s, measured while other builds and iperf3
// runs shared the machine (load average 3 to 9), so spreads are wide.
//
// Every byte inspected (the default):
//
//	rules   none    ids    inline   legacy
//	1k      7611    6193     918     6517
//	10k    10523    7363     676     7831
//
// Inline caps throughput at what one goroutine can receive, scan and give
// verdicts for. IDS and legacy lower throughput only through CPU
// contention, and under this load they inspect only 10 to 25% of the
// packets: the rest are counted as missed, as Suricata counts capture drops.
//
// With --stream-depth 1048576 (Suricata's default stream depth;
// FWAB_INSPECT_STREAM_DEPTH=1048576), the IDS keeps up (nothing missed) and
// the figures look like a real box's (IDS costs little, inline IPS a lot):
//
//	rules   none    ids    inline   legacy
//	1k     14936   12657    1983    13511
//	10k    15518   12486    2145    12105
package inspect
