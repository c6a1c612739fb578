package report

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"gonum.org/v1/gonum/stat/distuv"
)

// Neither gonum nor x/perf has a test of paired differences (benchmath has
// the Mann-Whitney U test only), so the two below are written here, once.

// ExactSignedRankMax is the largest number of nonzero differences for
// which SignedRank computes the exact null distribution; above it, the
// normal approximation with tie and continuity correction.
const ExactSignedRankMax = 50

// PairedTest is the outcome of a test of paired differences.
type PairedTest struct {
	N     int     // nonzero differences the test used
	Zeros int     // differences of exactly zero, dropped
	Stat  float64 // W+ (sum of the positive differences' ranks) or, for the sign test, the positive differences
	P     float64 // two-sided; 1 when N is 0
	Exact bool    // P is from the exact null distribution
	Ties  bool    // some nonzero |differences| are equal (midranks)
}

// SignedRank is the two-sided Wilcoxon signed-rank test of the hypothesis
// that the differences are symmetric about zero.
//
// Zeros are dropped (Wilcoxon's own rule, R's wilcox.test and SciPy's
// default zero_method="wilcox"): a round where both sides measured the same
// says nothing about the direction. Equal |differences| get their midrank.
// Up to ExactSignedRankMax nonzero differences the p-value is exact: the
// null distribution of W+ is that of the sum of the observed ranks each
// taken with probability ½ (every sign pattern equally likely), counted
// over twice the ranks so that midranks are integers. With ties this is
// the exact distribution conditional on the observed tie pattern, the
// permutation test of the signs, not the tabulated tie-free one. Above
// that, the normal approximation with the tie correction of the variance
// and a continuity correction of ½.
func SignedRank(d []float64) PairedTest {
	var abs []float64
	pos := map[int]bool{}
	t := PairedTest{}
	for _, v := range d {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			continue
		case v == 0:
			t.Zeros++
			continue
		}
		if v > 0 {
			pos[len(abs)] = true
		}
		abs = append(abs, math.Abs(v))
	}
	t.N = len(abs)
	if t.N == 0 {
		t.P, t.Exact = 1, true
		return t
	}
	ranks2, tieTerm := doubledMidranks(abs)
	t.Ties = tieTerm > 0
	w2 := 0 // 2·W+
	for i, r := range ranks2 {
		if pos[i] {
			w2 += r
		}
	}
	t.Stat = float64(w2) / 2
	if t.N <= ExactSignedRankMax {
		dist := untiedDist(t.N)
		if t.Ties {
			dist = signedRankDist(ranks2)
		}
		t.P, t.Exact = exactSignedRankP(dist, w2), true
		return t
	}
	n := float64(t.N)
	mean := n * (n + 1) / 4
	variance := n*(n+1)*(2*n+1)/24 - tieTerm/48
	z := math.Max(0, math.Abs(t.Stat-mean)-0.5) / math.Sqrt(variance)
	t.P = math.Min(1, 2*distuv.UnitNormal.Survival(z))
	return t
}

// doubledMidranks ranks v (all > 0) from 1, equal values sharing their
// midrank, and returns twice each rank (an integer) and Σ(t³ − t) over
// the groups of t equal values.
func doubledMidranks(v []float64) ([]int, float64) {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(v[a], v[b]) })
	ranks2 := make([]int, len(v))
	var tieTerm float64
	for i := 0; i < len(idx); {
		j := i + 1
		for j < len(idx) && v[idx[j]] == v[idx[i]] {
			j++
		}
		// positions i+1 … j share the midrank (i+1+j)/2
		for k := i; k < j; k++ {
			ranks2[idx[k]] = i + 1 + j
		}
		if n := float64(j - i); n > 1 {
			tieTerm += n*n*n - n
		}
		i = j
	}
	return ranks2, tieTerm
}

// signedRankDist is the null distribution of 2·W+ for the doubled ranks:
// dist[s] = P(2·W+ = s) when each rank counts with probability ½.
func signedRankDist(ranks2 []int) []float64 {
	total := 0
	for _, r := range ranks2 {
		total += r
	}
	dist := make([]float64, total+1)
	dist[0] = 1
	top := 0
	for _, r := range ranks2 {
		for s := top; s >= 0; s-- {
			if dist[s] != 0 {
				dist[s+r] += dist[s] / 2
				dist[s] /= 2
			}
		}
		top += r
	}
	return dist
}

var untiedCache sync.Map // n → []float64

// untiedDist is signedRankDist of the ranks 1 … n without ties, computed
// once per n.
func untiedDist(n int) []float64 {
	if d, ok := untiedCache.Load(n); ok {
		return d.([]float64)
	}
	ranks2 := make([]int, n)
	for i := range ranks2 {
		ranks2[i] = 2 * (i + 1)
	}
	d := signedRankDist(ranks2)
	untiedCache.Store(n, d)
	return d
}

// exactSignedRankP is the two-sided p of 2·W+ = w2 under dist: twice the
// smaller tail, at most 1. The distribution is symmetric about half the
// ranks' sum, so the smaller tail is the one w2 lies in.
func exactSignedRankP(dist []float64, w2 int) float64 {
	total := len(dist) - 1
	lo := min(w2, total-w2)
	var tail float64
	for s := 0; s <= lo; s++ {
		tail += dist[s]
	}
	return math.Min(1, 2*tail)
}

// SignTest is the two-sided exact sign test: under the hypothesis that a
// difference is as likely positive as negative, the count of positive
// ones among the N nonzero differences is Binomial(N, ½). Zeros are
// dropped, as in SignedRank.
func SignTest(d []float64) PairedTest {
	t := PairedTest{Exact: true}
	positive := 0
	for _, v := range d {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
		case v == 0:
			t.Zeros++
		default:
			t.N++
			if v > 0 {
				positive++
			}
		}
	}
	t.Stat = float64(positive)
	if t.N == 0 {
		t.P = 1
		return t
	}
	k := min(positive, t.N-positive)
	t.P = math.Min(1, 2*distuv.Binomial{N: float64(t.N), P: 0.5}.CDF(float64(k)))
	return t
}

// MinPPaired is the smallest two-sided p the signed-rank and the sign test
// can give with n nonzero differences, all of one sign: 2/2ⁿ (0.03125 at
// 6, 0.0078125 at 8).
func MinPPaired(n int) float64 {
	if n <= 0 {
		return 1
	}
	return math.Min(1, math.Ldexp(2, -n))
}

// RoundsForFamily is the fewest paired rounds with which a paired test can
// flag one comparison alone in a family of m after Benjamini–Hochberg
// adjustment: MinPPaired(n)·m < alpha. 0 when no n up to 1000 can.
func RoundsForFamily(m int, alpha float64) int {
	for n := 1; n <= 1000; n++ {
		if MinPPaired(n)*float64(m) < alpha {
			return n
		}
	}
	return 0
}
