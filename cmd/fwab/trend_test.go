package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/store"
)

// nightlyDB writes n done runs of spec a day apart into a new database,
// each one point with knobs on the testbed testbedOf(i) names, whose
// samples record(id, i) writes; it returns the database's path.
func nightlyDB(t *testing.T, spec string, n int, knobs map[string]string, testbedOf func(i int) string, record func(st *store.Store, id int64, i int)) string {
	t.Helper()
	ctx := t.Context()
	db := filepath.Join(t.TempDir(), "results.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 10, 1, 2, 0, 0, 0, time.UTC)
	for i := range n {
		testbed := testbedOf(i)
		id, err := st.CreateRun(ctx, store.Run{Created: t0.Add(time.Duration(i) * 24 * time.Hour), Spec: spec, Target: strings.Split(testbed, "@")[0], Testbed: testbed, FwabVersion: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AddPoints(ctx, id, []store.Point{{Index: 0, Knobs: knobs, Status: store.Valid}}); err != nil {
			t.Fatal(err)
		}
		record(st, id, i)
		if err := st.FinishRun(ctx, id, store.Done); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// noise is run i's round r's factor: within ±2 %, the same every time.
func noise(i, r int) float64 { return 1 + 0.01*float64((i*3+r)%5-2) }

// trendDB holds 20 nightly runs of spec on lab@…aa, 8 % slower from run 11
// on, and 3 runs on another testbed that must not mix in.
func trendDB(t *testing.T, spec string) string {
	t.Helper()
	testbedOf := func(i int) string {
		if i >= 20 {
			return "apu2@0000000000bb"
		}
		return "lab@0000000000aa"
	}
	return nightlyDB(t, spec, 23, map[string]string{"ids@lan": "off"}, testbedOf, func(st *store.Store, id int64, i int) {
		level := 940.0
		if i >= 10 {
			level *= 0.92
		}
		if i >= 20 {
			level = 400
		}
		for r := range 3 {
			if err := st.RecordSample(t.Context(), store.Sample{Key: store.Key{Run: id, Probe: "up", Round: r}, BitsPerSecond: level * noise(i, r) * 1e6, Retransmits: -1}); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestTrendCommand(t *testing.T) {
	const text = "target: lab\naxes:\n  ids@lan: [\"off\"]\nprobes:\n  - {name: up, direction: up, duration: 1s}\n"
	spec := filepath.Join(t.TempDir(), "nightly.yaml")
	os.WriteFile(spec, []byte(text), 0o644)
	db := trendDB(t, text)
	html := filepath.Join(t.TempDir(), "trend.html")

	out, errOut, code := runFwab(t, "trend", spec, "--testbed", "lab", "--db", db, "--html", html)
	if code != exitFailure {
		t.Errorf("trend with a step = %d, want %d (a change found): %s", code, exitFailure, errOut)
	}
	if !strings.Contains(out, "lab@0000000000aa: 20 runs") || !strings.Contains(out, "\t11\t") && !strings.Contains(out, " 11 ") {
		t.Errorf("trend output:\n%s", out)
	}
	if b, err := os.ReadFile(html); err != nil || !strings.Contains(string(b), "<svg") {
		t.Errorf("--html: %v", err)
	}

	out, _, code = runFwab(t, "trend", spec, "--testbed", "lab", "--db", db, "--json")
	var got struct {
		Runs   int `json:"runs"`
		Series []struct {
			Runs    []struct{ Run int64 } `json:"runs"`
			Changes []struct{ Index int } `json:"changes"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitFailure {
		t.Fatalf("trend --json = %d, %v: %s", code, err, out)
	}
	if got.Runs != 20 || len(got.Series) != 1 || len(got.Series[0].Changes) != 1 || got.Series[0].Runs[got.Series[0].Changes[0].Index].Run != 11 {
		t.Errorf("trend --json = %+v; want 20 runs, one change, at run 11", got)
	}

	// Too few runs on the other testbed for two windows: no change.
	if out, errOut, code := runFwab(t, "trend", spec, "--testbed", "apu2@0000000000bb", "--db", db); code != 0 || !strings.Contains(out, "no change") {
		t.Errorf("trend on apu2 = %d: %s%s", code, out, errOut)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"trend", spec, "--db", db}, "--testbed is required"},
		{[]string{"trend", spec, "--db", db, "--testbed", "nosuch"}, "no complete run"},
		{[]string{"trend", spec, "--db", db, "--testbed", "lab", "--window", "1"}, "at least 2"},
		{[]string{"trend", filepath.Join(t.TempDir(), "missing.yaml"), "--db", db, "--testbed", "lab"}, "no such file"},
	} {
		if _, errOut, code := runFwab(t, tt.args...); code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("fwab %s = %d, %q; want a usage error with %q", strings.Join(tt.args[2:], " "), code, errOut, tt.want)
		}
	}
}

// TestTrendConnectRate: a connect probe has no throughput; its series is
// the connection rate, a step in it is found, and the output names conn/s.
func TestTrendConnectRate(t *testing.T) {
	const text = "target: lab\naxes:\n  filter: [\"on\"]\nprobes:\n  - {name: cps, kind: connect, duration: 1s}\n  - {name: up, direction: up, duration: 1s}\n"
	spec := filepath.Join(t.TempDir(), "nightly.yaml")
	os.WriteFile(spec, []byte(text), 0o644)
	db := nightlyDB(t, text, 20, map[string]string{"filter": "on"}, func(int) string { return "lab@0000000000aa" }, func(st *store.Store, id int64, i int) {
		rate := 5000.0
		if i >= 10 {
			rate *= 0.8
		}
		for r := range 3 {
			raw := fmt.Sprintf(`{"connect": {"seconds": 1, "parallel": 1, "connects": %d, "failures": 0, "per_second": %g, "connect_ms": {"min": 0.1, "median": 0.2, "p99": 0.5}}}`, int(rate*noise(i, r)), rate*noise(i, r))
			if err := st.RecordSample(t.Context(), store.Sample{Key: store.Key{Run: id, Probe: "cps", Round: r}, BitsPerSecond: store.Unknown, Retransmits: -1, Raw: json.RawMessage(raw)}); err != nil {
				t.Fatal(err)
			}
			if err := st.RecordSample(t.Context(), store.Sample{Key: store.Key{Run: id, Probe: "up", Round: r}, BitsPerSecond: 940e6 * noise(i, r), Retransmits: -1}); err != nil {
				t.Fatal(err)
			}
		}
	})

	out, errOut, code := runFwab(t, "trend", spec, "--testbed", "lab", "--db", db)
	if code != exitFailure || !strings.Contains(out, "2 series") || !strings.Contains(out, "conn/s") || !strings.Contains(out, "cps") {
		t.Errorf("trend of a connect probe = %d, want the step in its conn/s series found (exit 1):\n%s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Fields(lines[2])[1] != "cps" {
		t.Errorf("trend found a change in the steady throughput series, or more than the connect probe's one:\n%s", out)
	}
	out, _, _ = runFwab(t, "trend", spec, "--testbed", "lab", "--db", db, "--json")
	var got struct {
		Series []struct {
			Probe  string `json:"probe"`
			Metric string `json:"metric"`
			Runs   []struct {
				Mbps   []float64 `json:"mbps"`
				Conns  []float64 `json:"connects_per_second"`
				Median float64   `json:"median_connects_per_second"`
			} `json:"runs"`
			Changes []struct{ Index int } `json:"changes"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Series) != 2 {
		t.Fatalf("trend --json: %v: %s", err, out)
	}
	// The throughput series keeps the keys it always had.
	var keys struct {
		Series []struct {
			Metric string           `json:"metric"`
			Runs   []map[string]any `json:"runs"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatal(err)
	}
	if up := keys.Series[1]; up.Metric != "throughput" || len(up.Runs) != 20 || !slices.Equal(slices.Sorted(maps.Keys(up.Runs[0])), []string{"created", "firmware", "mbps", "median_mbps", "run"}) {
		t.Errorf("trend --json's throughput series = metric %q, runs %v; want metric throughput and the keys run, created, firmware, mbps, median_mbps", up.Metric, up.Runs[:min(1, len(up.Runs))])
	}
	s := got.Series[0]
	if s.Probe != "cps" || s.Metric != "connect-rate" || len(s.Changes) != 1 || s.Changes[0].Index != 10 ||
		len(s.Runs[0].Conns) != 3 || s.Runs[0].Mbps != nil || s.Runs[0].Median < 4900 || s.Runs[0].Median > 5100 {
		t.Errorf("trend --json's connect series = %+v; want metric connect-rate, 3 rates a run near 5000/s and no mbps, one change at index 10", s)
	}
}

// TestRateProbes: the names a connect or http probe's samples are
// recorded under, one a link, and none for the other kinds.
func TestRateProbes(t *testing.T) {
	spec, err := matrix.Parse(strings.NewReader("target: lab\naxes:\n  filter: [\"on\"]\nprobes:\n  - {name: cps, kind: connect, duration: 1s, links: [l2]}\n  - {name: one, kind: connect, duration: 1s}\n  - {name: web, kind: http, objects: [64K], duration: 1s}\n  - {name: up, direction: up, duration: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := rateProbes(spec)
	if want := []string{"cps@l2", "one"}; !slices.Equal(got.Connect, want) {
		t.Errorf("rateProbes.Connect = %q, want %q", got.Connect, want)
	}
	if want := []string{"web-64K"}; !slices.Equal(got.HTTP, want) {
		t.Errorf("rateProbes.HTTP = %q, want %q", got.HTTP, want)
	}
}

// TestTrendHTTPRate: an http probe's series is its transactions a second
// (its headline), not the throughput it also records: a step in tx/s
// under a steady throughput is found, and told in tx/s.
func TestTrendHTTPRate(t *testing.T) {
	const text = "target: lab\naxes:\n  filter: [\"on\"]\nprobes:\n  - {name: web, kind: http, objects: [64K], duration: 1s}\n"
	spec := filepath.Join(t.TempDir(), "nightly.yaml")
	os.WriteFile(spec, []byte(text), 0o644)
	db := nightlyDB(t, text, 20, map[string]string{"filter": "on"}, func(int) string { return "lab@0000000000aa" }, func(st *store.Store, id int64, i int) {
		rate := 1800.0
		if i >= 10 {
			rate *= 0.7
		}
		for r := range 3 {
			raw := fmt.Sprintf(`{"http": {"object_bytes": 65536, "connections": 10, "seconds": 1, "requests": %d, "succeeded": %d, "failed": 0, "transactions_per_second": %g, "bps": 940e6}}`, int(rate), int(rate), rate*noise(i, r))
			if err := st.RecordSample(t.Context(), store.Sample{Key: store.Key{Run: id, Probe: "web-64K", Round: r}, BitsPerSecond: 940e6 * noise(i, r), Retransmits: -1, Raw: json.RawMessage(raw)}); err != nil {
				t.Fatal(err)
			}
		}
	})
	out, errOut, code := runFwab(t, "trend", spec, "--testbed", "lab", "--db", db)
	if code != exitFailure || !strings.Contains(out, "1 series") || !strings.Contains(out, "tx/s") || !strings.Contains(out, "web-64K") {
		t.Errorf("trend of an http probe = %d, want the step in its tx/s series found (exit 1):\n%s%s", code, out, errOut)
	}
	out, _, _ = runFwab(t, "trend", spec, "--testbed", "lab", "--db", db, "--json")
	var got struct {
		Series []struct {
			Metric string           `json:"metric"`
			Runs   []map[string]any `json:"runs"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || len(got.Series) != 1 {
		t.Fatalf("trend --json: %v: %s", err, out)
	}
	if s := got.Series[0]; s.Metric != "http-rate" || len(s.Runs) != 20 ||
		!slices.Equal(slices.Sorted(maps.Keys(s.Runs[0])), []string{"created", "firmware", "median_transactions_per_second", "run", "transactions_per_second"}) {
		t.Errorf("trend --json's http series = metric %q, first run %v; want metric http-rate and the keys run, created, firmware, transactions_per_second, median_transactions_per_second", s.Metric, s.Runs[:min(1, len(s.Runs))])
	}
}
