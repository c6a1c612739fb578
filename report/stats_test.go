package report

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func noisy(rng *rand.Rand, n int, center, spread float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = center * (1 + spread*(rng.Float64()*2-1))
	}
	return v
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{5, 1, 4, 2, 3, 9, 7, 8, 6})
	if s.N != 9 || s.Median != 5 || !(s.Lo <= 5 && s.Hi >= 5) || s.Lo < 1 || s.Hi > 9 {
		t.Errorf("Summarize = %+v; want median 5 inside a finite interval", s)
	}
	small := Summarize([]float64{10, 11})
	if !math.IsInf(small.Lo, -1) && !math.IsInf(small.Hi, 1) && len(small.Warnings) == 0 {
		t.Errorf("n=2 gave a finite interval and no warning: %+v", small)
	}
	if e := Summarize([]float64{math.NaN()}); !math.IsNaN(e.Median) || len(e.Warnings) == 0 {
		t.Errorf("no valid value: %+v", e)
	}
}

// TestAA: two samples from the same distribution show no difference in at
// least 90 % of trials (the U test's alpha is 5 %).
func TestAA(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	flagged := 0
	const trials = 200
	for range trials {
		d := Compare(noisy(rng, 10, 1000, 0.05), noisy(rng, 10, 1000, 0.05))
		if d.Significant {
			flagged++
		}
	}
	if flagged > trials/10 {
		t.Errorf("A/A flagged %d of %d trials as different", flagged, trials)
	}
}

// TestDetects10Percent: a 10 % drop with 5 % noise and 10 repeats is shown
// every time, with the right sign and size.
func TestDetects10Percent(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		d := Compare(noisy(rng, 10, 1000, 0.05), noisy(rng, 10, 900, 0.05))
		if !d.Significant || d.Pct > -4 || d.Pct < -16 || !strings.HasPrefix(d.String(), "-") {
			t.Fatalf("10%% drop: %+v (%s)", d, d)
		}
		if !(d.PctLo <= d.Pct && d.Pct <= d.PctHi) {
			t.Fatalf("interval [%v, %v] does not hold %v", d.PctLo, d.PctHi, d.Pct)
		}
	}
}

func TestDeltaString(t *testing.T) {
	if s := (Delta{Significant: false, Pct: -30}).String(); s != "~" {
		t.Errorf("not significant = %q, want ~", s)
	}
	if s := (Delta{Significant: true, Pct: -35.2}).String(); s != "-35.20%" {
		t.Errorf("= %q", s)
	}
}

func TestMinSamplesAt(t *testing.T) {
	for _, tc := range []struct {
		confidence float64
		want       int
	}{{0.95, MinSamples}, {0.99, 8}, {0.90, 5}} {
		if got := MinSamplesAt(tc.confidence); got != tc.want {
			t.Errorf("MinSamplesAt(%v) = %d, want %d", tc.confidence, got, tc.want)
		}
	}
	s := SummarizeAt([]float64{1, 2, 3, 4, 5, 6, 7}, 0.99)
	if !math.IsInf(s.Lo, -1) || len(s.Warnings) == 0 || s.Warnings[0] != "n=7 is too few for a 99% interval of the median; use 8 or more repeats" {
		t.Errorf("n=7 at 99%%: %+v", s)
	}
	if s := SummarizeAt([]float64{1, 2, 3, 4, 5, 6, 7}, 0.95); math.IsInf(s.Lo, 0) || len(s.Warnings) != 0 {
		t.Errorf("n=7 at 95%%: %+v", s)
	}
}

// TestAdjustBH checks the adjustment against R's p.adjust(p, "BH").
func TestAdjustBH(t *testing.T) {
	got := AdjustBH([]float64{0.01, 0.04, math.NaN(), 0.03, 0.005, 0.5})
	// R: p.adjust(c(0.01, 0.04, 0.03, 0.005, 0.5), "BH")
	want := []float64{0.025, 0.05, math.NaN(), 0.05, 0.025, 0.5}
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) || (!math.IsNaN(want[i]) && math.Abs(got[i]-want[i]) > 1e-12) {
			t.Errorf("AdjustBH = %v, want %v", got, want)
			break
		}
	}
	if p := MinPUTest(6, 6); math.Abs(p-2.0/924) > 1e-9 {
		t.Errorf("MinPUTest(6, 6) = %v, want 2/924", p)
	}
}

// TestIntervalNotAvailable: a median interval that does not exist reads
// "n/a (n < 6)", never an infinite one.
func TestIntervalNotAvailable(t *testing.T) {
	s := Summarize([]float64{940, 941, 939, 942, 938})
	if got := formatMbps(s); got != "940.0 ± n/a (n < 6)" {
		t.Errorf("n=5: %q, want \"940.0 ± n/a (n < 6)\"", got)
	}
	if got := formatMbps(Summarize([]float64{940, 941, 939, 942, 938, 940})); strings.Contains(got, "n/a") || strings.Contains(got, "∞") {
		t.Errorf("n=6: %q, want a finite interval", got)
	}
}
