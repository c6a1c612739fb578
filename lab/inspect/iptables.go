package inspect

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// IPSChain is the iptables chain (filter table, jumped to from FORWARD) that
// sends forwarded traffic to the engine's queues in inline mode.
const IPSChain = "FWAB-IPS"

// Steering says how traffic reaches the engine in a network namespace.
type Steering struct {
	Netns string // network namespace; empty means the current one
	Mode  Mode
	// Interfaces whose forwarded traffic, in and out, is inspected (inline).
	// Empty means all forwarded traffic.
	Interfaces []string
	Queue      uint16 // inline: first queue
	Queues     int    // inline: number of queues, --queue-balance when more than 1
	// Bypass adds --queue-bypass: with no engine listening, packets pass
	// instead of being dropped. Set it only together with fail-open.
	Bypass bool
}

// Runner runs a command and returns its combined output. The default runs
// it as a child process.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

func execRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, name, args...).CombinedOutput()
}

// Steerer installs and removes the steering rules. Its zero value runs the
// real commands.
type Steerer struct {
	Run Runner
}

func (s Steerer) run(ctx context.Context, netns string, name string, args ...string) ([]byte, error) {
	r := s.Run
	if r == nil {
		r = execRunner
	}
	if netns != "" {
		args = append([]string{"netns", "exec", netns, name}, args...)
		name = "ip"
	}
	out, err := r(ctx, name, args...)
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Install sets up the rules of st.Mode in st.Netns and removes those of the
// other modes. Running it again with the same Steering changes nothing, and
// in legacy mode it keeps the addresses already blocked.
//
//   - inline: chain FWAB-IPS with `-j NFQUEUE --queue-num N` (or
//     `--queue-balance N:M`) for traffic in and out of each interface,
//     jumped to first thing in FORWARD. iptables-nft, because this kernel
//     has the xt NFQUEUE target but not nft's queue expression.
//   - ids: nothing (the engine captures with AF_PACKET).
//   - legacy: table inet fwab_ips with sets snort2c and snort2c6 and a
//     forward chain that drops traffic from and to their addresses.
func (s Steerer) Install(ctx context.Context, st Steering) error {
	switch st.Mode {
	case Inline:
		if err := s.removeBlock(ctx, st.Netns); err != nil {
			return err
		}
		return s.installQueue(ctx, st)
	case IDS:
		return s.Remove(ctx, st.Netns)
	case Legacy:
		if err := s.removeQueue(ctx, st.Netns); err != nil {
			return err
		}
		return s.installBlock(ctx, st.Netns)
	}
	return fmt.Errorf("unknown inspection mode %q: use inline, ids or legacy", st.Mode)
}

// Remove deletes every rule, chain, table and set Install may have made.
// Removing what is not there is not an error.
func (s Steerer) Remove(ctx context.Context, netns string) error {
	if err := s.removeQueue(ctx, netns); err != nil {
		return err
	}
	return s.removeBlock(ctx, netns)
}

// QueueRules returns the iptables-nft rule specs (without -A CHAIN) that
// inline mode puts in IPSChain.
func QueueRules(st Steering) [][]string {
	target := []string{"-j", "NFQUEUE"}
	if st.Queues > 1 {
		target = append(target, "--queue-balance", fmt.Sprintf("%d:%d", st.Queue, int(st.Queue)+st.Queues-1))
	} else {
		target = append(target, "--queue-num", strconv.Itoa(int(st.Queue)))
	}
	if st.Bypass {
		target = append(target, "--queue-bypass")
	}
	if len(st.Interfaces) == 0 {
		return [][]string{target}
	}
	var rules [][]string
	for _, ifc := range st.Interfaces {
		rules = append(rules, append([]string{"-i", ifc}, target...))
		rules = append(rules, append([]string{"-o", ifc}, target...))
	}
	return rules
}

func (s Steerer) installQueue(ctx context.Context, st Steering) error {
	if st.Queues > 1 && int(st.Queue)+st.Queues > 65536 {
		return fmt.Errorf("queues %d..%d out of range 0..65535", st.Queue, int(st.Queue)+st.Queues-1)
	}
	for _, ifc := range st.Interfaces {
		if ifc == "" || strings.ContainsAny(ifc, " \t\n/") || len(ifc) > 15 {
			return fmt.Errorf("bad interface name %q", ifc)
		}
	}
	if _, err := s.run(ctx, st.Netns, "iptables-nft", "-w", "-t", "filter", "-L", IPSChain, "-n"); err != nil {
		if _, err := s.run(ctx, st.Netns, "iptables-nft", "-w", "-t", "filter", "-N", IPSChain); err != nil {
			return err
		}
	}
	if _, err := s.run(ctx, st.Netns, "iptables-nft", "-w", "-t", "filter", "-F", IPSChain); err != nil {
		return err
	}
	for _, r := range QueueRules(st) {
		args := append([]string{"-w", "-t", "filter", "-A", IPSChain}, r...)
		if _, err := s.run(ctx, st.Netns, "iptables-nft", args...); err != nil {
			return err
		}
	}
	if _, err := s.run(ctx, st.Netns, "iptables-nft", "-w", "-t", "filter", "-C", "FORWARD", "-j", IPSChain); err != nil {
		if _, err := s.run(ctx, st.Netns, "iptables-nft", "-w", "-t", "filter", "-I", "FORWARD", "1", "-j", IPSChain); err != nil {
			return err
		}
	}
	return nil
}

func (s Steerer) removeQueue(ctx context.Context, netns string) error {
	if _, err := s.run(ctx, netns, "iptables-nft", "-w", "-t", "filter", "-L", IPSChain, "-n"); err != nil {
		return nil // no chain, nothing to remove
	}
	for {
		if _, err := s.run(ctx, netns, "iptables-nft", "-w", "-t", "filter", "-D", "FORWARD", "-j", IPSChain); err != nil {
			break // no jump left
		}
	}
	if _, err := s.run(ctx, netns, "iptables-nft", "-w", "-t", "filter", "-F", IPSChain); err != nil {
		return err
	}
	_, err := s.run(ctx, netns, "iptables-nft", "-w", "-t", "filter", "-X", IPSChain)
	return err
}

// BlockRuleset is the nft script legacy mode loads. It only adds: existing
// set elements survive, the chain is flushed and refilled.
func BlockRuleset() string {
	t := "inet " + BlockTable
	return strings.Join([]string{
		"add table " + t,
		"add set " + t + " " + BlockSet4 + " { type ipv4_addr; }",
		"add set " + t + " " + BlockSet6 + " { type ipv6_addr; }",
		"add chain " + t + " block { type filter hook forward priority -5; policy accept; }",
		"flush chain " + t + " block",
		"add rule " + t + " block ip saddr @" + BlockSet4 + " drop",
		"add rule " + t + " block ip daddr @" + BlockSet4 + " drop",
		"add rule " + t + " block ip6 saddr @" + BlockSet6 + " drop",
		"add rule " + t + " block ip6 daddr @" + BlockSet6 + " drop",
	}, "\n") + "\n"
}

func (s Steerer) installBlock(ctx context.Context, netns string) error {
	r := s.Run
	if r == nil {
		r = func(ctx context.Context, name string, args ...string) ([]byte, error) {
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Stdin = strings.NewReader(BlockRuleset())
			return cmd.CombinedOutput()
		}
	}
	_, err := Steerer{Run: r}.run(ctx, netns, "nft", "-f", "-")
	return err
}

func (s Steerer) removeBlock(ctx context.Context, netns string) error {
	if _, err := s.run(ctx, netns, "nft", "list", "table", "inet", BlockTable); err != nil {
		return nil // no table
	}
	_, err := s.run(ctx, netns, "nft", "delete", "table", "inet", BlockTable)
	return err
}

// Blocked lists the addresses in the block sets of netns.
func (s Steerer) Blocked(ctx context.Context, netns string) ([]string, error) {
	var addrs []string
	for _, set := range []string{BlockSet4, BlockSet6} {
		out, err := s.run(ctx, netns, "nft", "list", "set", "inet", BlockTable, set)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, parseSetElements(string(out))...)
	}
	return addrs, nil
}

// parseSetElements reads the `elements = { a, b, ... }` of `nft list set`.
func parseSetElements(out string) []string {
	_, rest, ok := strings.Cut(out, "elements = {")
	if !ok {
		return nil
	}
	body, _, _ := strings.Cut(rest, "}")
	return strings.FieldsFunc(body, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' })
}
