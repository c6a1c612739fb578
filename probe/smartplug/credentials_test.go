package smartplug

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
)

// secrets are what a plug's URL may carry and no error, warning or stored
// copy may show: the user and password of its userinfo, a query token.
var secrets = []string{"plugadmin", "s3cr3t-pw", "t0ken-XYZ"}

func assertHidden(t *testing.T, what, s string) {
	t.Helper()
	for _, secret := range secrets {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows %q: %s", what, secret, s)
		}
	}
}

// TestMeterErrorsHideCredentials: the errors Watts and Validate return
// (which become sample warnings and spec errors) show the plug's URL
// without its userinfo or query, whatever failed.
func TestMeterErrorsHideCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/broken":
			http.Error(w, "oops", http.StatusInternalServerError)
		case "/hang":
			hj, _ := w.(http.Hijacker)
			conn, _, _ := hj.Hijack()
			conn.Close() // the connection drops mid-reply
		default:
			fmt.Fprint(w, `{"ENERGY":{"Power":12.5}}`)
		}
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	// A port nothing listens on: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	for _, u := range []string{
		"http://plugadmin:s3cr3t-pw@" + host + "/broken?token=t0ken-XYZ",
		"http://plugadmin:s3cr3t-pw@" + host + "/hang?token=t0ken-XYZ",
		"http://plugadmin:s3cr3t-pw@" + closed + "/status?token=t0ken-XYZ",
		"http://" + host + "/broken?user=plugadmin&password=s3cr3t-pw&cmnd=Status%208",
	} {
		_, err := Meter{URL: u, Path: "ENERGY.Power"}.Watts(t.Context())
		if err == nil {
			t.Errorf("Watts(%s) = nil error, want one", u)
			continue
		}
		assertHidden(t, "Watts error", err.Error())
	}
	for _, m := range []Meter{
		{URL: "ftp://plugadmin:s3cr3t-pw@plug/status?token=t0ken-XYZ", Path: "a"},
		{URL: "plugadmin:s3cr3t-pw@plug/status?token=t0ken-XYZ", Path: "a"},
		{URL: "http://plugadmin:s3cr3t-pw@plug/status?token=t0ken-XYZ", Path: ""},
	} {
		err := m.Validate()
		if err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", m)
			continue
		}
		assertHidden(t, "Validate error", err.Error())
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"http://plugadmin:s3cr3t-pw@plug.lab:8080/cm?cmnd=Status%208&token=t0ken-XYZ": "http://plug.lab:8080/cm",
		"https://plugadmin@192.0.2.7/status?password_file=/etc/fwab/plug":             "https://192.0.2.7/status",
		"http://plug/status#frag":                         "http://plug/status",
		"http://plug/status":                              "http://plug/status",
		"http://[2001:db8::1]/cm?x":                       "http://[2001:db8::1]/cm",
		"plug.local/status":                               "plug.local/status",
		"plugadmin:s3cr3t-pw@plug/status?token=t0ken-XYZ": "(a URL that does not parse)",
		"http://plug/%zz?token=t0ken-XYZ":                 "(a URL that does not parse)",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMeterPasswordFromFileOrEnv: the password comes from password_file or
// $FWAB_PLUG_PASSWORD, is sent only to a URL that names the user, as basic
// auth or as Tasmota's password parameter, and never shows in errors.
func TestMeterPasswordFromFileOrEnv(t *testing.T) {
	const user, pw = "plugadmin", "s3cr3t-pw"
	var lastQuery string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lastQuery = r.URL.RawQuery
		u, p, basic := r.BasicAuth()
		q := r.URL.Query()
		if !(basic && u == user && p == pw) && !(q.Get("user") == user && q.Get("password") == pw) {
			http.Error(w, "401 Unauthorized", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"ENERGY":{"Power":7}}`)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()
	file := dir + "/plug-password"
	if err := os.WriteFile(file, []byte(pw+"\nignored\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := dir + "/empty"
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	watts := func(u string) (float64, error) {
		return Meter{URL: u, Path: "ENERGY.Power"}.Watts(t.Context())
	}
	t.Setenv(PasswordEnv, "")
	for _, u := range []string{
		"http://" + user + "@" + host + "/status?password_file=" + url.QueryEscape(file),
		"http://" + host + "/cm?user=" + user + "&password_file=" + url.QueryEscape(file) + "&cmnd=Status%208",
		"http://" + user + ":" + pw + "@" + host + "/status", // in the URL, as before
	} {
		if got, err := watts(u); err != nil || got != 7 {
			t.Errorf("Watts(%s) = %v, %v; want 7", Redact(u), got, err)
		}
		if strings.Contains(lastQuery, "password_file") {
			t.Errorf("Watts(%s) sent the password_file parameter: %s", Redact(u), lastQuery)
		}
	}
	if _, err := watts("http://" + user + "@" + host + "/status"); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("no password anywhere: %v, want HTTP 401", err)
	}

	t.Setenv(PasswordEnv, pw)
	for _, u := range []string{
		"http://" + user + "@" + host + "/status",
		"http://" + host + "/cm?user=" + user + "&cmnd=Status%208",
	} {
		if got, err := watts(u); err != nil || got != 7 {
			t.Errorf("Watts(%s) with $%s = %v, %v; want 7", Redact(u), PasswordEnv, got, err)
		}
	}
	// A URL that names no user is not sent the password.
	if _, err := watts("http://" + host + "/status"); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("URL without a user: %v, want HTTP 401 (no password sent)", err)
	}
	// The URL's own password wins over the environment's.
	t.Setenv(PasswordEnv, "wrong-"+pw)
	if got, err := watts("http://" + user + ":" + pw + "@" + host + "/status"); err != nil || got != 7 {
		t.Errorf("URL password with another in $%s = %v, %v; want 7", PasswordEnv, got, err)
	}

	for _, tc := range []struct{ url, want string }{
		{"http://" + user + ":" + pw + "@" + host + "/status?password_file=" + url.QueryEscape(file), "both a password and a password_file"},
		{"http://" + host + "/status?password_file=" + url.QueryEscape(file) + "&token=t0ken-XYZ", "needs a user"},
		{"http://" + user + "@" + host + "/status?password_file=" + url.QueryEscape(dir+"/none"), "no such file"},
		{"http://" + user + "@" + host + "/status?password_file=" + url.QueryEscape(empty), "is empty"},
	} {
		m := Meter{URL: tc.url, Path: "ENERGY.Power"}
		_, err := m.Watts(t.Context())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Watts(%s) = %v, want %q", Redact(tc.url), err, tc.want)
			continue
		}
		assertHidden(t, "Watts error", err.Error())
		if tc.want != "is empty" {
			if verr := m.Validate(); verr == nil || !strings.Contains(verr.Error(), tc.want) {
				t.Errorf("Validate(%s) = %v, want %q before the sweep starts", Redact(tc.url), verr, tc.want)
			}
		}
	}
}
