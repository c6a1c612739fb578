package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// examples/sample-results.db is the results database the README offers to
// try report, compare and trend on without a firewall: four runs of
// examples/sample-nightly.yaml on the lab, 2.8.0 → 2.8.1 (10 % slower)
// between runs 2 and 3 (scripts/sample-db.sh made it).
const (
	sampleDB    = "../../examples/sample-results.db"
	sampleSpec  = "../../examples/sample-nightly.yaml"
	sampleRegen = "examples/sample-results.db no longer reads as README.md says it does: " +
		"if the schema, the spec or these commands' output changed, regenerate it with " +
		"'sudo make sample-db' and check the run numbers README.md names"
)

// TestSampleDB runs the README's commands on a copy of the sample database
// and checks they show what the README says: four runs on one testbed, a
// report, the regression across the upgrade, no regression across an upgrade
// that changed nothing nor between two runs on one firmware, and trend's
// change at run 3. The checked-in file must come out unchanged.
func TestSampleDB(t *testing.T) {
	orig, err := os.ReadFile(sampleDB)
	if err != nil {
		t.Fatalf("%v\n%s", err, sampleRegen)
	}
	t.Cleanup(func() {
		now, err := os.ReadFile(sampleDB)
		if err != nil || !bytes.Equal(now, orig) {
			t.Errorf("%s changed while the test read a copy of it (%v): restore it from version control", sampleDB, err)
		}
	})
	db := filepath.Join(t.TempDir(), "sample-results.db")
	if err := os.WriteFile(db, orig, 0o644); err != nil {
		t.Fatal(err)
	}

	// fail reports a command whose output or exit status is not what the
	// README says, with the output and how to regenerate the file.
	fail := func(t *testing.T, args []string, stdout, stderr, format string, a ...any) {
		t.Helper()
		t.Errorf("fwab %s: %s\nstdout:\n%s\nstderr:\n%s\n%s", strings.Join(args, " "), fmt.Sprintf(format, a...), stdout, stderr, sampleRegen)
	}
	tests := []struct {
		name  string
		args  []string
		code  int
		check func(stdout string) string // "" when stdout is right
	}{
		{"runs list", []string{"runs", "list"}, 0, func(out string) string {
			// Newest first: run, created, status, testbed, firmware, ...
			want := map[string]string{"1": "2.7.2-RELEASE", "2": "2.8.0-RELEASE", "3": "2.8.1-RELEASE", "4": "2.8.1-RELEASE"}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1+len(want) {
				return fmt.Sprintf("%d lines, want a header and %d runs", len(lines), len(want))
			}
			for _, l := range lines[1:] {
				f := strings.Split(l, "\t")
				if len(f) < 5 || want[f[0]] == "" || f[2] != "done" || !strings.HasPrefix(f[3], "lab@") || f[4] != want[f[0]] {
					return fmt.Sprintf("line %q: want runs 1-4 done on lab@… on %v", l, want)
				}
			}
			return ""
		}},
		{"report 1", []string{"report", "1"}, 0, func(out string) string {
			for _, s := range []string{"# Run 1 on lab@", "(2.7.2-RELEASE)", "| 0 (baseline) | disabled |", "| 1 | automatic |"} {
				if !strings.Contains(out, s) {
					return fmt.Sprintf("no %q", s)
				}
			}
			return ""
		}},
		{"compare across the upgrade to 2.8.1", []string{"compare", "2", "3"}, 1, func(out string) string {
			// Every throughput row, up and down at both points, is a regression.
			for _, row := range []string{"up nat.outbound=disabled", "down nat.outbound=disabled", "up nat.outbound=automatic", "down nat.outbound=automatic"} {
				if !hasLine(out, row, "REGRESSION") {
					return fmt.Sprintf("no REGRESSION line for %s", row)
				}
			}
			if !strings.Contains(out, "4 regressions") {
				return `no "4 regressions"`
			}
			return ""
		}},
		{"compare across an upgrade that changed nothing", []string{"compare", "1", "2"}, 0, noRegression},
		{"compare two runs on 2.8.1", []string{"compare", "3", "4"}, 0, noRegression},
		{"trend", []string{"trend", sampleSpec, "--testbed", "lab", "--window", "2"}, 1, func(out string) string {
			// One change per point and probe, every one at run 3 on 2.8.1.
			var rows int
			for l := range strings.Lines(out) {
				f := strings.Fields(l)
				if len(f) < 5 || !strings.HasPrefix(f[0], "nat.outbound=") {
					continue
				}
				rows++
				if f[2] != "3" || f[4] != "2.8.1-RELEASE" {
					return fmt.Sprintf("change %q: want it at run 3 on 2.8.1-RELEASE", strings.TrimSpace(l))
				}
			}
			if rows != 4 {
				return fmt.Sprintf("%d changes, want 4 (up and down at both points)", rows)
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(tt.args, "--db", db)
			stdout, stderr, code := fwab(t, "", args...)
			if code != tt.code {
				fail(t, args, stdout, stderr, "exit %d, want %d", code, tt.code)
				return
			}
			if msg := tt.check(stdout); msg != "" {
				fail(t, args, stdout, stderr, "%s", msg)
			}
		})
	}
}

// noRegression checks a compare's output for no regression at all.
func noRegression(out string) string {
	if strings.Contains(out, "REGRESSION") || !strings.Contains(out, "no regression") {
		return `want "no regression" and no REGRESSION line`
	}
	return ""
}

// hasLine reports whether a line of out starts with prefix and holds s.
func hasLine(out, prefix, s string) bool {
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, s) {
			return true
		}
	}
	return false
}
