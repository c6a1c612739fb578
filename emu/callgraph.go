package emu

import (
	"slices"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// The call-graph table: every product entry point fwab runs (a command on
// the firewall's shell, a REST route) with the effects the products have
// when it runs. docs/callgraph.md is the table with its upstream
// citations; EntryPoints is the emulator's side of it: which effects it
// reproduces for each entry, and which it does not, with the reason.
// TestCallGraphTable holds the two together, and labtest.Start fails a
// test in which fwab ran anything the table lacks (UnknownEntries).

// Effect is one observable effect of an entry point, a word of the table.
type Effect string

// The effects the table speaks of.
const (
	ReadOnly               Effect = "read-only"               // reads state, changes nothing
	WritesFiles            Effect = "writes-files"            // writes or removes files (config.xml by fwab included)
	StartsProcess          Effect = "starts-process"          // starts or signals processes
	ConfigSaved            Effect = "config-saved"            // the product saves config.xml itself: new revision, backup
	FilterReloaded         Effect = "filter-reloaded"         // pf's rules and NAT loaded anew
	OffloadFlags           Effect = "offload-flags"           // NIC capability flags set
	LinkReset              Effect = "link-reset"              // the NIC's link may reset: its sessions stall
	InterfacesReconfigured Effect = "interfaces-reconfigured" // addresses removed and set again, DHCP renewed
	SessionsDropped        Effect = "sessions-dropped"        // sessions over the management interface are lost
	ServiceRestarted       Effect = "service-restarted"       // a daemon restarted before the command returns
	BackgroundRestart      Effect = "background-restart"      // a daemon restarted after the command returns
	TunnelsDropped         Effect = "tunnels-dropped"         // every IPsec SA is torn down
	TunnelReset            Effect = "tunnel-reset"            // one IPsec connection torn down or brought up
	CronInstalled          Effect = "cron-installed"          // cron jobs added or removed (with config-saved)
	Reboots                Effect = "reboots"                 // the box goes down and boots
	BootEnvironment        Effect = "boot-environment"        // a boot environment made or activated
	PackagesChanged        Effect = "packages-changed"        // packages or the kernel upgraded
)

// Effects is the table's vocabulary.
var Effects = []Effect{ReadOnly, WritesFiles, StartsProcess, ConfigSaved, FilterReloaded, OffloadFlags, LinkReset,
	InterfacesReconfigured, SessionsDropped, ServiceRestarted, BackgroundRestart, TunnelsDropped, TunnelReset, CronInstalled,
	Reboots, BootEnvironment, PackagesChanged}

// EntryPoint is one row of the call-graph table as the emulator knows it.
type EntryPoint struct {
	Key     string             // the row's key in docs/callgraph.md
	Flavors []configxml.Flavor // the products it exists on
	// Effects are the effects the emulator reproduces.
	Effects []Effect
	// Missing are the row's effects the emulator does not reproduce, each
	// with the reason.
	Missing map[Effect]string
	// match tells a command's words (args[0] the absolute program path)
	// as this entry; nil for a REST route (Key is "api: METHOD /pattern").
	match func(args []string) bool
}

func prog(path string) func([]string) bool {
	return func(a []string) bool { return a[0] == path }
}

func progArgs(path string, words ...string) func([]string) bool {
	return func(a []string) bool {
		return a[0] == path && len(a) > len(words) && slices.Equal(a[1:1+len(words)], words)
	}
}

func phpCalls(fn string) func([]string) bool {
	return func(a []string) bool {
		return a[0] == "/usr/local/bin/php" && len(a) == 3 && a[1] == "-r" && strings.Contains(a[2], fn)
	}
}

func ifconfigSets(a []string) bool {
	return a[0] == "/sbin/ifconfig" && len(a) > 2 && !strings.HasPrefix(a[1], "-")
}

var (
	both   = []configxml.Flavor{configxml.PfSense, configxml.OPNsense}
	pfOnly = []configxml.Flavor{configxml.PfSense}
	opOnly = []configxml.Flavor{configxml.OPNsense}
)

// EntryPoints are the rows the emulator knows, commands first (the first
// that matches a command decides), then REST routes.
var EntryPoints = []EntryPoint{
	// FreeBSD base, both products.
	{Key: "sh: ifconfig DEV FLAGS", Flavors: both, Effects: []Effect{OffloadFlags, LinkReset}, match: ifconfigSets},
	{Key: "sh: swanctl --terminate / --initiate", Flavors: pfOnly, Effects: []Effect{TunnelReset}, match: func(a []string) bool {
		return a[0] == "/usr/local/sbin/swanctl" && len(a) > 1 && (a[1] == "--terminate" || a[1] == "--initiate")
	}},
	{Key: "sh: read-only tools", Flavors: both, Effects: []Effect{ReadOnly}, match: func(a []string) bool {
		return slices.Contains([]string{"/bin/cat", "/bin/ls", "/usr/bin/wc", "/usr/bin/head", "/usr/bin/grep", "/sbin/sha256", "/bin/date",
			"/bin/hostname", "/usr/bin/uname", "/bin/ps", "/bin/pgrep", "/sbin/ifconfig", "/sbin/pfctl", "/usr/sbin/pkg", "/sbin/sysctl",
			"/usr/bin/netstat", "/sbin/kldstat", "/usr/local/sbin/swanctl", "/usr/bin/b64decode", "/bin/sleep", "/usr/local/sbin/opnsense-version"}, a[0]) ||
			(a[0] == "/sbin/bectl" && len(a) > 1 && a[1] == "list") || (a[0] == "/sbin/zfs" && len(a) > 1 && (a[1] == "list" || a[1] == "get"))
	}},
	{Key: "sh: file tools", Flavors: both, Effects: []Effect{WritesFiles}, match: func(a []string) bool {
		return slices.Contains([]string{"/bin/cp", "/bin/mv", "/bin/rm", "/bin/mkdir", "/bin/rmdir", "/bin/chmod", "/bin/ln", "/bin/sync"}, a[0])
	}},
	{Key: "sh: process tools", Flavors: both, Effects: []Effect{StartsProcess}, match: func(a []string) bool {
		return slices.Contains([]string{"/bin/sh", "/usr/sbin/daemon", "/bin/kill", "/bin/pkill", "/usr/bin/logger", "/usr/bin/lockf", "/usr/bin/timeout"}, a[0])
	}},
	{Key: "sh: reboot", Flavors: both, Effects: []Effect{Reboots, SessionsDropped}, match: func(a []string) bool {
		return a[0] == "/sbin/reboot" || a[0] == "/sbin/shutdown"
	}},
	{Key: "sh: bectl / zfs", Flavors: both, Effects: []Effect{BootEnvironment}, match: func(a []string) bool {
		return a[0] == "/sbin/bectl" || a[0] == "/sbin/zfs"
	}},

	// pfSense.
	{Key: "pfSense: /etc/rc.filter_configure_sync", Flavors: pfOnly, Effects: []Effect{FilterReloaded},
		Missing: map[Effect]string{
			ConfigSaved:     "only when rule schedules come or go (filter_tdr_install_cron); the lab's rules have no schedules",
			CronInstalled:   "as config-saved: only with rule schedules",
			SessionsDropped: "only with a gateway down and gw_down_kill_states=all (pfctl -Fs); the lab has no gateway monitoring",
		},
		match: func(a []string) bool {
			return a[0] == "/etc/rc.filter_configure_sync" || a[0] == "/etc/rc.filter_configure"
		}},
	{Key: "pfSense: /etc/rc.reload_interfaces", Flavors: pfOnly,
		Effects: []Effect{OffloadFlags, LinkReset, InterfacesReconfigured, SessionsDropped, FilterReloaded, BackgroundRestart},
		Missing: map[Effect]string{ServiceRestarted: "the lab has no resolver, dnsmasq or DHCP server to restart"},
		match:   prog("/etc/rc.reload_interfaces")},
	{Key: "pfSense: /etc/rc.reload_all", Flavors: pfOnly,
		Effects: []Effect{OffloadFlags, LinkReset, InterfacesReconfigured, SessionsDropped, FilterReloaded, BackgroundRestart},
		Missing: map[Effect]string{
			ServiceRestarted: "the lab has no resolver, NTP, cron or DHCP server to restart",
		},
		match: prog("/etc/rc.reload_all")},
	{Key: "pfSense: php write_config install", Flavors: pfOnly, Effects: []Effect{WritesFiles}, match: phpCalls("backup_config();")},
	{Key: "pfSense: php setup_microcode", Flavors: pfOnly, Effects: []Effect{OffloadFlags, LinkReset}, match: phpCalls("enable_hardware_offloading")},
	{Key: "pfSense: php sync_suricata_package_config", Flavors: pfOnly, Effects: []Effect{WritesFiles, ConfigSaved, CronInstalled}, match: phpCalls("sync_suricata_package_config")},
	{Key: "pfSense: pfblockerng.php", Flavors: pfOnly, Effects: []Effect{ConfigSaved, CronInstalled, FilterReloaded},
		Missing: map[Effect]string{
			ServiceRestarted: "Unbound restarts only with DNSBL on; the lab emulates IP lists only",
			SessionsDropped:  "states are killed only with the package's kill-states setting on; the lab's config leaves it off",
		},
		match: progArgs("/usr/local/bin/php", "/usr/local/www/pfblockerng/pfblockerng.php")},
	{Key: "pfSense: pfSsh.php playback restartipsec", Flavors: pfOnly, Effects: []Effect{BackgroundRestart, TunnelsDropped},
		match: prog("/usr/local/sbin/pfSsh.php")},
	// TunnelsDropped: only when the config turns IPsec off (the stop).
	{Key: "pfSense: php ipsec_configure", Flavors: pfOnly, Effects: []Effect{BackgroundRestart, TunnelsDropped},
		Missing: map[Effect]string{FilterReloaded: "the lab's IPsec does not run through pf, so the filter_configure() first changes nothing there"},
		match:   phpCalls("ipsec_configure(")},
	{Key: "pfSense: suricata.sh", Flavors: pfOnly, Effects: []Effect{ServiceRestarted}, match: prog("/usr/local/etc/rc.d/suricata.sh")},
	{Key: "pfSense: pkg-static queries", Flavors: pfOnly, Effects: []Effect{ReadOnly}, match: func(a []string) bool {
		return a[0] == "/usr/local/sbin/pkg-static" && len(a) > 1 && (a[1] == "info" || a[1] == "query" || (a[1] == "annotate" && slices.Contains(a, "-S")))
	}},
	{Key: "pfSense: pfSense-upgrade", Flavors: pfOnly, Effects: []Effect{PackagesChanged, Reboots, SessionsDropped},
		Missing: map[Effect]string{BootEnvironment: "not yet: the lab's pfSense-upgrade neither prunes, creates nor activates boot environments"},
		match: func(a []string) bool {
			return a[0] == "/usr/local/sbin/pfSense-upgrade" || a[0] == "/usr/local/sbin/pkg-static"
		}},

	// OPNsense.
	{Key: "OPNsense: configctl filter reload", Flavors: opOnly, Effects: []Effect{FilterReloaded}, match: progArgs("/usr/local/sbin/configctl", "filter", "reload")},
	{Key: "OPNsense: configctl interface reconfigure KEY", Flavors: opOnly,
		Effects: []Effect{OffloadFlags, InterfacesReconfigured, SessionsDropped},
		Missing: map[Effect]string{ServiceRestarted: "the lab has no resolver or DHCP server to restart"},
		match:   progArgs("/usr/local/sbin/configctl", "interface", "reconfigure")},
	{Key: "OPNsense: configctl ids", Flavors: opOnly, Effects: []Effect{ServiceRestarted, WritesFiles}, match: progArgs("/usr/local/sbin/configctl", "ids")},
	{Key: "OPNsense: configctl template reload OPNsense/IDS", Flavors: opOnly, Effects: []Effect{WritesFiles},
		match: progArgs("/usr/local/sbin/configctl", "template", "reload", "OPNsense/IDS")},
	{Key: "OPNsense: configctl ipsec", Flavors: opOnly, Effects: []Effect{ServiceRestarted, BackgroundRestart},
		Missing: map[Effect]string{TunnelsDropped: "the lab runs one tunnel and brings it up again on each restart; the loss of the others is not modelled"},
		match:   progArgs("/usr/local/sbin/configctl", "ipsec")},
	{Key: "OPNsense: /usr/local/etc/rc.reload_all", Flavors: opOnly,
		Effects: []Effect{OffloadFlags, InterfacesReconfigured, SessionsDropped, FilterReloaded, BackgroundRestart, ServiceRestarted},
		match:   prog("/usr/local/etc/rc.reload_all")},
	{Key: "OPNsense: /usr/local/etc/rc.filter_configure", Flavors: opOnly, Effects: []Effect{FilterReloaded}, match: prog("/usr/local/etc/rc.filter_configure")},
	{Key: "OPNsense: /usr/local/etc/rc.d/suricata", Flavors: opOnly, Effects: []Effect{ServiceRestarted}, match: prog("/usr/local/etc/rc.d/suricata")},
	{Key: "OPNsense: php interfaces_hardware", Flavors: opOnly, Effects: []Effect{OffloadFlags, LinkReset}, match: phpCalls("configure_interface_hardware")},

	// OPNsense REST routes.
	{Key: "api: POST /api/firewall/filter/apply", Flavors: opOnly, Effects: []Effect{FilterReloaded}},
	{Key: "api: POST /api/firewall/filter/savepoint", Flavors: opOnly, Effects: []Effect{WritesFiles},
		Missing: map[Effect]string{ConfigSaved: "the lab keeps savepoints in memory and saves no config.xml for them (fwab's sessions arm its own rollback, not savepoints)"}},
	{Key: "api: POST /api/firewall/filter/apply/{rev}", Flavors: opOnly, Effects: []Effect{FilterReloaded, StartsProcess}},
	{Key: "api: POST /api/firewall/filter/cancel_rollback/{rev}", Flavors: opOnly, Effects: []Effect{WritesFiles}},
	{Key: "api: POST /api/firewall/filter/revert/{rev}", Flavors: opOnly, Effects: []Effect{FilterReloaded},
		Missing: map[Effect]string{ConfigSaved: "the lab restores the rules in memory and saves no config.xml (fwab never calls revert)"}},
	{Key: "api: POST /api/interfaces/settings/reconfigure", Flavors: opOnly, Effects: []Effect{OffloadFlags, LinkReset, FilterReloaded}},
	{Key: "api: GET /api/interfaces/settings/get", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/interfaces/settings/set", Flavors: opOnly, Effects: []Effect{ConfigSaved}},
	{Key: "api: GET /api/ids/settings/get", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/ids/settings/set", Flavors: opOnly, Effects: []Effect{ConfigSaved}},
	{Key: "api: POST /api/ids/service/reconfigure", Flavors: opOnly, Effects: []Effect{ConfigSaved, CronInstalled, ServiceRestarted}},
	{Key: "api: GET /api/ids/service/status", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/ipsec/service/reconfigure", Flavors: opOnly, Effects: []Effect{BackgroundRestart},
		Missing: map[Effect]string{FilterReloaded: "the lab's IPsec does not run through pf, so the reload changes nothing there"}},
	{Key: "api: GET /api/ipsec/service/status", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: GET /api/ipsec/connections/is_enabled", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: GET /api/ipsec/sessions/search_phase1", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/ipsec/sessions/search_phase2", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/ipsec/sessions/disconnect/{id}", Flavors: opOnly, Effects: []Effect{TunnelReset}},
	{Key: "api: POST /api/ipsec/sessions/connect/{id}", Flavors: opOnly, Effects: []Effect{TunnelReset}},
	{Key: "api: GET /api/core/backup/download/{host}", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: GET /api/core/firmware/info", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: GET /api/core/firmware/status", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/core/firmware/status", Flavors: opOnly, Effects: []Effect{ReadOnly},
		Missing: map[Effect]string{PackagesChanged: "the probe may upgrade pkg itself on the box; the lab's probe changes no package"}},
	{Key: "api: POST /api/core/firmware/check", Flavors: opOnly, Effects: []Effect{StartsProcess},
		Missing: map[Effect]string{PackagesChanged: "as firmware/status: pkg may be upgraded on the box, not in the lab"}},
	{Key: "api: POST /api/core/firmware/update", Flavors: opOnly, Effects: []Effect{PackagesChanged, Reboots, SessionsDropped},
		Missing: map[Effect]string{BackgroundRestart: "not yet: the web GUI restarts mid-update on the box; the lab's API server stays up until the reboot"}},
	{Key: "api: POST /api/core/firmware/upgrade", Flavors: opOnly, Effects: []Effect{PackagesChanged, Reboots, SessionsDropped}},
	{Key: "api: GET /api/core/firmware/upgradestatus", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/core/firmware/reboot", Flavors: opOnly, Effects: []Effect{Reboots, SessionsDropped, BackgroundRestart}},
	{Key: "api: GET /api/core/service/search", Flavors: opOnly, Effects: []Effect{ReadOnly}},
	{Key: "api: POST /api/core/service/{action}/{name}", Flavors: opOnly, Effects: []Effect{ServiceRestarted},
		Missing: map[Effect]string{TunnelsDropped: "as configctl ipsec: the lab's one tunnel comes up again"}},
}

// entryOf is the key of the entry a command's words are, "" when none.
func entryOf(args []string) string {
	for _, ep := range EntryPoints {
		if ep.match != nil && ep.match(args) {
			return ep.Key
		}
	}
	return ""
}

// sawCommand records a dispatched command no entry covers.
func (e *Emulator) sawCommand(args []string) {
	if entryOf(args) != "" {
		return
	}
	e.amu.Lock()
	defer e.amu.Unlock()
	e.unknownEntries = appendNew(e.unknownEntries, "sh: "+strings.Join(args, " "))
}

// sawRoute records a REST route (a mux pattern) not in the table.
func (e *Emulator) sawRoute(pattern string) {
	key := "api: " + pattern
	for _, ep := range EntryPoints {
		if ep.Key == key {
			return
		}
	}
	e.amu.Lock()
	defer e.amu.Unlock()
	e.unknownEntries = appendNew(e.unknownEntries, key)
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// UnknownEntries are the commands and routes run on the emulator that no
// row of the call-graph table covers: entry points fwab uses that the
// table must gain (with their effects) before the emulator may run them.
func (e *Emulator) UnknownEntries() []string {
	e.amu.Lock()
	defer e.amu.Unlock()
	return slices.Clone(e.unknownEntries)
}
