package report

import (
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
	flagged, total, trialsAllFlagged, _ = gateTrialsRuns(t, trials, repeats, noise, uniform, slowdown, test, seed)
	return flagged, total, trialsAllFlagged
}

// gateTrialsRuns also counts the trials with any comparison flagged: the
// runs whose gate would fail.
func gateTrialsRuns(t testing.TB, trials, repeats int, noise float64, uniform bool, slowdown float64, test Test, seed uint64) (flagged, total, trialsAllFlagged, trialsAnyFlagged int) {
	t.Helper()
	for i := range trials {
		a := reporttest.T730(seed+uint64(2*i), 0)
		b := reporttest.T730(seed+uint64(2*i+1), slowdown)
		a.Repeats, b.Repeats = repeats, repeats
		a.Noise, b.Noise = noise, noise
		a.Uniform, b.Uniform = uniform, uniform
		c, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: 3, Test: test})
		if err != nil {
			t.Fatal(err)
		}
		all := true
		for _, r := range c.Rows {
			if r.Metric != Throughput {
				continue
			}
			total++
			if r.Regression {
				flagged++
			} else {
				all = false
			}
		}
		if all {
			trialsAllFlagged++
		}
		if c.Regressions() > 0 {
			trialsAnyFlagged++
		}
	}
	return flagged, total, trialsAllFlagged, trialsAnyFlagged
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
		// α is 5 % per comparison; the threshold removes most of those.
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
