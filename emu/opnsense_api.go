package emu

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
)

// APICredentials are the OPNsense API key and secret the emulator accepts
// (HTTP Basic: key as user, secret as password).
type APICredentials struct {
	Key, Secret string
}

// opnAPI is the emulated OPNsense's REST API (firewall.md B-h): the routes
// fwapi's OPNsense driver calls, plus the settings setters, firmware status
// and service control a user of the API would expect. Every action works on
// the emulator, and so on the real data plane.
type opnAPI struct {
	e     *Emulator
	creds APICredentials
	log   *slog.Logger
	// rollbackAfter is the savepoint timer, 60 s as on OPNsense.
	rollbackAfter time.Duration

	mu         sync.Mutex
	savepoints map[string][]byte // revision -> config.xml when taken
	timer      *time.Timer
	timerRev   string
	upgrade    upgradeJob
}

// upgradeJob is the firmware job upgradestatus reports.
type upgradeJob struct {
	status string // "", running, reboot, done, error
	log    string
}

// ServeAPI serves the OPNsense REST API over HTTPS on addr until ctx ends.
// While the emulator reboots, connections are dropped without an answer, as
// a firewall that is down would. ready gets the listening address.
func (e *Emulator) ServeAPI(ctx context.Context, addr string, cert tls.Certificate, creds APICredentials, ready func(net.Addr)) error {
	if !e.opnsense() {
		return errors.New("serve api: the REST API is OPNsense's; this emulator is pfSense")
	}
	if creds.Key == "" || creds.Secret == "" {
		return errors.New("serve api: no API key or secret")
	}
	rollbackAfter := e.SavepointTimer
	if rollbackAfter == 0 {
		rollbackAfter = 60 * time.Second
	}
	a := &opnAPI{e: e, creds: creds, log: e.logger(), rollbackAfter: rollbackAfter, savepoints: map[string][]byte{}}
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("serve api: %w", err)
	}
	ln = silentListener{Listener: ln, e: e, ctx: ctx}
	srv := &http.Server{
		Handler: a.handler(),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cert},
		},
		// HTTP/1.1 only: the reboot emulation hijacks connections.
		TLSNextProto:      map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(e.logger().Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ConnState:         e.trackAPIConn,
	}
	if ready != nil {
		ready(ln.Addr())
	}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	defer a.stopTimer()
	err = srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (a *opnAPI) stopTimer() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

// writeJSON answers with a JSON body.
func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"errorMessage":"Unexpected error, check log for details"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	w.Write(b)
}

var (
	okStatus     = map[string]string{"status": "ok"}
	failedStatus = map[string]string{"status": "failed"}
)

// handler is the router: authentication first (401), unknown endpoints 404,
// as OPNsense's api.php answers.
func (a *opnAPI) handler() http.Handler {
	mux := http.NewServeMux()
	a.routes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]string{"errorMessage": "Endpoint not found"})
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		if pattern != "/" {
			a.e.sawRoute(strings.TrimSuffix(pattern, "/"))
		}
		a.e.amu.Lock()
		a.e.apiLog = append(a.e.apiLog, cmp.Or(strings.TrimSuffix(pattern, "/"), r.Method+" "+r.URL.Path))
		a.e.amu.Unlock()
		if a.e.rebooting() {
			// Down: drop the connection without an answer.
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
					return
				}
			}
			http.Error(w, "", http.StatusServiceUnavailable)
			return
		}
		key, secret, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(key), []byte(a.creds.Key)) != 1 ||
			subtle.ConstantTimeCompare([]byte(secret), []byte(a.creds.Secret)) != 1 {
			a.log.Info("api: authentication failed", "remote", r.RemoteAddr, "path", r.URL.Path)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"status": 401, "message": "Authentication Failed"})
			return
		}
		a.log.Info("api", "method", r.Method, "path", r.URL.Path)
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		f, faulty := a.e.requestFault(r.Method, r.URL.Path)
		switch {
		case !faulty:
			mux.ServeHTTP(w, r)
		case f.Drop:
			mux.ServeHTTP(discardResponse{http.Header{}}, r)
			if hj, ok := w.(http.Hijacker); ok {
				if c, _, err := hj.Hijack(); err == nil {
					c.Close()
				}
			}
		default:
			for k, v := range f.Header {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(cmp.Or(f.Status, http.StatusOK))
			io.WriteString(w, f.Body)
		}
	})
}

// decodeBody reads a JSON request body into v; an empty body is {}. A
// malformed one is answered with 400 and false.
// discardResponse is an answer nobody receives (a RequestFault's Drop).
type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (d discardResponse) WriteHeader(int)             {}

func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"status": 400, "message": "Invalid JSON syntax"})
		return false
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return true
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"status": 400, "message": "Invalid JSON syntax"})
		return false
	}
	return true
}

func (a *opnAPI) routes(mux *http.ServeMux) {
	e := a.e
	// action wraps a POST action that runs on the emulator: {"status":"ok"}
	// on success; a failure is an HTTP 200 {"status":"failed"} with the
	// message, as OPNsense's service controllers answer.
	action := func(run func(ctx context.Context) error) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			if !decodeBody(w, r, &body) {
				return
			}
			if err := run(r.Context()); err != nil {
				a.log.Error("api action", "path", r.URL.Path, "err", err)
				writeJSON(w, http.StatusOK, map[string]string{"status": "failed", "message": err.Error()})
				return
			}
			writeJSON(w, http.StatusOK, okStatus)
		}
	}

	// Firmware.
	mux.HandleFunc("GET /api/core/firmware/info", func(w http.ResponseWriter, r *http.Request) {
		v := e.Version()
		writeJSON(w, http.StatusOK, map[string]any{
			"product_id": "opnsense", "product_version": v, "product_abi": opnSeries(v),
			"product": map[string]string{"product_name": "OPNsense", "product_version": v, "product_abi": opnSeries(v)},
			"package": []any{}, "plugin": []any{}, "changelog": []any{},
		})
	})
	mux.HandleFunc("GET /api/core/firmware/status", a.firmwareStatus)
	mux.HandleFunc("POST /api/core/firmware/status", a.firmwareStatus)
	mux.HandleFunc("POST /api/core/firmware/check", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "msg_uuid": newRevision()})
	})
	mux.HandleFunc("POST /api/core/firmware/update", func(w http.ResponseWriter, r *http.Request) { a.startUpgrade(w, false) })
	mux.HandleFunc("POST /api/core/firmware/upgrade", func(w http.ResponseWriter, r *http.Request) { a.startUpgrade(w, true) })
	mux.HandleFunc("GET /api/core/firmware/upgradestatus", func(w http.ResponseWriter, r *http.Request) {
		// The status is read from the progress file's text, as upstream
		// does: missing or empty is "error" (also right after a POST, before
		// the daemonised script has started), and a ***DONE*** of an
		// earlier action stays until the next run truncates the file.
		// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/Core/Api/FirmwareController.php:766 — `if ($cmd_result == null) {` → error; ***DONE*** → done, ***REBOOT*** → reboot, else running
		a.mu.Lock()
		log := a.upgrade.log
		a.mu.Unlock()
		st := "running"
		switch {
		case strings.TrimSpace(log) == "":
			st = "error"
		case strings.Contains(log, "***DONE***"):
			st = "done"
		case strings.Contains(log, "***REBOOT***"):
			st = "reboot"
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": st, "log": log})
	})
	mux.HandleFunc("POST /api/core/firmware/reboot", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, okStatus)
		e.logger().Info("api: reboot requested")
		e.rebootSoon()
	})

	// Configuration download (the backup controller).
	mux.HandleFunc("GET /api/core/backup/download/{host}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("host") != "this" {
			writeJSON(w, http.StatusNotFound, map[string]string{"errorMessage": "Endpoint not found"})
			return
		}
		// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/Core/Api/BackupController.php:184 — `array_reverse(glob(` of /conf/backup/config-*.xml: the newest backup, never /conf/config.xml; no backup, no body
		names, _ := filepath.Glob(e.path("/conf/backup") + "/config-*.xml")
		sort.Strings(names)
		if len(names) == 0 {
			return
		}
		data, err := os.ReadFile(names[len(names)-1])
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"errorMessage": "Unexpected error, check log for details"})
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="config-`+strings.ReplaceAll(e.hostname(), `"`, "")+`.xml"`)
		w.Write(data)
	})

	// Filter. The savepoint API exists up to 26.1 and the interfaces
	// settings API from 26.1: a firmware change moves the routes.
	mux.HandleFunc("POST /api/firewall/filter/apply", action(e.reloadFilter))
	mux.HandleFunc("POST /api/firewall/filter/savepoint", a.before(26, 7, a.savepoint))
	mux.HandleFunc("POST /api/firewall/filter/apply/{rev}", a.before(26, 7, a.applyRevision))
	mux.HandleFunc("POST /api/firewall/filter/cancel_rollback/{rev}", a.before(26, 7, a.cancelRollback))
	mux.HandleFunc("POST /api/firewall/filter/revert/{rev}", a.before(26, 7, func(w http.ResponseWriter, r *http.Request) {
		if err := a.rollback(r.Context(), r.PathValue("rev"), false); err != nil {
			writeJSON(w, http.StatusOK, map[string]string{"status": "failed", "message": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, okStatus)
	}))

	// Interfaces settings (26.1 on).
	mux.HandleFunc("GET /api/interfaces/settings/get", a.since(26, 1, a.getModel("settings", "OPNsense/Interfaces/settings", interfaceSettingsFields)))
	mux.HandleFunc("POST /api/interfaces/settings/set", a.since(26, 1, a.setModel("settings", "OPNsense/Interfaces/settings", func() []modelField { return interfaceSettingsFields })))
	mux.HandleFunc("POST /api/interfaces/settings/reconfigure", a.since(26, 1, action(func(ctx context.Context) error {
		return e.reconfigureInterfaces(ctx, "")
	})))

	// Intrusion detection.
	mux.HandleFunc("GET /api/ids/settings/get", a.idsSettings)
	mux.HandleFunc("POST /api/ids/settings/set", a.setModel("ids", "OPNsense/IDS/general", a.idsFields))
	for _, act := range []string{"start", "stop", "restart", "reconfigure"} {
		mux.HandleFunc("POST /api/ids/service/"+act, action(func(ctx context.Context) error {
			if act == "reconfigure" {
				if err := e.idsUpdateCron(); err != nil {
					return err
				}
				return e.reconfigureIDS(ctx)
			}
			return e.suricata(ctx, act)
		}))
	}
	mux.HandleFunc("GET /api/ids/service/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": a.idsStatus()})
	})

	// IPsec.
	for _, act := range []string{"restart", "start"} {
		mux.HandleFunc("POST /api/ipsec/service/"+act, action(e.restartIPsec))
	}
	mux.HandleFunc("POST /api/ipsec/service/reconfigure", action(e.reconfigureIPsec))
	mux.HandleFunc("POST /api/ipsec/sessions/connect/{id}", a.connectSession)
	mux.HandleFunc("POST /api/ipsec/sessions/disconnect/{id}", a.disconnectSession)
	// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/ConnectionsController.php:283 — isEnabledAction: `'enabled' => isset(...->ipsec->enable)`
	// ipsecOn reads the service switch from config.xml; false (and an answer
	// sent) when the config cannot be read.
	ipsecOn := func(w http.ResponseWriter) (on, ok bool) {
		root, err := e.configForApply()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"message": err.Error()})
			return false, false
		}
		on, _ = root.IPsecSwitch()
		return on, true
	}
	mux.HandleFunc("GET /api/ipsec/connections/is_enabled", func(w http.ResponseWriter, r *http.Request) {
		if on, ok := ipsecOn(w); ok {
			writeJSON(w, http.StatusOK, map[string]bool{"enabled": on})
		}
	})
	// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/opnsense/mvc/app/controllers/OPNsense/Base/ApiMutableServiceControllerBase.php:234 — statusAction: running, else stopped while enabled, disabled while not
	mux.HandleFunc("GET /api/ipsec/service/status", func(w http.ResponseWriter, r *http.Request) {
		on, ok := ipsecOn(w)
		if !ok {
			return
		}
		st := "disabled"
		switch {
		case e.ipsecUp.Load():
			st = "running"
		case on:
			st = "stopped"
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": st})
	})
	mux.HandleFunc("GET /api/ipsec/sessions/search_phase1", a.searchPhase1)
	mux.HandleFunc("POST /api/ipsec/sessions/search_phase2", a.searchPhase2)

	// Service control (Core/Api/ServiceController.php).
	mux.HandleFunc("GET /api/core/service/search", func(w http.ResponseWriter, r *http.Request) {
		rows := []map[string]any{
			{"id": "configd", "name": "configd", "description": "System Configuration Daemon", "running": 1, "locked": 1},
			{"id": "suricata", "name": "suricata", "description": "Intrusion Detection", "running": boolInt(a.idsStatus() == "running"), "locked": 0},
			{"id": "strongswan", "name": "strongswan", "description": "IPsec VPN", "running": boolInt(a.ipsecRunning(r.Context())), "locked": 0},
		}
		writeJSON(w, http.StatusOK, map[string]any{"total": len(rows), "rowCount": len(rows), "current": 1, "rows": rows})
	})
	mux.HandleFunc("POST /api/core/service/{action}/{name}", func(w http.ResponseWriter, r *http.Request) {
		act, name := r.PathValue("action"), r.PathValue("name")
		if act != "start" && act != "stop" && act != "restart" {
			writeJSON(w, http.StatusNotFound, map[string]string{"errorMessage": "Endpoint not found"})
			return
		}
		var err error
		switch name {
		case "suricata", "ids":
			err = e.suricata(r.Context(), act)
		case "strongswan", "ipsec":
			if act == "stop" {
				e.stopIPsec(r.Context())
			} else {
				err = e.restartIPsec(r.Context())
			}
		case "configd":
		default:
			writeJSON(w, http.StatusOK, map[string]string{"result": "failed", "message": "service " + name + " not found"})
			return
		}
		if err != nil {
			writeJSON(w, http.StatusOK, map[string]string{"result": "failed", "message": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// since serves h from release maj.mnr on; before, the endpoint is unknown.
func (a *opnAPI) since(maj, mnr int, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.atLeast(maj, mnr) {
			writeJSON(w, http.StatusNotFound, map[string]string{"errorMessage": "Endpoint not found"})
			return
		}
		h(w, r)
	}
}

// before serves h up to (not including) release maj.mnr.
func (a *opnAPI) before(maj, mnr int, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.atLeast(maj, mnr) {
			writeJSON(w, http.StatusNotFound, map[string]string{"errorMessage": "Endpoint not found"})
			return
		}
		h(w, r)
	}
}

// atLeast compares the running firmware with a release, read at each call:
// a firmware upgrade changes which endpoints exist.
func (a *opnAPI) atLeast(maj, mnr int) bool { return a.e.atLeast(maj, mnr) }

// atLeast reports whether the emulated release is maj.mnr or later.
func (e *Emulator) atLeast(maj, mnr int) bool {
	var m, n int
	fmt.Sscanf(e.Version(), "%d.%d", &m, &n)
	return m > maj || (m == maj && n >= mnr)
}

func (a *opnAPI) idsStatus() string {
	if a.e.idsRunning() {
		return "running"
	}
	return "stopped"
}

// firmwareStatus answers /api/core/firmware/status from the profiles: an
// update is the newest profile of the running series, an upgrade the
// newest of the next one.
func (a *opnAPI) firmwareStatus(w http.ResponseWriter, r *http.Request) {
	cur := a.e.Version()
	upd, upg := a.e.nextOPNProfiles()
	body := map[string]any{
		"product_version":      cur,
		"product":              map[string]string{"product_name": "OPNsense", "product_version": cur, "product_series": opnSeries(cur)},
		"upgrade_needs_reboot": "1",
		"product_target":       "opnsense",
		"status":               "none",
		"status_msg":           "There are no updates available on the selected mirror.",
		"updates":              "0",
	}
	if upd != "" {
		body["status"], body["updates"] = "update", "1"
		body["status_msg"] = fmt.Sprintf("There are updates available: %s", upd)
		body["all_packages"] = map[string]any{"opnsense": map[string]string{"name": "opnsense", "current_version": cur, "new_version": upd}}
		// upstream: opnsense-core 26.1 src/opnsense/mvc/app/views/OPNsense/Core/firmware.volt:87 — the `product_target` row of the packages names the version an update installs
		body["upgrade_packages"] = []map[string]string{{"name": "opnsense", "repository": "OPNsense", "current_version": cur, "new_version": upd}}
	}
	if upg != "" {
		body["upgrade_major_version"] = opnSeries(upg)
		body["upgrade_major_message"] = "OPNsense " + opnSeries(upg) + " is available: use the upgrade action."
		if upd == "" {
			body["status"] = "upgrade"
			body["status_msg"] = fmt.Sprintf("The release %s is available.", upg)
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// nextOPNProfiles returns the version an update would install (the newest
// profile of the running series, when newer) and the one an upgrade would
// (the newest profile of the next series).
func (e *Emulator) nextOPNProfiles() (update, upgrade string) {
	_, i := e.profile()
	if i < 0 {
		return "", ""
	}
	series := opnSeries(e.Profiles[i].Version)
	var next string
	for _, p := range e.Profiles[i+1:] {
		s := opnSeries(p.Version)
		switch {
		case s == series:
			update = p.Version
		case next == "" || s == next:
			next, upgrade = s, p.Version
		}
	}
	return update, upgrade
}

// startUpgrade begins a firmware update (same series) or upgrade (next
// series). The job logs for a moment, switches the profile and reboots;
// upgradestatus reports running, then reboot, then done.
func (a *opnAPI) startUpgrade(w http.ResponseWriter, major bool) {
	cur := a.e.Version()
	upd, upg := a.e.nextOPNProfiles()
	target, word := upd, "update"
	if major {
		target, word = upg, "upgrade"
	}
	a.mu.Lock()
	if a.upgrade.status == "running" || a.upgrade.status == "reboot" {
		a.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"status": "failed", "message": "a firmware action is already running"})
		return
	}
	a.upgrade.status = "running"
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "msg_uuid": newRevision()})
	// The action is daemonised: the script starts a moment after the
	// answer, truncates the progress file and writes its header; until
	// then the file holds the previous run (or nothing).
	// upstream: opnsense-core 26.1 src/opnsense/scripts/firmware/config.sh:65 — output_request truncates: `: > ${LOCKFILE}`, then writes the GOT REQUEST TO header (:70) and Currently running (24.7: 61)
	go func() {
		time.Sleep(300 * time.Millisecond)
		a.mu.Lock()
		a.upgrade.log = "***GOT REQUEST TO " + strings.ToUpper(word) + "***\nCurrently running OPNsense " + cur + " (amd64) at " + time.Now().Format(time.UnixDate) + "\n"
		a.mu.Unlock()
		a.runUpgrade(cur, target)
	}()
}

func (a *opnAPI) runUpgrade(cur, target string) {
	logf := func(format string, args ...any) {
		a.mu.Lock()
		a.upgrade.log += fmt.Sprintf(format, args...) + "\n"
		a.mu.Unlock()
	}
	logf("Fetching changelog information, please wait... done")
	time.Sleep(500 * time.Millisecond)
	if target == "" {
		logf("Your packages are up to date.")
		logf("***DONE***")
		a.mu.Lock()
		a.upgrade.status = "done"
		a.mu.Unlock()
		return
	}
	var p Profile
	for _, q := range a.e.Profiles {
		if q.Version == target {
			p = q
		}
	}
	logf("Updating OPNsense repository catalogue...")
	logf("[1/2] Fetching opnsense-%s.pkg: .......... done", target)
	time.Sleep(500 * time.Millisecond)
	logf("[2/2] Upgrading opnsense from %s to %s...", cur, target)
	if err := a.e.writeVersion(p); err != nil {
		logf("Error: %v", err)
		logf("***DONE***")
		a.mu.Lock()
		a.upgrade.status = "error"
		a.mu.Unlock()
		return
	}
	a.e.logger().Info("upgrade", "from", cur, "to", target)
	logf("The system is rebooting now.")
	logf("***REBOOT***")
	a.mu.Lock()
	a.upgrade.status = "reboot"
	a.mu.Unlock()
	// Let one upgradestatus poll see "reboot" before going down.
	time.Sleep(a.e.RebootDelay/2 + 500*time.Millisecond)
	a.e.rebootSoon()
	go func() {
		// Done once the firewall is back.
		time.Sleep(time.Second)
		for a.e.rebooting() {
			time.Sleep(100 * time.Millisecond)
		}
		// /tmp does not survive the reboot: the progress file is gone.
		a.mu.Lock()
		a.upgrade.status = "done"
		a.upgrade.log = ""
		a.mu.Unlock()
	}()
}

// newRevision is a savepoint revision as OPNsense makes them: the time
// with a fraction.
func newRevision() string {
	now := time.Now()
	return fmt.Sprintf("%d.%04d", now.Unix(), now.Nanosecond()/100000)
}

// savepoint records the config for a later rollback of the MVC filter
// rules (≤26.1).
func (a *opnAPI) savepoint(w http.ResponseWriter, r *http.Request) {
	data, err := os.ReadFile(a.e.path("/conf/config.xml"))
	if err != nil {
		writeJSON(w, http.StatusOK, failedStatus)
		return
	}
	rev := newRevision()
	a.mu.Lock()
	a.savepoints[rev] = data
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "retention": "60", "revision": rev})
}

// applyRevision loads the filter and starts the 60-second rollback timer.
func (a *opnAPI) applyRevision(w http.ResponseWriter, r *http.Request) {
	rev := r.PathValue("rev")
	a.mu.Lock()
	_, ok := a.savepoints[rev]
	a.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusOK, failedStatus)
		return
	}
	if err := a.e.reloadFilter(r.Context()); err != nil {
		writeJSON(w, http.StatusOK, map[string]string{"status": "failed", "message": err.Error()})
		return
	}
	a.mu.Lock()
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timerRev = rev
	a.timer = time.AfterFunc(a.rollbackAfter, func() {
		if err := a.rollback(context.Background(), rev, true); err != nil {
			a.log.Error("filter rollback", "revision", rev, "err", err)
		}
	})
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"status": "OK\n\n"})
}

func (a *opnAPI) cancelRollback(w http.ResponseWriter, r *http.Request) {
	rev := r.PathValue("rev")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.timer != nil && a.timerRev == rev {
		a.timer.Stop()
		a.timer = nil
	}
	delete(a.savepoints, rev)
	writeJSON(w, http.StatusOK, okStatus)
}

// rollback puts the MVC filter model (<OPNsense><Firewall><Filter>) of the
// savepoint back into config.xml, and only it, then reloads the filter.
// fromTimer: only when the armed timer is still this revision's.
func (a *opnAPI) rollback(ctx context.Context, rev string, fromTimer bool) error {
	a.mu.Lock()
	saved, ok := a.savepoints[rev]
	if !ok || (fromTimer && a.timerRev != rev) {
		a.mu.Unlock()
		return fmt.Errorf("no savepoint %s", rev)
	}
	if fromTimer {
		a.timer = nil
	}
	delete(a.savepoints, rev)
	a.mu.Unlock()
	err := a.e.editConfig("(root) filter rollback to "+rev, func(doc *etree.Document) error {
		old := etree.NewDocument()
		if err := old.ReadFromBytes(saved); err != nil {
			return err
		}
		if cur := doc.FindElement("opnsense/OPNsense/Firewall/Filter"); cur != nil {
			cur.Parent().RemoveChild(cur)
		}
		if prev := old.FindElement("opnsense/OPNsense/Firewall/Filter"); prev != nil {
			parent := doc.FindElement("opnsense/OPNsense/Firewall")
			if parent == nil {
				parent = ensurePath(doc.Root(), "OPNsense/Firewall")
			}
			parent.AddChild(prev.Copy())
		}
		return nil
	})
	if err != nil {
		return err
	}
	return a.e.reloadFilter(ctx)
}

// ensurePath returns the element at path under e, creating what is missing.
func ensurePath(e *etree.Element, path string) *etree.Element {
	for _, name := range strings.Split(path, "/") {
		c := e.SelectElement(name)
		if c == nil {
			c = e.CreateElement(name)
		}
		e = c
	}
	return e
}

// modelField is one field of an MVC model the API reads and writes:
// its name and a check of a new value (nil: any text).
type modelField struct {
	name  string
	valid func(v string) string // returns the validation message, "" when valid
}

func oneOf(vals ...string) func(string) string {
	return func(v string) string {
		if slices.Contains(vals, v) {
			return ""
		}
		return "Option not in list."
	}
}

var boolField = oneOf("0", "1")

var interfaceSettingsFields = []modelField{
	{"disablechecksumoffloading", boolField},
	{"disablesegmentationoffloading", boolField},
	{"disablelargereceiveoffloading", boolField},
	{"disablevlanhwfilter", oneOf("0", "1", "2")},
}

// idsFields are the IDS general settings the lab keeps: the IPS switch is
// "mode" from 26.1 and "ips" 0/1 before (B-e).
func (a *opnAPI) idsFields() []modelField {
	f := []modelField{
		{"enabled", boolField},
		{"promisc", boolField},
		{"interfaces", a.validInterfaces},
		{"homenet", nil},
	}
	if a.atLeast(26, 1) {
		return append(f, modelField{"mode", oneOf("pcap", "netmap", "divert")})
	}
	return append(f, modelField{"ips", boolField})
}

// validInterfaces checks a comma list of interface keys against config.xml.
func (a *opnAPI) validInterfaces(v string) string {
	keys := a.interfaceKeys()
	for _, k := range strings.Split(v, ",") {
		if k = strings.TrimSpace(k); k != "" && !slices.Contains(keys, k) {
			return fmt.Sprintf("Interface %s does not exist.", k)
		}
	}
	return ""
}

func (a *opnAPI) interfaceKeys() []string {
	data, err := os.ReadFile(a.e.path("/conf/config.xml"))
	if err != nil {
		return nil
	}
	c, err := parseConfig(data, configxml.OPNsense)
	if err != nil {
		return nil
	}
	var keys []string
	for _, i := range c.Interfaces() {
		keys = append(keys, i.Key)
	}
	return keys
}

// getModel answers a settings get: {"<root>":{field: value}}.
func (a *opnAPI) getModel(rootKey, path string, fields []modelField) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out := map[string]string{}
		el := a.configElement(path)
		for _, f := range fields {
			out[f.name] = text(el, f.name)
		}
		writeJSON(w, http.StatusOK, map[string]any{rootKey: out})
	}
}

func (a *opnAPI) configElement(path string) *etree.Element {
	doc := etree.NewDocument()
	if err := doc.ReadFromFile(a.e.path("/conf/config.xml")); err != nil || doc.Root() == nil {
		return nil
	}
	return doc.Root().FindElement(path)
}

// idsSettings answers /api/ids/settings/get as OPNsense's model getter
// prints it: option fields as {key: {value, selected}}.
func (a *opnAPI) idsSettings(w http.ResponseWriter, r *http.Request) {
	g := a.configElement("OPNsense/IDS/general")
	general := map[string]any{
		"enabled": text(g, "enabled"), "promisc": text(g, "promisc"), "homenet": text(g, "homenet"),
	}
	if general["enabled"] == "" {
		general["enabled"] = "0"
	}
	selected := strings.Split(text(g, "interfaces"), ",")
	ifs := map[string]any{}
	for _, k := range a.interfaceKeys() {
		ifs[k] = map[string]any{"value": strings.ToUpper(k), "selected": boolInt(slices.Contains(selected, k))}
	}
	general["interfaces"] = ifs
	if a.atLeast(26, 1) {
		mode := text(g, "mode")
		if mode == "" {
			mode = "pcap"
		}
		modes := map[string]any{}
		for k, label := range map[string]string{"pcap": "PCAP", "netmap": "Netmap", "divert": "Divert"} {
			modes[k] = map[string]any{"value": label, "selected": boolInt(mode == k)}
		}
		general["mode"] = modes
	} else {
		general["ips"] = text(g, "ips")
	}
	writeJSON(w, http.StatusOK, map[string]any{"ids": map[string]any{"general": general}})
}

// setModel takes {"<root>":{...}} (for IDS {"ids":{"general":{...}}}),
// validates every given field, and saves them all or none. A validation
// failure is an HTTP 200 {"result":"failed","validations":{...}}, as
// ApiMutableModelControllerBase answers.
func (a *opnAPI) setModel(rootKey, path string, fieldsNow func() []modelField) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		fields := fieldsNow()
		var body map[string]json.RawMessage
		if !decodeBody(w, r, &body) {
			return
		}
		prefix := rootKey
		raw := body[rootKey]
		if rootKey == "ids" {
			var inner map[string]json.RawMessage
			if json.Unmarshal(raw, &inner) == nil {
				raw, prefix = inner["general"], "ids.general"
			}
		}
		var values map[string]any
		if len(raw) == 0 || json.Unmarshal(raw, &values) != nil {
			writeJSON(w, http.StatusOK, map[string]string{"result": "failed", "message": "no " + prefix + " settings in the request"})
			return
		}
		set := map[string]string{}
		validations := map[string]string{}
		for name, v := range values {
			i := slices.IndexFunc(fields, func(f modelField) bool { return f.name == name })
			if i < 0 {
				validations[prefix+"."+name] = "Unknown field."
				continue
			}
			s, ok := modelValue(v)
			if !ok {
				validations[prefix+"."+name] = "Value must be a string."
				continue
			}
			if f := fields[i]; f.valid != nil {
				if msg := f.valid(s); msg != "" {
					validations[prefix+"."+name] = msg
					continue
				}
			}
			set[name] = s
		}
		if len(validations) > 0 {
			writeJSON(w, http.StatusOK, map[string]any{"result": "failed", "validations": validations})
			return
		}
		err := a.e.editConfig("(api) "+r.URL.Path, func(doc *etree.Document) error {
			el := ensurePath(doc.Root(), path)
			for _, name := range slices.Sorted(mapKeys(set)) {
				ensurePath(el, name).SetText(set[name])
			}
			return nil
		})
		if err != nil {
			a.log.Error("api: save settings", "path", r.URL.Path, "err", err)
			writeJSON(w, http.StatusInternalServerError, map[string]string{"errorMessage": "Unexpected error, check log for details"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "saved"})
	}
}

func mapKeys(m map[string]string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// modelValue reads a setter's value: a string, a number, or a list (a
// multi-select, joined with commas).
func modelValue(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	case bool:
		return map[bool]string{true: "1", false: "0"}[x], true
	case []any:
		var parts []string
		for _, p := range x {
			s, ok := p.(string)
			if !ok {
				return "", false
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, ","), true
	}
	return "", false
}

// sas lists the DUT's IPsec SAs as fwapi reads them from swanctl.
func (a *opnAPI) sas(ctx context.Context) []fwapi.IPsecSA {
	a.e.mu.Lock()
	p := a.e.IPsec
	a.e.mu.Unlock()
	if p == nil {
		return nil
	}
	out, code, err := p.ListSAs(ctx)
	if err != nil || code != 0 {
		return nil
	}
	sas, _ := fwapi.ParseSwanctlSAs(string(out))
	return sas
}

func (a *opnAPI) ipsecRunning(ctx context.Context) bool { return len(a.sas(ctx)) > 0 }

func (a *opnAPI) searchPhase1(w http.ResponseWriter, r *http.Request) {
	rows := []map[string]any{}
	seen := map[string]bool{}
	for _, sa := range a.sas(r.Context()) {
		name := sa.IKE
		if seen[name] {
			continue
		}
		seen[name] = true
		rows = append(rows, map[string]any{"name": name, "ikeid": name, "connected": true, "local-addrs": "198.19.0.1", "remote-addrs": PeerAddr})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": len(rows), "rowCount": len(rows), "current": 1, "rows": rows})
}

func (a *opnAPI) searchPhase2(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID string `json:"id"`
	}
	if !decodeBody(w, r, &req) {
		return
	}
	rows := []map[string]any{}
	for _, sa := range a.sas(r.Context()) {
		if sa.IKE != req.ID {
			continue
		}
		encr, keysize := sa.Encr, ""
		if i := strings.LastIndexByte(encr, '-'); i > 0 {
			encr, keysize = encr[:i], encr[i+1:]
		}
		rows = append(rows, map[string]any{
			"name": sa.Name, "state": sa.State, "protocol": "ESP", "encr-alg": encr, "encr-keysize": keysize,
			"integ-alg": sa.Integ, "bytes-in": strconv.FormatUint(sa.BytesIn, 10), "bytes-out": strconv.FormatUint(sa.BytesOut, 10),
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"total": len(rows), "rowCount": len(rows), "current": 1, "rows": rows})
}

// disconnectSession is ipsec/sessions/disconnect/{id}: the IKE SA of
// connection id terminated, when one is up. The call answers ok whatever
// the script did.
//
// upstream: opnsense/core@b3b771d191c7e7d3ac8cd33ea6946a90b678a50f src/opnsense/scripts/ipsec/disconnect.py:43 — `if sa == conn_id:` over vici list_sas
// upstream: opnsense/core@b3b771d191c7e7d3ac8cd33ea6946a90b678a50f src/opnsense/scripts/ipsec/disconnect.py:48 — `swanctl --terminate --ike conn_id`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/SessionsController.php:183 — `configdpRun('ipsec disconnect', [$id])`, then `["result" => "ok"]`
func (a *opnAPI) disconnectSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if p := a.plane(); p != nil {
		for _, sa := range a.sas(r.Context()) {
			if sa.IKE == id {
				out, code, err := p.Swanctl(r.Context(), "--terminate", "--ike", id)
				a.log.Info("ipsec disconnect", "id", id, "exit", code, "err", err, "out", LastLines(string(out), 2))
				break
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

// connectSession is ipsec/sessions/connect/{id}: each child of the loaded
// connection id initiated, one after the other. The call answers ok
// whatever the script did.
//
// upstream: opnsense/core@b3b771d191c7e7d3ac8cd33ea6946a90b678a50f src/opnsense/scripts/ipsec/connect.py:44 — `if conn == conn_id:` over vici list_conns
// upstream: opnsense/core@b3b771d191c7e7d3ac8cd33ea6946a90b678a50f src/opnsense/scripts/ipsec/connect.py:50 — `swanctl --initiate --child child_id` for each of its children
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/SessionsController.php:169 — `configdpRun('ipsec connect', [$id])`, then `["result" => "ok"]`
func (a *opnAPI) connectSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if p := a.plane(); p != nil {
		if out, code, err := p.Swanctl(r.Context(), "--list-conns"); err == nil && code == 0 {
			for _, child := range loadedChildren(string(out))[id] {
				out, code, err := p.Swanctl(r.Context(), "--initiate", "--child", child)
				a.log.Info("ipsec connect", "id", id, "child", child, "exit", code, "err", err, "out", LastLines(string(out), 2))
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

func (a *opnAPI) plane() IPsecPlane {
	a.e.mu.Lock()
	defer a.e.mu.Unlock()
	return a.e.IPsec
}

// loadedChildren reads `swanctl --list-conns`: connection name → its
// children's names. A connection starts a line; its children are the
// two-space-indented lines naming a mode (TUNNEL, TRANSPORT, ...).
func loadedChildren(listing string) map[string][]string {
	out := map[string][]string{}
	var conn string
	for _, line := range strings.Split(listing, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ": ")
		switch {
		case !ok:
		case !strings.HasPrefix(line, " "):
			conn = name
		case strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && conn != "" &&
			slices.ContainsFunc([]string{"TUNNEL", "TRANSPORT", "PASS", "DROP"}, func(m string) bool { return strings.HasPrefix(rest, m) }):
			out[conn] = append(out[conn], name)
		}
	}
	return out
}

// IDSCronJob is the cron job OPNsense's ids/service/reconfigure creates when
// <OPNsense><IDS><general><UpdateCron> is empty, and the fields it sets
// (the rest are Cron.xml's defaults).
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:62 — `if ($mdlIDS->general->UpdateCron->isEmpty()) {` (24.7: 63, compares with the empty string)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:65 — `newDailyJob("IDS", "ids update", "ids rule updates", "*", "0")`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:72 — `Config::getInstance()->save();` (24.7: 73)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:177 — `<UpdateCron type="ModelRelationField">` (24.7: 164; 25.7: 165)
// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/opnsense/mvc/app/models/OPNsense/Cron/Cron.xml:19 — defaults minutes 0, hours 0 (:25), days/months/weekdays *, who root (:49); Cron.php:50 newDailyJob
var IDSCronJob = [][2]string{
	{"origin", "IDS"}, {"enabled", "0"}, {"minutes", "0"}, {"hours", "0"}, {"days", "*"}, {"months", "*"},
	{"weekdays", "*"}, {"who", "root"}, {"command", "ids update"}, {"parameters", ""}, {"description", "ids rule updates"},
}

// idsUpdateCron creates the IDS update cron job and saves config.xml when
// UpdateCron is empty, as the first ids/service/reconfigure does.
func (e *Emulator) idsUpdateCron() error {
	data, err := os.ReadFile(e.path("/conf/config.xml"))
	if err != nil {
		return err
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(data); err != nil {
		return fmt.Errorf("config.xml: %w", err)
	}
	if el := doc.FindElement("/opnsense/OPNsense/IDS/general/UpdateCron"); el != nil && strings.TrimSpace(el.Text()) != "" {
		return nil
	}
	uuid := newUUID()
	return e.editConfig("root@ids-reconfigure", func(doc *etree.Document) error {
		job := ensurePath(doc.Root(), "OPNsense/cron/jobs").CreateElement("job")
		job.CreateAttr("uuid", uuid)
		for _, kv := range IDSCronJob {
			job.CreateElement(kv[0]).SetText(kv[1])
		}
		ensurePath(doc.Root(), "OPNsense/IDS/general/UpdateCron").SetText(uuid)
		return nil
	})
}

func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
