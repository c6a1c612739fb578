package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/probe"
)

// targetTest runs `fwab target test lab` as a child in the lab's
// environment, with more environment variables in env.
func (l labEnv) targetTest(t *testing.T, targets string, env ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := l.fwabChild(t.Context(), "target", "test", "lab", "--targets", targets)
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	t.Logf("fwab target test:\n%s%s", out.String(), errOut.String())
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("target test: %v", err)
	}
	return out.String(), errOut.String(), code
}

// reportLine is the first line of a target test report that starts with
// status and holds every one of words, or "".
func reportLine(out, status string, words ...string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, status+" ") {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(line, w)
		}
		if all {
			return line
		}
	}
	return ""
}

// TestTargetTestEndpointsLab: on a lab with two links, target test checks
// every endpoint (reached, iperf3 and its version, fwab's agent), a
// one-second probe through the firewall on each link and the server's
// return route, one line each; a namespace that is not there, an iperf3
// that is not on the PATH and a server whose route to the client bypasses
// the firewall each fail it with exit 2 and the fix, while everything else
// is still checked.
func TestTargetTestEndpointsLab(t *testing.T) {
	l := newLabFlavor(t, "pfsense", "--pairs", "2")
	before := l.configHash(t)

	out, stderr, code := l.targetTest(t, l.targets)
	if code != exitOK {
		t.Fatalf("target test of a working lab: exit %d\n%s%s", code, out, stderr)
	}
	for _, side := range []string{"client ", "server ", "client@link2 ", "server@link2 "} {
		for _, words := range [][]string{{side, "reached"}, {side, "iperf 3."}, {side, "agent"}} {
			if reportLine(out, "ok", words...) == "" {
				t.Errorf("no ok line with %q:\n%s", words, out)
			}
		}
	}
	for _, link := range []string{"link link1:", "link link2:"} {
		for _, words := range [][]string{{link, "through the firewall", "bit/s"}, {link, "return route"}} {
			if reportLine(out, "ok", words...) == "" {
				t.Errorf("no ok line with %q:\n%s", words, out)
			}
		}
	}
	if strings.Contains(out, "FAIL") {
		t.Errorf("a working lab has a failed check:\n%s", out)
	}

	// The second link's client is a namespace that is not there: its line
	// says so and how to fix it; its trial is skipped, the rest checked.
	tf, err := fwapi.LoadTargets(l.targets)
	if err != nil {
		t.Fatal(err)
	}
	link2 := tf.Targets["lab"].Endpoints.Links["link2"]
	link2.Client.Netns = l.prefix + "-nosuch"
	tf.Targets["lab"].Endpoints.Links["link2"] = link2
	broken := filepath.Join(t.TempDir(), "targets.yaml")
	if err := tf.Save(broken); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = l.targetTest(t, broken)
	if code != exitUsage {
		t.Errorf("a missing namespace: exit %d, want 2\n%s%s", code, out, stderr)
	}
	if reportLine(out, "FAIL", "client@link2 ", l.prefix+"-nosuch", "ip netns") == "" {
		t.Errorf("no FAIL line naming the missing namespace and ip netns:\n%s", out)
	}
	if reportLine(out, "skip", "link link2:") == "" || reportLine(out, "ok", "server@link2 ", "iperf 3.") == "" || reportLine(out, "ok", "link link1:", "through the firewall") == "" {
		t.Errorf("a missing namespace stopped the other checks:\n%s", out)
	}

	// No iperf3 on the PATH: a setup error naming the package to install.
	bin := t.TempDir()
	for _, tool := range []string{"ip", "uname"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code = l.targetTest(t, l.targets, "PATH="+bin)
	if code != exitUsage {
		t.Errorf("no iperf3: exit %d, want 2\n%s%s", code, out, stderr)
	}
	for _, side := range []string{"client ", "server@link2 "} {
		if reportLine(out, "FAIL", side, "iperf3 is not installed", "apt-get install iperf3") == "" {
			t.Errorf("no FAIL line for %s's missing iperf3:\n%s", side, out)
		}
	}

	// The server routes the client's address past the firewall: with
	// outbound NAT on the probe passes, with it off the replies would go
	// astray.
	wan := l.prefix + "-wan"
	if out, err := exec.Command("ip", "-n", wan, "route", "add", emu.ClientAddr+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip route add in %s: %v: %s", wan, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "-n", wan, "route", "del", emu.ClientAddr+"/32", "dev", "lo").Run() })
	out, stderr, code = l.targetTest(t, l.targets)
	if code != exitUsage {
		t.Errorf("a server routing the client past the firewall: exit %d, want 2\n%s%s", code, out, stderr)
	}
	if reportLine(out, "FAIL", "link link1: return route", "ip route add") == "" || reportLine(out, "ok", "link link1:", "through the firewall") == "" {
		t.Errorf("no FAIL line for link1's return route (with the route to add) beside an ok trial:\n%s", out)
	}
	if reportLine(out, "ok", "link link2: return route") == "" {
		t.Errorf("link2's return route is not ok:\n%s", out)
	}

	if after := l.configHash(t); after != before {
		t.Errorf("target test changed the firewall's config: %s, was %s", after, before)
	}
}

// fakeHost is an SSH endpoint's shell that answers each command line
// from its table; a command it lacks is not found (exit 127, as sh says).
func fakeHost(answers map[string]string) func(*fwapi.SSHHost) (probe.Shell, error) {
	return func(*fwapi.SSHHost) (probe.Shell, error) {
		return probe.StreamShell(func(_ context.Context, cmdline string, w io.Writer) (int, []byte, error) {
			out, ok := answers[cmdline]
			if !ok {
				return 127, []byte("sh: " + cmdline + ": not found"), nil
			}
			io.WriteString(w, out)
			return 0, nil, nil
		}), nil
	}
}

// An SSH endpoint: reached and its OS named; an iperf3 too old for the
// server's --idle-timeout fails as a setup error with the version needed,
// one too old for --bidir on a client only warns; a missing fwab warns
// that connect probes need it.
func TestTargetTestSSHEndpoint(t *testing.T) {
	ep := fwapi.Endpoint{Addr: "198.19.1.10", SSH: &fwapi.SSHHost{Host: "wan-box", SSHSpec: fwapi.SSHSpec{User: "fwab"}}}
	var buf bytes.Buffer
	r := &testReport{w: &buf}
	server := testEndpoint(t.Context(), r, "server", ep, false, fakeHost(map[string]string{"uname -s": "FreeBSD\n", "iperf3 --version": "iperf 3.9 (cJSON 1.7.15)\n"}))
	out := buf.String()
	if !server.reached || server.iperf3 || server.os != "FreeBSD" || r.failed != 1 || r.setup != 1 {
		t.Errorf("server with iperf3 3.9: reached %v, iperf3 %v, os %q, %d failed (%d setup); want reached, no iperf3, FreeBSD, 1 setup failure\n%s", server.reached, server.iperf3, server.os, r.failed, r.setup, out)
	}
	for _, want := range [][]string{
		{"ok", "server 198.19.1.10 (ssh fwab@wan-box)", "reached, FreeBSD"},
		{"FAIL", "iperf 3.9", "--idle-timeout", "3.10 or later", "upgrade iperf3"},
		{"warn", "fwab is not on the PATH", "connect probes", "/usr/local/bin"},
	} {
		if reportLine(out, want[0], want[1:]...) == "" {
			t.Errorf("no %s line with %q:\n%s", want[0], want[1:], out)
		}
	}

	buf.Reset()
	r = &testReport{w: &buf}
	client := testEndpoint(t.Context(), r, "client", ep, true, fakeHost(map[string]string{"uname -s": "Linux\n", "iperf3 --version": "iperf 3.6\n", "fwab version": "fwab v1.2.0\n"}))
	out = buf.String()
	if !client.iperf3 || r.failed != 0 || reportLine(out, "warn", "--bidir", "3.7 or later") == "" || reportLine(out, "ok", "iperf 3.6", "but bidir") == "" || reportLine(out, "ok", "fwab v1.2.0 on the PATH") == "" {
		t.Errorf("client with iperf3 3.6 and fwab: iperf3 %v, %d failed; want usable, a warning for bidir probes and fwab found\n%s", client.iperf3, r.failed, out)
	}
}

// The server's route to the client's address must leave the way its
// route to the firewall does: Linux's ip route get and FreeBSD's route
// get, read and judged.
func TestJudgeReturnRoute(t *testing.T) {
	const client, fw = "198.18.1.10", "198.19.0.1"
	for _, tc := range []struct {
		name               string
		toClient, toFw     route
		status, wantInText string
	}{
		{"linux, firewall is the gateway",
			parseIPRouteGet("198.18.1.10 via 198.19.0.1 dev eth1 src 198.19.0.10 uid 0 \n    cache \n"),
			parseIPRouteGet("198.19.0.1 dev eth1 src 198.19.0.10 uid 0 \n    cache \n"), "ok", "via 198.19.0.1 on eth1, the firewall"},
		{"linux, both through one router",
			parseIPRouteGet("198.18.1.10 via 198.19.1.1 dev eth1 src 198.19.1.10 uid 0\n"),
			parseIPRouteGet("198.19.0.1 via 198.19.1.1 dev eth1 src 198.19.1.10 uid 0\n"), "ok", "the way it reaches the firewall"},
		{"linux, default route out of the management NIC",
			parseIPRouteGet("198.18.1.10 via 198.19.200.1 dev eth0 src 198.19.200.5 uid 0\n"),
			parseIPRouteGet("198.19.0.1 dev eth1 src 198.19.0.10 uid 0\n"), "fail", "ip route add 198.18.1.0/24 via 198.19.0.1"},
		{"linux, another router on the firewall's network",
			parseIPRouteGet("198.18.1.10 via 198.19.0.254 dev eth1 src 198.19.0.10 uid 0\n"),
			parseIPRouteGet("198.19.0.1 dev eth1 src 198.19.0.10 uid 0\n"), "warn", "make sure 198.19.0.254 routes"},
		{"linux, the server holds the client's address",
			parseIPRouteGet("local 198.18.1.10 dev lo table local src 198.18.1.10 uid 0\n"),
			parseIPRouteGet("198.19.0.1 dev eth1 src 198.19.0.10 uid 0\n"), "fail", "does not cross the firewall"},
		{"freebsd, firewall is the gateway",
			parseBSDRouteGet("   route to: 198.18.1.10\ndestination: 198.18.1.0\n       mask: 255.255.255.0\n    gateway: 198.19.0.1\n        fib: 0\n  interface: igb1\n      flags: <UP,GATEWAY,DONE,STATIC>\n"),
			parseBSDRouteGet("   route to: 198.19.0.1\ndestination: 198.19.0.0\n       mask: 255.255.255.0\n        fib: 0\n  interface: igb1\n      flags: <UP,DONE,PINNED>\n"), "ok", "via 198.19.0.1 on igb1"},
		{"freebsd, default route elsewhere",
			parseBSDRouteGet("   route to: 198.18.1.10\ndestination: default\n       mask: default\n    gateway: 198.19.200.1\n        fib: 0\n  interface: em0\n"),
			parseBSDRouteGet("   route to: 198.19.0.1\ndestination: 198.19.0.0\n  interface: igb1\n"), "fail", "route add -net 198.18.1.0/24 198.19.0.1"},
	} {
		status, text := judgeReturnRoute(client, fw, tc.toClient, tc.toFw)
		if status != tc.status || !strings.Contains(text, tc.wantInText) {
			t.Errorf("%s: %s %q; want %s with %q", tc.name, status, text, tc.status, tc.wantInText)
		}
	}
}
