package fwapitest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/fwapi"
)

// recordingTB stands in for a test so that the fakes' own failure reports
// can be checked: it records Errorf/Fatalf and runs cleanups on demand.
type recordingTB struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Cleanup(f func())          { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Errorf(f string, a ...any) { r.errors = append(r.errors, fmt.Sprintf(f, a...)) }
func (r *recordingTB) Fatalf(f string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(f, a...))
	panic(r)
}
func (r *recordingTB) finish() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func get(t *testing.T, c *http.Client, url, key, secret string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.SetBasicAuth(key, secret)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestFakeReportsUnexpectedAndUncalledRoutes(t *testing.T) {
	rec := &recordingTB{TB: t}
	f := NewOPNsense(rec, OPNsenseOptions{Version: "26.7"})
	f.Expect("POST /api/ids/service/reconfigure")
	c := f.srv.Client()
	if got := get(t, c, f.URL()+"/api/core/firmware/info", "fake-opn-key", "fake-opn-secret"); got != 200 {
		t.Fatalf("firmware info = %d, want 200", got)
	}
	// 26.7 has no savepoint route: a driver calling it is a bug.
	if got := get(t, c, f.URL()+"/api/firewall/filter/savepoint", "fake-opn-key", "fake-opn-secret"); got != 404 {
		t.Errorf("savepoint on 26.7 = %d, want 404", got)
	}
	rec.finish()
	want := []string{
		"fake API: unexpected request GET /api/firewall/filter/savepoint",
		`fake API: route "POST /api/ids/service/reconfigure" was expected but never called`,
	}
	if !slices.Equal(rec.errors, want) {
		t.Errorf("fake reported %q, want %q", rec.errors, want)
	}
}

func TestFakeQuietWhenAllIsWell(t *testing.T) {
	rec := &recordingTB{TB: t}
	f := NewOPNsense(rec, OPNsenseOptions{})
	f.Expect("GET /api/core/firmware/info")
	if got := get(t, f.srv.Client(), f.URL()+"/api/core/firmware/info", "fake-opn-key", "fake-opn-secret"); got != 200 {
		t.Fatalf("firmware info = %d, want 200", got)
	}
	rec.finish()
	if len(rec.errors) != 0 {
		t.Errorf("fake reported %q, want nothing", rec.errors)
	}
}

func TestFakeAuth(t *testing.T) {
	f := NewOPNsense(t, OPNsenseOptions{})
	if got := get(t, f.srv.Client(), f.URL()+"/api/core/firmware/info", "fake-opn-key", "wrong"); got != 401 {
		t.Errorf("wrong secret = %d, want 401", got)
	}
}

func TestFakeRejectsUnknownRouteNames(t *testing.T) {
	rec := &recordingTB{TB: t}
	f := NewOPNsense(rec, OPNsenseOptions{})
	func() {
		defer func() { recover() }()
		f.Fail("POST /api/no/such/route", Fault{Status: 500})
	}()
	rec.finish()
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "is not a route of this fake") {
		t.Errorf("fake reported %q, want the bad route named", rec.errors)
	}
}

// TestShellQuotingNeverExecutes: values a caller quotes arrive as one
// argument and never run, through the real shell interpreter.
func TestShellQuotingNeverExecutes(t *testing.T) {
	f := NewOPNsense(t, OPNsenseOptions{})
	sh := f.Shell()
	for _, v := range []string{`$(touch /tmp/pwned)`, "`touch /tmp/pwned`", `a; touch /tmp/pwned`, "x\ntouch /tmp/pwned", `it's "quoted"`} {
		quoted := "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
		out, _, exit, err := sh.Run(context.Background(), "cat "+quoted, nil)
		if err != nil || exit != 1 {
			t.Errorf("cat %s: exit %d err %v out %q, want exit 1 (no such file)", quoted, exit, err, out)
		}
		if _, err := os.Stat(filepath.Join(f.Root(), "tmp/pwned")); err == nil {
			t.Fatalf("value %q was executed", v)
		}
	}
	_, _, exit, _ := sh.Run(context.Background(), "reboot", nil)
	if exit != 127 {
		t.Errorf("unknown command exit = %d, want 127", exit)
	}
}

var _ fwapi.Runner = (*Shell)(nil)

// TestShellDetachedScripts: daemon(8), pkill -F, sleep and mkdir behave as the
// lock and the commit-confirmed rollback need.
func TestShellDetachedScripts(t *testing.T) {
	ctx := context.Background()
	f := NewOPNsense(t, OPNsenseOptions{})
	sh := f.Shell()
	run := func(cmd string) (string, int) {
		t.Helper()
		out, _, exit, err := sh.Run(ctx, cmd, nil)
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return string(out), exit
	}
	if _, exit := run("mkdir /var/run/fwab.lock"); exit != 0 {
		t.Fatalf("first mkdir exit %d", exit)
	}
	if _, exit := run("mkdir /var/run/fwab.lock"); exit != 1 {
		t.Errorf("second mkdir exit %d, want 1: mkdir must be exclusive", exit)
	}
	if _, exit := run("rm /var/run/fwab.lock"); exit == 0 {
		t.Errorf("rm of a directory without -r succeeded")
	}
	run("rm -r /var/run/fwab.lock")

	script := "sleep 1\ndate +%s > /var/run/fired\n"
	if err := sh.WriteFileAtomic(ctx, "/var/run/s.sh", []byte(script)); err != nil {
		t.Fatal(err)
	}
	// Stopped in time: never fires.
	if _, exit := run("daemon -f -p /var/run/s.pid /bin/sh /var/run/s.sh"); exit != 0 {
		t.Fatalf("daemon exit %d", exit)
	}
	pid, err := sh.ReadFile(ctx, "/var/run/s.pid")
	if err != nil || strings.TrimSpace(string(pid)) == "" {
		t.Fatalf("pid file = %q, %v", pid, err)
	}
	if _, exit := run("pkill -F /var/run/s.pid"); exit != 0 {
		t.Errorf("pkill exit %d", exit)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := os.Stat(filepath.Join(f.Root(), "var/run/fired")); err == nil {
		t.Error("a stopped script still ran to the end")
	}
	// Left alone: fires after its sleep, detached from the session.
	start := time.Now()
	run("daemon -f -p /var/run/s.pid /bin/sh /var/run/s.sh")
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("daemon blocked for %v: it must detach", took)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(filepath.Join(f.Root(), "var/run/fired")); err == nil && len(b) > 0 {
			if time.Since(start) < time.Second {
				t.Errorf("fired after %v, before its sleep 1", time.Since(start))
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the detached script did not fire within 5s")
}
