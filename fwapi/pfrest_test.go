package fwapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/fwapi/fwapitest"
)

func newPfREST(t *testing.T, opts fwapitest.PfRESTOptions) (*fwapi.PfREST, *fwapitest.PfREST) {
	t.Helper()
	fake := fwapitest.NewPfREST(t, opts)
	c, err := fwapi.NewPfREST(fake.Target().API, fwapi.RESTOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, fake
}

func TestPfRESTVersion(t *testing.T) {
	c, fake := newPfREST(t, fwapitest.PfRESTOptions{Version: "2.8.1-RELEASE"})
	got, err := c.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := fwapi.PfVersion{Version: "2.8.1-RELEASE", Base: "15.0", Patch: "0", BuildTime: "Mon May 26 12:00:00 UTC 2025"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Version() mismatch (-want +got):\n%s", diff)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("X-API-Key") != "fake-pfrest-key" || reqs[0].Header.Get("Authorization") != "" {
		t.Errorf("requests = %+v, want one with X-API-Key and no Authorization header", reqs)
	}
}

func TestPfRESTErrors(t *testing.T) {
	tests := []struct {
		name       string
		opts       fwapitest.PfRESTOptions
		setup      func(*fwapitest.PfREST, *fwapi.APISpec)
		wantStatus int
		wantID     string
		want       []string
	}{
		{name: "wrong key", setup: func(f *fwapitest.PfREST, s *fwapi.APISpec) { os.WriteFile(s.KeyFile, []byte("nope"), 0o600) },
			wantStatus: 401, wantID: "AUTH_AUTHENTICATION_FAILED", want: []string{"HTTP 401 AUTH_AUTHENTICATION_FAILED: Authentication failed.", "check the API key"}},
		{name: "forbidden", setup: func(f *fwapitest.PfREST, s *fwapi.APISpec) { f.Deny("GET /api/v2/system/version") },
			wantStatus: 403, wantID: "AUTH_INSUFFICIENT_PRIVILEGES", want: []string{"HTTP 403", "privilege"}},
		{name: "package missing", opts: fwapitest.PfRESTOptions{Missing: true},
			wantStatus: 404, want: []string{"HTTP 404", "API package missing: install pfSense-pkg-RESTAPI"}},
		{name: "server error", setup: func(f *fwapitest.PfREST, s *fwapi.APISpec) {
			f.Fail("GET /api/v2/system/version", fwapitest.Fault{Status: 500, Body: `{"code":500,"status":"internal server error","response_id":"SERVER_ERROR","message":"An unexpected error occurred.","data":[]}`})
		}, wantStatus: 500, wantID: "SERVER_ERROR", want: []string{"HTTP 500 SERVER_ERROR: An unexpected error occurred."}},
		{name: "error envelope inside HTTP 200", setup: func(f *fwapitest.PfREST, s *fwapi.APISpec) {
			f.Fail("GET /api/v2/system/version", fwapitest.Fault{Body: `{"code":422,"status":"unprocessable content","response_id":"SYSTEM_VERSION_UNREADABLE","message":"could not read /etc/version","data":[]}`})
		}, wantStatus: 422, wantID: "SYSTEM_VERSION_UNREADABLE", want: []string{"could not read /etc/version"}},
		{name: "not an envelope", setup: func(f *fwapitest.PfREST, s *fwapi.APISpec) {
			f.Fail("GET /api/v2/system/version", fwapitest.Fault{Body: `{"version":"2.8.0"}`})
		}, want: []string{"not a REST API v2 envelope"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fake := fwapitest.NewPfREST(t, tc.opts)
			spec := fake.Target().API
			if tc.setup != nil {
				tc.setup(fake, spec)
			}
			c, err := fwapi.NewPfREST(spec, fwapi.RESTOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_, err = c.Version(context.Background())
			if err == nil {
				t.Fatal("Version() succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Version() error = %q, want it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "fake-pfrest-key") {
				t.Errorf("error %q shows the API key", err)
			}
			var ae *fwapi.APIError
			if tc.wantStatus == 0 {
				return
			}
			if !errors.As(err, &ae) {
				t.Fatalf("Version() error %v is not an *APIError", err)
			}
			if ae.StatusCode != tc.wantStatus || ae.ResponseID != tc.wantID {
				t.Errorf("APIError status %d id %q, want %d %q", ae.StatusCode, ae.ResponseID, tc.wantStatus, tc.wantID)
			}
		})
	}
}

func TestPfRESTOutboundNATAndApply(t *testing.T) {
	ctx := context.Background()
	c, fake := newPfREST(t, fwapitest.PfRESTOptions{})
	fake.Expect("PATCH /api/v2/firewall/nat/outbound/mode", "POST /api/v2/firewall/apply")
	if err := c.SetOutboundNATMode(ctx, "hybrid"); err != nil {
		t.Fatal(err)
	}
	st, err := c.FirewallApplyStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fwapi.PfApplyStatus{Applied: false, PendingSubsystems: []string{"filter"}}, st); diff != "" {
		t.Errorf("FirewallApplyStatus() before apply (-want +got):\n%s", diff)
	}
	if err := c.ApplyFirewall(ctx); err != nil {
		t.Fatal(err)
	}
	if mode, pending := fake.NATMode(); mode != "hybrid" || pending || fake.Applies() != 1 {
		t.Errorf("fake after apply: mode %q pending %v applies %d; want hybrid, false, 1", mode, pending, fake.Applies())
	}
	var body map[string]any
	for _, r := range fake.Requests() {
		if r.Pattern == "POST /api/v2/firewall/apply" {
			json.Unmarshal(r.Body, &body)
		}
	}
	if body["async"] != false {
		t.Errorf("apply body = %v, want async=false", body)
	}
	got, err := c.OutboundNATMode(ctx)
	if err != nil || got != "hybrid" {
		t.Errorf("OutboundNATMode() = %q, %v; want hybrid", got, err)
	}
}

func TestPfRESTOutboundNATValidation(t *testing.T) {
	ctx := context.Background()
	c, fake := newPfREST(t, fwapitest.PfRESTOptions{})
	if err := c.SetOutboundNATMode(ctx, "auto'; reboot"); err == nil || !strings.Contains(err.Error(), "want one of automatic, hybrid, advanced, disabled") {
		t.Errorf("SetOutboundNATMode(bad) error = %v, want the valid modes listed", err)
	}
	if n := fake.Calls("PATCH /api/v2/firewall/nat/outbound/mode"); n != 0 {
		t.Errorf("a bad mode reached the firewall (%d calls)", n)
	}
	// The firewall's own validation error, branching on response_id.
	fake.Fail("PATCH /api/v2/firewall/nat/outbound/mode", fwapitest.Fault{Status: 400, Body: `{"code":400,"status":"bad request","response_id":"FIELD_INVALID_CHOICE","message":"Field ` + "`mode`" + ` must be one of [automatic, hybrid, advanced, disabled]","data":[]}`})
	err := c.SetOutboundNATMode(ctx, "advanced")
	var ae *fwapi.APIError
	if !errors.As(err, &ae) || ae.ResponseID != "FIELD_INVALID_CHOICE" || ae.StatusCode != 400 {
		t.Fatalf("SetOutboundNATMode() error = %v, want an *APIError 400 FIELD_INVALID_CHOICE", err)
	}
}

func TestPfRESTServices(t *testing.T) {
	ctx := context.Background()
	c, fake := newPfREST(t, fwapitest.PfRESTOptions{})
	got, err := c.Services(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []fwapi.PfService{{Name: "unbound", Description: "unbound", Enabled: true, Status: true}, {Name: "ipsec", Description: "ipsec", Enabled: true, Status: true}, {Name: "suricata", Description: "suricata", Enabled: true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Services() mismatch (-want +got):\n%s", diff)
	}
	if err := c.ServiceAction(ctx, "suricata", "restart"); err != nil {
		t.Fatal(err)
	}
	if s := fake.Services()[2]; s.Name != "suricata" || !s.Running || s.Restarts != 1 {
		t.Errorf("suricata after restart = %+v, want running with one restart", s)
	}
	if err := c.ServiceAction(ctx, "snort", "restart"); err == nil || !strings.Contains(err.Error(), `no service "snort" on the firewall; it has: unbound, ipsec, suricata`) {
		t.Errorf("ServiceAction(snort) error = %v, want the known services listed", err)
	}
	if err := c.ServiceAction(ctx, "ipsec", "explode"); err == nil || !strings.Contains(err.Error(), "want start, stop or restart") {
		t.Errorf("ServiceAction(explode) error = %v", err)
	}
}

func TestPfRESTNeedsNoSecret(t *testing.T) {
	fake := fwapitest.NewPfREST(t, fwapitest.PfRESTOptions{})
	spec := fake.Target().API
	spec.KeyFile = ""
	if _, err := fwapi.NewPfREST(spec, fwapi.RESTOptions{}); err == nil || !strings.Contains(err.Error(), "set key_file or key_env") {
		t.Errorf("NewPfREST() without a key: error = %v", err)
	}
}

// TestPfRESTRefusesRedirects: following a redirect would send the
// X-API-Key header wherever the firewall points.
func TestPfRESTRefusesRedirects(t *testing.T) {
	c, fake := newPfREST(t, fwapitest.PfRESTOptions{})
	fake.Fail("GET /api/v2/system/version", fwapitest.Fault{Status: 302, Header: map[string]string{"Location": "https://198.18.99.99/api/v2/system/version"}})
	_, err := c.Version(context.Background())
	if err == nil || !strings.Contains(err.Error(), "the firewall redirected to https://198.18.99.99/api/v2/system/version: set api.url to that address instead") {
		t.Fatalf("Version() error = %v, want the redirect refused", err)
	}
	if n := len(fake.Requests()); n != 1 {
		t.Errorf("fake saw %d requests, want 1", n)
	}
}
