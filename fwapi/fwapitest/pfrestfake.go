package fwapitest

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/fwab/fwab/fixtures/api"
	"github.com/fwab/fwab/fwapi"
)

// PfRESTOptions set up a pfSense REST API v2 fake.
type PfRESTOptions struct {
	Key     string // X-API-Key; default "fake-pfrest-key"
	Version string // default "2.8.0-RELEASE"
	// Missing stands for a pfSense without the package: every /api/v2 path
	// gets the web GUI's HTML 404 page.
	Missing bool
}

// PfService is one service the fake knows.
type PfService struct {
	Name     string
	Enabled  bool
	Running  bool
	Restarts int
}

// PfREST is an httptest TLS fake of the pfSense REST API v2: every answer is
// the {code,status,response_id,message,data} envelope.
type PfREST struct {
	*restFake
	opts PfRESTOptions

	state struct {
		natMode  string
		pending  bool
		applies  int
		services []PfService
	}
}

// NewPfREST starts the fake; it is closed, and unexpected or missing calls
// reported, when the test ends.
func NewPfREST(t testing.TB, opts PfRESTOptions) *PfREST {
	t.Helper()
	if opts.Key == "" {
		opts.Key = "fake-pfrest-key"
	}
	if opts.Version == "" {
		opts.Version = "2.8.0-RELEASE"
	}
	f := &PfREST{restFake: newRESTFake(t), opts: opts}
	f.state.natMode = "automatic"
	f.state.services = []PfService{{Name: "unbound", Enabled: true, Running: true}, {Name: "ipsec", Enabled: true, Running: true}, {Name: "suricata", Enabled: true}}
	f.authOK = func(r *http.Request) bool { return r.Header.Get("X-API-Key") == opts.Key }
	f.denied = func(w http.ResponseWriter) { writeJSON(w, 401, api.Body("pfrest/error_401.json")) }
	f.forbid = func(w http.ResponseWriter) { writeJSON(w, 403, api.Body("pfrest/error_403.json")) }
	if opts.Missing {
		f.authOK = func(*http.Request) bool { return true }
		f.handle("/api/", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("<html><head><title>404 Not Found</title></head><body>404 Not Found</body></html>\n"))
		})
	} else {
		f.routes()
	}
	f.start()
	return f
}

// envelope writes a pfrest answer.
func envelope(w http.ResponseWriter, code int, status, id, msg string, data any) {
	b, _ := json.Marshal(map[string]any{"code": code, "status": status, "response_id": id, "message": msg, "data": data})
	writeJSON(w, code, b)
}

func (f *PfREST) routes() {
	ok := func(w http.ResponseWriter, data any) { envelope(w, 200, "ok", "SUCCESS", "", data) }
	f.handle("GET /api/v2/system/version", func(w http.ResponseWriter, r *http.Request) {
		ok(w, map[string]string{"version": f.opts.Version, "base": "15.0", "patch": "0", "buildtime": "Mon May 26 12:00:00 UTC 2025"})
	})
	f.handle("GET /api/v2/firewall/apply", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		pending := []string{}
		if f.state.pending {
			pending = append(pending, "filter")
		}
		ok(w, map[string]any{"applied": !f.state.pending, "pending_subsystems": pending})
	})
	f.handle("POST /api/v2/firewall/apply", func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			envelope(w, 400, "bad request", "REQUEST_BODY_INVALID_JSON", "Request body is not valid JSON.", []any{})
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if req["async"] != false {
			// An asynchronous apply returns before the rules are loaded;
			// the client must ask for a synchronous one.
			envelope(w, 200, "ok", "SUCCESS", "", map[string]any{"applied": false, "pending_subsystems": []string{"filter"}})
			return
		}
		f.state.pending = false
		f.state.applies++
		ok(w, map[string]any{"applied": true, "pending_subsystems": []string{}})
	})
	f.handle("GET /api/v2/firewall/nat/outbound/mode", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		ok(w, map[string]string{"mode": f.state.natMode})
	})
	f.handle("PATCH /api/v2/firewall/nat/outbound/mode", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Mode string `json:"mode"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !slices.Contains(fwapi.OutboundNATModes, req.Mode) {
			writeJSON(w, 400, api.Body("pfrest/error_400_validation.json"))
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		f.state.natMode = req.Mode
		f.state.pending = true
		ok(w, map[string]string{"mode": req.Mode})
	})
	f.handle("GET /api/v2/status/services", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var out []map[string]any
		for _, s := range f.state.services {
			out = append(out, map[string]any{"name": s.Name, "description": s.Name, "enabled": s.Enabled, "status": s.Running})
		}
		ok(w, out)
	})
	f.handle("POST /api/v2/status/service", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     *int   `json:"id"`
			Action string `json:"action"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		if req.ID == nil || *req.ID < 0 || *req.ID >= len(f.state.services) {
			envelope(w, 404, "not found", "SERVICE_NOT_FOUND", "Object with ID does not exist.", []any{})
			return
		}
		s := &f.state.services[*req.ID]
		switch req.Action {
		case "start", "restart":
			s.Running = true
			if req.Action == "restart" {
				s.Restarts++
			}
		case "stop":
			s.Running = false
		default:
			envelope(w, 400, "bad request", "FIELD_INVALID_CHOICE", "Field `action` must be one of [start, stop, restart]", []any{})
			return
		}
		ok(w, map[string]any{"name": s.Name, "action": req.Action})
	})
}

// Target is a pfsense target whose api section points at this fake.
func (f *PfREST) Target() *fwapi.Target {
	return &fwapi.Target{Name: "fake-pfsense", Flavor: "pfsense", Host: "127.0.0.1", API: f.apiSpec(f.opts.Key, "")}
}

// NATMode returns the outbound NAT mode and whether a filter apply is
// pending.
func (f *PfREST) NATMode() (mode string, pending bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.natMode, f.state.pending
}

// Applies counts synchronous firewall applies.
func (f *PfREST) Applies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state.applies
}

// Services returns the fake's services.
func (f *PfREST) Services() []PfService {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]PfService(nil), f.state.services...)
}
