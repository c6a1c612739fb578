// Package golden compares test output with files under testdata/ and
// rewrites them when the test runs with -update.
//
// Only tests import it: importing it registers the -update flag.
package golden

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Dir is the folder, relative to the package under test, that holds the
// golden files.
const Dir = "testdata"

// File compares got with the file testdata/name and reports a diff
// (-want +got) when they differ; with -update it writes got to the file
// instead.
func File(t testing.TB, name string, got []byte) {
	t.Helper()
	check(t, name, got, false)
}

// Output compares a command's standard output with testdata/name and its
// standard error with testdata/name.stderr, and reports a diff for each that
// differs; with -update it rewrites both. A missing .stderr file stands for
// an empty standard error, so -update writes one only when there is
// something on it (and removes one that is no longer needed).
func Output(t testing.TB, name, stdout, stderr string) {
	t.Helper()
	check(t, name, []byte(stdout), false)
	check(t, name+".stderr", []byte(stderr), true)
}

// check compares got with testdata/name; absentIsEmpty makes a missing file
// mean empty content.
func check(t testing.TB, name string, got []byte, absentIsEmpty bool) {
	t.Helper()
	path := filepath.Join(Dir, name)
	if *update {
		write(t, path, got, absentIsEmpty && len(got) == 0)
		return
	}
	want, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && absentIsEmpty:
		want = nil
	case err != nil:
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got); if the change is intended, run go test -update:\n%s", path, diff)
	}
}

func write(t testing.TB, path string, got []byte, remove bool) {
	t.Helper()
	if remove {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		t.Fatal(err)
	}
}
