package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fwab/fwab/internal/secretfile"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// IsURL reports whether a results database location is a PostgreSQL URL
// (postgres:// or postgresql://) rather than an SQLite file.
func IsURL(location string) bool {
	l := strings.ToLower(location)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// HasPassword reports whether a PostgreSQL URL carries a password, which
// fwab accepts from the environment (FWAB_DB) but never from its command
// line, where every user of the machine can read it.
func HasPassword(location string) bool {
	if !IsURL(location) {
		return false
	}
	u, err := url.Parse(location)
	if err != nil {
		return strings.Contains(location, "@") // unparsable: assume the worst
	}
	_, set := u.User.Password()
	return set || u.Query().Has("password")
}

// Redact is location with any password replaced by xxxxx: safe to print.
func Redact(location string) string {
	if !IsURL(location) {
		return location
	}
	u, err := url.Parse(location)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// connectTimeout bounds the connection to a server that does not answer,
// unless the URL sets connect_timeout.
const connectTimeout = 10 * time.Second

// openPostgres opens a PostgreSQL results database (github.com/jackc/pgx/v5
// through database/sql, so that every query is the one SQLite runs, with
// its placeholders renumbered).
//
// The URL is libpq's, with one addition: password_file=PATH reads the
// password from a file (its first line). Without one, libpq's own
// PGPASSWORD and PGPASSFILE (~/.pgpass) apply. TLS is verified
// (sslmode=verify-full) unless the URL or PGSSLMODE says otherwise.
// Read-only stores run every transaction read-only on the server.
func openPostgres(ctx context.Context, raw string, readOnly bool) (*Store, error) {
	display := Redact(raw)
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the whole URL, password and all
		}
		return nil, fmt.Errorf("results database %s: not a valid URL: %v", display, err)
	}
	q := u.Query()
	pwFile := q.Get("password_file")
	q.Del("password_file")
	if !q.Has("sslmode") && os.Getenv("PGSSLMODE") == "" {
		q.Set("sslmode", "verify-full")
	}
	u.RawQuery = q.Encode()
	cfg, err := pgx.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("results database %s: %v", display, redactErr(err, passwordOf(u)))
	}
	if pwFile != "" {
		if _, set := u.User.Password(); set {
			return nil, fmt.Errorf("results database %s: the URL has both a password and a password_file: keep only the file", display)
		}
		if err := secretfile.Check(pwFile); err != nil {
			return nil, fmt.Errorf("results database %s: password_file: %w", display, err)
		}
		b, err := os.ReadFile(pwFile)
		if err != nil {
			return nil, fmt.Errorf("results database %s: password_file: %w", display, err)
		}
		pw, _, _ := strings.Cut(string(b), "\n")
		if pw = strings.TrimSuffix(pw, "\r"); pw == "" {
			return nil, fmt.Errorf("results database %s: password_file %s is empty", display, pwFile)
		}
		cfg.Password = pw
	}
	if !q.Has("connect_timeout") {
		cfg.ConnectTimeout = connectTimeout
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "fwab"
	}
	if readOnly {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	secret := cfg.Password
	db := stdlib.OpenDB(*cfg)
	s := &Store{db: db, location: display, dialect: postgresDialect}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("results database %s: %w", display, connectError(err, secret))
	}
	if readOnly {
		version, err := schemaVersion(ctx, db)
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42P01" { // undefined_table
			err = fmt.Errorf("%w: 'fwab db migrate --db URL' creates fwab's tables (a sweep does too)", ErrNoSchema)
		}
		if err == nil {
			err = checkReadable(version, display)
		}
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("results database %s: %w", display, redactErr(err, secret))
		}
		return s, nil
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("results database %s: %w", display, redactErr(err, secret))
	}
	return s, nil
}

func passwordOf(u *url.URL) string {
	pw, _ := u.User.Password()
	return pw
}

// connectError says why a server could not be used, in words that point at
// the fix.
func connectError(err error, secret string) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000": // invalid_password, invalid_authorization_specification
			return fmt.Errorf("the server refused the credentials (%s): check the user name and the password (password_file in the URL, PGPASSWORD or PGPASSFILE)", pe.Message)
		case "3D000": // invalid_catalog_name
			return fmt.Errorf("%s: create it first (createdb), fwab creates only its tables", pe.Message)
		}
	}
	return fmt.Errorf("cannot connect: %w", redactErr(err, secret))
}

// redactErr hides secret wherever err's text has it; errors.Is and As
// still see the error it wraps.
func redactErr(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return redactedError{err, secret}
}

type redactedError struct {
	err    error
	secret string
}

func (e redactedError) Error() string { return strings.ReplaceAll(e.err.Error(), e.secret, "xxxxx") }
func (e redactedError) Unwrap() error { return e.err }

// checkReadable refuses a schema this fwab cannot read as it is.
func checkReadable(version int, location string) error {
	switch {
	case version > len(migrations):
		return newerSchemaError(version)
	case version < len(migrations):
		return fmt.Errorf("%w: schema version %d is older than this fwab's (%d): run 'fwab db migrate --db %s' to bring it up to date (or read it with the fwab that wrote it)", ErrOlderSchema, version, len(migrations), location)
	}
	return nil
}

// ErrNoSchema is a PostgreSQL database without fwab's tables: one made
// for fwab (createdb) that no fwab has written to yet.
var ErrNoSchema = errors.New("the database has no fwab tables yet")

func newerSchemaError(version int) error {
	return fmt.Errorf("schema version %d is newer than this fwab knows (%d): use a newer fwab", version, len(migrations))
}

// unreachable turns an error that is not the server's answer to a query
// (a connection refused, reset or closed: the server is gone) into one
// that says so and what to do; other errors stay as they are.
func (s *Store) unreachable(err error) error {
	var pe *pgconn.PgError
	if s.dialect.name != postgresDialect.name || err == nil || errors.As(err, &pe) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("the results database %s is out of reach (%w): every sample before this one is kept; once it answers, --resume continues the run", s.location, err)
}
