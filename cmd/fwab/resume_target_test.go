package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/store"
)

// --resume continues a run only on the firewall it was measured on: on
// another target (another testbed) or once the firewall's config changed
// it is refused as bad input, each difference named with the way out, and
// nothing is measured or changed.
func TestSweepResumeOtherFirewall(t *testing.T) {
	saved := stubProbe
	stubProbe = syntheticProbe
	t.Cleanup(func() { stubProbe = saved })
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	targetsFile, spec, ems := emulatorTargets(t, dir, 2, -1)
	db := filepath.Join(dir, "results.db")
	sweep := func(target string, args ...string) (string, int) {
		_, stderr, code := runFwab(t, append([]string{"sweep", spec, "--target", target, "--targets", targetsFile, "--db", db, "--progress=false"}, args...)...)
		return stderr, code
	}
	if stderr, code := sweep("fw1"); code != exitOK {
		t.Fatalf("sweep on fw1: exit %d:\n%s", code, stderr)
	}
	samples := func() int {
		_, runs := openRuns(t, db)
		return runs[0].Samples
	}
	before := samples()
	fw2 := ems[1].StoredConfig(t)

	stderr, code := sweep("fw2", "--resume", "1")
	if code != exitUsage {
		t.Errorf("resume of fw1's run on fw2: exit %d, want %d:\n%s", code, exitUsage, stderr)
	}
	for _, want := range []string{"target: the run has fw1, this sweep fw2", "testbed: the run has fw1@", "--target fw1", "start a new run"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("resume on fw2: stderr has no %q:\n%s", want, stderr)
		}
	}
	if got := ems[1].StoredConfig(t); !bytes.Equal(got, fw2) {
		t.Errorf("the refused resume changed fw2's config")
	}

	// fw1's config changed since the run: not the run's starting point.
	cfg := ems[0].StoredConfig(t)
	changed := bytes.Replace(cfg, []byte("</hostname>"), []byte("x</hostname>"), 1)
	if bytes.Equal(changed, cfg) {
		t.Fatal("no hostname to change in the emulator's config")
	}
	ems[0].PutFile(t, "/conf/config.xml", changed)
	stderr, code = sweep("fw1", "--resume", "1")
	if code != exitUsage || !strings.Contains(stderr, "original config: the run started from sha256 ") || !strings.Contains(stderr, "put back the config") {
		t.Errorf("resume on fw1 with its config changed: exit %d, want %d naming the config:\n%s", code, exitUsage, stderr)
	}
	if n := samples(); n != before {
		t.Errorf("%d samples after the refused resumes, want %d", n, before)
	}
	if _, runs := openRuns(t, db); runs[0].Status != store.Done {
		t.Errorf("run 1 %s after the refused resumes, want it left done", runs[0].Status)
	}

	// Back to the run's config, the resume goes ahead (nothing is left to measure).
	ems[0].PutFile(t, "/conf/config.xml", cfg)
	if stderr, code := sweep("fw1", "--resume", "1"); code != exitOK {
		t.Errorf("resume on fw1 with the run's config: exit %d:\n%s", code, stderr)
	}
}
