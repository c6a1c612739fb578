package store

import (
	"path/filepath"
	"testing"

	"github.com/fwab/fwab/store/pgtest"
)

// backend is one kind of results database the suite runs on.
type backend struct {
	name string
	// fresh is the location of a new, empty database.
	fresh func(t *testing.T) string
}

// eachBackend runs f once on SQLite and once on a PostgreSQL server of the
// test's own (skipped, with the reason, where the server binaries are
// missing).
func eachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	t.Run("sqlite", func(t *testing.T) { f(t, sqliteOnly) })
	t.Run("postgres", func(t *testing.T) {
		srv := pgtest.Start(t)
		f(t, backend{name: "postgres", fresh: func(t *testing.T) string { return srv.NewDatabase(t) }})
	})
}

// open opens a new database of the backend.
func (b backend) open(t *testing.T) (*Store, string) {
	t.Helper()
	loc := b.fresh(t)
	s, err := Open(t.Context(), loc)
	if err != nil {
		t.Fatalf("Open(%s) = %v", Redact(loc), err)
	}
	t.Cleanup(func() { s.Close() })
	return s, loc
}

// sqliteOnly is the SQLite backend, for what only SQLite has (pragmas, a
// file).
var sqliteOnly = backend{name: "sqlite", fresh: func(t *testing.T) string {
	return filepath.Join(t.TempDir(), "sub", "results.db")
}}
