package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/internal/freeport"
	"github.com/fwab/fwab/lab/labtest"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
	"github.com/fwab/fwab/store/pgtest"
)

// stubProbeEnv makes a child fwab measure with syntheticProbe.
const stubProbeEnv = "FWAB_TEST_STUB_PROBE"

// syntheticProbe takes a moment, as a probe does, and reports a plausible
// throughput; it needs no endpoint and no root.
func syntheticProbe(ctx context.Context, pr matrix.ProbeRun) probe.Sample {
	start := time.Now()
	select {
	case <-ctx.Done():
		return probe.Sample{Probe: "iperf3", Direction: pr.Iperf3.Direction, Started: start, Failed: true, Reason: ctx.Err().Error()}
	case <-time.After(100 * time.Millisecond):
	}
	bps := 9e8 * (1 + 0.02*(rand.Float64()-0.5))
	return probe.Sample{Probe: "iperf3", Direction: pr.Iperf3.Direction, Started: start, Elapsed: time.Since(start),
		Result: &probe.Iperf3Result{Flow: probe.Flow{ReceivedBPS: bps, SentBPS: bps}}, ClientCPU: -1, ServerCPU: -1}
}

// concurrentSpec: 3 points, 2 rounds, 2 probes, and the drift check's 2:
// 14 samples a run.
const concurrentSpec = `axes:
  rules@lan: [0, 20, 40]
probes:
  - {name: up, direction: up, duration: 1s}
  - {name: down, direction: down, duration: 1s}
repeats: 2
`

const concurrentSamples = 3*2*2 + 2

// TestConcurrentSweeps runs 8 sweeps at once, each on an emulated pfSense
// of its own, into one results database, kills 2 of them with SIGKILL at
// random moments and resumes them: every run ends done with exactly its
// samples, none twice. It runs on an SQLite file and on a PostgreSQL
// server.
func TestConcurrentSweeps(t *testing.T) {
	// Checks behaviour, not throughput: runs beside the other parallel
	// tests, once the package's comparisons are done.
	t.Parallel()
	if testing.Short() {
		t.Skip("skipping 8 concurrent sweeps in -short mode")
	}
	t.Run("sqlite", func(t *testing.T) {
		testConcurrentSweeps(t, filepath.Join(t.TempDir(), "results.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		testConcurrentSweeps(t, pgtest.Start(t).NewDatabase(t))
	})
}

func testConcurrentSweeps(t *testing.T, db string) {
	const sweeps, killed = 8, 2
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)

	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	targetsFile, spec, _ := emulatorTargets(t, dir, sweeps, -1)
	env := append(os.Environ(), asFwab+"=1", stubProbeEnv+"=1", "XDG_STATE_HOME="+state, "FWAB_DB="+db)
	child := func(args ...string) *exec.Cmd {
		exe, _ := os.Executable()
		cmd := exec.CommandContext(t.Context(), exe, args...)
		cmd.Env = env
		return cmd
	}

	// No schema yet: the 8 sweeps create it at once.
	toKill := map[int]bool{}
	for len(toKill) < killed {
		toKill[rng.IntN(sweeps)] = true
	}
	runID := make([]int64, sweeps)
	outputs := make([]string, sweeps)
	var wg sync.WaitGroup
	runLine := regexp.MustCompile(`^run (\d+): `)
	for i := range sweeps {
		wg.Add(1)
		// The kill comes after 2 to 21 of the run's 24 step lines (apply,
		// settle, probe), and a moment more: while applying, settling,
		// probing or recording.
		after := 2 + rng.IntN(20)
		delay := time.Duration(rng.IntN(150)) * time.Millisecond
		go func() {
			defer wg.Done()
			cmd := child("sweep", spec, "--target", fmt.Sprintf("fw%d", i+1), "--targets", targetsFile, "--progress=false")
			cmd.Stdout = io.Discard
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				outputs[i] = err.Error()
				return
			}
			var b strings.Builder
			sc := bufio.NewScanner(stderr)
			lines := 0
			for sc.Scan() {
				line := sc.Text()
				b.WriteString(line + "\n")
				if m := runLine.FindStringSubmatch(line); m != nil {
					runID[i], _ = strconv.ParseInt(m[1], 10, 64)
				}
				if strings.HasPrefix(line, "[") {
					lines++
				}
				if toKill[i] && lines == after {
					time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
				}
			}
			err := cmd.Wait()
			fmt.Fprintf(&b, "exit: %v\n", err)
			outputs[i] = b.String()
		}()
	}
	wg.Wait()
	for i := range sweeps {
		if runID[i] == 0 {
			t.Fatalf("sweep %d never said its run id:\n%s", i+1, outputs[i])
		}
		if !toKill[i] && !strings.Contains(outputs[i], "exit: <nil>") {
			t.Errorf("sweep %d (not killed) failed:\n%s", i+1, outputs[i])
		}
		if toKill[i] {
			if !strings.Contains(outputs[i], "signal: killed") {
				t.Errorf("sweep %d ended before its kill:\n%s", i+1, outputs[i])
			}
			t.Logf("sweep %d killed:\n%s", i+1, lastLines(outputs[i], 3))
		}
	}
	// The killed ones: recover the firewall, as the error tells the user,
	// then resume.
	for i := range toKill {
		target := fmt.Sprintf("fw%d", i+1)
		if out, err := child("fw", "recover", "--target", target, "--targets", targetsFile).CombinedOutput(); err != nil &&
			!strings.Contains(string(out), "nothing to recover") && !strings.Contains(string(out), "no journal") {
			t.Errorf("fw recover --target %s: %v\n%s", target, err, out)
		}
		out, err := child("sweep", spec, "--target", target, "--targets", targetsFile, "--progress=false", "--resume", strconv.FormatInt(runID[i], 10)).CombinedOutput()
		if err != nil {
			t.Errorf("resume of run %d on %s: %v\n%s", runID[i], target, err, out)
		}
	}

	st, runs := openRuns(t, db)
	if len(runs) != sweeps {
		t.Errorf("%d runs in the database, want %d", len(runs), sweeps)
	}
	for _, r := range runs {
		samples, err := st.Samples(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[store.Key]bool{}
		for _, x := range samples {
			if seen[x.Key] {
				t.Errorf("run %d: %s recorded twice", r.ID, x.Key)
			}
			seen[x.Key] = true
			if x.Failed {
				t.Errorf("run %d: %s failed: %s", r.ID, x.Key, x.Reason)
			}
		}
		if !strings.HasPrefix(r.Testbed, r.Target+"@") {
			t.Errorf("run %d on %s: testbed %q, want %s@FINGERPRINT", r.ID, r.Target, r.Testbed, r.Target)
		}
		if r.Status != store.Done || len(samples) != concurrentSamples {
			t.Errorf("run %d on %s: %s with %d samples, want done with %d", r.ID, r.Target, r.Status, len(samples), concurrentSamples)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// fwab sweep --target a --target b … runs one sweep per target at once;
// one that cannot reach its firewall fails alone.
func TestSweepManyTargets(t *testing.T) {
	saved := stubProbe
	stubProbe = syntheticProbe
	t.Cleanup(func() { stubProbe = saved })
	dir := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	targetsFile, spec, _ := emulatorTargets(t, dir, 3, 2)
	db := filepath.Join(dir, "results.db")

	out, errOut, code := runFwab(t, "sweep", spec, "--target", "fw1", "--target", "fw2", "--target", "fw3", "--targets", targetsFile, "--db", db)
	if code != exitFailure {
		t.Errorf("sweep of 3 targets, one unreachable = %d, want %d\n%s", code, exitFailure, errOut)
	}
	for _, want := range []string{"[fw1] run ", "[fw2] run ", "[fw3] fwab: ", "1 of 3 sweeps failed"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr has no %q:\n%s", want, errOut)
		}
	}
	if !strings.Contains(out, "## fw1") || !strings.Contains(out, "## fw2") {
		t.Errorf("stdout has not both reports:\n%s", out)
	}
	_, runs := openRuns(t, db)
	got := map[string]store.RunStatus{}
	for _, r := range runs {
		got[r.Target] = r.Status
		if r.Samples != concurrentSamples {
			t.Errorf("run %d on %s: %d samples, want %d", r.ID, r.Target, r.Samples, concurrentSamples)
		}
	}
	if len(runs) != 2 || got["fw1"] != store.Done || got["fw2"] != store.Done {
		t.Errorf("runs = %v, want fw1 and fw2 done", got)
	}
	if _, errOut, code := runFwab(t, "sweep", spec, "--target", "fw1", "--target", "fw1", "--targets", targetsFile, "--db", db); code != exitUsage {
		t.Errorf("the same target twice = %d, want a usage error: %s", code, errOut)
	}
}

// emulatorTargets starts n emulated pfSense firewalls and writes a
// targets file naming them fw1…fwN (the one at index dead pointing at a
// port where nothing answers) and the concurrent spec, in dir.
func emulatorTargets(t *testing.T, dir string, n, dead int) (targetsFile, spec string, ems []*labtest.Firewall) {
	t.Helper()
	var targets strings.Builder
	targets.WriteString("targets:\n")
	for i := range n {
		em := labtest.Start(t, labtest.Options{})
		ems = append(ems, em)
		ssh := em.Target.SSH
		port := ssh.Port
		if i == dead {
			port = freeport.TCP(t)
		}
		fmt.Fprintf(&targets, "  fw%d:\n    flavor: pfsense\n    host: %s\n    ssh:\n      port: %d\n      user: admin\n      key_file: %s\n      known_hosts: %s\n      connect_timeout_ms: 2000\n"+
			"    endpoints:\n      client: {addr: 198.18.1.10}\n      server: {addr: 198.19.1.10}\n",
			i+1, em.Target.Host, port, ssh.KeyFile, ssh.KnownHosts)
	}
	targetsFile, spec = filepath.Join(dir, "targets.yaml"), filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(targetsFile, []byte(targets.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(spec, []byte(concurrentSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	return targetsFile, spec, ems
}

// openRuns opens the results database read-only, closed when the test
// ends, and lists its runs.
func openRuns(t *testing.T, db string) (*store.Store, []store.RunSummary) {
	t.Helper()
	st, err := store.OpenReadOnly(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	runs, err := st.Runs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st, runs
}

// A PostgreSQL server lost in the middle of a sweep stops it cleanly: the
// firewall is restored, and once the server is back --resume finishes
// the run with every sample once.
func TestSweepLostDatabase(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	dir := t.TempDir()
	targetsFile, spec, ems := emulatorTargets(t, dir, 1, -1)
	original := ems[0].StoredConfig(t)
	env := append(os.Environ(), asFwab+"=1", stubProbeEnv+"=1", "XDG_STATE_HOME="+filepath.Join(dir, "state"), "FWAB_DB="+db)
	child := func(args ...string) *exec.Cmd {
		exe, _ := os.Executable()
		cmd := exec.CommandContext(t.Context(), exe, args...)
		cmd.Env = env
		return cmd
	}

	cmd := child("sweep", spec, "--target", "fw1", "--targets", targetsFile, "--progress=false")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(stderr)
	stopped := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if !stopped && strings.Contains(sc.Text(), "round 1 probe down") {
			srv.Stop(t) // while the sample is measured
			stopped = true
		}
	}
	err := cmd.Wait()
	if !stopped || err == nil {
		t.Fatalf("the sweep did not fail when its database went away (%v):\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "is out of reach") || !strings.Contains(out.String(), "--resume") {
		t.Errorf("the sweep does not say the database is out of reach and how to go on:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "original config restored") {
		t.Errorf("no restore after the database went away:\n%s", out.String())
	}
	if strings.Contains(out.String(), srv.Password) {
		t.Errorf("the sweep's output shows the database password")
	}
	t.Logf("the sweep, its database gone:\n%s", lastLines(out.String(), 4))
	if got := ems[0].StoredConfig(t); !bytes.Equal(got, original) {
		t.Errorf("the firewall's config.xml is not the original after the sweep stopped")
	}

	srv.Restart(t)
	resume := child("sweep", spec, "--target", "fw1", "--targets", targetsFile, "--progress=false", "--resume", "1")
	if b, err := resume.CombinedOutput(); err != nil {
		t.Fatalf("--resume after the database came back: %v\n%s", err, b)
	}
	st, runs := openRuns(t, db)
	if len(runs) != 1 || runs[0].Status != store.Done || runs[0].Samples != concurrentSamples {
		t.Fatalf("runs = %+v, want one done run with %d samples", runs, concurrentSamples)
	}
	done, err := st.Completed(t.Context(), runs[0].ID)
	if err != nil || len(done) != concurrentSamples {
		t.Errorf("%d distinct samples, %v; want %d", len(done), err, concurrentSamples)
	}
}
