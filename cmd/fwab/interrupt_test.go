package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/store"
)

// bigConfig writes a config.xml of some tens of megabytes (many filter
// rules), which takes seconds to read, edit and write.
func bigConfig(t *testing.T) string {
	t.Helper()
	base := string(fixtures.Read("configs/pfsense-2.7.xml"))
	var rules strings.Builder
	for i := range 400_000 {
		fmt.Fprintf(&rules, "<rule><type>pass</type><interface>lan</interface><tracker>%d</tracker><descr>bulk %d</descr></rule>\n", 2_000_000+i, i)
	}
	cfg := strings.Replace(base, "<filter>", "<filter>\n"+rules.String(), 1)
	path := filepath.Join(t.TempDir(), "big.xml")
	if err := os.WriteFile(path, []byte(cfg), 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

// An interrupt stops the offline commands: exit 130, nothing written.
func TestOfflineCommandsStopOnInterrupt(t *testing.T) {
	big := bigConfig(t)
	orig, _ := os.ReadFile(big)
	out := filepath.Join(t.TempDir(), "new.xml")
	for _, args := range [][]string{
		{"config", "set", big, "rules@lan=5", "--in-place"},
		{"config", "set", big, "rules@lan=5", "-o", out},
		{"config", "lint", big},
		{"config", "diff", big, big},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
		cancel()
		if code != exitCancelled {
			t.Errorf("%s interrupted: exit %d, want %d; stderr %q", strings.Join(args, " "), code, exitCancelled, stderr.String())
		}
	}
	if now, _ := os.ReadFile(big); !bytes.Equal(now, orig) {
		t.Errorf("an interrupted in-place edit changed the file")
	}
	for _, p := range []string{out, big + ".bak"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("an interrupted edit wrote %s", p)
		}
	}
}

// An interrupt stops the commands that plan a spec while they plan: a
// 10,000-point spec takes them seconds (expanding, linting, ordering), and
// one that ignored the interrupt would print its plan and exit 0.
func TestPlanCommandsStopOnInterrupt(t *testing.T) {
	dir := t.TempDir()
	var counts []string
	for i := range 625 {
		counts = append(counts, strconv.Itoa(16*i))
	}
	spec := filepath.Join(dir, "big.yaml")
	yaml := "name: big\ntarget: lab\naxes:\n  rules@lan: [" + strings.Join(counts, ", ") + "]\n" +
		"  offload.checksum: [on, off]\n  offload.tso: [on, off]\n  offload.lro: [on, off]\n  nat.outbound: [disabled, automatic]\n" +
		"probes:\n  - {name: up, direction: up, duration: 5s}\nrepeats: 1\n"
	if err := os.WriteFile(spec, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	t.Chdir(dir)
	for _, args := range [][]string{
		{"matrix", "check", spec, "--config", cfg},
		{"matrix", "plan", spec, "--config", cfg},
		{"sweep", spec, "--dry-run", "--config", cfg},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
		cancel()
		if code != exitCancelled || stdout.Len() > 0 {
			t.Errorf("%s interrupted: exit %d, want %d; stdout %q, stderr %q", strings.Join(args[:2], " "), code, exitCancelled, stdout.String(), stderr.String())
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 {
		t.Errorf("an interrupted plan left files: %v", left)
	}
}

// A sweep stopped by a signal puts the firewall's config back and exits
// 130, the run cancelled: Ctrl-C, SIGTERM, and SIGHUP (its terminal closed,
// its SSH session lost), also when its stderr is a pipe whose reader went
// away first (a write to it must not kill fwab with SIGPIPE).
func TestSweepStopsOnSignal(t *testing.T) {
	for _, tt := range []struct {
		name        string
		sig         syscall.Signal
		closeStderr bool
	}{
		{"SIGINT", syscall.SIGINT, false},
		{"SIGINT with stderr closed", syscall.SIGINT, true},
		{"SIGTERM", syscall.SIGTERM, false},
		{"SIGHUP", syscall.SIGHUP, false},
		{"SIGHUP with stderr closed", syscall.SIGHUP, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			targetsFile, spec, ems := emulatorTargets(t, dir, 1, -1)
			original := ems[0].StoredConfig(t)
			db := filepath.Join(dir, "results.db")
			exe, _ := os.Executable()
			cmd := exec.CommandContext(t.Context(), exe, "sweep", spec, "--target", "fw1", "--targets", targetsFile, "--db", db, "--progress=false")
			cmd.Env = append(os.Environ(), asFwab+"=1", stubProbeEnv+"=1", "XDG_STATE_HOME="+filepath.Join(dir, "state"))
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd.Stderr = w
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			var out strings.Builder
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				out.WriteString(sc.Text() + "\n")
				if strings.Contains(sc.Text(), "round 1 probe") {
					break
				}
			}
			if tt.closeStderr {
				r.Close()
			}
			cmd.Process.Signal(tt.sig)
			if !tt.closeStderr {
				for sc.Scan() {
					out.WriteString(sc.Text() + "\n")
				}
				r.Close()
			}
			err = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != exitCancelled {
				t.Errorf("sweep after %s: %v, want exit %d:\n%s", tt.sig, err, exitCancelled, out.String())
			}
			if !tt.closeStderr && (!strings.Contains(out.String(), "original config restored") || !strings.Contains(out.String(), "interrupted")) {
				t.Errorf("sweep after %s does not say it restored the config and was interrupted:\n%s", tt.sig, out.String())
			}
			if got := ems[0].StoredConfig(t); !bytes.Equal(got, original) {
				t.Errorf("after %s the firewall's config.xml is not the original", tt.sig)
			}
			if _, runs := openRuns(t, db); len(runs) != 1 || runs[0].Status != store.Cancelled {
				t.Errorf("runs %+v, want one cancelled", runs)
			}
		})
	}
}

// Output to a pipe whose reader is gone (fwab ... | head) is dropped: the
// command ends as it would have, with no error about the pipe.
func TestClosedStdoutPipe(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	exe, _ := os.Executable()
	cmd := exec.CommandContext(t.Context(), exe, "config", "show", cfg)
	cmd.Env = append(os.Environ(), asFwab+"=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	w.Close()
	if err != nil || stderr.Len() > 0 {
		t.Errorf("config show into a closed pipe: %v, stderr %q; want exit 0 and nothing on stderr", err, stderr.String())
	}
}
