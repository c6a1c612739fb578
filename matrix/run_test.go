package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// fakeFirewall stands in for fwapi.Session: it keeps the config it was
// given, can refuse some changes, and counts applies.
type fakeFirewall struct {
	mu      sync.Mutex
	config  []byte
	applies int
	refuse  func(changes []configxml.Change) error
}

func (f *fakeFirewall) Apply(_ context.Context, config []byte, changes []configxml.Change) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applies++
	if f.refuse != nil {
		if err := f.refuse(changes); err != nil {
			return err
		}
	}
	f.config = config
	return nil
}

// measureFrom returns a probe whose throughput depends on the firewall's
// current config, as a real box's would: 1000 Mbit/s less 10 % per 100
// generated rules.
func measureFrom(t *testing.T, fw *fakeFirewall, calls *int) func(context.Context, ProbeRun) probe.Sample {
	return func(ctx context.Context, pr ProbeRun) probe.Sample {
		*calls++
		fw.mu.Lock()
		c, err := configxml.LoadBytes(fw.config)
		fw.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		rules, _ := c.Get("rules@lan")
		var n int
		fmt.Sscan(rules, &n)
		bps := 1e9 * (1 - 0.1*float64(n)/100)
		return probe.Sample{Probe: "iperf3", Direction: pr.Iperf3.Direction, Result: &probe.Iperf3Result{Flow: probe.Flow{ReceivedBPS: bps, SentBPS: bps, Retransmits: 3}}}
	}
}

type sweepFixture struct {
	sweep *Sweep
	fw    *fakeFirewall
	calls int
	st    *store.Store
}

func newSweep(t *testing.T, spec string) *sweepFixture {
	t.Helper()
	s, err := Parse(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	return newSweepSpec(t, s)
}

// newSweepSpec is newSweep for a parsed spec.
func newSweepSpec(t *testing.T, s *Spec) *sweepFixture {
	t.Helper()
	cfg := pfSense(t)
	plan, err := NewPlan(context.Background(), s, cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	run, err := st.CreateRun(ctx, store.Run{Spec: string(s.Raw()), Target: "fake", Seed: int64(plan.Seed)})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddPoints(ctx, run, plan.StorePoints()); err != nil {
		t.Fatal(err)
	}
	f := &sweepFixture{fw: &fakeFirewall{config: cfg.Bytes()}, st: st}
	f.sweep = &Sweep{Plan: plan, Store: st, Run: run, Config: cfg, Apply: f.fw.Apply}
	f.sweep.Measure = measureFrom(t, f.fw, &f.calls)
	return f
}

const twoPoints = `
axes:
  rules@lan: [0, 100, 200]
probes:
  - {name: up, direction: up, duration: 1s}
  - {name: down, direction: down, duration: 1s}
repeats: 3
order: as-written
`

func TestSweepRecordsEverySample(t *testing.T) {
	f := newSweep(t, twoPoints)
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	// 3 points × 2 probes × 3 rounds, then the drift check: point 0 again.
	if len(samples) != 3*2*3+2 || f.calls != 20 {
		t.Fatalf("%d samples from %d probes; want 20", len(samples), f.calls)
	}
	for _, s := range samples[18:] {
		if !s.Drift() || s.Point != 0 {
			t.Errorf("the last samples are %s; want the drift check of point 0", s.Key)
		}
	}
	// Each sample was measured with its own point's config on the firewall.
	for _, s := range samples {
		want := []float64{1e9, 0.9e9, 0.8e9}[s.Point]
		if s.BitsPerSecond != want {
			t.Errorf("point %d %s round %d: %v bit/s; want %v (measured on the wrong config?)", s.Point, s.Probe, s.Round, s.BitsPerSecond, want)
		}
	}
	// as-written over 3 rounds: 0→100→200, 200→0 …: the first point needs
	// no apply; the drift check goes back from 200 to 0.
	if f.fw.applies != 2+3+3+1 {
		t.Errorf("%d applies; want 9 (only when the config changes)", f.fw.applies)
	}
}

func TestSweepResume(t *testing.T) {
	f := newSweep(t, twoPoints)
	ctx, cancel := context.WithCancel(t.Context())
	stopAfter := 7
	measure := f.sweep.Measure
	f.sweep.Measure = func(c context.Context, pr ProbeRun) probe.Sample {
		if f.calls == stopAfter {
			cancel() // Ctrl-C during the 8th probe
		}
		return measure(c, pr)
	}
	if err := f.sweep.Execute(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v; want context.Canceled", err)
	}
	samples, _ := f.st.Samples(t.Context(), f.sweep.Run)
	if len(samples) != stopAfter {
		t.Fatalf("%d samples kept after the interrupt; want %d (the one cut short is dropped)", len(samples), stopAfter)
	}
	f.sweep.Measure = measure
	before := f.calls
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, _ = f.st.Samples(t.Context(), f.sweep.Run)
	if len(samples) != 20 || f.calls-before != 20-stopAfter {
		t.Errorf("after resume: %d samples, %d new probes; want 20 and %d", len(samples), f.calls-before, 20-stopAfter)
	}
}

func TestSweepMarksFailedPoints(t *testing.T) {
	f := newSweep(t, twoPoints)
	f.fw.refuse = func(changes []configxml.Change) error {
		for _, c := range changes {
			if c.Knob == "rules@lan" && c.To == "100" {
				return errors.New("verify: pfctl shows 2 rules, want 102")
			}
		}
		return nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	points, _ := f.st.Points(t.Context(), f.sweep.Run)
	if points[1].Status != store.Broken || !strings.Contains(points[1].Reason, "pfctl shows 2 rules") {
		t.Errorf("point 1 = %+v; want failed with the verify error", points[1])
	}
	if points[0].Status != store.Valid || points[2].Status != store.Valid {
		t.Errorf("points 0 and 2 = %v, %v; want valid", points[0].Status, points[2].Status)
	}
	samples, _ := f.st.Samples(t.Context(), f.sweep.Run)
	for _, s := range samples {
		if s.Point == 1 {
			t.Fatalf("a sample was recorded for the point that never applied: %+v", s.Key)
		}
	}
	// One try and one retry, then the point is left alone in later rounds.
	if f.fw.applies > 2+1+3+3 {
		t.Errorf("%d applies: the failed point was retried in every round", f.fw.applies)
	}
	events, _ := f.st.Events(t.Context(), f.sweep.Run)
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	if !strings.Contains(strings.Join(kinds, " "), "retry error") {
		t.Errorf("events %v; want a retry then an error", kinds)
	}
}

func TestSweepSettleFailure(t *testing.T) {
	f := newSweep(t, twoPoints)
	f.sweep.Settle = func(ctx context.Context) error {
		c, _ := configxml.LoadBytes(f.fw.config)
		if v, _ := c.Get("rules@lan"); v == "200" {
			return errors.New("no traffic passes")
		}
		return nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	points, _ := f.st.Points(t.Context(), f.sweep.Run)
	if points[2].Status != store.Broken || !strings.Contains(points[2].Reason, "traffic does not pass") {
		t.Errorf("point 2 = %+v", points[2])
	}
}

func TestProbeRunsPacketSizes(t *testing.T) {
	s, err := Parse(strings.NewReader("axes:\n  rules@lan: [0]\nprobes:\n  - {name: udp, udp: true, bitrate: 1G, lengths: [64, 512, 1400]}\n  - {direction: down, parallel: 4, omit: 2s, duration: 5s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pr := range s.ProbeRuns() {
		got = append(got, fmt.Sprintf("%s:%s:%d:%d:%v", pr.Name, pr.Iperf3.Direction, pr.Iperf3.Length, pr.Iperf3.Parallel, pr.Iperf3.UDP))
		if err := pr.Iperf3.Validate(); err != nil {
			t.Errorf("%s: %v", pr.Name, err)
		}
	}
	want := "udp-64:up:64:0:true udp-512:up:512:0:true udp-1400:up:1400:0:true down:down:0:4:false"
	if strings.Join(got, " ") != want {
		t.Errorf("probe runs = %v; want %s", got, want)
	}
}

// TestSweepStats: the actions run equal the plan's, and the time accounts add up.
func TestSweepStats(t *testing.T) {
	f := newSweep(t, twoPoints)
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := f.sweep.Stats
	want := f.sweep.Plan.ServiceActions()
	for a, n := range want {
		if st.Actions[a] != n {
			t.Errorf("%s ran %d times; the plan has %d", a, st.Actions[a], n)
		}
	}
	if st.Samples != 20 || st.Applies != f.fw.applies {
		t.Errorf("stats %+v; want 20 samples and %d applies", st, f.fw.applies)
	}
	if st.Wall <= 0 || st.Overhead() < 0 || st.Overhead() > st.Wall {
		t.Errorf("wall %v, overhead %v", st.Wall, st.Overhead())
	}
}

func TestPowerMeterFromSpec(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"power: {url: 'http://198.18.9.9/status', json_path: ENERGY.Power}\n", "smartplug.Meter"},
		{"power: {watts: 12.5}\n", "probe.ManualPower"},
		{"", "<nil>"},
		{"power: {url: 'ftp://plug', json_path: a.b}\n", "use an http:// or https:// URL"},
	} {
		// A meter the sweep would refuse is refused when the spec is read.
		s, err := Parse(strings.NewReader("axes:\n  rules@lan: [0]\n" + tt.yaml))
		var m probe.PowerMeter
		if err == nil {
			m, err = s.PowerMeter()
		}
		got := fmt.Sprintf("%T", m)
		if err != nil {
			got = err.Error()
		}
		if !strings.Contains(got, tt.want) {
			t.Errorf("PowerMeter(%q) = %s; want %s", tt.yaml, got, tt.want)
		}
	}
}

// TestSweepRetriesFailedProbeOnce: a probe that fails (an endpoint gone, a
// firewall rebooting) is measured once more after the settle; only a
// second failure is recorded as failed.
func TestSweepRetriesFailedProbeOnce(t *testing.T) {
	tests := []struct {
		name       string
		failures   int // the first N probe calls fail
		wantFailed int
		wantCalls  int
	}{
		{name: "no failure", failures: 0, wantFailed: 0, wantCalls: 20},
		{name: "one failure, retried", failures: 1, wantFailed: 0, wantCalls: 21},
		{name: "two failures in a row", failures: 2, wantFailed: 1, wantCalls: 21},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSweep(t, twoPoints)
			measure := f.sweep.Measure
			f.sweep.Measure = func(ctx context.Context, pr ProbeRun) probe.Sample {
				if f.calls < tt.failures {
					f.calls++
					return probe.Sample{Failed: true, Reason: "iperf3 server gone"}
				}
				return measure(ctx, pr)
			}
			if err := f.sweep.Execute(t.Context()); err != nil {
				t.Fatal(err)
			}
			samples, err := f.st.Samples(t.Context(), f.sweep.Run)
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, s := range samples {
				if s.Failed {
					failed++
				}
			}
			if len(samples) != 20 || failed != tt.wantFailed || f.calls != tt.wantCalls {
				t.Errorf("%d samples, %d failed, %d probe calls; want 20, %d, %d", len(samples), failed, f.calls, tt.wantFailed, tt.wantCalls)
			}
		})
	}
}

// diskError is a firewall command error as fwapi reports one.
type diskError struct{ full bool }

func (e diskError) Error() string {
	if e.full {
		return "cp exited 1: No space left on device (the firewall's disk is full)"
	}
	return "cp exited 1: Permission denied"
}

func (e diskError) DiskFailed() bool { return e.full }

func TestDiskFailed(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("no space left on device"), false}, // only a DiskError says so
		{diskError{full: true}, true},
		{fmt.Errorf("apply rules@lan=100: %w", diskError{full: true}), true},
		{fmt.Errorf("apply: %w", diskError{}), false},
		{errors.Join(errors.New("restore"), diskError{full: true}), true},
	}
	for _, tt := range tests {
		if got := DiskFailed(tt.err); got != tt.want {
			t.Errorf("DiskFailed(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestSweepStopsOnFirewallDiskError: a disk that refuses writes is no
// point's fault: the sweep stops at once (no retry, no point marked
// broken) so that --resume measures everything once the disk is fixed.
func TestSweepStopsOnFirewallDiskError(t *testing.T) {
	f := newSweep(t, twoPoints)
	f.fw.refuse = func([]configxml.Change) error {
		return fmt.Errorf("apply: %w", diskError{full: true})
	}
	err := f.sweep.Execute(t.Context())
	if !DiskFailed(err) || !strings.Contains(err.Error(), "disk is full") {
		t.Fatalf("Execute = %v, want the disk error with its hint", err)
	}
	if f.fw.applies != 1 {
		t.Errorf("%d applies; want 1 (no retry, no further point)", f.fw.applies)
	}
	points, err := f.st.Points(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		if p.Status == store.Broken {
			t.Errorf("point %d marked broken by the firewall's disk error", p.Index)
		}
	}
}

// foreignEdit is an apply error after which nothing may be written, as
// fwapi's ForeignEditError.
type foreignEdit struct{}

func (foreignEdit) Error() string    { return "config.xml was changed by someone else: system/hostname" }
func (foreignEdit) StopsSweep() bool { return true }

// TestSweepStopsOnForeignEdit: someone else's edit on the box is no
// point's fault either: the sweep stops at once, nothing retried.
func TestSweepStopsOnForeignEdit(t *testing.T) {
	f := newSweep(t, twoPoints)
	f.fw.refuse = func([]configxml.Change) error {
		return fmt.Errorf("apply: %w", foreignEdit{})
	}
	err := f.sweep.Execute(t.Context())
	if err == nil || !strings.Contains(err.Error(), "sweep stopped") || !strings.Contains(err.Error(), "system/hostname") {
		t.Fatalf("Execute = %v, want the sweep stopped with the edit named", err)
	}
	if f.fw.applies != 1 {
		t.Errorf("%d applies; want 1 (no retry, no further point)", f.fw.applies)
	}
}

// TestSweepIdlePhase: each point gets one idle phase, before its first
// probe, recorded as probe "idle"; a resumed run does not repeat it, and
// idle: 0s turns it off.
func TestSweepIdlePhase(t *testing.T) {
	f := newSweep(t, twoPoints+"idle: 2s\n")
	ctx, cancel := context.WithCancel(t.Context())
	var idles []time.Duration
	f.sweep.Idle = func(_ context.Context, d time.Duration) probe.Sample {
		idles = append(idles, d)
		return probe.Sample{Probe: probe.IdleProbe, DUT: []probe.DUTMetrics{{Time: time.Now(), CPUPercent: 2}}, Power: []probe.PowerReading{{Time: time.Now(), Watts: 18}}}
	}
	measure := f.sweep.Measure
	f.sweep.Measure = func(c context.Context, pr ProbeRun) probe.Sample {
		if f.calls == 3 {
			cancel() // during the second point's second probe
		}
		return measure(c, pr)
	}
	if err := f.sweep.Execute(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v; want context.Canceled", err)
	}
	f.sweep.Measure = measure
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(idles) != 3 || idles[0] != 2*time.Second {
		t.Errorf("idle phases %v; want one of 2s per point", idles)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	first := map[int]string{} // point → the probe of its first sample
	n := 0
	for _, s := range samples {
		if _, ok := first[s.Point]; !ok {
			first[s.Point] = s.Probe
		}
		if s.Probe == probe.IdleProbe {
			n++
			if s.PowerWatts != 18 || len(s.DUT) != 1 || s.Failed {
				t.Errorf("idle sample %+v; want its power and DUT reading, not failed", s)
			}
		}
	}
	if n != 3 || first[0] != probe.IdleProbe || first[1] != probe.IdleProbe || first[2] != probe.IdleProbe {
		t.Errorf("%d idle samples, first samples per point %v; want 3, each point's first", n, first)
	}
	if f.sweep.Stats.Idle <= 0 {
		t.Errorf("Stats.Idle = %v, want the idle phases' time", f.sweep.Stats.Idle)
	}

	off := newSweep(t, twoPoints+"idle: 0s\n")
	off.sweep.Idle = func(context.Context, time.Duration) probe.Sample {
		t.Error("idle: 0s ran an idle phase")
		return probe.Sample{}
	}
	if err := off.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestDescribeReboot: a step whose change needs a reboot says so in its
// progress line, before the firewall goes away.
func TestDescribeReboot(t *testing.T) {
	got := describe([]configxml.Change{{Knob: "crypto.hardware", To: "aesni", Action: configxml.ActionReboot}})
	if got != "crypto.hardware=aesni (the firewall reboots)" {
		t.Errorf("describe = %q", got)
	}
	if got := describe([]configxml.Change{{Knob: "rules@lan", To: "10", Action: configxml.ActionFilterReload}}); strings.Contains(got, "reboot") {
		t.Errorf("describe = %q: no reboot for a filter reload", got)
	}
}

// TestSweepFirmwareAxis: a firmware axis switches boot environments: a
// point of another firmware first boots its environment (SwitchFirmware),
// and the point's other knobs are applied to that environment's own
// config, never to the other one's.
func TestSweepFirmwareAxis(t *testing.T) {
	s, err := Parse(strings.NewReader(`
axes:
  firmware: [2.7.2-RELEASE, 2.8.0-RELEASE]
  rules@lan: [0, 100]
probes:
  - {name: up, direction: up, duration: 1s}
repeats: 2
order: cost-aware
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg := pfSense(t)
	if err := cfg.SetProduct("2.7.2-RELEASE"); err != nil {
		t.Fatal(err)
	}
	// Each environment's config has a hostname of its own.
	envs := map[string]*configxml.Config{}
	for _, v := range []string{"2.7.2-RELEASE", "2.8.0-RELEASE"} {
		c, err := configxml.LoadBytes(cfg.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetProduct(v); err != nil {
			t.Fatal(err)
		}
		if err := c.Set("xml:system/hostname", "env-"+v); err != nil {
			t.Fatal(err)
		}
		envs[v] = c
	}
	f := newSweepSpec(t, s)
	f.sweep.Config, f.sweep.Firmware = envs["2.7.2-RELEASE"], "2.7.2-RELEASE"
	f.fw.config = envs["2.7.2-RELEASE"].Bytes()
	var switches []string
	f.sweep.SwitchFirmware = func(_ context.Context, v string) (*configxml.Config, error) {
		switches = append(switches, v)
		f.fw.mu.Lock()
		f.fw.config = envs[v].Bytes()
		f.fw.mu.Unlock()
		c, err := configxml.LoadBytes(envs[v].Bytes())
		if err == nil {
			err = c.SetProduct(v)
		}
		return c, err
	}
	running := "2.7.2-RELEASE"
	measure := f.sweep.Measure
	f.sweep.Measure = func(ctx context.Context, pr ProbeRun) probe.Sample {
		f.fw.mu.Lock()
		c, _ := configxml.LoadBytes(f.fw.config)
		f.fw.mu.Unlock()
		if len(switches) > 0 {
			running = switches[len(switches)-1]
		}
		if h, _ := c.Get("xml:system/hostname"); h != "env-"+running {
			t.Errorf("measured on %s with the config of %s", running, h)
		}
		return measure(ctx, pr)
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4*2 {
		t.Fatalf("%d samples, want 8", len(samples))
	}
	// The cost-aware order switches firmware once a round at most: the
	// first round ends on 2.8.0, the second starts there and goes back.
	if len(switches) < 1 || len(switches) > 3 || switches[0] != "2.8.0-RELEASE" {
		t.Errorf("switches %v: want 2.8.0 first, at most one a round", switches)
	}
	if f.sweep.Stats.Actions[configxml.ActionFirmware] != len(switches) {
		t.Errorf("stats count %d firmware switches, made %d", f.sweep.Stats.Actions[configxml.ActionFirmware], len(switches))
	}

	t.Run("without SwitchFirmware the sweep stops at the first other firmware", func(t *testing.T) {
		g := newSweepSpec(t, s)
		g.sweep.Config, g.sweep.Firmware = envs["2.7.2-RELEASE"], "2.7.2-RELEASE"
		err := g.sweep.Execute(t.Context())
		if err == nil || !strings.Contains(err.Error(), "cannot switch firmware") {
			t.Errorf("Execute = %v", err)
		}
	})
}

// TestSweepInvalidatesSamplesTheBoxChangedUnder: a probe during which a
// watched service restarted is failed with the change as its reason (kept,
// left out of the statistics) and measured once more; a box whose health
// cannot be read at all only warns.
func TestSweepInvalidatesSamplesTheBoxChangedUnder(t *testing.T) {
	f := newSweep(t, twoPoints)
	reads := 0
	f.sweep.Health = func(context.Context) (probe.Health, error) {
		reads++
		pid := 812
		if reads >= 4 { // Suricata restarts during the second probe
			pid = 1403
		}
		return probe.Health{Boot: 1700000000, Services: map[string][]int{"suricata": {pid}}}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, s := range samples {
		if s.Failed {
			failed = append(failed, s.Reason)
		}
		for _, w := range s.Warnings {
			if strings.Contains(w, "measured again") && !strings.Contains(w, "suricata restarted (pid 812 → 1403)") {
				t.Errorf("retry warning %q does not say why", w)
			}
		}
	}
	if len(samples) != 20 || len(failed) != 0 || f.calls != 21 {
		t.Errorf("%d samples, failed %q, %d probe calls; want 20, none failed (the retry measured one box), 21", len(samples), failed, f.calls)
	}

	// The retry is invalidated too: the sample stays failed, saying why.
	f = newSweep(t, twoPoints)
	reads = 0
	f.sweep.Health = func(context.Context) (probe.Health, error) {
		reads++
		boot, up := int64(1700000000), int64(3600+reads)
		if reads == 4 || reads == 6 { // the second probe and its retry each span a reboot
			boot, up = boot+int64(3600+reads), 0
		}
		return probe.Health{Boot: boot, Uptime: up, Read: time.Now(), Services: map[string][]int{}}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	if samples, err = f.st.Samples(t.Context(), f.sweep.Run); err != nil {
		t.Fatal(err)
	}
	want := probe.InvalidReason + "the firewall rebooted"
	if !slices.ContainsFunc(samples, func(s store.Sample) bool { return s.Failed && s.Reason == want }) {
		t.Errorf("no sample failed with %q", want)
	}

	// Health that cannot be read: samples stand, with a warning.
	f = newSweep(t, twoPoints)
	f.sweep.Health = func(context.Context) (probe.Health, error) { return probe.Health{}, errors.New("no shell") }
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	if samples, err = f.st.Samples(t.Context(), f.sweep.Run); err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(samples, func(s store.Sample) bool { return s.Failed }) || !slices.ContainsFunc(samples[0].Warnings, func(w string) bool { return strings.Contains(w, "health was not read before the probe: no shell") }) {
		t.Errorf("unreadable health: samples %+v", samples[0])
	}
}

// TestSweepWarnsOfLinkErrors: errors an interface counted during a probe
// are the sample's warning, and the sample stands.
func TestSweepWarnsOfLinkErrors(t *testing.T) {
	f := newSweep(t, twoPoints)
	reads := 0
	f.sweep.Health = func(context.Context) (probe.Health, error) {
		reads++
		errs := uint64(0)
		if reads >= 4 { // igb1 counts errors during the second probe
			errs = 40
		}
		return probe.Health{Boot: 1700000000, Services: map[string][]int{}, Links: map[string]probe.LinkCounters{"igb1": {InErrors: errs}}}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 20 || f.calls != 20 {
		t.Fatalf("%d samples, %d probe calls; want 20 and 20: none measured again", len(samples), f.calls)
	}
	var warned []int
	for i, s := range samples {
		if s.Failed {
			t.Errorf("sample %d failed: %s", i, s.Reason)
		}
		if slices.ContainsFunc(s.Warnings, func(w string) bool {
			return strings.Contains(w, "igb1 counted 40 input and 0 output errors during the probe")
		}) {
			warned = append(warned, i)
		}
	}
	if !slices.Equal(warned, []int{1}) {
		t.Errorf("samples warned of igb1's errors: %v, want [1]", warned)
	}
}

// TestSweepStopsWhenAServiceStaysDown: a watched service that stopped
// during a probe and is still down after settling leaves the box outside
// the point's state: the sweep keeps the invalid sample and stops, naming
// the service, rather than measure a box without it under the point's name.
func TestSweepStopsWhenAServiceStaysDown(t *testing.T) {
	f := newSweep(t, twoPoints)
	f.sweep.ServiceComeback = 1500 * time.Millisecond // the test's Suricata never comes back
	reads := 0
	f.sweep.Health = func(context.Context) (probe.Health, error) {
		reads++
		h := probe.Health{Boot: 1700000000, Services: map[string][]int{"suricata": {812}, "charon": nil}}
		if reads >= 4 { // Suricata dies during the second probe, for good
			h.Services["suricata"] = nil
		}
		return h, nil
	}
	err := f.sweep.Execute(t.Context())
	if err == nil || !strings.Contains(err.Error(), "suricata stopped during probe down and did not come back") {
		t.Fatalf("Execute = %v, want the sweep stopped naming suricata", err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 2 || !samples[1].Failed || samples[1].Reason != probe.InvalidReason+"suricata stopped (pid 812)" {
		t.Errorf("samples %+v: want the first and the invalid second", samples)
	}
}

// TestSweepWaitsForAServiceToComeBack: Suricata stopped during a probe and
// started again within ServiceComeback (pfSense's rule update: stop, sleep
// 5 s, start) invalidates that sample only: the sweep measures it again and
// goes on.
func TestSweepWaitsForAServiceToComeBack(t *testing.T) {
	f := newSweep(t, twoPoints)
	f.sweep.ServiceComeback = 5 * time.Second
	reads := 0
	f.sweep.Health = func(context.Context) (probe.Health, error) {
		reads++
		pid := []int{812}
		switch {
		case reads == 4:
			pid = nil // stopped during the second probe
		case reads > 4:
			pid = []int{1500} // back a second later
		}
		return probe.Health{Boot: 1700000000, Services: map[string][]int{"suricata": pid}}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatalf("Execute: %v, want the sweep to go on", err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 20 || f.calls != 21 {
		t.Errorf("%d samples, %d probe calls; want 20 and 21 (one measured again)", len(samples), f.calls)
	}
}

// TestSweepBlackoutShare: with a rate that is a share of the baseline's
// throughput, each stream runs at that share of the baseline's median as
// measured so far; before the baseline is measured, of the point measured
// last; a change before any measurement has no stream, and says why once.
func TestSweepBlackoutShare(t *testing.T) {
	// Points: 100 rules (0.9e9 bit/s in measureFrom), 0 rules (1e9, the
	// baseline), 200 rules (0.8e9); the box starts with 0 rules.
	spec := strings.NewReplacer("[0, 100, 200]", "[100, 0, 200]", "order: as-written", "order: as-written\nbaseline: {rules@lan: 0}\nblackout: {rate: 50%}").Replace(twoPoints)
	f := newSweep(t, spec)
	f.sweep.BlackoutShare = f.sweep.Plan.Spec.Blackout.Share()
	var got []float64
	f.sweep.Blackout = func(ctx context.Context, bps float64) (func(context.Context) (probe.BlackoutResult, error), error) {
		got = append(got, bps)
		return func(context.Context) (probe.BlackoutResult, error) {
			return probe.BlackoutResult{Rate: 1000, Sent: 900, Received: 900}, nil
		}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The first apply (to 100 rules) comes before any probe: no stream.
	// The second (to the baseline) comes before the baseline is measured:
	// half the 100-rule point's 0.9e9. Every later one: half the
	// baseline's 1e9.
	if len(got) < 3 || len(got) != f.fw.applies-1 {
		t.Fatalf("%d streams for %d applies; want one for each apply but the first", len(got), f.fw.applies)
	}
	for i, bps := range got {
		if want := map[bool]float64{true: 0.45e9, false: 0.5e9}[i == 0]; bps != want {
			t.Errorf("stream %d: %v bit/s, want %v", i, bps, want)
		}
	}
	events, _ := f.st.Events(t.Context(), f.sweep.Run)
	var why int
	for _, e := range events {
		if e.Kind == "warning" && strings.Contains(e.Message, "no throughput is measured yet") {
			why++
		}
	}
	if why != 1 {
		t.Errorf("%d warnings that the first change had no stream; want 1", why)
	}
}

// TestSweepBlackout: a blackout stream runs around every apply, from
// before the write to after the verify, and its result is recorded with
// the apply's actions; a stream that cannot start is a warning and the
// point is still measured.
func TestSweepBlackout(t *testing.T) {
	f := newSweep(t, twoPoints)
	var streaming, starts int
	apply := f.sweep.Apply
	f.sweep.Apply = func(ctx context.Context, config []byte, changes []configxml.Change) error {
		if starts != 2 && streaming != 1 {
			t.Errorf("apply with %d streams running, want 1", streaming)
		}
		return apply(ctx, config, changes)
	}
	f.sweep.Blackout = func(ctx context.Context, bps float64) (func(context.Context) (probe.BlackoutResult, error), error) {
		if bps != 0 {
			t.Errorf("stream asked for %v bit/s; want 0, the spec's own rate", bps)
		}
		starts++
		if starts == 2 {
			return nil, errors.New("agent not found")
		}
		streaming++
		return func(context.Context) (probe.BlackoutResult, error) {
			streaming--
			return probe.BlackoutResult{Rate: 1000, Sent: 900, Received: 850, Lost: 50, BlockedMS: 50, MaxGapMS: 48, TCPHeld: 4, TCPSurvived: 4}, nil
		}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	if streaming != 0 {
		t.Errorf("%d streams left running", streaming)
	}
	events, _ := f.st.Events(t.Context(), f.sweep.Run)
	var blackouts, warnings int
	for _, e := range events {
		switch {
		case e.Kind == store.EventBlackout:
			blackouts++
			var b store.BlackoutEvent
			if err := json.Unmarshal([]byte(e.Message), &b); err != nil || b.BlockedMS != 50 || len(b.Actions) != 1 || b.Actions[0] != string(configxml.ActionFilterReload) || b.TCPSurvived != 4 {
				t.Errorf("blackout event %q (%v): want 50 ms on a filter reload, 4 connections survived", e.Message, err)
			}
		case e.Kind == "warning" && strings.Contains(e.Message, "blackout not measured: agent not found"):
			warnings++
		}
	}
	if blackouts != f.fw.applies-1 || warnings != 1 || starts != f.fw.applies {
		t.Errorf("%d applies, %d streams started, %d blackouts recorded, %d warnings; want one stream per apply, each recorded but the one that did not start", f.fw.applies, starts, blackouts, warnings)
	}
}
