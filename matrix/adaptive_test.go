package matrix

import (
	"context"
	"slices"
	"strings"
	"testing"
)

const adaptiveSpec = `
axes:
  rules@lan: [0, 100, 200]
probes:
  - {name: up, direction: up, duration: 1s}
repeats: {min: 3, max: 6, width: 5%}
order: as-written
`

func TestParseRepeats(t *testing.T) {
	s, err := Parse(strings.NewReader(adaptiveSpec))
	if err != nil {
		t.Fatal(err)
	}
	if s.Repeats != 3 || !s.Adaptive() || s.RepeatsSpec.Max != 6 || s.RepeatsSpec.Width != 5 {
		t.Errorf("repeats {min: 3, max: 6, width: 5%%}: Repeats %d, %+v, adaptive %v", s.Repeats, s.RepeatsSpec, s.Adaptive())
	}
	plain, err := Parse(strings.NewReader(strings.Replace(adaptiveSpec, "{min: 3, max: 6, width: 5%}", "4", 1)))
	if err != nil || plain.Repeats != 4 || plain.Adaptive() {
		t.Errorf("repeats: 4: %v, %+v", err, plain)
	}
	for _, tc := range []struct{ repeats, want string }{
		{"{min: 3, max: 6}", "give width"},
		{"{min: 3, max: 6, width: 0%}", "repeats.width"},
		{"{min: 3, max: 6, width: five}", "repeats.width"},
		{"{min: 8, max: 6, width: 5%}", "repeats.max: 6 must be at least repeats.min (8)"},
		{"{min: 3, most: 6, width: 5%}", `repeats key "most" is not one of min, max, width`},
		{"[3, 6]", "give a number"},
	} {
		_, err := Parse(strings.NewReader(strings.Replace(adaptiveSpec, "{min: 3, max: 6, width: 5%}", tc.repeats, 1)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("repeats: %s: %v, want an error with %q", tc.repeats, err, tc.want)
		}
	}
}

// TestAdaptiveRepeats: after the minimum rounds the sweep measures the
// points still too wide, with the baseline, until none is or the maximum.
func TestAdaptiveRepeats(t *testing.T) {
	f := newSweep(t, adaptiveSpec)
	var asked []int // the rounds done when the sweep asked
	f.sweep.Wider = func(ctx context.Context, run int64, width float64) ([]int, error) {
		samples, err := f.st.Samples(ctx, run)
		if err != nil {
			return nil, err
		}
		asked = append(asked, len(samples))
		if width != 5 {
			t.Errorf("width %v, want 5", width)
		}
		// Point 2 stays wide for two extra rounds, point 1 for one.
		switch len(asked) {
		case 1:
			return []int{1, 2}, nil
		case 2:
			return []int{2}, nil
		}
		return nil, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	perRound := map[int][]int{}
	for _, s := range samples {
		perRound[s.Round] = append(perRound[s.Round], s.Point)
	}
	for r, pts := range perRound {
		slices.Sort(pts)
		var want []int
		switch r {
		case 0, 1, 2:
			want = []int{0, 1, 2}
		case 3:
			want = []int{0, 1, 2} // baseline 0 with the wide 1 and 2
		case 4:
			want = []int{0, 2}
		}
		if !slices.Equal(pts, want) {
			t.Errorf("round %d measured points %v, want %v", r, pts, want)
		}
	}
	if len(perRound) != 5 || !slices.Equal(asked, []int{9, 12, 14}) {
		t.Errorf("%d rounds; asked after %v samples; want 5 rounds, asked after 9, 12, 14", len(perRound), asked)
	}

	// The maximum bounds the rounds however wide the points stay.
	f = newSweep(t, adaptiveSpec)
	f.sweep.Wider = func(context.Context, int64, float64) ([]int, error) { return []int{2}, nil }
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	if samples, _ := f.st.Samples(t.Context(), f.sweep.Run); len(samples) != 3*3+3*2 {
		t.Errorf("%d samples, want 15: 3 rounds of 3 points, then 3 of the wide point and the baseline", len(samples))
	}
}
