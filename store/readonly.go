package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
)

// Errors of OpenReadOnly callers can test for with errors.Is.
var (
	// ErrNotResults is a file that is not an fwab results database.
	ErrNotResults = errors.New("not an fwab results database")
	// ErrOlderSchema is a database an older fwab wrote, which Open (and
	// `fwab db migrate`) brings up to date.
	ErrOlderSchema = errors.New("older schema")
)

// SchemaVersion is the schema version this fwab writes.
func SchemaVersion() int { return len(migrations) }

// OpenReadOnly opens an existing results database for reading: it never
// creates the file, writes to it or migrates its schema (on PostgreSQL,
// every transaction is read-only on the server). A missing file is
// an error that wraps fs.ErrNotExist; a file that is not an fwab database
// wraps ErrNotResults; one written by a newer fwab, or an older one that
// needs a migration, is refused with both schema versions named.
func OpenReadOnly(ctx context.Context, path string) (*Store, error) {
	if IsURL(path) {
		return openPostgres(ctx, path, true)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("results database: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("results database %s: %w (it is a folder)", path, ErrNotResults)
	}
	if fi.Size() == 0 {
		return nil, fmt.Errorf("results database %s: %w (the file is empty)", path, ErrNotResults)
	}
	// mode=ro: SQLite refuses every write, so nothing here can change the
	// file, whatever the queries do.
	dsn := (&url.URL{Scheme: "file", Opaque: path, RawQuery: "mode=ro&_pragma=busy_timeout(10000)"}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("results database %s: %w", path, err)
	}
	version, err := schemaVersion(ctx, db)
	if err == nil {
		err = checkReadable(version, path)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("results database %s: %w", path, err)
	}
	return &Store{db: db, location: path, dialect: sqliteDialect}, nil
}

// schemaVersion reads the version an fwab database records.
func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var version int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version)
	if err != nil {
		// "file is not a database", "no such table": either way not ours.
		return 0, fmt.Errorf("%w (%w)", ErrNotResults, err)
	}
	return version, nil
}
