package fwapi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
)

// Both products apply an IPsec change the way their GUI does: the
// configuration is generated, then strongSwan is reloaded (or started) by
// its rc script in the background, after the call has returned. A reload
// keeps an established SA of a trap or none child on the proposal it
// negotiated until it is rekeyed (a start child strongSwan re-initiates by
// itself), so a cipher change may not reach the tunnel that is measured.
// fwab therefore checks that tunnel's SAs and re-establishes it, and only
// it: the other tunnels of a production box stay up.
//
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:3264 — `mwexec_bg("/usr/local/sbin/strongswanrc reload", false);` while charon runs (:3266 start otherwise)
// upstream: pfsense/pfsense@c6220dcf7faf3492713c6c30bb86d3971b2772a9 src/usr/local/sbin/strongswanrc:54 — the reload is `swanctl --load-all --noprompt`, which leaves established SAs alone
// upstream: opnsense-core 26.1 src/etc/inc/plugins.inc.d/ipsec.inc:1462 — `mwexecfb('/usr/local/etc/rc.d/strongswan onereload');`
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:895 — the GUI's own disconnect: `swanctl --terminate --force` of one connection
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:868 — and its connect: `swanctl --initiate --timeout 5` with `'--' . $type` (child) and one child's name

// Re-establishing one tunnel is tried every ipsecRetryEvery, for the
// driver's IPsecTimeout (default DefaultIPsecTimeout): the background
// reload may still be loading the new proposal, or the daemon still
// starting, when fwab first asks.
const (
	ipsecRetryEvery     = 500 * time.Millisecond
	DefaultIPsecTimeout = 30 * time.Second
)

func ipsecTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultIPsecTimeout
	}
	return d
}

// ipsecTunnels are the tunnels fwab re-establishes after an IPsec apply:
// the enabled tunnels of cfg whose ipsec@ knob the changes set to a
// proposal, and every enabled tunnel whose installed child SAs run other
// ESP algorithms than cfg asks for (a restore, or a switch of the whole
// config). A tunnel that is down and not under test is left alone.
func ipsecTunnels(cfg *configxml.Config, changes []configxml.Change, sas []IPsecSA) []configxml.Tunnel {
	var names []string
	for _, ch := range changes {
		if name, ok := strings.CutPrefix(ch.Knob, "ipsec@"); ok && ch.To != "none" && ch.To != "" {
			names = append(names, name)
		}
	}
	var out []configxml.Tunnel
	for _, t := range cfg.Tunnels() {
		if !t.Enabled || t.Conn == "" {
			continue
		}
		encr, integ := SwanctlAlgorithms(t.Proposal.ESP)
		stale := slices.ContainsFunc(sas, func(sa IPsecSA) bool {
			return sa.IKE == t.Conn && sa.State == "INSTALLED" && (sa.Encr != encr || sa.Integ != integ)
		})
		if stale || slices.Contains(names, t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// ipsecSessions is how a driver takes one tunnel down and up again and
// lists the SAs.
type ipsecSessions struct {
	// settle waits for the product's background reload to finish, where
	// the driver can see it; nil where it cannot.
	settle func(ctx context.Context) error
	// terminate ends the connection's IKE SA (and its children); an
	// answer that there was none is not an error.
	terminate func(ctx context.Context, t configxml.Tunnel) error
	// initiate brings the connection's children up; failed says why
	// they did not (retried; final when the charon has no such
	// connection after settle), err that the firewall could not be asked.
	initiate func(ctx context.Context, t configxml.Tunnel) (failed string, final bool, err error)
	sas      func(ctx context.Context) ([]IPsecSA, error)
	within   time.Duration
}

// apply re-establishes what ipsecTunnels picks for cfg and changes.
func (s ipsecSessions) apply(ctx context.Context, cfg *configxml.Config, changes []configxml.Change) error {
	if !slices.ContainsFunc(cfg.Tunnels(), func(t configxml.Tunnel) bool { return t.Enabled && t.Conn != "" }) {
		return nil // IPsec off, or no tunnel: nothing runs to re-establish
	}
	if s.settle != nil {
		if err := s.settle(ctx); err != nil {
			return err
		}
	}
	sas, err := s.sas(ctx)
	if err != nil {
		return fmt.Errorf("ipsec: list SAs: %w", err)
	}
	return s.reestablish(ctx, ipsecTunnels(cfg, changes, sas))
}

// reestablish brings each tunnel up on the ESP algorithms the config asks
// for: when its child SAs do not already show them (strongSwan re-initiates
// a changed child of start_action=start by itself on a reload), it is taken
// down and up, and that is retried, backing off from ipsecRetryEvery, for
// s.within.
func (s ipsecSessions) reestablish(ctx context.Context, tunnels []configxml.Tunnel) error {
	for _, t := range tunnels {
		encr, integ := SwanctlAlgorithms(t.Proposal.ESP)
		deadline := time.Now().Add(s.within)
		wait := ipsecRetryEvery
		var failed string
		for attempt := 0; ; attempt++ {
			sas, err := s.sas(ctx)
			if err != nil {
				return fmt.Errorf("ipsec: list SAs: %w", err)
			}
			seen := childrenOn(sas, t, encr, integ)
			if seen == "" {
				break
			}
			if time.Now().After(deadline) {
				if failed != "" {
					seen += "; the last initiate said: " + failed
				}
				return fmt.Errorf("ipsec@%s: connection %s did not come up with ESP %s within %v (%d attempts): %s", t.Name, t.Conn, strings.Trim(encr+"/"+integ, "/"), s.within, attempt, seen)
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(wait):
				}
				wait = min(2*wait, 4*time.Second)
			}
			if err := s.terminate(ctx, t); err != nil {
				return fmt.Errorf("ipsec: terminate %s: %w", t.Conn, err)
			}
			var final bool
			failed, final, err = s.initiate(ctx, t)
			if err != nil {
				return fmt.Errorf("ipsec: initiate %s: %w", t.Conn, err)
			}
			if final {
				return fmt.Errorf("ipsec@%s: connection %s cannot be initiated: %s", t.Name, t.Conn, failed)
			}
		}
	}
	return nil
}

// childrenOn says what is missing for t: "" when each of its children has
// an installed SA with encr/integ, else what the SAs of its connection
// show.
func childrenOn(sas []IPsecSA, t configxml.Tunnel, encr, integ string) string {
	var seen []string
	ok := 0
	for _, child := range t.Children {
		for _, sa := range sas {
			if sa.IKE != t.Conn || sa.Name != child {
				continue
			}
			seen = append(seen, fmt.Sprintf("%s %s %s", sa.Name, sa.State, strings.Trim(sa.Encr+"/"+sa.Integ, "/")))
			if sa.State == "INSTALLED" && sa.Encr == encr && sa.Integ == integ {
				ok++
				break
			}
		}
	}
	if ok == len(t.Children) {
		return ""
	}
	if len(seen) == 0 {
		return "no child SA"
	}
	return strings.Join(seen, ", ")
}
