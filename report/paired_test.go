package report

import (
	"math"
	"math/rand/v2"
	"testing"
)

// criticalT are the Wilcoxon signed-rank test's critical values at the
// two-sided 5 % level (the largest T with P(T ≤ T_crit) ≤ 0.025 one-sided)
// for n = 6 … 50, as OEIS A226330 lists them ("Critical values of Wilcoxon
// T test at a 2.5% level of significance (one-tail test)", after Mitic,
// Mathematica Journal 6:3); n = 6 … 25 are also the P = 0.05 column of the
// University of York's table (www.york.ac.uk/depts/maths/tables/wilcoxon.htm).
// (York's P = 0.10 column is marked approximate and is nearest-to-α at
// n = 5, 11, 14 and 16, so it is not held here; tables that print 4 at
// n = 8 use "T < critical".)
var criticalT = map[int]int{
	6: 0, 7: 2, 8: 3, 9: 5, 10: 8, 11: 10, 12: 13, 13: 17, 14: 21, 15: 25,
	16: 29, 17: 34, 18: 40, 19: 46, 20: 52, 21: 58, 22: 65, 23: 73, 24: 81, 25: 89,
	26: 98, 27: 107, 28: 116, 29: 126, 30: 137, 31: 147, 32: 159, 33: 170, 34: 182, 35: 195,
	36: 208, 37: 221, 38: 235, 39: 249, 40: 264, 41: 279, 42: 294, 43: 310, 44: 327, 45: 343,
	46: 361, 47: 378, 48: 396, 49: 415, 50: 434,
}

// untiedCritical is the largest T with P(T ≤ T) ≤ oneSided for n untied
// differences, from SignedRank's own null distribution; -1 when none.
func untiedCritical(n int, oneSided float64) int {
	ranks2 := make([]int, n)
	for i := range ranks2 {
		ranks2[i] = 2 * (i + 1)
	}
	dist := signedRankDist(ranks2)
	crit, cum := -1, 0.0
	for t := 0; 2*t < len(dist); t++ {
		cum += dist[2*t]
		if cum > oneSided {
			break
		}
		crit = t
	}
	return crit
}

func TestSignedRankCriticalValues(t *testing.T) {
	for n, want := range criticalT {
		if got := untiedCritical(n, 0.025); got != want {
			t.Errorf("n=%d: critical T at α=0.05 two-sided = %d, the table says %d", n, got, want)
		}
	}
	if got := untiedCritical(5, 0.025); got != -1 {
		t.Errorf("n=5: critical T at α=0.05 = %d, the table has none (p ≥ 1/16)", got)
	}
	// Through SignedRank itself: with ranks 1 … n and the ranks summing to
	// T negative, p ≤ 0.05 at T = T_crit and above it at T_crit + 1.
	for _, n := range []int{8, 12, 20, 30} {
		crit := criticalT[n]
		for _, tc := range []struct {
			neg  int
			want bool
		}{{crit, true}, {crit + 1, false}} {
			d := make([]float64, n)
			left := tc.neg
			for r := n; r >= 1; r-- {
				d[r-1] = float64(r)
				if r <= left {
					d[r-1] = -float64(r)
					left -= r
				}
			}
			res := SignedRank(d)
			if got := res.P <= 0.05; got != tc.want || !res.Exact || res.Ties {
				t.Errorf("n=%d T=%d: p=%v exact=%v ties=%v; want p ≤ 0.05 %v", n, tc.neg, res.P, res.Exact, res.Ties, tc.want)
			}
		}
	}
}

func TestPairedMinimumP(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want float64
	}{{6, 0.03125}, {8, 0.0078125}, {10, 2.0 / 1024}} {
		d := make([]float64, tc.n)
		for i := range d {
			d[i] = -float64(i + 1)
		}
		if got := SignedRank(d).P; got != tc.want {
			t.Errorf("signed rank, n=%d all negative: p=%v, want %v", tc.n, got, tc.want)
		}
		if got := SignTest(d).P; math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("sign test, n=%d all negative: p=%v, want %v", tc.n, got, tc.want)
		}
		if got := MinPPaired(tc.n); got != tc.want {
			t.Errorf("MinPPaired(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	// 4 comparisons: 8 rounds give 4·2/2⁸ = 0.031 < 0.05, 7 do not.
	if got := RoundsForFamily(4, 0.05); got != 8 {
		t.Errorf("RoundsForFamily(4, 0.05) = %d, want 8", got)
	}
	if got := RoundsForFamily(1, 0.05); got != 6 {
		t.Errorf("RoundsForFamily(1, 0.05) = %d, want 6", got)
	}
}

// TestSignedRankBruteForce holds the exact p, with ties and zeros, against
// counting all 2ⁿ sign patterns: p = P(|W+ − E W+| ≥ |w − E W+|).
func TestSignedRankBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 300 {
		n := 1 + rng.IntN(12)
		d := make([]float64, n)
		for i := range d {
			d[i] = float64(rng.IntN(9) - 4) // small integers: many ties and zeros
			if trial%3 == 0 {
				d[i] = rng.NormFloat64()
			}
		}
		got := SignedRank(d)
		var nz []float64
		for _, v := range d {
			if v != 0 {
				nz = append(nz, v)
			}
		}
		if got.N != len(nz) || got.Zeros != n-len(nz) {
			t.Fatalf("%v: N=%d zeros=%d", d, got.N, got.Zeros)
		}
		// midranks by counting
		rank := func(i int) float64 {
			less, equal := 0, 0
			for _, w := range nz {
				switch {
				case math.Abs(w) < math.Abs(nz[i]):
					less++
				case math.Abs(w) == math.Abs(nz[i]):
					equal++
				}
			}
			return float64(less) + float64(equal+1)/2
		}
		ranks := make([]float64, len(nz))
		var w, sum float64
		for i := range nz {
			ranks[i] = rank(i)
			sum += ranks[i]
			if nz[i] > 0 {
				w += ranks[i]
			}
		}
		mean := sum / 2
		extreme := 0
		for mask := 0; mask < 1<<len(nz); mask++ {
			var s float64
			for i := range nz {
				if mask&(1<<i) != 0 {
					s += ranks[i]
				}
			}
			if math.Abs(s-mean) >= math.Abs(w-mean)-1e-9 {
				extreme++
			}
		}
		want := float64(extreme) / float64(int(1)<<len(nz))
		if math.Abs(got.P-want) > 1e-12 || got.Stat != w {
			t.Fatalf("%v: p=%v W+=%v, counting gives p=%v W+=%v", d, got.P, got.Stat, want, w)
		}
	}
}

// TestSignedRankNormalApproximation: above ExactSignedRankMax the
// approximation, with ties, stays close to the exact distribution.
func TestSignedRankNormalApproximation(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for range 50 {
		d := make([]float64, 80)
		for i := range d {
			d[i] = float64(rng.IntN(40)-18) + 0.5*float64(rng.IntN(2)) // ties, a slight shift
		}
		got := SignedRank(d)
		if got.Exact || !got.Ties {
			t.Fatalf("n=%d: exact=%v ties=%v, want the approximation with ties", got.N, got.Exact, got.Ties)
		}
		var abs []float64
		w2 := 0
		for _, v := range d {
			if v != 0 {
				abs = append(abs, math.Abs(v))
			}
		}
		ranks2, _ := doubledMidranks(abs)
		i := 0
		for _, v := range d {
			if v != 0 {
				if v > 0 {
					w2 += ranks2[i]
				}
				i++
			}
		}
		if exact := exactSignedRankP(signedRankDist(ranks2), w2); math.Abs(got.P-exact) > 0.005 {
			t.Errorf("approximate p=%v, exact %v", got.P, exact)
		}
	}
}

func TestSignTest(t *testing.T) {
	// 8 of 10 nonzero differences positive: 2·P(X ≤ 2) = 2·56/1024.
	d := []float64{1, 2, 3, 4, 5, 6, 7, 8, -1, -2, 0, 0}
	got := SignTest(d)
	if got.N != 10 || got.Zeros != 2 || got.Stat != 8 || math.Abs(got.P-112.0/1024) > 1e-12 {
		t.Errorf("SignTest = %+v, want N=10 zeros=2 positive=8 p=%v", got, 112.0/1024)
	}
	if got := SignTest([]float64{0, 0}); got.P != 1 || got.N != 0 {
		t.Errorf("all zeros: %+v, want p=1", got)
	}
	if got := SignTest([]float64{1, -1}); got.P != 1 {
		t.Errorf("balanced: p=%v, want 1", got.P)
	}
}

// TestPairedTestsUnderH0AndShift: with differences symmetric about zero,
// P(p ≤ α) stays at α (up to the discreteness and sampling noise) for
// both tests; with a shift of one standard deviation, 20 pairs show it
// nearly always.
func TestPairedTestsUnderH0AndShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const trials, n = 4000, 20
	for _, test := range []struct {
		name string
		f    func([]float64) PairedTest
	}{{"signrank", SignedRank}, {"sign", SignTest}} {
		below := map[float64]int{}
		alphas := []float64{0.05, 0.1, 0.2, 0.5}
		shifted := 0
		for range trials {
			d := make([]float64, n)
			s := make([]float64, n)
			for i := range d {
				d[i] = rng.NormFloat64()
				s[i] = d[i] + 1
			}
			p := test.f(d).P
			for _, a := range alphas {
				if p <= a {
					below[a]++
				}
			}
			if test.f(s).P < 0.05 {
				shifted++
			}
		}
		for _, a := range alphas {
			frac := float64(below[a]) / trials
			sd := math.Sqrt(a * (1 - a) / trials)
			// The sign test's p is coarse at n=20 (steps of C(20,k)/2²⁰):
			// P(p ≤ α) is at most α, and may be well below it.
			lo := a - 4*sd - 0.01
			if test.name == "sign" {
				lo = a / 3
			}
			if frac > a+4*sd || frac < lo {
				t.Errorf("%s under H0: P(p ≤ %v) = %.3f", test.name, a, frac)
			}
		}
		if min := 0.9; float64(shifted)/trials < min {
			t.Errorf("%s: a shift of 1 sd with %d pairs shown in %d of %d trials", test.name, n, shifted, trials)
		}
	}
}

// BenchmarkSignedRank is the exact test at its largest n, with ties (the
// distribution computed for the tie pattern) and without (the one for n,
// computed once): the cost of one gated row of a paired comparison.
func BenchmarkSignedRank(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	ties := make([]float64, ExactSignedRankMax)
	untied := make([]float64, ExactSignedRankMax)
	for i := range ties {
		ties[i] = float64(rng.IntN(40) - 20)
		untied[i] = rng.NormFloat64()
	}
	b.Run("ties", func(b *testing.B) {
		for b.Loop() {
			SignedRank(ties)
		}
	})
	b.Run("untied", func(b *testing.B) {
		for b.Loop() {
			SignedRank(untied)
		}
	})
}
