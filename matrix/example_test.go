package matrix_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// session stands in for the *fwapi.Session a real sweep starts with
// fwapi.StartSession.
type session struct{ applies int }

func (s *session) ApplyChecked(context.Context, []byte, []configxml.Change) error {
	s.applies++
	return nil
}

func (s *session) Close(context.Context) error { return nil }

// A sweep run from a library: plan the spec against the firewall's
// config, then let matrix.Run record it, begin the session, run every
// step, restore the firewall and record the final status.
func ExampleRun() {
	ctx := context.Background()
	spec, err := matrix.Parse(strings.NewReader(`
axes:
  rules@lan: [0, 100]
probes:
  - {name: up, direction: up, duration: 10s}
repeats: 2
`))
	if err != nil {
		log.Fatal(err)
	}
	// A real sweep reads this with the driver's ReadConfig.
	cfg, err := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
	if err != nil {
		log.Fatal(err)
	}
	plan, err := matrix.NewPlan(context.Background(), spec, cfg, 1)
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "fwab-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "results.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	fw := &session{}
	run := &matrix.Run{
		Store: st, Plan: plan,
		New:   store.Run{Target: "lab", FwabVersion: "example"},
		Begin: func(ctx context.Context, id int64) (matrix.Session, error) { return fw, nil },
		Sweep: matrix.Sweep{
			Config: cfg,
			// A real sweep runs pr.Iperf3.Measure between two endpoints.
			Measure: func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
				return probe.Sample{Probe: "iperf3", Direction: pr.Iperf3.Direction, Result: &probe.Iperf3Result{Flow: probe.Flow{ReceivedBPS: 941e6, SentBPS: 941e6}}}
			},
		},
	}
	out, err := run.Execute(ctx)
	if err != nil {
		log.Fatal(err) // the run did not begin
	}
	// 2 points × 2 rounds, and the baseline once more at the end (the drift check).
	fmt.Printf("run %d %s: %d samples, %d applies, err %v\n", out.Run, out.Status, out.Stats.Samples, fw.applies, out.Err())
	// Output: run 1 done: 5 samples, 4 applies, err <nil>
}
