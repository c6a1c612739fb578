package fwapi

import (
	"fmt"
	"strconv"
	"strings"
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
