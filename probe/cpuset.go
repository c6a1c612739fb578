package probe

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

var cpuListRE = regexp.MustCompile(`^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?)*$`)

// ParseCPUList reads a cpuset list, "2" or "0-1,4", as taskset -c and
// cpuset -l take it, into its cores.
func ParseCPUList(l string) ([]int, error) {
	if !cpuListRE.MatchString(l) {
		return nil, fmt.Errorf("%q: list cores as N, N-M or N,M (such as 2 or 0-1,4)", l)
	}
	var cores []int
	for _, part := range strings.Split(l, ",") {
		lo, hi, ranged := strings.Cut(part, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if ranged {
			b, _ = strconv.Atoi(hi)
		}
		if b < a {
			return nil, fmt.Errorf("%q: the range %s runs backwards", l, part)
		}
		for c := a; c <= b; c++ {
			cores = append(cores, c)
		}
	}
	return cores, nil
}

// upstream: not settled — the endpoints' tools (util-linux's taskset -c and nproc --all, FreeBSD's cpuset -l and sysctl hw.ncpu) are not in the sources read; checked at run time by CheckCPUs, which names a missing tool and counts the cores before the sweep

// pinned is argv run on the cores of list: through taskset -c where the
// endpoint has it (Linux), else FreeBSD's cpuset -l; argv itself when the
// list is empty. The shell execs the tool, so the process is iperf3's own.
func pinned(list string, argv []string) []string {
	if list == "" {
		return argv
	}
	script := `if command -v taskset >/dev/null 2>&1; then exec taskset -c "$0" "$@"; fi; exec cpuset -l "$0" "$@"`
	return append([]string{"sh", "-c", script, list}, argv...)
}

// CheckCPUs checks, before a sweep, that the endpoint has a tool to pin
// with and every core of list: nproc --all (Linux) or sysctl hw.ncpu
// (FreeBSD) counts them.
func CheckCPUs(ctx context.Context, e Endpoint, list string) error {
	cores, err := ParseCPUList(list)
	if err != nil {
		return fmt.Errorf("%s cpuset: %w", e.Name, err)
	}
	// nproc --all: the cores the host has, not only those this shell may use.
	out, err := e.Runner.Run(ctx, []string{"sh", "-c", "command -v taskset >/dev/null 2>&1 || command -v cpuset >/dev/null 2>&1 || { echo no-tool; exit 0; }; nproc --all 2>/dev/null || sysctl -n hw.ncpu"})
	if err != nil {
		return fmt.Errorf("%s cpuset %s: counting its cores: %w", e, list, err)
	}
	if strings.TrimSpace(string(out)) == "no-tool" {
		return fmt.Errorf("%s cpuset %s: the endpoint has neither taskset (Linux: util-linux) nor cpuset (FreeBSD) to pin iperf3 with; install one or leave cpuset out", e, list)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || n < 1 {
		return fmt.Errorf("%s cpuset %s: counting its cores said %q", e, list, strings.TrimSpace(string(out)))
	}
	for _, c := range cores {
		if c >= n {
			return fmt.Errorf("%s cpuset %s: core %d does not exist, the endpoint has %d (0-%d)", e, list, c, n, n-1)
		}
	}
	return nil
}
