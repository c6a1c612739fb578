package fwapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/fwab/fwab/probe"
)

// ParseNetstatMbufs returns the current mbufs in use from `netstat -m`
// ("1834/2651/4485 mbufs in use (current/cache/total)").
func ParseNetstatMbufs(out string) (int64, error) {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		counts, rest, ok := strings.Cut(l, " ")
		if !ok || !strings.HasPrefix(rest, "mbufs in use") {
			continue
		}
		cur, _, _ := strings.Cut(counts, "/")
		n, err := strconv.ParseInt(cur, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("netstat -m: %q: current mbufs is not a number", l)
		}
		return n, nil
	}
	return 0, fmt.Errorf("netstat -m: no \"mbufs in use\" line")
}

// NetstatLinks is the command whose answer ParseNetstatLinks reads: the
// interface statistics OPNsense's Diagnostics page shows, as libxo JSON
// (both products' netstat speaks it).
//
// upstream: opnsense-core 26.7 src/opnsense/service/conf/actions.d/actions_interface.conf:257 — `command:/usr/bin/netstat -i -n -W -b -d --libxo json` ([show.interfaces]; 24.7:219)
const NetstatLinks = "netstat -i -n -W -b -d --libxo json"

// ParseNetstatLinks returns each interface's error counters from
// NetstatLinks's answer: the link-level rows ("<Link#N>"), which alone
// carry received-errors and send-errors.
//
// upstream: not settled — the keys are FreeBSD's usr.bin/netstat/if.c intpr() (not in the upstream copy); OPNsense's Diagnostics/Api/InterfaceController.php getInterfaceStatisticsAction reads `$tmp['statistics']['interface']` and each node's name; checked at run time: an answer without a link row with both counters is an error
func ParseNetstatLinks(out string) (map[string]probe.LinkCounters, error) {
	var doc struct {
		Statistics struct {
			Interface []struct {
				Name      string  `json:"name"`
				Network   string  `json:"network"`
				InErrors  *uint64 `json:"received-errors"`
				OutErrors *uint64 `json:"send-errors"`
			} `json:"interface"`
		} `json:"statistics"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("%s: %q is not its JSON: %v", NetstatLinks, clip([]byte(strings.TrimSpace(out)), 100), err)
	}
	links := map[string]probe.LinkCounters{}
	for _, row := range doc.Statistics.Interface {
		if !strings.HasPrefix(row.Network, "<Link#") {
			continue // an address row: counters of its own, no errors
		}
		if row.Name == "" || row.InErrors == nil || row.OutErrors == nil {
			return nil, fmt.Errorf("%s: the link row of %q has no received-errors or send-errors", NetstatLinks, row.Name)
		}
		links[row.Name] = probe.LinkCounters{InErrors: *row.InErrors, OutErrors: *row.OutErrors}
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("%s: no interface's link row", NetstatLinks)
	}
	return links, nil
}
