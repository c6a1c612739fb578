package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPercentFlagsRule: every percentage flag reads "3%" as 3 % and a plain
// number below 1 as a fraction, and refuses a plain number of 1 or more,
// which could mean either.
func TestPercentFlagsRule(t *testing.T) {
	db := sweepDB(t) // run 3 is 10 % slower than run 1
	const text = "target: lab\naxes:\n  ids@lan: [\"off\"]\nprobes:\n  - {name: up, direction: up, duration: 1s}\n"
	spec := filepath.Join(t.TempDir(), "nightly.yaml")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	trend := trendDB(t, text) // an 8 % step
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantOut  string // in stdout
		wantErr  string // in stderr
	}{
		// A fraction: 0.2 is 20 %, more than the 10 % change.
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "0.2"}, 0, "", ""},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "20%"}, 0, "", ""},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "0.03"}, exitFailure, "beyond 3%", ""},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "3 %"}, exitFailure, "beyond 3%", ""},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "0"}, exitFailure, "", ""},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "20"}, exitUsage, "", `--fail-on-regression "20" is ambiguous: write 20% or 0.2`},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "3"}, exitUsage, "", `--fail-on-regression "3" is ambiguous: write 3% or 0.03`},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "1"}, exitUsage, "", `write 1% or 0.01`},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "100%"}, exitUsage, "", `--fail-on-regression "100%": give a percentage from 0 to below 100%, such as 3% or 0.03`},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "-0.03"}, exitUsage, "", `--fail-on-regression "-0.03": give a percentage from 0`},
		{[]string{"compare", "1", "3", "--db", db, "--fail-on-regression", "1/2"}, exitUsage, "", `--fail-on-regression "1/2": not a number`},

		{[]string{"report", "1", "--db", db, "--confidence", "0.99"}, 0, "its 99 % confidence interval", ""},
		{[]string{"report", "1", "--db", db, "--confidence", "99%"}, 0, "its 99 % confidence interval", ""},
		{[]string{"report", "1", "--db", db, "--confidence", "99"}, exitUsage, "", `--confidence "99" is ambiguous: write 99% or 0.99`},
		{[]string{"report", "1", "--db", db, "--confidence", "0"}, exitUsage, "", `--confidence "0": give a percentage above 0 and below 100%, such as 95% or 0.95`},
		{[]string{"report", "1", "--db", db, "--confidence", "NaN"}, exitUsage, "", `--confidence "NaN": not a number`},

		// The step is 8 %: a 10 % threshold, however written, finds none.
		{[]string{"trend", spec, "--testbed", "lab", "--db", trend, "--threshold", "0.1"}, 0, "no change", ""},
		{[]string{"trend", spec, "--testbed", "lab", "--db", trend, "--threshold", "10%"}, 0, "no change", ""},
		{[]string{"trend", spec, "--testbed", "lab", "--db", trend, "--threshold", "0.05"}, exitFailure, "", ""},
		{[]string{"trend", spec, "--testbed", "lab", "--db", trend, "--threshold", "10"}, exitUsage, "", `--threshold "10" is ambiguous: write 10% or 0.1`},
	} {
		out, errOut, code := runFwab(t, tc.args...)
		if code != tc.wantCode || !strings.Contains(out, tc.wantOut) || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("fwab %s: exit %d, stderr %q; want exit %d, %q in stdout and %q in stderr\n%s", strings.Join(tc.args, " "), code, errOut, tc.wantCode, tc.wantOut, tc.wantErr, out)
		}
	}
}

// TestPercentFlagExact: a fraction becomes the percentage it names, not a
// neighbouring float (0.07·100 is 7.000000000000001).
func TestPercentFlagExact(t *testing.T) {
	db := sweepDB(t)
	out, errOut, code := runFwab(t, "compare", "1", "2", "--db", db, "--json", "--fail-on-regression", "0.07")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var c compareJSON
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if c.Threshold != 7 {
		t.Errorf("--fail-on-regression 0.07: threshold_pct = %v, want 7", c.Threshold)
	}
}

// TestPercentFlagsHelp: each percentage flag's help states the rule.
func TestPercentFlagsHelp(t *testing.T) {
	for _, cmd := range [][]string{{"compare"}, {"report"}, {"trend"}} {
		out, _, code := runFwab(t, append(cmd, "--help")...)
		if code != 0 || !strings.Contains(out, "3% or 0.03") && !strings.Contains(out, "95% or 0.95") || !strings.Contains(out, "a plain number below 1 is a fraction") {
			t.Errorf("fwab %s --help does not state the percentage rule:\n%s", cmd[0], out)
		}
	}
}
