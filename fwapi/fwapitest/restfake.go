// Package fwapitest holds what fwapi's tests share that is not a firewall:
// the hostile-value corpus, and the pfSense REST v2 fake its client's tests
// use. Tests that need a firewall start the lab's emulator (lab/labtest).
package fwapitest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fwab/fwab/fwapi"
)

// Request is one request a fake received.
type Request struct {
	Method  string
	Path    string
	Pattern string // the route it matched, "" when none
	Body    []byte
	Header  http.Header
}

// Fault replaces a route's answer.
type Fault struct {
	Status int               // HTTP status; 0 means 200
	Body   string            // answer body
	Header map[string]string // extra answer headers, e.g. Location
	// Drop runs the route's real handler (its side effects happen on the
	// firewall) and then cuts the connection instead of answering: the
	// firewall was reached but the answer was lost.
	Drop bool
	// Times limits the fault to the next n requests; 0 means every request.
	Times int
}

// restFake is the route table, request log and fault injection of the
// pfSense REST v2 fake. Requests to routes that are not registered fail the test.
type restFake struct {
	t      testing.TB
	srv    *httptest.Server
	mux    *http.ServeMux
	authOK func(*http.Request) bool
	denied func(http.ResponseWriter) // 401 answer
	forbid func(http.ResponseWriter) // 403 answer

	mu         sync.Mutex
	requests   []Request
	calls      map[string]int
	expected   map[string]bool
	faults     map[string]*Fault
	deny       map[string]bool
	unexpected []string
}

func newRESTFake(t testing.TB) *restFake {
	f := &restFake{
		t:        t,
		mux:      http.NewServeMux(),
		calls:    map[string]int{},
		expected: map[string]bool{},
		faults:   map[string]*Fault{},
		deny:     map[string]bool{},
	}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	// TLS failures are what several tests provoke on purpose.
	f.srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	return f
}

func (f *restFake) start() {
	f.srv.StartTLS()
	f.t.Cleanup(func() {
		f.srv.CloseClientConnections()
		f.srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, u := range f.unexpected {
			f.t.Errorf("fake API: unexpected request %s", u)
		}
		for _, p := range sortedNames(f.expected) {
			if f.calls[p] == 0 {
				f.t.Errorf("fake API: route %q was expected but never called", p)
			}
		}
	})
}

// handle registers a route; pattern is a net/http ServeMux pattern with a
// method, e.g. "POST /api/firewall/filter/apply/{rev}".
func (f *restFake) handle(pattern string, h http.HandlerFunc) {
	f.mux.HandleFunc(pattern, h)
}

func (f *restFake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	r.Body = io.NopCloser(bytes.NewReader(body))
	_, pattern := f.mux.Handler(r)
	f.mu.Lock()
	f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Pattern: pattern, Body: body, Header: r.Header.Clone()})
	f.mu.Unlock()
	if !f.authOK(r) {
		f.denied(w)
		return
	}
	f.mu.Lock()
	denied := f.deny[pattern]
	f.mu.Unlock()
	if denied {
		f.forbid(w)
		return
	}
	if pattern == "" {
		f.mu.Lock()
		f.unexpected = append(f.unexpected, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, "<html><body>404 Not Found</body></html>\n")
		return
	}
	f.mu.Lock()
	f.calls[pattern]++
	fault := f.faults[pattern]
	if fault != nil && fault.Times > 0 {
		fault.Times--
		if fault.Times == 0 {
			delete(f.faults, pattern)
		}
	}
	f.mu.Unlock()
	switch {
	case fault == nil:
		f.mux.ServeHTTP(w, r)
	case fault.Drop:
		f.mux.ServeHTTP(httptest.NewRecorder(), r)
		cut(w)
	default:
		status := fault.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.Header().Set("Content-Type", "application/json")
		for k, v := range fault.Header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, fault.Body)
	}
}

// cut closes the connection without an answer.
func cut(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fwapitest: response writer cannot hijack")
	}
	conn, _, err := hj.Hijack()
	if err == nil {
		conn.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

// Expect marks routes that must be called before the test ends.
func (f *restFake) Expect(patterns ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range patterns {
		f.mustExist(p)
		f.expected[p] = true
	}
}

// Fail injects a fault on a registered route.
func (f *restFake) Fail(pattern string, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustExist(pattern)
	f.faults[pattern] = &fault
}

// Deny makes a route answer 403, as when the key's ACL lacks it.
func (f *restFake) Deny(pattern string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mustExist(pattern)
	f.deny[pattern] = true
}

func (f *restFake) mustExist(pattern string) {
	method, path, _ := strings.Cut(pattern, " ")
	r := httptest.NewRequest(method, "https://fake"+strings.NewReplacer("{", "", "}", "").Replace(path), nil)
	if _, p := f.mux.Handler(r); p != pattern {
		f.t.Fatalf("fwapitest: %q is not a route of this fake (matched %q)", pattern, p)
	}
}

// Calls returns how often a route was called.
func (f *restFake) Calls(pattern string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[pattern]
}

// Requests returns every request received so far.
func (f *restFake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Fingerprint is the SHA-256 fingerprint of the fake's certificate, as
// fwapi.FormatFingerprint prints it.
func (f *restFake) Fingerprint() string {
	sum := sha256.Sum256(f.srv.Certificate().Raw)
	return fwapi.FormatFingerprint(sum[:])
}

// CAFile writes the fake's (self-signed) certificate as a PEM file and
// returns its path.
func (f *restFake) CAFile() string {
	return writeFile(f.t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw}), 0o644)
}

func writeFile(t testing.TB, name string, data []byte, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// OtherCAFile writes a freshly made self-signed CA certificate that signed
// nothing the fakes present: verification against it must fail.
func OtherCAFile(t testing.TB) string {
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
	return writeFile(t, "other-ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

// apiSpec writes key and secret files (mode 0600) and returns an APISpec that
// trusts the fake's certificate through ca_file.
func (f *restFake) apiSpec(key, secret string) *fwapi.APISpec {
	spec := &fwapi.APISpec{
		URL:     f.srv.URL,
		KeyFile: writeFile(f.t, "api.key", []byte(key+"\n"), 0o600),
		CAFile:  f.CAFile(),
	}
	if secret != "" {
		spec.SecretFile = writeFile(f.t, "api.secret", []byte(secret+"\n"), 0o600)
	}
	return spec
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
