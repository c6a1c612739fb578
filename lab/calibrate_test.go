package lab

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/emu"
)

func TestParseSevenZip(t *testing.T) {
	recorded, err := os.ReadFile("testdata/7zz-26.02-b1-mmt1-md22.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, out string
		want      SevenZip
	}{
		// This machine, 7-Zip 26.02, under another engineer's load: the
		// thread ran 94 % of the time, so its rating (3265) is below
		// its R/U (3472).
		{"7zz 26.02", string(recorded), SevenZip{Version: "26.02", Decompress: 3472, Total: 3199}},
		// p7zip 16.02's layout (no speed column in the Avr line), as the
		// published runs print it: the GX-420CA's four threads, whose
		// R/U (1735) is a quarter of their rating.
		{"p7zip 16.02", "7-Zip (a) [64] 16.02 : Copyright (c) 1999-2016 Igor Pavlov : 2016-05-21\n" +
			"----------------------------------  | ------------------------------\n" +
			"Avr:             377   1239   4675  |              397   1735   6884\n" +
			"Tot:             387   1487   5780\n", SevenZip{Version: "16.02", Decompress: 1735, Total: 1487}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSevenZip(tc.out)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"", "7-Zip [64] 26.02\nSystem ERROR:\nE_OUTOFMEMORY\n", "Avr: 100 0 0 | 100 0 0\nTot: 100 0 0\n"} {
		if s, err := ParseSevenZip(bad); err == nil {
			t.Errorf("ParseSevenZip(%q) = %+v, want an error", bad, s)
		}
	}
}

func TestCalibrate(t *testing.T) {
	ref := CPURef{Model: "X", Cores: 4, MHz: 2000, Column: RatingDecompress, PerMHz: 1}
	for _, tc := range []struct {
		name      string
		ref       CPURef
		machine   SevenZip
		ncpu      int
		ratio     float64
		budget    float64
		wantError bool
	}{
		{name: "one core of the appliance", ref: ref, machine: SevenZip{Decompress: 4000, Total: 1}, ncpu: 2, ratio: 0.5, budget: 0.5},
		{name: "the total rating where the reference gives it", ref: CPURef{Model: "X", Cores: 4, MHz: 2000, Column: RatingTotal, PerMHz: 1}, machine: SevenZip{Decompress: 1, Total: 8000}, ncpu: 2, ratio: 0.25, budget: 0.25},
		{name: "a faster core than the machine's is capped at the machine", ref: ref, machine: SevenZip{Decompress: 500}, ncpu: 1, ratio: 4, budget: 1},
		{name: "a far slower core gets the smallest budget", ref: ref, machine: SevenZip{Decompress: 100000}, ncpu: 2, ratio: 0.02, budget: MinCPUBudget},
		{name: "no rating", ref: ref, machine: SevenZip{}, ncpu: 2, wantError: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Calibrate(tc.ref, tc.machine, tc.ncpu)
			if tc.wantError {
				if err == nil {
					t.Fatalf("got %+v, want an error", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(c.Ratio-tc.ratio) > 1e-9 || c.Budget != tc.budget || c.Threads != EngineThreads {
				t.Errorf("ratio %g budget %g threads %d, want %g, %g, %d", c.Ratio, c.Budget, c.Threads, tc.ratio, tc.budget, EngineThreads)
			}
		})
	}
}

// TestApplianceTable checks the profiles: unique names, and for each
// calibrated one a CPU with its cores, clock, a rating column the
// machine's run gives, and a published source.
func TestApplianceTable(t *testing.T) {
	seen := map[string]bool{}
	calibrated := 0
	for _, a := range Appliances {
		if seen[a.Name] {
			t.Errorf("profile %s twice", a.Name)
		}
		seen[a.Name] = true
		if a.Models == "" {
			t.Errorf("profile %s says nothing of what it models", a.Name)
		}
		if got, err := LookupAppliance(a.Name); err != nil || got.Name != a.Name {
			t.Errorf("LookupAppliance(%s) = %v, %v", a.Name, got.Name, err)
		}
		if a.CPU == nil {
			continue
		}
		calibrated++
		r := a.CPU
		if a.DUTCPU != 0 {
			t.Errorf("profile %s has both a CPU to calibrate and a budget of %g cores", a.Name, a.DUTCPU)
		}
		if r.Model == "" || r.Cores < 1 || r.MHz <= 0 || r.PerMHz <= 0 || (r.Column != RatingDecompress && r.Column != RatingTotal) {
			t.Errorf("profile %s: CPU %+v is incomplete", a.Name, *r)
		}
		if !strings.Contains(r.Source, "https://") {
			t.Errorf("profile %s: CPU figure without a published source: %q", a.Name, r.Source)
		}
		// Whatever the machine, the budget stands for one appliance core.
		c, err := Calibrate(*r, SevenZip{Decompress: r.MIPS() * 2, Total: r.MIPS() * 2}, 2)
		if err != nil || c.Budget != 0.5 {
			t.Errorf("profile %s on a machine twice as fast: budget %g (%v), want 0.5", a.Name, c.Budget, err)
		}
	}
	for _, name := range []string{"t730", "apu2", "e302"} {
		if a, err := LookupAppliance(name); err != nil || a.CPU == nil {
			t.Errorf("profile %s: %v, calibrated: %v", name, err, err == nil && a.CPU != nil)
		}
	}
	// The slower APU2 core gets the smaller budget on the same machine.
	t730, _ := LookupAppliance("t730")
	apu2, _ := LookupAppliance("apu2")
	m := SevenZip{Decompress: 4000, Total: 4000}
	ct, _ := Calibrate(*t730.CPU, m, 2)
	ca, _ := Calibrate(*apu2.CPU, m, 2)
	if !(ca.Budget < ct.Budget) {
		t.Errorf("apu2 budget %g, t730 %g: want the 1 GHz core below the 2.4 GHz one", ca.Budget, ct.Budget)
	}
	if calibrated < 3 {
		t.Errorf("%d calibrated profiles, want t730, apu2 and e302", calibrated)
	}
}

// TestOptionsCalibrate checks when Up measures: for a calibrated profile
// without --dut-cpu, once; a lab already calibrated for the same CPU
// keeps its figure; --dut-cpu and uncalibrated profiles measure nothing.
func TestOptionsCalibrate(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	bench := func(context.Context) (SevenZip, error) {
		runs++
		return SevenZip{Version: "26.02", Decompress: 4180, Total: 4000}, nil
	}
	ctx := context.Background()
	o := Options{Dir: dir, Appliance: "t730", Benchmark: bench}
	o.defaults()
	up := true
	running := func(*State) bool { return up }
	c, err := o.calibrate(ctx, running)
	if err != nil || c == nil {
		t.Fatalf("calibrate: %v, %v", c, err)
	}
	t730, _ := LookupAppliance("t730")
	if want := math.Round(t730.CPU.MIPS()/4180*100) / 100; c.Budget != want || runs != 1 {
		t.Fatalf("budget %g after %d runs, want %g after 1", c.Budget, runs, want)
	}
	kept := *c
	kept.Machine.Decompress = 9999 // tells the lab's calibration from a new one
	data, _ := json.Marshal(&State{Prefix: o.Prefix, Appliance: "t730", DUTCPU: c.Budget, CPU: &kept})
	if err := os.WriteFile(filepath.Join(dir, stateFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := o.calibrate(ctx, running)
	if err != nil || again == nil || again.Machine.Decompress != 9999 || runs != 1 {
		t.Errorf("second lab up: %+v, %v after %d runs: want the lab's calibration kept", again, err, runs)
	}
	up = false
	if again, err := o.calibrate(ctx, running); err != nil || again == nil || again.Machine.Decompress == 9999 || runs != 2 {
		t.Errorf("lab up over a lab that is down: %+v, %v after %d runs: want a new measurement", again, err, runs)
	}
	up = true
	changed := kept
	changed.Appliance.MHz = 2000
	data, _ = json.Marshal(&State{Prefix: o.Prefix, Appliance: "t730", DUTCPU: c.Budget, CPU: &changed})
	if err := os.WriteFile(filepath.Join(dir, stateFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if again, err := o.calibrate(ctx, running); err != nil || again == nil || again.Machine.Decompress == 9999 || runs != 3 {
		t.Errorf("a lab calibrated for another CPU figure: %+v, %v after %d runs: want a new measurement", again, err, runs)
	}
	o.Appliance = "apu2"
	if other, err := o.calibrate(ctx, running); err != nil || other == nil || runs != 4 || other.Appliance.Model != "AMD GX-412TC" {
		t.Errorf("another profile: %+v, %v after %d runs: want a new measurement", other, err, runs)
	}
	for _, opt := range []Options{{Dir: dir, Appliance: "t730", DUTCPU: 1, Benchmark: bench}, {Dir: dir, Appliance: "1g-small", Benchmark: bench}, {Dir: dir, Benchmark: bench}} {
		opt.defaults()
		if got, err := opt.calibrate(ctx, running); err != nil || got != nil {
			t.Errorf("%+v: calibration %+v, %v; want none", opt, got, err)
		}
	}
	if runs != 4 {
		t.Errorf("%d benchmark runs, want 4", runs)
	}
}

// TestDescribeCalibrated: the line `lab status`, the lab target and the
// reports carry names the profile, the budget, both figures, the
// benchmark and the reference's source.
func TestDescribeCalibrated(t *testing.T) {
	a, _ := LookupAppliance("t730")
	c, err := Calibrate(*a.CPU, SevenZip{Version: "26.02", Decompress: 4000, Total: 3700}, 2)
	if err != nil {
		t.Fatal(err)
	}
	st := &State{Prefix: "fwx", Appliance: "t730", DUTCPU: c.Budget, CPU: &c, Links: map[string]emu.LinkSpec{"lan": a.Link, "wan": a.Link}}
	got := st.Describe()
	for _, want := range []string{"lab profile t730", "lan 1g", "0.52-core budget (cgroup fwx-dut)", "4 × AMD GX-424CC at 2400 MHz", "2090 MIPS", "4000 (7-Zip 26.02", "7zz b 1 -mmt1 -md22", "= 0.52", a.CPU.Source} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe() = %q\nlacks %q", got, want)
		}
	}
	if got := (&State{Appliance: "1g-small", DUTCPU: 1, Prefix: "fwx"}).Describe(); !strings.Contains(got, "1-core budget") || strings.Contains(got, "MIPS") || strings.Contains(got, "dut-cpu") {
		t.Errorf("uncalibrated: %q", got)
	}
	if got := (&State{Appliance: "t730", DUTCPU: 1, Prefix: "fwx"}).Describe(); !strings.Contains(got, "1-core budget (cgroup fwx-dut), set by --dut-cpu, not calibrated") {
		t.Errorf("t730 with --dut-cpu 1: %q", got)
	}
}

// TestCalibratedProfileUp builds a t730 lab with a benchmark that finds
// this machine four times as fast as a GX-424CC core: the services get a
// quarter core, the target and lab.json say how, and a second `lab up`
// keeps the calibration without running the benchmark again.
func TestCalibratedProfileUp(t *testing.T) {
	requireRoot(t)
	if err := CheckCPUControllers(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	t730, _ := LookupAppliance("t730")
	runs := 0
	bench := func(context.Context) (SevenZip, error) {
		runs++
		return SevenZip{Version: "test", Decompress: t730.CPU.MIPS() * 4, Total: 1}, nil
	}
	o, st, tg := upLab(t, Options{Appliance: "t730", Benchmark: bench})
	t.Cleanup(func() { _ = RemoveCPUGroup(Topology{Prefix: o.Prefix}.Namespace("dut")) })
	if st.CPU == nil || st.DUTCPU != 0.25 || runs != 1 {
		t.Fatalf("lab.json: budget %g, calibration %+v after %d benchmark runs; want 0.25 from one run", st.DUTCPU, st.CPU, runs)
	}
	m, err := systemCgroupMounts()
	if err != nil {
		t.Fatal(err)
	}
	name := Topology{Prefix: o.Prefix}.Namespace("dut")
	quota := filepath.Join(m.v1CPU, name, "cpu.cfs_quota_us")
	if m.v2 != "" {
		quota = filepath.Join(m.v2, name, "cpu.max")
	}
	if q, err := os.ReadFile(quota); err != nil || !strings.HasPrefix(string(q), "25000") {
		t.Errorf("%s = %q, %v; want a quarter core's quota", quota, q, err)
	}
	if !strings.HasPrefix(tg.Lab, "lab profile t730: links lan 1g, wan 1g; services on a 0.25-core budget") || !strings.Contains(tg.Lab, t730.CPU.Source) {
		t.Errorf("target's lab = %q", tg.Lab)
	}
	if again, err := Up(t.Context(), o); err != nil || again.DUTCPU != 0.25 || runs != 1 {
		t.Errorf("second lab up: budget %v, %v after %d benchmark runs; want the lab kept as it is", again, err, runs)
	}
}
