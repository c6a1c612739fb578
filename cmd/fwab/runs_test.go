package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
	"github.com/google/go-cmp/cmp"
)

// resultsDB writes a small results database: one run with two points, a
// good sample, a failed one and an event.
func resultsDB(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "results.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC)
	run, err := s.CreateRun(ctx, store.Run{Created: t0, Spec: "spec", Seed: 7, FwabVersion: "v0.1.0", Target: "lab",
		TargetInfo: json.RawMessage(`{"flavor":"pfsense"}`), Firmware: "2.7.2-RELEASE", ConfigHash: "c0ffee"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.AddPoints(ctx, run, []store.Point{
		{Index: 0, Knobs: map[string]string{"ids@lan": "off", "offload.tso": "on"}, Status: store.Valid},
		{Index: 1, Knobs: map[string]string{"ids@lan": "ips-inline", "offload.tso": "off"}, Status: store.Broken, Reason: "verify: TSO4 still on igb1"},
	}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []store.Sample{
		{Key: store.Key{Run: run, Point: 0, Probe: "tcp-up"}, Direction: "up", Started: t0, Elapsed: 11 * time.Second,
			BitsPerSecond: 941.25e6, SentBPS: 942e6, BidirBPS: store.Unknown, Retransmits: 17, ClientCPU: 93.4, ServerCPU: 20,
			RTTms: store.Unknown, JitterMS: store.Unknown, LostPercent: store.Unknown, PingAvgMS: store.Unknown, PingLossPercent: store.Unknown, PowerWatts: store.Unknown,
			EndpointCPUBound: true, Warnings: []string{"client CPU 93% > 90%"}, DUT: []probe.DUTMetrics{{Time: t0, CPUPercent: 50}}},
		{Key: store.Key{Run: run, Point: 0, Probe: "tcp-up", Repeat: 1}, Direction: "up", Started: t0.Add(time.Minute),
			BitsPerSecond: store.Unknown, SentBPS: store.Unknown, BidirBPS: store.Unknown, Retransmits: -1, ClientCPU: store.Unknown, ServerCPU: store.Unknown,
			RTTms: store.Unknown, JitterMS: store.Unknown, LostPercent: store.Unknown, PingAvgMS: store.Unknown, PingLossPercent: store.Unknown, PowerWatts: store.Unknown,
			Failed: true, Reason: "iperf3 is not installed on client"},
	} {
		if err := s.RecordSample(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordEvent(ctx, run, store.Event{Time: t0, Kind: "apply", Point: 1, Message: "ids@lan=ips-inline"}); err != nil {
		t.Fatal(err)
	}
	return path
}

func runFwab(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestRunsList(t *testing.T) {
	db := resultsDB(t)
	out, errOut, code := runFwab(t, "runs", "list", "--db", db)
	if code != 0 {
		t.Fatalf("runs list exit %d: %s", code, errOut)
	}
	want := "RUN\tCREATED\tSTATUS\tTESTBED\tFIRMWARE\tPOINTS\tSAMPLES\tFAILED\tSPEC\n" +
		"1\t2026-11-30T04:00:00Z\trunning\tlab\t2.7.2-RELEASE\t2\t2\t1\t" + store.HashSpec("spec")[:12] + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("runs list mismatch (-want +got):\n%s", diff)
	}

	out, _, code = runFwab(t, "runs", "list", "--db", db, "--json")
	var runs []map[string]any
	if err := json.Unmarshal([]byte(out), &runs); err != nil || code != 0 {
		t.Fatalf("runs list --json: %v, exit %d: %s", err, code, out)
	}
	if len(runs) != 1 || runs[0]["id"] != 1.0 || runs[0]["failed_samples"] != 1.0 || runs[0]["target"] != "lab" {
		t.Errorf("runs list --json = %v", runs)
	}
}

func TestRunsShow(t *testing.T) {
	db := resultsDB(t)
	out, errOut, code := runFwab(t, "runs", "show", "1", "--db", db)
	if code != 0 {
		t.Fatalf("runs show exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"run\t1\n", "seed\t7\n", "config hash\tc0ffee\n",
		"POINT\tSTATUS\tKNOBS\tREASON\n",
		"0\tvalid\tids@lan=off offload.tso=on\t-\n",
		"1\tfailed\tids@lan=ips-inline offload.tso=off\tverify: TSO4 still on igb1\n",
		"0\ttcp-up\t0\t0\tup\t941.2\t17\t93\t20\tendpoint-cpu,1-warnings\t-\n",
		"0\ttcp-up\t0\t1\tup\t-\t-\t-\t-\tfailed\tiperf3 is not installed on client\n",
		"2026-11-30T04:00:00Z\tapply\t1\tids@lan=ips-inline\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = runFwab(t, "runs", "show", "1", "--db", db, "--json")
	var got struct {
		Run     map[string]any   `json:"run"`
		Points  []map[string]any `json:"points"`
		Samples []map[string]any `json:"samples"`
		Events  []map[string]any `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 {
		t.Fatalf("runs show --json: %v, exit %d: %s", err, code, out)
	}
	if got.Run["spec"] != "spec" || len(got.Points) != 2 || len(got.Samples) != 2 || len(got.Events) != 1 {
		t.Errorf("runs show --json = %+v", got)
	}
	if got.Samples[1]["bits_per_second"] != nil || got.Samples[0]["bits_per_second"] != 941.25e6 || got.Samples[0]["dut_samples"] != 1.0 {
		t.Errorf("samples = %v, want unknown figures as null", got.Samples)
	}
}

func TestRunsErrors(t *testing.T) {
	db := resultsDB(t)
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"runs", "show", "9", "--db", db}, exitUsage, "no run 9 in " + db},
		{[]string{"runs", "show", "abc", "--db", db}, 2, `run "abc": give the run's number`},
		{[]string{"runs", "show", "--db", db}, 2, "accepts 1 arg"},
		{[]string{"runs", "list", "--db", filepath.Join(t.TempDir(), "none.db")}, 2, "no results database at"},
	}
	for _, tt := range tests {
		_, errOut, code := runFwab(t, tt.args...)
		if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
			t.Errorf("fwab %q = exit %d, stderr %q; want exit %d and %q", tt.args, code, errOut, tt.wantCode, tt.wantErr)
		}
	}
}

// TestRunsShowInventory: the inventory a sweep recorded is printed as rows,
// and a link that is not full duplex is a warning.
func TestRunsShowInventory(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "results.db")
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	info := `{"Flavor":"pfsense","inventory":{"cpu_model":"AMD GX-420CA","cores":4,"packages":[{"name":"pfSense","version":"2.7.2"}],` +
		`"nics":[{"name":"re0","driver":"re","media":"1000baseT <full-duplex>"},{"name":"re1","driver":"re","media":"100baseTX <half-duplex>"}]}}`
	if _, err := s.CreateRun(ctx, store.Run{Created: time.Now(), Spec: "spec", Target: "lab", TargetInfo: json.RawMessage(info)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	out, errOut, code := runFwab(t, "runs", "show", "1", "--db", path)
	if code != 0 {
		t.Fatalf("runs show exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"target info\t{\"Flavor\":\"pfsense\"}\n",
		"cpu\tAMD GX-420CA, 4 cores\n",
		"packages\tpfSense 2.7.2\n",
		"nic re0\tre, 1000baseT <full-duplex>\n",
		"nic re1\tre, 100baseTX <half-duplex>\n",
		"warning\tre1 (re) negotiated \"100baseTX <half-duplex>\", not full duplex",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("runs show output lacks %q:\n%s", want, out)
		}
	}
}
