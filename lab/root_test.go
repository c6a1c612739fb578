package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/netnstest"
	"github.com/fwab/fwab/lab/labtest"
	"github.com/fwab/fwab/probe"
)

var figures = flag.Bool("lab.figures", false, "measure every knob with 5 runs of iperf3 -t 3 and print the table (slow)")

// TestMain lets Up start this test binary as the emulator daemon, the way
// `fwab lab up` starts `fwab lab serve`.
func TestMain(m *testing.M) {
	if len(os.Args) == 5 && os.Args[1] == "lab" && os.Args[2] == "serve" && os.Args[3] == "--dir" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
		err := Serve(ctx, os.Args[4], slog.New(slog.NewTextHandler(os.Stderr, nil)))
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root for network namespaces and nftables (CI runs as root)")
	}
	if err := CheckTools(); err != nil {
		t.Skipf("skipped: %v", err)
	}
}

// testTopology returns a topology with a unique prefix, destroyed in
// t.Cleanup.
func testTopology(t *testing.T) Topology {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	topo := Topology{Prefix: "fwt" + hex.EncodeToString(b)}
	t.Cleanup(func() {
		if err := topo.Destroy(context.Background()); err != nil {
			t.Errorf("destroy %s: %v", topo.Prefix, err)
		}
	})
	return topo
}

// upLab brings up a lab of the test's own as `fwab lab up` does: its own
// namespaces, folder and targets file, taken down in t.Cleanup. o's Dir,
// Prefix and TargetsPath are chosen here; Executable defaults to this test
// binary. It returns the options used, the lab's state and its target.
func upLab(t *testing.T, o Options) (Options, *State, *fwapi.Target) {
	t.Helper()
	requireRoot(t)
	topo := testTopology(t)
	o.Dir = filepath.Join(t.TempDir(), "lab")
	o.Prefix = topo.Prefix
	o.TargetsPath = filepath.Join(t.TempDir(), "targets.yaml")
	if o.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		o.Executable = exe
	}
	t.Cleanup(func() { _ = Down(context.Background(), o) })
	st, err := Up(t.Context(), o)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(o.Dir, serveLog))
		t.Fatalf("Up: %v\nserve.log:\n%s", err, log)
	}
	tf, err := fwapi.LoadTargets(o.TargetsPath)
	if err != nil {
		t.Fatal(err)
	}
	tg, err := tf.Lookup(TargetName)
	if err != nil {
		t.Fatal(err)
	}
	return o, st, tg
}

// leftovers lists namespaces, host links and processes that still carry the
// prefix.
func leftovers(t *testing.T, prefix string) []string {
	t.Helper()
	var left []string
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, prefix+"-") {
			left = append(left, "netns "+strings.Fields(l)[0])
		}
	}
	out, err = exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && strings.HasPrefix(f[1], prefix) {
			left = append(left, "link "+f[1])
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), prefix+"-") {
			left = append(left, "process "+e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return left
}

func TestTopologyCreateDestroyLeavesNothing(t *testing.T) {
	requireRoot(t)
	ctx := context.Background()
	topo := testTopology(t)
	if err := topo.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if err := topo.Create(ctx); err == nil || !strings.Contains(err.Error(), "already exist") {
		t.Errorf("second Create = %v, want an 'already exist' error", err)
	}
	// Plain routed forwarding works before any firewall config.
	if out, err := exec.Command("ip", "netns", "exec", topo.Namespace("lan"), "ping", "-c", "1", "-W", "2", emu.ServerAddr).CombinedOutput(); err != nil {
		t.Errorf("ping client -> server through the lab: %v\n%s", err, out)
	}
	// A process left in a namespace must not keep it alive.
	stray := exec.Command("ip", "netns", "exec", topo.Namespace("dut"), "sleep", "300")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- stray.Wait() }()
	if err := topo.Destroy(ctx); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		_ = stray.Process.Kill()
		t.Errorf("process in the DUT namespace survived Destroy")
	}
	if left := leftovers(t, topo.Prefix); len(left) > 0 {
		t.Errorf("left behind after Destroy: %v", left)
	}
	// A crashed Create: only part of the lab exists.
	if out, err := exec.Command("ip", "netns", "add", topo.Namespace("dut")).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := topo.Destroy(ctx); err != nil {
		t.Fatalf("Destroy after a partial Create: %v", err)
	}
	if left := leftovers(t, topo.Prefix); len(left) > 0 {
		t.Errorf("left behind after Destroy of a partial lab: %v", left)
	}
}

func TestUpDown(t *testing.T) {
	ctx := context.Background()
	o, st, tg := upLab(t, Options{})
	dir, targets, topo := o.Dir, o.TargetsPath, Topology{Prefix: o.Prefix}
	pid, err := daemonPID(dir)
	if err != nil {
		t.Fatalf("daemon: %v", err)
	}

	// The target alone is enough to reach the firewall: key, known_hosts,
	// port, and the endpoints as namespaces.
	if tg.Endpoints.Client.Netns != topo.Namespace("lan") || tg.Endpoints.Server.Addr != emu.ServerAddr {
		t.Errorf("target endpoints = %+v", tg.Endpoints)
	}
	out, code := targetRun(t, tg, "cat /etc/version && ifconfig igb0 | grep -c 'inet 198.19.0.1 '")
	if code != 0 || out != "2.7.2-RELEASE\n1\n" {
		t.Errorf("lab firewall answered %q (exit %d)", out, code)
	}

	// up is idempotent: the same daemon keeps running.
	st2, err := Up(ctx, o)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if pid2, _ := daemonPID(dir); pid2 != pid || st2.SSHAddr != st.SSHAddr {
		t.Errorf("second Up restarted the lab: pid %d -> %d, ssh %s -> %s", pid, pid2, st.SSHAddr, st2.SSHAddr)
	}

	if err := Down(ctx, o); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := leftovers(t, topo.Prefix); len(left) > 0 {
		t.Errorf("left behind after Down: %v", left)
	}
	if alive(pid) {
		t.Errorf("emulator daemon pid %d still running after Down", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("lab folder still there after Down: %v", err)
	}
	if tf, _ := fwapi.LoadTargets(targets); tf.Targets[TargetName] != nil {
		t.Errorf("target %q still in the targets file after Down", TargetName)
	}
	if err := Down(ctx, o); err != nil {
		t.Errorf("Down of a lab that is gone: %v", err)
	}
}

// targetRun runs one command on the lab's firewall through the target
// alone (its key, known_hosts and port), as fwab does.
func targetRun(t *testing.T, tg *fwapi.Target, cmd string) (string, int) {
	t.Helper()
	ctx := context.Background()
	c, err := fwapi.DialSSH(ctx, fwapi.SSHSpecConfig(tg.Host, tg.SSH))
	if err != nil {
		t.Fatalf("ssh to the lab with its target: %v", err)
	}
	defer c.Close()
	out, _, code, err := c.Run(ctx, cmd, nil)
	if err != nil {
		t.Fatalf("ssh %q: %v", cmd, err)
	}
	return string(out), code
}

// linuxLab is an in-process emulator driving a real data plane.
func linuxLab(t *testing.T, profiles []emu.Profile, configure ...func(*emu.Emulator, Topology)) (*testFirewall, Topology) {
	t.Helper()
	topo := testTopology(t)
	if err := topo.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	dp := &LinuxDataPlane{Topo: topo, TmpDir: t.TempDir()}
	f := startEmulator(t, configxml.PfSense, dp, topo.Ports(), profiles, func(e *emu.Emulator) {
		e.BlocklistSize = emu.DefaultBlocklistSize
		for _, c := range configure {
			c(e, topo)
		}
	})
	f.fw = openDriver[*fwapi.PfSense](t, f)
	return f, topo
}

// medianMbit runs n iperf3 tests of secs seconds and returns the median and
// all samples.
func medianMbit(t *testing.T, topo Topology, n, secs int) (float64, []float64) {
	t.Helper()
	var got []float64
	for range n {
		v, err := IperfMbit(context.Background(), topo, secs, false)
		if err != nil {
			t.Fatalf("iperf3: %v", err)
		}
		got = append(got, v)
	}
	s := append([]float64(nil), got...)
	sort.Float64s(s)
	return s[len(s)/2], got
}

// knobArm is one side of an A/B comparison: knob assignments that fwapi's
// pfSense driver writes and applies (configxml edit, WriteConfig, Apply of
// the diff), and a check of the runtime state.
type knobArm struct {
	name  string
	knobs []string
	check func(t *testing.T, f *testFirewall)
}

func rulesArm(n int) knobArm {
	return knobArm{
		name:  fmt.Sprintf("rules=%d", n),
		knobs: []string{fmt.Sprintf("rules@lan=%d", n)},
		check: func(t *testing.T, f *testFirewall) {
			if got, want := f.mustRun(t, "pfctl -sr | grep -c fwab-generated || true", ""), fmt.Sprintf("%d\n", n); got != want {
				t.Fatalf("loaded generated rules = %q, want %q", got, want)
			}
		},
	}
}

func natArm(mode string) knobArm {
	return knobArm{
		name:  "nat=" + mode,
		knobs: []string{"nat.outbound=" + mode},
	}
}

func blocklistArm(on bool) knobArm {
	v := map[bool]string{true: "on", false: "off"}[on]
	return knobArm{
		name:  "blocklist=" + v,
		knobs: []string{"blocklist=" + v},
		check: func(t *testing.T, f *testFirewall) {
			want := ""
			if on {
				want = emu.BlocklistSet + "\n"
			}
			if got := f.mustRun(t, "pfctl -s Tables", ""); got != want {
				t.Fatalf("pfctl -s Tables = %q, want %q", got, want)
			}
		},
	}
}

func offloadArm(on bool) knobArm {
	v := map[bool]string{true: "on", false: "off"}[on]
	return knobArm{
		name:  "offloads=" + v,
		knobs: []string{"offload.checksum=" + v, "offload.tso=" + v, "offload.lro=" + v},
		check: func(t *testing.T, f *testFirewall) {
			out := f.mustRun(t, "ifconfig igb1 | grep options=", "")
			if strings.Contains(out, "TXCSUM") != on || strings.Contains(out, "TSO4") != on {
				t.Fatalf("igb1 %s, want offloads %v", strings.TrimSpace(out), on)
			}
		},
	}
}

// lroArm turns LRO alone on or off, checksum and TSO offload on.
func lroArm(on bool) knobArm {
	v := map[bool]string{true: "on", false: "off"}[on]
	return knobArm{
		name:  "lro=" + v,
		knobs: []string{"offload.checksum=on", "offload.tso=on", "offload.lro=" + v},
		check: func(t *testing.T, f *testFirewall) {
			out := f.mustRun(t, "ifconfig igb0 | grep options=", "")
			if strings.Contains(out, "LRO") != on || !strings.Contains(out, "TSO4") {
				t.Fatalf("igb0 %s, want LRO %v and TSO4", strings.TrimSpace(out), on)
			}
		},
	}
}

func (f *testFirewall) applyArm(t *testing.T, a knobArm) {
	t.Helper()
	labtest.ApplyKnobs(t, f.fw, a.knobs...)
	if a.check != nil {
		a.check(t, f)
	}
}

// compare measures two arms interleaved (A B A B ...), n runs each of secs
// seconds, so that load from other work on the machine hits both alike. It
// leaves arm b applied.
func compare(t *testing.T, f *testFirewall, topo Topology, a, b knobArm, n, secs int) (ma, mb float64) {
	ma, mb, _, _ = compareRuns(t, f, topo, a, b, n, secs)
	return ma, mb
}

// compareRuns is compare that also returns the samples.
func compareRuns(t *testing.T, f *testFirewall, topo Topology, a, b knobArm, n, secs int) (ma, mb float64, ra, rb []float64) {
	t.Helper()
	for range n {
		for _, arm := range []knobArm{a, b} {
			f.applyArm(t, arm)
			v, err := IperfMbit(context.Background(), topo, secs, false)
			if err != nil {
				t.Fatalf("iperf3: %v", err)
			}
			if arm.name == a.name {
				ra = append(ra, v)
			} else {
				rb = append(rb, v)
			}
		}
	}
	ma, mb = median(ra), median(rb)
	t.Logf("%-16s median %7.0f Mbit/s  runs %.0f", a.name, ma, ra)
	t.Logf("%-16s median %7.0f Mbit/s  runs %.0f", b.name, mb, rb)
	return ma, mb, ra, rb
}

func TestKnobThroughputDirection(t *testing.T) {
	requireRoot(t)
	if *figures {
		t.Skip("skipped: -lab.figures runs TestKnobFigures instead")
	}
	f, topo := linuxLab(t, emu.DefaultProfiles())
	t.Run("rules", func(t *testing.T) {
		// pf semantics: one long stream matches its state, and only its
		// first packet walks the rules (rules@lan's rules come before the
		// LAN pass rule), so 10000 rules cost it little;
		// bench/rules-cost.sh measures the per-connection cost.
		r0, r10k := compare(t, f, topo, rulesArm(0), rulesArm(10000), 2, 2)
		f.applyArm(t, rulesArm(0))
		if r10k < 0.5*r0 {
			t.Errorf("10000 rules: %.0f Mbit/s vs %.0f with none: want a small cost to one long stream (above half)", r10k, r0)
		}
	})
	t.Run("offloads", func(t *testing.T) {
		on, off := compare(t, f, topo, offloadArm(true), offloadArm(false), 3, 2)
		if off > 0.8*on {
			t.Errorf("offloads off: %.0f Mbit/s vs %.0f on: want a drop of at least 20%%", off, on)
		}
	})
	t.Run("lro", func(t *testing.T) {
		// The wire carries frames no larger than the MTU, so LRO alone
		// decides whether the DUT forwards each frame or coalesced
		// segments: with LRO off it routes and filters every frame.
		on, off := compare(t, f, topo, offloadArm(true), lroArm(false), 2, 2)
		if off > 0.8*on {
			t.Errorf("LRO off (checksum and TSO on): %.0f Mbit/s vs %.0f with all offloads on: want a drop of at least 20%%", off, on)
		}
	})
	t.Run("nat", func(t *testing.T) {
		for _, mode := range []string{"automatic", "disabled"} {
			f.applyArm(t, natArm(mode))
			want := emu.ClientAddr
			if mode == "automatic" {
				want = emu.DUTWanAddr
			}
			if got := serverSeesFrom(t, topo); got != want {
				t.Errorf("nat=%s: the server sees the client as %s, want %s", mode, got, want)
			}
		}
		// NAT's cost is small, well below the run-to-run noise of a shared
		// 2-core machine (best runs differ by ±50 % under load), so the
		// translation itself is what is checked above; here only that
		// traffic keeps flowing at a comparable rate through NAT.
		_, _, offRuns, onRuns := compareRuns(t, f, topo, natArm("disabled"), natArm("automatic"), 2, 2)
		off, on := slices.Max(offRuns), slices.Max(onRuns)
		if on < 0.3*off {
			t.Errorf("NAT: best %.0f Mbit/s vs %.0f without: NAT should cost a little, not most of the throughput", on, off)
		}
	})
	t.Run("blocklist", func(t *testing.T) {
		_, _, offRuns, onRuns := compareRuns(t, f, topo, blocklistArm(false), blocklistArm(true), 2, 2)
		off, on := slices.Max(offRuns), slices.Max(onRuns)
		if got := strings.TrimSpace(f.mustRun(t, "pfctl -t "+emu.BlocklistSet+" -T show | wc -l", "")); got != strconv.Itoa(emu.DefaultBlocklistSize) {
			t.Errorf("blocklist entries = %s, want %d", got, emu.DefaultBlocklistSize)
		}
		f.applyArm(t, blocklistArm(false))
		// Like NAT's, the blocklist's cost (a set lookup per new flow) is
		// below the noise; a per-packet lookup would halve throughput.
		if on < 0.5*off {
			t.Errorf("blocklist: best %.0f Mbit/s vs %.0f without: want a small cost, not a per-packet one", on, off)
		}
	})
}

// serverSeesFrom runs a one-off iperf3 server and reports the client
// address it saw.
func serverSeesFrom(t *testing.T, topo Topology) string {
	t.Helper()
	port := strconv.Itoa(30000 + int(time.Now().UnixNano()/1000%20000))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "ip", "netns", "exec", topo.Namespace("wan"), "iperf3", "-s", "-1", "-J", "-B", emu.ServerAddr, "-p", port)
	var out strings.Builder
	srv.Stdout = &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if b, err := exec.CommandContext(ctx, "ip", "netns", "exec", topo.Namespace("lan"), "iperf3", "-c", emu.ServerAddr, "-p", port, "-t", "1").CombinedOutput(); err != nil {
		t.Fatalf("iperf3 client: %v\n%s", err, b)
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("iperf3 server: %v", err)
	}
	var r struct {
		Start struct {
			Connected []struct {
				RemoteHost string `json:"remote_host"`
			} `json:"connected"`
		} `json:"start"`
	}
	if err := json.Unmarshal([]byte(out.String()), &r); err != nil || len(r.Start.Connected) == 0 {
		t.Fatalf("iperf3 server output: %v\n%s", err, out.String())
	}
	return r.Start.Connected[0].RemoteHost
}

// TestFirmwareSlowdownTracksConfig: a percent slowdown caps each direction
// on its own egress port at 90 % of what the running configuration measured
// (as a wire rate), and measures again when the configuration changes. The
// caps are checked against the emulator's recorded measurement and against
// a configuration change far larger than this machine's noise, not against a
// 10 % throughput difference. offloads off cost about 55 % here in both
// directions (the DUT routes and filters every frame the wire brings, see
// Topology.WireVeths), so each direction must drop by a fifth or more and
// come back by a quarter.
func TestFirmwareSlowdownTracksConfig(t *testing.T) {
	requireRoot(t)
	if *figures {
		t.Skip("skipped: -lab.figures runs TestKnobFigures instead")
	}
	profiles := []emu.Profile{
		{Version: "2.7.2-RELEASE", FreeBSD: "14.0-CURRENT"},
		{Version: "2.8.1-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: &emu.Slowdown{Percent: 10}},
	}
	f, topo := linuxLab(t, profiles)
	f.applyArm(t, offloadArm(true))
	if wan, lan := qdiscRates(t, topo); wan != 0 || lan != 0 {
		t.Fatalf("2.7.2 has no slowdown, but the DUT ports are capped at %.0f/%.0f Mbit/s", wan, lan)
	}
	upgradeAndWait(t, f)
	fast := checkSlowdownCaps(t, f, topo, "offloads=on after the upgrade")
	f.applyArm(t, offloadArm(false))
	slow := checkSlowdownCaps(t, f, topo, "offloads=off")
	if slow.WanCapMbit > 0.8*fast.WanCapMbit || slow.LanCapMbit > 0.8*fast.LanCapMbit {
		t.Errorf("caps did not follow the configuration: offloads on %.0f/%.0f, off %.0f/%.0f Mbit/s (WAN/LAN); want offloads off below 80 %%",
			fast.WanCapMbit, fast.LanCapMbit, slow.WanCapMbit, slow.LanCapMbit)
	}
	f.applyArm(t, offloadArm(true))
	back := checkSlowdownCaps(t, f, topo, "offloads=on again")
	if back.WanCapMbit < 1.25*slow.WanCapMbit || back.LanCapMbit < 1.25*slow.LanCapMbit {
		t.Errorf("caps did not come back with the configuration: offloads off %.0f/%.0f, on %.0f/%.0f Mbit/s (WAN/LAN)",
			slow.WanCapMbit, slow.LanCapMbit, back.WanCapMbit, back.LanCapMbit)
	}
	// Traffic obeys the cap: no run goes faster than the goodput the cap
	// leaves (a bound, so load on the machine cannot break it).
	_, runs := medianMbit(t, topo, 3, 2)
	if limit := 1.03 * back.WanCapMbit / emu.WireFactor(back.MTU); slices.Max(runs) > limit {
		t.Errorf("upload runs %.0f Mbit/s under a %.0f Mbit/s wire cap, want none above %.0f goodput", runs, back.WanCapMbit, limit)
	}
	t.Logf("upload runs under the cap: %.0f (measured %.0f uncapped, 90 %% is %.0f)", runs, back.UpMbit, 0.9*back.UpMbit)
}

// checkSlowdownCaps reads the emulator's slowdown record and checks that it
// was measured in both directions, that the caps are 90 % of the
// measurements as wire rates, and that the DUT's qdiscs carry them.
func checkSlowdownCaps(t *testing.T, f *testFirewall, topo Topology, when string) emu.SlowdownState {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.em.Root, emu.SlowdownStateFile))
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	var st emu.SlowdownState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("%s: %s: %v", when, emu.SlowdownStateFile, err)
	}
	t.Logf("%s: measured up %.0f, down %.0f Mbit/s in %s; caps WAN %.0f, LAN %.0f", when, st.UpMbit, st.DownMbit, st.Measurement, st.WanCapMbit, st.LanCapMbit)
	if !st.Tracking || st.UpMbit <= 0 || st.DownMbit <= 0 {
		t.Fatalf("%s: slowdown state %s, want a tracking slowdown measured in both directions", when, b)
	}
	k := emu.WireFactor(st.MTU)
	if !near(st.WanCapMbit, 0.9*st.UpMbit*k) || !near(st.LanCapMbit, 0.9*st.DownMbit*k) {
		t.Errorf("%s: caps %.1f/%.1f, want 90 %% of %.1f/%.1f times %.4f", when, st.WanCapMbit, st.LanCapMbit, st.UpMbit, st.DownMbit, k)
	}
	wan, lan := qdiscRates(t, topo)
	// tc keeps rates in bytes per second: allow its rounding.
	if math.Abs(wan-st.WanCapMbit) > 0.01*st.WanCapMbit || math.Abs(lan-st.LanCapMbit) > 0.01*st.LanCapMbit {
		t.Errorf("%s: qdiscs WAN %.1f LAN %.1f Mbit/s, want the recorded caps %.1f/%.1f", when, wan, lan, st.WanCapMbit, st.LanCapMbit)
	}
	return st
}

// qdiscRates returns the tbf rates on the DUT's WAN and LAN ports in
// Mbit/s (0 where there is no tbf).
func qdiscRates(t *testing.T, topo Topology) (wan, lan float64) {
	t.Helper()
	rate := func(veth string) float64 {
		out, err := exec.Command("ip", "netns", "exec", topo.Namespace("dut"), "tc", "-j", "qdisc", "show", "dev", veth).Output()
		if err != nil {
			t.Fatal(err)
		}
		var qd []struct {
			Kind    string `json:"kind"`
			Options struct {
				Rate float64 `json:"rate"` // bytes per second
			} `json:"options"`
		}
		if err := json.Unmarshal(out, &qd); err != nil {
			t.Fatalf("tc qdisc show %s: %v %s", veth, err, out)
		}
		for _, q := range qd {
			if q.Kind == "tbf" {
				return q.Options.Rate * 8 / 1e6
			}
		}
		return 0
	}
	return rate(topo.DUTWanIf()), rate(topo.DUTLanIf())
}

// upgradeAndWait upgrades to the next firmware profile through fwapi's
// pfSense driver, which waits for the reboot and checks the version.
func upgradeAndWait(t *testing.T, f *testFirewall) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.fw.Upgrade(ctx, "", func(l string) { t.Log("upgrade: " + l) }); err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
}

// TestKnobFigures measures every knob with 5 runs of iperf3 -t 3 and prints
// the medians: go test ./lab -run TestKnobFigures -lab.figures -v
func TestKnobFigures(t *testing.T) {
	if !*figures {
		t.Skip("skipped: run with -lab.figures to measure the lab's figures")
	}
	requireRoot(t)
	f, topo := linuxLab(t, emu.DefaultProfiles())
	var b strings.Builder
	fmt.Fprintf(&b, "\n| A | median Mbit/s | B | median Mbit/s | B vs A |\n| --- | ---: | --- | ---: | ---: |\n")
	pair := func(a, bb knobArm) {
		ma, mb := compare(t, f, topo, a, bb, 5, 3)
		fmt.Fprintf(&b, "| %s | %.0f | %s | %.0f | %+.1f %% |\n", a.name, ma, bb.name, mb, 100*(mb-ma)/ma)
	}
	t.Run("rules", func(t *testing.T) {
		pair(rulesArm(0), rulesArm(1000))
		pair(rulesArm(0), rulesArm(10000))
		f.applyArm(t, rulesArm(0))
	})
	t.Run("offloads", func(t *testing.T) {
		pair(offloadArm(true), offloadArm(false))
		f.applyArm(t, knobArm{name: "factory offloads", knobs: []string{"offload.checksum=on", "offload.tso=off", "offload.lro=off"}})
	})
	t.Run("nat", func(t *testing.T) { pair(natArm("disabled"), natArm("automatic")) })
	t.Run("blocklist", func(t *testing.T) {
		pair(blocklistArm(false), blocklistArm(true))
		f.applyArm(t, blocklistArm(false))
	})
	t.Run("firmware", func(t *testing.T) {
		f.applyArm(t, offloadArm(true))
		m0, r0 := medianMbit(t, topo, 5, 3)
		upgradeAndWait(t, f) // 2.8.0
		m1, r1 := medianMbit(t, topo, 5, 3)
		upgradeAndWait(t, f) // 2.8.1, 10 % slowdown
		m2, r2 := medianMbit(t, topo, 5, 3)
		st, _ := os.ReadFile(filepath.Join(f.em.Root, emu.SlowdownStateFile))
		t.Logf("firmware 2.7.2 %.0f, 2.8.0 %.0f, 2.8.1 %.0f (2.8.1 slowdown: %s)", r0, r1, r2, st)
		row := func(name string, m, best float64) {
			fmt.Fprintf(&b, "| firmware=2.7.2 (offloads on) | %.0f (best %.0f) | %s | %.0f (best %.0f) | %+.1f %% (best %+.1f %%) |\n",
				m0, slices.Max(r0), name, m, best, 100*(m-m0)/m0, 100*(best-slices.Max(r0))/slices.Max(r0))
		}
		row("firmware=2.8.0", m1, slices.Max(r1))
		row("firmware=2.8.1 (10 % slowdown)", m2, slices.Max(r2))
	})
	t.Log(b.String())
}

// TestApplianceLinkAndBudget runs `fwab lab serve` as Up starts it with a
// 1 GbE link (the WAN port forced to half duplex) and half a core for the
// services: the DUT's ports carry the link's tbf, TCP runs at the line
// rate's goodput, ifconfig's media line shows the link, the inspection
// engine runs in the lab's cgroup under its quota, the CPU metric is the
// cgroup's usage against the budget, and Down removes the cgroup.
func TestApplianceLinkAndBudget(t *testing.T) {
	requireRoot(t)
	if err := CheckCPUControllers(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	bin := buildFwab(t)
	ctx := context.Background()
	o, _, tg := upLab(t, Options{Executable: bin, IDSRules: 1000, Link: "1g", InterfaceLinks: map[string]string{"wan": "1g/half"}, DUTCPU: 0.5})
	topo := Topology{Prefix: o.Prefix}
	name := topo.Namespace("dut")
	t.Cleanup(func() { _ = RemoveCPUGroup(name) })
	m, err := systemCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	procs, quota := filepath.Join(m.v1CPU, name, "cgroup.procs"), filepath.Join(m.v1CPU, name, "cpu.cfs_quota_us")
	if m.v2 != "" {
		procs, quota = filepath.Join(m.v2, name, "cgroup.procs"), filepath.Join(m.v2, name, "cpu.max")
	}
	if q, err := os.ReadFile(quota); err != nil || !strings.HasPrefix(string(q), "50000") {
		t.Fatalf("%s = %q, %v; want a 50000 µs quota per 100000 (half a core)", quota, q, err)
	}

	l, _ := emu.ParseLinkSpec("1g")
	line := l.ShapeMbit(1500)
	if wan, lan := qdiscRates(t, topo); math.Abs(wan-line) > 0.01*line || math.Abs(lan-line) > 0.01*line {
		t.Errorf("tbf WAN %.1f LAN %.1f Mbit/s, want the 1 GbE link's %.1f on both", wan, lan, line)
	}
	goodput := emu.LinkGoodputMbit(1000, 1500)
	med, runs := medianMbit(t, topo, 3, 2)
	if med < 0.9*goodput || slices.Max(runs) > 1.03*goodput {
		t.Errorf("upload runs %.0f Mbit/s on 1 GbE, want the median at >= 90 %% of %.0f and none above 103 %%", runs, goodput)
	}
	t.Logf("1 GbE, upload: %.0f Mbit/s (line-rate goodput %.1f)", runs, goodput)

	for cmd, want := range map[string]string{
		"ifconfig igb1 | grep media": "\tmedia: Ethernet autoselect (1000baseT <full-duplex>)\n",
		"ifconfig igb0 | grep media": "\tmedia: Ethernet autoselect (1000baseT <half-duplex>)\n",
		"sysctl -n hw.ncpu":          "1\n",
	} {
		if out, code := targetRun(t, tg, cmd); code != 0 || out != want {
			t.Errorf("%s = %q (exit %d), want %q", cmd, out, code, want)
		}
	}

	fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	// What a sweep warns of, from the box's own ifconfig: the half-duplex
	// WAN port, and nothing of the full-duplex LAN one.
	lister, ok := fw.(interface {
		Inventory(context.Context) (fwapi.Inventory, error)
	})
	if !ok {
		t.Fatalf("%T lists no inventory", fw)
	}
	inv, err := lister.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(inv.LinkWarnings(), "\n"); !strings.Contains(w, `igb0 (igb) negotiated "1000baseT <half-duplex>", not full duplex`) || strings.Contains(w, "igb1") {
		t.Errorf("link warnings %q: want igb0's half duplex named, igb1 not", w)
	}
	idle, err := fw.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	labtest.ApplyKnobs(t, fw, "offload.checksum=off", "ids@lan=ips-inline")
	pids, _ := os.ReadFile(procs)
	eng := engineProcesses(o.Dir)
	if len(eng) != 1 {
		t.Fatalf("engine processes %q, want one", eng)
	}
	if pid := strings.Fields(eng[0])[0]; !slices.Contains(strings.Fields(string(pids)), pid) {
		t.Errorf("inline engine (pid %s) not in %s (%q)", pid, procs, pids)
	}
	// Under load the inline engine uses its whole budget.
	done := make(chan float64, 1)
	go func() {
		v, err := IperfMbit(ctx, topo, 3, false)
		if err != nil {
			t.Errorf("iperf3 under inline IPS: %v", err)
		}
		done <- v
	}()
	time.Sleep(1200 * time.Millisecond)
	busy, err := fw.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inline := <-done
	t.Logf("DUT CPU idle %.0f %%, under inline IPS load %.0f %% of the half-core budget; inline upload %.0f Mbit/s", idle.CPUPercent, busy.CPUPercent, inline)
	if idle.CPUPercent > 30 || busy.CPUPercent < 60 {
		t.Errorf("DUT CPU idle %.0f %%, under inline IPS load %.0f %%: want the budget's usage (below 30 %% idle, above 60 %% with the engine busy)", idle.CPUPercent, busy.CPUPercent)
	}

	if err := Down(ctx, o); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(procs)); !os.IsNotExist(err) {
		t.Errorf("cgroup %s still there after Down (%v)", filepath.Dir(procs), err)
	}
}

// TestFirmwareSlowdownOnALink: on 1 GbE ports a 10 % tracking slowdown
// measures the configuration at the link's rate (its goodput, not the
// machine's) and caps below it: the lower of link and slowdown wins, and
// traffic runs at 90 % of the line rate's goodput.
func TestFirmwareSlowdownOnALink(t *testing.T) {
	requireRoot(t)
	if *figures {
		t.Skip("skipped: -lab.figures runs TestKnobFigures instead")
	}
	g, _ := emu.ParseLinkSpec("1g")
	profiles := []emu.Profile{
		{Version: "2.7.2-RELEASE", FreeBSD: "14.0-CURRENT"},
		{Version: "2.8.1-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: &emu.Slowdown{Percent: 10}},
	}
	f, topo := linuxLab(t, profiles, func(e *emu.Emulator, topo Topology) {
		e.Links = map[string]emu.LinkSpec{topo.DUTLanIf(): g, topo.DUTWanIf(): g}
	})
	line, goodput := g.ShapeMbit(1500), emu.LinkGoodputMbit(1000, 1500)
	if wan, lan := qdiscRates(t, topo); math.Abs(wan-line) > 0.01*line || math.Abs(lan-line) > 0.01*line {
		t.Fatalf("2.7.2 on 1 GbE: tbf WAN %.1f LAN %.1f Mbit/s, want the link's %.1f", wan, lan, line)
	}
	upgradeAndWait(t, f)
	st := checkSlowdownCaps(t, f, topo, "2.8.1 on 1 GbE")
	for _, m := range []float64{st.UpMbit, st.DownMbit} {
		if m < 0.85*goodput || m > 1.05*goodput {
			t.Errorf("measured %.0f Mbit/s with the slowdown's caps off, want the link's goodput %.0f (the link stays on)", m, goodput)
		}
	}
	if st.WanRateMbit != st.WanCapMbit || st.WanCapMbit >= line {
		t.Errorf("WAN rate %.1f, cap %.1f, link %.1f: want the slowdown's cap, below the link", st.WanRateMbit, st.WanCapMbit, line)
	}
	_, runs := medianMbit(t, topo, 3, 2)
	if limit := 1.03 * st.WanCapMbit / emu.WireFactor(st.MTU); slices.Max(runs) > limit {
		t.Errorf("upload runs %.0f Mbit/s, want none above %.0f (the slowdown's cap as goodput)", runs, limit)
	}
	t.Logf("1 GbE with a 10 %% slowdown: measured %.0f, runs %.0f (90 %% of the line-rate goodput is %.0f)", st.UpMbit, runs, 0.9*goodput)
}

// TestSecondLinkLab: a lab with two client/server pairs (--pairs 2), each
// on DUT ports of its own at 100 Mbit/s: each link alone and both at once
// carry the link's TCP goodput, as the E302 review's two 10G sets did, the
// clients fired within probe.MaxStartSkew; lab down removes the second
// link's namespaces too.
func TestSecondLinkLab(t *testing.T) {
	for _, flavor := range []string{"pfsense", "opnsense"} {
		t.Run(flavor, func(t *testing.T) { testSecondLink(t, flavor) })
	}
}

func testSecondLink(t *testing.T, flavor string) {
	o, st, tg := upLab(t, Options{Pairs: 2, Link: "100m", Flavor: flavor})
	if st.Pairs != 2 || !slices.Equal(tg.Endpoints.LinkNames(), []string{"link1", "link2"}) {
		t.Fatalf("lab with two pairs: state %+v, target links %q", st, tg.Endpoints.LinkNames())
	}
	links, closeAll, err := tg.OpenLinks(t.Context(), fwapi.OpenOptions{}, []string{"link1", "link2"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	want := 100 * 1448.0 / 1538 // TCP goodput of a 100 Mbit/s link: 1448 bytes of every 1538 on the wire
	p := probe.Iperf3{Duration: 3 * time.Second, Omit: time.Second}
	alone := p.Measure(t.Context(), links["link2"].Client, links["link2"].Server, probe.Watch{})
	if alone.Failed || math.Abs(alone.BitsPerSecond()/1e6-want) > 0.05*want {
		t.Errorf("link2 alone: %.1f Mbit/s (%s), want %.1f ± 5 %%", alone.BitsPerSecond()/1e6, alone.Reason, want)
	}
	both := p.MeasureLinks(t.Context(), []probe.Link{links["link1"], links["link2"]}, probe.Watch{})
	if both.Failed {
		t.Fatalf("both links at once: %s", both.Reason)
	}
	for _, l := range both.Links {
		if math.Abs(l.BitsPerSecond/1e6-want) > 0.05*want {
			t.Errorf("%s with the other beside it: %.1f Mbit/s, want %.1f ± 5 %%: the links are not independent", l.Name, l.BitsPerSecond/1e6, want)
		}
	}
	if both.StartSkew > probe.MaxStartSkew {
		t.Errorf("clients launched %v apart", both.StartSkew)
	}
	t.Logf("link2 alone %.1f Mbit/s; at once link1 %.1f, link2 %.1f, sum %.1f Mbit/s, skew %v", alone.BitsPerSecond()/1e6,
		both.Links[0].BitsPerSecond/1e6, both.Links[1].BitsPerSecond/1e6, both.BitsPerSecond()/1e6, both.StartSkew)
	if err := Down(t.Context(), o); err != nil {
		t.Fatal(err)
	}
	if left := leftovers(t, o.Prefix); len(left) > 0 {
		t.Errorf("lab down left %v", left)
	}
}

// TestRebootForwardsNothing: a rebooting firewall passes no traffic from
// the moment it goes down until its boot has loaded the filter, and comes
// back with an empty state table: the emulator must not keep forwarding,
// unfiltered and un-NATed, while SSH is away.
func TestRebootForwardsNothing(t *testing.T) {
	// Checks behaviour, not throughput: runs beside the other parallel
	// tests, once the package's comparisons are done.
	t.Parallel()
	f, topo := linuxLab(t, nil)
	ctx := context.Background()
	dp := &LinuxDataPlane{Topo: topo}
	ping := func() error {
		out, err := exec.Command("ip", "netns", "exec", topo.Namespace("lan"), "ping", "-c", "1", "-W", "1", emu.ServerAddr).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := ping(); err != nil {
		t.Fatalf("before the reboot: %v", err)
	}
	if n, _ := dp.StateCount(ctx); n == 0 {
		t.Fatal("before the reboot: no state for the ping")
	}
	// A TCP connection through the firewall, established before it goes
	// down: pf forgets it, so after the boot its next segment is dropped.
	var ln net.Listener
	if err := netnstest.Do(topo.Namespace("wan"), func() (err error) {
		ln, err = net.Listen("tcp4", net.JoinHostPort(emu.ServerAddr, "0"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go io.Copy(c, c) // echo
		}
	}()
	var conn net.Conn
	if err := netnstest.Do(topo.Namespace("lan"), func() (err error) {
		conn, err = net.DialTimeout("tcp4", ln.Addr().String(), 2*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	echo := func() error {
		conn.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("x")); err != nil {
			return err
		}
		_, err := io.ReadFull(conn, make([]byte, 1))
		return err
	}
	if err := echo(); err != nil {
		t.Fatalf("before the reboot, the connection does not echo: %v", err)
	}
	done := make(chan struct{})
	go func() { f.em.Reboot(ctx); close(done) }()
	time.Sleep(200 * time.Millisecond)
	if err := ping(); err == nil {
		t.Error("a ping passed the firewall while it rebooted")
	}
	<-done
	if n, _ := dp.StateCount(ctx); n != 0 {
		t.Errorf("after the reboot: %d states, want the table empty", n)
	}
	if err := ping(); err != nil {
		t.Errorf("after the reboot: %v", err)
	}
	if err := echo(); err == nil {
		t.Error("after the reboot, a connection from before it still passes: its state survived")
	}

	// Reset alone, in one transaction, leaves nothing forwarded: there
	// is no moment between the old ruleset and the drop.
	if err := dp.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ping(); err == nil {
		t.Error("a ping passed the data plane after Reset")
	}
}
