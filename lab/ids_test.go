package lab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/inspect"
	"github.com/fwab/fwab/lab/labtest"
	"github.com/fwab/fwab/probe"
)

// buildFwab builds the fwab binary, which the lab starts as its inspection
// engine (`fwab lab inspect`).
func buildFwab(t *testing.T) string {
	t.Helper()
	// The go that runs this test (go test exports GOROOT), else one on
	// PATH, else the usual install: sudo's PATH often lacks it.
	gobin := ""
	for _, cand := range []string{filepath.Join(os.Getenv("GOROOT"), "bin", "go"), "go", "/usr/local/go/bin/go"} {
		if p, err := exec.LookPath(cand); err == nil {
			gobin = p
			break
		}
	}
	if gobin == "" {
		t.Skip("skipped: no go tool to build the fwab binary the lab runs as its IDS engine")
	}
	bin := filepath.Join(t.TempDir(), "fwab")
	cmd := exec.Command(gobin, "build", "-o", bin, "github.com/fwab/fwab/cmd/fwab")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build fwab: %v\n%s", err, out)
	}
	return bin
}

// engineLab is a lab pfSense on namespaces whose Suricata is the lab's
// inspection engines, run from bin (the fwab binary built for the test).
func engineLab(t *testing.T) (f *testFirewall, topo Topology, engines *IDSEngines, bin string) {
	t.Helper()
	requireRoot(t)
	bin = buildFwab(t)
	engines = &IDSEngines{Executable: bin, Dir: t.TempDir()}
	f, topo = linuxLab(t, emu.DefaultProfiles(), func(e *emu.Emulator, topo Topology) {
		engines.Netns = topo.Namespace("dut")
		e.IDS = engines
	})
	t.Cleanup(engines.StopAll)
	return f, topo, engines, bin
}

// TestIDSModesThroughFwapi applies each ids@lan mode through fwapi's pfSense
// driver and checks that the runtime state reports the engine in that mode,
// that off stops it, and that inline IPS costs clearly more throughput than
// IDS.
func TestIDSModesThroughFwapi(t *testing.T) {
	f, topo, engines, _ := engineLab(t)
	ctx := context.Background()

	// Inline IPS needs the offloads off (fwab refuses it otherwise); the
	// IDS arm runs with the same offloads so that only the mode differs.
	labtest.ApplyKnobs(t, f.fw, "offload.checksum=off", "offload.tso=off", "offload.lro=off")

	// What the runtime state says: ps cannot tell a legacy engine from an
	// IDS one on a real pfSense either (both are pcap).
	stateMode := map[string]string{"ids": "ids", "ips-legacy": "ids", "ips-inline": "ips-inline"}
	var lastPID int
	setMode := func(mode string) {
		t.Helper()
		labtest.ApplyKnobs(t, f.fw, "ids@lan="+mode)
		st, err := f.fw.RuntimeState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.IDS) != 1 {
			t.Fatalf("ids@lan=%s: RuntimeState.IDS = %+v, want one instance on igb1", mode, st.IDS)
		}
		got := st.IDS[0]
		if got.Interface != "igb1" || got.Mode != stateMode[mode] {
			t.Fatalf("ids@lan=%s: RuntimeState.IDS = %+v, want igb1 in mode %s", mode, got, stateMode[mode])
		}
		sts := engines.Statuses()
		if len(sts) != 1 || sts[0].Mode != mode || !sts[0].Running {
			t.Fatalf("ids@lan=%s: engine statuses %+v, want one running in mode %s", mode, sts, mode)
		}
		lastPID = got.PID
	}

	setMode("ips-legacy")

	// IDS and inline interleaved, medians of 3 runs of 2 s.
	var idsRuns, inlineRuns []float64
	for range 3 {
		for _, mode := range []string{"ids", "ips-inline"} {
			setMode(mode)
			v, err := IperfMbit(ctx, topo, 2, false)
			if err != nil {
				t.Fatalf("iperf3 with ids@lan=%s: %v", mode, err)
			}
			if mode == "ids" {
				idsRuns = append(idsRuns, v)
			} else {
				inlineRuns = append(inlineRuns, v)
			}
		}
	}
	mi, mn := median(idsRuns), median(inlineRuns)
	t.Logf("ids        median %6.0f Mbit/s  runs %.0f", mi, idsRuns)
	t.Logf("ips-inline median %6.0f Mbit/s  runs %.0f", mn, inlineRuns)
	if mn >= 0.7*mi {
		t.Errorf("inline IPS median %.0f Mbit/s, IDS %.0f: want inline clearly below (< 70%% of IDS)", mn, mi)
	}

	// A reboot stops the engine and the boot starts a new one in the
	// configured mode (the last arm: ips-inline): in the background, a
	// moment after SSH is back, as pfSense's rc.start_packages does.
	f.em.Reboot(ctx)
	if err := syscall.Kill(lastPID, 0); err == nil {
		t.Errorf("after a reboot: the engine from before (pid %d) still runs", lastPID)
	}
	var ps [][2]string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ps = engines.SuricataProcesses(); len(ps) > 0 {
			break
		}
	}
	if len(ps) != 1 || !strings.Contains(ps[0][1], "--netmap") || ps[0][0] == strconv.Itoa(lastPID) {
		t.Fatalf("after a reboot: suricata processes %q, want one new inline engine", ps)
	}
	lastPID, _ = strconv.Atoi(ps[0][0])

	// A crash (lab fault --kill suricata): the engine is gone at once and
	// stays gone, and the firewall's health says so.
	var hr fwapi.HealthReader = f.fw
	before, err := hr.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.em.KillService("suricata"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(lastPID, 0); err == nil {
		t.Errorf("after a crash: the engine (pid %d) still runs", lastPID)
	}
	after, err := hr.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := before.Changes(after); len(c) != 1 || c[0] != "suricata stopped (pid "+strconv.Itoa(lastPID)+")" {
		t.Errorf("after a crash: health changes %q, want suricata stopped", c)
	}
	// Netmap hands the NIC back to the host stack: inline traffic passes,
	// uninspected.
	if _, err := IperfMbit(ctx, topo, 1, false); err != nil {
		t.Errorf("iperf3 after the inline engine crashed: %v (want it to pass, uninspected)", err)
	}

	labtest.ApplyKnobs(t, f.fw, "ids@lan=off")
	st, err := f.fw.RuntimeState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.IDS) != 0 {
		t.Fatalf("ids@lan=off: RuntimeState.IDS = %+v, want none", st.IDS)
	}
	if err := syscall.Kill(lastPID, 0); err == nil {
		t.Errorf("ids@lan=off: engine pid %d still runs", lastPID)
	}
	if sts := engines.Statuses(); len(sts) != 0 {
		t.Errorf("ids@lan=off: engines %+v still tracked", sts)
	}
	// The inline engine removed its steering: traffic flows without it.
	if _, err := IperfMbit(ctx, topo, 1, false); err != nil {
		t.Fatalf("iperf3 after ids@lan=off: %v", err)
	}
}

// TestIDSFigures prints per-mode throughput through the lab, up and down:
// medians of 5 rounds of iperf3 -t 3, the modes interleaved in each round,
// offloads off in every arm (inline IPS needs them off). Run with
// go test ./lab -run TestIDSFigures -lab.figures -v.
func TestIDSFigures(t *testing.T) {
	if !*figures {
		t.Skip("skipped: pass -lab.figures to measure (about 2 minutes)")
	}
	f, topo, _, _ := engineLab(t)
	ctx := context.Background()
	labtest.ApplyKnobs(t, f.fw, "offload.checksum=off", "offload.tso=off", "offload.lro=off")
	modes := []string{"off", "ids", "ips-legacy", "ips-inline"}
	runs := map[string][]float64{}
	for range 5 {
		for _, mode := range modes {
			labtest.ApplyKnobs(t, f.fw, "ids@lan="+mode)
			for _, reverse := range []bool{false, true} {
				v, err := IperfMbit(ctx, topo, 3, reverse)
				if err != nil {
					t.Fatalf("iperf3 with ids@lan=%s: %v", mode, err)
				}
				dir := map[bool]string{false: "up", true: "down"}[reverse]
				runs[mode+" "+dir] = append(runs[mode+" "+dir], v)
			}
		}
	}
	t.Logf("%-11s %8s %8s   (Mbit/s, median of 5; runs up / down)", "ids@lan", "up", "down")
	for _, mode := range modes {
		up, down := runs[mode+" up"], runs[mode+" down"]
		t.Logf("%-11s %8.0f %8.0f   %.0f / %.0f", mode, median(up), median(down), up, down)
	}
}

// engineProcesses lists the processes whose command line names dir (the
// engines' --status files live there).
func engineProcesses(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.Contains(string(cmd), "lab\x00inspect") && strings.Contains(string(cmd), dir) {
			out = append(out, e.Name()+" "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// TestDownStopsIDSEngines runs `fwab lab serve` as Up starts it, applies
// ips-inline through fwapi, and checks that Down leaves no engine behind.
func TestDownStopsIDSEngines(t *testing.T) {
	requireRoot(t)
	bin := buildFwab(t)
	ctx := context.Background()
	o, _, tg := upLab(t, Options{Executable: bin, IDSRules: 1000})
	dir, topo := o.Dir, Topology{Prefix: o.Prefix}
	fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	labtest.ApplyKnobs(t, fw, "offload.checksum=off", "ids@lan=ips-inline")
	st, err := fw.RuntimeState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.IDS) != 1 || st.IDS[0].Mode != "ips-inline" {
		t.Fatalf("RuntimeState.IDS = %+v, want one ips-inline instance", st.IDS)
	}
	if procs := engineProcesses(dir); len(procs) != 1 || !strings.Contains(procs[0], "--rules 1000 ") {
		t.Fatalf("engine processes %q, want one with --rules 1000", procs)
	}
	if err := Down(ctx, o); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if procs := engineProcesses(dir); len(procs) > 0 {
		t.Errorf("engines left after Down: %q", procs)
	}
	if left := leftovers(t, topo.Prefix); len(left) > 0 {
		t.Errorf("left behind after Down: %v", left)
	}
}

// TestIDSModesAreTheEngines: every mode the product model plans is one of
// the engine's modes, under the same name.
func TestIDSModesAreTheEngines(t *testing.T) {
	for _, k := range emu.IDSModes {
		m, err := inspect.ParseMode(k)
		if err != nil || m.Knob() != k {
			t.Errorf("emu.IDSModes has %q: the engine reads it as %q (%v)", k, m.Knob(), err)
		}
	}
	g := &IDSEngines{}
	if err := g.Start(context.Background(), emu.IDSPlan{"inline": {"igb1"}}, testPorts, nil); err == nil {
		t.Errorf("Start with a plan keyed %q (not an ids@IF mode) = nil, want an error", "inline")
	}
}

// TestCanaryThroughInlineIPS: the inline engine drops by rule, through
// the rules file the package writes: canary triggers pass while no rule
// matches their nonce, none pass once the drop rule is in the interface's
// custom rules (config.xml, the sync, a restart), and they pass again,
// uninspected, when the engine crashes (netmap gives the NIC back): the
// fail-open the canary is there to show.
func TestCanaryThroughInlineIPS(t *testing.T) {
	f, topo, _, bin := engineLab(t)
	ctx := t.Context()
	labtest.ApplyKnobs(t, f.fw, "offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline")

	client := probe.Endpoint{Name: "client", Addr: emu.ClientAddr, Runner: probe.Local{Netns: topo.Namespace("lan")}}
	server := probe.Endpoint{Name: "server", Addr: emu.ServerAddr, Runner: probe.Local{Netns: topo.Namespace("wan")}}
	canary := probe.Canary{Rate: 50, Nonce: probe.NewNonce(), Binary: bin}
	measure := func(what string) probe.CanaryResult {
		t.Helper()
		stop, err := canary.Start(ctx, client, server)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(time.Second)
		r, err := stop(ctx)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %d sent, %d passed", what, r.Sent, r.Passed)
		return r
	}
	if r := measure("no rule"); r.Sent < 25 || r.Passed < r.Sent*9/10 {
		t.Errorf("no rule on the nonce: %+v, want the triggers to pass", r)
	}

	data, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configxml.LoadBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.SetSuricataCustomRules("lan", canary.SuricataRule(9999001)+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.WriteConfig(ctx, cfg.Bytes(), "canary rule"); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "ids@lan", From: "ips-inline", To: "ips-inline", Action: configxml.ActionIDSRestart}}); err != nil {
		t.Fatal(err)
	}
	if r := measure("drop rule"); r.Sent < 25 || r.Passed != 0 {
		t.Errorf("drop rule on the nonce: %+v, want none to pass", r)
	}

	if err := f.em.KillService("suricata"); err != nil {
		t.Fatal(err)
	}
	if r := measure("engine crashed"); r.Passed < r.Sent*9/10 || !r.FailOpen() {
		t.Errorf("after the engine crashed: %+v, want the triggers to pass (fail-open)", r)
	}
}

// TestCanaryAlertsThroughIDS: the detect-only engine lets the canary's
// triggers pass and logs an alert for each in the interface's alerts.log,
// which fwab's pfSense driver counts (the canary at ids points).
func TestCanaryAlertsThroughIDS(t *testing.T) {
	f, topo, _, bin := engineLab(t)
	ctx := t.Context()
	canary := probe.Canary{Rate: 50, Nonce: probe.NewNonce(), Binary: bin, Port: probe.CanaryPort()}
	labtest.ApplyKnobs(t, f.fw, "ids@lan=ids")
	data, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configxml.LoadBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	const sid = 9999002
	if err := cfg.SetSuricataCustomRules("lan", canary.SuricataRule(sid)+"\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.WriteConfig(ctx, cfg.Bytes(), "canary rule"); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "ids@lan", From: "ids", To: "ids", Action: configxml.ActionIDSRestart}}); err != nil {
		t.Fatal(err)
	}
	var ar fwapi.AlertReader = f.fw
	before, err := ar.Alerts(ctx, sid, canary.Port)
	if err != nil || len(before) != 1 {
		t.Fatalf("alert logs before = %v, %v; want lan's", before, err)
	}
	client := probe.Endpoint{Name: "client", Addr: emu.ClientAddr, Runner: probe.Local{Netns: topo.Namespace("lan")}}
	server := probe.Endpoint{Name: "server", Addr: emu.ServerAddr, Runner: probe.Local{Netns: topo.Namespace("wan")}}
	stop, err := canary.Start(ctx, client, server)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	r, err := stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	ok := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		after, err := ar.Alerts(ctx, sid, canary.Port)
		if err != nil {
			t.Fatal(err)
		}
		if n, ok = after.Since(before); !ok || n >= r.Sent {
			break
		}
	}
	t.Logf("%d sent, %d passed, %d alerted", r.Sent, r.Passed, n)
	if r.Sent < 25 || r.Passed < r.Sent*9/10 || n < r.Passed*9/10 || n > r.Sent {
		t.Errorf("detect-only IDS with the rule: %+v, %d alerted; want the triggers to pass and nearly all alerted", r, n)
	}
}

// TestSharedRules: one engine serves every interface of its mode, so it
// loads custom rules only when they are the same on all of them.
func TestSharedRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b, c := write("a.rules", "drop udp any any -> any any (content:\"x\"; sid:1;)\n"), write("b.rules", "drop udp any any -> any any (content:\"x\"; sid:1;)\n"), write("c.rules", "alert ip any any -> any any (content:\"y\"; sid:2;)\n")
	g := &IDSEngines{}
	if got := g.sharedRules(inspect.Inline, []string{"igb1", "igb2"}, map[string][]string{"igb1": {a}, "igb2": {b}}); !slices.Equal(got, []string{a}) {
		t.Errorf("the same rules on both: %q, want igb1's file", got)
	}
	for name, rules := range map[string]map[string][]string{
		"different rules": {"igb1": {a}, "igb2": {c}},
		"rules on one":    {"igb2": {a}},
	} {
		if got := g.sharedRules(inspect.Inline, []string{"igb1", "igb2"}, rules); got != nil {
			t.Errorf("%s: %q, want none loaded", name, got)
		}
	}
	if got := g.sharedRules(inspect.IDS, []string{"igb1"}, map[string][]string{"igb1": {c}}); !slices.Equal(got, []string{c}) {
		t.Errorf("one interface: %q, want its file", got)
	}
}
