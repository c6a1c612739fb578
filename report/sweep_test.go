package report_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// TestReportOfARealSweep runs matrix's own sweep loop against a fake
// firewall whose throughput falls 10 % per 100 generated rules, with 3 %
// noise, and reports the run it recorded: what the report reads is what
// the sweep writes.
func TestReportOfARealSweep(t *testing.T) {
	ctx := t.Context()
	spec, err := matrix.Parse(strings.NewReader(`
axes:
  rules@lan: [0, 100, 300]
  nat.outbound: [automatic, disabled]
baseline: {rules@lan: 0, nat.outbound: automatic}
probes:
  - {name: up, direction: up, duration: 1s}
  - {name: down, direction: down, duration: 1s}
repeats: 6
order: as-written
`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
	if err != nil {
		t.Fatal(err)
	}
	plan, err := matrix.NewPlan(context.Background(), spec, cfg, 9)
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.CreateRun(ctx, store.Run{Spec: string(spec.Raw()), Target: "fake", Seed: int64(plan.Seed), Firmware: "2.7.2-RELEASE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddPoints(ctx, run, plan.StorePoints()); err != nil {
		t.Fatal(err)
	}
	current := cfg.Bytes()
	rng := rand.New(rand.NewPCG(5, 6))
	sweep := &matrix.Sweep{Plan: plan, Store: st, Run: run, Config: cfg,
		Apply: func(_ context.Context, config []byte, _ []configxml.Change) error { current = config; return nil },
		Measure: func(_ context.Context, pr matrix.ProbeRun) probe.Sample {
			c, err := configxml.LoadBytes(current)
			if err != nil {
				t.Fatal(err)
			}
			rules, _ := c.Get("rules@lan")
			var n int
			fmt.Sscan(rules, &n)
			bps := 1e9 * (1 - 0.1*float64(n)/100) * (1 + 0.03*rng.NormFloat64())
			client := reporttest.Iperf3Client(rng, bps/1e6, 3)
			return probe.Sample{Probe: "iperf3", Direction: pr.Iperf3.Direction, ClientCPU: -1, ServerCPU: -1,
				Result: &probe.Iperf3Result{Flow: probe.Flow{ReceivedBPS: bps, SentBPS: bps, Retransmits: 3}}, ClientJSON: client}
		}}
	if err := sweep.Execute(ctx); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, run, store.Done); err != nil {
		t.Fatal(err)
	}

	r, err := report.Load(ctx, st, run)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Knobs, " "); got != "rules@lan nat.outbound" {
		t.Errorf("axes = %q", got)
	}
	if r.Baseline == nil || r.Label(r.Baseline) != "rules@lan=0 nat.outbound=automatic" {
		t.Fatalf("baseline = %v", r.Baseline)
	}
	tab := report.NewTable(r, report.Options{})
	for _, row := range tab.Rows {
		want := map[string]float64{"0": 0, "100": -10, "300": -30}[row.Values[0]]
		for _, c := range row.Cells {
			if c.Mbps.N != 6 {
				t.Errorf("%s %s: n = %d, want 6", row.Label, c.Probe, c.Mbps.N)
			}
			if row.Baseline {
				continue
			}
			if c.Delta == nil || (want != 0 && (!c.Delta.Significant || c.Delta.Pct < want-6 || c.Delta.Pct > want+6)) {
				t.Errorf("%s %s: %+v, want a shown change near %v%%", row.Label, c.Probe, c.Delta, want)
			}
		}
	}
	pv, err := report.NewPivot(r, "rules@lan")
	if err != nil || len(pv.Rows) != 4 {
		t.Errorf("pivot by rules@lan: %v, %+v", err, pv)
	}
	var html bytes.Buffer
	if err := report.Write(&html, r, report.HTML, report.Options{Pivot: "rules@lan"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "Throughput over time, probe ") {
		t.Error("the time series was not read from the recorded iperf3 reports")
	}
}
