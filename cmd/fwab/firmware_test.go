package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// firmwareSpec interleaves two firmwares, kept in boot environments.
const firmwareSpec = `axes:
  firmware: [2.8.0-RELEASE, 2.7.2-RELEASE]
  rules@lan: [0, 10]
probes:
  - {name: up, direction: up, duration: 1s}
repeats: 2
idle: 0s
order: cost-aware
`

// TestSweepFirmwareAxis: a firmware axis over the boot environments that
// fw upgrade --keep left: every sample is measured on its point's
// firmware, each environment ends on its own original config, and the box
// ends booted where it started, with nothing pending for the next boot.
func TestSweepFirmwareAxis(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	if _, errOut, code := fwabRun(t, "fw", "upgrade", "2.8.0-RELEASE", "--keep", "--target", "fw1", "--targets", targets, "--timeout", "30s"); code != 0 {
		t.Fatalf("fw upgrade --keep: %d %s", code, errOut)
	}
	running := fwapi.SHA256Hex(fake.StoredConfig(t))
	keptPath := filepath.Join(fake.Dir, "bootenvs", "2.7.2-RELEASE", "conf", "config.xml")
	kept, err := os.ReadFile(keptPath)
	if err != nil {
		t.Fatal(err)
	}

	saved := stubProbe
	stubProbe = func(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
		s := syntheticProbe(ctx, pr)
		s.Warnings = append(s.Warnings, "measured on "+fake.Version())
		return s
	}
	t.Cleanup(func() { stubProbe = saved })
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("target: fw1\n"+firmwareSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "results.db")
	_, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--db", db, "--progress=false")
	if code != 0 {
		t.Fatalf("sweep = %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "booting boot environment 2.7.2-RELEASE") {
		t.Errorf("the sweep never switched environments:\n%s", errOut)
	}

	st, err := store.OpenReadOnly(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	points, err := st.Points(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := st.Samples(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4*2 {
		t.Fatalf("%d samples, want 8", len(samples))
	}
	for _, s := range samples {
		if want := "measured on " + points[s.Point].Knobs["firmware"]; !strings.Contains(strings.Join(s.Warnings, "\n"), want) {
			t.Errorf("point %d round %d: %q, want it %s", s.Point, s.Round, s.Warnings, want)
		}
	}

	if got := fake.Version(); got != "2.8.0-RELEASE" {
		t.Errorf("the box ends on %s, want the 2.8.0-RELEASE it started on", got)
	}
	envs, err := fake.BootEnvs()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		if e.Booted != (e.Name == "default") || e.BootOnce || e.BootFS != (e.Name == "default") {
			t.Errorf("environment %+v: want default booted and booting next, nothing pending", e)
		}
	}
	if got := fwapi.SHA256Hex(fake.StoredConfig(t)); got != running {
		t.Errorf("the running environment's config ends as %s, want its original %s", got[:12], running[:12])
	}
	if got, err := os.ReadFile(keptPath); err != nil || string(got) != string(kept) {
		t.Errorf("the kept environment's config changed (%v)", err)
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Error("the sweep left the lock")
	}
	dir, _ := stateDir(&fwapi.Target{Name: "fw1", Host: fake.Target.Host, SSH: fake.Target.SSH})
	if _, err := os.Stat(filepath.Join(dir, fwapi.BootJournalFile)); err == nil {
		t.Error("the boot journal is left")
	}

	t.Run("an environment whose config differs only in version and revision runs", func(t *testing.T) {
		other := strings.Replace(string(kept), "<revision>", "<revision><description>saved by another firmware</description>", 1)
		other = regexp.MustCompile(`<version>[^<]*</version>`).ReplaceAllString(other, "<version>99.9</version>")
		if other == string(kept) || !strings.Contains(other, "<version>99.9</version>") {
			t.Fatalf("could not change the kept config's version and revision")
		}
		os.WriteFile(keptPath, []byte(other), 0o644)
		t.Cleanup(func() { os.WriteFile(keptPath, kept, 0o644) })
		if out, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--dry-run"); code != 0 || strings.Contains(errOut, "differs") {
			t.Errorf("dry run = %d:\n%s%s\nwant it planned: a config version and revision are every firmware's own", code, out, errOut)
		}
	})

	t.Run("an environment whose config differs beyond the knobs is named", func(t *testing.T) {
		os.WriteFile(keptPath, []byte(strings.Replace(string(kept), "<hostname>", "<hostname>other", 1)), 0o644)
		t.Cleanup(func() { os.WriteFile(keptPath, kept, 0o644) })
		versionBefore, actionsBefore := fake.Version(), len(fake.Actions())
		_, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db"), "--progress=false")
		if code != 2 || !strings.Contains(errOut, "boot environment 2.7.2-RELEASE") || !strings.Contains(errOut, "hostname") || !strings.Contains(errOut, "--allow-config-differences") || !strings.Contains(errOut, "nothing was changed") {
			t.Errorf("sweep = %d: %s; want exit 2 naming the environment, the difference and the way on", code, errOut)
		}
		if fake.Version() != versionBefore || len(fake.Actions()) != actionsBefore || fwapi.SHA256Hex(fake.StoredConfig(t)) != running || len(fake.Glob(fwapi.LockDir)) != 0 {
			t.Errorf("the refused sweep changed the box: %s, actions %v", fake.Version(), fake.Actions()[actionsBefore:])
		}
		_, errOut, code = fwabRun(t, "sweep", spec, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db"), "--progress=false", "--allow-config-differences")
		if code != 0 || !strings.Contains(errOut, "warning: boot environment 2.7.2-RELEASE") {
			t.Errorf("sweep --allow-config-differences = %d: %s; want it run, warning of the difference", code, errOut)
		}
	})

	t.Run("a version no environment holds names those it has", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		os.WriteFile(bad, []byte("target: fw1\n"+strings.Replace(firmwareSpec, "2.7.2-RELEASE]", "2.8.1-RELEASE]", 1)), 0o644)
		_, errOut, code := fwabRun(t, "sweep", bad, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db"), "--progress=false")
		if code == 0 || !strings.Contains(errOut, "no boot environment holds 2.8.1-RELEASE") || !strings.Contains(errOut, "2.7.2-RELEASE (2.7.2-RELEASE)") {
			t.Errorf("sweep = %d: %s", code, errOut)
		}
	})
}
