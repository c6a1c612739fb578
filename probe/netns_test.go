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
	if os.Geteuid() != 0 {
		t.Skip("skipping: network namespaces need root (run the tests as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("skipping: the ip command (iproute2) is not installed")
	}
	buf := make([]byte, 3)
	rand.Read(buf)
	id := "fwt" + hex.EncodeToString(buf)
	n, _ := rand.Int(rand.Reader, big.NewInt(200))
	subnet = fmt.Sprintf("198.18.%d", 20+n.Int64())
	nsA, nsB := id+"-a", id+"-b"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		for _, ns := range []string{nsA, nsB} {
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
	run("netns", "add", nsA)
	run("netns", "add", nsB)
	run("link", "add", id+"a", "netns", nsA, "type", "veth", "peer", "name", id+"b", "netns", nsB)
	run("-n", nsA, "addr", "add", subnet+".1/24", "dev", id+"a")
	run("-n", nsB, "addr", "add", subnet+".2/24", "dev", id+"b")
	for _, x := range [][2]string{{nsA, id + "a"}, {nsB, id + "b"}, {nsA, "lo"}, {nsB, "lo"}} {
		run("-n", x[0], "link", "set", x[1], "up")
	}
	return Endpoint{Name: "client", Addr: subnet + ".1", Runner: Local{Netns: nsA}},
		Endpoint{Name: "server", Addr: subnet + ".2", Runner: Local{Netns: nsB}}, subnet
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
