package fwapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-resty/resty/v2"
)

// PfREST is a client for the pfSense REST API v2 (pfSense-pkg-RESTAPI,
// "pfrest"), which is optional on pfSense: the SSH driver may use it where it
// is installed. It authenticates with an API key in the X-API-Key header.
type PfREST struct {
	api *restClient
}

// NewPfREST builds a client from the target's api section; only the key is
// needed. It does not contact the firewall: call Version to check that the
// package is installed.
func NewPfREST(spec *APISpec, opts RESTOptions) (*PfREST, error) {
	creds, err := LoadCredentials(spec, false)
	if err != nil {
		return nil, fmt.Errorf("pfrest: %w", err)
	}
	api, err := newRESTClient(spec, opts, func(c *resty.Client) { c.SetHeader("X-API-Key", creds.Key) })
	if err != nil {
		return nil, fmt.Errorf("pfrest: %w", err)
	}
	api.decodeError = decodePfRESTError
	return &PfREST{api: api}, nil
}

// pfEnvelope is every pfrest answer, success or error
// ([rest] Core/Response.inc to_representation()).
type pfEnvelope struct {
	Code       int             `json:"code"`
	Status     string          `json:"status"`
	ResponseID string          `json:"response_id"`
	Message    string          `json:"message"`
	Data       json.RawMessage `json:"data"`
}

// pfRESTHints maps the response_id classes fwab knows to advice. The ids are
// UPPER_SNAKE strings chosen by the package per error; the ones here are
// matched by substring because exact spellings differ between package
// releases (UNVERIFIED beyond the documented "SUCCESS").
var pfRESTHints = []struct{ contains, hint string }{
	{"AUTH", "check the API key (key_file or key_env) and that key authentication is enabled in System > REST API > Settings"},
	{"FORBIDDEN", "the key's user lacks the privilege for this endpoint: grant it in the user manager"},
	{"NOT_FOUND", "the object or endpoint does not exist on this firewall"},
	{"VALIDATION", "the firewall refused a value: see the message"},
}

func decodePfRESTError(status int, body []byte) *APIError {
	e := &APIError{}
	var env pfEnvelope
	if json.Unmarshal(body, &env) == nil && (env.ResponseID != "" || env.Message != "") {
		e.ResponseID, e.Message = env.ResponseID, env.Message
		for _, h := range pfRESTHints {
			if strings.Contains(env.ResponseID, h.contains) {
				e.Hint = h.hint
				break
			}
		}
		return e
	}
	// No envelope at all: the package is not installed and the web GUI (or
	// nginx) answered with its own page.
	if status == http.StatusNotFound {
		e.Message = "no REST API answer"
		e.Hint = "API package missing: install pfSense-pkg-RESTAPI (pfrest) or configure the target without an api section"
		return e
	}
	if len(body) > 0 && !bytes.HasPrefix(bytes.TrimSpace(body), []byte("<")) {
		e.Message = clip(bytes.TrimSpace(body), 200)
	}
	return e
}

// do sends one request and decodes the envelope's data into out. A 2xx
// answer whose envelope is not a success is an error too.
func (p *PfREST) do(ctx context.Context, method, path string, body, out any) error {
	raw, err := p.api.call(ctx, method, path, body, "")
	if err != nil {
		return fmt.Errorf("pfrest: %w", err)
	}
	var env pfEnvelope
	if err := json.Unmarshal(raw, &env); err != nil || env.Code == 0 {
		return fmt.Errorf("pfrest: %s %s: the answer is not a REST API v2 envelope: %q", method, path, clip(raw, 200))
	}
	if env.Code < 200 || env.Code > 299 || (env.ResponseID != "" && env.ResponseID != "SUCCESS") {
		e := decodePfRESTError(env.Code, raw)
		e.StatusCode, e.Method, e.Path = env.Code, method, path
		return fmt.Errorf("pfrest: %w", e)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("pfrest: %s %s: unexpected data: %v", method, path, err)
		}
	}
	return nil
}

// PfVersion is /api/v2/system/version's data.
type PfVersion struct {
	Version   string `json:"version"`   // e.g. 2.8.0-RELEASE
	Base      string `json:"base"`      // FreeBSD base
	Patch     string `json:"patch"`     // /etc/version.patch
	BuildTime string `json:"buildtime"` // /etc/version.buildtime
}

// Version reads the firewall's version; it is also the cheapest check that
// the package is installed and the key works.
func (p *PfREST) Version(ctx context.Context) (PfVersion, error) {
	var v PfVersion
	err := p.do(ctx, http.MethodGet, "/api/v2/system/version", nil, &v)
	return v, err
}

// PfApplyStatus is GET /api/v2/firewall/apply's data.
type PfApplyStatus struct {
	Applied           bool     `json:"applied"`
	PendingSubsystems []string `json:"pending_subsystems"`
}

// FirewallApplyStatus reports whether filter changes are pending.
func (p *PfREST) FirewallApplyStatus(ctx context.Context) (PfApplyStatus, error) {
	var s PfApplyStatus
	err := p.do(ctx, http.MethodGet, "/api/v2/firewall/apply", nil, &s)
	return s, err
}

// ApplyFirewall reloads the filter synchronously (filter_configure_sync(),
// async=false), so the new rules are loaded when it returns.
func (p *PfREST) ApplyFirewall(ctx context.Context) error {
	return p.do(ctx, http.MethodPost, "/api/v2/firewall/apply", map[string]any{"async": false}, nil)
}

// OutboundNATModes are the values /api/v2/firewall/nat/outbound/mode takes.
var OutboundNATModes = []string{"automatic", "hybrid", "advanced", "disabled"}

// OutboundNATMode reads the outbound NAT mode.
func (p *PfREST) OutboundNATMode(ctx context.Context) (string, error) {
	var d struct {
		Mode string `json:"mode"`
	}
	err := p.do(ctx, http.MethodGet, "/api/v2/firewall/nat/outbound/mode", nil, &d)
	return d.Mode, err
}

// SetOutboundNATMode changes the outbound NAT mode; it takes effect after
// ApplyFirewall.
func (p *PfREST) SetOutboundNATMode(ctx context.Context, mode string) error {
	valid := false
	for _, m := range OutboundNATModes {
		valid = valid || m == mode
	}
	if !valid {
		return fmt.Errorf("pfrest: outbound NAT mode %q: want one of %s", mode, strings.Join(OutboundNATModes, ", "))
	}
	return p.do(ctx, http.MethodPatch, "/api/v2/firewall/nat/outbound/mode", map[string]string{"mode": mode}, nil)
}

// PfService is one entry of GET /api/v2/status/services.
type PfService struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Enabled     bool   `json:"enabled"`
	Status      bool   `json:"status"` // running
}

// Services lists the firewall's services. Their ids are array indexes and
// shift when services change, so callers address them by name.
func (p *PfREST) Services(ctx context.Context) ([]PfService, error) {
	var s []PfService
	err := p.do(ctx, http.MethodGet, "/api/v2/status/services", nil, &s)
	return s, err
}

// ServiceAction starts, stops or restarts the service called name.
func (p *PfREST) ServiceAction(ctx context.Context, name, action string) error {
	switch action {
	case "start", "stop", "restart":
	default:
		return fmt.Errorf("pfrest: service action %q: want start, stop or restart", action)
	}
	list, err := p.Services(ctx)
	if err != nil {
		return err
	}
	id := -1
	var names []string
	for i, s := range list {
		names = append(names, s.Name)
		if s.Name == name {
			id = i
			break
		}
	}
	if id < 0 {
		return fmt.Errorf("pfrest: no service %q on the firewall; it has: %s", name, strings.Join(names, ", "))
	}
	return p.do(ctx, http.MethodPost, "/api/v2/status/service", map[string]any{"id": id, "action": action}, nil)
}

// Close releases idle connections.
func (p *PfREST) Close() error {
	p.api.client.GetClient().CloseIdleConnections()
	return nil
}
