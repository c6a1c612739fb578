package fwapi_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fixtures/api"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

func TestTLSVerification(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	good := apiFingerprint(t, em.APIAddr)
	wrong := strings.Repeat("AB:", 31) + "AB"
	tests := []struct {
		name    string
		edit    func(*fwapi.APISpec)
		wantErr []string // substrings; none means success
		certErr bool     // a *CertificateError is expected
	}{
		{name: "ca file", edit: func(s *fwapi.APISpec) {}},
		{name: "pinned fingerprint", edit: func(s *fwapi.APISpec) { s.CAFile = ""; s.Fingerprint = good }},
		{name: "pinned lower-case without colons", edit: func(s *fwapi.APISpec) {
			s.CAFile = ""
			s.Fingerprint = "sha256:" + strings.ToLower(strings.ReplaceAll(good, ":", ""))
		}},
		{name: "ca file and matching pin", edit: func(s *fwapi.APISpec) { s.Fingerprint = good }},
		{name: "fingerprint mismatch", edit: func(s *fwapi.APISpec) { s.CAFile = ""; s.Fingerprint = wrong },
			wantErr: []string{"does not match the pinned fingerprint", "got sha256 " + good, "want " + wrong, "api.fingerprint"}, certErr: true},
		{name: "ca file but pin mismatch", edit: func(s *fwapi.APISpec) { s.Fingerprint = wrong },
			wantErr: []string{"got sha256 " + good}, certErr: true},
		{name: "unknown CA (system roots)", edit: func(s *fwapi.APISpec) { s.CAFile = "" },
			wantErr: []string{"is not trusted", "api.ca_file", "api.fingerprint: \"" + good + "\""}, certErr: true},
		{name: "other CA", edit: func(s *fwapi.APISpec) { s.CAFile = otherCAFile(t) },
			wantErr: []string{"is not trusted", good}, certErr: true},
		{name: "insecure only when set", edit: func(s *fwapi.APISpec) { s.CAFile = ""; s.Insecure = true }},
		{name: "insecure with pin is refused", edit: func(s *fwapi.APISpec) { s.Insecure = true; s.Fingerprint = good },
			wantErr: []string{"insecure is set together with fingerprint or ca_file"}},
		{name: "malformed fingerprint", edit: func(s *fwapi.APISpec) { s.CAFile = ""; s.Fingerprint = "abc" },
			wantErr: []string{`fingerprint "abc" is not a SHA-256 fingerprint`}},
		{name: "ca file without PEM", edit: func(s *fwapi.APISpec) {
			s.CAFile = filepath.Join(t.TempDir(), "empty.pem")
			os.WriteFile(s.CAFile, []byte("not a cert"), 0o644)
		}, wantErr: []string{"holds no PEM certificate"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			target := em.APITarget(t)
			tc.edit(target.API)
			// NewOPNsense reads the firmware version: one request.
			fw, err := fwapi.NewOPNsense(context.Background(), target, nil, fwapi.OPNsenseOptions{})
			if err == nil {
				fw.Close()
			}
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("NewOPNsense() error = %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("NewOPNsense() succeeded, want an error containing %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("NewOPNsense() error = %q, want it to contain %q", err, w)
				}
			}
			var ce *fwapi.CertificateError
			if got := errors.As(err, &ce); got != tc.certErr {
				t.Errorf("errors.As(%v, *CertificateError) = %v, want %v", err, got, tc.certErr)
			}
		})
	}
}

// apiFingerprint is the SHA-256 fingerprint of the certificate the server
// at addr presents, as fwapi.FormatFingerprint prints it.
func apiFingerprint(t *testing.T, addr string) string {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum := sha256.Sum256(c.ConnectionState().PeerCertificates[0].Raw)
	return fwapi.FormatFingerprint(sum[:])
}

// otherCAFile writes a freshly made self-signed CA certificate that signed
// nothing the emulator presents: verification against it must fail.
func otherCAFile(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "fwab test other CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadCredentials(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	keyFile := write("key", "k-Value-123\n", 0o600)
	secretFile := write("secret", "  s3cr3t-Value \n", 0o600)
	openFile := write("open", "s3cr3t-Value\n", 0o644)
	emptyFile := write("empty", "\n", 0o600)
	t.Setenv("FWAB_TEST_KEY", "env-key-Value")
	tests := []struct {
		name    string
		spec    fwapi.APISpec
		want    fwapi.Credentials
		wantErr string
	}{
		{name: "files", spec: fwapi.APISpec{KeyFile: keyFile, SecretFile: secretFile}, want: fwapi.Credentials{Key: "k-Value-123", Secret: "s3cr3t-Value"}},
		{name: "env", spec: fwapi.APISpec{KeyEnv: "FWAB_TEST_KEY", SecretFile: secretFile}, want: fwapi.Credentials{Key: "env-key-Value", Secret: "s3cr3t-Value"}},
		{name: "no key", spec: fwapi.APISpec{SecretFile: secretFile}, wantErr: "api key: set key_file or key_env in the target's api section"},
		{name: "no secret", spec: fwapi.APISpec{KeyFile: keyFile}, wantErr: "api secret: set secret_file or secret_env"},
		{name: "env unset", spec: fwapi.APISpec{KeyFile: keyFile, SecretEnv: "FWAB_TEST_UNSET_SECRET"}, wantErr: "environment variable FWAB_TEST_UNSET_SECRET (named by secret_env) is unset or empty"},
		{name: "both", spec: fwapi.APISpec{KeyFile: keyFile, KeyEnv: "FWAB_TEST_KEY", SecretFile: secretFile}, wantErr: "both key_file and key_env are set"},
		{name: "readable by others", spec: fwapi.APISpec{KeyFile: keyFile, SecretFile: openFile}, wantErr: "is readable by others (mode 0644): run chmod 600 '" + openFile + "'"},
		{name: "empty file", spec: fwapi.APISpec{KeyFile: emptyFile, SecretFile: secretFile}, wantErr: "is empty"},
		{name: "missing file", spec: fwapi.APISpec{KeyFile: filepath.Join(dir, "nope"), SecretFile: secretFile}, wantErr: "nope does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := fwapi.LoadCredentials(&tc.spec)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("LoadCredentials() error = %v, want one containing %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "Value") {
					t.Errorf("LoadCredentials() error %q shows a secret value", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("LoadCredentials() error = %v", err)
			}
			if got != tc.want {
				t.Errorf("LoadCredentials() = %#v / %s, want a different value", got, got)
			}
			for _, s := range []string{got.String(), slog.AnyValue(got).Resolve().String()} {
				if strings.Contains(s, "Value") {
					t.Errorf("credentials print as %q, showing a secret", s)
				}
			}
		})
	}
}

// TestSecretsNeverShown drives failing calls with a debug logger and checks
// that neither the errors nor the log carry the key or the secret.
func TestSecretsNeverShown(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	tgt := em.APITarget(t)
	key, secret := readFile(t, tgt.API.KeyFile), readFile(t, tgt.API.SecretFile)
	var logBuf bytes.Buffer
	opts := fwapi.OPNsenseOptions{REST: fwapi.RESTOptions{Logger: slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))}}
	ctx := context.Background()

	var errs []error
	// Wrong secret: 401.
	os.WriteFile(tgt.API.SecretFile, []byte("wrong-"+secret), 0o600)
	_, err := fwapi.NewOPNsense(ctx, tgt, nil, opts)
	errs = append(errs, err)
	// Right credentials, then a 500 and a validation failure.
	fw, err := fwapi.NewOPNsense(ctx, em.APITarget(t), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	em.SetFault(emu.Fault{Requests: []emu.RequestFault{
		{Route: "POST /api/ipsec/service/reconfigure", Status: 500, Body: `{"errorMessage":"Unexpected error, check log for details"}`},
		{Route: "POST /api/ids/service/reconfigure", Body: `{"result":"failed","validations":{"ids.general.interfaces":"bad"}}`},
	}})
	errs = append(errs, fw.Apply(ctx, changes("ipsec-restart")))
	errs = append(errs, fw.Apply(ctx, changes("ids-restart")))
	// Unreachable.
	em.SetFault(emu.Fault{LinkDown: true})
	_, err = fw.Info(ctx)
	errs = append(errs, err)

	for i, err := range errs {
		if err == nil {
			t.Fatalf("call %d succeeded, want an error", i)
		}
		for _, s := range []string{key, secret} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q contains a secret", err)
			}
		}
	}
	if logBuf.Len() == 0 {
		t.Fatal("debug log is empty: the check below would prove nothing")
	}
	for _, s := range []string{key, secret} {
		if strings.Contains(logBuf.String(), s) {
			t.Errorf("debug log contains a secret:\n%s", logBuf.String())
		}
	}
}

func TestAPIErrorHints(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		setup      func(*labtest.Firewall, *fwapi.Target)
		wantStatus int
		want       []string
	}{
		{name: "401", setup: func(f *labtest.Firewall, tg *fwapi.Target) { os.WriteFile(tg.API.KeyFile, []byte("other"), 0o600) },
			wantStatus: 401, want: []string{"HTTP 401", "Authentication Failed", "check the API key and secret"}},
		{name: "403", setup: func(f *labtest.Firewall, tg *fwapi.Target) {
			f.SetFault(emu.Fault{Requests: []emu.RequestFault{{Route: "GET /api/core/firmware/info", Status: 403, Body: string(api.Body("opnsense/error_403.json"))}}})
		},
			wantStatus: 403, want: []string{"HTTP 403", "Forbidden", "ACL"}},
		{name: "404 package missing", setup: func(f *labtest.Firewall, tg *fwapi.Target) {
			f.SetFault(emu.Fault{Requests: []emu.RequestFault{{Route: "GET /api/core/firmware/info", Status: 404, Body: `{"errorMessage":"Endpoint not found"}`}}})
		}, wantStatus: 404, want: []string{"Endpoint not found", "API package missing or endpoint not present in this version"}},
		{name: "500", setup: func(f *labtest.Firewall, tg *fwapi.Target) {
			f.SetFault(emu.Fault{Requests: []emu.RequestFault{{Route: "GET /api/core/firmware/info", Status: 500, Body: `{"errorMessage":"Unexpected error, check log for details","errorTitle":"Error"}`}}})
		}, wantStatus: 500, want: []string{"HTTP 500", "Error: Unexpected error", "system log"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
			tg := em.APITarget(t)
			tc.setup(em, tg)
			_, err := fwapi.NewOPNsense(ctx, tg, nil, fwapi.OPNsenseOptions{})
			var ae *fwapi.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("NewOPNsense() error = %v, want an *APIError", err)
			}
			if ae.StatusCode != tc.wantStatus || ae.Method != http.MethodGet || ae.Path != "/api/core/firmware/info" {
				t.Errorf("APIError = {%d %s %s}, want {%d GET /api/core/firmware/info}", ae.StatusCode, ae.Method, ae.Path, tc.wantStatus)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestResponseBodyLimit(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	fw, err := fwapi.NewOPNsense(context.Background(), em.APITarget(t), nil, fwapi.OPNsenseOptions{REST: fwapi.RESTOptions{MaxResponseBody: 200}})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	_, err = fw.ReadConfig(context.Background())
	if err == nil || !strings.Contains(err.Error(), "larger than the 200-byte limit") {
		t.Fatalf("ReadConfig() with a 200-byte cap: error = %v, want the limit named", err)
	}
}

// apiTarget is an OPNsense target at url whose credentials are set.
func apiTarget(url string) *fwapi.Target {
	return &fwapi.Target{Name: "fw", API: &fwapi.APISpec{URL: url, KeyEnv: "PATH", SecretEnv: "PATH"}}
}

func TestAPIURLValidation(t *testing.T) {
	for _, u := range []string{"", "ftp://fw", "https://", "https://user:pw@fw.example", "http://fw.example", "http://198.18.1.1"} {
		_, err := fwapi.NewOPNsense(context.Background(), apiTarget(u), nil, fwapi.OPNsenseOptions{})
		if err == nil {
			t.Errorf("NewOPNsense(url %q) succeeded, want an error", u)
			continue
		}
		if strings.Contains(err.Error(), "pw@") {
			t.Errorf("NewOPNsense(url %q) error %q repeats the password", u, err)
		}
	}
}

func TestAPIURLPlainHTTPOnLoopbackOnly(t *testing.T) {
	// Nothing answers at these addresses: an accepted url fails later, when
	// the driver asks for the firmware version, not at the url check.
	opts := fwapi.OPNsenseOptions{REST: fwapi.RESTOptions{Timeout: 2 * time.Second}}
	for _, u := range []string{"http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1"} {
		_, err := fwapi.NewOPNsense(context.Background(), apiTarget(u), nil, opts)
		if err != nil && (strings.Contains(err.Error(), "plain http") || strings.Contains(err.Error(), "want https://")) {
			t.Errorf("NewOPNsense(url %q) error = %v, want loopback http accepted", u, err)
		}
	}
	_, err := fwapi.NewOPNsense(context.Background(), apiTarget("http://fw.example"), nil, opts)
	if err == nil || !strings.Contains(err.Error(), "plain http would send the API key in clear: use https") {
		t.Errorf("NewOPNsense(http://fw.example) error = %v, want https demanded", err)
	}
}

func TestUnreachable(t *testing.T) {
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	cut := em.APITarget(t)
	em.SetFault(emu.Fault{LinkDown: true}) // accepts, then drops every connection

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := em.APITarget(t)
	refused.API.URL = "https://" + ln.Addr().String()
	ln.Close() // nothing listens there any more

	for name, tg := range map[string]*fwapi.Target{"connection cut": cut, "connection refused": refused} {
		t.Run(name, func(t *testing.T) {
			_, err := fwapi.NewOPNsense(context.Background(), tg, nil, fwapi.OPNsenseOptions{})
			if err == nil || !strings.Contains(err.Error(), "firewall unreachable (is it up, and is the api url "+tg.API.URL+" right?)") {
				t.Fatalf("NewOPNsense() error = %v, want the firewall called unreachable", err)
			}
		})
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}
