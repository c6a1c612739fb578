package inspect

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
)

// The nftables objects of legacy blocking, named after pfSense's snort2c
// table. They live in their own table so that the lab's filter rules and the
// engine never edit each other's objects.
const (
	BlockTable = "fwab_ips" // family inet
	BlockSet4  = "snort2c"
	BlockSet6  = "snort2c6"
)

// NftBlocker adds addresses to the block sets with `nft add element`, in the
// network namespace the process runs in.
type NftBlocker struct{}

// Block adds addr to the set of its family. Adding an address twice is not
// an error.
func (NftBlocker) Block(ctx context.Context, addr netip.Addr) error {
	set := blockSet(addr)
	out, err := exec.CommandContext(ctx, "nft", "add", "element", "inet", BlockTable, set,
		"{ "+addr.Unmap().String()+" }").CombinedOutput()
	if err != nil {
		return fmt.Errorf("nft add element %s %s: %w: %s", set, addr, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// blockSet is the set an address goes to; IPv4-mapped IPv6 counts as IPv4.
func blockSet(addr netip.Addr) string {
	if addr.Is6() && !addr.Is4In6() {
		return BlockSet6
	}
	return BlockSet4
}
