package probe

import (
	"context"
	"strconv"
	"strings"
)

// Datagrams a receiver drops because its socket buffer is full are lost on
// the endpoint, not in the firewall: a trial that saw such drops measured
// the receiver. The count is the receiving host's (its network namespace's
// on Linux).
//
// upstream: torvalds/linux@c5b875e354a54e2b5ba24eecae69bf94e025edd5 net/ipv4/proc.c:155 — /proc/net/snmp's Udp line pair names `RcvbufErrors` among its counters
// upstream: not settled — FreeBSD's counterpart (netstat -s -p udp's "dropped due to full socket buffers") is not in the sources read; checked at run time: an endpoint whose /proc/net/snmp has no RcvbufErrors is not judged

// rcvbufErrors reads the endpoint's UDP receive-buffer drops; ok is false
// where it cannot (no /proc/net/snmp, as on FreeBSD).
func rcvbufErrors(ctx context.Context, e Endpoint) (n int64, ok bool) {
	if e.Runner == nil {
		return 0, false
	}
	out, err := e.Runner.Run(ctx, []string{"cat", "/proc/net/snmp"})
	if err != nil {
		return 0, false
	}
	return parseRcvbufErrors(string(out))
}

// parseRcvbufErrors finds RcvbufErrors in /proc/net/snmp's Udp lines: a
// line of names, then one of values.
func parseRcvbufErrors(snmp string) (int64, bool) {
	var names []string
	for line := range strings.Lines(snmp) {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				v, err := strconv.ParseInt(f[i], 10, 64)
				return v, err == nil
			}
		}
		return 0, false
	}
	return 0, false
}
