package report

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

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
