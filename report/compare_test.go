package report

import (
	"bytes"
	"encoding/xml"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/golden"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// firmwarePair is a baseline run and a rerun after an upgrade that made
// every point slower by slowdown; the rerun lost the IDS point and gained a
// new one, which are listed and not compared.
func firmwarePair(t *testing.T, slowdown float64) (*Run, *Run) {
	a := reporttest.T730(11, 0)
	b := reporttest.T730(12, slowdown)
	b.Firmware = "2.8.0-RELEASE"
	b.Points[2].Knobs = map[string]string{"blocklist": "on", "ids@lan": "ids", "offload.checksum": "off", "offload.tso": "off"}
	return synthetic(t, a, 1), synthetic(t, b, 2)
}

func TestCompareRuns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		slowdown  float64
		opts      CompareOptions
		wantRegr  int
		wantLines []string
	}{
		{"aa", 0, CompareOptions{Threshold: 3}, 0, []string{"no regression"}},
		{"ten-percent", 0.10, CompareOptions{Threshold: 3}, 6, []string{"6 regressions", "REGRESSION"}},
		{"ten-percent-high-threshold", 0.10, CompareOptions{Threshold: 15}, 0, []string{"no regression"}},
		{"ten-percent-ttest", 0.10, CompareOptions{Threshold: 3, Test: TTest, Metrics: []Metric{Throughput, DUTCPU}}, 6, []string{"Welch's t-test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := firmwarePair(t, tc.slowdown)
			c, err := CompareRuns(a, b, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Regressions(); got != tc.wantRegr {
				t.Errorf("regressions = %d, want %d", got, tc.wantRegr)
			}
			if len(c.OnlyA) != 1 || len(c.OnlyB) != 1 {
				t.Errorf("only in A %q, only in B %q; want one each", c.OnlyA, c.OnlyB)
			}
			var text, junit bytes.Buffer
			if err := c.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			for _, l := range tc.wantLines {
				if !strings.Contains(text.String(), l) {
					t.Errorf("text lacks %q:\n%s", l, text.String())
				}
			}
			if err := c.WriteJUnit(&junit); err != nil {
				t.Fatal(err)
			}
			var parsed junitSuites
			if err := xml.Unmarshal(junit.Bytes(), &parsed); err != nil {
				t.Fatalf("JUnit XML does not parse: %v", err)
			}
			// 3 matched points × 2 probes, plus 2 skipped unmatched points.
			if parsed.Tests != 8 || parsed.Skipped != 2 || parsed.Failures != tc.wantRegr {
				t.Errorf("JUnit tests=%d skipped=%d failures=%d, want 8, 2, %d", parsed.Tests, parsed.Skipped, parsed.Failures, tc.wantRegr)
			}
			golden.File(t, "compare-"+tc.name+".txt", text.Bytes())
			golden.File(t, "compare-"+tc.name+".xml", junit.Bytes())
		})
	}
}

func TestCompareRetransmitsAndErrors(t *testing.T) {
	a := reporttest.T730(21, 0)
	b := reporttest.T730(22, 0)
	for i := range b.Points {
		b.Points[i].Retransmits *= 10
	}
	c, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: 3, Metrics: []Metric{Retransmits}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Rows {
		if r.Regression != (r.Metric == Retransmits) {
			t.Errorf("%s %s %s: regression %v (change %.1f%%)", r.Probe, r.Point, r.Metric, r.Regression, r.Change)
		}
	}

	other := reporttest.T730(23, 0)
	for i := range other.Points {
		other.Points[i].Knobs = map[string]string{"rules@lan": string(rune('0' + i))}
	}
	if _, err := CompareRuns(synthetic(t, a, 1), synthetic(t, other, 3), CompareOptions{}); err == nil || !strings.Contains(err.Error(), "share no measured point") {
		t.Errorf("runs with no common point: %v", err)
	}
	if _, err := CompareRuns(synthetic(t, a, 1), synthetic(t, b, 2), CompareOptions{Threshold: -1}); err == nil {
		t.Error("a negative threshold was accepted")
	}
}

// TestCompareIgnoresFirmwareKnob: a matrix that names the firmware as a
// fixed knob still matches its points across an upgrade.
func TestCompareIgnoresFirmwareKnob(t *testing.T) {
	a, b := reporttest.T730(41, 0), reporttest.T730(42, 0.10)
	a.Uniform, b.Uniform = true, true
	for i := range a.Points {
		a.Points[i].Knobs["firmware"] = "2.7.2"
		b.Points[i].Knobs = map[string]string{"firmware": "2.8.0"}
		for k, v := range a.Points[i].Knobs {
			if k != "firmware" {
				b.Points[i].Knobs[k] = v
			}
		}
	}
	ra, rb := synthetic(t, a, 1), synthetic(t, b, 2)
	c, err := CompareRuns(ra, rb, CompareOptions{Threshold: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.OnlyA) != 0 || c.Regressions() != 8 {
		t.Errorf("firmware knob ignored: only in A %q, %d regressions; want none and 8", c.OnlyA, c.Regressions())
	}
	if _, err := CompareRuns(ra, rb, CompareOptions{Threshold: 3, Ignore: []string{}}); err == nil {
		t.Error("with nothing ignored the points matched across firmwares")
	}
}

// TestEmptyRun: a run whose points have no samples yet reports without
// failing, and says why there is nothing to compare.
func TestEmptyRun(t *testing.T) {
	r := reporttest.T730(1, 0)
	info, points, _ := reporttest.Generate(r)
	info.ID, info.Status = 7, store.Running
	run, err := build(info, points, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats {
		var b bytes.Buffer
		if err := Write(&b, run, f, Options{}); err != nil {
			t.Errorf("Write(%s) of an empty run: %v", f, err)
		}
	}
	tab := NewTable(run, Options{})
	want := []string{"run 7 is running, not done: its figures are partial", "no point has samples: there is no baseline to compare with"}
	if diff := cmp.Diff(want, tab.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if _, err := CompareRuns(run, run, CompareOptions{}); err == nil {
		t.Error("comparing empty runs succeeded")
	}
}

// compare names what differs between the boxes beyond the knobs: here a
// package version and a link's media.
func TestCompareInventoryDiffs(t *testing.T) {
	mkLab := func(id int64, suricata, media, lab string) *Run {
		info, points, samples := reporttest.Generate(reporttest.T730(uint64(id), 0))
		info.ID = id
		info.TargetInfo = []byte(`{"Flavor":"pfsense","lab":"` + lab + `","inventory":{"cpu_model":"AMD GX-424CC","cores":4,"packages":[{"name":"pfSense","version":"2.7.2"},{"name":"pfSense-pkg-suricata","version":"` + suricata + `"}],"nics":[{"name":"re0","driver":"re","media":"` + media + `"}]}}`)
		r, err := build(info, points, samples)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mk := func(id int64, suricata, media string) *Run { return mkLab(id, suricata, media, "") }
	a, b := mk(1, "7.0.8", "1000baseT <full-duplex>"), mk(2, "7.0.8_1", "100baseTX <half-duplex>")
	c, err := CompareRuns(a, b, CompareOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := "runs 1 and 2 differ beyond the knobs compared: package pfSense-pkg-suricata 7.0.8 vs 7.0.8_1; NIC re0 re 1000baseT <full-duplex> vs re 100baseTX <half-duplex>"
	if !slices.Contains(c.Warnings, want) {
		t.Errorf("warnings %q lack %q", c.Warnings, want)
	}
	if c, _ := CompareRuns(a, mk(3, "7.0.8", "1000baseT <full-duplex>"), CompareOptions{}); slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "beyond the knobs") }) {
		t.Errorf("same boxes, warnings %q", c.Warnings)
	}
	// Lab runs: another profile's budget is a confounder; another
	// calibration's figures for the same budget are not.
	const t730 = "lab profile t730: links lan 1g; services on a 0.5-core budget (cgroup fwab-dut): … ÷ this machine's "
	x, y := mkLab(4, "7.0.8", "1000baseT <full-duplex>", t730+"4148"), mkLab(5, "7.0.8", "1000baseT <full-duplex>", t730+"4160")
	if c, _ := CompareRuns(x, y, CompareOptions{}); slices.ContainsFunc(c.Warnings, func(w string) bool { return strings.Contains(w, "beyond the knobs") }) {
		t.Errorf("the same lab profile and budget, warnings %q", c.Warnings)
	}
	z := mkLab(6, "7.0.8", "1000baseT <full-duplex>", "lab profile 1g-small: links lan 1g; services on a 1-core budget (cgroup fwab-dut)")
	want = "runs 4 and 6 differ beyond the knobs compared: lab profile t730: links lan 1g; services on a 0.5-core budget vs lab profile 1g-small: links lan 1g; services on a 1-core budget"
	if c, _ := CompareRuns(x, z, CompareOptions{}); !slices.Contains(c.Warnings, want) {
		t.Errorf("warnings %q lack %q", c.Warnings, want)
	}
}

// TestCompareLossLatencyPPS gates on the metrics beside throughput, each
// the way it is better: run B loses 1 % of the datagrams at the baseline
// (none in A), has 1.5 times the latency under load with inline IPS, and
// forwards 10 % fewer packets everywhere. Told the other way round (B
// better than A), nothing is a regression.
func TestCompareLossLatencyPPS(t *testing.T) {
	ra, rb := reporttest.LatencyUnderLoad(31), reporttest.LatencyUnderLoad(32)
	rb.Points[0].Loss = 1
	rb.Points[1].PingFactor = 4.5
	rb.Slowdown = 0.10
	a, b := synthetic(t, ra, 1), synthetic(t, rb, 2)
	for _, tc := range []struct {
		metric   Metric
		want     []string // probe and point of each regression
		backward int      // regressions with A and B swapped
	}{
		{Loss, []string{"udp-64 ids@lan=off", "udp-1400 ids@lan=off"}, 0},
		{Latency, []string{"up ids@lan=ips-inline"}, 0},
		{PPS, []string{"udp-64 ids@lan=off", "udp-64 ids@lan=ips-inline", "udp-1400 ids@lan=off", "udp-1400 ids@lan=ips-inline"}, 0},
	} {
		t.Run(string(tc.metric), func(t *testing.T) {
			c, err := CompareRuns(a, b, CompareOptions{Threshold: 0.5, Metrics: []Metric{tc.metric}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range c.Rows {
				if r.Regression {
					got = append(got, r.Probe+" "+r.Point)
				}
				if r.Regression && r.Metric != tc.metric {
					t.Errorf("row %+v is a regression of a metric not gated", r)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.want))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("regressions (-want +got):\n%s", diff)
			}
			back, err := CompareRuns(b, a, CompareOptions{Threshold: 0.5, Metrics: []Metric{tc.metric}})
			if err != nil {
				t.Fatal(err)
			}
			if n := back.Regressions(); n != tc.backward {
				t.Errorf("B against A: %d regressions, want %d (an improvement is no regression)", n, tc.backward)
			}
			var text bytes.Buffer
			if err := c.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			golden.File(t, "compare-"+string(tc.metric)+".txt", text.Bytes())
		})
	}
}

// TestCompareConnectRate: a connect probe has no throughput; its headline
// is the connection rate, which the default gate judges, and the report's
// table shows it.
func TestCompareConnectRate(t *testing.T) {
	run := func(seed uint64, slowdown float64, id int64) *Run {
		return synthetic(t, reporttest.Run{Seed: seed, Repeats: 6, Noise: 0.02, Slowdown: slowdown,
			Spec:   "axes:\n  filter: [on, off]\n",
			Probes: []reporttest.Probe{{Name: "cps", Direction: "up", Connects: 5000}},
			Points: []reporttest.Point{{Knobs: map[string]string{"filter": "on"}, Factor: 0.2}, {Knobs: map[string]string{"filter": "off"}}}}, id)
	}
	a := run(31, 0, 1)
	for _, tc := range []struct {
		slowdown float64
		want     int
	}{{0, 0}, {0.15, 2}} {
		b := run(32, tc.slowdown, 2)
		c, err := CompareRuns(a, b, CompareOptions{Threshold: 3})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Regressions(); got != tc.want {
			t.Errorf("slowdown %.0f%%: %d regressions, want %d", 100*tc.slowdown, got, tc.want)
		}
		if !slices.Equal(c.Metrics, []Metric{ConnectRate}) {
			t.Errorf("gated metrics %v, want the connection rate alone (the probes measured no throughput)", c.Metrics)
		}
	}
	var text bytes.Buffer
	if err := Write(&text, a, Markdown, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "conn/s") {
		t.Errorf("the report of a connect probe has no conn/s column:\n%s", text.String())
	}
	// Its legend's family is the connection rate's: three points, two
	// comparisons with the baseline.
	three := synthetic(t, reporttest.Run{Seed: 33, Repeats: 6, Noise: 0.02,
		Spec:   "axes:\n  filter: [on, off, x]\n",
		Probes: []reporttest.Probe{{Name: "cps", Direction: "up", Connects: 5000}},
		Points: []reporttest.Point{{Knobs: map[string]string{"filter": "on"}, Factor: 0.2}, {Knobs: map[string]string{"filter": "off"}}, {Knobs: map[string]string{"filter": "x"}}}}, 3)
	var legend bytes.Buffer
	if err := Write(&legend, three, Markdown, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := "Connection rate in conn/s: median ± its 95 % confidence interval; Δ is the change of the median against the baseline, `~` where the Mann-Whitney U test shows no difference (p adj ≥ 0.05: p adjusted by Benjamini–Hochberg over the 2 comparisons)"; !strings.Contains(legend.String(), want) {
		t.Errorf("a connect probe's report over three points does not say %q:\n%s", want, legend.String())
	}
	// Nor does it keep throughput columns the probe cannot fill.
	var page bytes.Buffer
	if err := Write(&page, a, HTML, Options{}); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"markdown": text.String(), "html": page.String()} {
		for _, col := range []string{"cps Mbit/s", "cps retr", "cps p adj"} {
			if strings.Contains(out, col) {
				t.Errorf("%s report of a connect probe has a %q column it cannot fill", name, col)
			}
		}
	}
	if ps := a.Points[0].Probes["cps"]; len(ps.ConnectRate) != 6 || len(ps.Mbps) != 0 || ps.ConnectRate[0] < 500 || ps.ConnectRate[0] > 1500 {
		t.Errorf("filter on: connect rates %v, throughput %v: want six rates near 1000/s and no throughput", ps.ConnectRate, ps.Mbps)
	}
}

// TestCompareBlackouts: the applies' blackouts of matched points are
// compared in ms (their own unit), and gate when asked: a change that
// blocks 300 ms where it blocked none is a regression, one whose held
// connections stopped surviving too.
func TestCompareBlackouts(t *testing.T) {
	a, b := firmwarePair(t, 0)
	blackouts := func(point int, ms []float64, survived int) []Blackout {
		var out []Blackout
		for _, v := range ms {
			out = append(out, Blackout{Point: point, BlackoutEvent: store.BlackoutEvent{Actions: []string{string(configxml.ActionIDSRestart)}, BlackoutResult: probe.BlackoutResult{BlockedMS: v, TCPHeld: 4, TCPSurvived: survived}}})
		}
		return out
	}
	a.Blackouts = blackouts(1, []float64{0, 1, 0, 2, 1, 0}, 4)
	b.Blackouts = blackouts(1, []float64{300, 310, 290, 305, 295, 320}, 0)
	for _, tc := range []struct {
		metrics []Metric
		want    int
	}{
		{nil, 0}, // the default gate: throughput alone
		{[]Metric{Throughput, BlackoutTime}, 1},
		{[]Metric{BlackoutTime, TCPSurvived}, 2},
	} {
		c, err := CompareRuns(a, b, CompareOptions{Threshold: 50, Metrics: tc.metrics})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Regressions(); got != tc.want {
			t.Errorf("gate %v: %d regressions, want %d", tc.metrics, got, tc.want)
		}
		var text bytes.Buffer
		if err := c.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "blackout ms") || len(tc.metrics) > 1 && !strings.Contains(text.String(), "ms for blackout") {
			t.Errorf("gate %v: the comparison does not show the blackout:\n%s", tc.metrics, text.String())
		}
	}
}

// TestCompareCanary: a rise in the IPS canary's passed triggers fails the
// default gate; one fail-open sample where the base had none is a
// regression whatever the test says (it is a fact of the box, not
// noise); equal canaries are not. A detect-only IDS's misses
// (canary-missed) gate the same way, but only through the statistics: a
// passive IDS misses copies under load by chance.
func TestCompareCanary(t *testing.T) {
	for _, tc := range []struct {
		name         string
		a, b         []float64
		want, missed int // regressions with canary-passed, with canary-missed
	}{
		{"both held", []float64{0, 0, 0, 0, 0, 0, 0, 0}, []float64{0, 0, 0, 0, 0, 0, 0, 0}, 0, 0},
		{"one fail-open sample", []float64{0, 0, 0, 0, 0}, []float64{0, 0, 3, 0, 0}, 1, 0},
		{"saturated", []float64{0, 0, 0, 0, 0, 0, 0, 0}, []float64{50, 60, 40, 55, 45, 52, 48, 58}, 1, 1},
		{"fail-open on both", []float64{40, 60, 50, 45, 55, 52, 48, 58}, []float64{50, 60, 40, 55, 45, 52, 48, 58}, 0, 0},
		{"fail-open fixed", []float64{0, 0, 3, 0, 0}, []float64{0, 0, 0, 0, 0}, 0, 0},
	} {
		for _, m := range []Metric{CanaryPassed, CanaryMissed} {
			a, b := firmwarePair(t, 0)
			for _, pair := range []struct {
				r *Run
				v []float64
			}{{a, tc.a}, {b, tc.b}} {
				for _, p := range pair.r.Points {
					if p.Knobs["ids@lan"] == "ips-inline" {
						*p.Probes["up"].slice(m) = pair.v
					}
				}
			}
			c, err := CompareRuns(a, b, CompareOptions{Threshold: 3})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if m == CanaryMissed {
				want = tc.missed
			}
			if got := c.Regressions(); got != want {
				var text bytes.Buffer
				c.WriteText(&text)
				t.Errorf("%s, %s: %d regressions, want %d:\n%s", tc.name, m, got, want, text.String())
			}
		}
	}
}
