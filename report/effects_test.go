package report

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fwab/fwab/internal/golden"
)

// TestEffectsT730: the T730 matrix never changes offload.checksum alone (it
// goes off with inline IPS), so no effect is credited to it; the steps are
// the review's ladder.
func TestEffectsT730(t *testing.T) {
	run := loadRun(t, t730Run())
	ef := NewEffects(run, Confidence)
	if ef == nil || ef.Kind != Steps {
		t.Fatalf("effects = %+v, want steps", ef)
	}
	var got []string
	for _, r := range ef.Rows {
		got = append(got, r.stepName()+" "+strings.Join(r.Changed, ","))
		if slices.Equal(r.Changed, []string{"offload.checksum=off"}) {
			t.Errorf("an effect is credited to offload.checksum=off alone: %+v", r)
		}
	}
	want := []string{"0 → 1 blocklist=on", "1 → 2 ids@lan=ids", "2 → 3 ids@lan=ips-inline,offload.checksum=off"}
	if !slices.Equal(got, want) {
		t.Errorf("steps %q, want %q", got, want)
	}
	if last := ef.Rows[2]; !strings.Contains(last.Label, "(together)") || last.Pct[0] > -25 || last.Pct[0] < -40 {
		t.Errorf("inline IPS step: %+v, want about -32%% labelled together", last)
	}
	chart, err := effectChart(ef)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(chart.SVG, ">offload.checksum=off<") || !strings.Contains(chart.SVG, "offload.checksum=off (together)") {
		t.Error("the effect chart shows offload.checksum=off alone, or not the step it changed in")
	}
	if chart.Caption == "" || chart.Caption == chart.Title {
		t.Errorf("caption %q repeats the title or is empty", chart.Caption)
	}
}

// TestEffectsFactorial: a full factorial shows main effects, and says so.
func TestEffectsFactorial(t *testing.T) {
	run := loadRun(t, factorialRun(5))
	ef := NewEffects(run, Confidence)
	if ef == nil || ef.Kind != MainEffects || !strings.Contains(ef.Title(), "full factorial") {
		t.Fatalf("effects = %+v, want main effects", ef)
	}
	byLabel := map[string]Effect{}
	for _, r := range ef.Rows {
		byLabel[r.Label] = r
	}
	if r := byLabel["rules@lan=1000"]; r.Pairs != 2 || r.Pct[0] > -25 || r.Pct[0] < -35 {
		t.Errorf("rules@lan=1000: %+v, want about -30%% over 2 pairs", r)
	}
	if r := byLabel["nat.outbound=disabled"]; r.Pairs != 2 || math.Abs(r.Pct[0]) > 3 {
		t.Errorf("nat.outbound=disabled: %+v, want about 0 over 2 pairs", r)
	}
	// One point less and the design is no longer balanced: steps.
	part := factorialRun(5)
	part.Points = part.Points[:3]
	if ef := NewEffects(loadRun(t, part), Confidence); ef.Kind != Steps {
		t.Errorf("3 of 4 points of a 2×2: %s effects, want steps", ef.Kind)
	}
	var b bytes.Buffer
	if err := Write(&b, run, JSON, Options{}); err != nil {
		t.Fatal(err)
	}
	golden.File(t, "factorial.json", b.Bytes())
}

// TestWidthWarning: a run with adaptive repeats names the points whose
// interval stayed wider than the target; one with fixed repeats says
// nothing.
func TestWidthWarning(t *testing.T) {
	r := t730Run()
	r.Points[2].FailEvery = 0
	r.Spec += "repeats: {min: 6, max: 7, width: 5%}\n"
	r.Noise = 0.01
	run := synthetic(t, r, 1)
	// Point 3 noisier than the rest: ±40 % as the demo's worst.
	for _, s := range run.Points[3].Probes {
		for i := range s.Mbps {
			s.Mbps[i] *= 1 + 0.4*float64(i%3-1)
		}
	}
	if got := Wider(run, 5); !slices.Equal(got, []int{3}) {
		t.Errorf("Wider = %v, want [3]", got)
	}
	tab := NewTable(run, Options{})
	if !slicesContainsPrefix(tab.Warnings, "repeats: 1 of 4 points did not reach the target width ±5% (repeats.max 7): 3 (±") {
		t.Errorf("warnings %q lack the point that did not reach the width", tab.Warnings)
	}
	r.Spec = t730Run().Spec
	if tab := NewTable(synthetic(t, r, 1), Options{}); slicesContainsPrefix(tab.Warnings, "repeats:") {
		t.Errorf("fixed repeats: %q", tab.Warnings)
	}
}
