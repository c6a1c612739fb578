package probe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// netnsPair builds two network namespaces joined by a veth pair, with
// addresses in 198.18.0.0/15, and removes them when the test ends.
func netnsPair(t *testing.T) (a, b Endpoint, subnet string) {
	t.Helper()
	id, run := netnsSetup(t, "a", "b")
	n, _ := rand.Int(rand.Reader, big.NewInt(200))
	subnet = fmt.Sprintf("198.18.%d", 20+n.Int64())
	nsA, nsB := id+"-a", id+"-b"
	run("link", "add", id+"a", "netns", nsA, "type", "veth", "peer", "name", id+"b", "netns", nsB)
	run("-n", nsA, "addr", "add", subnet+".1/24", "dev", id+"a")
	run("-n", nsB, "addr", "add", subnet+".2/24", "dev", id+"b")
	for _, x := range [][2]string{{nsA, id + "a"}, {nsB, id + "b"}} {
		run("-n", x[0], "link", "set", x[1], "up")
	}
	return Endpoint{Name: "client", Addr: subnet + ".1", Runner: Local{Netns: nsA}},
		Endpoint{Name: "server", Addr: subnet + ".2", Runner: Local{Netns: nsB}}, subnet
}

// netnsRouted builds a client and a server namespace on subnets of their
// own in 198.18.0.0/15, with a router namespace between them whose egress
// towards the server is capped by tc tbf at capMbit; it returns the
// endpoints and the router's namespace.
func netnsRouted(t *testing.T, capMbit int) (client, server Endpoint, router string) {
	t.Helper()
	id, run := netnsSetup(t, "c", "r", "s")
	n, _ := rand.Int(rand.Reader, big.NewInt(100))
	lan, wan := fmt.Sprintf("198.18.%d", 20+n.Int64()), fmt.Sprintf("198.19.%d", 20+n.Int64())
	c, r, s := id+"-c", id+"-r", id+"-s"
	run("link", "add", id+"c", "netns", c, "type", "veth", "peer", "name", id+"rc", "netns", r)
	run("link", "add", id+"s", "netns", s, "type", "veth", "peer", "name", id+"rs", "netns", r)
	for _, a := range [][3]string{{c, id + "c", lan + ".10/24"}, {r, id + "rc", lan + ".1/24"}, {r, id + "rs", wan + ".1/24"}, {s, id + "s", wan + ".10/24"}} {
		run("-n", a[0], "addr", "add", a[2], "dev", a[1])
		run("-n", a[0], "link", "set", a[1], "up")
	}
	run("-n", c, "route", "add", "default", "via", lan+".1")
	run("-n", s, "route", "add", "default", "via", wan+".1")
	if out, err := exec.Command("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
		t.Fatalf("ip_forward in %s: %v: %s", r, err, out)
	}
	if out, err := exec.Command("ip", "netns", "exec", r, "tc", "qdisc", "add", "dev", id+"rs", "root", "tbf",
		"rate", fmt.Sprintf("%dmbit", capMbit), "burst", "8k", "limit", "16k").CombinedOutput(); err != nil {
		t.Fatalf("tbf in %s: %v: %s", r, err, out)
	}
	return Endpoint{Name: "client", Addr: lan + ".10", Runner: Local{Netns: c}},
		Endpoint{Name: "server", Addr: wan + ".10", Runner: Local{Netns: s}}, r
}

// netsetup makes namespaces ID-NAME for each name, with loopback up, and
// removes them when the test ends; run runs ip and fails the test on an
// error. It skips where namespaces cannot be made.
func netnsSetup(t *testing.T, names ...string) (id string, run func(args ...string)) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root (run the tests as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: the ip command (iproute2) is not installed")
	}
	buf := make([]byte, 3)
	rand.Read(buf)
	id = "fwt" + hex.EncodeToString(buf)
	run = func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		for _, name := range names {
			ns := id + "-" + name
			// A process left in a namespace keeps it alive: kill first.
			out, _ := exec.Command("ip", "netns", "pids", ns).Output()
			for _, f := range strings.Fields(string(out)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
					syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	for _, name := range names {
		run("netns", "add", id+"-"+name)
		run("-n", id+"-"+name, "link", "set", "lo", "up")
	}
	return id, run
}

func TestIperf3Netns(t *testing.T) {
	client, server, subnet := netnsPair(t)
	if _, err := client.Runner.Run(t.Context(), []string{"iperf3", "--version"}); err != nil {
		t.Skipf("skipping: iperf3 not runnable in a namespace: %v", err)
	}

	t.Run("up and down with ping under load", func(t *testing.T) {
		for _, d := range []Direction{Up, Down} {
			s := Iperf3{Direction: d, Duration: 2 * time.Second}.Measure(t.Context(), client, server, Watch{Ping: true})
			if s.Failed {
				t.Fatalf("%s: failed: %s", d, s.Reason)
			}
			if s.BitsPerSecond() < 1e6 {
				t.Errorf("%s: %v bit/s across a veth, want > 1 Mbit/s", d, s.BitsPerSecond())
			}
			if s.Ping == nil || s.Ping.Received == 0 {
				t.Errorf("%s: ping under load = %+v (warnings %q), want replies", d, s.Ping, s.Warnings)
			}
			t.Logf("%s: %.0f Mbit/s, retransmits %d, client CPU %.0f%%, server CPU %.0f%%, ping avg %v", d, s.BitsPerSecond()/1e6, s.Retransmits(), s.ClientCPU, s.ServerCPU, s.Ping.Avg)
		}
	})
	t.Run("unreachable server address", func(t *testing.T) {
		// Nothing answers ARP for .3 inside this test's own subnet.
		ghost := Endpoint{Name: "server", Addr: subnet + ".3", Runner: server.Runner}
		s := Iperf3{Duration: time.Second, ConnectTimeout: 2 * time.Second}.Run(t.Context(), client, ghost)
		if !s.Failed || !strings.Contains(s.Reason, "that address is not on the host") {
			t.Errorf("server bound to a foreign address: failed=%v reason %q", s.Failed, s.Reason)
		}
		// The server runs, but the address the client is given is
		// nobody's: the preflight check and the probe both say so.
		unreachable := Endpoint{Name: "server", Addr: subnet + ".3", Runner: unbound{server.Runner}}
		err := Iperf3{ConnectTimeout: 2 * time.Second}.Check(t.Context(), client, unreachable)
		if err == nil || !strings.Contains(err.Error(), "cannot reach "+subnet+".3") {
			t.Errorf("Check() with an unreachable server = %v, want 'cannot reach'", err)
		}
		s = Iperf3{Duration: time.Second, ConnectTimeout: 2 * time.Second}.Run(t.Context(), client, unreachable)
		if !s.Failed || !strings.Contains(s.Reason, "cannot reach "+subnet+".3") {
			t.Errorf("unreachable server: failed=%v reason %q, want 'cannot reach'", s.Failed, s.Reason)
		}
		t.Logf("reason: %s", s.Reason)
	})
	t.Run("namespace missing", func(t *testing.T) {
		ns := client.Runner.(Local).Netns + "-gone"
		s := Iperf3{Duration: time.Second}.Run(t.Context(), client, Endpoint{Name: "server", Addr: server.Addr, Runner: Local{Netns: ns}})
		if !s.Failed || !strings.Contains(s.Reason, "Cannot open network namespace") || !strings.Contains(s.Reason, ns) {
			t.Errorf("failed=%v reason %q, want the missing namespace named", s.Failed, s.Reason)
		}
	})
	t.Run("iperf3 missing in the namespace", func(t *testing.T) {
		ns := client.Runner.(Local).Netns
		bare := Endpoint{Name: "client", Addr: client.Addr, Runner: Local{Netns: ns, Path: t.TempDir()}}
		s := Iperf3{Duration: time.Second}.Run(t.Context(), bare, server)
		if !s.Failed || !strings.Contains(s.Reason, "iperf3 is not installed on client") {
			t.Errorf("failed=%v reason %q", s.Failed, s.Reason)
		}
	})
}

// unbound runs the iperf3 server without -B, so that it starts although the
// address the client is given is not the server's.
type unbound struct{ Runner }

func (u unbound) Start(ctx context.Context, argv []string) (Process, error) {
	for i := range argv {
		if argv[i] == "-B" && i+1 < len(argv) {
			argv = append(argv[:i:i], argv[i+2:]...)
			break
		}
	}
	return u.Runner.Start(ctx, argv)
}
