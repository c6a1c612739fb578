package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connect is a connection-rate probe: for Duration, Parallel workers on the
// client open TCP connections to a listener on the server as fast as they
// can, each closed as soon as its handshake completes. A firewall spends
// its rule evaluation and state creation on the first packet of a
// connection; one long stream pays that once, so only many connections show
// what a large rule set or a package in the path costs. This is what
// firewall datasheets call connections per second (netperf's TCP_CRR
// without the request and response).
//
// Both ends run fwab's own agent (fwab agent connect-server and
// connect-client): no tool in Debian's main archive measures a connection
// rate (netperf is in non-free; iperf 2's --connect-only rate-limits by
// its report interval and counts a refused connection as success).
type Connect struct {
	Duration time.Duration // default 10 s
	Parallel int           // workers, each with one connection at a time; default 4
	// Timeout bounds one connection's handshake; a slower one counts as a
	// failure. Default 1 s: a SYN the firewall dropped is retransmitted
	// after 1 s, so a longer timeout would count retransmits as slow
	// connects.
	Timeout time.Duration
	// Port is the server port; zero picks one in 20000..29999 per probe.
	Port int
	// Binary runs fwab's agent on an endpoint. Empty means this program on
	// a local endpoint (a network namespace of this host) and "fwab" on a
	// remote one, which must then have fwab on its PATH.
	Binary string
}

// ConnectResult is what the client agent reports.
type ConnectResult struct {
	Seconds   float64 `json:"seconds"`
	Parallel  int     `json:"parallel"`
	Connects  int64   `json:"connects"`   // handshakes completed
	Failures  int64   `json:"failures"`   // refused, reset or timed out
	PerSecond float64 `json:"per_second"` // Connects / Seconds
	// ConnectMS are the handshake times of the completed connections.
	ConnectMS  ConnectTimes `json:"connect_ms"`
	FirstError string       `json:"first_error,omitempty"`
}

// ConnectTimes summarizes handshake times in milliseconds.
type ConnectTimes struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// ConnectProbe is the Sample.Probe of a connection-rate probe.
const ConnectProbe = "connect"

func (c Connect) withDefaults() Connect {
	if c.Duration == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Parallel == 0 {
		c.Parallel = 4
	}
	if c.Timeout == 0 {
		c.Timeout = time.Second
	}
	return c
}

// Validate reports a setting the agent would refuse.
func (c Connect) Validate() error {
	switch {
	case c.Duration < 0 || (c.Duration > 0 && c.Duration < time.Second) || c.Duration > 24*time.Hour:
		return fmt.Errorf("connect duration %v: use 1s to 24h", c.Duration)
	case c.Parallel < 0 || c.Parallel > 256:
		return fmt.Errorf("connect parallel %d: use 1 to 256 workers", c.Parallel)
	case c.Timeout < 0 || c.Timeout > time.Minute:
		return fmt.Errorf("connect timeout %v: use up to 1m", c.Timeout)
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("connect port %d: use 1 to 65535, or 0 for a fresh port per probe", c.Port)
	}
	return nil
}

// agent is the command line that runs fwab's agent on e.
func (c Connect) agent(e Endpoint, args ...string) []string {
	bin := c.Binary
	if bin == "" {
		bin = "fwab"
		if _, local := e.Runner.(Local); local {
			if exe, err := os.Executable(); err == nil {
				bin = exe
			}
		}
	}
	return append([]string{bin, "agent"}, args...)
}

// Measure runs the probe once from client to server while watching what w
// asks. Like Iperf3.Measure it never fails with an error: a probe that
// cannot run is a failed Sample whose Reason says why.
func (c Connect) Measure(ctx context.Context, client, server Endpoint, w Watch) (s Sample) {
	c = c.withDefaults()
	s = Sample{Probe: ConnectProbe, Direction: Up, Parallel: c.Parallel, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	defer func() { s.Elapsed = time.Since(s.Started) }()
	fail := func(format string, args ...any) Sample {
		s.Failed, s.Reason = true, fmt.Sprintf(format, args...)
		return s
	}
	if err := c.Validate(); err != nil {
		return fail("%v", err)
	}
	if client.Runner == nil || server.Runner == nil {
		return fail("connect: client and server endpoints both need a way to run commands")
	}
	if server.Addr == "" {
		return fail("connect: the server endpoint has no address to connect to; set its addr")
	}
	for attempt := 1; ; attempt++ {
		port := c.Port
		if port == 0 {
			port = nextPort(20000, 29999)
		}
		s.Port = port
		if retry := c.runOnce(ctx, client, server, port, w, &s); !retry {
			return s
		}
		if c.Port != 0 || attempt == portAttempts {
			return fail("no free port on %s for the connect server (last tried %d): %s", server, port, s.Reason)
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("port %d in use on %s; trying another", port, server))
		s.Failed, s.Reason = false, ""
	}
}

func (c Connect) runOnce(ctx context.Context, client, server Endpoint, port int, w Watch, s *Sample) (retry bool) {
	fail := func(format string, args ...any) bool {
		s.Failed, s.Reason = true, fmt.Sprintf(format, args...)
		return false
	}
	listen := net.JoinHostPort(server.Addr, strconv.Itoa(port))
	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The server ends by itself a while after the probe should have, so
	// that a lost session cannot leave it listening.
	life := c.Duration + 2*time.Minute
	srv, err := server.Runner.Start(srvCtx, c.agent(server, "connect-server", "--listen", listen, "--for", life.String()))
	if err != nil {
		return fail("%s", agentError(server, err))
	}
	defer srv.Kill()
	select {
	case <-srv.Done():
		out, err := srv.Wait()
		reason := fmt.Sprintf("connect server on %s: %s", server, strings.TrimSpace(string(out)))
		if err != nil {
			reason = agentError(server, err)
		}
		if isAddrInUse(reason) {
			s.Reason = reason
			return true
		}
		return fail("%s", reason)
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		return fail("connect: %v", ctx.Err())
	}
	stop := startWatch(ctx, client, server, Iperf3{Duration: c.Duration}, w)
	cctx, ccancel := context.WithTimeout(ctx, c.Duration+c.Timeout+30*time.Second)
	out, err := client.Runner.Run(cctx, c.agent(client, "connect-client", "--to", listen, "--time", c.Duration.String(),
		"--parallel", strconv.Itoa(c.Parallel), "--timeout", c.Timeout.String()))
	ccancel()
	stop(s)
	s.ClientJSON = out
	if ctx.Err() != nil {
		return fail("connect: %v", ctx.Err())
	}
	if err != nil {
		return fail("connect client on %s: %s", client, agentError(client, err))
	}
	var r ConnectResult
	if err := json.Unmarshal(out, &r); err != nil {
		return fail("connect client on %s wrote no report (%v): %s", client, err, excerpt(out))
	}
	s.Connect = &r
	switch {
	case r.Connects == 0:
		return fail("%s could not open one connection to %s port %d in %v: %s (check routes and the firewall's rules between the endpoints)", client, server.Addr, port, c.Duration, r.FirstError)
	case r.Failures > 0 && float64(r.Failures) > 0.01*float64(r.Connects+r.Failures):
		s.Warnings = append(s.Warnings, fmt.Sprintf("%d of %d connections failed (first: %s): the rate counts only completed ones", r.Failures, r.Connects+r.Failures, r.FirstError))
	}
	return false
}

func agentError(e Endpoint, err error) string {
	if errors.Is(err, ErrNotFound) {
		return fmt.Sprintf("fwab's agent cannot run on %s (%v): put the fwab binary on that host's PATH, or set the probe's binary", e, err)
	}
	return fmt.Sprintf("fwab agent on %s: %v", e, err)
}

// Check makes sure the probe can run before anything is changed on the
// firewall: the agent runs on both hosts and a one-second probe completes
// connections.
func (c Connect) Check(ctx context.Context, client, server Endpoint) error {
	if err := c.Validate(); err != nil {
		return err
	}
	short := c
	short.Duration = time.Second
	if s := short.Measure(ctx, client, server, Watch{}); s.Failed {
		return fmt.Errorf("trial connect probe failed: %s", s.Reason)
	}
	return nil
}

// ServeConnect accepts connections on addr and closes each at once, until
// ctx ends. It is the agent's connect-server.
func ServeConnect(ctx context.Context, addr string) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		conn.Close()
	}
}

// RunConnect opens connections to addr from c.Parallel workers for
// c.Duration and reports the rate. It is the agent's connect-client. The
// clock starts with the first completed connection (a server that is still
// starting gets up to 5 s), so that the rate is not diluted by the wait.
func RunConnect(ctx context.Context, addr string, c Connect) (ConnectResult, error) {
	if err := c.Validate(); err != nil {
		return ConnectResult{}, err
	}
	c = c.withDefaults()
	d := net.Dialer{Timeout: c.Timeout}
	if err := firstConnect(ctx, d, addr); err != nil {
		return ConnectResult{Parallel: c.Parallel, FirstError: err.Error()}, nil
	}
	var (
		connects, failures atomic.Int64
		firstErr           atomic.Value
		mu                 sync.Mutex
		times              []time.Duration
		wg                 sync.WaitGroup
	)
	start := time.Now()
	end := start.Add(c.Duration)
	for range c.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 4096)
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(end) {
					break
				}
				conn, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					failures.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				local = append(local, time.Since(t0))
				connects.Add(1)
				// A reset instead of a FIN: the client's port is free again
				// at once rather than held in TIME_WAIT for a minute, which
				// would run a fast probe out of ports.
				if tc, ok := conn.(*net.TCPConn); ok {
					tc.SetLinger(0)
				}
				conn.Close()
			}
			mu.Lock()
			times = append(times, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return ConnectResult{}, err
	}
	secs := time.Since(start).Seconds()
	r := ConnectResult{Seconds: secs, Parallel: c.Parallel, Connects: connects.Load(), Failures: failures.Load()}
	r.PerSecond = float64(r.Connects) / secs
	if e, ok := firstErr.Load().(string); ok {
		r.FirstError = e
	}
	r.ConnectMS = summarizeTimes(times)
	return r, nil
}

// firstConnect waits until addr accepts a connection, up to 5 s.
func firstConnect(ctx context.Context, d net.Dialer, addr string) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func summarizeTimes(ts []time.Duration) ConnectTimes {
	if len(ts) == 0 {
		return ConnectTimes{}
	}
	slices.Sort(ts)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	at := func(q float64) float64 { return ms(ts[int(q*float64(len(ts)-1))]) }
	return ConnectTimes{Min: ms(ts[0]), Median: at(0.5), P99: at(0.99), Max: ms(ts[len(ts)-1])}
}
