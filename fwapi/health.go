package fwapi

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fwab/fwab/probe"
)

// HealthReader reads what a sample's validity rests on (probe.Health). The
// drivers with a shell on the firewall have it.
type HealthReader interface {
	Health(ctx context.Context) (probe.Health, error)
}

// Health reads the box's boot time, its watched services' pids, its
// crash dumps and its interfaces' error counters.
func (p *PfSense) Health(ctx context.Context) (probe.Health, error) {
	h, err := readHealth(ctx, p.output)
	if err != nil {
		return h, fmt.Errorf("pfsense health: %w", err)
	}
	return h, nil
}

// Health reads the box's boot time, its watched services' pids, its
// crash dumps and its interfaces' error counters, over SSH: the API has
// none of them.
func (o *OPNsense) Health(ctx context.Context) (probe.Health, error) {
	h, err := readHealth(ctx, o.shellString)
	if err != nil {
		return h, fmt.Errorf("opnsense health: %w", err)
	}
	return h, nil
}

// readHealth runs the four readings with run: the boot time, the watched
// services' pids, the crash dumps and the interfaces' error counters.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1885 — `$boottime = get_single_sysctl("kern.boottime");`, the boot time pfSense's own uptime reads
// upstream: not settled — /var/crash as savecore's folder and `ps ax -o pid,command` are FreeBSD's (not in the upstream copy); checked at run time: an answer that does not parse is an error, and the sample keeps a warning instead of a verdict
func readHealth(ctx context.Context, run func(context.Context, string) (string, error)) (probe.Health, error) {
	var h probe.Health
	// The clock with the boot time: their difference, the uptime, goes
	// back only with a reboot (kern.boottime moves when the clock is
	// stepped).
	h.Read = time.Now()
	out, err := run(ctx, "sysctl -n kern.boottime && date +%s")
	if err != nil {
		return h, err
	}
	boot, now, _ := strings.Cut(strings.TrimSpace(out), "\n")
	if h.Boot, err = ParseBootTime(boot); err != nil {
		return h, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(now), 10, 64)
	if err != nil {
		return h, fmt.Errorf("date +%%s: %q is not a time", clip([]byte(now), 100))
	}
	h.Uptime = n - h.Boot
	if out, err = run(ctx, "ps ax -o pid,command"); err != nil {
		return h, err
	}
	h.Services = ParseServicePIDs(out, probe.WatchedServices)
	// OPNsense makes /var/crash when its crash reporter first looks
	// (crash_reporter.php): a box without it has no crash dump.
	if out, err = run(ctx, "ls /var/crash"); err != nil && !strings.Contains(err.Error(), "No such file or directory") {
		return h, err
	}
	h.Crashes = strings.Fields(out)
	// The error counters only warn (probe.Health.LinkErrors): a box
	// whose netstat fails keeps the guard of the three readings above.
	out, err = run(ctx, NetstatLinks)
	if err == nil {
		h.Links, err = ParseNetstatLinks(out)
	}
	if err != nil {
		h.Links, h.LinksUnread = nil, err.Error()
	}
	return h, nil
}

// bootTimeRe is pfSense's own reading of kern.boottime.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1886 — `preg_match("/sec = (\d+)/", $boottime, $matches);`
var bootTimeRe = regexp.MustCompile(`sec = (\d+)`)

// ParseBootTime reads `sysctl -n kern.boottime` ("{ sec = 1733222400,
// usec = 123456 } Tue Dec  3 10:40:00 2024") as seconds since the epoch.
func ParseBootTime(s string) (int64, error) {
	m := bootTimeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("kern.boottime %q: no \"sec = N\"", clip([]byte(strings.TrimSpace(s)), 100))
	}
	return strconv.ParseInt(m[1], 10, 64)
}

// ParseServicePIDs reads `ps ax -o pid,command` and returns each of names
// (a process's program name, the base of its first word) with the pids it
// runs under, sorted; a name that does not run has none. daemon(8)'s
// supervisor ("daemon: suricata[812] (daemon)") is not the service.
func ParseServicePIDs(ps string, names []string) map[string][]int {
	out := make(map[string][]int, len(names))
	for _, n := range names {
		out[n] = nil
	}
	for _, line := range strings.Split(ps, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			continue // the header
		}
		name := path.Base(f[1])
		if _, ok := out[name]; ok {
			out[name] = append(out[name], pid)
		}
	}
	for _, ps := range out {
		slices.Sort(ps)
	}
	return out
}
