package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Direction is which way an iperf3 probe sends, seen from the LAN client.
type Direction string

// Directions.
const (
	Up    Direction = "up"    // client to server (LAN to WAN)
	Down  Direction = "down"  // server to client (-R)
	Bidir Direction = "bidir" // both at once (--bidir)
)

// Endpoint is a traffic host. Probes run between two of them, through the
// firewall: never to or from the firewall itself.
type Endpoint struct {
	Name   string // for messages: "client", "lan", a host name
	Addr   string // the address traffic goes to or from
	Runner Runner
}

func (e Endpoint) String() string {
	host := ""
	if s, ok := e.Runner.(fmt.Stringer); ok {
		host = " (" + s.String() + ")"
	}
	name := e.Name
	if name == "" {
		name = "endpoint"
	}
	return name + " " + e.Addr + host
}

// Iperf3 is one iperf3 probe. The zero value is a 10-second, single-stream
// TCP upload.
type Iperf3 struct {
	Direction   Direction
	Parallel    int           // -P streams; 0 means 1
	Duration    time.Duration // -t; 0 means 10 s
	Omit        time.Duration // -O: seconds left out at the start (TCP slow start)
	UDP         bool          // -u
	Length      int           // -l: buffer length, the datagram payload size with UDP; 0 is iperf3's default
	Bitrate     string        // -b, such as "500M" or "0" (unlimited); required with UDP
	CPUAffinity string        // -A: "N" pins the client to core N, "N,M" also the server to core M
	// Window is the socket buffer size (-w, such as "4M"), which iperf3
	// sets on both ends' sockets (the client passes it to the server); ""
	// is the system's default. For UDP it is the receiver's buffer: a
	// small one drops datagrams the firewall passed.
	//
	// upstream: esnet/iperf@e61aaf8c95df956cefbc54fab7b3d78914664180 src/iperf_udp.c:295 — 3.12 sets `SO_RCVBUF` and `SO_SNDBUF` to `socket_bufsize` on a UDP stream's socket, on both sides
	// upstream: esnet/iperf@e61aaf8c95df956cefbc54fab7b3d78914664180 src/iperf_udp.c:337 — and fails the test when the kernel grants less (`socket_bufsize > rcvbuf_actual`: "socket buffer size not set correctly")
	Window string
	// Counters64 asks for 64-bit UDP packet counters (--udp-counters-64bit),
	// which a long fast test of small datagrams needs.
	Counters64 bool
	// ClientCPUs and ServerCPUs pin each side's iperf3 process to cores, a
	// cpuset list such as "2" or "0-1,4" (taskset -c on Linux, cpuset -l
	// on FreeBSD); "" leaves it to the scheduler.
	ClientCPUs, ServerCPUs string
	// LinkCPUs gives links run at once (MeasureLinks) cores of their own,
	// by link name, over ClientCPUs and ServerCPUs.
	LinkCPUs map[string]CPUSides

	// Port is the server port. Zero (the default) picks a fresh random port
	// in PortRange for every probe and moves on when one is taken; a fixed
	// port that is taken fails the probe.
	Port      int
	PortRange [2]int // default 20000..29999

	// CPUBoundPercent is the endpoint CPU use (percent of one core) above
	// which a sample is flagged EndpointCPUBound; default 90. With iperf3
	// 3.16 or later and several streams it applies per stream thread.
	CPUBoundPercent float64
	// ConnectTimeout bounds how long the client tries to reach the server;
	// default 5 s.
	ConnectTimeout time.Duration
	// StartGrace is how long a fresh server is given to fail (a taken port)
	// before the client connects; default 300 ms.
	StartGrace time.Duration
	// Binary is the iperf3 command; default "iperf3".
	Binary string
	// arm, when several links run together (MeasureLinks), holds the
	// client back until every link's server listens.
	arm *seat
}

// Watch is what is observed while a probe runs, besides the probe itself.
type Watch struct {
	// DUT reads the firewall's metrics (a firewall driver's Metrics); nil skips.
	DUT      func(ctx context.Context) (DUTMetrics, error)
	DUTEvery time.Duration // default 1 s
	// Power reads a power meter; nil skips.
	Power      PowerMeter
	PowerEvery time.Duration // default 1 s
	// Ping measures latency under load from the client to the server.
	Ping         bool
	PingInterval time.Duration // default 200 ms
}

// Sample is the outcome of one probe. A failed sample keeps what is known
// and says why in Reason.
type Sample struct {
	Probe     string // "iperf3"
	Direction Direction
	UDP       bool
	Length    int
	Parallel  int
	Started   time.Time
	Elapsed   time.Duration
	Port      int

	// Result is the client's report; ServerResult the server's, when it
	// could be read.
	Result       *Iperf3Result
	ServerResult *Iperf3Result

	// ClientCPU and ServerCPU are the iperf3 processes' CPU use, percent
	// of one core; -1 when unknown.
	ClientCPU, ServerCPU float64
	// EndpointCPUBound says an endpoint's CPU, not the DUT, limited the
	// throughput: the figure says little about the firewall.
	EndpointCPUBound bool

	// ClientStarted is when the client was launched (after its server
	// listened).
	ClientStarted time.Time
	// Links are each link's own figures when the sample sums several run
	// at once (MeasureLinks); StartSkew is how far apart their clients
	// were launched.
	Links     []LinkSample
	StartSkew time.Duration

	Ping *PingStats
	NDR  *NDRResult // a rate search's outcome and trials (NDR.Measure)
	// Connect is a connection-rate probe's report (Connect.Measure).
	Connect *ConnectResult
	// HTTP is an HTTP probe's report (HTTP.Measure).
	HTTP *HTTPResult
	// Canary is what an IPS canary run beside the probe saw; nil where
	// none ran.
	Canary *CanaryResult
	DUT    []DUTMetrics
	Power  []PowerReading

	Failed   bool
	Reason   string
	Warnings []string

	ClientJSON, ServerJSON []byte // raw reports, for the record
}

// BitsPerSecond is the received throughput of the main flow (for Bidir, of
// the upload); 0 for a failed sample.
func (s Sample) BitsPerSecond() float64 {
	if s.Result == nil || s.Failed {
		return 0
	}
	return s.Result.Flow.ReceivedBPS
}

// Retransmits of the main flow, -1 when unknown.
func (s Sample) Retransmits() int64 {
	if s.Result == nil {
		return -1
	}
	return s.Result.Flow.Retransmits
}

// SenderCPU is the CPU use of the endpoint that sent the main flow (the
// client for Up and Bidir, the server for Down); -1 when unknown.
func (s Sample) SenderCPU() float64 {
	if s.Direction == Down {
		return s.ServerCPU
	}
	return s.ClientCPU
}

// ReceiverCPU is the CPU use of the endpoint that received the main flow.
func (s Sample) ReceiverCPU() float64 {
	if s.Direction == Down {
		return s.ClientCPU
	}
	return s.ServerCPU
}

var (
	bitrateRE  = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[KMGTkmgt]?(/[0-9]+)?$`)
	affinityRE = regexp.MustCompile(`^[0-9]{1,4}(,[0-9]{1,4})?$`)
	windowRE   = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[KMGkmg]?$`)
)

// maxWindow is the largest socket buffer iperf3 takes.
//
// upstream: esnet/iperf@e61aaf8c95df956cefbc54fab7b3d78914664180 src/iperf.h:415 — `MAX_TCP_BUFFER (512 * MB)`, the bound -w is checked against (src/iperf_api.c:1293)
const maxWindow = 512 << 20

// Validate reports the first setting that iperf3 would refuse or that makes
// the probe meaningless.
func (p Iperf3) Validate() error {
	switch p.Direction {
	case "", Up, Down, Bidir:
	default:
		return fmt.Errorf("iperf3 direction %q: use up, down or bidir", p.Direction)
	}
	if p.Parallel < 0 || p.Parallel > 128 {
		return fmt.Errorf("iperf3 parallel %d: use 1 to 128 streams", p.Parallel)
	}
	if p.Duration < 0 || (p.Duration > 0 && p.Duration < time.Second) || p.Duration > 24*time.Hour {
		return fmt.Errorf("iperf3 duration %v: use whole seconds from 1s", p.Duration)
	}
	if p.Duration%time.Second != 0 || p.Omit%time.Second != 0 {
		return fmt.Errorf("iperf3 duration %v, omit %v: iperf3 takes whole seconds", p.Duration, p.Omit)
	}
	if p.Omit < 0 || p.Omit > time.Hour {
		return fmt.Errorf("iperf3 omit %v: use 0s to 1h", p.Omit)
	}
	maxLen := 1 << 20
	if p.UDP {
		maxLen = 65507
	}
	if p.Length < 0 || p.Length > maxLen {
		return fmt.Errorf("iperf3 length %d: use 1 to %d bytes (0 for iperf3's default)", p.Length, maxLen)
	}
	if p.UDP && p.Length > 0 && p.Length < 16 {
		return fmt.Errorf("iperf3 UDP length %d: iperf3 needs at least 16 bytes per datagram", p.Length)
	}
	if p.Bitrate != "" && !bitrateRE.MatchString(p.Bitrate) {
		return fmt.Errorf("iperf3 bitrate %q: write a number with an optional K, M, G or T suffix, such as 500M", p.Bitrate)
	}
	if p.UDP && p.Bitrate == "" {
		return errors.New("iperf3 UDP probe without a bitrate: iperf3 would send only 1 Mbit/s; set bitrate (such as 1G, or 0 for unlimited)")
	}
	if p.CPUAffinity != "" && !affinityRE.MatchString(p.CPUAffinity) {
		return fmt.Errorf("iperf3 CPU affinity %q: write a core number N, or N,M for client core N and server core M", p.CPUAffinity)
	}
	if p.Window != "" {
		if w, err := ParseBytes(p.Window); err != nil || w < 1024 || w > maxWindow {
			return fmt.Errorf("iperf3 window %q: write a socket buffer size from 1K to 512M, such as 4M", p.Window)
		}
	}
	for side, l := range map[string]string{"client": p.ClientCPUs, "server": p.ServerCPUs} {
		if _, err := ParseCPUList(l); l != "" && err != nil {
			return fmt.Errorf("iperf3 %s cpuset: %w", side, err)
		}
	}
	if p.Port < 0 || p.Port > 65535 {
		return fmt.Errorf("iperf3 port %d: use 1 to 65535, or 0 for a fresh port per probe", p.Port)
	}
	if r := p.PortRange; r != [2]int{} && (r[0] < 1024 || r[1] > 65535 || r[0] > r[1]) {
		return fmt.Errorf("iperf3 port range %d-%d: use an ordered range within 1024-65535", r[0], r[1])
	}
	if p.CPUBoundPercent < 0 {
		return fmt.Errorf("iperf3 CPU-bound threshold %v%%: must not be negative", p.CPUBoundPercent)
	}
	return nil
}

func (p Iperf3) withDefaults() Iperf3 {
	if p.Direction == "" {
		p.Direction = Up
	}
	if p.Parallel == 0 {
		p.Parallel = 1
	}
	if p.Duration == 0 {
		p.Duration = 10 * time.Second
	}
	if p.PortRange == [2]int{} {
		p.PortRange = [2]int{20000, 29999}
	}
	if p.CPUBoundPercent == 0 {
		p.CPUBoundPercent = 90
	}
	if p.ConnectTimeout == 0 {
		p.ConnectTimeout = 5 * time.Second
	}
	if p.StartGrace == 0 {
		p.StartGrace = 300 * time.Millisecond
	}
	if p.Binary == "" {
		p.Binary = "iperf3"
	}
	return p
}

func (p Iperf3) serverArgv(port int, addr string) []string {
	idle := int((p.ConnectTimeout + p.StartGrace).Seconds()) + 30
	argv := []string{p.Binary, "-s", "-1", "-J", "-p", strconv.Itoa(port), "--idle-timeout", strconv.Itoa(idle)}
	if addr != "" {
		argv = append(argv, "-B", addr)
	}
	return argv
}

func (p Iperf3) clientArgv(port int, addr string) []string {
	argv := []string{p.Binary, "-c", addr, "-p", strconv.Itoa(port), "-J",
		"-t", strconv.Itoa(int(p.Duration / time.Second)),
		"--connect-timeout", strconv.Itoa(int(p.ConnectTimeout / time.Millisecond)),
	}
	if p.Omit > 0 {
		argv = append(argv, "-O", strconv.Itoa(int(p.Omit/time.Second)))
	}
	if p.Parallel > 1 {
		argv = append(argv, "-P", strconv.Itoa(p.Parallel))
	}
	switch p.Direction {
	case Down:
		argv = append(argv, "-R")
	case Bidir:
		argv = append(argv, "--bidir")
	}
	if p.UDP {
		argv = append(argv, "-u")
	}
	if p.Length > 0 {
		argv = append(argv, "-l", strconv.Itoa(p.Length))
	}
	if p.Bitrate != "" {
		argv = append(argv, "-b", p.Bitrate)
	}
	if p.UDP && p.Counters64 {
		argv = append(argv, "--udp-counters-64bit")
	}
	if p.CPUAffinity != "" {
		argv = append(argv, "-A", p.CPUAffinity)
	}
	if p.Window != "" {
		argv = append(argv, "-w", p.Window)
	}
	return argv
}

// clientGrace is how long past its planned end a client may take before it
// is stopped; iperf3 itself waits up to 120 s for a stalled stream.
var clientGrace = 15 * time.Second

// nextPort is replaced in tests to force a given sequence of ports.
var nextPort = func(lo, hi int) int { return lo + rand.IntN(hi-lo+1) }

const portAttempts = 5

// Run runs the probe once between client and server.
func (p Iperf3) Run(ctx context.Context, client, server Endpoint) Sample {
	return p.Measure(ctx, client, server, Watch{})
}

// Measure runs the probe once between client and server while watching the
// DUT, the power meter and the latency as w asks. It never returns an error:
// a probe that cannot run is a failed Sample whose Reason says why.
func (p Iperf3) Measure(ctx context.Context, client, server Endpoint, w Watch) (s Sample) {
	s = Sample{Probe: "iperf3", Direction: p.Direction, UDP: p.UDP, Length: p.Length, Parallel: p.Parallel, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	// A named result: the deferred assignment must reach the caller.
	defer func() { s.Elapsed = time.Since(s.Started) }()
	fail := func(format string, args ...any) Sample {
		s.Failed = true
		s.Reason = fmt.Sprintf(format, args...)
		return s
	}
	if err := p.Validate(); err != nil {
		return fail("%v", err)
	}
	p = p.withDefaults()
	s.Direction, s.Parallel = p.Direction, p.Parallel
	if client.Runner == nil || server.Runner == nil {
		return fail("iperf3: client and server endpoints both need a way to run commands")
	}
	if server.Addr == "" {
		return fail("iperf3: the server endpoint has no address to connect to; set its addr")
	}

	for attempt := 1; ; attempt++ {
		port := p.Port
		if port == 0 {
			port = nextPort(p.PortRange[0], p.PortRange[1])
		}
		s.Port = port
		retry := p.runOnce(ctx, client, server, port, w, &s)
		if !retry {
			return s
		}
		if p.Port != 0 {
			return fail("port %d is in use on %s: free it, or leave the port unset so that each probe picks a fresh one", port, server)
		}
		if attempt == portAttempts {
			return fail("no free port on %s after %d tries in %d-%d: %s", server, attempt, p.PortRange[0], p.PortRange[1], s.Reason)
		}
		s.Warnings = append(s.Warnings, fmt.Sprintf("port %d in use on %s; trying another", port, server))
		s.Failed, s.Reason = false, ""
	}
}

// runOnce runs server and client on one port. It reports retry when the port
// was taken, so that Measure can pick another.
func (p Iperf3) runOnce(ctx context.Context, client, server Endpoint, port int, w Watch, s *Sample) (retry bool) {
	fail := func(format string, args ...any) bool {
		s.Failed = true
		s.Reason = fmt.Sprintf(format, args...)
		return false
	}
	srvCtx, cancelSrv := context.WithCancel(ctx)
	defer cancelSrv()
	srv, err := server.Runner.Start(srvCtx, pinned(p.ServerCPUs, p.serverArgv(port, server.Addr)))
	if err != nil {
		return fail("%s", endpointError(server, "iperf3 server", err))
	}
	defer srv.Kill()

	// A taken port or a wrong bind address makes the server quit at once.
	select {
	case <-srv.Done():
		out, err := srv.Wait()
		s.ServerJSON = out
		reason := serverFailure(out, err, server)
		if isAddrInUse(reason) {
			s.Reason = reason
			return true
		}
		return fail("%s", reason)
	case <-time.After(p.StartGrace):
	case <-ctx.Done():
		return fail("iperf3: %v", ctx.Err())
	}

	if p.arm != nil {
		p.arm.arrive(ctx)
	}
	s.ClientStarted = time.Now()
	stop := startWatch(ctx, client, server, p, w)
	var out []byte
	var res Iperf3Result
	var perr error
	connectBy := time.Now().Add(p.ConnectTimeout)
	for {
		limit := p.Duration + p.Omit + p.ConnectTimeout + clientGrace
		cctx, cancel := context.WithTimeout(ctx, limit)
		out, err = client.Runner.Run(cctx, pinned(p.ClientCPUs, p.clientArgv(port, server.Addr)))
		timedOut := cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		if errors.Is(err, ErrNotFound) {
			stop(s)
			return fail("%s", endpointError(client, "iperf3 client", err))
		}
		res, perr = ParseIperf3(out)
		switch {
		case timedOut:
			perr = fmt.Errorf("iperf3 client on %s did not finish within %v (traffic may have stalled); stopped", client, limit)
		case perr != nil && len(out) == 0 && err != nil:
			perr = fmt.Errorf("iperf3 client on %s: %w", client, err)
		}
		var ie *Iperf3Error
		refused := errors.As(perr, &ie) && strings.Contains(ie.Reason, "Connection refused")
		exited := false
		select {
		case <-srv.Done():
			exited = true
		default:
		}
		if refused && !exited && time.Now().Before(connectBy) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		break
	}
	stop(s)
	s.ClientJSON = out

	// With -1 the server exits after its one test; give it a moment to
	// write its report, then stop it.
	select {
	case <-srv.Done():
	case <-time.After(2 * time.Second):
		srv.Kill()
	}
	srvOut, srvErr := srv.Wait()
	s.ServerJSON = srvOut
	var srvRes *Iperf3Result
	if r, err := ParseIperf3(srvOut); err == nil {
		srvRes = &r
		s.ServerResult = srvRes
	} else if isAddrInUse(serverFailure(srvOut, srvErr, server)) {
		// Our server never listened: whoever answered was someone else's.
		s.Reason = serverFailure(srvOut, srvErr, server)
		return true
	}

	if ctx.Err() != nil {
		return fail("iperf3: %v", ctx.Err())
	}
	if perr != nil {
		return fail("%s", clientFailure(perr, client, server, port))
	}
	s.Result = &res
	for _, msg := range res.Warnings {
		s.Warnings = append(s.Warnings, "client report: "+msg)
	}
	if srvRes != nil && srvRes.Cookie != "" && res.Cookie != "" && srvRes.Cookie != res.Cookie {
		return fail("the iperf3 server that answered on %s port %d is not the one this probe started (cookies differ)", server.Addr, port)
	}
	if srvRes == nil {
		s.Warnings = append(s.Warnings, "no usable server report")
	}

	if res.HostCPU != nil {
		s.ClientCPU = res.HostCPU.Total
	}
	switch {
	case res.RemoteCPU != nil:
		s.ServerCPU = res.RemoteCPU.Total
	case srvRes != nil && srvRes.HostCPU != nil:
		s.ServerCPU = srvRes.HostCPU.Total
	}
	if p.Parallel > 1 && res.Version != "" && !iperfAtLeast(res.Version, 3, 16) {
		// upstream: esnet/iperf@c9b74229d0d9bfec6d2307b66b43c29a7665ad0b RELNOTES.md:311 — 3.16: each stream "serviced by different threads"
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s runs its %d streams in one thread (3.16 gave each its own): one endpoint core, not the firewall, may bound this figure", res.Version, p.Parallel))
	}
	limit := cpuLimit(res.Version, p.Parallel, p.CPUBoundPercent)
	if s.ClientCPU > limit {
		s.EndpointCPUBound = true
		s.Warnings = append(s.Warnings, fmt.Sprintf("client CPU %.0f%% > %.0f%%: the client endpoint, not the DUT, may have limited throughput", s.ClientCPU, limit))
	}
	if s.ServerCPU > limit {
		s.EndpointCPUBound = true
		s.Warnings = append(s.Warnings, fmt.Sprintf("server CPU %.0f%% > %.0f%%: the server endpoint, not the DUT, may have limited throughput", s.ServerCPU, limit))
	}
	if res.Flow.ReceivedBPS == 0 {
		return fail("iperf3 ran but no data arrived from %s to %s", from(p.Direction, client, server), to(p.Direction, client, server))
	}
	return false
}

func from(d Direction, client, server Endpoint) string {
	if d == Down {
		return server.Addr
	}
	return client.Addr
}

func to(d Direction, client, server Endpoint) string {
	if d == Down {
		return client.Addr
	}
	return server.Addr
}

func isAddrInUse(reason string) bool {
	return strings.Contains(reason, "Address already in use") || strings.Contains(reason, "address already in use")
}

func serverFailure(out []byte, err error, server Endpoint) string {
	if _, perr := ParseIperf3(out); perr != nil {
		var ie *Iperf3Error
		if errors.As(perr, &ie) && ie.Reported {
			reason := ie.Reason
			if strings.Contains(reason, "Cannot assign requested address") {
				return fmt.Sprintf("iperf3 server on %s cannot listen on %s: that address is not on the host (%s)", server, server.Addr, reason)
			}
			return fmt.Sprintf("iperf3 server on %s failed: %s%s", server, reason, windowHint(reason))
		}
	}
	if err != nil {
		return endpointError(server, "iperf3 server", err)
	}
	return fmt.Sprintf("iperf3 server on %s exited before the test: %s", server, excerpt(out))
}

func clientFailure(err error, client, server Endpoint, port int) string {
	var ie *Iperf3Error
	if errors.As(err, &ie) && ie.Reported {
		r := ie.Reason
		switch {
		case strings.Contains(r, "unable to connect"), strings.Contains(r, "No route to host"), strings.Contains(r, "timed out"), strings.Contains(r, "Network is unreachable"):
			return fmt.Sprintf("%s cannot reach %s port %d: %s (check routes and firewall rules between the endpoints)", client, server.Addr, port, r)
		}
		return fmt.Sprintf("iperf3 client on %s: %s%s", client, r, windowHint(r))
	}
	return fmt.Sprintf("iperf3 client on %s: %v", client, err)
}

// windowHint names the way out of iperf3's refusal of a window the kernel
// would not grant.
func windowHint(reason string) string {
	// Linux grants less than asked ("not set correctly"); FreeBSD refuses
	// a buffer over kern.ipc.maxsockbuf's share with ENOBUFS ("unable to
	// set socket buffer size").
	if !strings.Contains(reason, "socket buffer size not set correctly") && !strings.Contains(reason, "unable to set socket buffer size") {
		return ""
	}
	return " (the window, -w, is more than an endpoint's kernel grants: raise its limit — Linux: sysctl net.core.rmem_max and net.core.wmem_max to at least half the window, which Linux doubles; FreeBSD: kern.ipc.maxsockbuf — or ask for a smaller window)"
}

func endpointError(e Endpoint, what string, err error) string {
	if errors.Is(err, ErrNotFound) {
		return fmt.Sprintf("iperf3 is not installed on %s (%v): install it there (Debian: apt-get install iperf3, FreeBSD: pkg install iperf3)", e, err)
	}
	return fmt.Sprintf("%s on %s: %v", what, e, err)
}

// startWatch starts the observers of w; the returned function stops them and
// stores their series in s.
func startWatch(ctx context.Context, client, server Endpoint, p Iperf3, w Watch) func(*Sample) {
	var dut *Polling[DUTMetrics]
	var power *Polling[PowerReading]
	if w.DUT != nil {
		dut = Poll(ctx, every(w.DUTEvery), w.DUT)
	}
	if w.Power != nil {
		power = Poll(ctx, every(w.PowerEvery), func(ctx context.Context) (PowerReading, error) {
			watts, err := w.Power.Watts(ctx)
			return PowerReading{Time: time.Now(), Watts: watts}, err
		})
	}
	var ping *runningPing
	if w.Ping {
		interval := w.PingInterval
		if interval <= 0 {
			interval = 200 * time.Millisecond
		}
		count := int(math.Ceil(float64(p.Duration+p.Omit) / float64(interval)))
		ping = startPing(ctx, client, server.Addr, count, interval)
	}
	return func(s *Sample) {
		if dut != nil {
			series, errs := dut.Stop()
			s.DUT = series
			if len(errs) > 0 {
				s.Warnings = append(s.Warnings, fmt.Sprintf("DUT metrics: %d of %d reads failed, first: %v", len(errs), len(errs)+len(series), errs[0]))
			}
		}
		if power != nil {
			series, errs := power.Stop()
			s.Power = series
			if len(errs) > 0 {
				s.Warnings = append(s.Warnings, fmt.Sprintf("power meter: %d of %d reads failed, first: %v", len(errs), len(errs)+len(series), errs[0]))
			}
		}
		if ping != nil {
			st, err := ping.finish()
			if err != nil {
				s.Warnings = append(s.Warnings, "ping under load: "+err.Error())
			} else {
				s.Ping = &st
			}
		}
	}
}

func every(d time.Duration) time.Duration {
	if d <= 0 {
		return time.Second
	}
	return d
}

// Check makes sure a probe can run between client and server before anything
// is changed on the firewall: iperf3 is installed on both hosts, and a
// one-second test gets data through. The error names the endpoint and the
// fix.
func (p Iperf3) Check(ctx context.Context, client, server Endpoint) error {
	if err := p.Validate(); err != nil {
		return err
	}
	p = p.withDefaults()
	for i, e := range []Endpoint{client, server} {
		if _, err := p.CheckEndpoint(ctx, e, i == 0); err != nil {
			return err
		}
	}
	short := p
	short.Duration, short.Omit = time.Second, 0
	if s := short.Run(ctx, client, server); s.Failed {
		return fmt.Errorf("trial probe failed: %s", s.Reason)
	}
	return nil
}

// CheckEndpoint makes sure iperf3 runs on e, the probe's client (or its
// server), and is new enough for every option the probe passes on that
// side. It returns the first line of iperf3 --version ("iperf 3.12
// (cJSON 1.7.15)"); the error names the endpoint and the fix, and matches
// ErrNotFound where iperf3 is not installed.
func (p Iperf3) CheckEndpoint(ctx context.Context, e Endpoint, client bool) (string, error) {
	p = p.withDefaults()
	if e.Runner == nil {
		return "", fmt.Errorf("%s: no way to run commands there (set netns or ssh)", e)
	}
	out, err := e.Runner.Run(ctx, []string{p.Binary, "--version"})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return "", &fixError{endpointError(e, "iperf3", err), err}
		}
		return "", fmt.Errorf("%s: iperf3 --version: %w", e, err)
	}
	version := strings.TrimSpace(firstLine(string(out)))
	return version, p.checkVersion(version, client, e)
}

// fixError is an error said with its fix; errors.Is and As see its cause.
type fixError struct {
	text  string
	cause error
}

func (e *fixError) Error() string { return e.text }
func (e *fixError) Unwrap() error { return e.cause }

// iperf3Option is an option fwab passes and the release that added it.
type iperf3Option struct {
	flag         string
	major, minor int
	client       bool // passed to the client; else to the server
	used         func(Iperf3) bool
}

// iperf3Options are the options whose release is later than what Debian
// oldstable or FreeBSD's quarterly packages may have.
//
// upstream: esnet/iperf@c9b74229d0d9bfec6d2307b66b43c29a7665ad0b RELNOTES.md:663 — "Support for simultaneous bidirectional tests with the --bidir flag" under iperf 3.7
// upstream: esnet/iperf@c9b74229d0d9bfec6d2307b66b43c29a7665ad0b RELNOTES.md:856 — "A new --connect-timeout option on the client" under iperf 3.2
// upstream: esnet/iperf@c9b74229d0d9bfec6d2307b66b43c29a7665ad0b RELNOTES.md:1109 — "A --udp-counters-64bit flag has been added" under iperf 3.1
// upstream: esnet/iperf@be66b575446eda10564428da1eb86cd75f3232c0 src/iperf_api.c:969 — the server's `{"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT}` (#1101), first in tag 3.10
var iperf3Options = []iperf3Option{
	{flag: "--idle-timeout", major: 3, minor: 10, used: func(Iperf3) bool { return true }},
	{flag: "--connect-timeout", major: 3, minor: 2, client: true, used: func(Iperf3) bool { return true }},
	{flag: "--bidir", major: 3, minor: 7, client: true, used: func(p Iperf3) bool { return p.Direction == Bidir }},
	{flag: "--udp-counters-64bit", major: 3, minor: 1, client: true, used: func(p Iperf3) bool { return p.Counters64 }},
}

// checkVersion refuses an iperf3 too old for an option the probe passes
// on that side, naming the version found and the one needed.
func (p Iperf3) checkVersion(version string, client bool, e Endpoint) error {
	if !strings.HasPrefix(version, "iperf 3.") {
		return nil // not settled what it is: the trial probe will tell
	}
	if f := strings.Fields(version); len(f) > 2 {
		version = f[0] + " " + f[1] // "iperf 3.12 (cJSON 1.7.15)"
	}
	for _, o := range iperf3Options {
		if o.client == client && o.used(p) && !iperfAtLeast(version, o.major, o.minor) {
			return fmt.Errorf("%s has %s, too old for %s, which this probe needs (iperf3 %d.%d or later): upgrade iperf3 there", e, version, o.flag, o.major, o.minor)
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// cpuLimit is the CPU use above which an endpoint counts as the bottleneck.
// Up to 3.15 iperf3 runs in one thread, so its CPU use tops out at one core.
// From 3.16 each stream has its own thread and the figure is summed over
// them: with P streams, saturation is P cores.
func cpuLimit(version string, parallel int, threshold float64) float64 {
	if parallel > 1 && iperfAtLeast(version, 3, 16) {
		return threshold * float64(parallel)
	}
	return threshold
}

// iperfAtLeast reads a version such as "iperf 3.12" or "iperf 3.17.1+".
func iperfAtLeast(version string, major, minor int) bool {
	v := strings.TrimPrefix(strings.TrimSpace(version), "iperf ")
	v, _, _ = strings.Cut(v, " ") // --version says "iperf 3.12 (cJSON 1.7.15)"
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	if err1 != nil || err2 != nil {
		return false
	}
	return maj > major || maj == major && mnr >= minor
}
