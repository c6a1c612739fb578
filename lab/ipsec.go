package lab

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
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
	pfSwanctlConf = "/var/etc/ipsec/swanctl.conf"
	pfViciSocket  = "/var/run/charon.vici"
)

// ikeProposalsAll and espProposalsAll are what the peer accepts: every
// cipher, integrity algorithm and DH group configxml lets a pfSense tunnel
// take (2.6 and 2.7), AEAD and classic proposals apart as strongSwan needs.
const (
	dhAll           = "modp2048-modp3072-modp4096-modp6144-modp8192-modp1024-modp1536-ecp256-ecp384-ecp521-curve25519-curve448-ecp256bp-ecp384bp-ecp512bp"
	ikeProposalsAll = "aes128gcm16-aes192gcm16-aes256gcm16-aes128gcm12-aes192gcm12-aes256gcm12-aes128gcm8-aes192gcm8-aes256gcm8-chacha20poly1305-prfsha256-prfsha1-prfsha384-prfsha512-prfaesxcbc-" + dhAll +
		", aes128-aes192-aes256-3des-blowfish-cast128-sha256-sha1-sha384-sha512-aesxcbc-md5-" + dhAll
	espProposalsAll = "aes128gcm16-aes192gcm16-aes256gcm16-aes128gcm12-aes192gcm12-aes256gcm12-aes128gcm8-aes192gcm8-aes256gcm8-chacha20poly1305" +
		", aes128-aes192-aes256-3des-blowfish-cast128-sha256-sha1-sha384-sha512-aesxcbc-md5"
)

// charonPlugins is the load list from the lab recipe: kernel-libipsec MUST
// come before kernel-netlink, or kernel xfrm (without ESP algorithms here)
// wins and no CHILD_SA is built. ACCEL is where charonLoad puts the AES
// providers.
const charonPlugins = "random nonce ACCEL sha1 sha2 md5 hmac xcbc chapoly curve25519 gmp pem pkcs1 x509 pubkey kdf kernel-libipsec kernel-netlink socket-default vici"

// charonLoad is the load list of a charon with or without AES-NI. charon
// takes an algorithm from the first plugin registered for it, in load
// order (no crypto benchmark is configured): with AES-NI, the aesni
// plugin's AES-CBC and AES-GCM come first; without, the software aes
// plugin's AES and the gcm plugin's GCM built on it. openssl comes after
// either way and serves 3DES, Blowfish, CAST, the DH groups and hashes, so
// those do not change with the accelerator.
//
// upstream: not settled — that strongSwan's crypto factory prefers the earlier-registered plugin when speeds are not measured (src/libstrongswan/crypto/crypto_factory.c, not in the upstream copy); checked at run time by the lab's TestIPsecCiphersThroughTheLab, which reads `swanctl --list-algs` (Algorithms)
func charonLoad(aesni bool) string {
	accel := "aes gcm openssl"
	if aesni {
		accel = "aesni openssl aes gcm"
	}
	return strings.Replace(charonPlugins, "ACCEL", accel, 1)
}

// pluginPackages names the Debian package of each plugin outside
// libstrongswan, for the error when one is missing.
var pluginPackages = map[string]string{
	"openssl": "libstrongswan-standard-plugins", "gcm": "libstrongswan-standard-plugins", "aesni": "libstrongswan-standard-plugins",
	"chapoly": "libstrongswan-extra-plugins", "curve25519": "libstrongswan-extra-plugins",
	"kernel-libipsec": "libcharon-extra-plugins", "socket-default": "strongswan-libcharon",
	"vici": "strongswan-swanctl",
}

// PluginDir is where Debian's strongSwan keeps its plugins.
const PluginDir = "/usr/lib/ipsec/plugins"

// missingPlugins names the plugins charon would not find (with AES-NI or
// without: the same plugins), in one error with the apt-get line to run;
// nil when all are there.
func missingPlugins(dir string) error {
	var missing, pkgs []string
	seen := map[string]bool{}
	for _, p := range strings.Fields(charonLoad(true)) {
		if _, err := os.Stat(filepath.Join(dir, "libstrongswan-"+p+".so")); err == nil {
			continue
		}
		missing = append(missing, p)
		pkg := pluginPackages[p]
		if pkg == "" {
			pkg = "libstrongswan"
		}
		if !seen[pkg] {
			seen[pkg] = true
			pkgs = append(pkgs, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("ipsec: strongSwan plugins missing: %s; install with: apt-get install -y %s (or run scripts/setup.sh)",
		strings.Join(missing, ", "), strings.Join(pkgs, " "))
}

// labTunnel picks the tunnel the lab emulates from a config: the first
// enabled phase 1 on the WAN interface (OPNsense: from the WAN address)
// that has a phase 2. Others are
// returned as skipped, with the reason.
func labTunnel(c *configxml.Config) (t *configxml.Tunnel, skipped []string) {
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

// connName is the product's name for a tunnel's connection in
// swanctl.conf (configxml.Tunnel.Conn): pfSense con<ikeid>, OPNsense the
// connection's uuid.
func connName(t *configxml.Tunnel) string {
	if t.Conn == "" {
		return "con1"
	}
	return t.Conn
}

// childName is the name of the tunnel's (first) child SA.
func childName(t *configxml.Tunnel) string {
	if len(t.Children) == 0 {
		return connName(t)
	}
	return t.Children[0]
}

// swanctlSide is one end of the tunnel as swanctl.conf needs it.
type swanctlSide struct {
	Conn, Child               string
	LocalAddr, RemoteAddr     string
	LocalID, RemoteID         string
	LocalNet, RemoteNet       string
	IKEProposals, ESPProposal string
	PSK                       string
}

// swanctlConf writes a swanctl.conf in the layout pfSense's ipsec.inc
// generates (connections, one child, secrets with the PSK base64-encoded as
// 0s…, so no quoting issue can arise). Rekeying and DPD are off so that an
// SA stays the same through a measurement.
func swanctlConf(s swanctlSide) []byte {
	var b bytes.Buffer
	id := func(v string) string {
		if v == "" {
			return "%any"
		}
		return "fqdn:" + v
	}
	fmt.Fprintf(&b, `# This file is automatically generated. Do not edit
connections {
	%[1]s {
		fragmentation = yes
		unique = replace
		version = 2
		proposals = %[2]s
		dpd_delay = 0s
		rekey_time = 0s
		reauth_time = 0s
		encap = no
		mobike = no
		local_addrs = %[3]s
		remote_addrs = %[4]s
		local {
			id = %[5]s
			auth = psk
		}
		remote {
			id = %[6]s
			auth = psk
		}
		children {
			%[11]s {
				close_action = none
				dpd_action = clear
				policies = yes
				life_time = 0s
				rekey_time = 0s
				rand_time = 0s
				start_action = none
				remote_ts = %[7]s
				local_ts = %[8]s
				esp_proposals = %[9]s
			}
		}
	}
}
secrets {
	ike-0 {
		secret = 0s%[10]s
		id-0 = %[5]s
		id-1 = %[6]s
	}
}
`, s.Conn, s.IKEProposals, s.LocalAddr, s.RemoteAddr, id(s.LocalID), id(s.RemoteID),
		s.RemoteNet, s.LocalNet, s.ESPProposal, base64.StdEncoding.EncodeToString([]byte(s.PSK)), s.Child)
	return b.Bytes()
}

// dutSide is the DUT's end of a tunnel: exactly the configured proposal.
func dutSide(conn string, t *configxml.Tunnel) swanctlSide {
	return swanctlSide{
		Conn: conn, Child: childName(t), LocalAddr: t.LocalAddr, RemoteAddr: t.RemoteAddr,
		LocalID: t.LocalID, RemoteID: t.RemoteID, LocalNet: t.LocalNet, RemoteNet: t.RemoteNet,
		IKEProposals: t.Proposal.IKE.String(), ESPProposal: t.Proposal.ESP.String(), PSK: t.PSK,
	}
}

// peerSide is the peer's end: the mirror of the DUT's, accepting every
// proposal.
func peerSide(conn string, t *configxml.Tunnel) swanctlSide {
	return swanctlSide{
		Conn: conn, Child: childName(t), LocalAddr: t.RemoteAddr, RemoteAddr: t.LocalAddr,
		LocalID: t.RemoteID, RemoteID: t.LocalID, LocalNet: t.RemoteNet, RemoteNet: t.LocalNet,
		IKEProposals: ikeProposalsAll, ESPProposal: espProposalsAll, PSK: t.PSK,
	}
}

// strongswanConf is the charon-systemd configuration of one side (lab
// recipe 1): its own vici socket and log, kernel-libipsec first, AES from
// AES-NI or not (charonLoad).
func strongswanConf(dir string, aesni bool) []byte {
	return []byte(fmt.Sprintf(`charon-systemd {
	load = %s
	load_modular = no
	install_routes = yes
	threads = 16
	plugins {
		vici {
			socket = unix://%s
		}
	}
	filelog {
		lab {
			path = %s
			time_format = %%b %%e %%T
			default = 1
			flush_line = yes
		}
	}
	journal {
		default = -1
	}
}
`, charonLoad(aesni), filepath.Join(dir, "charon.vici"), filepath.Join(dir, "charon.log")))
}

// StrongSwan runs the two charons of a lab topology. Its files live in Dir
// (dut/ and peer/: strongswan.conf, swanctl.conf, charon.vici, charon.pid,
// charon.log); the DUT's swanctl.conf is also written where pfSense keeps
// it, under FirewallRoot.
type StrongSwan struct {
	Topo         Topology
	Dir          string
	FirewallRoot string // the emulated firewall's filesystem; "" = do not mirror
	// Charon is the daemon binary; default /usr/sbin/charon-systemd.
	Charon string
	// PluginDir is checked for the plugins charon loads; default PluginDir.
	PluginDir string
	// CPU is the cgroup the DUT's charon runs in (the DUT's service
	// budget: its userspace ESP); nil: none. The peer's charon is not the
	// DUT's and runs outside it.
	CPU *CPUGroup

	mu     sync.Mutex
	charon map[string]*charonProc // by side
}

type charonProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

var _ IPsecPlane = (*StrongSwan)(nil)

func (s *StrongSwan) sideDir(side string) string { return filepath.Join(s.Dir, side) }
func (s *StrongSwan) uri(side string) string {
	return "unix://" + filepath.Join(s.sideDir(side), "charon.vici")
}

func (s *StrongSwan) Apply(ctx context.Context, conn string, t *configxml.Tunnel, aesni bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applyLocked(ctx, conn, t, aesni)
}

func (s *StrongSwan) Reload(ctx context.Context, conn string, t *configxml.Tunnel, aesni bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.charon["dut"]
	running := p != nil && s.charon["peer"] != nil
	if running {
		select {
		case <-p.done:
			running = false
		default:
		}
	}
	if !running {
		return s.applyLocked(ctx, conn, t, aesni)
	}
	// The running charons keep their strongswan.conf (plugins): only
	// the connections and secrets are reloaded.
	if err := s.writeConfs(conn, t, aesni, false); err != nil {
		return err
	}
	for _, side := range []string{"peer", "dut"} {
		if _, err := s.swanctl(ctx, "--load-all", "--noprompt", "--file", filepath.Join(s.sideDir(side), "swanctl.conf"), "--uri", s.uri(side)); err != nil {
			return fmt.Errorf("ipsec: reload the %s configuration: %w", side, err)
		}
	}
	return nil
}

func (s *StrongSwan) applyLocked(ctx context.Context, conn string, t *configxml.Tunnel, aesni bool) error {
	// A restart: stop both, then start.
	s.stopLocked()
	dir := s.PluginDir
	if dir == "" {
		dir = PluginDir
	}
	if err := missingPlugins(dir); err != nil {
		return err
	}
	// A unix socket path has at most 107 bytes.
	if p := filepath.Join(s.sideDir("peer"), "charon.vici"); len(p) > 107 {
		return fmt.Errorf("ipsec: the vici socket path %s is too long for a unix socket (%d bytes, at most 107); use a shorter lab --dir", p, len(p))
	}
	if err := s.writeConfs(conn, t, aesni, true); err != nil {
		return err
	}
	// Only the tunnel may carry traffic between the two networks: a
	// tunnel that fails then fails closed instead of leaking plaintext.
	s.plainRoutes(ctx, false)
	for _, side := range []string{"peer", "dut"} {
		if err := s.start(ctx, side); err != nil {
			return err
		}
		if _, err := s.swanctl(ctx, "--load-all", "--noprompt", "--file", filepath.Join(s.sideDir(side), "swanctl.conf"), "--uri", s.uri(side)); err != nil {
			return fmt.Errorf("ipsec: load the %s configuration: %w", side, err)
		}
	}
	if out, err := s.swanctl(ctx, "--initiate", "--child", childName(t), "--timeout", "20", "--uri", s.uri("dut")); err != nil {
		return fmt.Errorf("ipsec: initiate %s (proposal %s): %w; %s", childName(t), t.Proposal, err, lastLines(out, 3))
	}
	return nil
}

// writeConfs writes both sides' swanctl.conf (the DUT's also where pfSense
// keeps it) and, with settings, their strongswan.conf.
func (s *StrongSwan) writeConfs(conn string, t *configxml.Tunnel, aesni, settings bool) error {
	for side, conf := range map[string][]byte{
		"dut":  swanctlConf(dutSide(conn, t)),
		"peer": swanctlConf(peerSide(conn, t)),
	} {
		d := s.sideDir(side)
		for _, sub := range []string{"", "x509", "x509ca", "private", "rsa", "ecdsa", "pkcs8", "x509aa", "x509ocsp", "x509crl", "x509ac", "pubkey", "pkcs12"} {
			if err := os.MkdirAll(filepath.Join(d, sub), 0o700); err != nil {
				return err
			}
		}
		// The peer is the far site's gateway, not the DUT: always AES-NI,
		// so that only the DUT's accelerator changes.
		if settings {
			if err := atomicfile.WriteFile(filepath.Join(d, "strongswan.conf"), strongswanConf(d, side == "peer" || aesni), 0o600); err != nil {
				return err
			}
		}
		if err := atomicfile.WriteFile(filepath.Join(d, "swanctl.conf"), conf, 0o600); err != nil {
			return err
		}
		if side == "dut" && s.FirewallRoot != "" {
			p := filepath.Join(s.FirewallRoot, pfSwanctlConf)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := atomicfile.WriteFile(p, conf, 0o600); err != nil {
				return err
			}
		}
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func (s *StrongSwan) swanctl(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "swanctl", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("swanctl %s: %w", args[0], err)
	}
	return string(out), nil
}

// start runs charon-systemd in the side's namespace and waits for its vici
// socket.
func (s *StrongSwan) start(ctx context.Context, side string) error {
	bin := s.Charon
	if bin == "" {
		bin = "/usr/sbin/charon-systemd"
	}
	d := s.sideDir(side)
	_ = os.Remove(filepath.Join(d, "charon.vici"))
	logf, err := os.OpenFile(filepath.Join(d, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	// ip netns exec execs the daemon: the child's pid is charon's.
	var cg *CPUGroup
	if side == "dut" {
		cg = s.CPU
	}
	argv := cg.Wrap("ip", "netns", "exec", s.Topo.Namespace(side), bin)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "STRONGSWAN_CONF="+filepath.Join(d, "strongswan.conf"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("ipsec: start charon in %s: %w", s.Topo.Namespace(side), err)
	}
	p := &charonProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	if s.charon == nil {
		s.charon = map[string]*charonProc{}
	}
	s.charon[side] = p
	if err := atomicfile.WriteFile(filepath.Join(d, "charon.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(d, "charon.vici")); err == nil {
			return nil
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(filepath.Join(d, "stdout.log"))
			return fmt.Errorf("ipsec: charon in %s exited at start: %s", s.Topo.Namespace(side), lastLines(string(b), 3))
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ipsec: charon in %s: no vici socket after 10 s; see %s", s.Topo.Namespace(side), filepath.Join(d, "charon.log"))
		}
	}
}

// plainRoutes adds (or removes) the routes between the LAN and the server
// network that the topology has without a tunnel.
func (s *StrongSwan) plainRoutes(ctx context.Context, on bool) error {
	verb := "del"
	if on {
		verb = "replace"
	}
	_, err1 := run(ctx, nil, "ip", "-n", s.Topo.Namespace("dut"), "route", verb, ServerNet, "via", PeerAddr)
	_, err2 := run(ctx, nil, "ip", "-n", s.Topo.Namespace("peer"), "route", verb, LanNet, "via", DUTWanAddr)
	if on {
		return errors.Join(err1, err2)
	}
	return nil // deleting a route that is gone is fine
}

// Stop ends both charons (SIGTERM, waiting: charon sends an IKE DELETE
// first and takes more than a second) and restores plain routing.
func (s *StrongSwan) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	return s.plainRoutes(ctx, true)
}

func (s *StrongSwan) stopLocked() {
	var wg sync.WaitGroup
	for side, p := range s.charon {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				_ = p.cmd.Process.Kill()
				<-p.done
			}
		}()
		delete(s.charon, side)
		_ = os.Remove(filepath.Join(s.sideDir(side), "charon.pid"))
	}
	wg.Wait()
	// A charon this process did not start (an earlier daemon's) is found by
	// its pid file.
	for _, side := range []string{"dut", "peer"} {
		if b, err := os.ReadFile(filepath.Join(s.sideDir(side), "charon.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && isCharon(pid) {
				_ = killPID(pid)
			}
			_ = os.Remove(filepath.Join(s.sideDir(side), "charon.pid"))
		}
	}
}

func isCharon(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && alive(pid) && strings.Contains(string(b), "charon")
}

// Algorithms is `swanctl --list-algs` of the DUT's charon: each algorithm
// with the plugin that serves it, as AES_GCM_16[aesni].
func (s *StrongSwan) Algorithms(ctx context.Context) (string, error) {
	return s.swanctl(ctx, "--list-algs", "--uri", s.uri("dut"))
}

func (s *StrongSwan) ListSAs(ctx context.Context) ([]byte, int, error) {
	return s.Swanctl(ctx, "--list-sas")
}

func (s *StrongSwan) Swanctl(ctx context.Context, args ...string) ([]byte, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "swanctl", append(slices.Clip(args), "--uri", s.uri("dut"))...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	// The firewall's socket is /var/run/charon.vici: show that path.
	text := bytes.ReplaceAll(out.Bytes(), []byte(s.uri("dut")), []byte("unix://"+pfViciSocket))
	var ee *exec.ExitError
	switch {
	case err == nil:
		return text, 0, nil
	case errors.As(err, &ee):
		return text, ee.ExitCode(), nil
	}
	return nil, 0, err
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
	t, skipped := labTunnel(root)
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
		st.conn = connName(t)
		// e.mu is held: the modules are the last boot's.
		st.aesni = e.hasKernelModuleLocked("aesni")
	}
	return st
}

// runIPsecStep carries the step out. With no tunnel strongSwan stops, in the
// foreground as both products stop it.
func (e *Emulator) runIPsecStep(ctx context.Context, st ipsecStep) error {
	if st.plane == nil {
		e.ipsecUp.Store(st.up)
		return nil
	}
	if st.t == nil {
		_ = os.Remove(e.path(pfSwanctlConf))
		if err := st.plane.Stop(ctx); err != nil {
			return err
		}
		e.ipsecUp.Store(st.up) // OPNsense: charon without connections
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
	e.ipsecUp.Store(st.up)
	e.logger().Info("ipsec: "+st.how.String(), "name", st.t.Name, "conn", st.conn, "ike", st.t.Proposal.IKE.String(), "esp", st.t.Proposal.ESP.String())
	return nil
}

// applyIPsec brings IPsec to what the config says, before it returns (the
// boot). The caller holds e.mu.
func (e *Emulator) applyIPsec(ctx context.Context, root *configxml.Config, how ipsecHow) error {
	st := e.ipsecStepFor(root, how)
	if how == ipsecRestart {
		e.ipsecUp.Store(false)
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
		e.ipsecUp.Store(false)
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

// stopIPsec ends the IPsec daemons (reboot, shutdown).
func (e *Emulator) stopIPsec(ctx context.Context) {
	e.ipsecUp.Store(false)
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
		return c.errorf(1, "connecting to 'unix://%s' failed: No such file or directory", pfViciSocket)
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

// tunnelPSKFile is where Up writes the PSK of the factory config's tunnel,
// for a matrix's tunnel: psk_file (examples/ipsec-ciphers.yaml). It is a lab
// key, not a secret.
const tunnelPSKFile = "ipsec-psk"

func writeTunnelPSK(dir string) error {
	c, err := parseConfig(DefaultConfig(), configxml.PfSense)
	if err != nil {
		return err
	}
	for _, t := range c.Tunnels() {
		if t.PSK != "" {
			return atomicfile.WriteFile(filepath.Join(dir, tunnelPSKFile), []byte(t.PSK+"\n"), 0o600)
		}
	}
	return nil
}
