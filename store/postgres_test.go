package store

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fwab/fwab/internal/freeport"
	"github.com/fwab/fwab/store/pgtest"
)

// withoutPassword is u with its password taken out.
func withoutPassword(t *testing.T, u string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p.User = url.User(p.User.Username())
	return p.String()
}

func TestPostgresCredentials(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	ctx := t.Context()
	bare := withoutPassword(t, db)

	pwFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pwFile, []byte(srv.Password+"\n"), 0o600)
	t.Run("password_file", func(t *testing.T) {
		s, err := Open(ctx, bare+"&password_file="+url.QueryEscape(pwFile))
		if err != nil {
			t.Fatalf("Open(password_file) = %v", err)
		}
		if strings.Contains(s.Location(), srv.Password) {
			t.Errorf("Location() = %s shows the password", s.Location())
		}
		s.Close()
	})
	t.Run("PGPASSWORD", func(t *testing.T) {
		t.Setenv("PGPASSWORD", srv.Password)
		s, err := Open(ctx, bare)
		if err != nil {
			t.Fatalf("Open with PGPASSWORD = %v", err)
		}
		s.Close()
	})

	wrong := strings.Replace(db, srv.Password, "Wr0ngFwabPassword", 1)
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(freeport.TCP(t)))
	unreachable := strings.Replace(db, "127.0.0.1:"+strconv.Itoa(srv.Port), dead, 1)
	missingDB := strings.Replace(db, "/fwab_", "/nosuch_", 1)
	noTLS := strings.Replace(db, "sslmode=disable", "", 1)
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	readable := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(readable, []byte(srv.Password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, url, want, secret string
	}{
		{"wrong password", wrong, "refused the credentials", "Wr0ngFwabPassword"},
		{"unreachable server", unreachable, "cannot connect", srv.Password},
		{"missing database", missingDB, "create it first", srv.Password},
		// The test server has no certificate: without sslmode in the URL,
		// fwab asks for verified TLS and gets none.
		{"TLS verified by default", noTLS, "cannot connect", srv.Password},
		{"both password and file", db + "&password_file=" + url.QueryEscape(pwFile), "both a password and a password_file", srv.Password},
		{"empty password_file", bare + "&password_file=" + url.QueryEscape(empty), "is empty", srv.Password},
		{"password_file others may read", bare + "&password_file=" + url.QueryEscape(readable), "run chmod 600", srv.Password},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, open := range []func() error{
				func() error { _, err := Open(ctx, tt.url); return err },
				func() error { _, err := OpenReadOnly(ctx, tt.url); return err },
			} {
				err := open()
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Open(%s) = %v, want an error containing %q", Redact(tt.url), err, tt.want)
					continue
				}
				if strings.Contains(err.Error(), tt.secret) {
					t.Errorf("the error shows the password: %v", err)
				}
			}
		})
	}
}

func TestRedact(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"postgres://fwab:s3cret@db.example:5432/fwab", "postgres://fwab:xxxxx@db.example:5432/fwab"},
		{"postgresql://fwab@db.example/fwab?password=s3cret", "postgresql://fwab@db.example/fwab?password=xxxxx"},
		{"/var/lib/fwab/results.db", "/var/lib/fwab/results.db"},
		{"postgres://fwab:s3cret@db.example:badport/x", "postgres://(unparsable URL)"},
	} {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if HasPassword(tt.in) != strings.Contains(tt.in, "s3cret") {
			t.Errorf("HasPassword(%q) = %v", tt.in, HasPassword(tt.in))
		}
	}
	// A URL that does not parse is not repeated in the error.
	_, err := Open(t.Context(), "postgres://fwab:s3cret@db.example:badport/x")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open(bad URL) = %v; want an error without the password", err)
	}
}

// A server lost in the middle of a sweep is an error on the next write,
// and nothing already committed is lost.
func TestPostgresLostServer(t *testing.T) {
	srv := pgtest.Start(t)
	b := backend{name: "postgres", fresh: func(t *testing.T) string { return srv.NewDatabase(t) }}
	s, _ := b.open(t)
	run := newRun(t, s)
	if err := s.RecordSample(t.Context(), Sample{Key: Key{Run: run, Point: 0, Probe: "tcp-up"}}); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	err := s.RecordSample(t.Context(), Sample{Key: Key{Run: run, Point: 1, Probe: "tcp-up"}})
	if err == nil || strings.Contains(err.Error(), srv.Password) || !strings.Contains(err.Error(), "out of reach") {
		t.Errorf("RecordSample after the server stopped = %v; want an out-of-reach error without the password", err)
	}
}
