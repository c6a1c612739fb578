package fwapitest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures/api"
	"github.com/fwab/fwab/fwapi"
)

// OPNsenseOptions set up an OPNsense fake. The zero value is a 26.1.2
// firewall with IDS off and the default config.
type OPNsenseOptions struct {
	Version string // product_version; default "26.1.2"
	Key     string // API key; default "fake-opn-key"
	Secret  string // API secret; default "fake-opn-secret"
	Config  []byte // initial /conf/config.xml; default DefaultOPNsenseConfig
	// RollbackAfter is the savepoint timer; default 60 s as on a real box.
	RollbackAfter time.Duration
	// RebootDowntime is how long the fake is unreachable after a reboot;
	// default 300 ms.
	RebootDowntime time.Duration
	// UpgradeTo is the version after a firmware update or upgrade; default
	// the same version (nothing newer).
	UpgradeTo string
	// UpgradePolls is how many upgradestatus polls report "running" before
	// the reboot; default 2.
	UpgradePolls int
	// UpgradeFails makes upgradestatus end with "error".
	UpgradeFails bool
	// NoBackupAPI answers the backup download with 404, as a release
	// without it would.
	NoBackupAPI bool
}

// IDSState is the fake's Suricata settings and service.
type IDSState struct {
	Enabled    bool
	Mode       string   // pcap, netmap, divert (26.1+); ≤25.7: "pcap" or "netmap" for ips 0/1
	Interfaces []string // interface keys, e.g. lan
	Running    bool
}

// FakeSA is one child SA the fake reports under a connected phase 1.
type FakeSA struct {
	Phase1, Name, State, EncrAlg, KeySize, IntegAlg string
	BytesIn, BytesOut                               uint64
}

// OPNsense is an httptest TLS fake of the OPNsense REST API plus the shell
// side (Shell) the driver uses over SSH. Both share one /conf folder.
type OPNsense struct {
	*restFake
	opts OPNsenseOptions
	root string // the firewall's "/" for the shell fake and the backup API

	mu            sync.Mutex
	version       string
	filterModel   string // the MVC filter rules as saved
	filterLoaded  string // the rules loaded into pf by the last apply
	filterApplies int
	savepoints    map[string]savepoint // by revision
	timer         *time.Timer
	timerRev      string
	rolledBack    bool
	ids           IDSState
	ipsecRunning  bool
	sas           []FakeSA
	upgrade       struct {
		running bool
		polls   int
		log     string
		status  string
	}
	reboots int
	shell   *Shell
	actions []configxml.Action
}

// DefaultOPNsenseConfig is a small OPNsense config.xml with a LAN and a WAN.
var DefaultOPNsenseConfig = []byte(`<?xml version="1.0"?>
<opnsense>
  <version>26.1</version>
  <system>
    <hostname>fw1</hostname>
    <domain>lab.example</domain>
  </system>
  <interfaces>
    <wan>
      <if>vtnet0</if>
      <enable>1</enable>
      <ipaddr>198.19.0.1</ipaddr>
      <subnet>24</subnet>
    </wan>
    <lan>
      <if>vtnet1</if>
      <enable>1</enable>
      <ipaddr>198.18.1.1</ipaddr>
      <subnet>24</subnet>
    </lan>
  </interfaces>
</opnsense>
`)

// NewOPNsense starts the fake; it is closed, and unexpected or missing calls
// reported, when the test ends.
func NewOPNsense(t testing.TB, opts OPNsenseOptions) *OPNsense {
	t.Helper()
	if opts.Version == "" {
		opts.Version = "26.1.2"
	}
	if opts.Key == "" {
		opts.Key = "fake-opn-key"
	}
	if opts.Secret == "" {
		opts.Secret = "fake-opn-secret"
	}
	if opts.Config == nil {
		opts.Config = DefaultOPNsenseConfig
	}
	if opts.RollbackAfter == 0 {
		opts.RollbackAfter = 60 * time.Second
	}
	if opts.RebootDowntime == 0 {
		opts.RebootDowntime = 300 * time.Millisecond
	}
	if opts.UpgradeTo == "" {
		opts.UpgradeTo = opts.Version
	}
	if opts.UpgradePolls == 0 {
		opts.UpgradePolls = 2
	}
	f := &OPNsense{
		restFake:    newRESTFake(t),
		opts:        opts,
		root:        t.TempDir(),
		version:     opts.Version,
		filterModel: "default",
		savepoints:  map[string]savepoint{},
	}
	f.filterLoaded = f.filterModel
	for _, d := range []string{"conf/backup", "var/run", "tmp"} {
		must(t, os.MkdirAll(filepath.Join(f.root, d), 0o755))
	}
	must(t, os.WriteFile(filepath.Join(f.root, "conf/config.xml"), opts.Config, 0o644))
	f.authOK = func(r *http.Request) bool {
		k, s, ok := r.BasicAuth()
		return ok && k == opts.Key && s == opts.Secret
	}
	f.denied = func(w http.ResponseWriter) { writeJSON(w, 401, api.Body("opnsense/error_401.json")) }
	f.forbid = func(w http.ResponseWriter) { writeJSON(w, 403, api.Body("opnsense/error_403.json")) }
	f.routes()
	f.start()
	t.Cleanup(func() {
		f.mu.Lock()
		sh := f.shell
		if f.timer != nil {
			f.timer.Stop()
		}
		f.mu.Unlock()
		if sh != nil {
			sh.stopDaemons()
		}
	})
	return f
}

func (f *OPNsense) v() (maj, mnr int) {
	fmt.Sscanf(f.version, "%d.%d", &maj, &mnr)
	return
}

func (f *OPNsense) atLeast(maj, mnr int) bool {
	a, b := f.v()
	return a > maj || (a == maj && b >= mnr)
}

func (f *OPNsense) routes() {
	ok := func(w http.ResponseWriter) { writeJSON(w, 200, []byte(`{"status":"ok"}`)) }
	f.handle("GET /api/core/firmware/info", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		v := f.version
		f.mu.Unlock()
		b, _ := json.Marshal(map[string]any{"product_id": "opnsense", "product_version": v, "product": map[string]string{"product_name": "OPNsense", "product_version": v}})
		writeJSON(w, 200, b)
	})
	f.handle("GET /api/core/backup/download/{host}", func(w http.ResponseWriter, r *http.Request) {
		if f.opts.NoBackupAPI {
			writeJSON(w, 404, api.Body("opnsense/error_404.json"))
			return
		}
		if r.PathValue("host") != "this" {
			writeJSON(w, 404, api.Body("opnsense/error_404.json"))
			return
		}
		b, err := os.ReadFile(filepath.Join(f.root, "conf/config.xml"))
		if err != nil {
			writeJSON(w, 500, api.Body("opnsense/error_500.json"))
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", `attachment; filename="config.xml"`)
		w.Write(b)
	})
	f.handle("POST /api/firewall/filter/apply", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.filterLoaded = f.filterModel
		f.filterApplies++
		f.recordLocked(configxml.ActionFilterReload)
		f.mu.Unlock()
		f.Shell().loadFilter()
		writeJSON(w, 200, api.Body("opnsense/filter_apply.json"))
	})
	if !f.atLeast(26, 7) {
		f.handle("POST /api/firewall/filter/savepoint", func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			rev := fmt.Sprintf("%d.%04d", time.Now().Unix(), len(f.savepoints))
			cfg, _ := os.ReadFile(filepath.Join(f.root, "conf/config.xml"))
			f.savepoints[rev] = savepoint{model: f.filterModel, config: cfg}
			f.mu.Unlock()
			b, _ := json.Marshal(map[string]string{"status": "ok", "retention": "60", "revision": rev})
			writeJSON(w, 200, b)
		})
		f.handle("POST /api/firewall/filter/apply/{rev}", func(w http.ResponseWriter, r *http.Request) {
			rev := r.PathValue("rev")
			f.mu.Lock()
			if _, ok := f.savepoints[rev]; !ok {
				f.mu.Unlock()
				writeJSON(w, 200, []byte(`{"status":"failed"}`))
				return
			}
			f.filterLoaded = f.filterModel
			f.filterApplies++
			f.recordLocked(configxml.ActionFilterReload)
			if f.timer != nil {
				f.timer.Stop()
			}
			f.timerRev = rev
			f.timer = time.AfterFunc(f.opts.RollbackAfter, func() { f.rollback(rev) })
			f.mu.Unlock()
			f.Shell().loadFilter()
			writeJSON(w, 200, api.Body("opnsense/filter_apply.json"))
		})
		f.handle("POST /api/firewall/filter/cancel_rollback/{rev}", func(w http.ResponseWriter, r *http.Request) {
			rev := r.PathValue("rev")
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.timer != nil && f.timerRev == rev {
				f.timer.Stop()
				f.timer = nil
			}
			delete(f.savepoints, rev)
			ok(w)
		})
	}
	f.handle("POST /api/ids/service/reconfigure", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.ids.Running = f.ids.Enabled
		f.recordLocked(configxml.ActionIDSRestart)
		f.mu.Unlock()
		writeJSON(w, 200, []byte(`{"status":"OK"}`))
	})
	f.handle("GET /api/ids/service/status", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		st := "stopped"
		if f.ids.Running {
			st = "running"
		}
		f.mu.Unlock()
		b, _ := json.Marshal(map[string]string{"status": st})
		writeJSON(w, 200, b)
	})
	f.handle("GET /api/ids/settings/get", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		general := map[string]any{"enabled": boolStr(f.ids.Enabled), "promisc": "0", "homenet": "198.18.0.0/15"}
		ifs := map[string]any{}
		for _, k := range []string{"lan", "wan"} {
			ifs[k] = map[string]any{"value": strings.ToUpper(k), "selected": boolInt(contains(f.ids.Interfaces, k))}
		}
		general["interfaces"] = ifs
		if f.atLeast(26, 1) {
			modes := map[string]any{}
			for _, m := range []string{"pcap", "netmap", "divert"} {
				modes[m] = map[string]any{"value": m, "selected": boolInt(f.ids.Mode == m || (f.ids.Mode == "" && m == "pcap"))}
			}
			general["mode"] = modes
		} else {
			general["ips"] = boolStr(f.ids.Mode == "netmap")
		}
		b, _ := json.Marshal(map[string]any{"ids": map[string]any{"general": general}})
		writeJSON(w, 200, b)
	})
	f.handle("POST /api/ipsec/service/reconfigure", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.ipsecRunning = true
		f.recordLocked(configxml.ActionIPsecRestart)
		f.mu.Unlock()
		ok(w)
	})
	f.handle("GET /api/ipsec/sessions/search_phase1", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var rows []map[string]any
		seen := map[string]bool{}
		for _, sa := range f.sas {
			if !seen[sa.Phase1] {
				seen[sa.Phase1] = true
				rows = append(rows, map[string]any{"name": sa.Phase1, "connected": true})
			}
		}
		b, _ := json.Marshal(map[string]any{"rows": rows, "total": len(rows)})
		writeJSON(w, 200, b)
	})
	f.handle("POST /api/ipsec/sessions/search_phase2", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID string `json:"id"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		f.mu.Lock()
		defer f.mu.Unlock()
		rows := []map[string]any{}
		for _, sa := range f.sas {
			if sa.Phase1 == req.ID {
				rows = append(rows, map[string]any{"name": sa.Name, "state": sa.State, "encr-alg": sa.EncrAlg, "encr-keysize": sa.KeySize,
					"integ-alg": sa.IntegAlg, "bytes-in": fmt.Sprint(sa.BytesIn), "bytes-out": fmt.Sprint(sa.BytesOut)})
			}
		}
		b, _ := json.Marshal(map[string]any{"rows": rows, "total": len(rows)})
		writeJSON(w, 200, b)
	})
	if f.atLeast(26, 1) {
		f.handle("POST /api/interfaces/settings/reconfigure", func(w http.ResponseWriter, r *http.Request) {
			f.mu.Lock()
			f.recordLocked(configxml.ActionInterfaces)
			f.mu.Unlock()
			f.Shell().applyOffloadConfig("")
			ok(w)
		})
	}
	f.handle("POST /api/core/firmware/reboot", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reboots++
		f.mu.Unlock()
		ok(w)
		go f.reboot(nil)
	})
	upgrade := func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.upgrade.running = true
		f.upgrade.polls = 0
		f.upgrade.status = "running"
		f.upgrade.log = "***GOT REQUEST TO UPDATE***\nCurrently running OPNsense " + f.version + "\n"
		f.mu.Unlock()
		writeJSON(w, 200, []byte(`{"status":"ok","msg_uuid":"5f0c7bb4-0b0c-4e0f-9b4e-7a2f1c6d9e01"}`))
	}
	f.handle("POST /api/core/firmware/update", upgrade)
	f.handle("POST /api/core/firmware/upgrade", upgrade)
	f.handle("GET /api/core/firmware/upgradestatus", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		u := &f.upgrade
		if u.running && u.status == "running" {
			u.polls++
			u.log += fmt.Sprintf("[%d/%d] Fetching packages\n", u.polls, f.opts.UpgradePolls)
			if u.polls >= f.opts.UpgradePolls {
				if f.opts.UpgradeFails {
					u.status = "error"
					u.log += "Failed to update the repository catalogue.\n"
				} else {
					u.status = "reboot"
					u.log += "The system is rebooting now.\n"
					go f.reboot(func() { f.version = f.opts.UpgradeTo })
				}
			}
		}
		b, _ := json.Marshal(map[string]string{"status": u.status, "log": u.log})
		f.mu.Unlock()
		writeJSON(w, 200, b)
	})
}

// reboot takes the fake down for RebootDowntime; then runs then (under the
// lock) and comes back.
func (f *OPNsense) reboot(then func()) {
	time.Sleep(20 * time.Millisecond) // let the answer leave first
	f.SetDown(true)
	time.Sleep(f.opts.RebootDowntime)
	f.mu.Lock()
	if then != nil {
		then()
	}
	f.upgrade.status = "done"
	f.mu.Unlock()
	f.SetDown(false)
}

// savepoint is the MVC filter model as it was when a savepoint was taken.
type savepoint struct {
	model  string // the abstract model tests set with SetFilterModel
	config []byte // config.xml then: its <OPNsense><Firewall><Filter> is the MVC model
}

// rollback is the firewall's timer firing: the MVC filter model, and only
// it, goes back to the savepoint, and the filter is reloaded. Legacy
// <filter><rule> entries are not part of it.
func (f *OPNsense) rollback(rev string) {
	f.mu.Lock()
	saved, ok := f.savepoints[rev]
	if !ok || f.timerRev != rev {
		f.mu.Unlock()
		return
	}
	f.timer = nil
	delete(f.savepoints, rev)
	f.mu.Unlock()
	path := filepath.Join(f.root, "conf/config.xml")
	if cur, err := os.ReadFile(path); err == nil {
		if restored, err := withMVCFilterOf(cur, saved.config); err == nil {
			os.WriteFile(path, restored, 0o644)
		}
	}
	f.Shell().loadFilter()
	f.mu.Lock()
	f.filterModel = saved.model
	f.filterLoaded = saved.model
	f.rolledBack = true // last: tests wait for it, then look
	f.mu.Unlock()
}

// withMVCFilterOf returns cur with its <OPNsense><Firewall><Filter> replaced by
// old's (or removed when old has none).
func withMVCFilterOf(cur, old []byte) ([]byte, error) {
	curDoc, oldDoc := etree.NewDocument(), etree.NewDocument()
	if err := curDoc.ReadFromBytes(cur); err != nil {
		return nil, err
	}
	if err := oldDoc.ReadFromBytes(old); err != nil {
		return nil, err
	}
	if e := curDoc.FindElement("opnsense/OPNsense/Firewall/Filter"); e != nil {
		e.Parent().RemoveChild(e)
	}
	if e := oldDoc.FindElement("opnsense/OPNsense/Firewall/Filter"); e != nil {
		parent := curDoc.FindElement("opnsense/OPNsense/Firewall")
		if parent == nil {
			parent = curDoc.FindElement("opnsense/OPNsense")
			if parent == nil {
				parent = curDoc.Root().CreateElement("OPNsense")
			}
			parent = parent.CreateElement("Firewall")
		}
		parent.AddChild(e.Copy())
	}
	return curDoc.WriteToBytes()
}

func boolStr(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Target is an opnsense target for this fake: key and secret in 0600 files,
// the fake's certificate as ca_file.
func (f *OPNsense) Target() *fwapi.Target {
	return &fwapi.Target{
		Name:   "fake-opnsense",
		Flavor: "opnsense",
		Host:   "127.0.0.1",
		API:    f.apiSpec(f.opts.Key, f.opts.Secret),
	}
}

// Version is the firmware version the fake reports now.
func (f *OPNsense) Version() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

// SetFilterModel stands for an edit of the MVC filter rules (saved, not yet
// applied), as add_rule/set_rule would make.
func (f *OPNsense) SetFilterModel(m string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.filterModel = m
}

// Filter returns the saved filter model, the one loaded into pf, and how many
// times the filter was applied.
func (f *OPNsense) Filter() (saved, loaded string, applies int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.filterModel, f.filterLoaded, f.filterApplies
}

// RolledBack reports whether a savepoint timer fired.
func (f *OPNsense) RolledBack() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rolledBack
}

// RollbackArmed reports whether a savepoint timer is running.
func (f *OPNsense) RollbackArmed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.timer != nil
}

// SetIDS sets Suricata's settings and service state.
func (f *OPNsense) SetIDS(s IDSState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ids = s
}

// IDS returns Suricata's state.
func (f *OPNsense) IDS() IDSState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids
}

// SetSAs sets the IPsec child SAs the sessions API reports.
func (f *OPNsense) SetSAs(sas []FakeSA) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sas = sas
}

// Reboots counts reboot requests.
func (f *OPNsense) Reboots() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reboots
}

// ConfigXML returns /conf/config.xml as the firewall holds it.
func (f *OPNsense) ConfigXML() []byte {
	b, err := os.ReadFile(filepath.Join(f.root, "conf/config.xml"))
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// Root is the folder standing for the firewall's "/".
func (f *OPNsense) Root() string { return f.root }

// recordLocked notes a service action; repeats in a row (one reconfigure per
// interface) count once. f.mu is held.
func (f *OPNsense) recordLocked(a configxml.Action) {
	if n := len(f.actions); n > 0 && f.actions[n-1] == a {
		return
	}
	f.actions = append(f.actions, a)
}

// Actions returns the service actions the firewall ran, in order.
func (f *OPNsense) Actions() []configxml.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]configxml.Action(nil), f.actions...)
}

// ResetActions forgets the recorded actions.
func (f *OPNsense) ResetActions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = nil
}
