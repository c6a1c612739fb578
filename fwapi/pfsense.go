package fwapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
)

// pfSense paths and commands (see the firewall reference, section A).
const (
	pfConfig        = "/conf/config.xml"
	pfConfigCache   = "/tmp/config.cache"
	pfBackupDir     = "/conf/backup"
	pfVersionFile   = "/etc/version"
	pfRebootMarker  = "/var/run/fwab.reboot-pending"
	pfFilterReload  = "/etc/rc.filter_configure_sync"
	pfIfaceReload   = "/etc/rc.reload_interfaces"
	pfReloadAll     = "/etc/rc.reload_all"
	pfIPsecRestart  = "/usr/local/sbin/pfSsh.php playback restartipsec"
	pfSuricata      = "/usr/local/etc/rc.d/suricata.sh restart"
	pfSuricataSync  = `/usr/local/bin/php -r 'require_once("/usr/local/pkg/suricata/suricata.inc"); sync_suricata_package_config();'`
	pfBlockerUpdate = "/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php update"
	pfUpgrade       = "/usr/local/sbin/pfSense-upgrade -y"
)

// PfSenseOptions tune the pfSense driver; zero values are the defaults.
type PfSenseOptions struct {
	Logger *slog.Logger
	// MetricsInterval is the gap between the two kern.cp_times samples
	// that give CPU load; default 1s.
	MetricsInterval time.Duration
	// SuricataResync regenerates Suricata's yaml from config.xml (the
	// package's sync_suricata_package_config through php -r) before the
	// restart. A real pfSense needs it for a changed ids@IF to take effect;
	// it is off by default because php -r is outside the command set the
	// embedded lab emulates.
	SuricataResync bool
	// RebootGrace is how long Upgrade waits, after pfSense-upgrade exits
	// cleanly, for the reboot it starts; default 2 minutes. No reboot in
	// that time means nothing was upgraded.
	RebootGrace time.Duration
	// OffloadSSHInterface lets Apply push offload flags to the NIC the SSH
	// session uses too; by default it is left to pfSense's own reconfigure.
	OffloadSSHInterface bool
}

// PfSense drives pfSense over SSH. It implements Firewall and Guard.
type PfSense struct {
	ShellGuard
	sh   *SSHClient
	log  *slog.Logger
	opts PfSenseOptions
}

var (
	_ Firewall = (*PfSense)(nil)
	_ Guard    = (*PfSense)(nil)
)

// NewPfSense returns a pfSense driver that talks through sh; Close closes sh.
func NewPfSense(sh *SSHClient, opts PfSenseOptions) *PfSense {
	if opts.MetricsInterval <= 0 {
		opts.MetricsInterval = time.Second
	}
	if opts.RebootGrace <= 0 {
		opts.RebootGrace = 2 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PfSense{
		ShellGuard: ShellGuard{Sh: sh, ConfigPath: pfConfig, Reload: pfReloadAll, CachePath: pfConfigCache},
		sh:         sh, log: log, opts: opts,
	}
}

// Shell is the driver's SSH connection.
func (p *PfSense) Shell() *SSHClient { return p.sh }

// Close closes the SSH connection.
func (p *PfSense) Close() error { return p.sh.Close() }

func (p *PfSense) output(ctx context.Context, cmd string) (string, error) {
	out, err := p.sh.Output(ctx, cmd)
	return string(out), err
}

// Info reads /etc/version, the hostname and the NICs.
func (p *PfSense) Info(ctx context.Context) (Info, error) {
	version, err := p.output(ctx, "cat "+pfVersionFile)
	if err != nil {
		return Info{}, fmt.Errorf("pfsense info: %w", err)
	}
	host, err := p.output(ctx, "hostname")
	if err != nil {
		return Info{}, fmt.Errorf("pfsense info: %w", err)
	}
	ifs, err := p.interfaces(ctx)
	if err != nil {
		return Info{}, fmt.Errorf("pfsense info: %w", err)
	}
	info := Info{Flavor: configxml.PfSense, Version: strings.TrimSpace(version), Hostname: strings.TrimSpace(host)}
	for _, s := range ifs {
		if IsNIC(s.Name) {
			info.NICs = append(info.NICs, s.Name)
		}
	}
	return info, nil
}

func (p *PfSense) interfaces(ctx context.Context) ([]IfaceState, error) {
	out, err := p.output(ctx, "ifconfig -a")
	if err != nil {
		return nil, err
	}
	return ParseIfconfig(out)
}

// ReadConfig returns /conf/config.xml byte for byte.
func (p *PfSense) ReadConfig(ctx context.Context) ([]byte, error) {
	data, err := p.sh.ReadFile(ctx, pfConfig)
	if err != nil {
		return nil, fmt.Errorf("pfsense read config: %w", err)
	}
	return data, nil
}

// WriteConfig copies the running config into /conf/backup (pfSense's own
// backup area, config-<unixtime>.xml), replaces /conf/config.xml atomically
// and removes /tmp/config.cache so pfSense rereads it.
func (p *PfSense) WriteConfig(ctx context.Context, config []byte, description string) error {
	if len(bytes.TrimSpace(config)) == 0 {
		return errors.New("pfsense write config: refusing an empty config")
	}
	backup := "cp " + pfConfig + " " + pfBackupDir + "/config-$(date +%s).xml"
	if _, err := p.output(ctx, backup); err != nil {
		return fmt.Errorf("pfsense write config: backup: %w", err)
	}
	if err := p.sh.WriteFileAtomic(ctx, pfConfig, config); err != nil {
		return fmt.Errorf("pfsense write config: %w", err)
	}
	if _, err := p.output(ctx, "rm -f "+pfConfigCache); err != nil {
		return fmt.Errorf("pfsense write config: %w", err)
	}
	p.log.Info("config written", "sha256", SHA256Hex(config), "description", description)
	return nil
}

// actionOrder is the order actions run in within one Apply: interfaces
// first (inline IPS needs offloads off before Suricata starts), Suricata
// last.
var actionOrder = []configxml.Action{
	configxml.ActionInterfaces,
	configxml.ActionFilterReload,
	configxml.ActionBlocklistUpdate,
	configxml.ActionIPsecRestart,
	configxml.ActionIDSRestart,
}

// PlanActions returns the distinct actions the changes need, in the order
// Apply runs them. A firmware change is refused (use Upgrade); an xml
// change must name its action.
func PlanActions(changes []configxml.Change) ([]configxml.Action, error) {
	need := map[configxml.Action]bool{}
	for _, c := range changes {
		switch c.Action {
		case configxml.ActionFirmware:
			return nil, fmt.Errorf("change %s: firmware is changed with Upgrade, not Apply", c.Knob)
		case configxml.ActionNone:
			continue
		case "":
			return nil, fmt.Errorf("change %s: no action (use configxml.ActionFor)", c.Knob)
		}
		known := false
		for _, a := range actionOrder {
			known = known || a == c.Action
		}
		if !known {
			return nil, fmt.Errorf("change %s: unknown action %q", c.Knob, c.Action)
		}
		need[c.Action] = true
	}
	var plan []configxml.Action
	for _, a := range actionOrder {
		if need[a] {
			plan = append(plan, a)
		}
	}
	return plan, nil
}

// Apply runs the narrowest pfSense command for each action the changes
// need, once each, in PlanActions order. Offload changes are also pushed
// with ifconfig to the devices pfSense applies them to (pushOffloads).
func (p *PfSense) Apply(ctx context.Context, changes []configxml.Change) error {
	plan, err := PlanActions(changes)
	if err != nil {
		return fmt.Errorf("pfsense apply: %w", err)
	}
	if len(plan) == 0 {
		return nil
	}
	if _, err := p.output(ctx, "rm -f "+pfConfigCache); err != nil {
		return fmt.Errorf("pfsense apply: %w", err)
	}
	for _, a := range plan {
		start := time.Now()
		if err := p.runAction(ctx, a, changes); err != nil {
			return fmt.Errorf("pfsense apply %s: %w", a, err)
		}
		p.log.Info("applied", "action", string(a), "took", time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func (p *PfSense) runAction(ctx context.Context, a configxml.Action, changes []configxml.Change) error {
	switch a {
	case configxml.ActionFilterReload:
		_, err := p.output(ctx, pfFilterReload)
		return err
	case configxml.ActionInterfaces:
		if _, err := p.output(ctx, pfIfaceReload); err != nil {
			return err
		}
		return p.pushOffloads(ctx, changes)
	case configxml.ActionIDSRestart:
		if p.opts.SuricataResync {
			if _, err := p.output(ctx, pfSuricataSync); err != nil {
				return err
			}
		}
		_, err := p.output(ctx, pfSuricata)
		return err
	case configxml.ActionIPsecRestart:
		_, err := p.output(ctx, pfIPsecRestart)
		return err
	case configxml.ActionBlocklistUpdate:
		_, err := p.output(ctx, pfBlockerUpdate)
		return err
	}
	return fmt.Errorf("no pfSense command for action %q", a)
}

// pushOffloads sets the changed offload flags with ifconfig on the devices
// pfSense itself applies them to, in its order (configxml.OffloadDevices:
// the assigned interfaces in config order, VLAN parents first), never on
// an unassigned NIC, and not on the NIC fwab's SSH session comes in
// through unless PfSenseOptions.OffloadSSHInterface asks for it: toggling
// capabilities can reset a link. Checksum offload is not turned on where
// pfSense forces it off (vtnet, ena).
//
// upstream: not settled — whether a capability change resets the link is the NIC driver's business, not pfSense's; fwab assumes it may on every driver and finds the SSH NIC at run time by `$SSH_CONNECTION` in sshDevice
func (p *PfSense) pushOffloads(ctx context.Context, changes []configxml.Change) error {
	args, err := offloadArgs(changes)
	if err != nil || len(args) == 0 {
		return err
	}
	raw, err := p.ReadConfig(ctx)
	if err != nil {
		return err
	}
	cfg, err := configxml.LoadBytes(raw)
	if err != nil {
		return fmt.Errorf("parse config.xml: %w", err)
	}
	out, err := p.output(ctx, "ifconfig -a")
	if err != nil {
		return err
	}
	ifs, err := ParseIfconfig(out)
	if err != nil {
		return err
	}
	present := map[string]bool{}
	for _, s := range ifs {
		present[s.Name] = true
	}
	skip := ""
	if !p.opts.OffloadSSHInterface {
		if skip, err = p.sshDevice(ctx, cfg, out); err != nil {
			return err
		}
	}
	for _, dev := range cfg.OffloadDevices() {
		if !present[dev] {
			continue
		}
		if dev == skip {
			p.log.Warn("offload flags not pushed to the interface the SSH session uses; pfSense's own reconfigure still applies the config to it", "device", dev)
			continue
		}
		devArgs := args
		if configxml.PfSenseForcesChecksumOff(dev) {
			devArgs = nil
			for _, a := range args {
				if !slices.Contains(checksumCaps, a) {
					devArgs = append(devArgs, a)
				}
			}
		}
		if len(devArgs) == 0 {
			continue
		}
		if _, err := p.output(ctx, shellJoin(append([]string{"ifconfig", dev}, devArgs...)...)); err != nil {
			return err
		}
	}
	return nil
}

// checksumCaps are the ifconfig words that turn checksum offload on.
var checksumCaps = []string{"txcsum", "rxcsum", "txcsum6", "rxcsum6"}

// sshDevice is the device the SSH session reaches the firewall on: the
// server address of $SSH_CONNECTION, found among the config's interface
// addresses or the inet lines of ifconfigOut; "" when none has it (a
// loopback or tunnel).
func (p *PfSense) sshDevice(ctx context.Context, cfg *configxml.Config, ifconfigOut string) (string, error) {
	out, err := p.output(ctx, `echo "$SSH_CONNECTION"`)
	if err != nil {
		return "", err
	}
	f := strings.Fields(out)
	if len(f) < 4 {
		return "", nil
	}
	addr := f[2]
	for _, i := range cfg.Interfaces() {
		if i.IPAddr == addr {
			return i.Device, nil
		}
	}
	dev := ""
	for _, line := range strings.Split(ifconfigOut, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '\t' {
			dev, _, _ = strings.Cut(line, ":")
			continue
		}
		if w := strings.Fields(line); len(w) >= 2 && w[0] == "inet" && w[1] == addr {
			return dev, nil
		}
	}
	return "", nil
}

// offloadArgs turns offload changes into ifconfig arguments: -txcsum to
// turn an offload off, txcsum (FreeBSD has no + form) to turn it on.
func offloadArgs(changes []configxml.Change) ([]string, error) {
	var args []string
	for _, c := range changes {
		flags, ok := offloadFlags[c.Knob]
		if !ok {
			continue
		}
		var prefix string
		switch c.To {
		case "on":
		case "off":
			prefix = "-"
		default:
			return nil, fmt.Errorf("%s=%q: want on or off", c.Knob, c.To)
		}
		for _, f := range flags {
			args = append(args, prefix+f)
		}
	}
	return args, nil
}

// tableCountCmd prints "NAME COUNT" for every pf table.
const tableCountCmd = `for t in $(pfctl -s Tables); do printf '%s ' "$t"; pfctl -t "$t" -T show | wc -l; done`

// RuntimeState reads ifconfig, pfctl, swanctl and ps.
func (p *PfSense) RuntimeState(ctx context.Context) (RuntimeState, error) {
	var st RuntimeState
	wrap := func(err error) error { return fmt.Errorf("pfsense runtime state: %w", err) }
	ifs, err := p.interfaces(ctx)
	if err != nil {
		return st, wrap(err)
	}
	st.Interfaces = make(map[string]IfaceState, len(ifs))
	for _, s := range ifs {
		st.Interfaces[s.Name] = s
	}
	out, err := p.output(ctx, "pfctl -sr")
	if err != nil {
		return st, wrap(err)
	}
	rules, err := ParsePfctlRules(out)
	if err != nil {
		return st, wrap(err)
	}
	st.FilterRules, st.GeneratedRules = rules.Rules, rules.Generated
	if out, err = p.output(ctx, "pfctl -sn"); err != nil {
		return st, wrap(err)
	}
	nat, err := ParsePfctlNAT(out)
	if err != nil {
		return st, wrap(err)
	}
	st.NATRules, st.NATOutbound = nat.Rules, nat.Outbound
	sas, errOut, code, err := p.sh.Run(ctx, "swanctl --list-sas", nil)
	switch {
	case err != nil:
		return st, wrap(err)
	case code == 0:
		if st.IPsec, err = ParseSwanctlSAs(string(sas)); err != nil {
			return st, wrap(err)
		}
	case strings.Contains(string(errOut)+string(sas), "charon.vici"):
		// charon not running: no IPsec configured.
	default:
		return st, wrap(&CommandError{Cmd: "swanctl --list-sas", Exit: code, Stderr: string(errOut)})
	}
	if out, err = p.output(ctx, "ps ax -o pid,command"); err != nil {
		return st, wrap(err)
	}
	if st.IDS, err = ParseSuricataProcesses(out); err != nil {
		return st, wrap(err)
	}
	if out, err = p.output(ctx, tableCountCmd); err != nil {
		return st, wrap(err)
	}
	if st.Tables, err = ParsePfctlTableCounts(out); err != nil {
		return st, wrap(err)
	}
	if out, err = p.output(ctx, "cat "+pfVersionFile); err != nil {
		return st, wrap(err)
	}
	st.Version = strings.TrimSpace(out)
	return st, nil
}

// Metrics samples kern.cp_times twice MetricsInterval apart, memory from
// the VM page counters, the CPU temperature where the sensor exists, and
// mbufs in use.
func (p *PfSense) Metrics(ctx context.Context) (probe.DUTMetrics, error) {
	wrap := func(err error) error { return fmt.Errorf("pfsense metrics: %w", err) }
	sample := func() (CPUTimes, error) {
		out, err := p.output(ctx, "sysctl -n kern.cp_times")
		if err != nil {
			return nil, err
		}
		return ParseCPUTimes(out)
	}
	before, err := sample()
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	select {
	case <-ctx.Done():
		return probe.DUTMetrics{}, wrap(ctx.Err())
	case <-time.After(p.opts.MetricsInterval):
	}
	after, err := sample()
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	m := probe.DUTMetrics{Time: time.Now()}
	if m.PerCPU, m.CPUPercent, err = CPUBusy(before, after); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	names := []string{"vm.stats.vm.v_page_count", "vm.stats.vm.v_free_count"}
	out, err := p.output(ctx, "sysctl -n "+strings.Join(names, " "))
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	vals, err := ParseSysctlValues(out, names...)
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	pages, err1 := strconv.ParseFloat(vals[names[0]], 64)
	free, err2 := strconv.ParseFloat(vals[names[1]], 64)
	if err1 != nil || err2 != nil || pages <= 0 || free > pages {
		return probe.DUTMetrics{}, wrap(fmt.Errorf("memory counters %v make no sense", vals))
	}
	m.MemUsedPct = 100 * (pages - free) / pages
	// Not every box has a sensor (VMs, some CPUs): a missing one is 0.
	if tout, _, code, err := p.sh.Run(ctx, "sysctl -n dev.cpu.0.temperature", nil); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	} else if code == 0 {
		if t, err := ParseTemperature(string(tout)); err == nil {
			m.TempCelsius = t
		}
	}
	if out, err = p.output(ctx, "netstat -m"); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	if m.MbufsInUse, err = ParseNetstatMbufs(out); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	return m, nil
}

// Reboot leaves a marker in /var/run (a memory file system on pfSense,
// empty after a boot) and reboots. WaitReady uses the marker to tell the
// rebooted system from the one still shutting down.
func (p *PfSense) Reboot(ctx context.Context) error {
	if _, err := p.output(ctx, "date +%s > "+pfRebootMarker); err != nil {
		return fmt.Errorf("pfsense reboot: %w", err)
	}
	_, errOut, code, err := p.sh.Run(ctx, "shutdown -r now", nil)
	if err != nil && !errors.Is(err, ErrConnectionLost) {
		return fmt.Errorf("pfsense reboot: %w", err)
	}
	if err == nil && code != 0 {
		p.clearRebootMarker(ctx)
		return fmt.Errorf("pfsense reboot: %w", &CommandError{Cmd: "shutdown -r now", Exit: code, Stderr: string(errOut)})
	}
	p.log.Info("rebooting")
	return nil
}

// WaitReady waits until SSH answers, the reboot marker is gone (the box
// really restarted) and pf is enabled. Whether traffic passes through the
// box is for the caller to probe from the endpoints.
func (p *PfSense) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		last = p.readyOnce(ctx)
		if last == nil {
			return nil
		}
		p.log.Debug("not ready", "err", last)
		select {
		case <-ctx.Done():
			return fmt.Errorf("pfsense not ready after %v: %w", timeout, last)
		case <-time.After(time.Second):
		}
	}
}

func (p *PfSense) readyOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := p.output(ctx, "if [ -e "+pfRebootMarker+" ]; then echo pending; fi; pfctl -si | head -n 1")
	if err != nil {
		return err
	}
	if strings.Contains(out, "pending") {
		return errors.New("reboot not started yet")
	}
	if !strings.Contains(out, "Enabled") {
		return fmt.Errorf("pf not enabled yet (%q)", strings.TrimSpace(out))
	}
	return nil
}

// upgradeVersion is what a firmware version asked for may look like:
// 2.8.0, 2.7.2-RELEASE, 26.1.2_1, 24.7.12-amd64.
var upgradeVersion = regexp.MustCompile(`^[0-9][0-9A-Za-z._+-]{0,63}$`)

// CheckUpgradeVersion refuses a version to upgrade to that is not a
// version (empty means the newest and is fine): bad input named early.
// Upgrade does not rely on it; it quotes whatever it is given.
func CheckUpgradeVersion(version string) error {
	if version != "" && !upgradeVersion.MatchString(version) {
		return fmt.Errorf("version %q is not a version such as 2.8.0 or 26.1.2: digits, letters and . _ + - only, starting with a digit", version)
	}
	return nil
}

// Upgrade runs pfSense-upgrade (to version, when given), reporting its
// output lines through progress, then waits for the box to come back and
// checks the version it reports.
func (p *PfSense) Upgrade(ctx context.Context, version string, progress func(string)) error {
	if progress == nil {
		progress = func(string) {}
	}
	cmd := pfUpgrade
	if version != "" {
		cmd += " " + ShellQuote(version)
	}
	if _, err := p.output(ctx, "date +%s > "+pfRebootMarker); err != nil {
		return fmt.Errorf("pfsense upgrade: %w", err)
	}
	lw := &lineWriter{fn: progress}
	code, errOut, err := p.sh.Stream(ctx, cmd, lw)
	lw.Flush()
	switch {
	case errors.Is(err, ErrConnectionLost):
		progress("connection closed: the firewall is rebooting")
	case err != nil:
		p.clearRebootMarker(ctx)
		return fmt.Errorf("pfsense upgrade: %w", err)
	case code != 0:
		p.clearRebootMarker(ctx)
		return fmt.Errorf("pfsense upgrade: %w", &CommandError{Cmd: cmd, Exit: code, Stderr: string(errOut)})
	}
	if err == nil && !p.awaitReboot(ctx) {
		// No reboot: pfSense-upgrade found nothing to do (or failed quietly).
		if _, err := p.output(ctx, "rm -f "+pfRebootMarker); err != nil {
			return fmt.Errorf("pfsense upgrade: %w", err)
		}
		progress("the firewall did not reboot")
	} else {
		deadline, ok := ctx.Deadline()
		wait := 30 * time.Minute
		if ok {
			wait = time.Until(deadline)
		}
		progress("waiting for the firewall to come back")
		if err := p.WaitReady(ctx, wait); err != nil {
			return fmt.Errorf("pfsense upgrade: %w", err)
		}
	}
	got, err := p.output(ctx, "cat "+pfVersionFile)
	if err != nil {
		return fmt.Errorf("pfsense upgrade: %w", err)
	}
	got = strings.TrimSpace(got)
	if version != "" && got != version && !strings.HasPrefix(got, version+"-") {
		return fmt.Errorf("pfsense upgrade: the firewall reports version %q after the upgrade, want %q", got, version)
	}
	progress("version " + got)
	return nil
}

// clearRebootMarker removes the marker after a reboot that did not start,
// so that a later WaitReady does not wait for it forever.
func (p *PfSense) clearRebootMarker(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	p.sh.Run(ctx, "rm -f "+pfRebootMarker, nil)
}

// awaitReboot reports whether the box goes down (or has gone down: the
// marker is gone) within RebootGrace.
func (p *PfSense) awaitReboot(ctx context.Context) bool {
	deadline := time.Now().Add(p.opts.RebootGrace)
	for {
		out, _, _, err := p.sh.Run(ctx, "if [ -e "+pfRebootMarker+" ]; then echo pending; fi", nil)
		if err != nil || !strings.Contains(string(out), "pending") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return true
		case <-time.After(time.Second):
		}
	}
}

// lineWriter calls fn for every complete line written.
type lineWriter struct {
	fn  func(string)
	buf []byte
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.fn(strings.TrimRight(string(w.buf[:i]), "\r"))
		w.buf = w.buf[i+1:]
	}
}

func (w *lineWriter) Flush() {
	if len(w.buf) > 0 {
		w.fn(string(w.buf))
		w.buf = nil
	}
}

var _ io.Writer = (*lineWriter)(nil)
