//go:build faults

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
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

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab"
	"github.com/fwab/fwab/store"
)

// The fault-injection suite (make faults): go test -tags faults -run
// TestFaults ./cmd/fwab -faults.seed N. It needs root (the lab).
var (
	faultsSeed    = flag.Uint64("faults.seed", 0, "seed of the kill times (0: random, printed)")
	faultsKills   = flag.Int("faults.kills", 30, "kill -9 trials, split across the flavors")
	faultsFlavors = flag.String("faults.flavors", "pfsense,opnsense", "flavors whose emulated firewall the trials run on, comma-separated")
)

// faultSpec: two points, two rounds, one 1 s probe: 4 samples. The fixed
// offload change makes every point touch the interfaces as well as the
// filter, so a firewall left half-applied shows in ethtool and nftables.
const faultSpec = `target: lab
axes:
  rules@lan: [0, 500]
fixed:
  offload.checksum: "off"
probes:
  - {name: up, direction: up, duration: 1s}
repeats: 2
idle: 0s
order: randomized
drift_check: false
`

// faultSamples are a fault sweep's samples (no drift check: the trials
// test safety, not statistics).
const faultSamples = 2 * 2

// rebootSpec: the same shape, on the crypto accelerator, whose change the
// firewall applies only by rebooting (configxml.ActionReboot): a step is
// the reboot, the wait for the box to come back, relocking and verifying
// the loaded modules. OPNsense loads an accelerator only where its module
// file exists; the trial puts qat.ko in place.
func rebootSpec(flavor string) string {
	accel := "aesni"
	if flavor == "opnsense" {
		accel = "qat"
	}
	return fmt.Sprintf(`target: lab
axes:
  crypto.hardware: [none, %s]
probes:
  - {name: up, direction: up, duration: 1s}
repeats: 2
idle: 0s
order: randomized
drift_check: false
`, accel)
}

// progressLine is one line of a sweep's stderr and when it came.
type progressLine struct {
	at   time.Time
	text string
}

// sweepChild is a sweep running as a child fwab, its stderr kept with
// arrival times so that the phase it was in at any moment is known.
type sweepChild struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []progressLine
	done  chan struct{}
	err   error
}

func (l labEnv) startSweep(t *testing.T, ctx context.Context, args ...string) *sweepChild {
	t.Helper()
	c := &sweepChild{cmd: l.fwabChild(ctx, args...), done: make(chan struct{})}
	pr, pw := io.Pipe()
	c.cmd.Stderr = pw
	c.cmd.Stdout = io.Discard
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, progressLine{time.Now(), sc.Text()})
			c.mu.Unlock()
		}
	}()
	go func() {
		c.err = c.cmd.Wait()
		pw.Close()
		close(c.done)
	}()
	return c
}

func (c *sweepChild) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

func (c *sweepChild) wait() error {
	<-c.done
	time.Sleep(50 * time.Millisecond) // the last lines
	return c.err
}

func (c *sweepChild) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, l := range c.lines {
		b.WriteString(l.text + "\n")
	}
	return b.String()
}

// waitFor waits until a line containing s arrives (or the sweep ends).
func (c *sweepChild) waitFor(s string, timeout time.Duration) bool {
	return c.waitLine(func(l string) bool { return strings.Contains(l, s) }, timeout)
}

// waitPhase waits for the n-th progress line of a phase (apply, settle,
// probe), or for the line that ends the sweep's steps (restore).
func (c *sweepChild) waitPhase(phase string, n int, timeout time.Duration) bool {
	seen := 0
	return c.waitLine(func(l string) bool {
		if phase == "restore" {
			return strings.HasPrefix(l, "time: ")
		}
		f := strings.Fields(l)
		if strings.HasPrefix(l, "[") && len(f) >= 6 && strings.TrimSuffix(f[5], ":") == phase {
			seen++
		}
		return seen >= n
	}, timeout)
}

// waitLine waits until match accepts a line; it sees each line once, in
// order.
func (c *sweepChild) waitLine(match func(string) bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for next := 0; time.Now().Before(deadline); {
		c.mu.Lock()
		for ; next < len(c.lines); next++ {
			if match(c.lines[next].text) {
				c.mu.Unlock()
				return true
			}
		}
		c.mu.Unlock()
		select {
		case <-c.done:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// phaseAt says where the sweep was at the moment, from its progress
// lines: start (before the first point: plan, checks, lock), apply,
// settle, probe, restore (after the last point). recorded is how many
// samples the database held after the kill: a probe whose sample is in
// is over, and the sweep was between points.
func (c *sweepChild) phaseAt(at time.Time, recorded int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	phase, probes := "start", 0
	for _, l := range c.lines {
		if l.at.After(at) {
			break
		}
		switch {
		case strings.HasPrefix(l.text, "time: "), strings.HasPrefix(l.text, "original config restored"):
			phase = "restore"
		case strings.HasPrefix(l.text, "["):
			f := strings.Fields(l.text)
			if len(f) >= 6 {
				phase = strings.TrimSuffix(f[5], ":")
			}
			if phase == "probe" {
				probes++
			}
		}
	}
	if phase == "probe" && recorded >= probes {
		phase = "between points (sample recorded)"
	}
	return phase
}

type trial struct {
	fault    string
	detail   string
	restored bool // config.xml hash and data plane as at the start
	resumed  bool // --resume finished the run with every sample, once
	lost     []string
}

// faultLab is the lab, the original config and the spec the trials share.
type faultLab struct {
	labEnv
	t        *testing.T
	original []byte
	spec     string
}

func (f *faultLab) configNow() ([]byte, error) {
	var out, errOut bytes.Buffer
	cmd := f.fwabChild(f.t.Context(), "fw", "pull", "--target", "lab", "--targets", f.targets)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("fw pull: %v: %s", err, errOut.String())
	}
	return out.Bytes(), nil
}

func (f *faultLab) sweepArgs(db string, extra ...string) []string {
	return append([]string{"sweep", f.spec, "--targets", f.targets, "--db", db, "--seed", "7", "--progress=false"}, extra...)
}

// recoverIfNeeded runs fwab fw recover; a journal that ended cleanly is
// not an error.
func (f *faultLab) recoverIfNeeded() (string, error) {
	cmd := f.fwabChild(f.t.Context(), "fw", "recover", "--target", "lab", "--targets", f.targets)
	out, err := cmd.CombinedOutput()
	if err != nil && (strings.Contains(string(out), "nothing to recover") || strings.Contains(string(out), "no journal")) {
		return "nothing to recover", nil
	}
	return strings.TrimSpace(string(out)), err
}

// checkFirewall: config.xml has the original's hash and the running data
// plane is the one the original renders to.
func (f *faultLab) checkFirewall() error {
	got, err := f.configNow()
	if err != nil {
		return err
	}
	if fwapi.SHA256Hex(got) != fwapi.SHA256Hex(f.original) {
		return fmt.Errorf("config.xml sha256 %s, want the original %s", fwapi.SHA256Hex(got)[:16], fwapi.SHA256Hex(f.original)[:16])
	}
	return lab.CheckDataPlane(f.t.Context(), f.dir, f.original)
}

// checkDB checks the results database with SQL: no two samples under one
// key, no half-written sample. It returns the complete samples of run 1.
func checkDB(ctx context.Context, db string) (int, []string, error) {
	st, err := store.Open(ctx, db)
	if err != nil {
		return 0, nil, err
	}
	defer st.Close()
	var problems []string
	q := func(query string, each func() string, dest ...any) error {
		rows, err := st.DB().QueryContext(ctx, query)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			problems = append(problems, each())
		}
		return rows.Err()
	}
	var point, round, repeat, n int64
	var probe string
	if err := q(`SELECT point_idx, probe, round, repeat, count(*) FROM samples GROUP BY run_id, point_idx, probe, round, repeat HAVING count(*) > 1`,
		func() string {
			return fmt.Sprintf("duplicate sample point %d probe %s round %d repeat %d (%d rows)", point, probe, round, repeat, n)
		}, &point, &probe, &round, &repeat, &n); err != nil {
		return 0, nil, err
	}
	var reason string
	if err := q(`SELECT point_idx, probe, round, reason FROM samples
		WHERE failed = 1 OR bits_per_second IS NULL OR bits_per_second <= 0 OR elapsed_ms <= 0
		   OR json_valid(raw) = 0 OR json_extract(raw, '$.client') IS NULL
		   OR NOT EXISTS (SELECT 1 FROM points p WHERE p.run_id = samples.run_id AND p.idx = samples.point_idx)`,
		func() string {
			return fmt.Sprintf("incomplete sample point %d probe %s round %d (%s)", point, probe, round, reason)
		}, &point, &probe, &round, &reason); err != nil {
		return 0, nil, err
	}
	var complete int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM samples WHERE run_id = 1 AND failed = 0`).Scan(&complete); err != nil {
		return 0, nil, err
	}
	return complete, problems, nil
}

// finish is the common end of a trial: clear the faults, recover if
// fwab left the firewall changed, check the firewall, check the database,
// resume the run, and check everything again.
func (f *faultLab) finish(tr *trial, db string) {
	ctx := f.t.Context()
	if err := lab.SetFault(f.dir, emu.Fault{}); err != nil {
		f.t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if out, err := f.recoverIfNeeded(); err != nil {
		tr.lost = append(tr.lost, "recover failed: "+err.Error()+": "+out)
	} else if out != "nothing to recover" {
		tr.detail += "; recovered"
	}
	if err := f.checkFirewall(); err != nil {
		tr.lost = append(tr.lost, "firewall not restored: "+err.Error())
	} else {
		tr.restored = true
	}
	if _, problems, err := checkDB(ctx, db); err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			tr.lost = append(tr.lost, "results database: "+err.Error())
		}
	} else {
		tr.lost = append(tr.lost, problems...)
	}

	// --resume finishes the run (a fresh sweep when it never created one).
	args := f.sweepArgs(db, "--resume", "1")
	if st, err := store.Open(ctx, db); err == nil {
		_, rerr := st.Run(ctx, 1)
		st.Close()
		if rerr != nil {
			args = f.sweepArgs(db)
			tr.detail += "; no run yet: swept afresh"
		}
	}
	resume := f.startSweep(f.t, ctx, args...)
	// A resume that ran to the end with points failed (exit 1; the fault
	// left a failed sample, which a resume keeps) is counted below, sample
	// by sample.
	if err := resume.wait(); err != nil && !strings.Contains(resume.output(), "points failed: see 'fwab runs show") {
		tr.lost = append(tr.lost, fmt.Sprintf("resume failed: %v\n%s", err, resume.output()))
		return
	}
	complete, problems, err := checkDB(ctx, db)
	if err != nil {
		tr.lost = append(tr.lost, "results database after the resume: "+err.Error())
		return
	}
	tr.lost = append(tr.lost, problems...)
	if complete != faultSamples {
		tr.lost = append(tr.lost, fmt.Sprintf("%d complete samples after the resume, want %d", complete, faultSamples))
	}
	if st, err := store.Open(ctx, db); err == nil {
		r, err := st.Run(ctx, 1)
		st.Close()
		if err != nil || r.Status != store.Done {
			tr.lost = append(tr.lost, fmt.Sprintf("run status %q after the resume (%v), want done", r.Status, err))
		}
	}
	if err := f.checkFirewall(); err != nil {
		tr.lost = append(tr.lost, "after the resume: "+err.Error())
	}
	tr.resumed = len(tr.lost) == 0
}

// TestFaults runs the trials on each flavor's lab in turn, the kill -9
// trials split between them, and prints a table per flavor.
func TestFaults(t *testing.T) {
	seed := *faultsSeed
	if seed == 0 {
		seed = rand.Uint64() >> 1
	}
	fmt.Printf("faults: seed %d (reproduce with: make faults FAULTS_SEED=%d)\n", seed, seed)
	flavors := strings.Split(*faultsFlavors, ",")
	for i, flavor := range flavors {
		// The kills are split across the flavors, the first ones taking
		// what does not divide.
		kills := *faultsKills / len(flavors)
		if i < *faultsKills%len(flavors) {
			kills++
		}
		t.Run(flavor, func(t *testing.T) { runFaults(t, flavor, seed, kills) })
	}
}

func runFaults(t *testing.T, flavor string, seed uint64, kills int) {
	l := newLabFlavor(t, flavor)
	started := time.Now()
	fmt.Printf("faults: %s, %d kill trials\n", flavor, kills)
	rng := rand.New(rand.NewPCG(seed, 0x6661756c7473))

	f := &faultLab{labEnv: l, t: t, spec: filepath.Join(t.TempDir(), "spec.yaml")}
	if err := os.WriteFile(f.spec, []byte(faultSpec), 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.original, err = f.configNow(); err != nil {
		t.Fatal(err)
	}
	if err := lab.CheckDataPlane(t.Context(), l.dir, f.original); err != nil {
		t.Fatalf("the fresh lab's data plane does not match its config: %v", err)
	}
	// The check can fail: a hand-made change to the data plane shows (tx
	// checksumming flipped: on in pfSense's factory config, off in
	// OPNsense's).
	ethtool := func(args ...string) ([]byte, error) {
		return exec.Command("ip", append([]string{"netns", "exec", l.prefix + "-dut", "ethtool"}, args...)...).CombinedOutput()
	}
	k, err := ethtool("-k", l.prefix+"d0")
	if err != nil {
		t.Fatal(err)
	}
	was, flip := "off", "on"
	if strings.Contains(string(k), "tx-checksumming: on") {
		was, flip = "on", "off"
	}
	if out, err := ethtool("-K", l.prefix+"d0", "tx", flip); err != nil {
		t.Fatalf("ethtool -K tx %s: %v: %s", flip, err, out)
	}
	if err := lab.CheckDataPlane(t.Context(), l.dir, f.original); err == nil {
		t.Fatalf("CheckDataPlane found nothing after tx checksumming was turned %s by hand", flip)
	}
	ethtool("-K", l.prefix+"d0", "tx", was)

	dbFor := func(name string) string { return filepath.Join(t.TempDir(), name+".db") }

	// Calibration: one undisturbed sweep gives the timeline kills are
	// drawn over.
	cal := dbFor("calibration")
	t0 := time.Now()
	if out, err := f.fwabChild(t.Context(), f.sweepArgs(cal)...).CombinedOutput(); err != nil {
		t.Fatalf("undisturbed sweep: %v\n%s", err, out)
	}
	timeline := time.Since(t0)
	if complete, problems, err := checkDB(t.Context(), cal); err != nil || complete != faultSamples || len(problems) > 0 {
		t.Fatalf("undisturbed sweep: %d samples, %v, %v", complete, problems, err)
	}
	fmt.Printf("faults: an undisturbed sweep takes %s; kill times are drawn over it\n", timeline.Round(100*time.Millisecond))

	var trials []trial
	report := func(tr trial) {
		trials = append(trials, tr)
		status := "ok"
		if len(tr.lost) > 0 {
			status = "LOST: " + strings.Join(tr.lost, "; ")
		}
		fmt.Printf("  %-28s %-58s %s\n", tr.fault, tr.detail, status)
	}

	// 1. kill -9 at random points of the sweep. Probes fill most of a
	// sweep's time, so every other kill is aimed: a phase (the session's
	// start, an apply, a settle, a probe, between points once a sample is
	// recorded, the restore at the end), its n-th occurrence, and a random
	// moment inside it; the others fall anywhere on the timeline. Where
	// the kill really landed comes from the sweep's own progress lines
	// and the samples in the database.
	aims := []struct {
		phase  string
		within time.Duration
	}{
		{"start", 300 * time.Millisecond}, {"apply", 300 * time.Millisecond}, {"apply", 300 * time.Millisecond},
		{"settle", 20 * time.Millisecond}, {"probe", time.Second}, {"between", 30 * time.Millisecond},
		{"restore", 500 * time.Millisecond},
	}
	// A kill drawn after the sweep's end hits nothing: it is drawn again
	// (and its sweep still checked, in a row of its own).
	hits := 0
	for i := 0; hits < kills && i < 3*kills; i++ {
		db := dbFor(fmt.Sprintf("kill%d", i))
		sw := f.startSweep(t, t.Context(), f.sweepArgs(db)...)
		var aim string
		start := time.Now()
		if i%2 == 0 {
			after := time.Duration(rng.Int64N(int64(timeline)))
			aim = fmt.Sprintf("at %.2fs", after.Seconds())
			select {
			case <-time.After(after):
			case <-sw.done:
			}
		} else {
			a := aims[rng.IntN(len(aims))]
			// The n-th line of that phase: a step that repeats the point
			// before it applies nothing, so only two applies are sure.
			n := 1 + rng.IntN(faultSamples)
			delay := time.Duration(rng.Int64N(int64(a.within)))
			switch a.phase {
			case "start":
				n = 1
				sw.waitLine(func(l string) bool { return strings.HasPrefix(l, "run 1: ") }, 2*time.Minute)
			case "apply":
				n = 1 + rng.IntN(2)
				sw.waitPhase("apply", n, 2*time.Minute)
			case "between":
				sw.waitPhase("probe", n, 2*time.Minute)
				for samplesIn(t.Context(), db) < n && sw.running() {
					time.Sleep(5 * time.Millisecond)
				}
			case "restore":
				n = 1
				sw.waitPhase("restore", 1, 2*time.Minute)
			default:
				sw.waitPhase(a.phase, n, 2*time.Minute)
			}
			aim = fmt.Sprintf("aimed at %s #%d +%dms", a.phase, n, delay.Milliseconds())
			select {
			case <-time.After(delay):
			case <-sw.done:
			}
		}
		at := time.Now()
		ended := !sw.running()
		sw.cmd.Process.Signal(syscall.SIGKILL)
		sw.wait()
		phase := sw.phaseAt(at, samplesIn(t.Context(), db))
		if ended {
			phase = "nothing: the sweep had ended"
		}
		tr := trial{fault: "kill -9", detail: fmt.Sprintf("#%d %s: %.2fs in, during %s", i+1, aim, at.Sub(start).Seconds(), phase)}
		if ended {
			tr.fault = "kill -9 after the end"
		} else {
			hits++
		}
		f.finish(&tr, db)
		report(tr)
	}

	if hits < kills {
		t.Errorf("only %d of %d kills hit a running sweep", hits, kills)
	}

	// 2. the management link drops during an apply (the filter reload),
	// shorter and longer than the commit-confirmed rollback's delay.
	for _, down := range []time.Duration{2 * time.Second, 8 * time.Second} {
		db := dbFor("link" + down.String())
		var sw *sweepChild
		if flavor == "opnsense" {
			// OPNsense applies through its REST API, not a command line:
			// the link goes down once the first apply has started.
			sw = f.startSweep(t, t.Context(), f.sweepArgs(db, "--rollback-after", "5s")...)
			sw.waitPhase("apply", 1, 2*time.Minute)
			if err := lab.SetFault(l.dir, emu.Fault{LinkDownUntil: time.Now().Add(down)}); err != nil {
				t.Fatal(err)
			}
		} else {
			if err := lab.SetFault(l.dir, emu.Fault{LinkDownOn: "/etc/rc.filter_configure_sync", LinkDownFor: down}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond)
			sw = f.startSweep(t, t.Context(), f.sweepArgs(db, "--rollback-after", "5s")...)
		}
		err := sw.wait()
		tr := trial{fault: "link down during apply", detail: fmt.Sprintf("%s, rollback after 5s, sweep exit %v", down, exitOf(err))}
		retried := strings.Contains(sw.output(), "apply failed; retrying once")
		switch {
		case flavor == "opnsense" && retried:
			tr.detail += ", the apply was retried"
		case flavor != "opnsense" && !retried:
			tr.lost = append(tr.lost, "the link drop did not hit an apply:\n"+sw.output())
		}
		if err != nil {
			tr.detail += ": " + lastLine(sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// 2b. the management link goes silent during an apply: packets are
	// dropped without a refusal, so SSH stalls until fwab's keepalive
	// (15 s) gives up on the connection; the state on the firewall is
	// unknown, fwab waits for it and re-reads (its rollback, armed for
	// 5 s, fires meanwhile).
	{
		db := dbFor("silent")
		sw := f.startSweep(t, t.Context(), f.sweepArgs(db, "--rollback-after", "5s")...)
		hit := sw.waitPhase("apply", 1, 2*time.Minute)
		silence := 20 * time.Second
		if err := lab.SetFault(l.dir, emu.Fault{SilentUntil: time.Now().Add(silence)}); err != nil {
			t.Fatal(err)
		}
		err := sw.wait()
		tr := trial{fault: "silent link during apply", detail: fmt.Sprintf("%s of dropped packets, rollback after 5s, sweep exit %v", silence, exitOf(err))}
		if !hit {
			tr.lost = append(tr.lost, "no apply to silence:\n"+sw.output())
		}
		if err != nil {
			tr.detail += ": " + lastLine(sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// 3. the firewall reboots in the middle of a probe.
	{
		db := dbFor("reboot")
		sw := f.startSweep(t, t.Context(), f.sweepArgs(db)...)
		hit := sw.waitFor("round 2 probe", 2*time.Minute)
		time.Sleep(400 * time.Millisecond)
		lab.SetFault(l.dir, emu.Fault{RebootAt: time.Now()})
		err := sw.wait()
		tr := trial{fault: "DUT reboot mid-probe", detail: fmt.Sprintf("sweep exit %v", exitOf(err))}
		if strings.Contains(sw.output(), "probe failed; settling and retrying once") {
			tr.detail += ", the probe was measured again"
		}
		if !hit {
			tr.lost = append(tr.lost, "no probe to reboot in:\n"+sw.output())
		}
		if err != nil {
			tr.detail += ": " + lastLine(sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// 4. the iperf3 server disappears: mid-probe, and as the probe starts.
	// Servers left by the killed sweeps wait out their idle timeout: gone
	// first, so that the only server is the probe's own.
	killInNetns(l.prefix+"-wan", "iperf3")
	for _, wait := range []time.Duration{600 * time.Millisecond, 0} {
		db := dbFor("endpoint" + wait.String())
		sw := f.startSweep(t, t.Context(), f.sweepArgs(db)...)
		hit := sw.waitFor("round 1 probe", 2*time.Minute)
		time.Sleep(wait)
		killed := 0
		for deadline := time.Now().Add(5 * time.Second); killed == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			killed = killInNetns(l.prefix+"-wan", "iperf3")
		}
		err := sw.wait()
		when := "as soon as it listened"
		if wait > 0 {
			when = wait.String() + " into the probe"
		}
		tr := trial{fault: "iperf3 server killed", detail: fmt.Sprintf("%s, sweep exit %v", when, exitOf(err))}
		if !hit || killed == 0 || !strings.Contains(sw.output(), "probe failed; settling and retrying once") {
			tr.lost = append(tr.lost, "the kill did not hit a probe:\n"+sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// 5. the firewall's disk refuses writes: before the sweep (full), and
	// in the middle of it (read-only).
	{
		db := dbFor("diskfull")
		lab.SetFault(l.dir, emu.Fault{Disk: emu.DiskFull})
		time.Sleep(300 * time.Millisecond)
		sw := f.startSweep(t, t.Context(), f.sweepArgs(db)...)
		err := sw.wait()
		tr := trial{fault: "disk full", detail: fmt.Sprintf("before the sweep, sweep exit %v", exitOf(err))}
		if err == nil || !strings.Contains(sw.output(), "the firewall's disk is full") {
			tr.lost = append(tr.lost, "the sweep did not fail naming the full disk:\n"+sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}
	{
		db := dbFor("diskro")
		sw := f.startSweep(t, t.Context(), f.sweepArgs(db)...)
		hit := sw.waitFor("round 1 probe", 2*time.Minute)
		lab.SetFault(l.dir, emu.Fault{Disk: emu.DiskReadOnly})
		err := sw.wait()
		tr := trial{fault: "disk read-only", detail: fmt.Sprintf("mid-sweep, sweep exit %v", exitOf(err))}
		if !hit {
			tr.lost = append(tr.lost, "the sweep never probed:\n"+sw.output())
		}
		if err == nil {
			tr.detail += " (the sweep needed no write after the fault)"
		} else if !strings.Contains(sw.output(), "read-only") || !strings.Contains(sw.output(), "--resume 1") {
			tr.lost = append(tr.lost, "the sweep did not stop naming the read-only disk and the way on:\n"+sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// 6. kill -9 across a reboot: after the step asked the firewall to
	// reboot for a new accelerator, while it is away, and after it came
	// back but before fwab verified it. The rollback armed before the
	// reboot restores the original config and reboots again; fw recover
	// finds the firewall either way, and the kernel must end with the
	// original's modules (fwab verify: no FWAB111).
	if flavor == "opnsense" {
		if err := os.WriteFile(filepath.Join(l.dir, "root", "boot", "kernel", "qat.ko"), []byte("\x7fELF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rf := *f
	rf.spec = filepath.Join(t.TempDir(), "reboot.yaml")
	if err := os.WriteFile(rf.spec, []byte(rebootSpec(flavor)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{500 * time.Millisecond, 3 * time.Second, 7 * time.Second} {
		db := dbFor("reboot-kill" + after.String())
		tr := trial{fault: "kill -9 across a reboot", detail: fmt.Sprintf("%s after the reboot was asked", after)}
		rf.killAfterLine(t, db, &tr, after, "a rebooting step", func(l string) bool {
			return strings.Contains(l, "apply: ") && strings.Contains(l, "(the firewall reboots)")
		})
		rf.finish(&tr, db)
		if out, err := rf.fwabChild(t.Context(), "verify", "--target", "lab", "--targets", rf.targets).CombinedOutput(); strings.Contains(string(out), "FWAB111") {
			tr.lost = append(tr.lost, fmt.Sprintf("the kernel's modules are not the original config's (verify %v):\n%s", err, out))
			tr.resumed = false
		}
		report(tr)
	}

	// 7. kill -9 across a switch of boot environments (a firmware axis):
	// just after the sweep set the other environment for the next boot,
	// while the box boots it, and once it is back. fw recover restores the
	// environment the box runs and boots it back where the sweep started;
	// nothing is left pending for the next boot.
	oldVersion := strings.TrimSpace(string(must(f.fwabChild(t.Context(), "fw", "info", "--target", "lab", "--targets", f.targets).Output())))
	oldVersion = strings.Fields(strings.SplitN(oldVersion, "\n", 3)[1])[1]
	if out, err := f.fwabChild(t.Context(), "fw", "upgrade", "--keep", "--target", "lab", "--targets", f.targets).CombinedOutput(); err != nil {
		t.Fatalf("fw upgrade --keep: %v\n%s", err, out)
	}
	ff := *f
	if ff.original, err = ff.configNow(); err != nil {
		t.Fatal(err)
	}
	newInfo := string(must(ff.fwabChild(t.Context(), "fw", "info", "--target", "lab", "--targets", ff.targets).Output()))
	newVersion := strings.Fields(strings.SplitN(newInfo, "\n", 3)[1])[1]
	ff.spec = filepath.Join(t.TempDir(), "firmware.yaml")
	if err := os.WriteFile(ff.spec, []byte(fmt.Sprintf("target: lab\naxes:\n  firmware: [%s, %s]\nprobes:\n  - {name: up, direction: up, duration: 1s}\nrepeats: 2\nidle: 0s\norder: cost-aware\n", newVersion, oldVersion)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{100 * time.Millisecond, 3 * time.Second, 8 * time.Second} {
		db := dbFor("bootenv-kill" + after.String())
		tr := trial{fault: "kill -9 across a boot environment switch", detail: fmt.Sprintf("%s after it began (%s → %s)", after, newVersion, oldVersion)}
		ff.killAfterLine(t, db, &tr, after, "a switch", func(l string) bool { return strings.HasPrefix(l, "booting boot environment ") })
		ff.finish(&tr, db)
		info := string(must(ff.fwabChild(t.Context(), "fw", "info", "--target", "lab", "--targets", ff.targets).Output()))
		if !strings.Contains(info, newVersion) {
			tr.lost = append(tr.lost, "the box does not run the firmware the sweep started on:\n"+info)
			tr.resumed = false
		}
		envs := string(must(ff.fwabChild(t.Context(), "fw", "firmwares", "--target", "lab", "--targets", ff.targets).Output()))
		for _, l := range strings.Split(envs, "\n")[1:] {
			if f := strings.Fields(l); len(f) >= 4 && f[1] != newVersion && f[3] == "yes" {
				tr.lost = append(tr.lost, "another environment boots next:\n"+envs)
				tr.resumed = false
			}
		}
		report(tr)
	}

	// 8. The safety net's own hazards (docs/safety.md).
	f.safetyTrials(t, flavor, dbFor, report)

	// The table.
	type row struct{ trials, restored, resumed, lost int }
	var order []string
	rows := map[string]*row{}
	for _, tr := range trials {
		r := rows[tr.fault]
		if r == nil {
			r = &row{}
			rows[tr.fault] = r
			order = append(order, tr.fault)
		}
		r.trials++
		if tr.restored {
			r.restored++
		}
		if tr.resumed {
			r.resumed++
		}
		if len(tr.lost) > 0 {
			r.lost++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s:\n", flavor)
	fmt.Fprintf(&b, "\n| fault | trials | restored | resumed | lost |\n| --- | ---: | ---: | ---: | ---: |\n")
	total := row{}
	for _, name := range order {
		r := rows[name]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d |\n", name, r.trials, r.restored, r.resumed, r.lost)
		total.trials += r.trials
		total.restored += r.restored
		total.resumed += r.resumed
		total.lost += r.lost
	}
	fmt.Fprintf(&b, "| all | %d | %d | %d | %d |\n", total.trials, total.restored, total.resumed, total.lost)
	fmt.Fprintf(&b, "\nseed %d, %d trials in %s\n", seed, total.trials, time.Since(started).Round(time.Second))
	fmt.Print(b.String())
	if total.lost > 0 {
		t.Errorf("%d of %d trials lost something (see above)", total.lost, total.trials)
	}
}

// killAfterLine starts a sweep into db, waits for the first line that
// match accepts, kills the sweep with SIGKILL after, and notes in tr when
// the kill did not land in what (no such line, or the sweep had ended).
func (f *faultLab) killAfterLine(t *testing.T, db string, tr *trial, after time.Duration, what string, match func(string) bool) {
	sw := f.startSweep(t, t.Context(), f.sweepArgs(db)...)
	hit := sw.waitLine(match, 3*time.Minute)
	select {
	case <-time.After(after):
	case <-sw.done:
	}
	ended := !sw.running()
	sw.cmd.Process.Signal(syscall.SIGKILL)
	sw.wait()
	if !hit || ended {
		tr.lost = append(tr.lost, "the kill did not land in "+what+":\n"+sw.output())
	}
}

// must is the output of a command that must not fail.
func must(out []byte, err error) []byte {
	if err != nil {
		panic(fmt.Sprintf("%v: %s", err, out))
	}
	return out
}

func exitOf(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "0"
	case errors.As(err, &ee):
		return strconv.Itoa(ee.ExitCode())
	}
	return err.Error()
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// killInNetns kills the processes named comm in a network namespace.
func killInNetns(ns, comm string) int {
	out, err := exec.Command("ip", "netns", "pids", ns).Output()
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		c, err := os.ReadFile(filepath.Join("/proc", f, "comm"))
		if err != nil || strings.TrimSpace(string(c)) != comm {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// boxConfig is the emulated box's config.xml on the lab machine's disk,
// for an edit made on the box by someone else's hand.
func (f *faultLab) boxConfig() string { return filepath.Join(f.dir, "root", "conf", "config.xml") }

// safetyTrials are the faults the safety net exists for: a reboot while a
// rollback is armed, kill -9 across the rollback's deadline (the hand-off),
// fwab killed and never run again (the lease restores the box; a recover
// from another machine finds nothing to do), someone else's edit mid-sweep,
// and a second fwab plus a recover against a live session.
func (f *faultLab) safetyTrials(t *testing.T, flavor string, dbFor func(string) string, report func(trial)) {
	ctx := t.Context()

	// A reboot while a step's rollback is armed: the boot runs the hook
	// (by exec, as the products do) and the rollback restores.
	{
		db := dbFor("reboot-armed")
		sw := f.startSweep(t, ctx, f.sweepArgs(db, "--rollback-after", "20s")...)
		hit := sw.waitPhase("apply", 1, 2*time.Minute)
		lab.SetFault(f.dir, emu.Fault{RebootAt: time.Now()})
		err := sw.wait()
		tr := trial{fault: "reboot with a rollback armed", detail: fmt.Sprintf("at the first apply, sweep exit %v", exitOf(err))}
		if !hit {
			tr.lost = append(tr.lost, "no apply to reboot in:\n"+sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// kill -9 across the rollback's deadline: before it, at it and after
	// it, so that the kill falls on either side of the disarm/fire
	// hand-off.
	for _, after := range []time.Duration{1500 * time.Millisecond, 2 * time.Second, 2500 * time.Millisecond} {
		db := dbFor("handoff" + after.String())
		sw := f.startSweep(t, ctx, f.sweepArgs(db, "--rollback-after", "2s")...)
		hit := sw.waitPhase("apply", 1, 2*time.Minute)
		time.Sleep(after)
		ended := !sw.running()
		sw.cmd.Process.Signal(syscall.SIGKILL)
		sw.wait()
		tr := trial{fault: "kill -9 at the hand-off", detail: fmt.Sprintf("%s after the apply began, rollback after 2s", after)}
		if !hit || ended {
			tr.lost = append(tr.lost, "the kill did not land in a running sweep:\n"+sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}

	// fwab killed and never run again: the lease ends and the box
	// restores itself; a recover from another machine (another state
	// folder) then finds nothing to do and says so.
	{
		db := dbFor("lease")
		lease := 30 * time.Second
		sw := f.startSweep(t, ctx, f.sweepArgs(db, "--lease", lease.String())...)
		hit := sw.waitPhase("probe", 1, 2*time.Minute)
		sw.cmd.Process.Signal(syscall.SIGKILL)
		sw.wait()
		killed := time.Now()
		tr := trial{fault: "fwab killed, never run again", detail: "after the first probe began, lease " + lease.String()}
		if !hit {
			tr.lost = append(tr.lost, "no probe to kill in:\n"+sw.output())
		}
		var restoredIn time.Duration
		for deadline := killed.Add(lease + 45*time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			if f.checkFirewall() == nil {
				restoredIn = time.Since(killed)
				break
			}
		}
		if restoredIn == 0 {
			tr.lost = append(tr.lost, "the box did not restore itself after its lease ended")
		} else {
			tr.detail += fmt.Sprintf("; the box restored itself %.0fs after the kill", restoredIn.Seconds())
		}
		other := f.fwabChild(ctx, "fw", "recover", "--target", "lab", "--targets", f.targets)
		other.Env = append(other.Env, "XDG_STATE_HOME="+t.TempDir())
		out, _ := other.CombinedOutput()
		if !strings.Contains(string(out), "nothing to recover") || !strings.Contains(string(out), "ended on the box") {
			tr.lost = append(tr.lost, "a recover from another machine did not say the box had restored itself:\n"+string(out))
		}
		f.finish(&tr, db)
		report(tr)
	}

	// Someone else edits config.xml mid-sweep: the sweep stops naming the
	// edit, and the edit survives the sweep's restore.
	{
		db := dbFor("foreign")
		sw := f.startSweep(t, ctx, f.sweepArgs(db)...)
		hit := sw.waitPhase("probe", 1, 2*time.Minute)
		cur, err := os.ReadFile(f.boxConfig())
		if err != nil {
			t.Fatal(err)
		}
		host := regexp.MustCompile(`<hostname>[^<]*</hostname>`)
		edit := host.ReplaceAll(cur, []byte("<hostname>edge-emergency</hostname>"))
		if err := os.WriteFile(f.boxConfig(), edit, 0o644); err != nil {
			t.Fatal(err)
		}
		err = sw.wait()
		tr := trial{fault: "someone else's edit mid-sweep", detail: fmt.Sprintf("the hostname, during the first probe; sweep exit %v", exitOf(err))}
		if !hit {
			tr.lost = append(tr.lost, "no probe to edit in:\n"+sw.output())
		}
		if !strings.Contains(sw.output(), "changed by someone else") || !strings.Contains(sw.output(), "system/hostname") {
			tr.lost = append(tr.lost, "the sweep did not stop naming the edit:\n"+sw.output())
		}
		got, err := f.configNow()
		want := host.ReplaceAll(f.original, []byte("<hostname>edge-emergency</hostname>"))
		if err != nil || !configxml.SameIgnoringRevision(got, want) {
			tr.lost = append(tr.lost, fmt.Sprintf("after the sweep the box does not hold the original with the edit kept (%v)", err))
		}
		// The trial's edit is taken back by hand, as its admin would.
		os.WriteFile(f.boxConfig(), f.original, 0o644)
		f.finish(&tr, db)
		report(tr)
	}

	// A second fwab on the box, and a recover against the live session:
	// both refused, naming the holder; the running sweep never notices.
	{
		db := dbFor("second")
		sw := f.startSweep(t, ctx, f.sweepArgs(db)...)
		hit := sw.waitPhase("probe", 1, 2*time.Minute)
		// The second fwab runs as from another machine (its own state
		// folder), so that the box's lock is what refuses it.
		sc := f.fwabChild(ctx, f.sweepArgs(dbFor("second-b"))...)
		sc.Env = append(sc.Env, "XDG_STATE_HOME="+t.TempDir())
		second, _ := sc.CombinedOutput()
		rec, _ := f.fwabChild(ctx, "fw", "recover", "--target", "lab", "--targets", f.targets).CombinedOutput()
		err := sw.wait()
		tr := trial{fault: "a second fwab; recover of a live one", detail: fmt.Sprintf("during the first probe; first sweep exit %v", exitOf(err))}
		if !hit {
			tr.lost = append(tr.lost, "no probe to collide with:\n"+sw.output())
		}
		if !strings.Contains(string(second), "locked by another fwab") || !strings.Contains(string(second), "lease on the box ends at") {
			tr.lost = append(tr.lost, "the second sweep was not refused naming the holder and its lease:\n"+string(second))
		}
		if !strings.Contains(string(rec), "may still be running") {
			tr.lost = append(tr.lost, "recover of a live session was not refused:\n"+string(rec))
		}
		if err != nil {
			tr.lost = append(tr.lost, "the first sweep did not finish undisturbed:\n"+sw.output())
		}
		f.finish(&tr, db)
		report(tr)
	}
}
