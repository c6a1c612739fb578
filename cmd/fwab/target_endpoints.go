package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/probe"
)

// testReport is what target test found: one line per check, every check
// run whatever the ones before it found.
type testReport struct {
	w              io.Writer
	checks, failed int
	// setup counts the failures the user fixes before fwab can run: a
	// targets file that says otherwise, a tool to install, a route to add.
	setup int
}

func (r *testReport) line(status, subject, format string, args ...any) {
	r.checks++
	fmt.Fprintf(r.w, "%-4s  %s: %s\n", status, subject, fmt.Sprintf(format, args...))
}

func (r *testReport) ok(subject, format string, args ...any) {
	r.line("ok", subject, format, args...)
}

// warn is a problem some sweeps meet and others do not: it fails nothing.
func (r *testReport) warn(subject, format string, args ...any) {
	r.line("warn", subject, format, args...)
}

// skip is a check that cannot run because an earlier one failed.
func (r *testReport) skip(subject, format string, args ...any) {
	r.line("skip", subject, format, args...)
}

func (r *testReport) fail(setup bool, subject, format string, args ...any) {
	r.failed++
	if setup {
		r.setup++
	}
	r.line("FAIL", subject, format, args...)
}

// result is target test's outcome: exit 2 when a failure is one to set
// right before fwab can run (it may cause the others), 1 when the testbed
// was set up but did not work.
func (r *testReport) result(t *fwapi.Target, path string) error {
	switch {
	case r.setup > 0:
		return usageErrorf("target %s: %d of %d checks failed: fix what the FAIL lines say (on the hosts, or in %s) and run 'fwab target test %s' again", t.Name, r.failed, r.checks, path, t.Name)
	case r.failed > 0:
		return fmt.Errorf("target %s: %d of %d checks failed: the FAIL lines say what did not work", t.Name, r.failed, r.checks)
	}
	return nil
}

// testFirewall connects to the target's firewall and checks its flavor;
// it changes nothing there.
func testFirewall(ctx context.Context, io *streams, f *targetFlags, t *fwapi.Target, r *testReport) error {
	subject := "firewall " + t.Host
	_, fw, err := f.open(ctx, io)
	var usage usageError
	switch {
	case errors.As(err, &usage):
		return err // the targets file or a file it names: nothing was contacted
	case err != nil:
		r.fail(isSetupError(err), subject, "%v", err)
		return nil
	}
	defer fw.Close()
	info, err := fw.Info(ctx)
	if err != nil {
		r.fail(false, subject, "%v", err)
		return nil
	}
	fmt.Fprintf(io.Out, "target %s: %s %s, hostname %s, NICs %s\n", t.Name, info.Flavor, info.Version, info.Hostname, strings.Join(info.NICs, ", "))
	if string(info.Flavor) != t.Flavor {
		r.fail(true, subject, "the targets file says %s but the firewall is %s: fix flavor in %s", t.Flavor, info.Flavor, f.targets)
		return nil
	}
	r.ok(subject, "%s %s, as the targets file says", info.Flavor, info.Version)
	return nil
}

// testedEndpoint is an endpoint as target test found it.
type testedEndpoint struct {
	probe.Endpoint
	subject string
	reached bool
	iperf3  bool   // runs there and is new enough for every probe
	os      string // uname -s: "Linux", "FreeBSD"; "" when unknown
}

// testEndpoints checks every link of the target: each endpoint, then a
// one-second probe through the firewall and the server's return route.
func testEndpoints(ctx context.Context, t *fwapi.Target, r *testReport, opts fwapi.OpenOptions) {
	if t.Endpoints.Empty() {
		r.warn("endpoints", "none: fwab can drive this firewall but not sweep it; add endpoints: (docs/targets.md) or 'fwab target add %s --replace' with --client-* and --server-*", t.Name)
		return
	}
	var conns []*fwapi.SSHClient
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// As fwapi.Target.OpenLinks dials, one endpoint at a time, so that
	// one that cannot be reached does not hide the others.
	dial := func(h *fwapi.SSHHost) (probe.Shell, error) {
		c, err := fwapi.DialSSHHost(ctx, h, opts)
		if err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner // the line names the host already
			}
			return nil, err
		}
		conns = append(conns, c)
		return probe.StreamShell(c.Stream), nil
	}
	for _, name := range t.Endpoints.LinkNames() {
		pair, err := t.Endpoints.Pair(name)
		if err != nil {
			r.fail(true, "link "+name, "%v", err)
			continue
		}
		side := func(s string) string {
			if name == t.Endpoints.FirstLink() {
				return s
			}
			return s + "@" + name
		}
		client := testEndpoint(ctx, r, side("client"), pair.Client, true, dial)
		server := testEndpoint(ctx, r, side("server"), pair.Server, false, dial)
		testLink(ctx, r, "link "+name, client, server)
	}
}

// testEndpoint checks that the endpoint is reached as the targets file
// says, the way probes reach it, that iperf3 there is new enough, and
// that connect probes can run fwab's agent there.
func testEndpoint(ctx context.Context, r *testReport, name string, ep fwapi.Endpoint, client bool, dial func(*fwapi.SSHHost) (probe.Shell, error)) testedEndpoint {
	te := testedEndpoint{subject: name + " " + ep.Addr + " (" + endpointHost(ep) + ")"}
	if ep.Netns != "" && os.Geteuid() != 0 {
		r.fail(true, te.subject, "a network namespace is entered as root only: run fwab as root (sudo)")
		return te
	}
	var dialErr error
	pe, err := ep.Open(name, func(h *fwapi.SSHHost) (probe.Shell, error) {
		sh, err := dial(h)
		dialErr = err
		return sh, err
	})
	if dialErr != nil {
		err = dialErr // without Open's words for the endpoint, which the line names
	}
	if err != nil {
		fix := ""
		if !isSetupError(err) {
			fix = ": check that the host is up and its sshd listens there"
		}
		r.fail(isSetupError(err), te.subject, "not reached: %v%s", err, fix)
		return te
	}
	te.Endpoint = pe
	out, err := pe.Runner.Run(ctx, []string{"uname", "-s"})
	var exit *probe.ExitError
	switch {
	case err == nil:
		te.os = strings.TrimSpace(string(out))
	case errors.Is(err, probe.ErrNotFound):
		// the host ran the command line; it has no uname
	case errors.As(err, &exit) && strings.Contains(exit.Stderr, "Cannot open network namespace"):
		r.fail(true, te.subject, "there is no network namespace %s on this machine ('ip netns list' shows those there): create it, or fix the endpoint's netns in the targets file", ep.Netns)
		return te
	default:
		r.fail(false, te.subject, "not reached: %v", err)
		return te
	}
	te.reached = true
	if te.os == "" {
		r.ok(te.subject, "reached")
	} else {
		r.ok(te.subject, "reached, %s", te.os)
	}

	version, err := probe.Iperf3{}.CheckEndpoint(ctx, pe, client)
	switch {
	case err != nil:
		// Missing or too old: what to install is the user's to set up. A
		// --version that fails otherwise is a host that did not work.
		r.fail(version != "" || errors.Is(err, probe.ErrNotFound), te.subject, "%v", err)
	case !strings.HasPrefix(version, "iperf 3."):
		te.iperf3 = true
		r.warn(te.subject, "iperf3 --version says %q, not a version fwab reads: the trial probe below decides", version)
	default:
		te.iperf3 = true
		_, bidirErr := probe.Iperf3{Direction: probe.Bidir}.CheckEndpoint(ctx, pe, client)
		if bidirErr == nil {
			r.ok(te.subject, "%s, new enough for every probe", version)
			break
		}
		r.ok(te.subject, "%s, new enough for every probe but bidir", version)
		r.warn(te.subject, "%v (only direction: bidir probes need it)", bidirErr)
	}

	if ep.SSH == nil {
		r.ok(te.subject, "connect probes run this fwab there as their agent")
		return te
	}
	out, err = pe.Runner.Run(ctx, []string{"fwab", "version"})
	switch {
	case errors.Is(err, probe.ErrNotFound):
		r.warn(te.subject, "fwab is not on the PATH there, and kind: connect probes run it as their agent: copy a fwab built for that host (GOOS=freebsd for a FreeBSD one) into a folder on its PATH, such as /usr/local/bin")
	case err != nil:
		r.warn(te.subject, "fwab version there: %v: kind: connect probes run fwab as their agent", err)
	default:
		r.ok(te.subject, "connect probes' agent: %s on the PATH", strings.TrimSpace(firstLine(string(out))))
	}
	return te
}

// endpointHost says where the endpoint's commands run.
func endpointHost(ep fwapi.Endpoint) string {
	switch {
	case ep.Netns != "":
		return "netns " + ep.Netns
	case ep.SSH != nil:
		user := ""
		if ep.SSH.User != "" {
			user = ep.SSH.User + "@"
		}
		return "ssh " + user + ep.SSH.Host
	}
	return "this machine"
}

// testLink runs one short probe from the client to the server through the
// firewall, then checks the server's way back to the client's own address.
func testLink(ctx context.Context, r *testReport, subject string, client, server testedEndpoint) {
	if !client.iperf3 || !server.iperf3 {
		r.skip(subject, "no probe through the firewall: an endpoint above was not reached or lacks a usable iperf3")
		r.skip(subject, "return route not checked: it needs the probe")
		return
	}
	s := probe.Iperf3{Duration: time.Second}.Run(ctx, client.Endpoint, server.Endpoint)
	if s.Failed {
		r.fail(false, subject, "a 1 s probe from client to server through the firewall failed: %s", s.Reason)
		r.skip(subject, "return route not checked: it needs the probe")
		return
	}
	r.ok(subject, "%.0f Mbit/s from client to server through the firewall in a 1 s probe", s.BitsPerSecond()/1e6)
	if s.ServerResult == nil || s.ServerResult.Peer == "" {
		r.warn(subject, "return route not checked: the server's iperf3 report does not say which address connected")
		return
	}
	testReturnRoute(ctx, r, subject, client, server, s.ServerResult.Peer)
}

// testReturnRoute checks that the server sends what it answers to the
// client's own address back through the firewall. With outbound NAT off
// (nat.outbound: disabled) the server sees that address, not the
// firewall's, and a route that bypasses the firewall loses every reply.
// peer is the address the server saw the trial probe come from.
func testReturnRoute(ctx context.Context, r *testReport, subject string, client, server testedEndpoint, peer string) {
	subject += ": return route"
	if peer == client.Addr {
		r.ok(subject, "the server saw the client's own address %s (no outbound NAT now) and answered it", peer)
		return
	}
	toFirewall, err := routeTo(ctx, server, peer)
	if err != nil {
		r.warn(subject, "not checked: the server's route to the firewall's address %s: %v", peer, err)
		return
	}
	toClient, err := routeTo(ctx, server, client.Addr)
	if err != nil {
		var exit *probe.ExitError
		if errors.As(err, &exit) {
			r.fail(true, subject, "the server has no route to the client's address %s (%v): %s", client.Addr, err, routeFix(client.Addr, peer, toFirewall))
			return
		}
		r.warn(subject, "not checked: the server's route to %s: %v", client.Addr, err)
		return
	}
	status, text := judgeReturnRoute(client.Addr, peer, toClient, toFirewall)
	switch status {
	case "ok":
		r.ok(subject, "%s", text)
	case "warn":
		r.warn(subject, "%s", text)
	default:
		r.fail(true, subject, "%s", text)
	}
}

// route is where a host sends packets for one address: out of dev, to
// the next hop via ("" when the address is on dev's own network).
type route struct {
	via, dev string
	local    bool // the host holds the address itself
}

func (rt route) String() string {
	if rt.via == "" {
		return "directly on " + rt.dev
	}
	return "via " + rt.via + " on " + rt.dev
}

// routeTo asks the endpoint where it sends packets for addr: ip route get
// on Linux, route -n get on FreeBSD (or where ip is missing).
func routeTo(ctx context.Context, e testedEndpoint, addr string) (route, error) {
	if e.os != "FreeBSD" {
		out, err := e.Runner.Run(ctx, []string{"ip", "route", "get", addr})
		if err == nil {
			return parseIPRouteGet(string(out)), nil
		}
		if !errors.Is(err, probe.ErrNotFound) {
			return route{}, err
		}
	}
	out, err := e.Runner.Run(ctx, []string{"route", "-n", "get", addr})
	if err != nil {
		return route{}, err
	}
	return parseBSDRouteGet(string(out)), nil
}

// parseIPRouteGet reads Linux's "198.18.1.10 via 198.19.1.1 dev eth1 src
// 198.19.1.10 uid 0", led by a type ("local") where the route has one.
func parseIPRouteGet(out string) route {
	var rt route
	f := strings.Fields(firstLine(out))
	if len(f) > 0 && f[0] == "local" {
		rt.local = true
	}
	for i := 0; i+1 < len(f); i++ {
		switch f[i] {
		case "via":
			rt.via = f[i+1]
		case "dev":
			rt.dev = f[i+1]
		}
	}
	return rt
}

// parseBSDRouteGet reads FreeBSD's route -n get: "gateway: 198.19.1.1"
// (absent, or "link#N", for an address on the interface's own network)
// and "interface: igb1".
func parseBSDRouteGet(out string) route {
	var rt route
	for line := range strings.SplitSeq(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		v = strings.TrimSpace(v)
		switch {
		case !ok:
		case k == "gateway" && !strings.HasPrefix(v, "link#"):
			rt.via = v
		case k == "interface":
			rt.dev = v
			rt.local = v == "lo0"
		}
	}
	return rt
}

// judgeReturnRoute compares the server's route to the client's address
// with its route to the address it saw the client at (the firewall's, with
// outbound NAT): the replies must leave the same way, through the
// firewall. It returns "ok", "warn" or "fail" and the line to print.
func judgeReturnRoute(clientAddr, peer string, toClient, toFirewall route) (string, string) {
	switch {
	case toClient.local:
		return "fail", fmt.Sprintf("the server holds the client's address %s itself: traffic between them does not cross the firewall; give the client an address of its own host or namespace", clientAddr)
	case toClient.via == peer:
		return "ok", fmt.Sprintf("the server routes %s %s, the firewall", clientAddr, toClient)
	case toClient.dev != toFirewall.dev || toClient.via == "":
		return "fail", fmt.Sprintf("the server sends replies to %s %s, but reaches the firewall (%s, the address outbound NAT gives the client now) %s: with nat.outbound: disabled the replies would not cross the firewall; %s",
			clientAddr, toClient, peer, toFirewall, routeFix(clientAddr, peer, toFirewall))
	case toClient.via == toFirewall.via:
		return "ok", fmt.Sprintf("the server routes %s %s, the way it reaches the firewall (%s)", clientAddr, toClient, peer)
	}
	return "warn", fmt.Sprintf("the server routes %s %s but reaches the firewall (%s) %s: make sure %s routes the client's network through the firewall, or nat.outbound: disabled points lose their replies",
		clientAddr, toClient, peer, toFirewall, toClient.via)
}

// routeFix is the command that routes the client's network through the
// firewall, whose address the server saw as peer and reaches by toFirewall.
func routeFix(clientAddr, peer string, toFirewall route) string {
	net := clientAddr
	if a, err := netip.ParseAddr(clientAddr); err == nil {
		bits := 24
		if a.Is6() {
			bits = 64
		}
		if p, err := a.Prefix(bits); err == nil {
			net = p.String()
		}
	}
	hop := peer
	if toFirewall.via != "" {
		hop = toFirewall.via
	}
	return fmt.Sprintf("route the client's network (%s, say) through the firewall on the server: ip route add %s via %s (FreeBSD: route add -net %s %s), and make it permanent there", net, net, hop, net, hop)
}
