package report

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/fwab/fwab/report/reporttest"
)

// gateShape is examples/firmware-gate.yaml: rules@lan 0 and 1000 (which
// costs 10 %), up and down: 4 gated comparisons.
func gateShape(seed uint64, slowdown float64) reporttest.Run {
	return reporttest.Run{
		Firmware: "2.7.2-RELEASE",
		Spec:     "name: firmware-gate\naxes:\n  rules@lan: [0, 1000]\n",
		Seed:     seed, Slowdown: slowdown,
		Probes: []reporttest.Probe{{Name: "up", Direction: "up", Mbps: 5600}, {Name: "down", Direction: "down", Mbps: 7200}},
		Points: []reporttest.Point{
			{Knobs: map[string]string{"rules@lan": "0"}, Retransmits: -1},
			{Knobs: map[string]string{"rules@lan": "1000"}, Factor: 0.9, Retransmits: -1},
		},
	}
}

// designSetup is one synthetic validation of the two designs: the
// firmware gate's points (2 points × 2 probes = 4 gated comparisons) on a box whose
// throughput drifts by a trend drawn per trial, uniform in ±trend per
// round, with normal noise of sd noise per sample.
type designSetup struct {
	trials   int
	rounds   int
	noise    float64
	trend    float64
	slowdown float64 // of every point of side B
	seed     uint64
}

// sequentialTrials: run A, then run B continuing the same trend; with
// drift is the same pair judged with each run's drift check (noisy, one
// sample at the end of each run).
func sequentialTrials(t testing.TB, g designSetup) (plain, withDrift gateResult) {
	rng := rand.New(rand.NewPCG(g.seed, 19))
	for i := range g.trials {
		trend := g.trend * (2*rng.Float64() - 1)
		mk := func(seed uint64, slowdown float64, from int, check bool) *Run {
			r := gateShape(seed, slowdown)
			r.Repeats, r.Noise, r.Trend, r.TrendFrom = g.rounds, g.noise, trend, from
			r.EndBaseline, r.EndNoisy = check, true
			return synthetic(t, r, int64(1+from))
		}
		for _, check := range []bool{false, true} {
			seed := g.seed + uint64(2*i)
			a := mk(seed, 0, 0, check)
			b := mk(seed+1, g.slowdown, g.rounds+1, check) // B starts after A's drift check
			c, err := CompareRuns(a, b, CompareOptions{Threshold: 3})
			if err != nil {
				t.Fatal(err)
			}
			res := &plain
			if check {
				res = &withDrift
			}
			res.count(c)
		}
	}
	return plain, withDrift
}

// pairedTrials: one run over a firmware axis, A and B in every round.
func pairedTrials(t testing.TB, g designSetup) gateResult {
	rng := rand.New(rand.NewPCG(g.seed, 23))
	var res gateResult
	for i := range g.trials {
		r := gateShape(g.seed+uint64(i), 0)
		r.Spec = "name: firmware-gate\naxes:\n  firmware: [A, B]\n  rules@lan: [0, 1000]\n"
		var points []reporttest.Point
		for _, fw := range []string{"A", "B"} {
			for _, p := range r.Points {
				p.Knobs = map[string]string{"firmware": fw, "rules@lan": p.Knobs["rules@lan"]}
				if fw == "B" {
					f := p.Factor
					if f == 0 {
						f = 1
					}
					p.Factor = f * (1 - g.slowdown)
				}
				points = append(points, p)
			}
		}
		r.Points, r.Repeats, r.Noise, r.Trend = points, g.rounds, g.noise, g.trend*(2*rng.Float64()-1)
		c, err := CompareAxis(synthetic(t, r, 1), "firmware", "A", CompareOptions{Threshold: 3})
		if err != nil {
			t.Fatal(err)
		}
		res.count(c)
	}
	return res
}

// TestDesignsUnderDrift: a box drifting by up to ±1 % a round, sd 3 %
// noise. Two runs of 6 rounds fail an A/A gate often, the drift check
// holds some of that back; one run paired by round over 8 rounds passes
// A/A and flags a 10 % slowdown at every point of every trial.
// FWAB_GATE_FULL=1 runs 200 trials a row (BENCHMARKS.md), else 40.
func TestDesignsUnderDrift(t *testing.T) {
	trials := 40
	if os.Getenv("FWAB_GATE_FULL") != "" {
		trials = 200
	}
	base := designSetup{trials: trials, noise: 0.03, trend: 0.01, seed: 1900}
	seq := base
	seq.rounds = 6
	plainAA, driftAA := sequentialTrials(t, seq)
	seq.slowdown = 0.10
	plain10, drift10 := sequentialTrials(t, seq)
	seq.slowdown = 0.05
	plain5, drift5 := sequentialTrials(t, seq)
	par := base
	par.rounds = 8
	pairedAA := pairedTrials(t, par)
	par.slowdown = 0.10
	paired10 := pairedTrials(t, par)
	par.slowdown = 0.05
	paired5 := pairedTrials(t, par)
	for _, row := range []struct {
		name          string
		aa, ten, five gateResult
	}{
		{"sequential, 6 rounds", plainAA, plain10, plain5},
		{"sequential, 6 rounds, drift check", driftAA, drift10, drift5},
		{"paired by round, 8 rounds", pairedAA, paired10, paired5},
	} {
		t.Logf("%-36s A/A runs failed %3d/%d | 10%%: comparisons flagged %5.1f%%, trials all flagged %3d/%d | 5%%: flagged %5.1f%%, all %3d/%d",
			row.name, row.aa.failedRuns, trials, 100*rate(row.ten.flagged, row.ten.total), row.ten.allFlagged, trials, 100*rate(row.five.flagged, row.five.total), row.five.allFlagged, trials)
	}
	if pairedAA.failedRuns > trials/20 {
		t.Errorf("paired A/A: %d of %d runs failed; want at most 5 %%", pairedAA.failedRuns, trials)
	}
	if paired10.allFlagged != trials {
		t.Errorf("paired, 10 %% slower: every comparison flagged in %d of %d trials; want all", paired10.allFlagged, trials)
	}
	if plainAA.failedRuns <= pairedAA.failedRuns || driftAA.failedRuns > plainAA.failedRuns {
		t.Errorf("A/A runs failed: sequential %d, with the drift check %d, paired %d; want paired < sequential and the check no worse", plainAA.failedRuns, driftAA.failedRuns, pairedAA.failedRuns)
	}
}
