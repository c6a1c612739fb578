package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/perf/benchmath"

	"github.com/fwab/fwab/store"
)

// history is 30 runs of one value each, uniform noise of ±2 %, with a step
// of step (0.05: 5 % slower) from run 16 on (1-based), or none.
func history(seed uint64, step float64) [][]float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	runs := make([][]float64, 30)
	for i := range runs {
		level := 940.0
		if step != 0 && i >= 15 {
			level *= 1 - step
		}
		runs[i] = []float64{level * (1 + 0.02*(2*rng.Float64()-1))}
	}
	return runs
}

// The detector's validation: a 5 % step at run 16 is found at run 16 ± 1 in
// at least 90 of 100 seeds, and a flat history is flagged in at most 5.
func TestChangePointsSynthetic(t *testing.T) {
	found, flat := 0, 0
	for seed := range uint64(100) {
		for _, c := range ChangePoints(history(seed, 0.05), TrendOptions{}) {
			if run := c.Index + 1; run >= 15 && run <= 17 {
				found++
				break
			}
		}
		if len(ChangePoints(history(1000+seed, 0), TrendOptions{})) > 0 {
			flat++
		}
	}
	t.Logf("5 %% step found at run 16±1 in %d of 100 seeds; flat history flagged in %d of 100", found, flat)
	if found < 90 {
		t.Errorf("the 5 %% step was found at run 16±1 in %d of 100 seeds, want ≥ 90", found)
	}
	if flat > 5 {
		t.Errorf("a flat history was flagged in %d of 100 seeds, want ≤ 5", flat)
	}
}

func TestChangePointsEdges(t *testing.T) {
	if got := ChangePoints(nil, TrendOptions{}); len(got) != 0 {
		t.Errorf("ChangePoints(no runs) = %v", got)
	}
	short := history(1, 0.2)[:8] // fewer than two windows
	if got := ChangePoints(short, TrendOptions{}); len(got) != 0 {
		t.Errorf("ChangePoints(8 runs) = %v, want none: too few for two windows", got)
	}
	// A step up is a change too, and the change is signed.
	up := history(3, -0.10)
	got := ChangePoints(up, TrendOptions{})
	if len(got) != 1 || got[0].DeltaPct < 5 {
		t.Errorf("ChangePoints(10 %% faster) = %+v, want one positive change", got)
	}
}

func TestTrendTextAndHTML(t *testing.T) {
	var runs []store.HistoryRun
	t0 := time.Date(2026, 1, 1, 2, 0, 0, 0, time.UTC)
	for i, v := range history(5, 0.08) {
		runs = append(runs, store.HistoryRun{ID: int64(i + 1), Created: t0.Add(time.Duration(i) * 24 * time.Hour), Testbed: "lab@0123456789ab",
			Firmware: "2.7.2-RELEASE", Knobs: map[int]string{0: `{"ids@lan":"off"}`},
			Measured: []store.Measured{{Point: 0, Probe: "up", BitsPerSecond: []float64{v[0] * 1e6}}, {Point: 0, Probe: "down", BitsPerSecond: []float64{v[0] * 1e6}}}})
	}
	tr, err := NewTrend("lab@0123456789ab", runs, TrendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Runs != 30 || len(tr.Series) != 2 || tr.Changes() != 2 {
		t.Fatalf("NewTrend: %d runs, %d series, %d changes; want 30, 2, 2", tr.Runs, len(tr.Series), tr.Changes())
	}
	var text, html strings.Builder
	if err := tr.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ids@lan=off") || !strings.Contains(text.String(), "2026-01-16") {
		t.Errorf("WriteText:\n%s", text.String())
	}
	if err := tr.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(html.String(), "<svg"); n != 2 {
		t.Errorf("WriteHTML has %d charts, want 2", n)
	}
}

// changePointsByPooling is ChangePoints as first written: each window's
// values pooled and sorted. ChangePoints must find exactly what it finds.
func changePointsByPooling(runs [][]float64, o TrendOptions) []Change {
	o = o.withDefaults()
	w := o.Window
	th := benchmath.Thresholds{CompareAlpha: o.Alpha}
	var candidates []Change
	for i := w; i+w <= len(runs); i++ {
		before, after := pool(nil, runs[i-w:i]), pool(nil, runs[i:i+w])
		mb, ma := middle(before), middle(after)
		if math.IsNaN(mb) || math.IsNaN(ma) || mb == 0 {
			continue
		}
		delta := 100 * (ma - mb) / mb
		if math.Abs(delta) < o.Threshold {
			continue
		}
		c := benchmath.AssumeNothing.Compare(benchmath.NewSample(before, &th), benchmath.NewSample(after, &th))
		if c.P > o.Alpha {
			continue
		}
		candidates = append(candidates, Change{Index: i, Before: mb, After: ma, DeltaPct: delta, P: c.P})
	}
	return pickChanges(candidates, w)
}

// ChangePoints takes each window's median by merging its runs' sorted
// values; that must give the changes, medians and p-values of pooling and
// sorting every window, on histories with several values a run (some
// runs with none, repeated values, odd and even windows), and leave the
// runs as they were.
func TestChangePointsSameAsPooling(t *testing.T) {
	found := 0
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 11))
		runs := make([][]float64, 5+rng.IntN(40))
		step := 5 + rng.IntN(len(runs))
		for i := range runs {
			level := 940.0
			if i >= step {
				level *= 0.9 + 0.2*rng.Float64()
			}
			runs[i] = make([]float64, rng.IntN(5))
			for k := range runs[i] {
				runs[i][k] = math.Round(level*(1+0.02*(2*rng.Float64()-1))*4) / 4 // ties
			}
		}
		o := TrendOptions{Window: 2 + rng.IntN(6), Threshold: 1 + 4*rng.Float64()}
		before := fmt.Sprint(runs)
		got, want := ChangePoints(runs, o), changePointsByPooling(runs, o)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d, %+v: ChangePoints = %+v; pooling finds %+v", seed, o, got, want)
		}
		if after := fmt.Sprint(runs); after != before {
			t.Fatalf("seed %d: ChangePoints changed its runs", seed)
		}
		found += len(got)
	}
	t.Logf("%d changes in 100 histories", found)
	if found < 30 {
		t.Fatalf("only %d changes in 100 histories: the comparison shows little", found)
	}
}
