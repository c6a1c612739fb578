package emu

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// IPsec in the lab: one strongSwan charon in the DUT namespace, configured
// from config.xml the way pfSense's ipsec_configure() does, and one in the
// peer namespace that mirrors the DUT's tunnel (addresses, IDs, PSK, traffic
// selectors) but accepts every proposal a matrix may ask for, so that the
// negotiated algorithms are exactly the DUT's. ESP runs in userspace through
// kernel-libipsec (a TUN device, ipsec0): this kernel has no ESP algorithms.

// IPsecPlane runs the lab's IPsec daemons. StrongSwan is the real one.
type IPsecPlane interface {
	// Apply brings IPsec to what the tunnel says: (re)start both charons,
	// load the connection conn (pfSense's con<ikeid>), initiate its child
	// and route the protected networks through the tunnel only.
	// aesni says whether the DUT's ESP may use AES-NI (the boot loaded
	// the aesni module).
	Apply(ctx context.Context, conn string, t *configxml.Tunnel, aesni bool) error
	// Reload is the products' IPsec reload (pfSense `strongswanrc
	// reload`, OPNsense's reconfigure while strongSwan runs): both sides'
	// swanctl.conf are rewritten and loaded into the running charons
	// (swanctl --load-all). Established SAs keep what they negotiated
	// until someone re-establishes them. With the DUT's charon not
	// running it is Apply.
	Reload(ctx context.Context, conn string, t *configxml.Tunnel, aesni bool) error
	// ListSAs runs `swanctl --list-sas` against the DUT's charon and
	// returns what it prints and its exit status.
	ListSAs(ctx context.Context) (out []byte, code int, err error)
	// Swanctl runs swanctl with args against the DUT's charon (as the
	// box's own swanctl talks to /var/run/charon.vici) and returns what
	// it prints and its exit status.
	Swanctl(ctx context.Context, args ...string) (out []byte, code int, err error)
	// Stop ends both charons and restores plain routing.
	Stop(ctx context.Context) error
}

// Paths of the DUT's IPsec files on the firewall, as pfSense has them.
const (
	SwanctlConf = "/var/etc/ipsec/swanctl.conf"
	ViciSocket  = "/var/run/charon.vici"
)

// LabTunnel picks the tunnel the lab emulates from a config: the first
// enabled phase 1 on the WAN interface (OPNsense: from the WAN address)
// that has a phase 2. Others are
// returned as skipped, with the reason.
func LabTunnel(c *configxml.Config) (t *configxml.Tunnel, skipped []string) {
	for _, tun := range c.Tunnels() {
		switch {
		case !tun.Enabled:
			continue
		case t != nil:
			skipped = append(skipped, fmt.Sprintf("tunnel %q: the lab emulates one tunnel", tun.Name))
		case tun.Interface != "wan" && !(tun.Interface == "" && tun.LocalAddr == DUTWanAddr):
			// OPNsense connections name a local address, not an interface.
			skipped = append(skipped, fmt.Sprintf("tunnel %q: on %s%s; the lab's peer is on wan (%s)", tun.Name, tun.Interface, tun.LocalAddr, DUTWanAddr))
		case tun.LocalNet == "" || tun.RemoteNet == "" || tun.Proposal.ESP.Enc == "":
			skipped = append(skipped, fmt.Sprintf("tunnel %q: no enabled phase 2", tun.Name))
		case tun.RemoteAddr != PeerAddr:
			skipped = append(skipped, fmt.Sprintf("tunnel %q: remote gateway %s; the lab's peer is %s", tun.Name, tun.RemoteAddr, PeerAddr))
		default:
			tun := tun
			t = &tun
		}
	}
	return t, skipped
}

// ConnName is the product's name for a tunnel's connection in
// swanctl.conf (configxml.Tunnel.Conn): pfSense con<ikeid>, OPNsense the
// connection's uuid.
func ConnName(t *configxml.Tunnel) string {
	if t.Conn == "" {
		return "con1"
	}
	return t.Conn
}

// ChildName is the name of the tunnel's (first) child SA.
func ChildName(t *configxml.Tunnel) string {
	if len(t.Children) == 0 {
		return ConnName(t)
	}
	return t.Children[0]
}

// ipsecHow is how a product command brings strongSwan to the config.
type ipsecHow int

const (
	// ipsecRestart stops and starts strongSwan: every SA on the box is
	// torn down and re-established.
	ipsecRestart ipsecHow = iota
	// ipsecReload loads the new configuration into the running daemon
	// (starting it when none runs): established SAs stay on what they
	// negotiated.
	ipsecReload
)

func (h ipsecHow) String() string {
	if h == ipsecReload {
		return "reload"
	}
	return "restart"
}

// ipsecStep is one IPsec apply, worked out under e.mu: what runs then
// without it.
type ipsecStep struct {
	plane IPsecPlane
	t     *configxml.Tunnel
	conn  string
	aesni bool
	up    bool // strongSwan runs afterwards (OPNsense: the switch alone)
	how   ipsecHow
}

// ipsecStepFor works out an apply of root. The caller holds e.mu.
func (e *Emulator) ipsecStepFor(root *configxml.Config, how ipsecHow) ipsecStep {
	t, skipped := LabTunnel(root)
	for _, s := range skipped {
		e.logger().Warn("ipsec: not emulated", "what", s)
	}
	// OPNsense runs strongSwan while the service switch is on, tunnels or
	// none, and its reconfigure stops it while the switch is off.
	// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/ServiceController.php:39 — `$internalServiceEnabled = 'general.enabled'`
	// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/opnsense/mvc/app/controllers/OPNsense/Base/ApiMutableServiceControllerBase.php:193 — `if ($restart || !$enabled)` stop; start only `if ($enabled)`
	up := t != nil
	if e.opnsense() {
		up, _ = root.IPsecSwitch()
	}
	st := ipsecStep{plane: e.IPsec, t: t, up: up, how: how}
	if t != nil {
		st.conn = ConnName(t)
		// e.mu is held: the modules are the last boot's.
		st.aesni = e.hasKernelModuleLocked("aesni")
	}
	return st
}

// runIPsecStep carries the step out. With no tunnel strongSwan stops, in the
// foreground as both products stop it.
func (e *Emulator) runIPsecStep(ctx context.Context, st ipsecStep) error {
	if st.plane == nil {
		e.setIPsecUp(st.up)
		return nil
	}
	if st.t == nil {
		_ = os.Remove(e.path(SwanctlConf))
		if err := st.plane.Stop(ctx); err != nil {
			return err
		}
		e.setIPsecUp(st.up) // OPNsense: charon without connections
		e.logger().Info("ipsec: no tunnel enabled; plain routing")
		return nil
	}
	var err error
	if st.how == ipsecReload {
		err = st.plane.Reload(ctx, st.conn, st.t, st.aesni)
	} else {
		err = st.plane.Apply(ctx, st.conn, st.t, st.aesni)
	}
	if err != nil {
		return err
	}
	e.setIPsecUp(st.up)
	e.logger().Info("ipsec: "+st.how.String(), "name", st.t.Name, "conn", st.conn, "ike", st.t.Proposal.IKE.String(), "esp", st.t.Proposal.ESP.String())
	return nil
}

// applyIPsec brings IPsec to what the config says, before it returns (the
// boot). The caller holds e.mu.
func (e *Emulator) applyIPsec(ctx context.Context, root *configxml.Config, how ipsecHow) error {
	st := e.ipsecStepFor(root, how)
	if how == ipsecRestart {
		e.setIPsecUp(false)
	}
	return e.runIPsecStep(ctx, st)
}

// ipsecBackgroundDelay is how long the products' rc script takes to get
// to the daemon after the apply returned.
const ipsecBackgroundDelay = 200 * time.Millisecond

// applyIPsecBackground is what both products' apply does: the
// configuration is generated now, and the daemon is started, reloaded or
// restarted by the rc script in the background, after the command that
// asked has returned; a stop runs in the foreground. The caller holds e.mu.
//
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:3261 — `mwexec_bg("/usr/local/sbin/strongswanrc restart", false);` for ipsec_configure(true), :3264 reload and :3266 start otherwise
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:3116 — `mwexec("/usr/local/sbin/strongswanrc stop");` in the foreground when IPsec is off
// upstream: opnsense-core 26.1 src/etc/inc/plugins.inc.d/ipsec.inc:1462 — `mwexecfb('/usr/local/etc/rc.d/strongswan onereload');` while charon runs, :1464 onestart otherwise
func (e *Emulator) applyIPsecBackground(ctx context.Context, root *configxml.Config, how ipsecHow) error {
	st := e.ipsecStepFor(root, how)
	if st.plane == nil || st.t == nil {
		e.ipsecGen.Add(1) // a stop supersedes any pending reload
		return e.runIPsecStep(ctx, st)
	}
	if how == ipsecRestart {
		e.setIPsecUp(false)
	}
	// The rc script as ps shows it on each product.
	command := "/bin/sh /usr/local/sbin/strongswanrc " + how.String()
	if e.opnsense() {
		command = "/bin/sh /usr/local/etc/rc.d/strongswan one" + how.String()
	}
	gen := e.ipsecGen.Add(1)
	bg, cancel := context.WithCancel(context.Background())
	p := e.procs.add(command, cancel)
	go func() {
		defer close(p.done)
		defer e.procs.remove(p.pid)
		defer cancel()
		select {
		case <-time.After(ipsecBackgroundDelay):
		case <-bg.Done():
			return
		}
		// A later apply superseded this one: the box's script would read
		// the newer swanctl.conf, and the later apply's own step loads it.
		if e.ipsecGen.Load() != gen {
			return
		}
		if err := e.runIPsecStep(bg, st); err != nil {
			e.logger().Error("ipsec: background "+how.String(), "err", err)
		}
	}()
	return nil
}

// setIPsecUp records whether strongSwan runs: a charon that starts takes a
// new pid, one that keeps running (a reload) keeps its own.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/usr/local/sbin/strongswanrc:27 — `command_args="-S -P ${pidfile} ${charon_command} --use-syslog"`: daemon(8) runs charon, and a restart is a new process
func (e *Emulator) setIPsecUp(up bool) {
	e.ipsecUp.Store(up)
	switch {
	case !up:
		e.charonPID.Store(0)
	case e.charonPID.Load() == 0:
		e.procs.reserve() // daemon(8), the supervisor
		e.charonPID.Store(int64(e.procs.reserve()))
	}
}

// charonProcesses are the ps lines of the DUT's charon while it runs: the
// daemon(8) supervisor pfSense's strongswanrc starts it under, then charon.
//
// upstream: not settled — OPNsense starts charon through the strongswan port's rc.d script, not in the upstream copy; the lab shows pfSense's command line on both; checked at run time by fwapi, which matches charon by its program name only
func (e *Emulator) charonProcesses() [][2]string {
	pid := e.charonPID.Load()
	if pid == 0 {
		return nil
	}
	const charon = "/usr/local/libexec/ipsec/charon"
	return [][2]string{
		{strconv.FormatInt(pid-1, 10), "daemon: " + charon + "[" + strconv.FormatInt(pid, 10) + "] (daemon)"},
		{strconv.FormatInt(pid, 10), charon + " --use-syslog"},
	}
}

// stopIPsec ends the IPsec daemons (reboot, shutdown).
func (e *Emulator) stopIPsec(ctx context.Context) {
	e.setIPsecUp(false)
	e.mu.Lock()
	p := e.IPsec
	e.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Stop(ctx); err != nil {
		e.logger().Error("ipsec: stop", "err", err)
	}
}

// cmdIPsecRestart is pfSsh.php playback restartipsec / svc restart ipsec:
// ipsec_configure(true) regenerates swanctl.conf from config.xml and
// restarts strongSwan in the background, every tunnel on the box with it.
//
// upstream: pfsense 2.7.2 src/etc/phpshellsessions/restartipsec:28 — `ipsec_configure(true);`
func (e *Emulator) cmdIPsecRestart(ctx context.Context, c *call) error {
	return e.ipsecConfigure(ctx, c, ipsecRestart)
}

// ipsecConfigure is pfSense's ipsec_configure($restart): the filter, then
// strongSwan in the background.
func (e *Emulator) ipsecConfigure(ctx context.Context, c *call, how ipsecHow) error {
	e.did(configxml.ActionIPsecRestart)
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return c.errorf(1, "ipsec: %v", err)
	}
	if err := e.applyIPsecBackground(ctx, root, how); err != nil {
		return c.errorf(1, "%v", err)
	}
	if err := e.applySlowdown(ctx); err != nil {
		return c.errorf(1, "ipsec: %v", err)
	}
	return nil
}

// swanctlForms are the swanctl invocations the lab passes through to the
// DUT's charon: the command, then the options it may take (those that
// take a value mapped to true).
var swanctlForms = map[string]map[string]bool{
	"--list-sas":  {},
	"-l":          {},
	"--stats":     {},
	"--terminate": {"--ike": true, "--child": true, "--force": false, "--timeout": true},
	"--initiate":  {"--ike": true, "--child": true, "--timeout": true},
}

// cmdSwanctl passes swanctl through to the real swanctl on the DUT's
// charon, so the output and exit status are exactly strongSwan's: listing
// SAs, the daemon's stats, and terminating or initiating one connection.
func (e *Emulator) cmdSwanctl(ctx context.Context, c *call) error {
	args := c.args[1:]
	opts, ok := map[string]bool(nil), len(args) > 0
	if ok {
		opts, ok = swanctlForms[args[0]]
	}
	for i := 1; ok && i < len(args); i++ {
		takesValue, known := opts[args[i]]
		switch {
		case !known:
			ok = false
		case takesValue:
			i++
			ok = i < len(args)
		}
	}
	if !ok {
		return c.errorf(1, "swanctl: the lab emulates --list-sas, --stats, --terminate --ike|--child NAME [--force] [--timeout N] and --initiate --ike|--child NAME [--timeout N]")
	}
	e.mu.Lock()
	p := e.IPsec
	e.mu.Unlock()
	if p == nil {
		if args[0] == "--list-sas" || args[0] == "-l" {
			return nil // no IPsec in this emulator: no SAs
		}
		return c.errorf(1, "connecting to 'unix://%s' failed: No such file or directory", ViciSocket)
	}
	if args[0] == "-l" {
		args = []string{"--list-sas"}
	}
	out, code, err := p.Swanctl(ctx, args...)
	if err != nil {
		return c.errorf(1, "swanctl: %v", err)
	}
	if _, err := io.Copy(c.stdout, bytes.NewReader(out)); err != nil {
		return err
	}
	if code != 0 {
		return status(uint8(code))
	}
	return nil
}

// TunnelPSKFile is where Up writes the PSK of the factory config's tunnel,
// for a matrix's tunnel: psk_file (examples/ipsec-ciphers.yaml). It is a lab
// key, not a secret.
const TunnelPSKFile = "ipsec-psk"

func WriteTunnelPSK(dir string) error {
	c, err := parseConfig(DefaultConfig(), configxml.PfSense)
	if err != nil {
		return err
	}
	for _, t := range c.Tunnels() {
		if t.PSK != "" {
			return atomicfile.WriteFile(filepath.Join(dir, TunnelPSKFile), []byte(t.PSK+"\n"), 0o600)
		}
	}
	return nil
}
