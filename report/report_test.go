package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/perf/benchfmt"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/golden"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// t730Run is the T730 review shape with 7 repeats (so medians have finite
// intervals), a point refused before it was applied and some failed samples.
func t730Run() reporttest.Run {
	r := reporttest.T730(1, 0)
	r.Testbed = "lab@3f2a9c1b0d4e" // its target is lab
	r.Repeats = 7
	r.Series = true
	r.Points[2].FailEvery = 9
	r.Points = append(r.Points, reporttest.Point{
		Knobs:  map[string]string{"blocklist": "on", "ids@lan": "ips-legacy", "offload.checksum": "on", "offload.tso": "off"},
		Status: store.Invalid, Reason: "ids@lan=ips-legacy: Suricata legacy mode needs the netmap driver, which igb1 lacks",
	})
	return r
}

// factorialRun is a full 2×2 matrix: 1000 rules cost 30 %, NAT off gains
// nothing; 5 repeats.
func factorialRun(seed uint64) reporttest.Run {
	return reporttest.Run{
		Firmware: "26.1.2",
		Spec:     "axes:\n  rules@lan: [0, 1000]\n  nat.outbound: [automatic, disabled]\n",
		Seed:     seed, Repeats: 5, Noise: 0.02, Uniform: true,
		Probes: []reporttest.Probe{{Name: "up", Direction: "up", Mbps: 2800}},
		Points: []reporttest.Point{
			{Knobs: map[string]string{"rules@lan": "0", "nat.outbound": "automatic"}, Retransmits: -1},
			{Knobs: map[string]string{"rules@lan": "0", "nat.outbound": "disabled"}, Retransmits: -1},
			{Knobs: map[string]string{"rules@lan": "1000", "nat.outbound": "automatic"}, Factor: 0.7, Retransmits: -1},
			{Knobs: map[string]string{"rules@lan": "1000", "nat.outbound": "disabled"}, Factor: 0.7, Retransmits: -1},
		},
	}
}

// loadRun writes a synthetic run to a new database and loads it back.
func loadRun(t *testing.T, r reporttest.Run) *Run {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	id, err := reporttest.Create(ctx, st, r)
	if err != nil {
		t.Fatal(err)
	}
	run, err := Load(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func writeReport(t *testing.T, r *Run, f Format, opts Options) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, r, f, opts); err != nil {
		t.Fatalf("Write(%s) = %v", f, err)
	}
	return b.Bytes()
}

func TestGolden(t *testing.T) {
	t730 := loadRun(t, t730Run())
	fact := loadRun(t, factorialRun(5))
	lul := loadRun(t, reporttest.LatencyUnderLoad(3))
	for _, tc := range []struct {
		file string
		run  *Run
		f    Format
		opts Options
	}{
		{"t730.md", t730, Markdown, Options{}},
		{"t730-student.md", t730, Markdown, Options{StudentT: true}},
		{"t730.csv", t730, CSV, Options{}},
		{"t730.json", t730, JSON, Options{}},
		{"t730.benchstat", t730, Benchstat, Options{}},
		{"t730.html", t730, HTML, Options{Pivot: "blocklist"}},
		{"rules-pivot.md", fact, Markdown, Options{Pivot: "rules@lan"}},
		{"rules-pivot.csv", fact, CSV, Options{Pivot: "rules@lan"}},
		{"rules-pivot.json", fact, JSON, Options{Pivot: "rules@lan"}},
		{"latency.md", lul, Markdown, Options{}},
		{"latency.csv", lul, CSV, Options{}},
		{"latency.json", lul, JSON, Options{}},
		{"latency.html", lul, HTML, Options{}},
		{"latency.benchstat", lul, Benchstat, Options{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			golden.File(t, tc.file, writeReport(t, tc.run, tc.f, tc.opts))
		})
	}
}

func TestLoad(t *testing.T) {
	r := loadRun(t, t730Run())
	if diff := cmp.Diff([]string{"blocklist", "ids@lan", "offload.checksum"}, r.Knobs); diff != "" {
		t.Errorf("axes in spec order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"offload.tso": "off"}, r.Fixed); diff != "" {
		t.Errorf("fixed knobs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"up", "down"}, r.Probes); diff != "" {
		t.Errorf("probes (-want +got):\n%s", diff)
	}
	if r.Baseline == nil || r.Baseline.Index != 0 {
		t.Fatalf("baseline = %+v, want point 0", r.Baseline)
	}
	ids := r.Points[2].Probes["up"]
	if ids.Failed == 0 || len(ids.Mbps)+ids.Failed != 7 {
		t.Errorf("point 2 up: %d values and %d failed, want 7 in all with some failed", len(ids.Mbps), ids.Failed)
	}
	if len(r.Points[0].Probes["up"].Series) != 7 || len(r.Points[0].Probes["up"].Series[0].Mbps) != 5 {
		t.Errorf("series from the raw iperf3 reports: %+v", r.Points[0].Probes["up"].Series)
	}
	if r.Points[4].Measured() || len(r.Points[4].Probes) != 0 {
		t.Errorf("the invalid point counts: %+v", r.Points[4])
	}
	want := []string{"failed samples are left out", "point 4 (blocklist=on ids@lan=ips-legacy offload.checksum=on offload.tso=off) is invalid: ids@lan=ips-legacy"}
	for _, w := range want {
		if !strings.Contains(strings.Join(r.Warnings, "\n"), w) {
			t.Errorf("warnings %q lack %q", r.Warnings, w)
		}
	}
	if _, err := Load(t.Context(), openEmpty(t), 42); err == nil {
		t.Error("Load of a missing run succeeded")
	}
}

func openEmpty(t *testing.T) *store.Store {
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestBaselineFromSpec: the spec's baseline wins over the first point.
func TestBaselineFromSpec(t *testing.T) {
	r := factorialRun(1)
	r.Spec += "baseline: {rules: 1000, nat.outbound: disabled}\n" // "rules" is rules@lan
	run := synthetic(t, r, 1)
	if run.Baseline == nil || run.Baseline.Index != 3 {
		t.Fatalf("baseline = %+v, want point 3", run.Baseline)
	}
	tab := NewTable(run, Options{})
	if d := tab.Rows[0].Cells[0].Delta; d == nil || !d.Significant || d.Pct < 35 || d.Pct > 50 {
		t.Errorf("0 rules against 1000: %+v, want about +43%%", d)
	}
}

func TestTableEffects(t *testing.T) {
	tab := NewTable(loadRun(t, t730Run()), Options{})
	for _, tc := range []struct {
		row, probe int
		want       string // Delta.String's form, or "~"
		lo, hi     float64
	}{
		{1, 0, "~", -4, 2},    // +pfBlockerNG: 1 % slower, not shown
		{3, 0, "-", -40, -30}, // inline IPS: 35 % slower
		{3, 1, "-", -40, -30},
	} {
		c := tab.Rows[tc.row].Cells[tc.probe]
		if c.Delta == nil {
			t.Fatalf("row %d probe %d: no delta", tc.row, tc.probe)
		}
		if got := c.Delta.String(); !strings.HasPrefix(got, tc.want) || c.Delta.Pct < tc.lo || c.Delta.Pct > tc.hi {
			t.Errorf("row %d probe %s: delta %s (%.2f%%), want %s in [%v, %v]", tc.row, c.Probe, got, c.Delta.Pct, tc.want, tc.lo, tc.hi)
		}
	}
	if r := tab.Rows[3]; r.DUTCPU < 90 || r.Cells[0].Retransmits < 100 || math.IsNaN(r.PowerW) {
		t.Errorf("inline IPS row: CPU %v, retransmits %v, power %v", r.DUTCPU, r.Cells[0].Retransmits, r.PowerW)
	}
	if !tab.Rows[0].Baseline || tab.Rows[0].Cells[0].Delta != nil {
		t.Errorf("baseline row: %+v", tab.Rows[0])
	}
}

func TestPivot(t *testing.T) {
	pv, err := NewPivot(synthetic(t, factorialRun(3), 1), "rules@lan")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"0", "1000"}, pv.Values); diff != "" {
		t.Errorf("columns (-want +got):\n%s", diff)
	}
	if len(pv.Rows) != 2 {
		t.Fatalf("rows = %d, want one per nat.outbound value", len(pv.Rows))
	}
	for _, r := range pv.Rows {
		d := r.Deltas[1]
		if r.Deltas[0] != nil || d == nil || !d.Significant || d.Pct > -25 || d.Pct < -35 {
			t.Errorf("nat.outbound=%s: %+v, want about -30%%", r.Values[0], d)
		}
	}
	_, err = NewPivot(synthetic(t, factorialRun(3), 1), "ids@lan")
	if err == nil || !strings.Contains(err.Error(), "pick one of: rules@lan, nat.outbound") {
		t.Errorf("pivot by a knob that is no axis: %v", err)
	}
}

// TestHTMLSelfContained: the report fetches nothing: no URL, no src, no
// script, no stylesheet link; the charts are inline SVG.
func TestHTMLSelfContained(t *testing.T) {
	run := loadRun(t, t730Run())
	html := string(writeReport(t, run, HTML, Options{Pivot: "blocklist"}))
	for _, bad := range []string{"http://", "https://", "src=", "<script", "<link", "url(", "@import", "//"} {
		if i := strings.Index(html, bad); i >= 0 {
			t.Errorf("HTML holds %q: …%s…", bad, html[max(i-60, 0):min(i+60, len(html))])
		}
	}
	// Two throughput charts (one per probe), the knobs' effects, a time
	// series per probe; each with a caption that is not its title.
	if n := strings.Count(html, "<svg"); n != 5 {
		t.Errorf("HTML has %d inline SVGs, want 5", n)
	}
	if n := strings.Count(html, "<figcaption>"); n != 5 {
		t.Errorf("HTML has %d captions, want 5", n)
	}
	charts, err := Charts(run, NewTable(run, Options{}), NewEffects(run, Confidence))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range charts {
		if c.Caption == "" || strings.Contains(c.Caption, c.Title) || !strings.Contains(c.SVG, c.Title) {
			t.Errorf("chart %q: caption %q: want one that is not the title, and the title in the drawing", c.Title, c.Caption)
		}
	}
	// The throughput charts draw every sample: 7 repeats, 4 points, less
	// the failed ones, plus the medians and the axes.
	if n := strings.Count(charts[0].SVG, "<path"); n < 4*6 {
		t.Errorf("throughput chart has %d paths: the samples are not drawn", n)
	}
	if !regexp.MustCompile(`<svg[^>]*viewBox=`).MatchString(html) {
		t.Error("the SVGs have no viewBox")
	}
}

// TestBenchstatFormat reads the benchstat output back with benchfmt, as
// benchstat does: one result per successful sample, the knobs as name
// parts, the figures with their units.
func TestBenchstatFormat(t *testing.T) {
	run := loadRun(t, t730Run())
	out := writeReport(t, run, Benchstat, Options{})
	rd := benchfmt.NewReader(bytes.NewReader(out), "run.txt")
	count := map[string]int{}
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			t.Fatalf("not a result: %v", rd.Result())
		}
		base, parts := res.Name.Parts()
		if string(base) != "Fwab" {
			t.Errorf("base name %q", base)
		}
		key := string(bytes.Join(parts, nil))
		count[key]++
		if strings.HasPrefix(key, "/probe=idle/") {
			// The idle phase: the DUT at rest, no traffic.
			if _, ok := res.Value("bits/s"); ok {
				t.Errorf("%s: an idle phase has a throughput", key)
			}
			if w, ok := res.Value("W"); !ok || w > 13 {
				t.Errorf("%s: idle power %v, %v; want the power at rest", key, w, ok)
			}
			continue
		}
		if v, ok := res.Value("bits/s"); !ok || v < 400e6 || v > 1.2e9 {
			t.Errorf("%s: bits/s = %v, %v", key, v, ok)
		}
		if _, ok := res.Value("dut-cpu-%"); !ok {
			t.Errorf("%s: no DUT CPU", key)
		}
		if got := res.GetConfig("fwab-target"); got != "lab" {
			t.Errorf("fwab-target = %q", got)
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, p := range run.Points {
		for _, probe := range run.Probes {
			if ps := p.Probes[probe]; ps != nil {
				want["/probe="+probe+"/blocklist="+p.Knobs["blocklist"]+"/ids@lan="+p.Knobs["ids@lan"]+"/offload.checksum="+p.Knobs["offload.checksum"]] = len(ps.Mbps)
			}
		}
		if p.Idle != nil {
			want["/probe=idle/blocklist="+p.Knobs["blocklist"]+"/ids@lan="+p.Knobs["ids@lan"]+"/offload.checksum="+p.Knobs["offload.checksum"]] = 1
		}
	}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("results per benchmark name (-want +got):\n%s", diff)
	}
}

func TestBenchName(t *testing.T) {
	for _, tc := range []struct {
		probe string
		knobs map[string]string
		want  string
	}{
		{"up", map[string]string{"ids@lan": "ips-inline"}, "BenchmarkFwab/probe=up/ids@lan=ips-inline"},
		// A trailing -64 would be read as GOMAXPROCS.
		{"udp-64", nil, "BenchmarkFwab/probe=udp%2D64"},
		{"up", map[string]string{"xml:/system/x": "a b/c-2"}, "BenchmarkFwab/probe=up/xml:%2Fsystem%2Fx=a%20b%2Fc%2D2"},
	} {
		var keys []string
		for k := range tc.knobs {
			keys = append(keys, k)
		}
		if got := benchName(tc.probe, keys, tc.knobs); got != tc.want {
			t.Errorf("benchName(%q, %v) = %q, want %q", tc.probe, tc.knobs, got, tc.want)
		}
		n := benchfmt.Name(strings.TrimPrefix(tc.want, "Benchmark"))
		if _, parts := n.Parts(); len(parts) != 1+len(tc.knobs) {
			t.Errorf("%s parses into %d parts", tc.want, len(parts))
		}
	}
}

func TestParseFormat(t *testing.T) {
	if f, err := ParseFormat("html"); err != nil || f != HTML {
		t.Errorf("ParseFormat(html) = %q, %v", f, err)
	}
	if _, err := ParseFormat("pdf"); err == nil || !strings.Contains(err.Error(), "md, csv, json, html, benchstat") {
		t.Errorf("ParseFormat(pdf) = %v", err)
	}
}

// TestTinyRuns: one point, one sample, no knobs; and a sample whose DUT
// metrics and power are unknown. Every format still renders.
func TestTinyRuns(t *testing.T) {
	for _, r := range []reporttest.Run{
		{Repeats: 1, Probes: []reporttest.Probe{{Name: "up", Mbps: 100}}, Points: []reporttest.Point{{Retransmits: -1}}, Series: true},
		{Repeats: 2, Probes: []reporttest.Probe{{Name: "up", Mbps: 100}}, Points: []reporttest.Point{
			{Knobs: map[string]string{"rules@lan": "0"}, Retransmits: -1},
			{Knobs: map[string]string{"rules@lan": "10"}, Retransmits: -1, FailEvery: 1},
		}},
	} {
		run := synthetic(t, r, 1)
		for _, f := range Formats {
			var b bytes.Buffer
			if err := Write(&b, run, f, Options{}); err != nil {
				t.Errorf("Write(%s): %v", f, err)
			}
		}
	}
}

// A pfSense run's router-mode points are named: they measured routing
// without NAT, whatever nat.outbound said. OPNsense runs get no such note.
func TestRouterModeNote(t *testing.T) {
	run := reporttest.Run{Seed: 1, Repeats: 6, Noise: 0.03,
		Spec:   "axes:\n  filter: [enabled, disabled]\n",
		Probes: []reporttest.Probe{{Name: "up", Direction: "up", Mbps: 900}},
		Points: []reporttest.Point{{Knobs: map[string]string{"filter": "enabled"}}, {Knobs: map[string]string{"filter": "disabled"}}}}
	info, points, samples := reporttest.Generate(run)
	r, err := build(info, points, samples)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.Warnings, func(w string) bool {
		return strings.HasPrefix(w, "point 1 ran with filter=disabled: pfSense loads no NAT")
	}) {
		t.Errorf("pfSense run warnings %q lack the router-mode note", r.Warnings)
	}
	info.TargetInfo = []byte(`{"Flavor":"opnsense"}`)
	if r, _ := build(info, points, samples); slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.Contains(w, "filter=disabled") }) {
		t.Errorf("OPNsense run warnings %q carry the pfSense note", r.Warnings)
	}
}

// TestBenchstatExtraUnits: UDP probes carry their packet rate, loss and
// jitter, a probe that pinged its latency under load, as benchfmt units.
func TestBenchstatExtraUnits(t *testing.T) {
	out := writeReport(t, loadRun(t, reporttest.LatencyUnderLoad(3)), Benchstat, Options{})
	rd := benchfmt.NewReader(bytes.NewReader(out), "run.txt")
	units := map[string]map[string]bool{} // probe → units
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			t.Fatalf("not a result: %v", rd.Result())
		}
		_, parts := res.Name.Parts()
		probe := strings.TrimPrefix(string(parts[0]), "/probe=")
		if units[probe] == nil {
			units[probe] = map[string]bool{}
		}
		for _, v := range res.Values {
			units[probe][v.Unit] = true
		}
	}
	if err := rd.Err(); err != nil {
		t.Fatal(err)
	}
	for probe, want := range map[string][]string{"up": {"ping-ms", "ping-lost-%"}, "udp-64": {"pkts/s", "lost-%", "jitter-ms"}} {
		for _, u := range want {
			if !units[probe][u] {
				t.Errorf("probe %s: no %s values; units %v", probe, u, units[probe])
			}
		}
	}
	if units["up"]["pkts/s"] {
		t.Error("a TCP probe has a packet rate")
	}
}

// TestNDRSamplePPS: a rate search's sample (kind: ndr) reports its frames
// a second as the packet rate, from the search it keeps in Raw.
func TestNDRSamplePPS(t *testing.T) {
	info := store.Run{ID: 1, Target: "lab", Status: store.Done, TargetInfo: []byte("{}")}
	x := store.Sample{Key: store.Key{Run: 1, Probe: "ndr-512"}, BitsPerSecond: 100.6e6, Retransmits: -1, LostPercent: 0,
		JitterMS: math.NaN(), PingAvgMS: math.NaN(), PingLossPercent: math.NaN(), PowerWatts: math.NaN(),
		Raw: []byte(`{"ndr":{"frame":512,"frames_per_second":23641,"wire_bps":100.6e6,"trials":[]}}`)}
	r, err := build(info, []store.Point{{Index: 0, Knobs: map[string]string{}, Status: store.Valid}}, []store.Sample{x})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Points[0].Probes["ndr-512"].PPS; len(got) != 1 || got[0] != 23641 {
		t.Errorf("PPS = %v, want [23641] from the search", got)
	}
}

// TestHTTPSampleFigures: an http probe's sample reports its transactions
// a second, its time to the last byte and the connections held at the
// server, from its record; a record from before the held connections
// were counted has none, and a count of 0 is 0.
func TestHTTPSampleFigures(t *testing.T) {
	info := store.Run{ID: 1, Target: "lab", Status: store.Done, TargetInfo: []byte("{}")}
	sample := func(round int, held string) store.Sample {
		return store.Sample{Key: store.Key{Run: 1, Probe: "http-1K", Round: round}, BitsPerSecond: 80e6, Retransmits: -1, LostPercent: math.NaN(),
			JitterMS: math.NaN(), PingAvgMS: math.NaN(), PingLossPercent: math.NaN(), PowerWatts: math.NaN(),
			Raw: []byte(`{"http":{"object_bytes":1024,"connections":5000,"succeeded":5000,"transactions_per_second":500,"ttlb_ms":{"median":1.5,"p99":9,"max":20}` + held + `}}`)}
	}
	r, err := build(info, []store.Point{{Index: 0, Knobs: map[string]string{}, Status: store.Valid}}, []store.Sample{sample(0, `,"held_connections":4990`), sample(1, ``), sample(2, `,"held_connections":0`)})
	if err != nil {
		t.Fatal(err)
	}
	ps := r.Points[0].Probes["http-1K"]
	if !slices.Equal(ps.HTTPRate, []float64{500, 500, 500}) || !slices.Equal(ps.TTLBP99, []float64{9, 9, 9}) || !slices.Equal(ps.HTTPHeld, []float64{4990, 0}) {
		t.Errorf("http figures: rate %v, TTLB p99 %v, held %v; want 500 and 9 thrice, held 4990 and 0 (none counted in the second)", ps.HTTPRate, ps.TTLBP99, ps.HTTPHeld)
	}
}

// A report says which box it measured: the testbed (the target's name and
// its hardware's fingerprint) in the title of the text and HTML reports and
// a field of the JSON one; the target alone for a run from before
// testbeds; both where the testbed is not named after the target.
func TestReportTestbed(t *testing.T) {
	r := loadRun(t, t730Run())
	md, html, js := string(writeReport(t, r, Markdown, Options{})), string(writeReport(t, r, HTML, Options{})), writeReport(t, r, JSON, Options{})
	if first, _, _ := strings.Cut(md, "\n"); first != "# Run 1 on lab@3f2a9c1b0d4e (2.7.2-RELEASE)" {
		t.Errorf("text report's title = %q; want the testbed in it", first)
	}
	if !strings.Contains(html, "<h1>Run 1 on lab@3f2a9c1b0d4e (2.7.2-RELEASE)</h1>") {
		t.Errorf("HTML report has no testbed in its title:\n%.600s", html)
	}
	var got struct{ Target, Testbed string }
	if err := json.Unmarshal(js, &got); err != nil || got.Target != "lab" || got.Testbed != "lab@3f2a9c1b0d4e" {
		t.Errorf("JSON report: target %q, testbed %q, %v; want lab, lab@3f2a9c1b0d4e", got.Target, got.Testbed, err)
	}
	if strings.Contains(md, "Lab profile") || strings.Contains(html, "Lab profile") {
		t.Errorf("a run without a lab profile names one")
	}
	// A lab run says what its box stood for, under the title.
	lr := t730Run()
	lr.Lab = "lab profile t730: links lan 1g; services on a 0.52-core budget (cgroup fwab-dut): 4 × AMD GX-424CC <a|b>"
	r = loadRun(t, lr)
	md, html, js = string(writeReport(t, r, Markdown, Options{})), string(writeReport(t, r, HTML, Options{})), writeReport(t, r, JSON, Options{})
	wantMD := `Lab profile t730: links lan 1g; services on a 0.52-core budget (cgroup fwab-dut): 4 × AMD GX-424CC <a\|b>.` + "\n\n"
	if _, rest, _ := strings.Cut(md, "\n\n"); !strings.HasPrefix(rest, wantMD) {
		t.Errorf("text report under its title:\n%.300s\nwant %q", rest, wantMD)
	}
	if !strings.Contains(html, "<p>Lab profile t730: links lan 1g; services on a 0.52-core budget (cgroup fwab-dut): 4 × AMD GX-424CC &lt;a|b&gt;.</p>") {
		t.Errorf("HTML report lacks the lab profile, escaped")
	}
	var lab struct{ Lab string }
	if err := json.Unmarshal(js, &lab); err != nil || lab.Lab != lr.Lab {
		t.Errorf("JSON report lab %q, %v; want %q", lab.Lab, err, lr.Lab)
	}
	for _, tc := range []struct{ target, testbed, want string }{
		{"lab", "", "lab"},
		{"lab", "lab@0123456789ab", "lab@0123456789ab"},
		{"lab", "apu2@0123456789ab", "lab, testbed apu2@0123456789ab"},
		{"", "", ""},
	} {
		if got := (&Table{Target: tc.target, Testbed: tc.testbed}).Where(); got != tc.want {
			t.Errorf("Where(target %q, testbed %q) = %q, want %q", tc.target, tc.testbed, got, tc.want)
		}
	}
}

// TestReportLinks: a probe that ran two links at once shows their sum in
// the main table and each link's median beside it, in text, HTML and JSON.
func TestReportLinks(t *testing.T) {
	info := store.Run{ID: 1, Target: "lab", Status: store.Done, TargetInfo: []byte("{}")}
	var xs []store.Sample
	for i, a := range []float64{940e6, 938e6, 941e6} {
		b := a - 2e6
		xs = append(xs, store.Sample{Key: store.Key{Run: 1, Probe: "both@link1+link2", Round: i}, BitsPerSecond: a + b, Retransmits: 0, LostPercent: math.NaN(),
			JitterMS: math.NaN(), PingAvgMS: math.NaN(), PingLossPercent: math.NaN(), PowerWatts: math.NaN(),
			Raw: []byte(fmt.Sprintf(`{"links":[{"name":"link1","bits_per_second":%g},{"name":"link2","bits_per_second":%g}],"start_skew_ms":0.2}`, a, b))})
	}
	r, err := build(info, []store.Point{{Index: 0, Knobs: map[string]string{}, Status: store.Valid}}, xs)
	if err != nil {
		t.Fatal(err)
	}
	md, html, js := string(writeReport(t, r, Markdown, Options{})), string(writeReport(t, r, HTML, Options{})), writeReport(t, r, JSON, Options{})
	if !strings.Contains(md, "Links at once") || !strings.Contains(md, "| 0 (baseline) | both@link1+link2 | 1878.0") || !strings.Contains(md, "link1 940.0") || !strings.Contains(md, "link2 938.0") {
		t.Errorf("text report:\n%s\nwant the sum 1878.0 and link1 940.0, link2 938.0 in a links table", md)
	}
	if !strings.Contains(html, `<table id="links">`) || !strings.Contains(html, "link2 938.0") {
		t.Errorf("HTML report lacks the links table")
	}
	var got struct {
		Points []struct {
			Probes []struct {
				Links []struct {
					Link string
					Mbps struct{ Median float64 }
				}
			}
		}
	}
	if err := json.Unmarshal(js, &got); err != nil || len(got.Points) != 1 || len(got.Points[0].Probes[0].Links) != 2 || got.Points[0].Probes[0].Links[1].Mbps.Median != 938 {
		t.Errorf("JSON report links %+v, %v; want link1 and link2, link2's median 938", got, err)
	}
}

// storedT730 records the T730 example run in a database of its own, each
// sample passed through edit first (nil: as generated).
func storedT730(t *testing.T, edit func(*store.Sample)) (*store.Store, int64) {
	t.Helper()
	ctx := t.Context()
	st := openEmpty(t)
	info, points, samples := reporttest.Generate(t730Run())
	id, err := st.CreateRun(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddPoints(ctx, id, points); err != nil {
		t.Fatal(err)
	}
	for _, x := range samples {
		x.Run = id
		if edit != nil {
			edit(&x)
		}
		if err := st.RecordSample(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	return st, id
}

// TestInvalidSamplesNamed: samples the firewall changed under are left out
// like failed ones, and the run's warnings count them apart, by what
// changed.
func TestInvalidSamplesNamed(t *testing.T) {
	ctx := t.Context()
	n := 0
	st, id := storedT730(t, func(x *store.Sample) {
		if !x.Failed && x.Point == 0 && x.Probe == "up" && n < 3 {
			x.Failed, x.Reason = true, probe.InvalidReason+[]string{"suricata restarted (pid 812 → 1403)", "suricata restarted (pid 1403 → 1555)", "the firewall rebooted; new crash dump /var/crash/vmcore.0"}[n]
			n++
		}
	})
	r, err := Load(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	want := "3 samples are invalid, the firewall changed during them (suricata restarted ×2, the firewall rebooted, new crash dump /var/crash/vmcore.0)"
	if !slices.ContainsFunc(r.Warnings, func(w string) bool { return strings.HasPrefix(w, want) }) {
		t.Errorf("warnings %q lack %q", r.Warnings, want)
	}
	if up := r.Points[0].Probes["up"]; up.Failed != 3 || up.Invalid != 3 || len(up.Mbps) != 4 {
		t.Errorf("point 0 up: %d values, %d failed, %d invalid; want 4 and the 3 invalid left out", len(up.Mbps), up.Failed, up.Invalid)
	}
	var b bytes.Buffer
	if err := Write(&b, r, JSON, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"invalid": 3`) || !strings.Contains(b.String(), `"invalid_why": "suricata restarted ×2, the firewall rebooted, new crash dump /var/crash/vmcore.0"`) {
		t.Errorf("the JSON report does not count and name the invalid samples:\n%.2000s", b.String())
	}
	// The table says it in the cell too: the warning names the run, the
	// cell the point and probe the samples were lost from.
	cell := "invalid 3/7: suricata restarted ×2, the firewall rebooted, new crash dump /var/crash/vmcore.0"
	for _, f := range []Format{Markdown, HTML} {
		b.Reset()
		if err := Write(&b, r, f, Options{}); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(b.String(), cell); n != 1 {
			t.Errorf("the %s report shows %q %d times, want once (point 0's up cell):\n%.3000s", f, cell, n, b.String())
		}
	}
}

// TestBlackoutsReported: the applies' blackouts are summed up per point
// (the table's blackout ms column) and per service actions (their own
// table), in Markdown, HTML and JSON.
func TestBlackoutsReported(t *testing.T) {
	ctx := t.Context()
	st, id := storedT730(t, nil)
	record := func(point int, b store.BlackoutEvent) {
		msg, _ := json.Marshal(b)
		if err := st.RecordEvent(ctx, id, store.Event{Time: time.Now(), Kind: store.EventBlackout, Point: point, Message: string(msg)}); err != nil {
			t.Fatal(err)
		}
	}
	reload := []string{string(configxml.ActionFilterReload)}
	record(1, store.BlackoutEvent{Actions: reload, BlackoutResult: probe.BlackoutResult{BlockedMS: 30, MaxGapMS: 31, TCPHeld: 4, TCPSurvived: 4}})
	record(1, store.BlackoutEvent{Actions: reload, BlackoutResult: probe.BlackoutResult{BlockedMS: 70, MaxGapMS: 72, TCPHeld: 4, TCPSurvived: 3}})
	record(2, store.BlackoutEvent{Actions: []string{string(configxml.ActionIDSRestart), string(configxml.ActionFilterReload)}, BlackoutResult: probe.BlackoutResult{BlockedMS: 2400, MaxGapMS: 2300, TCPHeld: 4}, Failed: true})
	st.RecordEvent(ctx, id, store.Event{Time: time.Now(), Kind: store.EventBlackout, Point: 3, Message: "not json"})
	r, err := Load(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	tab := NewTable(r, Options{})
	want := []BlackoutFigures{
		{Actions: "filter-reload", N: 2, BlockedMS: 50, MaxMS: 70, MaxGapMS: 72, TCPHeld: 8, TCPSurvived: 7},
		{Actions: "ids-restart+filter-reload", N: 1, Failed: 1, BlockedMS: 2400, MaxMS: 2400, MaxGapMS: 2300, TCPHeld: 4},
	}
	if diff := cmp.Diff(want, tab.Blackouts); diff != "" {
		t.Errorf("blackouts by actions (-want +got):\n%s", diff)
	}
	if got := tab.Rows[1].Blackout; got.N != 2 || got.BlockedMS != 50 {
		t.Errorf("point 1's blackout %+v, want the median of 30 and 70 ms", got)
	}
	if got := tab.Rows[0].Blackout; got.N != 0 {
		t.Errorf("point 0's blackout %+v, want none", got)
	}
	for f, wants := range map[Format][]string{
		Markdown: {"| blackout ms |", "## Blackout per change", "| filter-reload | 2 | 50 | 70 | 72 | 7/8 |", "| ids-restart+filter-reload | 1 (1 failed) | 2400 | 2400 | 2300 | 0/4 |"},
		HTML:     {"<th>blackout ms</th>", `<table id="blackouts">`, "<td>filter-reload</td>", "Time blocked by each apply"},
		JSON:     {`"blackout_ms": 50`, `"actions": "ids-restart+filter-reload"`, `"tcp_survived": 7`},
	} {
		var b bytes.Buffer
		if err := Write(&b, r, f, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if !strings.Contains(b.String(), w) {
				t.Errorf("the %s report lacks %q:\n%.4000s", f, w, b.String())
			}
		}
	}
}

// withCanary adds an IPS canary's counts to a sample's raw record, as the
// sweep records them (store.FromProbe).
func withCanary(t *testing.T, x *store.Sample, c probe.CanaryResult) {
	t.Helper()
	raw := map[string]json.RawMessage{}
	if len(x.Raw) > 0 {
		if err := json.Unmarshal(x.Raw, &raw); err != nil {
			t.Fatal(err)
		}
	}
	raw["canary"], _ = json.Marshal(c)
	x.Raw, _ = json.Marshal(raw)
}

// TestCanaryReported: at the inline-IPS point every sample's canary is
// counted, invalid samples too (an engine that died let triggers
// through all the same); a cell where any trigger passed says fail-open
// with the counts, one where none did says so, in Markdown, HTML and
// JSON; points without a canary say nothing of it.
func TestCanaryReported(t *testing.T) {
	ctx := t.Context()
	up := 0
	st, id := storedT730(t, func(x *store.Sample) {
		if x.Point != 3 || x.Drift() {
			return
		}
		c := probe.CanaryResult{Sent: 50}
		if x.Probe == "up" {
			c.Sent = 100
			switch up {
			case 1:
				c.Passed = 7 // saturated: fail-open under load
			case 4:
				c.Passed = 90 // the engine died mid-probe
				x.Failed, x.Reason = true, probe.InvalidReason+"suricata stopped (pid 812)"
			}
			up++
		}
		withCanary(t, x, c)
	})
	r, err := Load(ctx, st, id)
	if err != nil {
		t.Fatal(err)
	}
	inline := r.Points[3]
	if got, want := inline.Probes["up"].Canary, (CanaryCount{Samples: 7, FailOpen: 2, Sent: 700, Passed: 97}); got != want {
		t.Errorf("point 3 up canary %+v, want %+v", got, want)
	}
	if got := inline.Probes["down"].Canary; got.Samples == 0 || got.FailOpen != 0 || got.Passed != 0 {
		t.Errorf("point 3 down canary %+v, want every sample counted, none passed", got)
	}
	if got := r.Points[0].Probes["up"].Canary; got != (CanaryCount{}) {
		t.Errorf("point 0 up canary %+v, want none", got)
	}
	if got := CanaryPassed.values(inline.Probes["up"]); len(got) != 6 || slices.Max(got) != 7 {
		t.Errorf("canary-passed values %v: want the 6 valid samples', 7 %% at most", got)
	}
	failOpen := "fail-open 2/7: 97 of 700 canary triggers passed"
	held := fmt.Sprintf("canary: none of %d triggers passed", inline.Probes["down"].Canary.Sent)
	for f, wants := range map[Format][]string{
		Markdown: {failOpen, held},
		HTML:     {failOpen, held},
		JSON:     {`"canary_sent": 700`, `"canary_passed": 97`, `"fail_open": 2`},
	} {
		var b bytes.Buffer
		if err := Write(&b, r, f, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if n := strings.Count(b.String(), w); n != 1 {
				t.Errorf("the %s report shows %q %d times, want once:\n%.4000s", f, w, n, b.String())
			}
		}
		if f != JSON && strings.Count(b.String(), "canary") != 2 {
			t.Errorf("the %s report speaks of the canary %d times, want only at point 3's two cells", f, strings.Count(b.String(), "canary"))
		}
	}
}

// TestCanaryDetectReported: at a detect-only point the canary's triggers
// pass by design: the cell counts the alerts the IDS logged for them
// instead, says "ids missed" where a sample lacks any, never fail-open,
// and the canary-missed metric carries each sample's share.
func TestCanaryDetectReported(t *testing.T) {
	up := 0
	st, id := storedT730(t, func(x *store.Sample) {
		if x.Point != 3 || x.Drift() || x.Probe != "up" {
			return
		}
		c := probe.CanaryResult{Sent: 100, Passed: 100, ControlSent: 100, ControlPassed: 100, Detect: true, Alerted: 100}
		if up == 2 {
			c.Alerted = 60 // the IDS fell behind
		}
		up++
		withCanary(t, x, c)
	})
	r, err := Load(t.Context(), st, id)
	if err != nil {
		t.Fatal(err)
	}
	cell := r.Points[3].Probes["up"]
	if got, want := cell.Canary, (CanaryCount{Samples: 7, Sent: 700, Passed: 700, Detect: 7, Alerted: 660, Missed: 1}); got != want {
		t.Errorf("point 3 up canary %+v, want %+v", got, want)
	}
	if got := CanaryMissed.values(cell); len(got) != 7 || slices.Max(got) != 40 || slices.Min(got) != 0 {
		t.Errorf("canary-missed values %v: want 7, one of 40 %%, the rest 0", got)
	}
	if got := CanaryPassed.values(cell); len(got) != 0 {
		t.Errorf("canary-passed values %v at a detect-only point: want none", got)
	}
	for f, wants := range map[Format][]string{
		Markdown: {"ids missed 1/7: 660 of 700 canary triggers alerted"},
		HTML:     {"ids missed 1/7: 660 of 700 canary triggers alerted"},
		JSON:     {`"canary_alerted": 660`, `"ids_missed": 1`, `"fail_open": 0`},
	} {
		var b bytes.Buffer
		if err := Write(&b, r, f, Options{}); err != nil {
			t.Fatal(err)
		}
		for _, w := range wants {
			if n := strings.Count(b.String(), w); n != 1 {
				t.Errorf("the %s report shows %q %d times, want once:\n%.4000s", f, w, n, b.String())
			}
		}
		if strings.Contains(b.String(), "fail-open") {
			t.Errorf("the %s report says fail-open at a detect-only point", f)
		}
	}
}
