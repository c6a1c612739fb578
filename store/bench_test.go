package store

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store/pgtest"
)

// BenchmarkRecordSample is the insert rate of one sweep's samples, each as
// a sweep records it (its own transaction, a 4 KB raw report, 10 DUT
// metric rows), on each backend: go test -run '^$' -bench RecordSample ./store
func BenchmarkRecordSample(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			loc := filepath.Join(b.TempDir(), "results.db")
			if name == "postgres" {
				loc = pgtest.Start(b).NewDatabase(b)
			}
			s, err := Open(b.Context(), loc)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run, err := s.CreateRun(b.Context(), Run{Spec: "x", Target: "lab"})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.AddPoints(b.Context(), run, []Point{{Index: 0, Knobs: map[string]string{}}}); err != nil {
				b.Fatal(err)
			}
			raw, _ := json.Marshal(map[string]string{"client": strings.Repeat("x", 4096)})
			dut := make([]probe.DUTMetrics, 10)
			for i := range dut {
				dut[i] = probe.DUTMetrics{Time: time.Now(), CPUPercent: float64(i)}
			}
			i := 0
			for b.Loop() {
				x := Sample{Key: Key{Run: run, Probe: "up", Round: i}, BitsPerSecond: 9e8, Retransmits: -1, Raw: raw, DUT: dut}
				if err := s.RecordSample(b.Context(), x); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
