// Package smartplug reads the power a firewall draws from a smart plug's
// JSON status over HTTP. It is apart from package probe so that what only
// handles probe results (the results store, reports) needs no HTTP client.
package smartplug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Meter reads a smart plug's JSON status over HTTP: Tasmota
// (http://plug/cm?cmnd=Status%208, path "StatusSNS.ENERGY.Power"), Shelly
// (http://plug/status, path "meters.0.power" or "emeters.0.power"), or
// anything else that answers JSON.
//
// A plug that asks for a password gets it from the URL's userinfo
// (http://user:password@plug/...) or query (Tasmota's ?user=U&password=P),
// or, kept out of the spec, from a file or the environment, as the results
// database's URL does: the query parameter password_file=PATH names a file
// whose first line is the password, and without one $FWAB_PLUG_PASSWORD
// holds it. Either is sent only to a URL that names the user: as HTTP
// basic auth to http://user@plug/..., as the password parameter to a URL
// with a user parameter (Tasmota). Errors name the plug by Redact(URL),
// without userinfo or query.
type Meter struct {
	URL string
	// Path is a dot-separated path to the number: object keys, and array
	// indexes as numbers.
	Path string
	// Client defaults to one with a 5-second timeout.
	Client *http.Client
}

// PasswordEnv is the environment variable that holds a plug's password
// when its URL names a user but no password and no password_file.
const PasswordEnv = "FWAB_PLUG_PASSWORD"

// Redact is a plug's URL as it may be shown and stored: without the
// userinfo (user:password@) and the query (?token=..., ?password=...),
// which may carry credentials. A text that does not parse as a URL with a
// host is shown as it is when it holds nothing that looks like either.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		if strings.ContainsAny(raw, "@?") {
			return "(a URL that does not parse)"
		}
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// Validate checks the URL and path before a sweep starts.
func (m Meter) Validate() error {
	if !strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://") {
		return fmt.Errorf("power meter URL %q: use an http:// or https:// URL", Redact(m.URL))
	}
	if _, err := m.request(context.Background(), false); err != nil {
		return err
	}
	if m.Path == "" || strings.Contains(m.Path, "..") || strings.HasPrefix(m.Path, ".") || strings.HasSuffix(m.Path, ".") {
		return fmt.Errorf("power meter JSON path %q: write keys separated by dots, such as ENERGY.Power or emeters.0.power", m.Path)
	}
	return nil
}

// request is the GET the meter sends, with the password from the file or
// the environment in place; with read false the file is checked, not read.
func (m Meter) request(ctx context.Context, read bool) (*http.Request, error) {
	shown := Redact(m.URL)
	u, err := url.Parse(m.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("power meter URL %s: not a URL with a host", shown)
	}
	q := u.Query()
	file := q.Get("password_file")
	q.Del("password_file")
	_, userinfoPassword := u.User.Password()
	userinfoUser := u.User != nil && u.User.Username() != ""
	var password string
	switch {
	case file != "" && (userinfoPassword || q.Has("password")):
		return nil, fmt.Errorf("power meter URL %s: it has both a password and a password_file: keep only the file", shown)
	case file != "" && !userinfoUser && q.Get("user") == "":
		return nil, fmt.Errorf("power meter URL %s: password_file needs a user to go with, http://USER@plug/... (basic auth) or ?user=USER (Tasmota)", shown)
	case file != "" && read:
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("power meter password_file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if password = strings.TrimSuffix(line, "\r"); password == "" {
			return nil, fmt.Errorf("power meter password_file %s is empty", file)
		}
	case file != "":
		if _, err := os.Stat(file); err != nil {
			return nil, fmt.Errorf("power meter password_file: %w", err)
		}
	case !userinfoPassword && !q.Has("password"):
		password = os.Getenv(PasswordEnv)
	}
	reencode := file != "" // the query is sent as written unless fwab changes it
	if password != "" {
		switch {
		case userinfoUser:
			u.User = url.UserPassword(u.User.Username(), password)
		case q.Get("user") != "":
			q.Set("password", password)
			reencode = true
		}
	}
	if reencode {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("power meter %s: %v", shown, unwrapURLError(err))
	}
	return req, nil
}

// unwrapURLError drops the URL that a *url.Error repeats, query and all.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Watts implements probe.PowerMeter.
func (m Meter) Watts(ctx context.Context) (float64, error) {
	if err := m.Validate(); err != nil {
		return 0, err
	}
	client := m.Client
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := m.request(ctx, true)
	if err != nil {
		return 0, err
	}
	shown := Redact(m.URL)
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("power meter %s: %v", shown, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("power meter %s: %w", shown, err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("power meter %s: HTTP %s", shown, resp.Status)
	}
	return WattsAt(body, m.Path)
}

// WattsAt finds the number at path in a JSON document.
func WattsAt(doc []byte, path string) (float64, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return 0, fmt.Errorf("power meter: reply is not JSON: %w", err)
	}
	cur := v
	for i, key := range strings.Split(path, ".") {
		at := strings.Join(strings.Split(path, ".")[:i+1], ".")
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[key]
			if !ok {
				return 0, fmt.Errorf("power meter: no %q in the reply (keys there: %s)", at, keysOf(node))
			}
			cur = next
		case []any:
			idx, err := strconv.Atoi(key)
			if err != nil || idx < 0 || idx >= len(node) {
				return 0, fmt.Errorf("power meter: %q: %q is not an index of a %d-element array", at, key, len(node))
			}
			cur = node[idx]
		default:
			return 0, fmt.Errorf("power meter: %q: cannot look up %q in a %T", at, key, cur)
		}
	}
	var w float64
	switch n := cur.(type) {
	case json.Number:
		f, err := n.Float64()
		if err != nil {
			return 0, fmt.Errorf("power meter: %q is %q, not a number", path, n)
		}
		w = f
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err != nil {
			return 0, fmt.Errorf("power meter: %q is %q, not a number", path, n)
		}
		w = f
	default:
		return 0, fmt.Errorf("power meter: %q is a %T, not a number", path, cur)
	}
	if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return 0, fmt.Errorf("power meter: %q is %v, not a power", path, w)
	}
	return w, nil
}

func keysOf(m map[string]any) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "none"
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}
