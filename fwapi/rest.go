package fwapi

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fwab/fwab/internal/secretfile"
	"github.com/go-resty/resty/v2"
)

// DefaultMaxResponseBody caps every REST response body (the whole config.xml
// download included). A firewall that sends more is answered with an error
// rather than exhausting memory.
const DefaultMaxResponseBody = 64 << 20

// RESTOptions tune the REST clients built from an APISpec. The zero value is
// usable.
type RESTOptions struct {
	Timeout         time.Duration // per request; default 60 s
	MaxResponseBody int           // bytes; default DefaultMaxResponseBody
	Logger          *slog.Logger  // nil discards; secrets are never logged
	// Transport replaces the HTTP transport (tests). Its TLS settings are
	// then the caller's business.
	Transport http.RoundTripper
}

// APIError is a REST call that the firewall answered with an error: a non-2xx
// status, or an HTTP 200 body that reports a failure (OPNsense's
// {"result":"failed","validations":{...}}).
type APIError struct {
	StatusCode  int
	Method      string
	Path        string
	Message     string
	Validations map[string]string // field -> message
	Hint        string            // what the operator should do
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: ", e.Method, e.Path)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if len(e.Validations) > 0 {
		b.WriteString(": validation failed:")
		for _, k := range slices.Sorted(maps.Keys(e.Validations)) {
			fmt.Fprintf(&b, " %s: %s;", k, e.Validations[k])
		}
	}
	if e.Hint != "" {
		fmt.Fprintf(&b, " (%s)", e.Hint)
	}
	return b.String()
}

// hintFor returns the operator's next step for an HTTP status.
func hintFor(status int, path string) string {
	switch {
	case status == http.StatusUnauthorized:
		return "check the API key and secret in the target's key_file/secret_file or key_env/secret_env, and that the key's user is enabled and its ACL allows the API"
	case status == http.StatusForbidden:
		return "the API key's user lacks the privilege for this endpoint: grant it in the firewall's user manager (ACL)"
	case status == http.StatusNotFound && strings.HasPrefix(path, "/api/"):
		return "API package missing or endpoint not present in this version: install the API package or check the firmware version"
	case status >= 500:
		return "the firewall failed internally: check its system log"
	}
	return ""
}

// Credentials are an API key and secret read from files or the environment.
// Their String method never prints them.
type Credentials struct {
	Key, Secret string
}

func (Credentials) String() string         { return "credentials(redacted)" }
func (c Credentials) GoString() string     { return c.String() }
func (c Credentials) LogValue() slog.Value { return slog.StringValue(c.String()) }

// LoadCredentials reads the API key and secret named by spec: each from its
// *_file (trailing whitespace trimmed) or its *_env. Errors name what is
// missing and never contain a value.
func LoadCredentials(spec *APISpec) (Credentials, error) {
	if spec == nil {
		return Credentials{}, errors.New("target has no api section: add api: {url, key_file or key_env, ...}")
	}
	var c Credentials
	var err error
	if c.Key, err = readSecret("key", spec.KeyFile, spec.KeyEnv); err != nil {
		return Credentials{}, err
	}
	if c.Secret, err = readSecret("secret", spec.SecretFile, spec.SecretEnv); err != nil {
		return Credentials{}, err
	}
	return c, nil
}

// SetupError is a fault in what the user set up for fwab (a credential's
// file or variable), not in the firewall: the command exits 2.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// readSecret reads an API credential from its file or variable; what is
// wrong with them is a *SetupError.
func readSecret(what, file, env string) (string, error) {
	v, err := readSecretValue(what, file, env)
	if err != nil {
		return "", &SetupError{err}
	}
	return v, nil
}

func readSecretValue(what, file, env string) (string, error) {
	switch {
	case file != "" && env != "":
		return "", fmt.Errorf("api %s: both %s_file and %s_env are set: keep one", what, what, what)
	case file != "":
		v, err := secretfile.ReadLine(ExpandHome(file))
		if err != nil {
			return "", fmt.Errorf("api %s_file: %w", what, err)
		}
		return v, nil
	case env != "":
		v := strings.TrimSpace(os.Getenv(env))
		if v == "" {
			return "", fmt.Errorf("api %s: environment variable %s (named by %s_env) is unset or empty", what, env, what)
		}
		return v, nil
	}
	return "", fmt.Errorf("api %s: set %s_file or %s_env in the target's api section (secrets are never taken from flags)", what, what, what)
}

// ParseFingerprint accepts a SHA-256 certificate fingerprint as hex, with or
// without colons and an optional "sha256:" prefix, in any case.
func ParseFingerprint(s string) ([]byte, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	t = strings.TrimPrefix(t, "sha256:")
	t = strings.ReplaceAll(t, ":", "")
	b, err := hex.DecodeString(t)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("fingerprint %q is not a SHA-256 fingerprint: want 64 hex digits, colons allowed", s)
	}
	return b, nil
}

// FormatFingerprint prints a SHA-256 fingerprint as colon-separated upper-case
// hex, the form browsers and openssl show.
func FormatFingerprint(sum []byte) string {
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(parts, ":")
}

// CertificateError is a TLS peer that failed verification. It carries the
// fingerprint the firewall presented so the operator can pin it.
type CertificateError struct {
	Host  string
	Got   string // fingerprint presented
	Want  string // pinned fingerprint; empty when verifying against CAs
	Cause error  // chain verification error, when not pinned
}

func (e *CertificateError) Error() string {
	if e.Want != "" {
		return fmt.Sprintf("tls: certificate of %s does not match the pinned fingerprint: got sha256 %s, want %s; if the firewall's certificate was renewed on purpose, set api.fingerprint: %q in the targets file",
			e.Host, e.Got, e.Want, e.Got)
	}
	return fmt.Sprintf("tls: certificate of %s is not trusted: %v; set api.ca_file to the CA that signed it, or pin it with api.fingerprint: %q (check it on the firewall's console first)",
		e.Host, e.Cause, e.Got)
}

func (e *CertificateError) Unwrap() error { return e.Cause }

// TLSConfig builds the client TLS settings for spec: verification against
// ca_file (or the system roots), or a pinned leaf fingerprint; verification is
// skipped only when insecure is set explicitly.
func TLSConfig(spec *APISpec) (*tls.Config, error) {
	u, err := parseAPIURL(spec)
	if err != nil {
		return nil, err
	}
	host := u.Hostname()
	if spec.Insecure && (spec.Fingerprint != "" || spec.CAFile != "") {
		return nil, errors.New("api: insecure is set together with fingerprint or ca_file: remove insecure to verify the certificate")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	if spec.Insecure {
		cfg.InsecureSkipVerify = true
		return cfg, nil
	}
	var pin []byte
	if spec.Fingerprint != "" {
		if pin, err = ParseFingerprint(spec.Fingerprint); err != nil {
			return nil, fmt.Errorf("api: %w", err)
		}
	}
	var roots *x509.CertPool // nil: system roots
	if spec.CAFile != "" {
		pem, err := os.ReadFile(spec.CAFile)
		if err != nil {
			return nil, fmt.Errorf("api ca_file: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("api ca_file %s holds no PEM certificate", spec.CAFile)
		}
	}
	// Verification is done here rather than by crypto/tls so that a failure
	// can report the presented fingerprint.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("tls: the firewall presented no certificate")
		}
		leaf := cs.PeerCertificates[0]
		sum := sha256.Sum256(leaf.Raw)
		got := FormatFingerprint(sum[:])
		if pin != nil {
			if string(sum[:]) != string(pin) {
				return &CertificateError{Host: host, Got: got, Want: FormatFingerprint(pin)}
			}
			if roots == nil {
				return nil // pinned: the pin is the trust anchor
			}
		}
		inter := x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, Intermediates: inter})
		if err != nil {
			return &CertificateError{Host: host, Got: got, Cause: err}
		}
		return nil
	}
	return cfg, nil
}

func parseAPIURL(spec *APISpec) (*url.URL, error) {
	if spec == nil {
		return nil, errors.New("target has no api section: add api: {url, key_file or key_env, ...}")
	}
	u, err := url.Parse(spec.URL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("api url %q: want https://host[:port]", spec.URL)
	}
	if u.User != nil {
		return nil, errors.New("api url: remove the user:password part; credentials come from key_file/secret_file or key_env/secret_env")
	}
	if u.Scheme == "http" {
		if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("api url %s: plain http would send the API key in clear: use https (http is accepted for loopback addresses only)", u.Redacted())
		}
	}
	return u, nil
}

// HTTPClient builds an *http.Client for spec with its TLS settings.
func HTTPClient(spec *APISpec, opts RESTOptions) (*http.Client, error) {
	rt := opts.Transport
	if rt == nil {
		tlsCfg, err := TLSConfig(spec)
		if err != nil {
			return nil, err
		}
		rt = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSClientConfig:     tlsCfg,
			TLSHandshakeTimeout: 10 * time.Second,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		}
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	return &http.Client{Transport: rt, Timeout: timeout}, nil
}

// restClient is the OPNsense driver's REST plumbing: base URL, TLS, HTTP
// Basic authentication, the body cap and error mapping.
type restClient struct {
	base   string // scheme://host[:port], no trailing slash
	client *resty.Client
	log    *slog.Logger
}

func newRESTClient(spec *APISpec, opts RESTOptions, creds Credentials) (*restClient, error) {
	u, err := parseAPIURL(spec)
	if err != nil {
		return nil, err
	}
	hc, err := HTTPClient(spec, opts)
	if err != nil {
		return nil, err
	}
	limit := opts.MaxResponseBody
	if limit == 0 {
		limit = DefaultMaxResponseBody
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rc := resty.NewWithClient(hc).
		SetResponseBodyLimit(limit).
		SetLogger(discardRestyLogger{}).
		SetDisableWarn(true).
		SetHeader("Accept", "application/json").
		SetHeader("User-Agent", "fwab").
		// A redirect could carry the credentials to another host, and
		// the firewall's API has no reason to redirect: refuse.
		SetRedirectPolicy(resty.RedirectPolicyFunc(func(req *http.Request, via []*http.Request) error {
			return fmt.Errorf("the firewall redirected to %s: set api.url to that address instead (fwab does not follow redirects with credentials)", req.URL.Redacted())
		}))
	rc.SetBasicAuth(creds.Key, creds.Secret)
	if spec.Insecure {
		log.Warn("TLS certificate verification is off for this target (api.insecure): anyone on the path can read the API key", "url", u.Redacted())
	}
	base := strings.TrimRight(u.Scheme+"://"+u.Host+strings.TrimRight(u.Path, "/"), "/")
	return &restClient{base: base, client: rc, log: log}, nil
}

// call sends one request and returns the raw body of a 2xx response. A body
// that is not nil is sent as JSON.
// accept overrides the Accept header when not empty.
func (c *restClient) call(ctx context.Context, method, path string, body any, accept string) ([]byte, error) {
	req := c.client.R().SetContext(ctx)
	if accept != "" {
		req.SetHeader("Accept", accept)
	}
	if body != nil {
		req.SetHeader("Content-Type", "application/json").SetBody(body)
	}
	start := time.Now()
	resp, err := req.Execute(method, c.base+path)
	if err != nil {
		if errors.Is(err, resty.ErrResponseBodyTooLarge) {
			return nil, fmt.Errorf("%s %s: response larger than the %d-byte limit", method, path, c.client.ResponseBodyLimit)
		}
		var ce *CertificateError
		if errors.As(err, &ce) {
			return nil, ce
		}
		if ctx.Err() == nil {
			var ne net.Error
			if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
				return nil, fmt.Errorf("%s %s: firewall unreachable (is it up, and is the api url %s right?): %w", method, path, c.base, scrubURLError(err))
			}
		}
		return nil, fmt.Errorf("%s %s: %w", method, path, scrubURLError(err))
	}
	c.log.DebugContext(ctx, "api call", "method", method, "path", path, "status", resp.StatusCode(), "took", time.Since(start))
	if resp.StatusCode() < 200 || resp.StatusCode() > 299 {
		e := decodeOPNsenseError(resp.StatusCode(), resp.Body())
		e.StatusCode, e.Method, e.Path = resp.StatusCode(), method, path
		if e.Hint == "" {
			e.Hint = hintFor(resp.StatusCode(), path)
		}
		return nil, e
	}
	return resp.Body(), nil
}

// callJSON is call plus decoding the body into out.
func (c *restClient) callJSON(ctx context.Context, method, path string, body, out any) error {
	data, err := c.call(ctx, method, path, body, "")
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: the firewall's answer is not the expected JSON (%v): %q", method, path, err, clip(data, 200))
	}
	return nil
}

// scrubURLError drops the request URL's query from transport errors; the
// base URL never carries credentials (parseAPIURL refuses userinfo).
func scrubURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			u.RawQuery = ""
			u.User = nil
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}

func clip(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// discardRestyLogger keeps resty from writing to the process's stderr.
type discardRestyLogger struct{}

func (discardRestyLogger) Errorf(string, ...any) {}
func (discardRestyLogger) Warnf(string, ...any)  {}
func (discardRestyLogger) Debugf(string, ...any) {}
