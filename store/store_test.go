package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fwab/fwab/probe"
)

func newRun(t *testing.T, s *Store) int64 {
	t.Helper()
	id, err := s.CreateRun(t.Context(), Run{
		Spec: "probes:\n  tcp-up: {iperf3: {duration: 10s}}\n", Seed: 42, FwabVersion: "v0.1.0",
		Target: "lab", Testbed: "lab@0123456789ab", TargetInfo: json.RawMessage(`{"flavor":"pfsense","version":"2.7.2-RELEASE"}`),
		Firmware: "2.7.2-RELEASE", ConfigHash: strings.Repeat("ab", 32),
	})
	if err != nil {
		t.Fatalf("CreateRun() = %v", err)
	}
	if err := s.AddPoints(t.Context(), id, []Point{
		{Index: 0, Knobs: map[string]string{"offload.tso": "on"}},
		{Index: 1, Knobs: map[string]string{"offload.tso": "off"}},
	}); err != nil {
		t.Fatalf("AddPoints() = %v", err)
	}
	return id
}

var nanEqual = cmpopts.EquateNaNs()

func TestRoundTrip(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := b.open(t)
		ctx := t.Context()
		run := newRun(t, s)

		gotRun, err := s.Run(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if gotRun.Status != Running || gotRun.Testbed != "lab@0123456789ab" || gotRun.SpecHash != HashSpec(gotRun.Spec) || gotRun.Seed != 42 || string(gotRun.TargetInfo) != `{"flavor":"pfsense","version":"2.7.2-RELEASE"}` {
			t.Errorf("Run() = %+v", gotRun)
		}

		t0 := time.Date(2026, 11, 30, 4, 0, 0, 123456789, time.UTC)
		want := []Sample{
			{
				Key: Key{Run: run, Point: 0, Probe: "tcp-up", Round: 0, Repeat: 0}, Direction: "up", Started: t0, Elapsed: 12 * time.Second,
				BitsPerSecond: 9.4e8, SentBPS: 9.41e8, BidirBPS: Unknown, Retransmits: 12, ClientCPU: 41.5, ServerCPU: 22,
				RTTms: 0.8, JitterMS: Unknown, LostPercent: Unknown, PingAvgMS: 1.25, PingLossPercent: 0, PowerWatts: 23.5,
				EndpointCPUBound: false, Warnings: []string{"client report: something"}, Raw: json.RawMessage(`{"port":20001}`),
				DUT: []probe.DUTMetrics{
					{Time: t0, CPUPercent: 55, TempCelsius: 48, MemUsedPct: 31, MbufsInUse: 1024},
					{Time: t0.Add(time.Second), CPUPercent: 61, MemUsedPct: 31},
				},
			},
			{
				Key: Key{Run: run, Point: 1, Probe: "tcp-up", Round: 0, Repeat: 0}, Direction: "up", Started: t0.Add(time.Minute),
				BitsPerSecond: Unknown, SentBPS: Unknown, BidirBPS: Unknown, Retransmits: -1, ClientCPU: Unknown, ServerCPU: Unknown,
				RTTms: Unknown, JitterMS: Unknown, LostPercent: Unknown, PingAvgMS: Unknown, PingLossPercent: Unknown, PowerWatts: Unknown,
				Failed: true, Reason: "client 198.18.1.10 cannot reach 198.19.1.10 port 20001", Warnings: []string{}, Raw: json.RawMessage(`{}`),
			},
		}
		for _, x := range want {
			if err := s.RecordSample(ctx, x); err != nil {
				t.Fatalf("RecordSample(%s) = %v", x.Key, err)
			}
		}
		got, err := s.Samples(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, nanEqual); diff != "" {
			t.Errorf("Samples() mismatch (-want +got):\n%s", diff)
		}

		err = s.RecordSample(ctx, want[0])
		if !errors.Is(err, ErrDuplicate) {
			t.Errorf("RecordSample(same key again) = %v, want ErrDuplicate", err)
		}
		done, err := s.Completed(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[Key]bool{want[0].Key: true, want[1].Key: true}, done); diff != "" {
			t.Errorf("Completed() mismatch (-want +got):\n%s", diff)
		}

		if err := s.SetPointStatus(ctx, run, 1, Broken, "apply: rollback fired"); err != nil {
			t.Fatal(err)
		}
		points, err := s.Points(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		wantPoints := []Point{
			{Index: 0, Knobs: map[string]string{"offload.tso": "on"}, Status: Pending},
			{Index: 1, Knobs: map[string]string{"offload.tso": "off"}, Status: Broken, Reason: "apply: rollback fired"},
		}
		if diff := cmp.Diff(wantPoints, points); diff != "" {
			t.Errorf("Points() mismatch (-want +got):\n%s", diff)
		}

		events := []Event{{Time: t0, Kind: "apply", Point: 0, Message: "offload.tso=on"}, {Time: t0.Add(time.Second), Kind: "warning", Point: -1, Message: "slow"}}
		for _, e := range events {
			if err := s.RecordEvent(ctx, run, e); err != nil {
				t.Fatal(err)
			}
		}
		gotEvents, err := s.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(events, gotEvents); diff != "" {
			t.Errorf("Events() mismatch (-want +got):\n%s", diff)
		}

		if err := s.FinishRun(ctx, run, Done); err != nil {
			t.Fatal(err)
		}
		runs, err := s.Runs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || runs[0].Status != Done || runs[0].Finished.IsZero() || runs[0].Points != 2 || runs[0].Samples != 2 || runs[0].FailedSamples != 1 {
			t.Errorf("Runs() = %+v, want one done run with 2 points, 2 samples, 1 failed", runs)
		}
	})
}

func TestErrors(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, path := b.open(t)
		ctx := t.Context()
		run := newRun(t, s)
		tests := []struct {
			name string
			err  error
			want string
			is   error
		}{
			{"unknown run", func() error { _, err := s.Run(ctx, 999); return err }(), "run 999: not found", ErrNotFound},
			{"finish unknown run", s.FinishRun(ctx, 999, Done), "run 999", ErrNotFound},
			{"bad finish status", s.FinishRun(ctx, run, Running), `status "running" is not done`, nil},
			{"spec changed on resume", s.AddPoints(ctx, run, []Point{{Index: 1, Knobs: map[string]string{"offload.tso": "on"}}}), "the spec changed since the run started", nil},
			{"sample for an unknown point", s.RecordSample(ctx, Sample{Key: Key{Run: run, Point: 7, Probe: "x"}}), "foreign key", nil},
			{"sample without probe", s.RecordSample(ctx, Sample{Key: Key{Run: run}}), "probe name is empty", nil},
			{"bad raw", s.RecordSample(ctx, Sample{Key: Key{Run: run, Probe: "x"}, Raw: json.RawMessage("{")}), "not valid JSON", nil},
			{"run without target", func() error { _, err := s.CreateRun(ctx, Run{}); return err }(), "target name is empty", nil},
		}
		if b.name == "sqlite" {
			tests = append(tests, struct {
				name string
				err  error
				want string
				is   error
			}{"path with ?", func() error { _, err := Open(ctx, path+"?mode=ro"); return err }(), "not allowed", nil})
		}
		for _, tt := range tests {
			// The databases word their errors differently ("FOREIGN KEY
			// constraint failed", "violates foreign key constraint").
			if tt.err == nil || !strings.Contains(strings.ToLower(tt.err.Error()), strings.ToLower(tt.want)) || (tt.is != nil && !errors.Is(tt.err, tt.is)) {
				t.Errorf("%s: error = %v, want %q", tt.name, tt.err, tt.want)
			}
		}
		// Adding the same points again (a resume) is fine.
		if err := s.AddPoints(ctx, run, []Point{{Index: 0, Knobs: map[string]string{"offload.tso": "on"}}}); err != nil {
			t.Errorf("AddPoints(same points) = %v, want nil", err)
		}
	})
}

func TestSchemaVersion(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, path := b.open(t)
		var v int
		if err := s.DB().QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
			t.Fatalf("schema version = %d, %v; want %d", v, err, len(migrations))
		}
		s.Close()
		// Reopening applies nothing twice.
		s2, err := Open(t.Context(), path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if _, err := s2.DB().Exec(`UPDATE schema_version SET version = 99`); err != nil {
			t.Fatal(err)
		}
		s2.Close()
		_, err = Open(t.Context(), path)
		if err == nil || !strings.Contains(err.Error(), "newer than this fwab knows") {
			t.Errorf("Open(newer schema) = %v, want a 'newer' error", err)
		}
	})
}

func TestPragmas(t *testing.T) {
	s, _ := sqliteOnly.open(t)
	for _, tc := range []struct{ pragma, want string }{{"journal_mode", "wal"}, {"synchronous", "2"}, {"foreign_keys", "1"}} {
		var got string
		if err := s.DB().QueryRow("PRAGMA " + tc.pragma).Scan(&got); err != nil || got != tc.want {
			t.Errorf("PRAGMA %s = %q, %v; want %q", tc.pragma, got, err, tc.want)
		}
	}
}

func TestFromProbe(t *testing.T) {
	ps := probe.Sample{
		Probe: "iperf3", Direction: probe.Up, Port: 20001, ClientCPU: 40, ServerCPU: -1,
		Result:     &probe.Iperf3Result{Flow: probe.Flow{ReceivedBPS: 1e9, SentBPS: 1.1e9, Retransmits: 3}, RTT: &probe.RTT{Mean: 1500 * time.Microsecond}},
		Ping:       &probe.PingStats{Transmitted: 10, Received: 10, Avg: 2 * time.Millisecond},
		Power:      []probe.PowerReading{{Watts: 20}, {Watts: 30}},
		DUT:        []probe.DUTMetrics{{CPUPercent: 80}},
		ClientJSON: []byte(`{"end":{}}`), ServerJSON: []byte("not json"),
		Warnings: []string{"w"},
	}
	k := Key{Run: 1, Point: 2, Probe: "tcp-up", Round: 3, Repeat: 4}
	got := FromProbe(k, ps)
	if got.BitsPerSecond != 1e9 || got.Retransmits != 3 || got.RTTms != 1.5 || got.PingAvgMS != 2 || got.PowerWatts != 25 || got.ClientCPU != 40 || !math.IsNaN(got.ServerCPU) || !math.IsNaN(got.JitterMS) || len(got.DUT) != 1 {
		t.Errorf("FromProbe() = %+v", got)
	}
	var raw map[string]any
	if err := json.Unmarshal(got.Raw, &raw); err != nil {
		t.Fatalf("raw is not JSON: %v", err)
	}
	if raw["server_text"] != "not json" || raw["client"] == nil {
		t.Errorf("raw = %v, want the client report as JSON and the server's as text", raw)
	}
}

func TestConcurrentReader(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		w, path := b.open(t)
		run := newRun(t, w)
		r, err := Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()

		const n = 150
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		readErr := make(chan error, 1)
		reads := 0
		go func() {
			last := 0
			for ctx.Err() == nil {
				got, err := r.Samples(ctx, run)
				if err != nil {
					if ctx.Err() != nil {
						break
					}
					readErr <- err
					return
				}
				if len(got) < last {
					readErr <- errors.New("a reader saw the sample count go down")
					return
				}
				for _, x := range got {
					if len(x.DUT) != 2 {
						readErr <- errors.New("a reader saw a sample without its DUT metrics")
						return
					}
				}
				last = len(got)
				reads++
			}
			readErr <- nil
		}()
		for i := range n {
			x := Sample{Key: Key{Run: run, Point: i % 2, Probe: "tcp-up", Round: i / 2}, BitsPerSecond: float64(i), Raw: json.RawMessage(`{}`),
				DUT: []probe.DUTMetrics{{Time: time.Now(), CPUPercent: 1}, {Time: time.Now(), CPUPercent: 2}}}
			if err := w.RecordSample(t.Context(), x); err != nil {
				t.Fatalf("RecordSample %d while reading: %v", i, err)
			}
		}
		cancel()
		if err := <-readErr; err != nil {
			t.Fatalf("reader: %v", err)
		}
		if reads < 2 {
			t.Errorf("the reader completed only %d reads while %d samples were written", reads, n)
		}
		got, err := r.Samples(t.Context(), run)
		if err != nil || len(got) != n {
			t.Errorf("after writing: %d samples, %v; want %d", len(got), err, n)
		}
	})
}

// Many fwab processes starting at once on a new database all get it, with
// its schema made once.
func TestConcurrentOpen(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		loc := b.fresh(t)
		const n = 8
		errs := make(chan error, n)
		for range n {
			go func() {
				s, err := Open(t.Context(), loc)
				if err == nil {
					_, err = s.CreateRun(t.Context(), Run{Spec: "x", Target: "lab"})
					s.Close()
				}
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("Open at the same time as %d others: %v", n-1, err)
			}
		}
	})
}

// A database of the first schema gains testbeds: its runs have none.
func TestMigrateFromFirstSchema(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		all := migrations
		migrations = all[:1]
		s, loc := b.open(t)
		migrations = all
		var id int64
		if err := s.queryRow(t.Context(), `INSERT INTO runs (created, spec, spec_hash, seed, fwab_version, target_name)
			VALUES ('2026-01-01T00:00:00Z', 'x', 'h', 1, 'v0', 'lab') RETURNING id`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		s.Close()
		s, err := Open(t.Context(), loc)
		if err != nil {
			t.Fatalf("Open(schema 1) = %v", err)
		}
		defer s.Close()
		r, err := s.Run(t.Context(), id)
		if err != nil || r.Testbed != "" || r.Target != "lab" {
			t.Errorf("Run(%d) after migrating = %+v, %v; want target lab, no testbed", id, r, err)
		}
	})
}

// History and the fwab_samples_by_run view give the measured samples of
// complete runs only.
func TestHistory(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := b.open(t)
		ctx := t.Context()
		done, open := newRun(t, s), newRun(t, s)
		for _, run := range []int64{done, open} {
			for i, bps := range []float64{9e8, 8e8, Unknown} {
				x := Sample{Key: Key{Run: run, Point: i % 2, Probe: "tcp-up", Round: i}, BitsPerSecond: bps, Retransmits: -1}
				if err := s.RecordSample(ctx, x); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.RecordSample(ctx, Sample{Key: Key{Run: run, Probe: "tcp-up", Round: 9}, BitsPerSecond: 1, Failed: true}); err != nil {
				t.Fatal(err)
			}
		}
		// A connect probe's samples: no throughput, the rate in the report;
		// a failed one, a drift check's (round -1) and one whose report
		// has no rate are left out.
		for i, x := range []struct {
			rate   float64
			round  int
			failed bool
			raw    string
		}{{1234.5, 0, false, ""}, {1200, 1, false, ""}, {9999, 2, true, ""}, {8888, DriftRound, false, ""}, {0, 3, false, `{"port": 5201}`}} {
			raw := x.raw
			if raw == "" {
				raw = fmt.Sprintf(`{"connect": {"per_second": %g}}`, x.rate)
			}
			if err := s.RecordSample(ctx, Sample{Key: Key{Run: done, Point: 1, Probe: "cps", Round: x.round, Repeat: i}, BitsPerSecond: Unknown, Retransmits: -1, Failed: x.failed, Raw: json.RawMessage(raw)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.FinishRun(ctx, done, Done); err != nil {
			t.Fatal(err)
		}
		r, _ := s.Run(ctx, done)
		got, err := s.History(ctx, r.SpecHash, nil, RateProbes{Connect: []string{"cps"}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != done || got[0].Testbed != r.Testbed || got[0].Created.IsZero() || got[0].Knobs[1] != `{"offload.tso":"off"}` ||
			len(got[0].Measured) != 3 || !reflect.DeepEqual(got[0].Measured[0], Measured{Point: 0, Probe: "tcp-up", BitsPerSecond: []float64{9e8}}) {
			t.Errorf("History() = %+v; want the done run with its two measured samples and its connect probe's", got)
		}
		if len(got) == 1 && !slices.ContainsFunc(got[0].Measured, func(m Measured) bool {
			return reflect.DeepEqual(m, Measured{Point: 1, Probe: "cps", ConnectsPerSecond: []float64{1234.5, 1200}})
		}) {
			t.Errorf("History() measured %+v; want the connect probe's two rates at point 1", got[0].Measured)
		}
		if none, err := s.History(ctx, r.SpecHash, func(HistoryRun) bool { return false }, RateProbes{}); err != nil || len(none) != 0 {
			t.Errorf("History(keep none) = %v, %v", none, err)
		}
		var n int
		var mbps float64
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*), max(mbps) FROM fwab_samples_by_run`).Scan(&n, &mbps); err != nil || n != 6 || mbps != 900 {
			t.Errorf("fwab_samples_by_run: %d rows, max %v Mbit/s, %v; want 6 rows (four without a throughput figure), 900", n, mbps, err)
		}
	})
}

// History reads the figures of many runs in parts at once: each kept run
// gets exactly its own figures, on both backends alike, with another
// testbed's runs of the spec between them.
func TestHistoryInParts(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4)) // four parts
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := b.open(t)
		ctx := t.Context()
		want := map[int64][]Measured{}
		var hash string
		for i := range 9 {
			id := newRun(t, s)
			if i%3 == 2 { // another box's run of the same spec
				if _, err := s.DB().ExecContext(ctx, s.Rebind(`UPDATE runs SET testbed = ? WHERE id = ?`), "apu2@0123456789ab", id); err != nil {
					t.Fatal(err)
				}
			}
			for point := range 2 {
				for _, probe := range []string{"tcp-down", "tcp-up"} {
					m := Measured{Point: point, Probe: probe}
					for repeat := range 3 {
						bps := float64(1e8*(i+1)) + float64(point*1000+repeat) + 0.125
						if err := s.RecordSample(ctx, Sample{Key: Key{Run: id, Point: point, Probe: probe, Repeat: repeat}, BitsPerSecond: bps, Retransmits: -1}); err != nil {
							t.Fatal(err)
						}
						m.BitsPerSecond = append(m.BitsPerSecond, bps)
					}
					if i%3 != 2 {
						want[id] = append(want[id], m)
					}
				}
			}
			if err := s.FinishRun(ctx, id, Done); err != nil {
				t.Fatal(err)
			}
			r, _ := s.Run(ctx, id)
			hash = r.SpecHash
		}
		got, err := s.History(ctx, hash, func(h HistoryRun) bool { return h.Testbed == "lab@0123456789ab" }, RateProbes{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("History() = %d runs, want %d", len(got), len(want))
		}
		for _, h := range got {
			m := h.Measured
			slices.SortFunc(m, func(a, b Measured) int {
				if a.Point != b.Point {
					return a.Point - b.Point
				}
				return strings.Compare(a.Probe, b.Probe)
			})
			for _, x := range m {
				slices.Sort(x.BitsPerSecond)
			}
			if !reflect.DeepEqual(m, want[h.ID]) {
				t.Errorf("History() run %d = %+v; want %+v", h.ID, m, want[h.ID])
			}
		}
	})
}

// The drift check's re-measurement (round DriftRound) is kept with the
// run's samples, stays out of History and the samples view, and is what
// the drift view holds; rounds below it are refused.
func TestDriftRound(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := b.open(t)
		ctx := t.Context()
		run := newRun(t, s)
		for _, k := range []Key{{Run: run, Probe: "tcp-up", Round: 0}, {Run: run, Probe: "tcp-up", Round: 1}, {Run: run, Probe: "tcp-up", Round: DriftRound}} {
			bps := 9e8
			if k.Drift() {
				bps = 8.4e8
			}
			if err := s.RecordSample(ctx, Sample{Key: k, BitsPerSecond: bps, Retransmits: -1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.RecordSample(ctx, Sample{Key: Key{Run: run, Probe: "tcp-up", Round: -2}, Retransmits: -1}); err == nil || !strings.Contains(err.Error(), "rounds count from 0") {
			t.Errorf("round -2 recorded: %v", err)
		}
		if err := s.FinishRun(ctx, run, Done); err != nil {
			t.Fatal(err)
		}
		all, err := s.Samples(ctx, run)
		if err != nil || len(all) != 3 || !all[2].Drift() || all[2].BitsPerSecond != 8.4e8 {
			t.Fatalf("Samples() = %d samples, %v; want 3, the last the drift check", len(all), err)
		}
		done, err := s.Completed(ctx, run)
		if err != nil || !done[Key{Run: run, Probe: "tcp-up", Round: DriftRound}] {
			t.Errorf("Completed() = %v, %v: a resume would measure the drift check again", done, err)
		}
		r, _ := s.Run(ctx, run)
		h, err := s.History(ctx, r.SpecHash, nil, RateProbes{})
		if err != nil || len(h) != 1 || len(h[0].Measured) != 1 || len(h[0].Measured[0].BitsPerSecond) != 2 {
			t.Errorf("History() = %+v, %v; want the two regular samples only", h, err)
		}
		var n int
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*) FROM fwab_samples_by_run`).Scan(&n); err != nil || n != 2 {
			t.Errorf("fwab_samples_by_run: %d rows, %v; want the 2 regular ones", n, err)
		}
		var mbps float64
		if err := s.DB().QueryRowContext(ctx, `SELECT count(*), max(mbps) FROM fwab_drift_by_run`).Scan(&n, &mbps); err != nil || n != 1 || mbps != 840 {
			t.Errorf("fwab_drift_by_run: %d rows, %v Mbit/s, %v; want 1 row of 840", n, mbps, err)
		}
	})
}
