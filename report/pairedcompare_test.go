package report

import (
	"bytes"
	"encoding/xml"
	"slices"
	"strings"
	"testing"

	"github.com/fwab/fwab/internal/golden"
	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// rulesRun is one run over rules@lan × ids@lan whose rounds drift by
// roundNoise (a factor every point of a round shares) with 1 % noise of
// their own; rules@lan=1000 costs slowdown.
func rulesRun(seed uint64, repeats int, roundNoise, slowdown float64) reporttest.Run {
	return reporttest.Run{
		Firmware: "2.7.2-RELEASE",
		Spec:     "name: rules\naxes:\n  ids@lan: [off, ips-inline]\n  rules@lan: [0, 1000]\n",
		Seed:     seed, Repeats: repeats, Noise: 0.01, RoundNoise: roundNoise,
		Probes: []reporttest.Probe{{Name: "up", Direction: "up", Mbps: 940}, {Name: "down", Direction: "down", Mbps: 930}},
		Points: []reporttest.Point{
			{Knobs: map[string]string{"ids@lan": "off", "rules@lan": "0"}, Retransmits: -1},
			{Knobs: map[string]string{"ids@lan": "off", "rules@lan": "1000"}, Factor: 1 - slowdown, Retransmits: -1},
			{Knobs: map[string]string{"ids@lan": "ips-inline", "rules@lan": "0"}, Factor: 0.65, Retransmits: -1},
			{Knobs: map[string]string{"ids@lan": "ips-inline", "rules@lan": "1000"}, Factor: 0.65 * (1 - slowdown), Retransmits: -1},
		},
	}
}

// TestCompareAxisPaired: rounds that drift by 8 % hide a 5 % cost from two
// independent runs' U test, and pairing by round within the run finds it
// at every point and probe; with no cost, nothing is flagged.
func TestCompareAxisPaired(t *testing.T) {
	for _, tc := range []struct {
		name     string
		slowdown float64
		test     Test
		want     int
	}{{"aa", 0, SignRank, 0}, {"five-percent", 0.05, SignRank, 4}, {"five-percent-sign", 0.05, Sign, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			r := synthetic(t, rulesRun(3, 8, 0.08, tc.slowdown), 1)
			c, err := CompareAxis(r, "rules", "", CompareOptions{Threshold: 3, Test: tc.test})
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Regressions(); got != tc.want {
				t.Errorf("regressions = %d, want %d", got, tc.want)
			}
			if c.Family != 4 || !c.Design.Paired || c.Design.Base != "0" || c.Design.Rounds != 8 {
				t.Errorf("family %d, design %+v; want 4 rows paired against rules@lan=0 over 8 rounds", c.Family, c.Design)
			}
			for _, row := range c.Rows {
				if row.Pairs != 8 || row.Value != "1000" {
					t.Errorf("%s %s %s: %d pairs against %q", row.Probe, row.Point, row.Metric, row.Pairs, row.Value)
				}
			}
			var text, junit bytes.Buffer
			if err := c.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), "design: paired by round within run 1, 8 rounds (rules@lan=0 against the others)") {
				t.Errorf("text does not name the design:\n%s", text.String())
			}
			if err := c.WriteJUnit(&junit); err != nil {
				t.Fatal(err)
			}
			var parsed junitSuites
			if err := xml.Unmarshal(junit.Bytes(), &parsed); err != nil {
				t.Fatal(err)
			}
			if parsed.Tests != 4 || parsed.Failures != tc.want {
				t.Errorf("JUnit tests=%d failures=%d, want 4 and %d", parsed.Tests, parsed.Failures, tc.want)
			}
			golden.File(t, "compare-axis-"+tc.name+".txt", text.Bytes())
		})
	}
	// The same cost measured as two runs, one without the rules and one
	// with them, is lost in the rounds' drift.
	a := rulesRun(4, 8, 0.08, 0)
	b := rulesRun(5, 8, 0.08, 0)
	b.Slowdown = 0.05
	c, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c.Design.Paired || c.Regressions() == len(c.Rows) {
		t.Errorf("independent runs: design %v, %d of %d rows flagged; want fewer than all", c.Design, c.Regressions(), len(c.Rows))
	}
}

// TestCompareAxisRefuses: bad axes, too few rounds and unpaired tests are
// refused with the fix.
func TestCompareAxisRefuses(t *testing.T) {
	r := synthetic(t, rulesRun(6, 8, 0.02, 0), 1)
	for _, tc := range []struct {
		axis, base string
		opts       CompareOptions
		want       string
	}{
		{"nat.outbound", "", CompareOptions{}, "axis nat.outbound is not a knob of run 1; its axes are ids@lan, rules@lan"},
		{"rules", "500", CompareOptions{}, "--base 500: axis rules@lan of run 1 takes 0, 1000"},
		{"rules", "", CompareOptions{Test: UTest}, "a comparison paired by round takes signrank or sign"},
	} {
		if _, err := CompareAxis(r, tc.axis, tc.base, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CompareAxis(%s, %q): %v; want %q", tc.axis, tc.base, err, tc.want)
		}
	}
	one := rulesRun(6, 8, 0.02, 0)
	one.Points = one.Points[:1]
	one.Points = append(one.Points, reporttest.Point{Knobs: map[string]string{"ids@lan": "ips-inline", "rules@lan": "0"}, Retransmits: -1})
	if _, err := CompareAxis(synthetic(t, one, 2), "rules", "", CompareOptions{}); err == nil || !strings.Contains(err.Error(), "axis rules@lan has one value (0) in run 2") {
		t.Errorf("one value: %v", err)
	}
	// 6 rounds: 2/2⁶ · 4 comparisons = 0.125, nothing can be flagged.
	six := synthetic(t, rulesRun(7, 6, 0.02, 0.2), 3)
	if _, err := CompareAxis(six, "rules", "", CompareOptions{}); err == nil || !strings.Contains(err.Error(), "Measure 8 or more rounds") {
		t.Errorf("6 rounds over 4 comparisons: %v; want a refusal naming 8 rounds", err)
	}
	if _, err := CompareRuns(r, six, CompareOptions{Test: SignRank}); err == nil || !strings.Contains(err.Error(), "are independent") {
		t.Errorf("signrank over two runs: %v", err)
	}
}

// TestCompareAxisDropsUnpairedRounds: a round one side lacks is dropped
// and counted.
func TestCompareAxisDropsUnpairedRounds(t *testing.T) {
	info, points, samples := reporttest.Generate(rulesRun(8, 9, 0.02, 0.1))
	info.ID = 1
	samples = slices.DeleteFunc(samples, func(x store.Sample) bool { return x.Point == 1 && x.Probe == "up" && x.Round == 4 })
	r, err := build(info, points, samples)
	if err != nil {
		t.Fatal(err)
	}
	c, err := CompareAxis(r, "rules@lan", "0", CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range c.Rows {
		want := 9
		if row.Point == "ids@lan=off" && row.Probe == "up" {
			want = 8
		}
		if row.Pairs != want {
			t.Errorf("%s %s: %d pairs, want %d", row.Probe, row.Point, row.Pairs, want)
		}
	}
	if !slices.Contains(c.Warnings, "1 rounds measured on one side only were dropped from the pairs ('fwab runs show 1' lists the samples)") {
		t.Errorf("warnings %q lack the dropped round", c.Warnings)
	}
}

// TestCompareDrift: run A's baseline measured 6 % slower at its end than
// in its rounds; B is 5 % slower than A everywhere. The U test shows the
// change, but it is within A's drift: no regression, said in the row and
// a warning. A 10 % slowdown is beyond it and still fails.
func TestCompareDrift(t *testing.T) {
	mk := func(seed uint64, slowdown, drift float64) reporttest.Run {
		r := rulesRun(seed, 8, 0, 0)
		r.Noise, r.Slowdown, r.EndBaseline, r.EndDrift = 0.01, slowdown, true, drift
		return r
	}
	a := synthetic(t, mk(9, 0, 0.06), 1)
	if d := a.Drifts(); len(d) != 2 || d[0].Metric != Throughput || d[0].Change > -5 || d[0].Change < -7 {
		t.Fatalf("drift of run 1: %+v; want about -6%% on both probes", d)
	}
	if n := a.Points[0].Probes["up"].Mbps; len(n) != 8 {
		t.Fatalf("the drift check counted among the baseline's samples: %d", len(n))
	}
	if w := NewTable(a, Options{}).Warnings; !slices.ContainsFunc(w, func(s string) bool { return strings.HasPrefix(s, "run 1 drifted up -6.15% (941.5 → 883.6 Mbit/s)") }) {
		t.Errorf("the report of run 1 does not state its drift: %q", w)
	}
	c, err := CompareRuns(a, synthetic(t, mk(10, 0.05, 0.01), 2), CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	within := 0
	for _, r := range c.Rows {
		if r.Gated && r.WithinDrift {
			within++
		}
	}
	if c.Regressions() != 0 || within != 8 {
		t.Errorf("5 %% slower within 6 %% drift: %d regressions, %d rows within drift; want 0 and 8", c.Regressions(), within)
	}
	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"within drift 6.2%", "run 1 drifted up -6.15% (941.5 → 883.6 Mbit/s)", "8 changes beyond the threshold are no larger than the drift"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	golden.File(t, "compare-drift.txt", text.Bytes())
	c, err = CompareRuns(a, synthetic(t, mk(11, 0.10, 0.01), 3), CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	if c.Regressions() != 8 {
		t.Errorf("10 %% slower beyond 6 %% drift: %d regressions, want 8", c.Regressions())
	}
}

// TestCompareAxisConnectRate: a connect probe has no throughput; paired by
// round, its connection rate is what the gate judges.
func TestCompareAxisConnectRate(t *testing.T) {
	r := synthetic(t, reporttest.Run{Seed: 5, Repeats: 8, Noise: 0.02, RoundNoise: 0.05,
		Spec:   "axes:\n  filter: [on, off]\n",
		Probes: []reporttest.Probe{{Name: "cps", Direction: "up", Connects: 5000}},
		Points: []reporttest.Point{{Knobs: map[string]string{"filter": "on"}, Factor: 0.2}, {Knobs: map[string]string{"filter": "off"}}}}, 1)
	c, err := CompareAxis(r, "filter", "off", CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Metrics, []Metric{ConnectRate}) || c.Regressions() != 1 || c.Family != 1 {
		t.Errorf("gated %v, %d regressions over %d; want the connection rate, 1 of 1", c.Metrics, c.Regressions(), c.Family)
	}
}
