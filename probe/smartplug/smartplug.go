// Package smartplug reads the power a firewall draws from a smart plug's
// JSON status over HTTP. It is apart from package probe so that what only
// handles probe results (the results store, reports) needs no HTTP client.
package smartplug

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Meter reads a smart plug's JSON status over HTTP: Tasmota
// (http://plug/cm?cmnd=Status%208, path "StatusSNS.ENERGY.Power"), Shelly
// (http://plug/status, path "meters.0.power" or "emeters.0.power"), or
// anything else that answers JSON.
type Meter struct {
	URL string
	// Path is a dot-separated path to the number: object keys, and array
	// indexes as numbers.
	Path string
	// Client defaults to one with a 5-second timeout.
	Client *http.Client
}

// Validate checks the URL and path before a sweep starts.
func (m Meter) Validate() error {
	if !strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://") {
		return fmt.Errorf("power meter URL %q: use an http:// or https:// URL", m.URL)
	}
	if m.Path == "" || strings.Contains(m.Path, "..") || strings.HasPrefix(m.Path, ".") || strings.HasSuffix(m.Path, ".") {
		return fmt.Errorf("power meter JSON path %q: write keys separated by dots, such as ENERGY.Power or emeters.0.power", m.Path)
	}
	return nil
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.URL, nil)
	if err != nil {
		return 0, fmt.Errorf("power meter: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("power meter: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, fmt.Errorf("power meter %s: %w", req.URL.Redacted(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("power meter %s: HTTP %s", req.URL.Redacted(), resp.Status)
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
