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
