package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/probe"
)

const (
	childDBEnv  = "FWAB_STORE_KILL_CHILD_DB"
	childRunEnv = "FWAB_STORE_KILL_CHILD_RUN"
	perSample   = 3 // DUT metrics rows per sample
	planned     = 400
)

// killKey is the i-th sample of the test plan.
func killKey(run int64, i int) Key {
	return Key{Run: run, Point: i % 2, Probe: "tcp-up", Round: i / 2, Repeat: 0}
}

func killSample(run int64, i int) Sample {
	dut := make([]probe.DUTMetrics, perSample)
	for j := range dut {
		dut[j] = probe.DUTMetrics{Time: time.Now(), CPUPercent: float64(j)}
	}
	raw, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 4096)})
	return Sample{Key: killKey(run, i), BitsPerSecond: float64(i), Raw: raw, DUT: dut}
}

// TestKillChild is the child of TestKillDurability: it writes samples until
// it is killed, printing the index of each one once committed. It does
// nothing when run on its own.
func TestKillChild(t *testing.T) {
	path := os.Getenv(childDBEnv)
	if path == "" {
		t.Skip("helper process for TestKillDurability")
	}
	run, _ := strconv.ParseInt(os.Getenv(childRunEnv), 10, 64)
	s, err := Open(context.Background(), path)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	done, err := s.Completed(context.Background(), run)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i := range planned {
		if done[killKey(run, i)] {
			continue
		}
		if err := s.RecordSample(context.Background(), killSample(run, i)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("committed", i)
	}
	fmt.Println("finished")
	os.Exit(0)
}

func TestKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping the kill -9 test in -short mode")
	}
	eachBackend(t, testKillDurability)
}

func testKillDurability(t *testing.T, b backend) {
	s, path := b.open(t)
	run := newRun(t, s)
	s.Close()

	// Kill the writer three times at different moments, resuming each time.
	prev := 0
	for round, after := range []int{25, 60, 90} {
		committed := runAndKill(t, path, run, after)
		s, err := Open(t.Context(), path)
		if err != nil {
			t.Fatalf("round %d: reopen after kill -9: %v", round, err)
		}
		if b.name == "sqlite" { // PostgreSQL checks its foreign keys on every write
			var check string
			if err := s.DB().QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
				t.Fatalf("round %d: integrity_check = %q, %v", round, check, err)
			}
			rows, err := s.DB().Query(`PRAGMA foreign_key_check`)
			if err != nil {
				t.Fatal(err)
			}
			if rows.Next() {
				t.Errorf("round %d: foreign_key_check reports violations", round)
			}
			rows.Close()
		}

		// No half rows: every sample has all its DUT metrics.
		var half int
		if err := s.DB().QueryRow(s.Rebind(`SELECT count(*) FROM samples x WHERE (SELECT count(*) FROM dut_metrics m WHERE m.sample_id = x.id) != ?`), perSample).Scan(&half); err != nil || half != 0 {
			t.Errorf("round %d: %d samples without their %d DUT rows (%v)", round, half, perSample, err)
		}
		var orphans int
		s.DB().QueryRow(`SELECT count(*) FROM dut_metrics m WHERE NOT EXISTS (SELECT 1 FROM samples x WHERE x.id = m.sample_id)`).Scan(&orphans)
		if orphans != 0 {
			t.Errorf("round %d: %d DUT rows without a sample", round, orphans)
		}

		// Every sample the child reported committed survived; at most the
		// one in flight may be there too.
		present, err := s.Completed(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range committed {
			if !present[killKey(run, i)] {
				t.Errorf("round %d: sample %d was committed but is gone", round, i)
			}
		}
		// Beyond what earlier rounds left and what the child reported, at
		// most one sample (committed, killed before it could say so) is there.
		if extra := len(present) - prev - len(committed); extra < 0 || extra > 1 {
			t.Errorf("round %d: %d samples beyond those reported, want 0 or 1", round, extra)
		}
		prev = len(present)
		samples, err := s.Samples(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if len(samples) != len(present) {
			t.Errorf("round %d: Samples() has %d rows, Completed() %d keys", round, len(samples), len(present))
		}
		t.Logf("round %d: killed after %d commits reported; %d samples in the database", round, len(committed), len(present))
		s.Close()
	}

	// The final resume finishes the plan without repeating anything.
	out := runChild(t, path, run)
	if !strings.Contains(out, "finished") {
		t.Fatalf("final resume did not finish: %s", out)
	}
	s, err := Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n, distinct int
	s.DB().QueryRow(s.Rebind(`SELECT count(*), count(DISTINCT point_idx || '/' || round) FROM samples WHERE run_id = ?`), run).Scan(&n, &distinct)
	if n != planned || distinct != planned {
		t.Errorf("after resuming: %d samples (%d distinct), want %d", n, distinct, planned)
	}
}

func childCmd(path string, run int64) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childDBEnv+"="+path, childRunEnv+"="+strconv.FormatInt(run, 10))
	return cmd
}

// runAndKill starts the child and SIGKILLs it once it has reported after
// commits in this round, returning the indexes it reported.
func runAndKill(t *testing.T, path string, run int64, after int) []int {
	t.Helper()
	cmd := childCmd(path, run)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var committed []int
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if i, ok := strings.CutPrefix(line, "committed "); ok {
			n, _ := strconv.Atoi(i)
			committed = append(committed, n)
			if len(committed) >= after {
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		} else if strings.HasPrefix(line, "error") || line == "finished" {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child: %s", line)
		}
	}
	// Drain what the child printed before it died: those commits happened.
	for sc.Scan() {
		if i, ok := strings.CutPrefix(sc.Text(), "committed "); ok {
			n, _ := strconv.Atoi(i)
			committed = append(committed, n)
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v", err)
	}
	return committed
}

func runChild(t *testing.T, path string, run int64) string {
	t.Helper()
	out, err := childCmd(path, run).Output()
	if err != nil {
		t.Fatalf("child: %v: %s", err, out)
	}
	return string(out)
}
