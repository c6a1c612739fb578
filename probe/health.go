package probe

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WatchedServices are the daemons whose restart makes a sample measure two
// boxes: the inspection engine and the IPsec daemon, by process name.
// pfBlockerNG's lists are pf tables, loaded by the filter and not held by a
// daemon of their own; the filter itself is in the kernel and goes only
// with a reboot.
var WatchedServices = []string{"suricata", "charon"}

// Health is what a sample's validity rests on, read from the firewall just
// before and just after the probe: when the box booted, which pids each
// watched service runs under, and the crash dumps it holds.
type Health struct {
	Boot     int64            `json:"boot"`              // kern.boottime: seconds since the epoch
	Uptime   int64            `json:"uptime"`            // the box's clock less Boot, in seconds: a reboot sets it back
	Read     time.Time        `json:"read"`              // when it was read, by this machine's clock
	Services map[string][]int `json:"services"`          // watched service → its pids, sorted; none when it is not running
	Crashes  []string         `json:"crashes,omitempty"` // the entries of /var/crash
	// Links are the interfaces' error counters, by FreeBSD name; nil when
	// they were not read, LinksUnread then saying why. They are read on a
	// best-effort basis: the rest of the health stands without them.
	Links       map[string]LinkCounters `json:"links,omitempty"`
	LinksUnread string                  `json:"links_unread,omitempty"`
}

// LinkCounters are an interface's error counters, as netstat -i shows
// them (Ierrs, Oerrs): frames the NIC received damaged or could not
// send. Drops (Idrop, Drop) are not among them: a firewall at its limit
// drops, and that is what a sample measures.
type LinkCounters struct {
	InErrors  uint64 `json:"in_errors"`
	OutErrors uint64 `json:"out_errors"`
}

// LinkErrors lists the interfaces that counted errors between h (before
// the probe) and after, or whose counters went back (the interface was
// made again). They are a sample's warnings, not a reason to drop it:
// errors say the link was bad, not that another box answered, and some
// NICs' drivers count receive overruns — load — as input errors (FreeBSD's
// vte(4) adds rx_fifo_full, bxe(4) its buffer drops).
func (h Health) LinkErrors(after Health) []string {
	var out []string
	if after.LinksUnread != "" {
		out = append(out, "the interfaces' error counters were not read after the probe: "+after.LinksUnread)
	}
	for _, name := range slices.Sorted(maps.Keys(after.Links)) {
		a, ok := h.Links[name]
		b := after.Links[name]
		switch {
		case !ok || a == b:
		case b.InErrors < a.InErrors || b.OutErrors < a.OutErrors:
			out = append(out, fmt.Sprintf("%s's error counters went back to %d in, %d out: the interface was made again during the probe", name, b.InErrors, b.OutErrors))
		default:
			out = append(out, fmt.Sprintf("%s counted %d input and %d output errors during the probe (damaged or unsent frames; some drivers count receive overruns here)", name, b.InErrors-a.InErrors, b.OutErrors-a.OutErrors))
		}
	}
	return out
}

// Changes lists how the box changed between h (before the probe) and
// after: a reboot, a service that restarted, stopped or started, a new
// crash dump. None means one box served the whole sample.
func (h Health) Changes(after Health) []string {
	var out []string
	if h.Rebooted(after) {
		out = append(out, "the firewall rebooted")
	}
	for _, name := range slices.Sorted(maps.Keys(joinKeys(h.Services, after.Services))) {
		a, b := h.Services[name], after.Services[name]
		switch {
		case slices.Equal(a, b):
		case len(b) == 0:
			out = append(out, fmt.Sprintf("%s stopped (pid %s)", name, pids(a)))
		case len(a) == 0:
			out = append(out, fmt.Sprintf("%s started (pid %s)", name, pids(b)))
		default:
			out = append(out, fmt.Sprintf("%s restarted (pid %s → %s)", name, pids(a), pids(b)))
		}
	}
	for _, c := range after.Crashes {
		if !slices.Contains(h.Crashes, c) {
			out = append(out, "new crash dump /var/crash/"+c)
		}
	}
	return out
}

// Rebooted reports whether the box booted between h and after. FreeBSD
// moves kern.boottime when its clock is stepped (ntpd), so a new boot
// time counts only when the uptime fell behind the time that passed here
// between the two readings (less 2 s for whole seconds and the round
// trips).
func (h Health) Rebooted(after Health) bool {
	if h.Boot == after.Boot {
		return false
	}
	want := float64(h.Uptime) + after.Read.Sub(h.Read).Seconds()
	return float64(after.Uptime) < want-2
}

// Short lists the watched services that run under fewer pids after than
// in h: stopped, or one of several (pfSense runs a Suricata per
// interface) gone and not replaced.
func (h Health) Short(after Health) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(h.Services)) {
		if len(after.Services[name]) < len(h.Services[name]) {
			out = append(out, name)
		}
	}
	return out
}

func joinKeys(a, b map[string][]int) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func pids(ps []int) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// InvalidReason is how a sample the box changed under says so in its
// Reason: such a sample is failed, kept with the others and left out of
// the statistics.
const InvalidReason = "invalid: the firewall changed during the probe: "
