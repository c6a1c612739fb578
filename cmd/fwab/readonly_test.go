package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/store"
)

// Commands that read results never create, grow or migrate a database, and
// a file that is missing or not a database is bad input (exit 2) for each.
func TestReadingCommandsWriteNoDatabase(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	text := filepath.Join(dir, "notes.txt")
	missing := filepath.Join(dir, "missing.db")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(text, []byte("not results\n"), 0o644)
	for _, db := range []string{empty, text, missing} {
		for _, args := range [][]string{
			{"runs", "list"},
			{"runs", "show", "1"},
			{"report", "1"},
			{"compare", "1", "2"},
		} {
			args := append(args, "--db", db)
			_, stderr, code := fwab(t, "", args...)
			if code != exitUsage || !strings.Contains(stderr, db) {
				t.Errorf("%s: exit %d, stderr %q; want exit 2 naming %s", strings.Join(args, " "), code, stderr, db)
			}
		}
	}
	if fi, _ := os.Stat(empty); fi.Size() != 0 {
		t.Errorf("an empty file grew to %d bytes", fi.Size())
	}
	if b, _ := os.ReadFile(text); string(b) != "not results\n" {
		t.Errorf("a text file was changed: %q", b)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a missing database was created")
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*-wal"))
	if len(matches) > 0 {
		t.Errorf("reading left WAL files: %v", matches)
	}
}

func TestDBMigrate(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("not results\n"), 0o644)
	if _, stderr, code := fwab(t, "", "db", "migrate", "--db", text); code != exitUsage || !strings.Contains(stderr, "not an fwab results database") {
		t.Errorf("db migrate on a text file: exit %d, %q; want exit 2", code, stderr)
	}
	if _, _, code := fwab(t, "", "db", "migrate", "--db", filepath.Join(dir, "missing.db")); code != exitUsage {
		t.Errorf("db migrate on a missing file: exit %d, want 2", code)
	}
	db := filepath.Join(dir, "results.db")
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if out, stderr, code := fwab(t, "", "db", "migrate", "--db", db); code != exitOK || !strings.Contains(out, "schema version") {
		t.Errorf("db migrate on a current database: exit %d, %q %q", code, out, stderr)
	}
}
