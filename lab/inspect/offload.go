package inspect

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// ethtoolOffloads maps `ethtool -k` feature names to the names of the
// pfSense offload knobs (offload.checksum, offload.tso, offload.lro).
var ethtoolOffloads = []struct{ feature, name string }{
	{"rx-checksumming", "rxcsum"},
	{"tx-checksumming", "txcsum"},
	{"tcp-segmentation-offload", "tso"},
	{"large-receive-offload", "lro"},
}

// OffloadsOn returns the hardware offloads that are on for iface
// (rxcsum, txcsum, tso, lro), as `ethtool -k` reports them.
func OffloadsOn(ctx context.Context, iface string) ([]string, error) {
	out, err := exec.CommandContext(ctx, "ethtool", "-k", iface).Output()
	if err != nil {
		return nil, fmt.Errorf("ethtool -k %s: %w", iface, err)
	}
	return parseOffloads(string(out)), nil
}

func parseOffloads(out string) []string {
	state := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		state[name] = strings.HasPrefix(strings.TrimSpace(val), "on")
	}
	var on []string
	for _, o := range ethtoolOffloads {
		if state[o.feature] {
			on = append(on, o.name)
		}
	}
	return on
}
