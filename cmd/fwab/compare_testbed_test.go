package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// testbedDB holds, oldest first: 1 the nightly spec on t730, 2 another
// spec on t730 (20 % slower), 3 the nightly spec on apu2, 4 the nightly
// spec on t730 10 % slower than 1, and 5 a sweep still running on t730.
func testbedDB(t *testing.T) string {
	t.Helper()
	const t730, apu2 = "t730@0000000000aa", "apu2@0000000000bb"
	adhoc := reporttest.T730(35, 0.20)
	adhoc.Spec = strings.Replace(adhoc.Spec, "name: t730-packages", "name: adhoc", 1)
	runs := []reporttest.Run{reporttest.T730(31, 0), adhoc, reporttest.T730(32, 0), reporttest.T730(33, 0.10)}
	for i, tb := range []string{t730, t730, apu2, t730} {
		runs[i].Uniform, runs[i].Testbed, runs[i].Target = true, tb, strings.Split(tb, "@")[0]
		runs[i].Created = time.Date(2026, 11, 1+i, 2, 0, 0, 0, time.UTC)
	}
	db := syntheticDB(t, runs...)
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.CreateRun(t.Context(), store.Run{Created: time.Date(2026, 11, 9, 2, 0, 0, 0, time.UTC), Spec: runs[0].Spec, Target: "t730", Testbed: t730, FwabVersion: "test"}); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestCompareTestbed: --testbed compares the testbed's newest finished run
// with the finished run of the same spec before it on that testbed.
func TestCompareTestbed(t *testing.T) {
	db := testbedDB(t)
	junit := filepath.Join(t.TempDir(), "compare.xml")
	out, errOut, code := runFwab(t, "compare", "--testbed", "t730", "--db", db, "--junit", junit)
	if code != exitFailure || !strings.Contains(out, "A: run 1 on t730") || !strings.Contains(out, "B: run 4 on t730") {
		t.Errorf("compare --testbed t730: exit %d, %s; want exit 1 comparing run 1 with run 4\n%s", code, errOut, out)
	}
	if b, err := os.ReadFile(junit); err != nil || !strings.Contains(string(b), `failures="8"`) {
		t.Errorf("compare --testbed t730 --junit: %v\n%s", err, b)
	}

	// One finished run: recorded, nothing to compare, exit 0, no JUnit.
	os.Remove(junit)
	out, errOut, code = runFwab(t, "compare", "--testbed", "apu2", "--db", db, "--junit", junit)
	want := "run 3 is the first finished run of its spec on testbed apu2@0000000000bb: nothing to compare it with yet; the next run is compared with it\n"
	if code != 0 || out != want {
		t.Errorf("compare --testbed apu2: exit %d, %s, stdout %q; want exit 0 and %q", code, errOut, out, want)
	}
	if _, err := os.Stat(junit); err == nil {
		t.Errorf("compare --testbed apu2 wrote %s with nothing compared", junit)
	}

	out, errOut, code = runFwab(t, "compare", "--testbed", "apu2", "--db", db, "--json")
	var j struct {
		Compared bool   `json:"compared"`
		Run      int64  `json:"run"`
		Testbed  string `json:"testbed"`
		Message  string `json:"message"`
	}
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil || j.Compared || j.Run != 3 || j.Testbed != "apu2@0000000000bb" || !strings.Contains(j.Message, "nothing to compare") {
		t.Errorf("compare --testbed apu2 --json: exit %d, %v, %s\n%s", code, err, errOut, out)
	}
}

// TestCompareArgs: a wrong number of runs, or runs with --testbed, is a
// usage error that names the form to use.
func TestCompareArgs(t *testing.T) {
	db := testbedDB(t)
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{[]string{"compare", "1"}, "compare 1: one run is compared within itself, across an axis: give --axis KNOB (fwab compare 1 --axis KNOB), or a second run"},
		{[]string{"compare"}, "compare takes two runs, RUN_A RUN_B"},
		{[]string{"compare", "1", "2", "3"}, "compare takes two runs, RUN_A RUN_B; got 3"},
		{[]string{"compare", "1", "2", "--axis", "ids@lan"}, "compare --axis takes one run"},
		{[]string{"compare", "1", "4", "--testbed", "t730"}, "--testbed picks the two runs itself: give no run with it"},
		{[]string{"compare", "--testbed", "t730", "--axis", "ids@lan"}, "--testbed compares two runs; --axis compares within one: give the run, compare RUN --axis ids@lan"},
		{[]string{"compare", "--testbed", "nosuch"}, "no finished run on testbed nosuch in " + db + ": 'fwab runs list --testbed nosuch' shows its runs"},
	} {
		_, errOut, code := runFwab(t, append(tc.args, "--db", db)...)
		if code != exitUsage || !strings.Contains(errOut, tc.wantErr) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 and %q", strings.Join(tc.args, " "), code, errOut, tc.wantErr)
		}
	}
}
