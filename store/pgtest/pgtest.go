// Package pgtest starts a throwaway PostgreSQL server for tests: a cluster
// of its own (initdb in a fresh folder), listening on a free port of
// 127.0.0.1 only, stopped and removed when the test ends. It uses the
// server binaries of Debian's postgresql package (/usr/lib/postgresql/N/bin,
// the newest N, which Debian keeps out of PATH), then PATH; FWAB_PG_BIN
// names another folder. Tests skip, saying why, where there are none.
//
// PostgreSQL refuses to run as root, so as root the server runs as the
// postgres user the package creates.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fwab/fwab/internal/freeport"
	"github.com/jackc/pgx/v5"
)

// User is the superuser of every test server.
const User = "fwab"

// Server is a running test server.
type Server struct {
	Port     int
	Password string // User's password (scram-sha-256 over TCP)
	dir      string
	bin      string
	asUser   []string // the runuser prefix when running as root
	dbs      atomic.Int64
	stopped  atomic.Bool
}

// Bin is the folder of the server binaries, or "" with the reason when
// there are none.
func Bin() (string, string) {
	if d := os.Getenv("FWAB_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err != nil {
			return "", fmt.Sprintf("FWAB_PG_BIN=%s has no pg_ctl", d)
		}
		return d, ""
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
				return d, ""
			}
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), ""
		}
	}
	return "", "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or PATH: install Debian's postgresql package (scripts/setup.sh does)"
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Start starts a server for t, or skips t when it cannot.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, why := Bin()
	if bin == "" {
		t.Skip("pgtest: " + why)
	}
	s := &Server{bin: bin}
	dir, err := os.MkdirTemp("", "fwab-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("pgtest: running as root and there is no postgres user to run the server as (Debian's postgresql package creates it)")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.asUser = []string{"runuser", "-u", "postgres", "--"}
	}
	var b [12]byte
	rand.Read(b[:])
	s.Password = hex.EncodeToString(b[:])
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := s.command("initdb", "-D", s.data(), "-U", User, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	os.Remove(pwfile)
	// A free port can be taken between asking and binding: try a few.
	var lastErr error
	for range 5 {
		s.Port = freeport.TCP(t)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(func() {
				if s.stopped.Load() {
					return
				}
				if out, err := s.command("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
					t.Logf("pgtest: pg_ctl stop: %v\n%s", err, out)
				}
			})
			return s
		}
	}
	t.Fatalf("pgtest: pg_ctl start: %v", lastErr)
	return nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// start starts the server on s.Port.
func (s *Server) start() error {
	out, err := s.command("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "30", "-o",
		fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c max_connections=200", s.Port, s.dir), "start").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s\n%s", err, out, s.Log())
	}
	s.stopped.Store(false)
	return nil
}

// Restart starts a stopped server again, on the same port and data.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("pgtest: restart: %v", err)
	}
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	argv := append(append(append([]string{}, s.asUser...), filepath.Join(s.bin, name)), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.dir
	return cmd
}

// URL is the URL of database db on the server, with the password in it
// and TLS off (the server has no certificate).
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(User, s.Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("fwab_%d", s.dbs.Add(1))
	conn, err := pgx.Connect(context.Background(), s.URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	return s.URL(name)
}

// Stop stops the server at once, as a crash or a lost network would: the
// clients' connections break.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	s.stopped.Store(true)
	if out, err := s.command("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		t.Fatalf("pgtest: pg_ctl stop: %v\n%s", err, out)
	}
}

// Log is the server's log so far, for a failing test to show.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return strings.TrimSpace(string(b))
}
