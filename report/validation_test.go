package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/fwab/fwab/report/reporttest"
)

// synthetic builds a report run from generated records, without a database.
func synthetic(t testing.TB, r reporttest.Run, id int64) *Run {
	t.Helper()
	info, points, samples := reporttest.Generate(r)
	info.ID = id
	for i := range samples {
		samples[i].Run = id
	}
	run, err := build(info, points, samples)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// gateTrials compares trials pairs of runs, A without and B with the
// slowdown, and returns how many point×probe throughput comparisons were
// flagged as regressions, and out of how many.
func gateTrials(t testing.TB, trials, repeats int, noise float64, uniform bool, slowdown float64, test Test, seed uint64) (flagged, total, trialsAllFlagged int) {
	g := gateTrialsOf(t, gateSetup{shape: t730Shape, trials: trials, repeats: repeats, noise: noise, uniform: uniform, slowdown: slowdown, test: test, seed: seed})
	return g.flagged, g.total, g.allFlagged
}

// gateTrialsRuns also counts the trials with any comparison flagged: the
// runs whose gate would fail.
func gateTrialsRuns(t testing.TB, trials, repeats int, noise float64, uniform bool, slowdown float64, test Test, seed uint64) (flagged, total, trialsAllFlagged, trialsAnyFlagged int) {
	g := gateTrialsOf(t, gateSetup{shape: t730Shape, trials: trials, repeats: repeats, noise: noise, uniform: uniform, slowdown: slowdown, test: test, seed: seed})
	return g.flagged, g.total, g.allFlagged, g.failedRuns
}

// gateSetup is one synthetic validation of the gate.
type gateSetup struct {
	shape    func(seed uint64, slowdown float64) reporttest.Run
	trials   int
	repeats  int
	noise    float64 // relative: sd of normal noise, or the half-width of uniform noise
	uniform  bool
	slowdown float64 // of every point in run B
	drift    float64 // each run's level shifted by a uniform draw in ±drift
	test     Test
	seed     uint64
}

// gateResult counts what the gate did over the trials.
type gateResult struct {
	flagged, total         int // throughput comparisons flagged, of total
	allFlagged, failedRuns int // trials with every comparison flagged, with any
	warned                 int // trials whose comparison warned that a point alone cannot be flagged
	detectable             []float64
}

// count adds a comparison's throughput rows to the counts.
func (res *gateResult) count(c *Comparison) {
	all := true
	for _, r := range c.Rows {
		if r.Metric != Throughput {
			continue
		}
		res.total++
		if r.Regression {
			res.flagged++
		} else {
			all = false
		}
	}
	if all {
		res.allFlagged++
	}
	if c.Regressions() > 0 {
		res.failedRuns++
	}
}

func t730Shape(seed uint64, slowdown float64) reporttest.Run { return reporttest.T730(seed, slowdown) }

// e302Shape is an E302-shaped full factorial with rules values: 4·rules
// comparisons.
func e302Shape(rules int) func(uint64, float64) reporttest.Run {
	return func(seed uint64, slowdown float64) reporttest.Run { return reporttest.E302(seed, slowdown, rules) }
}

func gateTrialsOf(t testing.TB, g gateSetup) gateResult {
	t.Helper()
	var res gateResult
	drift := rand.New(rand.NewPCG(g.seed, 77))
	shift := func() float64 { return g.drift * (2*drift.Float64() - 1) }
	for i := range g.trials {
		a := g.shape(g.seed+uint64(2*i), 0)
		b := g.shape(g.seed+uint64(2*i+1), g.slowdown)
		// A level shift of the whole run: 1-Slowdown is its level.
		a.Slowdown = 1 - (1-a.Slowdown)*(1+shift())
		b.Slowdown = 1 - (1-b.Slowdown)*(1+shift())
		a.Repeats, b.Repeats = g.repeats, g.repeats
		a.Noise, b.Noise = g.noise, g.noise
		a.Uniform, b.Uniform = g.uniform, g.uniform
		c, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: 3, Test: g.test})
		if err != nil {
			t.Fatal(err)
		}
		res.count(c)
		for _, r := range c.Rows {
			if r.Metric == Throughput {
				res.detectable = append(res.detectable, r.Detectable)
			}
		}
		if slicesContainsPrefix(c.Warnings, "with ") && slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "at one point alone cannot be flagged") }) {
			res.warned++
		}
	}
	return res
}

// The gate's statistical behaviour on synthetic runs shaped like the T730
// review (4 points × 2 probes = 8 comparisons a run), at the default 3 %
// threshold. "uniform" noise is ±3 % uniform (sd 1.7 %), "normal" noise has
// a 3 % standard deviation: the lab's AES tunnels are noisier still.

func rate(f, n int) float64 { return float64(f) / float64(n) }

func TestGateAA(t *testing.T) {
	for _, tc := range []struct {
		name    string
		uniform bool
		test    Test
		repeats int
		maxRate float64 // per comparison
	}{
		// At most α per run after the adjustment; the threshold removes
		// most of those.
		{"uniform utest n=5", true, UTest, 5, 0.01},
		{"uniform utest n=10", true, UTest, 10, 0.01},
		{"normal utest n=5", false, UTest, 5, 0.05},
		{"normal ttest n=5", false, TTest, 5, 0.05},
		{"uniform ttest n=10", true, TTest, 10, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, n, _, runs := gateTrialsRuns(t, 200, tc.repeats, 0.03, tc.uniform, 0, tc.test, 1000)
			t.Logf("A/A: %d of %d comparisons flagged (%.2f%%); %d of 200 runs would fail the gate", f, n, 100*rate(f, n), runs)
			if rate(f, n) > tc.maxRate {
				t.Errorf("A/A flagged %d of %d comparisons, more than %.0f%%", f, n, 100*tc.maxRate)
			}
		})
	}
	// n=3 per side: the U test cannot reach p < 0.05, so nothing is flagged,
	// and the comparison says so.
	a, b := reporttest.T730(1, 0), reporttest.T730(2, 0.5)
	a.Repeats, b.Repeats = 3, 3
	c, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c.Regressions() != 0 || !slicesContainsPrefix(c.Warnings, "with 3 samples on a side the U test cannot show any difference") {
		t.Errorf("n=3, 50%% slower: %d regressions, warnings %q; want 0 and a warning that the gate cannot fail", c.Regressions(), c.Warnings)
	}
}

func slicesContainsPrefix(ss []string, prefix string) bool {
	for _, s := range ss {
		if len(s) >= len(prefix) && s[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

func TestGateTenPercent(t *testing.T) {
	// Every point of every trial, with ±3 % noise and 5 repeats.
	f, n, all := gateTrials(t, 200, 5, 0.03, true, 0.10, UTest, 2000)
	if f != n || all != 200 {
		t.Errorf("10%% slower, uniform ±3%% noise, n=5: %d of %d comparisons flagged, every point in %d of 200 trials; want all", f, n, all)
	}
	// With normal noise of sd 3 %, nearly every comparison.
	f, n, all = gateTrials(t, 200, 5, 0.03, false, 0.10, UTest, 3000)
	t.Logf("10%% slower, normal sd 3%% noise, n=5: %d of %d comparisons flagged (%.1f%%), every point in %d of 200 trials", f, n, 100*rate(f, n), all)
	if rate(f, n) < 0.95 {
		t.Errorf("10%% slower, normal noise, n=5: %d of %d flagged, want 95%% or more", f, n)
	}
}

// TestGateThreePercent measures how often a 3 % slowdown is caught at the
// 3 % threshold. It sits on the threshold, so at best about half the
// comparisons see a change beyond it; a lower --fail-on-regression catches
// more. Run with -v for the table.
func TestGateThreePercent(t *testing.T) {
	for _, noise := range []struct {
		name    string
		uniform bool
	}{{"uniform ±3%", true}, {"normal sd 3%", false}} {
		for _, test := range []Test{UTest, TTest} {
			var rates []float64
			for _, repeats := range []int{3, 5, 10} {
				f, n, _ := gateTrials(t, 200, repeats, 0.03, noise.uniform, 0.03, test, 4000)
				rates = append(rates, rate(f, n))
				t.Logf("3%% slower, %s noise, %s, repeats %d: %d of %d comparisons flagged (%.1f%%)", noise.name, test, repeats, f, n, 100*rate(f, n))
			}
			if test == UTest && rates[0] != 0 {
				t.Errorf("%s, U test, n=3: %.1f%% flagged; the U test cannot reach p < 0.05 with 3 samples", noise.name, 100*rates[0])
			}
			if !(rates[2] > rates[0]) || rates[2] > 0.6 || rates[1] == 0 {
				t.Errorf("%s, %s: detection at repeats 3/5/10 = %.2f/%.2f/%.2f; want it to grow with repeats and stay near or under half", noise.name, test, rates[0], rates[1], rates[2])
			}
		}
	}
}

// TestGateFamily is the gate's validation on synthetic runs at 8, 60 and
// 200 gated comparisons (T730-shaped, and E302-shaped full factorials with
// 15 and 50 rules values), 6 repeats, 200 trials each: with nothing
// changed the gate fails at most 5 % of runs, whatever the number of
// comparisons; a 10 % slowdown of every point at ±3 % noise is flagged at
// 95 % or more of the points. FWAB_GATE_FULL=1 adds normal noise and the
// drift rows (each run's level shifted by up to ±5 %, as between lab
// runs), which are measured, not required: see BENCHMARKS.md. Run with -v
// for the table.
func TestGateFamily(t *testing.T) {
	shapes := []struct {
		name  string
		shape func(uint64, float64) reporttest.Run
		m     int
	}{{"t730", t730Shape, 8}, {"e302", e302Shape(15), 60}, {"e302", e302Shape(50), 200}}
	noises := []struct {
		name    string
		noise   float64
		uniform bool
	}{{"±3% uniform", 0.03, true}, {"±10% uniform", 0.10, true}, {"sd 3% normal", 0.03, false}, {"sd 10% normal", 0.10, false}}
	full := os.Getenv("FWAB_GATE_FULL") != ""
	if !full {
		noises = noises[:2]
	}
	for si, sh := range shapes {
		for ni, nz := range noises {
			seed := uint64(10000 + 1000*si + 100*ni)
			setup := gateSetup{shape: sh.shape, trials: 200, repeats: 6, noise: nz.noise, uniform: nz.uniform, test: UTest, seed: seed}
			aa := gateTrialsOf(t, setup)
			driftText := ""
			if full {
				setup.drift = 0.05
				drift := gateTrialsOf(t, setup)
				driftText = fmt.Sprintf("; drift ±5%%: %3d of 200 (%4.1f%%)", drift.failedRuns, 100*rate(drift.failedRuns, 200))
			}
			setup.drift, setup.slowdown = 0, 0.10
			slow := gateTrialsOf(t, setup)
			t.Logf("%s %3d, %-13s A/A: %3d of 200 runs fail (%4.1f%%)%s; 10%% slower: %5.1f%% of comparisons flagged, all in %3d of 200 runs; point alone: %s; warned in %d of 200",
				sh.name, sh.m, nz.name, aa.failedRuns, 100*rate(aa.failedRuns, 200), driftText,
				100*rate(slow.flagged, slow.total), slow.allFlagged, detectableText(aa.detectable), aa.warned)
			if slow.total != 200*sh.m {
				t.Fatalf("%s: %d comparisons in 200 trials, want %d each", sh.name, slow.total, sh.m)
			}
			if rate(aa.failedRuns, 200) > 0.05 {
				t.Errorf("%s %d, %s: A/A failed %d of 200 runs, more than 5%%", sh.name, sh.m, nz.name, aa.failedRuns)
			}
			if nz.noise == 0.03 && rate(slow.flagged, slow.total) < 0.95 {
				t.Errorf("%s %d, %s: 10%% slower flagged at %d of %d comparisons, fewer than 95%%", sh.name, sh.m, nz.name, slow.flagged, slow.total)
			}
			// At 6 repeats the U test's smallest p, 2/924, survives the
			// adjustment over 8 comparisons but not over 60 or 200.
			if wantWarn := sh.m > 8; (aa.warned == 200) != wantWarn || (!wantWarn && aa.warned != 0) {
				t.Errorf("%s %d: warned that a point alone cannot be flagged in %d of 200 trials, want %v", sh.name, sh.m, aa.warned, wantWarn)
			}
		}
	}
	for _, tc := range []struct{ m, want int }{{8, 6}, {60, 7}, {200, 8}} {
		if got := RepeatsForFamily(tc.m, 0.05); got != tc.want {
			t.Errorf("RepeatsForFamily(%d) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

// detectableText sums up rows' detectable changes: the median, and how
// many rows could not be flagged alone.
func detectableText(ds []float64) string {
	none := 0
	for _, d := range ds {
		if math.IsInf(d, 1) {
			none++
		}
	}
	if none == len(ds) {
		return "never flagged"
	}
	s := "detectable " + formatDetectable(median(ds), Throughput)
	if none > 0 {
		s += fmt.Sprintf(", never flagged at %d of %d rows", none, len(ds))
	}
	return s
}

// TestDetectableChange checks the stated power: a slowdown of one point of
// the T730 shape (its two probes) by the detectable change the A/A rows
// state is flagged in about Power of the comparisons.
func TestDetectableChange(t *testing.T) {
	setup := gateSetup{shape: t730Shape, trials: 100, repeats: 10, noise: 0.03, test: UTest, seed: 5000}
	aa := gateTrialsOf(t, setup)
	mde := median(aa.detectable)
	flagged, total := 0, 0
	for i := range 200 {
		a, b := reporttest.T730(uint64(6000+2*i), 0), reporttest.T730(uint64(6001+2*i), 0)
		a.Repeats, b.Repeats = 10, 10
		b.Points[1].Factor *= 1 - mde/100
		c, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: 3})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range c.Rows {
			if r.Metric == Throughput && strings.HasPrefix(r.Point, "blocklist=on ids@lan=off") {
				total++
				if r.Regression {
					flagged++
				}
			}
		}
	}
	t.Logf("detectable change at sd 3%% noise, 10 repeats, 8 comparisons: %.1f%%; one point that much slower flagged in %d of %d comparisons", mde, flagged, total)
	if r := rate(flagged, total); r < Power-0.2 || r > 0.99 {
		t.Errorf("a change of the detectable %.1f%% was flagged in %.0f%% of comparisons; want about %.0f%%", mde, 100*r, 100*Power)
	}
}

// TestAdaptiveRepeatsSamples measures what adaptive repeats save on
// synthetic T730-shaped runs whose points differ in noise (sd 3 %, 2 %,
// 2 %, 5 %): from 6 rounds, rounds of the points still wider than ±5 %
// with the baseline, up to 20, against the fixed repeats that bring every
// point to the same width. Run with -v for the figures (BENCHMARKS.md).
func TestAdaptiveRepeatsSamples(t *testing.T) {
	const trials, minR, maxR, width = 200, 6, 20, 5.0
	adaptiveTotal, fixedTotal, reached, fixedReached := 0, 0, 0, 0
	for i := range trials {
		r := reporttest.T730(uint64(9000+i), 0)
		r.Repeats = maxR
		for j, sd := range []float64{0.03, 0.02, 0.02, 0.05} {
			r.Points[j].Noise = sd
		}
		full := synthetic(t, r, 1)
		view := func(counts []int) *Run {
			v := *full
			v.Points = nil
			for j, p := range full.Points {
				cp := *p
				cp.Probes = map[string]*ProbeSamples{}
				for name, ps := range p.Probes {
					c := *ps
					c.Mbps = ps.Mbps[:min(counts[j], len(ps.Mbps))]
					cp.Probes[name] = &c
				}
				v.Points = append(v.Points, &cp)
				if p == full.Baseline {
					v.Baseline = &cp
				}
			}
			return &v
		}
		counts := []int{minR, minR, minR, minR}
		for round := minR; round < maxR; round++ {
			wide := Wider(view(counts), width)
			if len(wide) == 0 {
				break
			}
			for j := range counts {
				if j == full.Baseline.Index || slices.Contains(wide, j) {
					counts[j]++
				}
			}
		}
		if len(Wider(view(counts), width)) == 0 {
			reached++
		}
		for _, c := range counts {
			adaptiveTotal += c * len(full.Probes)
		}
		n := minR
		for ; n < maxR && len(Wider(view([]int{n, n, n, n}), width)) > 0; n++ {
		}
		if len(Wider(view([]int{n, n, n, n}), width)) == 0 {
			fixedReached++
		}
		fixedTotal += n * len(full.Points) * len(full.Probes)
	}
	t.Logf("adaptive repeats {min: %d, max: %d, width: %.0f%%}: every point reached the width in %d of %d trials, %.1f samples a run on average; fixed repeats reaching it (at most %d): %d of %d trials, %.1f samples a run",
		minR, maxR, width, reached, trials, float64(adaptiveTotal)/trials, maxR, fixedReached, trials, float64(fixedTotal)/trials)
	if adaptiveTotal >= fixedTotal || reached < fixedReached {
		t.Errorf("adaptive repeats took %d samples and reached the width in %d trials; fixed %d and %d: want fewer samples, as many reached", adaptiveTotal, reached, fixedTotal, fixedReached)
	}
}
