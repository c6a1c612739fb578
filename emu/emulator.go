package emu

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/atomicfile"
)

//go:embed assets/config.xml
var defaultConfig []byte

//go:embed assets/opnsense/config.xml
var defaultOPNsenseConfig []byte

// DefaultConfig returns the emulated pfSense's factory config.xml: a pfSense
// 2.7-style default with the lab's interfaces and addresses.
func DefaultConfig() []byte { return append([]byte(nil), defaultConfig...) }

// FactoryConfig returns the factory config.xml of a flavor: DefaultConfig
// for pfSense; for OPNsense a 26.1-style default with the same interfaces
// and addresses (offloads disabled, as OPNsense ships; legacy LAN rules;
// IDS off).
func FactoryConfig(flavor configxml.Flavor) []byte {
	if flavor == configxml.OPNsense {
		return append([]byte(nil), defaultOPNsenseConfig...)
	}
	return DefaultConfig()
}

// Emulator is the emulated pfSense or OPNsense (Flavor): a firewall
// filesystem (config.xml, backups, /etc/version, /tmp, /var/run), an SSH
// server that runs commands through the product's shell with FreeBSD's and
// the product's commands, and the machine the config is applied to
// (DataPlane, IPsec, IDS, CPU).
type Emulator struct {
	Root string // the firewall's filesystem: <lab>/root
	// Flavor is the product emulated: pfSense (the zero value) or
	// OPNsense, which adds its REST API (ServeAPI), its shell commands and
	// paths, and reads an OPNsense config.xml.
	Flavor         configxml.Flavor
	DataPlane      DataPlane
	Ports          Ports
	Profiles       []Profile
	HostKey        ssh.Signer
	AuthorizedKeys []ssh.PublicKey
	// PasswordFile, when it exists, holds a password (its first line) that
	// root and admin may log in with too, as on a real pfSense; it is read at
	// each login, so a test can set it on a running lab.
	PasswordFile string
	Logger       *slog.Logger
	IPsec        IPsecPlane // nil: no IPsec daemons (swanctl lists no SA)
	// NoIDSRules leaves an OPNsense box without downloaded IDS rulesets, as
	// after a fresh install (opnsense_rules.go); the lab's box has two.
	NoIDSRules bool
	// Stage3Time is how long the last stage of a pfSense upgrade (the
	// packages' reinstall, with SSH up) takes; 0 is a second.
	Stage3Time time.Duration
	// KernelPackage is the pfSense kernel package's name; "" is
	// pfSense-kernel-pfSense (see pfKernelPackage).
	KernelPackage string
	// RebootDelay is how long SSH stays away during a reboot.
	RebootDelay time.Duration
	// PackageStartDelay is, on pfSense, how long after SSH answers and pf
	// is up (the end of rc.bootup) a reboot starts the packages
	// (rc.start_packages, after pfSense-upgrade's boot stages 2 and 3):
	// Suricata's sync and start, the other rc.d scripts. On OPNsense, how
	// long after the API answers the start syshooks run (Suricata's start,
	// then the other hooks). A real box takes seconds to minutes there.
	PackageStartDelay time.Duration
	BlocklistSize     int      // 0 means DefaultBlocklistSize
	IDS               IDSPlane // nil: Suricata restarts change nothing
	// SavepointTimer is how long an OPNsense filter savepoint waits
	// before it rolls back; 0 is OPNsense's 60 s.
	SavepointTimer time.Duration
	// SpareNIC is a device no data plane port backs ("" for none): an
	// unassigned NIC for ifconfig -a; see NICs.Spare.
	SpareNIC string
	// SSHVia is the config interface SSH sessions (and the REST API's)
	// come in through, the management interface; "" is none (sessions
	// arrive on 127.0.0.1). See management.go for what reconfiguring it
	// does to them.
	SSHVia string
	// Links are the DUT ports' emulated NICs, by veth: each port is shaped
	// to its line rate (see shapePorts) and ifconfig's media line shows it.
	// A veth not listed is unlimited.
	Links map[string]LinkSpec
	// CPU is the cgroup of the firewall's userspace services; with it the
	// CPU readings are its usage against its budget. nil: no budget, the
	// readings are the machine's.
	CPU CPUBudget

	mu        sync.Mutex // serialises applies and guards the fields below
	pf        map[string]string
	blocklist bool     // pfBlockerNG's tables are loaded
	kmods     []string // accelerator modules the boot loaded (crypto.go)
	booted    time.Time
	boots     int    // Boots
	console   []byte // what the boots printed (BootConsole)
	// slowRates holds a tracking slowdown's recent measurements per
	// running configuration (see applySlowdown).
	slowRates map[string]*slowdownSamples

	procs procTable

	// pkgLocked: pfSense-upgrade's last stage holds the package database.
	pkgLocked atomic.Bool

	// ipsecUp: strongSwan runs (set by every IPsec apply, boot included,
	// cleared when it stops).
	ipsecUp atomic.Bool
	// charonPID is the DUT's charon's pid as ps shows it while ipsecUp: a
	// new one at each start, the same across a reload (setIPsecUp).
	charonPID atomic.Int64
	// ipsecGen counts IPsec applies: a background step that a later
	// apply superseded does nothing.
	ipsecGen atomic.Int64

	pfBackups map[string]backupMeta // what cleanup_backupcache read of each backup (e.mu)
	flocks    flocks                // flock(2) locks on the firewall's files (flock.go): OPNsense's config lock is taken before e.mu, pfSense's after

	smu         sync.Mutex
	suricataRun map[string]bakedInstance // pfSense Suricata instances running, by device

	fmu   sync.Mutex
	fault Fault // the injected faults (fault.go)
	// linkErrs are the input errors faults added since the boot, and
	// linkBase the veths' counters at the boot, by device: netstat's
	// counters start at zero with the boot, as FreeBSD's do.
	linkErrs    map[string]uint64
	linkBase    map[string]LinkStats
	linkTrigger *linkTrigger // an armed LinkDownOn fault
	linkHeld    bool         // the link is down for fault.LinkDown
	resetUntil  time.Time    // the management NIC's link resets until then (management.go)

	amu            sync.Mutex
	actions        []configxml.Action // service actions run (Actions)
	cmdLog         []string           // SSH command lines run (Commands)
	offloadLog     []string           // devices offload flags were set on (OffloadLog)
	spareOffloads  Offloads           // the spare NIC's flags
	apiLog         []string           // REST API routes called (Requests)
	unknownEntries []string           // commands and routes the call-graph table lacks (callgraph.go)
	life           context.Context    // Serve's context: background work of faults

	lmu      sync.Mutex
	ln       net.Listener
	conns    map[*ssh.ServerConn]bool
	apiConns map[net.Conn]bool // the REST API's (management.go)
	down     chan struct{}     // closed while SSH is down for a reboot; nil when up
	rebootCh chan struct{}
	// bootEnd ends what the boot under way runs in the background (its
	// package start, its rc.d scripts): the next reboot calls it, as a
	// real reboot ends every process.
	bootEnd context.CancelFunc
}

func (e *Emulator) logger() *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger
}

// path maps a firewall path onto the lab folder.
func (e *Emulator) path(p string) string {
	p = filepath.Clean("/" + p)
	if p == "/cf/conf" || strings.HasPrefix(p, "/cf/conf/") {
		p = strings.TrimPrefix(p, "/cf")
	}
	return filepath.Join(e.Root, p)
}

// Init creates the firewall filesystem with the factory config and the first
// firmware profile's version, unless it exists.
func (e *Emulator) Init() error {
	// var/crash: savecore's dump folder, which FreeBSD's mtree
	// (BSD.var.dist) makes on every install; fwab lists it (probe.Health).
	dirs := []string{"conf/backup", "etc", "tmp", "var/run", "var/log", "var/db", "var/etc", "var/crash", "root", "boot/kernel", "usr/local/etc/rc.d"}
	if e.opnsense() {
		dirs = append(dirs, "usr/local/etc/rc.syshook.d/start")
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(e.Root, d), 0o755); err != nil {
			return err
		}
	}
	if e.opnsense() {
		if err := e.seedIDSRules(); err != nil {
			return err
		}
	}
	if _, err := os.Stat(e.path("/conf/config.xml")); errors.Is(err, fs.ErrNotExist) {
		if err := atomicfile.WriteFile(e.path("/conf/config.xml"), FactoryConfig(e.flavor()), 0o644); err != nil {
			return err
		}
		if err := e.firstBackup(); err != nil {
			return err
		}
	}
	if _, err := os.Stat(e.path(e.versionFile())); errors.Is(err, fs.ErrNotExist) {
		if len(e.Profiles) == 0 {
			return fmt.Errorf("no firmware profiles")
		}
		if err := e.writeVersion(e.Profiles[0]); err != nil {
			return err
		}
	}
	return nil
}

// flavor is the emulated product; pfSense unless set.
func (e *Emulator) flavor() configxml.Flavor {
	if e.Flavor == "" {
		return configxml.PfSense
	}
	return e.Flavor
}

func (e *Emulator) opnsense() bool { return e.flavor() == configxml.OPNsense }

// opnVersionFile is where OPNsense keeps its version metadata (JSON, key
// product_version), which opnsense-version and the firmware API read.
const opnVersionFile = "/usr/local/opnsense/version/core"

func (e *Emulator) versionFile() string {
	if e.opnsense() {
		return opnVersionFile
	}
	return "/etc/version"
}

func (e *Emulator) writeVersion(p Profile) error {
	if e.opnsense() {
		if err := os.MkdirAll(filepath.Dir(e.path(opnVersionFile)), 0o755); err != nil {
			return err
		}
		meta, err := json.MarshalIndent(map[string]string{
			"product_abi":      opnSeries(p.Version),
			"product_id":       "opnsense",
			"product_name":     "OPNsense",
			"product_nickname": "fwab lab",
			"product_series":   opnSeries(p.Version),
			"product_version":  p.Version,
		}, "", "  ")
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(e.path(opnVersionFile), append(meta, '\n'), 0o644)
	}
	if err := atomicfile.WriteFile(e.path("/etc/version"), []byte(p.Version+"\n"), 0o644); err != nil {
		return err
	}
	return atomicfile.WriteFile(e.path("/etc/version.patch"), []byte("0\n"), 0o644)
}

// Version is the running firmware version (/etc/version on pfSense,
// product_version in /usr/local/opnsense/version/core on OPNsense).
func (e *Emulator) Version() string {
	b, err := os.ReadFile(e.path(e.versionFile()))
	if err != nil {
		return ""
	}
	if e.opnsense() {
		var meta struct {
			Version string `json:"product_version"`
		}
		if json.Unmarshal(b, &meta) != nil {
			return ""
		}
		return meta.Version
	}
	return strings.TrimSpace(string(b))
}

// clearRunDirs does to /tmp and /var/run what a boot does. On pfSense both
// are fresh memory file systems. OPNsense deletes every file below /var/run
// but keeps its directories (packages expect theirs to persist), and then
// writes /var/run/dmesg.boot.
//
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:267 — a fresh `tmpfs` on /var/run
// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/etc/rc.subr.d/var:74 — `find ${RUNDIR} ! -type d -exec rm {} \;` (26.7: `-delete`), "do not touch the directory tree"
// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/etc/rc:194 — `/etc/rc.d/dmesg onestart` writes /var/run/dmesg.boot after rc.subr.d/var
func (e *Emulator) clearRunDirs() error {
	dirs := []string{"tmp", "var/run"}
	if e.opnsense() {
		dirs = []string{"tmp"}
		run := filepath.Join(e.Root, "var/run")
		err := filepath.WalkDir(run, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			return os.Remove(p)
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.MkdirAll(run, 0o755); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		_ = os.RemoveAll(filepath.Join(e.Root, d))
		if err := os.MkdirAll(filepath.Join(e.Root, d), 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(e.path("/var/run/dmesg.boot"), dmesgBoot(), 0o644)
}

// dmesgBoot is the boot's messages as far as fwab reads them: the CPU and
// its features, AESNI among them where this machine's CPU has it (the
// emulated box runs on this machine's CPUs).
func dmesgBoot() []byte {
	model, _ := sysctlValue("hw.model")
	features := "SSE3,PCLMULQDQ,SSSE3,CX16,SSE4.1,SSE4.2,POPCNT"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
				if slices.Contains(strings.Fields(v), "aes") {
					features += ",AESNI"
				}
				break
			}
		}
	}
	return []byte("FreeBSD is a registered trademark of The FreeBSD Foundation.\n" +
		"CPU: " + model + "\n" +
		"  Features2=0x7ffafbff<" + features + ">\n")
}

// Boot brings the data plane to what config.xml says, as a pfSense boot
// does: interfaces (offloads), pfBlockerNG tables, the filter, IPsec, the
// IDS, and then the running firmware profile's slowdown.
func (e *Emulator) Boot(ctx context.Context) error {
	return e.boot(ctx, true)
}

// boot is Boot; packages false leaves pfSense's packages to
// startPackages, as a reboot does (OPNsense starts its IDS either way).
func (e *Emulator) boot(ctx context.Context, packages bool) error {
	if err := e.clearRunDirs(); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	if err := e.goDown(ctx); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	if !e.opnsense() {
		e.upgradeAtBoot()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		// pfSense restores the newest backup when config.xml does not
		// parse at boot, and the factory default when there is none.
		e.logger().Error("boot: config.xml unusable, restoring the newest backup", "err", err)
		if rerr := e.restoreAtBoot(); rerr != nil {
			return fmt.Errorf("boot: %w (and restoring a backup failed: %v)", err, rerr)
		}
		if root, err = e.configForApply(); err != nil {
			return fmt.Errorf("boot: %w", err)
		}
	}
	e.blocklist = BlocklistEnabled(root)
	e.kmods = e.bootCryptoModules(root)
	if err := e.applyInterfaces(ctx, root); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	if err := e.applyFilter(ctx, root); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	if err := e.applyIPsec(ctx, root, ipsecRestart); err != nil {
		e.logger().Error("boot: ipsec", "err", err) // pfSense boots on without the tunnel
	}
	if packages {
		if err := e.bootIDS(ctx, root); err != nil {
			e.logger().Error("boot: suricata", "err", err)
		}
	}
	// Last: a tracking slowdown measures the data plane built above.
	if err := e.applySlowdown(ctx); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	e.booted = time.Now()
	e.boots++
	e.logger().Info("booted", "version", e.Version())
	return nil
}

// restoreAtBoot replaces config.xml with the newest backup that parses, or
// the factory default.
func (e *Emulator) restoreAtBoot() error {
	_ = os.Remove(e.path("/tmp/config.cache"))
	ents, _ := os.ReadDir(e.path("/conf/backup"))
	var best string
	var bestTime time.Time
	for _, d := range ents {
		fi, err := d.Info()
		if err != nil || fi.IsDir() || !strings.HasSuffix(d.Name(), ".xml") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(e.path("/conf/backup"), d.Name()))
		if err != nil {
			continue
		}
		if _, err := parseConfig(data, e.flavor()); err == nil && fi.ModTime().After(bestTime) {
			best, bestTime = d.Name(), fi.ModTime()
		}
	}
	data := FactoryConfig(e.flavor())
	if best != "" {
		b, err := os.ReadFile(filepath.Join(e.path("/conf/backup"), best))
		if err != nil {
			return err
		}
		data = b
	}
	e.logger().Warn("boot: restored config.xml", "from", map[bool]string{true: "/conf/backup/" + best, false: "factory default"}[best != ""])
	return atomicfile.WriteFile(e.path("/conf/config.xml"), data, 0o644)
}

// configForApply reads the config the way pfSense 2.7's parse_config()
// does: from /tmp/config.cache when it exists, even when config.xml is
// newer; otherwise from config.xml, writing the cache. OPNsense has no
// cache: it reads config.xml.
func (e *Emulator) configForApply() (*configxml.Config, error) {
	data, err := e.configBytesForApply()
	if err != nil {
		return nil, err
	}
	return parseConfig(data, e.flavor())
}

// configBytesForApply is configForApply's file contents.
func (e *Emulator) configBytesForApply() ([]byte, error) {
	if e.opnsense() {
		return os.ReadFile(e.path("/conf/config.xml"))
	}
	cache := e.path("/tmp/config.cache")
	data, err := os.ReadFile(cache)
	if err != nil {
		data, err = os.ReadFile(e.path("/conf/config.xml"))
		if err != nil {
			return nil, err
		}
		if err := atomicfile.WriteFile(cache, data, 0o600); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// applyInterfaces is pfSense's setup_microcode: the offload flags of
// config.xml on the devices the config assigns, in <interfaces> order
// (VLAN parents first), never on an unassigned NIC; checksum offload
// forced off on vtnet and ena.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:734 — `get_configured_interface_list(true)`: the assigned interfaces only
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:573 — `stristr($iface, "vtnet") || stristr($iface, "ena")` forces checksum offload off
func (e *Emulator) applyInterfaces(ctx context.Context, root *configxml.Config) error {
	return e.applyOffloadsTo(ctx, root, root.OffloadDevices())
}

// applyOffloadsTo sets config.xml's offload flags on the devices given, in
// order; pfSense forces checksum offload off on vtnet and ena. A device
// neither a port nor the spare NIC is left alone (a VLAN, lo0).
func (e *Emulator) applyOffloadsTo(ctx context.Context, root *configxml.Config, devs []string) error {
	for _, dev := range devs {
		o := OffloadsFor(root, dev)
		if configxml.PfSenseForcesChecksumOff(dev) && !e.opnsense() {
			o.TXCSUM, o.RXCSUM = false, false
		}
		veth, ok := e.Ports.Veth(dev)
		switch {
		case ok:
			if err := e.DataPlane.SetOffloads(ctx, veth, o); err != nil {
				return err
			}
		case dev != "" && dev == e.SpareNIC:
			e.spareOffloads = o
		default:
			continue
		}
		e.loggedOffload(dev)
		e.capabilitiesChanged(dev)
		e.logger().Info("interface configured", "device", dev, "txcsum", o.TXCSUM, "rxcsum", o.RXCSUM, "tso", o.TSO, "lro", o.LRO)
	}
	return nil
}

func (e *Emulator) applyFilter(ctx context.Context, root *configxml.Config) error {
	rs, err := BuildRuleset(root, RulesetOptions{Ports: e.Ports, Blocklist: e.blocklist, BlocklistSize: e.BlocklistSize})
	if err != nil {
		return err
	}
	for _, s := range rs.Skipped {
		e.logger().Warn("filter: not emulated", "what", s)
	}
	pf, debug := rs.PF, []byte(rs.Script)
	if e.opnsense() {
		pf, debug = opnRuleLabels(rs.PF)
	}
	_ = os.WriteFile(e.path("/tmp/rules.debug"), debug, 0o600)
	if err := e.DataPlane.LoadRuleset(ctx, rs.Script); err != nil {
		return err
	}
	e.pf = pf
	e.logger().Info("filter loaded", "rules", len(rs.PF), "nat", NATMode(root), "blocklist", e.blocklist)
	return nil
}

// applySlowdown sets the running profile's slowdown caps (none when the
// profile has no slowdown). A tracking slowdown first removes the caps and
// measures the running configuration in both directions, so it runs after
// every change of the data plane; the caller holds e.mu.
//
// Runs are pooled per running configuration (config.xml without its
// <revision>) and firmware version, and each cap comes from the median of
// the last slowdownWindow runs of its configuration: a sweep applies each
// point several times, and on a shared machine one run can catch a busy
// moment. A direction that cannot be measured (the configuration blocks
// the lab's traffic) is left uncapped with a warning (unless earlier runs
// of the same configuration exist) rather than failing the apply.
func (e *Emulator) applySlowdown(ctx context.Context) error {
	p, _ := e.profile()
	state := e.path(SlowdownStateFile)
	mtu := e.pathMTU(ctx)
	if p.Slowdown == nil {
		_ = os.Remove(state)
		_, _, err := e.shapePorts(ctx, 0, 0, mtu)
		return err
	}
	s := *p.Slowdown
	st := SlowdownState{Version: p.Version, Percent: s.Percent, Tracking: s.Tracking(), MTU: mtu}
	if st.Tracking {
		// Only the slowdown's caps go: the ports keep their link speed,
		// so the configuration is measured as it runs on this link.
		if _, _, err := e.shapePorts(ctx, 0, 0, mtu); err != nil {
			return err
		}
		key := p.Version
		if data, err := e.configBytesForApply(); err == nil {
			key += " " + configKey(data)
		}
		if e.slowRates == nil {
			e.slowRates = map[string]*slowdownSamples{}
		}
		pool := e.slowRates[key]
		if pool == nil {
			pool = &slowdownSamples{}
			e.slowRates[key] = pool
		}
		start := time.Now()
		var errs []string
		failed := [2]bool{}
		for range slowdownRuns {
			for i, d := range []struct {
				reverse bool
				runs    *[]float64
			}{{false, &pool.up}, {true, &pool.down}} {
				if failed[i] {
					continue
				}
				m, err := e.DataPlane.MeasureMbit(ctx, d.reverse)
				if err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					failed[i] = true
					errs = append(errs, err.Error())
					e.logger().Warn("firmware slowdown: cannot measure", "version", p.Version, "reverse", d.reverse, "err", err)
					continue
				}
				*d.runs = append(*d.runs, m)
				if len(*d.runs) > slowdownWindow {
					*d.runs = (*d.runs)[len(*d.runs)-slowdownWindow:]
				}
			}
		}
		st.UpMbit, st.DownMbit = median(pool.up), median(pool.down)
		st.UpSamples, st.DownSamples = append([]float64(nil), pool.up...), append([]float64(nil), pool.down...)
		st.Measurement = fmt.Sprintf("%.1fs", time.Since(start).Seconds())
		if len(errs) > 0 {
			st.Measurement += "; " + strings.Join(errs, "; ")
		}
	}
	st.WanCapMbit, st.LanCapMbit = s.Caps(st.UpMbit, st.DownMbit, st.MTU)
	var err error
	if st.WanRateMbit, st.LanRateMbit, err = e.shapePorts(ctx, st.WanCapMbit, st.LanCapMbit, st.MTU); err != nil {
		return err
	}
	if b, err := json.MarshalIndent(st, "", "  "); err == nil {
		_ = atomicfile.WriteFile(state, append(b, '\n'), 0o644)
	}
	e.logger().Info("firmware slowdown", "version", p.Version, "percent", s.Percent, "tracking", st.Tracking,
		"up_mbit", st.UpMbit, "down_mbit", st.DownMbit, "up_samples", st.UpSamples, "down_samples", st.DownSamples,
		"wan_cap_mbit", st.WanCapMbit, "lan_cap_mbit", st.LanCapMbit, "wan_rate_mbit", st.WanRateMbit, "lan_rate_mbit", st.LanRateMbit, "took", st.Measurement)
	return nil
}

func (e *Emulator) checkPassword(user string, pw []byte) bool {
	if e.PasswordFile == "" || (user != "root" && user != "admin") {
		return false
	}
	data, err := os.ReadFile(e.PasswordFile)
	if err != nil {
		return false
	}
	want, _, _ := strings.Cut(string(data), "\n")
	want = strings.TrimSuffix(want, "\r")
	return want != "" && subtle.ConstantTimeCompare([]byte(want), pw) == 1
}

const (
	// slowdownRuns is how many runs per direction a tracking slowdown
	// measures after each change (up and down alternate).
	slowdownRuns = 2
	// slowdownWindow is how many recent runs of one configuration its cap
	// is the median of (four applies' worth).
	slowdownWindow = 8
)

// slowdownSamples are recent goodput measurements of one configuration.
type slowdownSamples struct{ up, down []float64 }

// configKey identifies a configuration by its content, without the
// <revision> every change rewrites and the layout between elements (a
// package's write_config re-serializes the whole file).
func configKey(data []byte) string {
	data = revisionRE.ReplaceAll(data, nil)
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(data); err == nil {
		doc.Indent(etree.NoIndent)
		doc.WriteSettings.CanonicalEndTags = true
		if b, err := doc.WriteToBytes(); err == nil {
			data = b
		}
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

var revisionRE = regexp.MustCompile(`(?s)<revision>.*?</revision>`)

// median of a non-empty slice; 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// pathMTU is the smaller MTU of the DUT's two ports (1500 when unknown).
func (e *Emulator) pathMTU(ctx context.Context) int {
	mtu := 0
	for _, v := range []string{e.Ports.LanVeth, e.Ports.WanVeth} {
		if l, err := e.DataPlane.Link(ctx, v); err == nil && l.MTU > 0 && (mtu == 0 || l.MTU < mtu) {
			mtu = l.MTU
		}
	}
	if mtu == 0 {
		mtu = 1500
	}
	return mtu
}

// Serve runs the SSH server on addr until ctx ends. Across reboots it stops
// listening and listens again on the same address.
func (e *Emulator) Serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	if e.HostKey == nil {
		return fmt.Errorf("serve: no host key")
	}
	e.lmu.Lock()
	e.rebootCh = make(chan struct{}, 1)
	e.conns = map[*ssh.ServerConn]bool{}
	e.lmu.Unlock()
	e.amu.Lock()
	e.life = ctx
	e.amu.Unlock()
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if meta.User() != "root" && meta.User() != "admin" {
				return nil, fmt.Errorf("unknown user")
			}
			for _, k := range e.AuthorizedKeys {
				if string(k.Marshal()) == string(key.Marshal()) {
					return &ssh.Permissions{}, nil
				}
			}
			return nil, fmt.Errorf("key not authorized")
		},
		PasswordCallback: func(meta ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			if e.checkPassword(meta.User(), pw) {
				return &ssh.Permissions{}, nil
			}
			return nil, fmt.Errorf("password not accepted")
		},
		ServerVersion: "SSH-2.0-OpenSSH_9.6 FreeBSD-20240104",
	}
	cfg.AddHostKey(e.HostKey)
	for {
		var ln net.Listener
		var err error
		for i := 0; i < 50; i++ {
			ln, err = net.Listen("tcp", addr)
			if err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return err
		}
		addr = ln.Addr().String()
		e.lmu.Lock()
		e.ln = ln
		e.lmu.Unlock()
		if ready != nil {
			ready(ln.Addr())
			ready = nil
		}
		stop := context.AfterFunc(ctx, func() { ln.Close() })
		for {
			c, err := ln.Accept()
			if err == nil {
				go e.handleConn(ctx, silentConn{Conn: c, e: e, ctx: ctx}, cfg)
				continue
			}
			if ctx.Err() != nil || e.rebooting() {
				break
			}
			// A transient error (too many open files): keep serving.
			e.logger().Warn("ssh accept", "err", err)
			time.Sleep(100 * time.Millisecond)
		}
		stop()
		if ctx.Err() != nil {
			e.closeConns()
			e.procs.killAll()
			e.stopIDS()
			return nil
		}
		// The listener was closed by a reboot: wait for it to finish.
		select {
		case <-e.rebootCh:
		case <-ctx.Done():
			return nil
		}
	}
}

// Rebooting reports whether the emulator is down for a reboot.
func (e *Emulator) Rebooting() bool { return e.rebooting() }

func (e *Emulator) rebooting() bool {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	return e.down != nil
}

func (e *Emulator) closeConns() {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	for c := range e.conns {
		c.Close()
	}
}

// Shutdown stops what the firewall runs on the machine: the inspection
// engines and the IPsec daemons (the end of the lab's daemon).
func (e *Emulator) Shutdown(ctx context.Context) {
	e.stopIDS()
	e.stopIPsec(ctx)
}

// goDown is the data plane of a box that is down or booting: what the
// emulator applied is gone, the state table empty, and nothing forwards
// until the boot's filter load (applyFilter replaces the table). On
// pfSense forwarding starts later still, with the routing setup after the
// filter; on OPNsense the filter loads before the interfaces, so nothing
// is lenient there. The box goes down at once: a real one forwards on its
// old rules for the seconds its shutdown takes (harsher by those).
//
// upstream: pfsense 2.7.2 src/etc/rc.bootup:252 — `interfaces_configure();`
// upstream: pfsense 2.7.2 src/etc/rc.bootup:278 — `filter_configure_sync();` (the first filter load, after the interfaces)
// upstream: pfsense 2.7.2 src/etc/rc.bootup:315 — `system_routing_enable();`, which sets net.inet.ip.forwarding (system.inc)
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/etc/rc.bootup:88 — `filter_configure_sync(true, false); /* apply default policy before interface setup */`
func (e *Emulator) goDown(ctx context.Context) error {
	return e.DataPlane.Reset(ctx)
}

// Reboot takes SSH away, kills background processes, clears /tmp and
// /var/run, rebuilds the data plane from config.xml, and listens again.
func (e *Emulator) Reboot(ctx context.Context) {
	if !e.linkDown() {
		return
	}
	// The boot ends with the emulator too: its late steps (the package or
	// service start) and its rc scripts stop when the emulator does.
	ctx, end := context.WithCancel(ctx)
	context.AfterFunc(e.lifetime(), end)
	e.lmu.Lock()
	if e.bootEnd != nil {
		e.bootEnd() // the boot before: its rc.d scripts end with it
	}
	e.bootEnd = end
	e.lmu.Unlock()
	e.logger().Info("reboot: going down")
	e.procs.killAll()
	e.stopIDS()
	if err := e.goDown(ctx); err != nil {
		e.logger().Error("reboot: reset data plane", "err", err)
	}
	e.stopIPsec(ctx)
	select {
	case <-time.After(e.RebootDelay):
	case <-ctx.Done():
	}
	if e.lifetime().Err() != nil {
		return // the emulator stopped while the box was down: no boot
	}
	if err := e.switchBootEnv(); err != nil {
		e.logger().Error("reboot: boot environment", "err", err)
	}
	if err := e.boot(ctx, false); err != nil {
		e.logger().Error("reboot: boot", "err", err)
	}
	e.zeroLinkCounters(ctx)
	if e.opnsense() {
		// OPNsense answers its API from rc.bootup's early plugins (the
		// web GUI), and starts its services only after rc.bootup, in the
		// start syshooks: 20-freebsd's rc.freebsd start, Suricata among
		// them, then the other hooks in name order.
		//
		// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/inc/plugins.inc.d/webgui.inc:34 — `'early' => ['webgui_configure_do'],`
		// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/rc.bootup:93 — `plugins_configure('early', true);`
		// upstream: opnsense-core 26.7 src/etc/rc.syshook:61 — `SYSHOOKS="$(find -s ${SYSDIR}/${SYSLEVEL} -type f})"`, run after rc.bootup (src/etc/rc:243)
		// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/rc.syshook.d/start/20-freebsd:4 — `/usr/local/etc/rc.freebsd start`
		boot := e.linkUpBoot()
		select {
		case <-time.After(e.PackageStartDelay):
		case <-ctx.Done():
			return
		}
		e.opnStartHooks(ctx, boot)
		return
	}
	// pfSense answers SSH and forwards on its filter (rc.bootup), then
	// runs pfSense-upgrade's boot stages, then starts the packages.
	//
	// upstream: pfsense 2.7.2 src/etc/pfSense-rc:482 — `/etc/rc.bootup` (sshd, interfaces, the filter)
	// upstream: pfsense 2.7.2 src/etc/pfSense-rc:556 — `&& /usr/local/sbin/${product_name}-upgrade -y -U -b 3`
	// upstream: pfsense 2.7.2 src/etc/pfSense-rc:560 — `&& /usr/local/sbin/fcgicli -f /etc/rc.start_packages`
	boot := e.linkUpBoot()
	select {
	case <-time.After(e.PackageStartDelay):
	case <-ctx.Done():
		return
	}
	// An upgrade's stage 3 (upgradeAtBoot) runs first, in the foreground.
	for e.pkgLocked.Load() && ctx.Err() == nil && e.Boots() == boot {
		time.Sleep(50 * time.Millisecond)
	}
	e.startPackages(ctx, boot)
}

// startPackages is pfSense's rc.start_packages at the end of the boot
// numbered boot: every package synced (Suricata's rc script baked from
// config.xml, its cron job saved where missing) and started, then every
// other rc.d script; /tmp/.rc.start_packages.running while it runs. The
// start runs in the background (startSuricata), so the rc.d scripts run
// while Suricata still starts. A boot that a later reboot overtook starts
// nothing more.
//
// upstream: pfsense 2.7.2 src/etc/rc.start_packages:50 — `@file_put_contents("{$g['tmp_path']}/.rc.start_packages.running", "");`
// upstream: pfsense 2.7.2 src/etc/rc.start_packages:66 — `sync_package($package['name']);` then :68 `start_service($internal_name, true);`
// upstream: pfsense 2.7.2 src/etc/rc.start_packages:84 — `@unlink("{$g['tmp_path']}/.rc.start_packages.running");`
func (e *Emulator) startPackages(ctx context.Context, boot int) {
	const running = "/tmp/.rc.start_packages.running"
	e.mu.Lock()
	if e.boots != boot || e.rebooting() || ctx.Err() != nil {
		e.mu.Unlock()
		return
	}
	_ = os.WriteFile(e.path(running), nil, 0o644)
	root, err := e.configForApply()
	if err == nil {
		err = e.bakeSuricataRC(root, false)
		if err == nil && root.SuricataConfigured() {
			err = e.suricataCronLocked()
		}
	}
	if err != nil {
		e.logger().Error("boot: suricata", "err", err)
	}
	if _, err := os.Stat(e.path(suricataRC)); err == nil {
		e.startSuricata(boot) // under e.mu: no reboot between the check and its lock file
	}
	e.mu.Unlock()
	if e.Boots() != boot || e.rebooting() {
		return
	}
	e.startRCScripts(ctx)
	_ = os.Remove(e.path(running))
}

// opnStartHooks is OPNsense's `rc.syshook start` at the end of the boot
// numbered boot: 20-freebsd starts the services rendered enabled
// (Suricata), then the other start hooks run (startRCScripts). A boot
// that a later reboot overtook starts nothing more.
func (e *Emulator) opnStartHooks(ctx context.Context, boot int) {
	e.mu.Lock()
	if e.boots != boot || e.rebooting() || ctx.Err() != nil {
		e.mu.Unlock()
		return
	}
	root, err := e.configForApply()
	if err == nil {
		err = e.bootIDS(ctx, root)
	}
	if err != nil {
		e.logger().Error("boot: suricata", "err", err)
	}
	e.mu.Unlock()
	if e.Boots() != boot || e.rebooting() {
		return
	}
	e.startRCScripts(ctx)
}

// suricataStartTime is how long the boot's `suricata.sh start` runs before
// its instances run: ldconfig, then each instance's start.
const suricataStartTime = time.Second

// startSuricata is start_service for Suricata at boot: its rc script's
// start in the background (mwexec_bg), a process of its own that holds
// the package's starting lock until the instances run. The caller holds
// e.mu.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/service-utils.inc:108 — `mwexec_bg("{$prefix}{$service['rcfile']} start");`
// upstream: not settled — Suricata's rc_start runs `/etc/rc.d/ldconfig start`, touches `{$g['varrun_path']}/suricata_pkg_starting.lck`, starts each instance and removes the lock (pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc, read in the file index, about character 139,500, no line numbers); checked at run time by fwab's packages hook, which waits on the lock and on the script's process
func (e *Emulator) startSuricata(boot int) {
	const lock = "/var/run/suricata_pkg_starting.lck"
	run, cancel := context.WithCancel(e.lifetime())
	p := e.procs.add("/bin/sh "+suricataRC+" start", cancel)
	_ = os.WriteFile(e.path(lock), nil, 0o644)
	go func() {
		defer func() {
			cancel()
			e.procs.remove(p.pid)
			close(p.done)
		}()
		select {
		case <-time.After(suricataStartTime):
		case <-run.Done():
			return // a reboot
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.boots != boot || e.rebooting() {
			return
		}
		if err := e.suricataBakedLocked(run, "start"); err != nil {
			e.logger().Error("boot: suricata start", "err", err)
		}
		_ = os.Remove(e.path(lock))
	}()
}

// linkUpBoot is linkUp, returning the number of the boot that came up.
func (e *Emulator) linkUpBoot() int {
	e.mu.Lock()
	boot := e.boots
	e.mu.Unlock()
	e.linkUp()
	return boot
}

// startRCScripts is the end of the boot, as each product runs its hooks:
// by path, so that a hook without an execute bit fails with "Permission
// denied" and is skipped (execFile). pfSense's rc.start_packages hands
// every other /usr/local/etc/rc.d/*.sh (Suricata's already runs, by
// startPackages) to /bin/sh with "start", its output appended to
// /tmp/bootup_messages; OPNsense's rc.syshook runs every start hook in
// name order without arguments, and prints which one it invokes and which
// failed. What they print goes to the boot console (BootConsole).
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:54 — `$rcfiles = glob(RCFILEPREFIX . "*.sh");`
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:77 — `fwrite($shell, "{$rcfile} start >>/tmp/bootup_messages 2>&1 &");` (the emulator waits for each)
// upstream: opnsense/core@8215982 src/etc/rc:243 — `/usr/local/etc/rc.syshook start`; rc.syshook:61 runs `find -s` over the level's folder
// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/rc.syshook:69 — `echo ">>> Invoking ${SYSLEVEL} script '${SYSNAME}'"`; :71 runs `${_SYSHOOK} "${@}"`; :72 `echo ">>> Error in ${SYSLEVEL} script '${SYSHOOK}'"`
func (e *Emulator) startRCScripts(ctx context.Context) {
	var console bytes.Buffer
	if !e.opnsense() {
		for _, rc := range e.Glob("/usr/local/etc/rc.d/*.sh") {
			if rc == suricataRC {
				continue
			}
			fmt.Fprintf(&console, " Starting %s...done.\n", rc)
			if code := e.Exec(ctx, fwapi.ShellQuote(rc)+" start >>/tmp/bootup_messages 2>&1", devNull{}, &console, &console); code != 0 {
				e.logger().Error("boot: rc script", "script", rc, "exit", code)
			}
		}
		if msgs, err := os.ReadFile(e.path("/tmp/bootup_messages")); err == nil {
			console.Write(msgs)
		}
	} else {
		hooks := e.Glob("/usr/local/etc/rc.syshook.d/start/*")
		sort.Strings(hooks)
		for _, hook := range hooks {
			name := filepath.Base(hook)
			fmt.Fprintf(&console, ">>> Invoking start script '%s'\n", name[min(3, len(name)):])
			if code := e.Exec(ctx, fwapi.ShellQuote(hook), devNull{}, &console, &console); code != 0 {
				fmt.Fprintf(&console, ">>> Error in start script '%s'\n", name)
				e.logger().Error("boot: syshook", "script", hook, "exit", code)
			}
		}
	}
	e.mu.Lock()
	e.console = append(e.console, console.Bytes()...)
	e.mu.Unlock()
}

// BootConsole is what the emulated boots printed of their hooks, in order:
// pfSense's /tmp/bootup_messages (emptied with /tmp at each boot), and
// OPNsense's rc.syshook lines.
func (e *Emulator) BootConsole() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return string(e.console)
}

// linkDown takes SSH away: new connections are refused (the listener is
// closed) and open ones are cut. It reports false when the link is already
// down (a reboot or a link fault in progress).
func (e *Emulator) linkDown() bool {
	e.lmu.Lock()
	if e.down != nil {
		e.lmu.Unlock()
		return false
	}
	e.down = make(chan struct{})
	ln := e.ln
	e.lmu.Unlock()
	if ln != nil {
		ln.Close()
	}
	e.closeConns()
	return true
}

// linkUp ends linkDown: Serve listens again.
func (e *Emulator) linkUp() {
	e.lmu.Lock()
	close(e.down)
	e.down = nil
	e.lmu.Unlock()
	select {
	case e.rebootCh <- struct{}{}:
	default:
	}
}

func (e *Emulator) handleConn(ctx context.Context, c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		e.logger().Info("ssh handshake failed", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	e.lmu.Lock()
	e.conns[sc] = true
	down := e.down != nil // the link went down during the handshake
	e.lmu.Unlock()
	if down {
		sc.Close()
	}
	defer func() {
		e.lmu.Lock()
		delete(e.conns, sc)
		e.lmu.Unlock()
	}()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		go e.handleSession(ctx, sc, ch, creqs)
	}
}

func (e *Emulator) handleSession(ctx context.Context, conn *ssh.ServerConn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		switch req.Type {
		case "env":
			_ = req.Reply(true, nil)
		case "exec":
			var p struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &p); err != nil {
				_ = req.Reply(false, nil)
				return
			}
			_ = req.Reply(true, nil)
			e.logger().Info("exec", "command", p.Command)
			code, ok := e.execFaulty(ctx, conn, p.Command, ch, ch, ch.Stderr())
			if !ok {
				return // the connection was cut
			}
			_ = ch.CloseWrite()
			_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(code)}))
			return
		case "shell", "pty-req", "subsystem":
			// pfSense's console menu is not emulated; only commands are.
			_ = req.Reply(false, nil)
			if req.Type != "pty-req" {
				fmt.Fprintln(ch.Stderr(), "fwab lab: interactive shells are not emulated; run a command")
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{1}))
				return
			}
		default:
			_ = req.Reply(false, nil)
		}
	}
}

// execFaulty runs an SSH command line under the injected command faults;
// ok is false when a fault cut the connection.
//
// fwab sends every command as a script on the standard input of
// `/bin/sh -s` (fwapi.RemoteShell): for that line the script is what is
// recorded (without its last newline) and what faults match, and it is
// replayed to the login shell; DropAfter then cuts the connection without
// running the script once it is longer than DropAfter bytes (the transfer
// was lost).
func (e *Emulator) execFaulty(ctx context.Context, conn *ssh.ServerConn, line string, stdin io.Reader, stdout, stderr io.Writer) (code int, ok bool) {
	logged, script := line, []byte(nil)
	if line == "/bin/sh -s" {
		data, err := io.ReadAll(stdin)
		if err != nil {
			conn.Close()
			return 0, false
		}
		script = data
		logged = strings.TrimSuffix(string(data), "\n")
		stdin = bytes.NewReader(data)
	}
	e.amu.Lock()
	e.cmdLog = append(e.cmdLog, logged)
	e.amu.Unlock()
	f, faulty := e.commandFault(ctx, logged)
	if !faulty {
		return e.loginShell(ctx, line, stdin, stdout, stderr), true
	}
	select {
	case <-time.After(f.Delay):
	case <-ctx.Done():
		return 143, true
	}
	if f.Drop && f.DropAfter <= 0 {
		conn.Close()
		return 0, false
	}
	if f.answers() || f.Skip {
		io.WriteString(stdout, f.Stdout)
		io.WriteString(stderr, f.Stderr)
		return f.Exit, true
	}
	if !f.Drop {
		return e.loginShell(ctx, line, stdin, stdout, stderr), true
	}
	if script != nil {
		if len(script) > f.DropAfter {
			conn.Close()
			return 0, false
		}
		return e.loginShell(ctx, line, stdin, stdout, stderr), true
	}
	cut := &cutReader{r: stdin, left: f.DropAfter, cut: func() { conn.Close() }}
	code = e.loginShell(ctx, line, cut, stdout, stderr)
	return code, !cut.done
}

// cutReader passes left bytes through, then cuts the connection.
type cutReader struct {
	r    io.Reader
	left int
	cut  func()
	done bool
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.done = true
		c.cut()
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= n
	return n, err
}

// procTable holds the emulator's background processes (daemon(8)).
type procTable struct {
	mu   sync.Mutex
	next int
	m    map[int]*proc
}

type proc struct {
	pid     int
	command string
	cancel  context.CancelFunc
	done    chan struct{}
}

func (t *procTable) add(command string, cancel context.CancelFunc) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[int]*proc{}
		t.next = 41000
	}
	// Like daemon(8): the supervisor takes one pid, the child the next; the
	// -p pid file names the child.
	t.next += 2
	p := &proc{pid: t.next, command: command, cancel: cancel, done: make(chan struct{})}
	t.m[p.pid] = p
	return p
}

// reserve takes a pid for a process the table does not run (an emulated
// Suricata): each start gets a new one, as on the product.
func (t *procTable) reserve() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[int]*proc{}
		t.next = 41000
	}
	t.next++
	return t.next
}

func (t *procTable) remove(pid int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, pid)
}

// get finds a process by its child or supervisor pid.
func (t *procTable) get(pid int) *proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p, ok := t.m[pid]; ok {
		return p
	}
	return t.m[pid+1]
}

func (t *procTable) list() []*proc {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]*proc, 0, len(t.m))
	for _, p := range t.m {
		out = append(out, p)
	}
	return out
}

// kill ends a process and waits for it.
func (t *procTable) kill(pid int) bool {
	p := t.get(pid)
	if p == nil {
		return false
	}
	p.cancel()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
	}
	t.remove(p.pid)
	return true
}

func (t *procTable) killAll() {
	for _, p := range t.list() {
		t.kill(p.pid)
	}
}

// devNull is /dev/null: reads end at once, writes are discarded.
type devNull struct{}

func (devNull) Read([]byte) (int, error)    { return 0, io.EOF }
func (devNull) Write(p []byte) (int, error) { return len(p), nil }
func (devNull) Close() error                { return nil }
