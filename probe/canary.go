package probe

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
)

// Canary checks that an IPS still drops what its rules say while a probe
// loads the firewall (RFC 9411 §4.2.1: the security features verified
// working during the benchmark): a slow stream of datagrams, each
// carrying a nonce that a drop rule of fwab's own matches, runs from
// client to server beside the load, and the server counts what passed.
// A working inline IPS passes none; any that passes means the box let
// through traffic its rules drop (fail-open, a saturated or bypassed
// engine).
//
// The stream is the blackout agents' (blackout-send with --payload), so
// it needs nothing on the endpoints that a Blackout does not.
type Canary struct {
	Rate  float64 // triggers a second; default 20
	Nonce []byte  // what the drop rule matches; NewNonce makes one
	// Port is the server port of the triggers (the control stream's is
	// the next); zero picks one in 35000..39998, apart from a blackout stream's.
	Port int
	// Binary runs fwab's agent on an endpoint, as Connect.Binary.
	Binary string
}

// CanaryResult is what one probe's canary saw.
type CanaryResult struct {
	Sent   uint64 `json:"sent"`   // triggers sent
	Passed uint64 `json:"passed"` // of them, arrived: the IPS did not drop them
	// ControlSent and ControlPassed count the control stream: the same
	// datagrams without the nonce, from another port beside the
	// triggers, which the IPS has no rule against.
	ControlSent   uint64 `json:"control_sent"`
	ControlPassed uint64 `json:"control_passed"`
	// Port is the triggers' server port, which the IDS's alert lines name.
	Port int `json:"port,omitempty"`
	// Detect marks a canary at a point whose IDS only detects (ids@IF is
	// ids): its triggers are meant to pass, and Alerted counts those the
	// IDS logged an alert for (AlertLogs.Since).
	Detect  bool   `json:"detect,omitempty"`
	Alerted uint64 `json:"alerted,omitempty"`
}

// FailOpen reports whether any trigger passed an IPS that should have
// dropped it. A detect-only point cannot fail open: see Missed.
func (r CanaryResult) FailOpen() bool { return !r.Detect && r.Passed > 0 }

// Missed is how many triggers a detect-only IDS logged no alert for, of
// those that passed the box: those it did not see (capture drops under
// load) or did not inspect. A trigger lost before the box is no miss of
// the IDS's.
func (r CanaryResult) Missed() uint64 {
	if !r.Detect || r.Alerted >= r.Passed {
		return 0
	}
	return r.Passed - r.Alerted
}

// AlertLogs are the alerts the box's IDS instances logged for one rule
// and one destination port, by instance (its log folder).
type AlertLogs map[string]uint64

// Since is how many alerts the busiest instance gained from before to l:
// an IDS instance on the triggers' path logs each once, and one that saw
// them stands for all (as one inline IPS that drops them does). ok is
// false when no instance is in both readings, or the count of one went
// back: its logs were pruned or emptied between them, and the count says
// nothing.
func (l AlertLogs) Since(before AlertLogs) (n uint64, ok bool) {
	for path, a := range l {
		b, in := before[path]
		if !in {
			continue
		}
		if a < b {
			return 0, false
		}
		ok = true
		n = max(n, a-b)
	}
	return n, ok
}

// CanaryPort picks a server port for a canary's triggers, as Start does
// for a Canary without one: a caller that counts each round's alerts by
// their port sets it itself.
func CanaryPort() int { return nextPort(35000, 39998) }

// Conclusive reports whether the triggers dropped can be the IPS's doing:
// at least half the control stream passed. With less of it through, the
// path dropped the datagrams (a filter rule, a box that stopped
// forwarding, a saturated link), and no trigger passing shows little of
// the IPS.
func (r CanaryResult) Conclusive() bool {
	return r.ControlSent > 0 && 2*r.ControlPassed >= r.ControlSent
}

// CanaryPrefix starts every nonce, so that a rule and a datagram are
// fwab's at a glance.
const CanaryPrefix = "fwab-canary-"

// NewNonce returns a fresh nonce: CanaryPrefix and 16 random hex digits,
// printable so that it reads in a rules file and in a packet capture.
func NewNonce() []byte {
	var b [8]byte
	rand.Read(b[:])
	return []byte(CanaryPrefix + hex.EncodeToString(b[:]))
}

// NonceFrom returns the nonce of seed: CanaryPrefix and 16 hex digits of
// its SHA-256, so that a sweep resumed later places and sends the same
// one as the run that began it.
func NonceFrom(seed string) []byte {
	sum := sha256.Sum256([]byte(seed))
	return []byte(CanaryPrefix + hex.EncodeToString(sum[:8]))
}

// SuricataRule is the drop rule that matches the nonce, with sid.
func (c Canary) SuricataRule(sid int) string {
	return fmt.Sprintf("drop udp any any -> any any (msg:\"fwab canary\"; content:\"%s\"; sid:%d; rev:1;)", c.Nonce, sid)
}

// Validate reports a setting Start would refuse.
func (c Canary) Validate() error {
	switch {
	case c.Rate != 0 && (c.Rate < 1 || c.Rate > 1000) || math.IsNaN(c.Rate):
		return fmt.Errorf("canary rate %g triggers/s: use 1 to 1,000", c.Rate)
	case strings.Trim(string(c.Nonce), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != "":
		return fmt.Errorf("canary nonce %q: letters, digits and - only, so that it stands in a rule's content as it is", c.Nonce)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("canary port %d: use 1 to 65535, or 0 for a fresh port", c.Port)
	case len(c.Nonce) < len(CanaryPrefix)+8:
		return fmt.Errorf("canary nonce %q: too short to be fwab's alone; use NewNonce", c.Nonce)
	case len(c.Nonce) > 1472-blackoutHeader:
		return fmt.Errorf("canary nonce of %d bytes: more than a datagram holds", len(c.Nonce))
	}
	return nil
}

// Start starts the triggers from client to server; stop ends them and
// reports how many passed. Unlike a blackout stream, none arriving is
// the expected outcome, not an error.
func (c Canary) Start(ctx context.Context, client, server Endpoint) (stop func(context.Context) (CanaryResult, error), err error) {
	if c.Rate == 0 {
		c.Rate = 20
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	port, controlPort := c.Port, c.Port+1
	switch {
	case port == 0:
		port = CanaryPort()
		controlPort = port + 1
	case port == 65535:
		controlPort = port - 1
	}
	// Each trigger is a flow of its own (a new source port): Suricata
	// drops the rest of a flow once a drop rule matched in it, so in one
	// flow the triggers after the first would show the flow's verdict
	// and not the rule's. The control stream: the same agents, rate and
	// fresh flows (new states in pf and Suricata, as the triggers need),
	// with a payload that holds no nonce, to its own port.
	control := append([]byte("fwab-control-"), c.Nonce[len(CanaryPrefix):]...)
	streams := []stream{
		{what: "canary", rate: c.Rate, conns: -1, port: port, binary: c.Binary, payload: hex.EncodeToString(c.Nonce), fresh: true},
		{what: "canary control", rate: c.Rate, conns: -1, port: controlPort, binary: c.Binary, payload: hex.EncodeToString(control), fresh: true},
	}
	stops := make([]func(context.Context) (blackoutSent, blackoutReceived, error), len(streams))
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, st := range streams {
		wg.Go(func() { stops[i], errs[i] = startStream(ctx, client, server, st) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, stop := range stops {
			if stop != nil {
				stop(ctx)
			}
		}
		return nil, err
	}
	return func(ctx context.Context) (CanaryResult, error) {
		r := CanaryResult{Port: port}
		var errs [2]error
		var wg sync.WaitGroup
		wg.Go(func() {
			st, rt, err := stops[0](ctx)
			r.Sent, r.Passed, errs[0] = st.Sent, rt.Received, err
		})
		wg.Go(func() {
			st, rt, err := stops[1](ctx)
			r.ControlSent, r.ControlPassed, errs[1] = st.Sent, rt.Received, err
		})
		wg.Wait()
		if err := errors.Join(errs[:]...); err != nil {
			return CanaryResult{}, err
		}
		return r, nil
	}, nil
}
