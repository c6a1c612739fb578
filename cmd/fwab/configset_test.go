package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// config set refuses to write a config that breaks a safety rule, unless
// the rule is allowed by its ID; --diff writes nothing.
func TestConfigSetSafetyRule(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	out := filepath.Join(t.TempDir(), "new.xml")
	unsafe := []string{"config", "set", pf, "offload.tso=on", "ids@lan=ips-inline", "-o", out}
	_, stderr, code := fwab(t, "", unsafe...)
	if code != exitFailure || !strings.Contains(stderr, "FWAB001") || !strings.Contains(stderr, "--allow FWAB001") {
		t.Errorf("unsafe config set: exit %d, %q; want exit 1 naming FWAB001 and --allow", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("an unsafe config was written")
	}
	if _, stderr, code := fwab(t, "", append(unsafe, "--allow", "FWAB001")...); code != exitOK || !strings.Contains(stderr, "wrote "+out+": 2 knobs changed") {
		t.Errorf("config set --allow FWAB001: exit %d, %q", code, stderr)
	}
	if _, stderr, code := fwab(t, "", append(unsafe, "--allow", "FWAB999")...); code != exitUsage || !strings.Contains(stderr, "no such lint rule") {
		t.Errorf("--allow FWAB999: exit %d, %q", code, stderr)
	}

	before, _ := os.ReadFile(pf)
	stdout, _, code := fwab(t, "", "config", "set", pf, "offload.tso=on", "rules@lan=5", "--diff")
	if code != exitOK || !strings.Contains(stdout, "rules@lan") || !strings.Contains(stdout, "filter-reload") {
		t.Errorf("config set --diff: exit %d\n%s", code, stdout)
	}
	if after, _ := os.ReadFile(pf); string(after) != string(before) {
		t.Errorf("--diff changed the file")
	}
}

// --in-place writes through a symlink, keeps the mode, refuses a read-only
// file without --force, writes nothing when nothing changes, and never
// overwrites the first backup.
func TestConfigSetInPlaceIsSafe(t *testing.T) {
	dir := t.TempDir()
	real := fixtureFile(t, "configs/pfsense-2.7.xml")
	if err := os.Chmod(real, 0o640); err != nil {
		t.Fatal(err)
	}
	pristine, _ := os.ReadFile(real)
	link := filepath.Join(dir, "config.xml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := fwab(t, "", "config", "set", link, "rules@lan=3", "--in-place"); code != exitOK {
		t.Fatalf("in-place through a link: exit %d, %s", code, stderr)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink was replaced by a file")
	}
	if st, _ := os.Stat(real); st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v after the write, want 0640", st.Mode().Perm())
	}
	if b, _ := os.ReadFile(real); !strings.Contains(string(b), "fwab") {
		t.Errorf("the link's target was not changed")
	}
	if b, _ := os.ReadFile(real + ".bak"); string(b) != string(pristine) {
		t.Errorf("%s.bak is not the original", real)
	}

	// Nothing to change: nothing written, no new backup.
	after1, _ := os.ReadFile(real)
	if _, stderr, code := fwab(t, "", "config", "set", link, "rules@lan=3", "--in-place"); code != exitOK || !strings.Contains(stderr, "nothing written") {
		t.Errorf("unchanged in-place: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(real + ".bak.1"); err == nil {
		t.Errorf("a no-op edit made a backup")
	}
	// A second change keeps the first backup.
	if _, stderr, code := fwab(t, "", "config", "set", link, "rules@lan=4", "--in-place"); code != exitOK {
		t.Fatalf("second in-place: exit %d, %s", code, stderr)
	}
	if b, _ := os.ReadFile(real + ".bak"); string(b) != string(pristine) {
		t.Errorf("the second edit overwrote the pristine backup")
	}
	if b, _ := os.ReadFile(real + ".bak.1"); string(b) != string(after1) {
		t.Errorf("the second edit's backup is not the first edit's result")
	}

	// Read-only: refused without --force (even as root), written with it.
	if err := os.Chmod(real, 0o440); err != nil {
		t.Fatal(err)
	}
	current, _ := os.ReadFile(real)
	if _, stderr, code := fwab(t, "", "config", "set", link, "rules@lan=5", "--in-place"); code != exitUsage || !strings.Contains(stderr, "read-only") || !strings.Contains(stderr, "--force") {
		t.Errorf("read-only in-place: exit %d, %q; want exit 2 pointing to --force", code, stderr)
	}
	if b, _ := os.ReadFile(real); string(b) != string(current) {
		t.Errorf("a read-only file was changed without --force")
	}
	if _, stderr, code := fwab(t, "", "config", "set", link, "rules@lan=5", "--in-place", "--force"); code != exitOK {
		t.Errorf("read-only in-place --force: exit %d, %s", code, stderr)
	}
	if st, _ := os.Stat(real); st.Mode().Perm() != 0o440 {
		t.Errorf("--force changed the mode to %v", st.Mode().Perm())
	}
}

func TestConfigLintFilters(t *testing.T) {
	opn := fixtureFile(t, "configs/opnsense-26.1.xml")
	bad := filepath.Join(t.TempDir(), "bad.xml")
	// inline IPS with TSO on (an error) and advanced NAT with no rules (a
	// warning: the knob refuses it, the xml escape hatch writes it)
	if _, stderr, code := fwab(t, "", "config", "set", opn, "offload.tso=on", "ids@lan=ips-inline", "ids@wan=ips-inline", "xml:nat/outbound/mode=advanced", "-o", bad, "--allow", "FWAB001"); code != exitOK {
		t.Fatal(stderr)
	}
	all, _, code := fwab(t, "", "config", "lint", bad)
	if code != exitFailure || !strings.Contains(all, "FWAB001") || !strings.Contains(all, "FWAB004") {
		t.Fatalf("lint: exit %d\n%s", code, all)
	}
	if out, _, code := fwab(t, "", "config", "lint", bad, "--severity", "error"); code != exitFailure || strings.Contains(out, "FWAB004") || !strings.Contains(out, "FWAB001") {
		t.Errorf("--severity error: exit %d\n%s", code, out)
	}
	if out, _, code := fwab(t, "", "config", "lint", bad, "--disable", "FWAB001"); code != exitOK || strings.Contains(out, "FWAB001") || !strings.Contains(out, "FWAB004") {
		t.Errorf("--disable FWAB001: exit %d (want 0: only a warning left)\n%s", code, out)
	}
	for _, args := range [][]string{{"--disable", "FWAB099"}, {"--severity", "fatal"}} {
		if _, stderr, code := fwab(t, "", append([]string{"config", "lint", bad}, args...)...); code != exitUsage {
			t.Errorf("lint %v: exit %d, %q", args, code, stderr)
		}
	}
}

// An xml: edit is a change like a knob's: --in-place writes it, -o counts
// it, --diff shows it with its old and new text.
func TestConfigSetXMLPath(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	stdout, _, code := fwab(t, "", "config", "set", pf, "xml:system/hostname=lab-fw", "--diff")
	if code != exitOK || !strings.Contains(stdout, "xml:system/hostname") || !strings.Contains(stdout, "lab-fw") {
		t.Errorf("config set xml:system/hostname=lab-fw --diff: exit %d\n%s", code, stdout)
	}
	out := filepath.Join(t.TempDir(), "new.xml")
	if _, stderr, code := fwab(t, "", "config", "set", pf, "xml:system/hostname=lab-fw", "offload.tso=on", "-o", out); code != exitOK || !strings.Contains(stderr, "2 knobs changed") {
		t.Errorf("config set -o: exit %d, %q; want 2 knobs changed", code, stderr)
	}
	if _, stderr, code := fwab(t, "", "config", "set", pf, "xml:system/hostname=lab-fw", "--in-place"); code != exitOK || !strings.Contains(stderr, "1 knob changed") {
		t.Errorf("config set --in-place: exit %d, %q", code, stderr)
	}
	if data, _ := os.ReadFile(pf); !strings.Contains(string(data), "<hostname>lab-fw</hostname>") {
		t.Errorf("config set --in-place did not write the xml: edit")
	}
	if _, stderr, code := fwab(t, "", "config", "set", pf, "xml:system/hostname=lab-fw", "--in-place"); code != exitOK || !strings.Contains(stderr, "already has those values") {
		t.Errorf("the same edit again: exit %d, %q; want nothing written", code, stderr)
	}
}

// An in-place write that fails leaves the file as it was and no backup:
// the backup is a second name of the file until the new one replaces it,
// so one left behind would change with the next edit in place.
func TestConfigSetInPlaceFailedWrite(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	before, _ := os.ReadFile(pf)
	full := errors.New("no space left on device")
	err := replaceInPlace(pf, func(w io.Writer) error {
		io.WriteString(w, "<pfsense>")
		return full
	}, false)
	if !errors.Is(err, full) {
		t.Errorf("replaceInPlace with a failing write = %v", err)
	}
	if after, _ := os.ReadFile(pf); !bytes.Equal(after, before) {
		t.Errorf("a failed in-place write changed the file")
	}
	if left, _ := filepath.Glob(pf + ".bak*"); len(left) != 0 {
		t.Errorf("a failed in-place write left %v", left)
	}
}
