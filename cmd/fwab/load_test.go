package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/store"
)

// loadSpec is a matrix of the given number of points (a multiple of 4):
// rules@lan 0..points/4-1 × rules@wan 0, 1 × outbound NAT automatic and
// hybrid, one repeat of a one-second probe. Every step changes only what a filter reload applies.
func loadSpec(t *testing.T, points int) string {
	t.Helper()
	if points%4 != 0 {
		t.Fatalf("load spec: %d points is not a multiple of 4", points)
	}
	rules := make([]string, points/4)
	for i := range rules {
		rules[i] = strconv.Itoa(i)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("load-%d.yaml", points))
	spec := fmt.Sprintf(`target: lab
axes:
  rules@lan: [%s]
  rules@wan: [0, 1]
  nat.outbound: [automatic, hybrid]
probes:
  - {direction: up, duration: 1s}
repeats: 1
idle: 0s
drift_check: false
order: cost-aware
settle: {timeout: 20s, pause: 0s}
`, strings.Join(rules, ", "))
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// procStatus reads a kB field (VmRSS, VmHWM) of this process.
func procStatus(field string) (int64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB`).FindSubmatch(data)
	if m == nil {
		return 0, fmt.Errorf("/proc/self/status has no %s", field)
	}
	return strconv.ParseInt(string(m[1]), 10, 64)
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// leakCheck records goroutines and open files before a piece of work and
// fails the test if the work left more behind. Goroutines get a few
// seconds to finish (connections closing, processes reaped).
type leakCheck struct {
	goroutines, fds int
}

func startLeakCheck(t *testing.T) leakCheck {
	t.Helper()
	return leakCheck{goroutines: runtime.NumGoroutine(), fds: openFDs(t)}
}

func (l leakCheck) check(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	g, fds := runtime.NumGoroutine(), openFDs(t)
	for (g > l.goroutines || fds > l.fds) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		runtime.GC()
		g, fds = runtime.NumGoroutine(), openFDs(t)
	}
	t.Logf("goroutines %d before, %d after; open files %d before, %d after", l.goroutines, g, l.fds, fds)
	if g > l.goroutines {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutine leak: %d before, %d after\n%s", l.goroutines, g, buf[:runtime.Stack(buf, true)])
	}
	if fds > l.fds {
		var names []string
		ents, _ := os.ReadDir("/proc/self/fd")
		for _, e := range ents {
			target, _ := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
			names = append(names, e.Name()+" -> "+target)
		}
		t.Errorf("file descriptor leak: %d before, %d after:\n%s", l.fds, fds, strings.Join(names, "\n"))
	}
}

// childPeakRSS runs this binary as fwab and returns its peak RSS in kB.
func childPeakRSS(t *testing.T, env []string, args ...string) (int64, string) {
	t.Helper()
	exe, _ := os.Executable()
	cmd := exec.CommandContext(t.Context(), exe, args...)
	cmd.Env = append(env, asFwab+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("fwab %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss, out.String()
}

// TestLoadPlan: dry runs of 20, 200 and 1,000 points against a fake
// pfSense: every step is planned, peak memory stays flat, and in-process the
// dry run leaves no goroutine or open file behind.
func TestLoadPlan(t *testing.T) {
	_, targets := labTarget(t, nil, true)
	tf := strings.Replace(mustRead(t, targets), "fw1:", "lab:", 1)
	if err := os.WriteFile(targets, []byte(tf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "XDG_STATE_HOME="+t.TempDir())
	stepsLine := regexp.MustCompile(`(?m)^(\d+) steps, `)
	peak := map[int]int64{}
	for _, n := range []int{20, 200, 1000} {
		spec := loadSpec(t, n)
		for _, args := range [][]string{
			{"sweep", "--dry-run", spec, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db")},
			{"matrix", "plan", spec, "--target", "lab", "--targets", targets},
		} {
			start := time.Now()
			rss, out := childPeakRSS(t, env, args...)
			m := stepsLine.FindStringSubmatch(out)
			if m == nil || m[1] != strconv.Itoa(n) {
				t.Errorf("fwab %s %d points: the plan has %v steps, want %d", args[0], n, m, n)
			}
			peak[n] = max(peak[n], rss)
			t.Logf("%4d points: fwab %s %s: peak RSS %d kB, %v", n, args[0], args[1], rss, time.Since(start).Round(time.Millisecond))
		}
	}
	if peak[1000] > peak[20]+max(peak[20]/2, 32<<10) {
		t.Errorf("peak RSS grew from %d kB at 20 points to %d kB at 1000: not flat", peak[20], peak[1000])
	}

	// In-process: no goroutine or file left behind.
	spec := loadSpec(t, 1000)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	lc := startLeakCheck(t)
	if _, errOut, code := fwabRun(t, "sweep", "--dry-run", spec, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db")); code != 0 {
		t.Fatalf("sweep --dry-run = %d: %s", code, errOut)
	}
	lc.check(t)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// progressRSS is the sweep's stderr: it notes the process's peak RSS when
// the sweep reaches given steps ("[k/N] point ..." lines).
type progressRSS struct {
	at    []int // steps to note at, ascending
	mu    sync.Mutex
	buf   bytes.Buffer
	noted map[int]int64 // step → VmHWM kB when it began
}

var stepLine = regexp.MustCompile(`(?m)^\[(\d+)/\d+\]`)

func (p *progressRSS) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range stepLine.FindAllSubmatch(b, -1) {
		k, _ := strconv.Atoi(string(m[1]))
		for _, at := range p.at {
			if _, ok := p.noted[at]; !ok && k > at {
				p.noted[at], _ = procStatus("VmHWM") // 0 when unreadable: the test fails on it
			}
		}
	}
	return p.buf.Write(b)
}

// TestLoadLabSweep runs a sweep of short probes on the lab, in-process,
// and checks that peak memory after all points is not meaningfully above
// its level after the first tenth, and that the sweep leaves no goroutine
// or open file behind. 20 points here (about a minute); `make load` runs
// 200 (FWAB_LOAD_POINTS).
func TestLoadLabSweep(t *testing.T) {
	points := 20
	if s := os.Getenv("FWAB_LOAD_POINTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 8 || n%4 != 0 {
			t.Fatalf("FWAB_LOAD_POINTS=%q: want a multiple of 4, at least 8", s)
		}
		points = n
	}
	l := newLab(t)
	t.Chdir(t.TempDir()) // whatever the sweep writes to its working folder
	spec := loadSpec(t, points)
	db := filepath.Join(t.TempDir(), "results.db")
	t.Setenv("XDG_STATE_HOME", l.state)
	early := max(4, points/10)
	stderr := &progressRSS{at: []int{early, points / 2, points - 1}, noted: map[int]int64{}}

	lc := startLeakCheck(t)
	start := time.Now()
	var stdout bytes.Buffer
	code := run(t.Context(), []string{"sweep", spec, "--targets", l.targets, "--db", db, "--progress=false", "--seed", "1"}, strings.NewReader(""), &stdout, stderr)
	took := time.Since(start)
	end, err := procStatus("VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("sweep = %d:\n%s", code, stderr.buf.String())
	}
	lc.check(t)

	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := st.Samples(t.Context(), 1)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for _, s := range samples {
		if s.Failed {
			failed++
		}
	}
	if len(samples) != points || failed > 0 {
		t.Errorf("%d samples (%d failed), want %d measured", len(samples), failed, points)
	}
	stderr.mu.Lock()
	atEarly, atHalf, atLast := stderr.noted[early], stderr.noted[points/2], stderr.noted[points-1]
	stderr.mu.Unlock()
	t.Logf("%d points in %v (%.2f s a point); peak RSS after %d points %d kB, after %d %d kB, after %d %d kB, at the end (restore and report included) %d kB",
		points, took.Round(time.Second), took.Seconds()/float64(points), early, atEarly, points/2, atHalf, points-1, atLast, end)
	if atEarly == 0 {
		t.Fatalf("no progress line past step %d seen", early)
	}
	if end > atEarly+max(atEarly/4, 24<<10) {
		t.Errorf("peak RSS grew from %d kB after %d points to %d kB after %d: not flat", atEarly, early, end, points)
	}
}
