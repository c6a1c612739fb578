package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestMatrixJSON(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	out, stderr, code := fwab(t, "", "matrix", "plan", "../../examples/e302-modes.yaml", "--config", cfg, "--json")
	if code != exitOK {
		t.Fatalf("matrix plan --json: exit %d, %s", code, stderr)
	}
	var plan planJSON
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("matrix plan --json is not JSON: %v\n%s", err, out)
	}
	if len(plan.Points) != 7 || len(plan.Steps) != 7*plan.Repeats+1 || plan.EstimateSeconds <= 0 || plan.ServiceActions["filter-reload"] == 0 {
		t.Errorf("matrix plan --json = %+v", plan)
	}
	if last := plan.Steps[len(plan.Steps)-1]; !last.DriftCheck || last.Round != 0 || last.Point != 0 {
		t.Errorf("the last step %+v is not the drift check of the baseline", last)
	}
	baselines := 0
	for _, p := range plan.Points {
		if p.Baseline {
			baselines++
			if p.Knobs["filter"] != "enabled" || p.Knobs["rules@lan"] != "0" || p.Knobs["nat.outbound"] != "disabled" {
				t.Errorf("baseline point %+v", p)
			}
		}
	}
	if baselines != 1 {
		t.Errorf("%d baseline points", baselines)
	}
	out, _, code = fwab(t, "", "matrix", "check", "../../examples/e302-modes.yaml", "--config", cfg, "--json")
	if err := json.Unmarshal([]byte(out), &plan); code != exitOK || err != nil || !strings.Contains(out, `"points"`) || strings.Contains(out, `"steps"`) {
		t.Errorf("matrix check --json: exit %d, %v\n%s", code, err, out)
	}
}

// A command asked for JSON fails in JSON on stdout, and in words on stderr.
func TestJSONError(t *testing.T) {
	out, stderr, code := fwab(t, "", "matrix", "check", "no-such-spec.yaml", "--json")
	var e jsonError
	if err := json.Unmarshal([]byte(out), &e); err != nil {
		t.Fatalf("stdout is not a JSON error: %v\n%q", err, out)
	}
	if code != exitUsage || e.Error.ExitCode != code || !strings.Contains(e.Error.Message, "no-such-spec.yaml") || !strings.Contains(stderr, "no-such-spec.yaml") {
		t.Errorf("exit %d, JSON %+v, stderr %q", code, e, stderr)
	}
	if !strings.Contains(out, `"exit_code": 2`) {
		t.Errorf("field names are not snake_case: %s", out)
	}
	// Without --json, stdout stays empty.
	if out, _, _ := fwab(t, "", "matrix", "check", "no-such-spec.yaml"); out != "" {
		t.Errorf("stdout without --json: %q", out)
	}
}

// A --product the file's own layout contradicts is refused, not used to
// read the file as another release (which could call an unsafe file ok).
func TestProductContradictsLayout(t *testing.T) {
	cfg := fixtureFile(t, "configs/opnsense-26.1.xml")
	for _, args := range [][]string{
		{"verify", "--offline", cfg, "--product", "25.7"},
		{"config", "show", cfg, "--product", "25.7"},
	} {
		out, stderr, code := fwab(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, "product version 25.7") || !strings.Contains(stderr, "from 26.1 on") || strings.Contains(out, "ok") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming 25.7 and 26.1", strings.Join(args, " "), code, out, stderr)
		}
	}
}

func TestCompareJSON(t *testing.T) {
	db := sweepDB(t)
	out, stderr, code := runFwab(t, "compare", "1", "3", "--db", db, "--json")
	if code != exitFailure {
		t.Fatalf("compare --json of a regression: exit %d, %s", code, stderr)
	}
	var c compareJSON
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if c.Regressions != 8 || len(c.Rows) == 0 || c.A.ID != 1 || c.B.ID != 3 {
		t.Errorf("compare --json = %+v", c)
	}
	for _, r := range c.Rows {
		if r.A.N > 0 && r.A.N < 6 && r.A.Lo != nil {
			t.Errorf("row %s %s: an interval at n=%d", r.Point, r.Probe, r.A.N)
		}
	}
	for _, key := range []string{`"change_pct"`, `"only_in_a"`, `"regression"`, `"id"`} {
		if !strings.Contains(out, key) {
			t.Errorf("compare --json lacks %s", key)
		}
	}
}

// An xml: axis without an action is accepted with a warning on stderr (and
// in the JSON); naming one silences it.
func TestMatrixCheckWarnsXMLWithoutAction(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	dir := t.TempDir()
	spec := dir + "/xml.yaml"
	if err := os.WriteFile(spec, []byte("axes:\n  xml:system/maximumstates: [100000, 200000]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := fwab(t, "", "matrix", "check", spec, "--config", cfg)
	if code != exitOK || !strings.Contains(stderr, "warning: xml:system/maximumstates has no action") {
		t.Errorf("matrix check: exit %d, stderr %q; want ok with a warning", code, stderr)
	}
	out, _, _ := fwab(t, "", "matrix", "check", spec, "--config", cfg, "--json")
	if !strings.Contains(out, `"warnings"`) {
		t.Errorf("matrix check --json has no warnings:\n%s", out)
	}
	if err := os.WriteFile(spec, []byte("axes:\n  xml:system/maximumstates: [100000, 200000]\nactions:\n  xml:system/maximumstates: filter-reload\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code = fwab(t, "", "matrix", "check", spec, "--config", cfg); code != exitOK || strings.Contains(stderr, "warning") {
		t.Errorf("matrix check with an action: exit %d, stderr %q; want ok, no warning", code, stderr)
	}
}

// matrix check states adaptive repeats as a range, with the time at the
// minimum and the bound at the maximum.
func TestMatrixCheckAdaptiveRepeats(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	spec := t.TempDir() + "/spec.yaml"
	if err := os.WriteFile(spec, []byte("target: lab\naxes:\n  rules@lan: [0, 10]\nprobes:\n  - {name: up, direction: up, duration: 10s}\nrepeats: {min: 6, max: 12, width: 5%}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := fwab(t, "", "matrix", "check", spec, "--config", cfg)
	if code != exitOK || !strings.Contains(out, "2 points × 6–12 repeats (adaptive, until ±5 %) = 12 steps at the minimum, about ") || !strings.Contains(out, "(at most about ") {
		t.Errorf("matrix check: exit %d, %q %s", code, out, stderr)
	}
	out, _, _ = fwab(t, "", "matrix", "check", spec, "--config", cfg, "--json")
	var plan planJSON
	if err := json.Unmarshal([]byte(out), &plan); err != nil || plan.Repeats != 6 || plan.RepeatsMax != 12 || plan.WidthPct != 5 || plan.EstimateMaxSeconds != 2*plan.EstimateSeconds {
		t.Errorf("matrix check --json: %v %+v", err, plan)
	}
}
