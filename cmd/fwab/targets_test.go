package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --targets path given on the command line must exist: a typo is not an
// empty targets file.
func TestTargetsPathMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "targtes.yaml")
	for _, args := range [][]string{
		{"fw", "info", "--target", "lab", "--targets", missing},
		{"fw", "recover", "--target", "lab", "--targets", missing},
	} {
		_, stderr, code := fwab(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, missing) || !strings.Contains(stderr, "does not exist") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming the missing file", strings.Join(args, " "), code, stderr)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("%s created the missing targets file", strings.Join(args, " "))
		}
	}
}

// The known targets are listed as words, not as a Go slice.
func TestUnknownTargetListsTheKnownOnes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "targets.yaml")
	yaml := "targets:\n  fw-a: {flavor: pfsense, host: 127.0.0.1, ssh: {user: admin}}\n  fw-b: {flavor: pfsense, host: 127.0.0.1, ssh: {user: admin}}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := fwab(t, "", "fw", "info", "--target", "fw-c", "--targets", path)
	if code != exitUsage || !strings.Contains(stderr, "known targets: fw-a, fw-b") {
		t.Errorf("exit %d, stderr %q; want exit 2 listing fw-a, fw-b", code, stderr)
	}
}

// A typo in the targets file is named as a key, with the nearest one.
func TestTargetsFileTypo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(path, []byte("targets:\n  fw-a:\n    flavour: pfsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := fwab(t, "", "fw", "info", "--target", "fw-a", "--targets", path)
	if code != exitUsage || !strings.Contains(stderr, "line 3: unknown key `flavour` (did you mean `flavor`?)") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming `flavour` and `flavor`", code, stderr)
	}
}
