package probe

import (
	"context"
	"fmt"
	"time"
)

// IdleProbe is the probe name of an idle phase's sample: the DUT's CPU,
// temperature and power, and the latency through it, with no traffic, so
// that a report can set them beside the same figures under load (the T730
// review: 18 W idle, 27 W under load).
const IdleProbe = "idle"

// Idle samples what w asks for during d with no traffic through the
// firewall: the DUT's metrics, the power meter, and with w.Ping the
// latency from client to server at rest. Like Measure it never returns an
// error: a phase that cannot run is a failed Sample whose Reason says why.
func Idle(ctx context.Context, d time.Duration, client, server Endpoint, w Watch) (s Sample) {
	s = Sample{Probe: IdleProbe, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	defer func() { s.Elapsed = time.Since(s.Started) }()
	switch {
	case d <= 0:
		s.Failed, s.Reason = true, fmt.Sprintf("idle phase of %v: give a positive duration", d)
		return s
	case w.DUT == nil && w.Power == nil && !w.Ping:
		s.Failed, s.Reason = true, "idle phase: nothing to sample (no DUT metrics, power meter or ping)"
		return s
	}
	if w.Ping && server.Addr == "" {
		w.Ping = false
		s.Warnings = append(s.Warnings, "idle phase: the server endpoint has no address to ping")
	}
	stop := startWatch(ctx, client, server, Iperf3{Duration: d}, w)
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	stop(&s)
	if err := ctx.Err(); err != nil {
		s.Failed, s.Reason = true, fmt.Sprintf("idle phase: %v", err)
		return s
	}
	if len(s.DUT) == 0 && len(s.Power) == 0 && s.Ping == nil {
		s.Failed, s.Reason = true, "idle phase: no reading succeeded"
		if len(s.Warnings) > 0 {
			s.Reason += ": " + s.Warnings[0]
		}
	}
	return s
}
