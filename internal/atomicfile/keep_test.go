package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileKeepOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipped: only root can give a file to another owner")
	}
	name := filepath.Join(t.TempDir(), "config.xml")
	if err := os.WriteFile(name, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(name, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileKeepMode(name, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Uid != 1234 || sys.Gid != 5678 || st.Mode().Perm() != 0o640 {
		t.Errorf("after the write: owner %d:%d, mode %v; want 1234:5678 and 0640 kept", sys.Uid, sys.Gid, st.Mode().Perm())
	}
}

func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "config.xml.bak")
	if err := WriteNew(name, []byte("first"), 0o600); err != nil {
		t.Fatalf("WriteNew on a new name: %v", err)
	}
	err := WriteNew(name, []byte("second"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Errorf("WriteNew over an existing file = %v; want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(name); string(b) != "first" {
		t.Errorf("the existing file now holds %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
