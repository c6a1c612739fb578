package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mode(t *testing.T, name string) fs.FileMode {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// entries lists a directory, so a test sees a temporary file left behind.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWriteFileMode(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, perm := range []fs.FileMode{0o600, 0o644, 0o666, 0o640} {
		name := filepath.Join(t.TempDir(), "f")
		if err := WriteFile(name, []byte("x"), perm); err != nil {
			t.Fatal(err)
		}
		if got := mode(t, name); got != perm {
			t.Errorf("WriteFile(%o): mode %o, want %o", perm, got, perm)
		}
		// Replacing an existing file sets the asked mode too.
		if err := os.Chmod(name, 0o400); err != nil {
			t.Fatal(err)
		}
		if err := WriteFile(name, []byte("y"), perm); err != nil {
			t.Fatal(err)
		}
		if got := mode(t, name); got != perm {
			t.Errorf("WriteFile(%o) over a 0400 file: mode %o, want %o", perm, got, perm)
		}
	}
}

func TestWriteFileKeepMode(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "config.xml")
	if err := os.WriteFile(name, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(name, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileKeepMode(name, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, name); got != 0o640 {
		t.Errorf("existing file: mode %o, want 0640 kept", got)
	}
	if got := readFile(t, name); got != "new" {
		t.Errorf("content %q, want %q", got, "new")
	}
	fresh := filepath.Join(dir, "fresh")
	if err := WriteFileKeepMode(fresh, []byte("x"), 0o604); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, fresh); got != 0o604 {
		t.Errorf("new file: mode %o, want 0604", got)
	}
}

// TestWriteFileReplaces checks that the new content arrives by rename: a
// reader that opened the old file still reads the old content whole.
func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	if err := os.WriteFile(name, []byte("old content"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if err := WriteFile(name, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, name); got != "new" {
		t.Errorf("content %q, want %q", got, "new")
	}
	old, err := io.ReadAll(reader)
	if err != nil {
		t.Fatal(err)
	}
	if string(old) != "old content" {
		t.Errorf("a reader of the old file read %q, want %q: the file was rewritten in place", old, "old content")
	}
	if got := entries(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q, want only f", got)
	}
}

func TestWriteFileSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.xml")
	if err := os.WriteFile(target, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "config.xml")
	if err := os.Symlink("real.xml", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileKeepMode(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a link (%v, %v)", link, st, err)
	}
	if got := readFile(t, target); got != "new" {
		t.Errorf("link target holds %q, want %q", got, "new")
	}
	if got := mode(t, target); got != 0o640 {
		t.Errorf("link target mode %o, want 0640 kept", got)
	}

	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("missing", dangling); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(dangling, []byte("x"), 0o644); err == nil {
		t.Error("WriteFile through a link to a missing file: no error")
	}
}

func TestWriteFileErrors(t *testing.T) {
	dir := t.TempDir()
	if err := WriteFile(filepath.Join(dir, "missing", "f"), []byte("x"), 0o644); err == nil {
		t.Error("WriteFile into a missing directory: no error")
	}

	// A directory where the file should go makes the rename fail, after the
	// temporary file was written: it must not stay behind.
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(sub, []byte("x"), 0o644); err == nil {
		t.Error("WriteFile over a directory: no error")
	}
	if got := entries(t, dir); len(got) != 1 || got[0] != "sub" {
		t.Errorf("after a failed write the directory holds %q, want only sub", got)
	}
}

// A fill that fails half-way leaves the old file and no temporary one.
func TestWriteFileFromFailedFill(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "config.xml")
	if err := WriteFile(name, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	broken := errors.New("disk full")
	for _, write := range []func(string, fs.FileMode, func(io.Writer) error) error{WriteFileFrom, WriteFileKeepModeFrom} {
		err := write(name, 0o600, func(w io.Writer) error {
			if _, err := io.WriteString(w, "half of the new"); err != nil {
				return err
			}
			return broken
		})
		if !errors.Is(err, broken) {
			t.Errorf("write with a failing fill = %v, want its error", err)
		}
		if got := readFile(t, name); got != "old" {
			t.Errorf("after a failed fill the file holds %q, want the old content", got)
		}
		if got := entries(t, dir); len(got) != 1 {
			t.Errorf("after a failed fill the directory holds %q", got)
		}
	}
	if err := WriteFileKeepModeFrom(name, 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if got, m := readFile(t, name), mode(t, name); got != "new" || m != 0o640 {
		t.Errorf("WriteFileKeepModeFrom: %q, mode %v; want new, 0640 kept", got, m)
	}
}
