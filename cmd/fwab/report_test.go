package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/internal/golden"
	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// sweepDB writes three synthetic runs shaped like the T730 review: 1 is the
// baseline, 2 the same firmware again (A/A), 3 a firmware 10 % slower.
func sweepDB(t *testing.T) string {
	t.Helper()
	runs := []reporttest.Run{reporttest.T730(31, 0), reporttest.T730(32, 0), reporttest.T730(33, 0.10)}
	for i := range runs {
		runs[i].Uniform, runs[i].Series = true, true
	}
	runs[2].Firmware = "2.8.0-RELEASE"
	return syntheticDB(t, runs...)
}

// syntheticDB is a results database holding the runs, numbered from 1.
func syntheticDB(t *testing.T, runs ...reporttest.Run) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "results.db")
	st, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range runs {
		if _, err := reporttest.Create(t.Context(), st, r); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestReportCommand(t *testing.T) {
	db := sweepDB(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"report-md.txt", []string{"report", "1"}},
		{"report-pivot.md", []string{"report", "1", "--pivot", "ids", "--student"}},
		{"report-csv.txt", []string{"report", "1", "--format", "csv"}},
		{"report-json.txt", []string{"report", "1", "--format", "json"}},
		{"report-benchstat.txt", []string{"report", "3", "--format", "benchstat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runFwab(t, append(tc.args, "--db", db)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			golden.Output(t, tc.name, out, errOut)
		})
	}
}

func TestReportConfidence(t *testing.T) {
	db := sweepDB(t)
	for _, level := range []string{"99%", "0.99", " 99 % "} {
		out, errOut, code := runFwab(t, "report", "1", "--confidence", level, "--db", db)
		if code != 0 || !strings.Contains(out, "median ± its 99 % confidence interval") || !strings.Contains(out, "n=5 is too few for a 99% interval of the median; use 8 or more repeats") {
			t.Errorf("--confidence %s: exit %d, %s\n%s", level, code, errOut, out)
		}
	}
}

func TestReportHTMLFile(t *testing.T) {
	db := sweepDB(t)
	t.Chdir(t.TempDir())
	out, errOut, code := runFwab(t, "report", "1", "--format", "html", "--db", db)
	if code != 0 || out != "fwab-report-1.html\n" {
		t.Fatalf("report --format html = %q, exit %d, %s; want the path printed", out, code, errOut)
	}
	html, err := os.ReadFile("fwab-report-1.html")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(html), "<!DOCTYPE html>") || strings.Count(string(html), "<svg") != 5 {
		t.Errorf("fwab-report-1.html is not the report with its 5 charts (throughput per probe, effects, time series per probe)")
	}
	out, _, code = runFwab(t, "report", "1", "--format", "md", "-o", "sub.md", "--db", db)
	if b, err := os.ReadFile("sub.md"); code != 0 || out != "sub.md\n" || err != nil || !strings.HasPrefix(string(b), "# Run 1") {
		t.Errorf("report -o sub.md: exit %d, stdout %q, file %v", code, out, err)
	}
}

func TestReportErrors(t *testing.T) {
	db := sweepDB(t)
	for _, tc := range []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"report", "1", "--format", "pdf"}, exitUsage, `format "pdf": use one of md, csv, json, html, benchstat`},
		{[]string{"report", "1", "--pivot", "rules@lan"}, exitUsage, `pivot "rules@lan": not an axis of run 1; pick one of: blocklist, ids@lan, offload.checksum`},
		{[]string{"report", "1", "--confidence", "100%"}, exitUsage, `--confidence "100%": give a percentage above 0 and below 100%, such as 95% or 0.95`},
		{[]string{"report", "1", "--confidence", "x"}, exitUsage, `--confidence "x"`},
		{[]string{"report", "one"}, exitUsage, `run "one": give the run's number`},
		{[]string{"report"}, exitUsage, "accepts 1 arg(s)"},
		{[]string{"report", "9"}, exitUsage, "no run 9 in " + db},
		{[]string{"report", "1", "--db", filepath.Join(t.TempDir(), "none.db")}, exitUsage, "no results database at"},
	} {
		args := tc.args
		if !strings.Contains(strings.Join(args, " "), "--db") {
			args = append(args, "--db", db)
		}
		_, errOut, code := runFwab(t, args...)
		if code != tc.wantCode || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("fwab %s: exit %d, %q; want exit %d and %q", strings.Join(tc.args, " "), code, errOut, tc.wantCode, tc.wantErr)
		}
	}
}

func TestCompareCommand(t *testing.T) {
	db := sweepDB(t)
	junit := filepath.Join(t.TempDir(), "junit.xml")

	out, errOut, code := runFwab(t, "compare", "1", "2", "--db", db, "--junit", junit)
	if code != 0 {
		t.Errorf("A/A compare: exit %d, want 0; %s\n%s", code, errOut, out)
	}
	golden.Output(t, "compare-aa.txt", out, errOut)
	if b, err := os.ReadFile(junit); err != nil || !strings.Contains(string(b), `failures="0"`) {
		t.Errorf("A/A JUnit: %v\n%s", err, b)
	}

	out, errOut, code = runFwab(t, "compare", "1", "3", "--db", db, "--junit", junit, "--fail-on-regression", "3%")
	if code != exitFailure {
		t.Errorf("10%% slower compare: exit %d, want 1; %s", code, errOut)
	}
	golden.Output(t, "compare-regression.txt", out, errOut)
	b, err := os.ReadFile(junit)
	if err != nil || !strings.Contains(string(b), `failures="8"`) {
		t.Errorf("regression JUnit: %v\n%s", err, b)
	}
	golden.File(t, "compare-regression.xml", b)

	// Above the threshold nothing counts.
	if _, errOut, code := runFwab(t, "compare", "1", "3", "--db", db, "--fail-on-regression", "20%"); code != 0 {
		t.Errorf("--fail-on-regression 20%%: exit %d, want 0; %s", code, errOut)
	}
	// At n=5 the t-test finds it too.
	if _, _, code := runFwab(t, "compare", "1", "3", "--db", db, "--test", "ttest"); code != exitFailure {
		t.Errorf("--test ttest: exit %d, want 1", code)
	}
}

// TestCompareErrors: every failure but a regression exits 2, so that CI can
// tell a slower firmware from a broken job.
func TestCompareErrors(t *testing.T) {
	db := sweepDB(t)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"compare", "1", "2", "--fail-on-regression", "abc"}, `--fail-on-regression "abc": not a number: write a percentage such as 3% or 0.03`},
		{[]string{"compare", "1", "2", "--fail-on-regression", "-3%"}, `give a percentage from 0`},
		{[]string{"compare", "1", "2", "--test", "ztest"}, `--test "ztest": two runs are independent: use utest or ttest`},
		{[]string{"compare", "1", "2", "--metric", "speed"}, `metric "speed": use one of throughput, retransmits, dut-cpu, pps, loss, jitter, latency, ping-loss`},
		{[]string{"compare", "1", "9"}, "no run 9 in"},
		{[]string{"compare", "1"}, "give --axis KNOB (fwab compare 1 --axis KNOB)"},
		{[]string{"compare", "1", "2", "--junit", "/nonexistent/dir/j.xml"}, "junit:"},
	} {
		_, errOut, code := runFwab(t, append(tc.args, "--db", db)...)
		if code != exitUsage || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.wantErr)
		}
	}
}

// pairedDB holds run 1, over ids@lan × rules@lan with rounds that drift by
// 8 %, in which rules@lan=1000 costs 5 %; run 2 is the same with 6 rounds.
func pairedDB(t *testing.T) string {
	t.Helper()
	var runs []reporttest.Run
	for _, repeats := range []int{8, 6} {
		runs = append(runs, reporttest.Run{
			Firmware: "2.7.2-RELEASE",
			Spec:     "name: rules\naxes:\n  ids@lan: [off, ips-inline]\n  rules@lan: [0, 1000]\n",
			Seed:     3, Repeats: repeats, Noise: 0.01, RoundNoise: 0.08,
			Probes: []reporttest.Probe{{Name: "up", Direction: "up", Mbps: 940}, {Name: "down", Direction: "down", Mbps: 930}},
			Points: []reporttest.Point{
				{Knobs: map[string]string{"ids@lan": "off", "rules@lan": "0"}, Retransmits: -1},
				{Knobs: map[string]string{"ids@lan": "off", "rules@lan": "1000"}, Factor: 0.95, Retransmits: -1},
				{Knobs: map[string]string{"ids@lan": "ips-inline", "rules@lan": "0"}, Factor: 0.65, Retransmits: -1},
				{Knobs: map[string]string{"ids@lan": "ips-inline", "rules@lan": "1000"}, Factor: 0.65 * 0.95, Retransmits: -1},
			},
		})
	}
	return syntheticDB(t, runs...)
}

// TestCompareAxisCommand: one run's points across an axis, paired by
// round: the gate fails on the 5 % cost, says which design it used in
// text, JSON and JUnit, and refuses what it cannot answer with the fix.
func TestCompareAxisCommand(t *testing.T) {
	db := pairedDB(t)
	junit := filepath.Join(t.TempDir(), "junit.xml")
	out, errOut, code := runFwab(t, "compare", "1", "--axis", "rules", "--db", db, "--junit", junit)
	if code != exitFailure || !strings.Contains(out, "design: paired by round within run 1, 8 rounds") || !strings.Contains(out, "4 regressions") {
		t.Errorf("compare 1 --axis rules: exit %d; want 1 and 4 regressions, paired\n%s%s", code, out, errOut)
	}
	golden.Output(t, "compare-axis.txt", out, errOut)
	if b, err := os.ReadFile(junit); err != nil || !strings.Contains(string(b), `failures="4"`) || !strings.Contains(string(b), `name="design" value="paired by round within run 1, 8 rounds`) {
		t.Errorf("JUnit: %v\n%s", err, b)
	}
	out, _, code = runFwab(t, "compare", "1", "--axis", "rules@lan", "--base", "1000", "--test", "sign", "--json", "--db", db)
	var c struct {
		Design struct {
			Kind, Base string
			Rounds     int
		}
		Regressions int
		Rows        []struct {
			Value string
			Pairs int
		}
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || code != 0 || c.Design.Kind != "paired" || c.Design.Base != "1000" || c.Design.Rounds != 8 || c.Regressions != 0 || len(c.Rows) == 0 || c.Rows[0].Value != "0" || c.Rows[0].Pairs != 8 {
		t.Errorf("--base 1000 --json: exit %d, %v, %+v; want the cheaper side against the base, no regression\n%s", code, err, c, out)
	}
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"compare", "1", "--axis", "nat.outbound"}, "axis nat.outbound is not a knob of run 1; its axes are ids@lan, rules@lan"},
		{[]string{"compare", "1", "--axis", "rules", "--base", "7"}, "--base 7: axis rules@lan of run 1 takes 0, 1000"},
		{[]string{"compare", "2", "--axis", "rules"}, "Measure 8 or more rounds (repeats: 8 in the spec)"},
		{[]string{"compare", "1", "--axis", "rules", "--test", "utest"}, `--test "utest": --axis pairs rounds within one run: use signrank or sign`},
		{[]string{"compare", "1", "2", "--test", "signrank"}, "signrank and sign pair the rounds of one run: compare RUN --axis KNOB"},
		{[]string{"compare", "1", "2", "--axis", "rules"}, "compare --axis takes one run"},
		{[]string{"compare", "1", "2", "--base", "0"}, "give --axis KNOB too"},
		{[]string{"compare", "1", "--axis", "rules", "--ignore-knob", "ids"}, "with --axis the points differ in rules alone"},
	} {
		_, errOut, code := runFwab(t, append(tc.args, "--db", db)...)
		if code != exitUsage || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.wantErr)
		}
	}
}
