package emu

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/atomicfile"
)

// This file is the emulator's side for tests and tools that need a
// firewall without a lab: an emulator of a chosen product and version,
// served on 127.0.0.1 on a recording data plane, whose faults can be set
// and whose service actions and command lines can be read back.

// ActionReloadAll is the action of pfSense's and OPNsense's rc.reload_all
// (interfaces, filter and more at once), which has no configxml.Action.
const ActionReloadAll configxml.Action = "reload-all"

// ActionInterfaceReconfigure is OPNsense's reconfigure of one interface
// (configctl interface reconfigure KEY), which releases before 26.1 run
// per interface for an interfaces action.
const ActionInterfaceReconfigure configxml.Action = "interface-reconfigure"

// EmulatorOptions choose what an emulator emulates. The zero value is the
// lab's pfSense at its first firmware profile on a recording data plane.
type EmulatorOptions struct {
	// Product is configxml.PfSense (the default) or configxml.OPNsense.
	Product configxml.Flavor
	// Version is the firmware version running at start, e.g.
	// "2.6.0-RELEASE" or "24.7.12"; default the first profile's. A version
	// no profile lists is added as the oldest profile.
	Version string
	// Profiles are the firmware versions it can upgrade through; default
	// DefaultProfilesFor(Product).
	Profiles []Profile
	// Config is config.xml at start; default FactoryConfigAt(Product,
	// Version, NICs).
	Config []byte
	// NICs names the NIC driver of each interface; default igb for both.
	NICs NICs
	// DataPlane receives what the emulator applies; default a new
	// RecordingDataPlane. Ports are its ports; default ports named after
	// NICs with veths that no lab has.
	DataPlane DataPlane
	Ports     Ports
	// Fault is suffered from the start; see Emulator.SetFault.
	Fault Fault
	// RebootDelay is how long a reboot keeps the firewall away; default
	// 300 ms.
	RebootDelay time.Duration
	// PackageStartDelay is how long after SSH (pfSense) or the API
	// (OPNsense) is back a reboot starts the packages and services
	// (Emulator.PackageStartDelay); default 500 ms.
	PackageStartDelay time.Duration
	// SavepointTimer is OPNsense's filter savepoint timer; default 60 s.
	SavepointTimer time.Duration
	// SSHVia is the config interface (wan, lan, optN) the SSH and REST
	// sessions come in through, the management interface:
	// $SSH_CONNECTION names its address, and reconfiguring it drops the
	// sessions (management.go). Default "lan", as on a factory box;
	// NoManagement for none (sessions arrive on 127.0.0.1).
	SSHVia string
	// Password, when set, is a password root and admin may log in with.
	Password string
	Logger   *slog.Logger
	// KernelPackage is the pfSense kernel package; default
	// pfSense-kernel-pfSense.
	KernelPackage string
	// Stage3Time is how long a pfSense upgrade's last stage takes with SSH
	// up; default 200 ms (the lab's daemon: a second).
	Stage3Time time.Duration
	// NoIDSRules leaves an OPNsense without downloaded IDS rulesets, as
	// after a fresh install; default the lab's two.
	NoIDSRules bool
	// Configure, when set, is called with the emulator before it boots:
	// where a lab's test gives it the machine's IPsec, IDS or CPU.
	Configure func(*Emulator)
}

// NICs are the NIC drivers (FreeBSD names: igb, ixl, vtnet, ena) of the
// emulated box's WAN and LAN ports, and of a spare port the config does
// not assign (a management or unused NIC, shown by ifconfig -a and holding
// its own offload flags, outside the data plane). Devices are numbered per
// driver, as FreeBSD does: two igb ports are igb0 (WAN) and igb1 (LAN).
// The driver decides what pfSense does with the offloads: on vtnet and ena
// it forces checksum offload off whatever config.xml says
// (configxml.PfSenseForcesChecksumOff).
type NICs struct{ WAN, LAN, Spare string }

// devices returns the WAN and LAN device names.
func (n NICs) devices() (wan, lan string) {
	w, l := cmp.Or(n.WAN, "igb"), cmp.Or(n.LAN, "igb")
	if w == l {
		return w + "0", l + "1"
	}
	return w + "0", l + "0"
}

// spare returns the spare port's device name, "" without one.
func (n NICs) spare() string {
	if n.Spare == "" {
		return ""
	}
	wan, lan := n.devices()
	for i := 0; ; i++ {
		if d := n.Spare + strconv.Itoa(i); d != wan && d != lan {
			return d
		}
	}
}

// localPorts are the data plane ports of an emulator without a lab; the
// veth names stand for the namespaces a lab would have.
func localPorts(n NICs) Ports {
	wan, lan := n.devices()
	return Ports{WanDev: wan, LanDev: lan, WanVeth: "fwabd1", LanVeth: "fwabd0"}
}

// NewEmulator makes an emulator whose filesystem is dir (created as
// needed) and boots it; Serve and ServeAPI then serve it.
func NewEmulator(ctx context.Context, dir string, o EmulatorOptions) (*Emulator, error) {
	flavor := cmp.Or(string(o.Product), string(configxml.PfSense))
	profiles := o.Profiles
	if profiles == nil {
		profiles = DefaultProfilesFor(configxml.Flavor(flavor))
	}
	if o.Version != "" && !slices.ContainsFunc(profiles, func(p Profile) bool { return p.Version == o.Version }) {
		profiles = append([]Profile{{Version: o.Version, FreeBSD: profiles[0].FreeBSD}}, profiles...)
	}
	version := o.Version
	if version == "" {
		version = profiles[0].Version
	}
	config := o.Config
	if config == nil {
		config = FactoryConfigAt(configxml.Flavor(flavor), version, o.NICs)
	}
	dp := o.DataPlane
	if dp == nil {
		dp = NewRecordingDataPlane()
	}
	host, err := EnsureKey(filepath.Join(dir, HostKeyFile))
	if err != nil {
		return nil, err
	}
	user, err := EnsureKey(filepath.Join(dir, UserKeyFile))
	if err != nil {
		return nil, err
	}
	e := &Emulator{
		Root:              filepath.Join(dir, "root"),
		Flavor:            configxml.Flavor(flavor),
		DataPlane:         dp,
		Ports:             o.Ports,
		Profiles:          profiles,
		HostKey:           host,
		AuthorizedKeys:    []ssh.PublicKey{user.PublicKey()},
		Logger:            o.Logger,
		RebootDelay:       o.RebootDelay,
		PackageStartDelay: cmp.Or(o.PackageStartDelay, 500*time.Millisecond),
		BlocklistSize:     1000,
		SavepointTimer:    o.SavepointTimer,
		SpareNIC:          o.NICs.spare(),
		SSHVia:            o.SSHVia,
		KernelPackage:     o.KernelPackage,
		Stage3Time:        cmp.Or(o.Stage3Time, 200*time.Millisecond),
		NoIDSRules:        o.NoIDSRules,
	}
	switch e.SSHVia {
	case "":
		e.SSHVia = "lan"
	case NoManagement:
		e.SSHVia = ""
	}
	if e.Ports.WanDev == "" && e.Ports.LanDev == "" {
		e.Ports = localPorts(o.NICs)
	}
	if e.RebootDelay == 0 {
		e.RebootDelay = 300 * time.Millisecond
	}
	if o.Password != "" {
		e.PasswordFile = filepath.Join(dir, PasswordFile)
		if err := atomicfile.WriteFile(e.PasswordFile, []byte(o.Password+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if o.Configure != nil {
		o.Configure(e)
	}
	if err := e.Init(); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(e.path("/conf/config.xml"), config, 0o644); err != nil {
		return nil, err
	}
	if err := e.firstBackup(); err != nil {
		return nil, err
	}
	i := slices.IndexFunc(profiles, func(p Profile) bool { return p.Version == version })
	if err := e.writeVersion(profiles[i]); err != nil {
		return nil, err
	}
	if err := e.Boot(ctx); err != nil {
		return nil, err
	}
	e.SetFault(o.Fault)
	return e, nil
}

// Local is an emulator serving SSH (and, for OPNsense, its REST API) on
// 127.0.0.1, with a target that reaches it.
type Local struct {
	*Emulator
	// Target reaches the emulator: SSH with the key in Dir/keys, the host
	// key pinned in a known_hosts file, and for OPNsense the API with its
	// key, secret and CA files.
	Target  *fwapi.Target
	Dir     string
	SSHAddr string
	APIAddr string // "" for pfSense
	cancel  context.CancelFunc
	done    chan error // one value per server when it stops
	servers int
}

// StartLocal makes an emulator in dir (see NewEmulator) and serves it on
// 127.0.0.1 until Close.
func StartLocal(dir string, o EmulatorOptions) (*Local, error) {
	ctx, cancel := context.WithCancel(context.Background())
	l := &Local{Dir: dir, cancel: cancel, done: make(chan error, 2)}
	em, err := NewEmulator(ctx, dir, o)
	if err != nil {
		cancel()
		return nil, err
	}
	l.Emulator = em
	if l.SSHAddr, err = l.serve(func(ready func(net.Addr)) error { return em.Serve(ctx, "127.0.0.1:0", ready) }); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	if em.opnsense() {
		cert, err := EnsureAPICert(dir)
		if err != nil {
			return nil, errors.Join(err, l.Close())
		}
		creds, err := EnsureAPICredentials(dir)
		if err != nil {
			return nil, errors.Join(err, l.Close())
		}
		if l.APIAddr, err = l.serve(func(ready func(net.Addr)) error { return em.ServeAPI(ctx, "127.0.0.1:0", cert, creds, ready) }); err != nil {
			return nil, errors.Join(err, l.Close())
		}
	}
	if err := WriteKnownHosts(dir, l.SSHAddr); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	_, port, _ := net.SplitHostPort(l.SSHAddr)
	p, _ := strconv.Atoi(port)
	l.Target = &fwapi.Target{
		Name: "emulator", Flavor: string(em.flavor()), Host: "127.0.0.1",
		SSH: &fwapi.SSHSpec{Port: p, User: "root", KeyFile: filepath.Join(dir, UserKeyFile), KnownHosts: filepath.Join(dir, KnownHostFile)},
		// The emulated management link rides out a capability change (a
		// short silence), so offload changes reach the LAN too, as the
		// GUI's do; a real box's target decides this for itself.
		OffloadManagement: true,
	}
	if l.APIAddr != "" {
		l.Target.API = &fwapi.APISpec{
			URL:        "https://" + l.APIAddr,
			KeyFile:    filepath.Join(dir, APIKeyFile),
			SecretFile: filepath.Join(dir, APISecretFile),
			CAFile:     filepath.Join(dir, APICAFile),
		}
	}
	return l, nil
}

// serve runs one server in the background and returns its address.
func (l *Local) serve(run func(ready func(net.Addr)) error) (string, error) {
	ready := make(chan string, 1)
	started := make(chan error, 1)
	l.servers++
	go func() {
		err := run(func(a net.Addr) { ready <- a.String() })
		started <- err
		l.done <- err
	}()
	select {
	case a := <-ready:
		return a, nil
	case err := <-started:
		return "", cmp.Or(err, errors.New("server stopped before listening"))
	}
}

// Close stops the servers, background processes and timers, and waits
// for them.
func (l *Local) Close() error {
	l.cancel()
	if l.Emulator != nil {
		l.Shutdown(context.Background())
	}
	var errs []error
	for range l.servers {
		select {
		case err := <-l.done:
			errs = append(errs, err)
		case <-time.After(10 * time.Second):
			return errors.Join(append(errs, errors.New("emulator: a server did not stop within 10s"))...)
		}
	}
	return errors.Join(errs...)
}

// Actions returns the service actions the emulator ran, in order: the
// configxml.Action of each filter reload, interfaces reconfigure, IDS
// restart (or start), IPsec restart and blocklist update, and
// ActionReloadAll and ActionInterfaceReconfigure, whether by command or
// through the REST API.
func (e *Emulator) Actions() []configxml.Action {
	e.amu.Lock()
	defer e.amu.Unlock()
	return slices.Clone(e.actions)
}

// ResetActions forgets the actions run so far.
func (e *Emulator) ResetActions() {
	e.amu.Lock()
	defer e.amu.Unlock()
	e.actions = nil
}

// did records a service action.
func (e *Emulator) did(a configxml.Action) {
	e.amu.Lock()
	defer e.amu.Unlock()
	e.actions = append(e.actions, a)
}

// OffloadLog returns, in order, every device the emulated box set offload
// flags on: "DEV" for pfSense's own apply (boot, rc.reload_interfaces,
// rc.reload_all) and "ifconfig DEV" for an ifconfig run.
func (e *Emulator) OffloadLog() []string {
	e.amu.Lock()
	defer e.amu.Unlock()
	return slices.Clone(e.offloadLog)
}

// ResetOffloadLog forgets the offload applies so far.
func (e *Emulator) ResetOffloadLog() {
	e.amu.Lock()
	defer e.amu.Unlock()
	e.offloadLog = nil
}

func (e *Emulator) loggedOffload(entry string) {
	e.amu.Lock()
	defer e.amu.Unlock()
	e.offloadLog = append(e.offloadLog, entry)
}

// Commands returns the command lines run over SSH, in order.
func (e *Emulator) Commands() []string {
	e.amu.Lock()
	defer e.amu.Unlock()
	return slices.Clone(e.cmdLog)
}

// ResetCommands forgets the command lines run so far.
func (e *Emulator) ResetCommands() {
	e.amu.Lock()
	defer e.amu.Unlock()
	e.cmdLog = nil
}

// Requests returns the REST API requests served, in order, each as the
// route it matched ("POST /api/firewall/filter/apply/{rev}"), or as
// "METHOD /path" when none did.
func (e *Emulator) Requests() []string {
	e.amu.Lock()
	defer e.amu.Unlock()
	return slices.Clone(e.apiLog)
}

// lifetime is the context background work of faults runs in: Serve's.
func (e *Emulator) lifetime() context.Context {
	e.amu.Lock()
	defer e.amu.Unlock()
	if e.life == nil {
		return context.Background()
	}
	return e.life
}

// Boots counts the boots: 1 after start, one more per reboot.
func (e *Emulator) Boots() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.boots
}

// Path maps a firewall path ("/conf/config.xml") to the file holding it.
func (e *Emulator) Path(p string) string { return e.path(p) }

// ReadFile reads a file of the firewall.
func (e *Emulator) ReadFile(p string) ([]byte, error) { return os.ReadFile(e.path(p)) }

// WriteFile writes a file of the firewall, making its folder.
func (e *Emulator) WriteFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(e.path(p)), 0o755); err != nil {
		return err
	}
	return os.WriteFile(e.path(p), data, 0o644)
}

// Glob lists the firewall paths matching pattern.
func (e *Emulator) Glob(pattern string) []string {
	matches, _ := filepath.Glob(e.path(pattern))
	out := make([]string, len(matches))
	for i, m := range matches {
		out[i] = "/" + filepath.ToSlash(strings.TrimPrefix(m, e.Root+string(filepath.Separator)))
	}
	return out
}

// Running reports whether a process started by daemon(8) whose pid file
// is pidFile runs.
func (e *Emulator) Running(pidFile string) bool {
	data, err := os.ReadFile(e.path(pidFile))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	return err == nil && e.procs.get(pid) != nil
}

// The factory configs of the OPNsense releases whose layout differs from
// 26.1's (assets/opnsense/config.xml): before 26.1 the offload settings are
// in system and the IDS mode is ips 0/1; from 26.7 the filter rules are
// MVC (firewall.md gotcha 4).
var (
	//go:embed assets/opnsense/config-25.7.xml
	opnConfig257 []byte
	//go:embed assets/opnsense/config-26.7.xml
	opnConfig267 []byte
)

// FactoryConfigAt is the factory config.xml of a product version, with the
// WAN and LAN on the given NICs: FactoryConfig in that release's layout
// (pfSense's config schema version; OPNsense's element trees).
func FactoryConfigAt(flavor configxml.Flavor, version string, nics NICs) []byte {
	data := FactoryConfig(flavor)
	switch series := opnSeries(version); {
	case flavor != configxml.OPNsense:
		for _, s := range pfSchema {
			if strings.HasPrefix(version, s.release) {
				data = bytes.Replace(data, []byte("<version>23.3</version>"), []byte("<version>"+s.schema+"</version>"), 1)
			}
		}
	case series == "":
	case series < "26.1":
		data = bytes.Clone(opnConfig257)
	case series >= "26.7":
		data = bytes.Clone(opnConfig267)
	}
	wan, lan := nics.devices()
	data = bytes.ReplaceAll(data, []byte("<if>igb0</if>"), []byte("<if>"+wan+"</if>"))
	return bytes.ReplaceAll(data, []byte("<if>igb1</if>"), []byte("<if>"+lan+"</if>"))
}

// pfSchema is pfSense's config schema version per release
// (globals.inc latest_config; firewall.md A-d).
var pfSchema = []struct{ release, schema string }{
	{"2.8", "24.0"}, {"2.7", "23.3"}, {"2.6", "22.2"},
}
