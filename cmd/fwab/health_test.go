package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// TestSweepStopsWhenSuricataCrashes: Suricata crashes in the middle of a
// probe (the lab's kill fault) and stays down, as it does on the product;
// the sweep sees it in the box's health, keeps that sample as invalid and
// stops, naming the service, instead of measuring a box without its IDS
// under the point's name; the firewall ends on its original config.
func TestSweepStopsWhenSuricataCrashes(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	original := fwapi.SHA256Hex(fake.StoredConfig(t))
	var once sync.Once
	saved := stubProbe
	stubProbe = func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
		s := syntheticProbe(ctx, pr)
		once.Do(func() {
			if err := fake.KillService("suricata"); err != nil {
				t.Error(err)
			}
		})
		return s
	}
	serviceComeback = time.Second // the crashed Suricata does not come back
	t.Cleanup(func() { stubProbe, serviceComeback = saved, 0 })
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("target: fw1\naxes:\n  offload.tso: [on, off]\nfixed: {ids@lan: ids}\nrepeats: 2\ndrift_check: false\nprobes:\n  - {name: up, direction: up, duration: 1s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "results.db")
	_, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--db", db, "--progress=false")
	if code == 0 || !strings.Contains(errOut, "suricata stopped during probe up and did not come back") {
		t.Fatalf("sweep = %d, want it stopped naming Suricata:\n%s", code, errOut)
	}
	st, err := store.OpenReadOnly(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	samples, err := st.Samples(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 1 || !samples[0].Failed || !strings.HasPrefix(samples[0].Reason, probe.InvalidReason+"suricata stopped (pid ") {
		t.Errorf("samples %+v: want the one the crash invalidated", samples)
	}
	if got := fwapi.SHA256Hex(fake.StoredConfig(t)); got != original {
		t.Errorf("the firewall ends on config %s, want its original %s", got[:12], original[:12])
	}
}
