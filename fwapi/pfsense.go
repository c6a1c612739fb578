package fwapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
)

// pfSense paths and commands (see the firewall reference, section A).
const (
	pfConfig       = "/conf/config.xml"
	pfConfigCache  = "/tmp/config.cache"
	pfConfigLock   = "/tmp/config.lock" // lock('config'): util.inc lock() flocks {$g['tmp_path']}/config.lock
	pfVersionFile  = "/etc/version"
	pfFilterReload = "/etc/rc.filter_configure_sync"
	pfReloadAll    = "/etc/rc.reload_all"
	// pfIPsecConfigure is what the GUI's IPsec apply runs: ipsec_configure()
	// without $restart, which reloads strongSwan in the background (start
	// it when it is not running) and leaves the other tunnels up, where
	// restartipsec (ipsec_configure(true)) restarts it and drops them all.
	// upstream: pfsense 2.7.2 src/etc/phpshellsessions/restartipsec:24 — the includes `config.inc`, `filter.inc`, `auth.inc`, `ipsec.inc`
	// upstream: pfsense 2.7.2 src/etc/phpshellsessions/restartipsec:28 — then `vpn.inc` and `ipsec_configure(true);`
	// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:3101 — `function ipsec_configure($restart = false, $filterdns_restart = false) {`
	pfIPsecConfigure = `/usr/local/bin/php -r 'require_once("config.inc"); require_once("filter.inc"); require_once("auth.inc"); require_once("ipsec.inc"); require_once("vpn.inc"); ipsec_configure();'`
	pfSwanctl        = "/usr/local/sbin/swanctl"
	pfSuricataRC     = "/usr/local/etc/rc.d/suricata.sh"
	// The script is run only where it exists: the package's sync removes
	// it when no interface is enabled, and a box where Suricata was never
	// set up has none.
	// upstream: not settled — suricata_create_rc() ends `if (!$no_enabled_interface) { … } else { unlink_if_exists("{$rcdir}suricata.sh"); }`, and the post-install removes it (`unlink_if_exists("{$rcdir}suricata.sh");`), in pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc and suricata_post_install.php (read in the file index; no line numbers); checked at run time by this test of the file
	pfSuricataStop  = "[ ! -e " + pfSuricataRC + " ] || " + pfSuricataRC + " stop"
	pfSuricataStart = "[ ! -e " + pfSuricataRC + " ] || " + pfSuricataRC + " start"
	// pfSuricataSync is the package's own remote resync recipe
	// (suricata_do_xmlrpc_sync) with the rules rebuilt, as its GUI does
	// for a newly enabled interface; suricata_postinstall keeps it from
	// pushing the configuration on to an HA peer, outside fwab's lock and
	// rollback.
	// upstream: not settled — sync_suricata_package_config() ends with `if (!isset($g['suricata_postinstall']) && !is_platform_booting()) { suricata_sync_on_changes(); }` in pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc (read in the file index, no line numbers); checked at run time only on the peer, which fwab does not reach
	pfSuricataSync = `/usr/local/bin/php -r 'require_once("/usr/local/pkg/suricata/suricata.inc"); global $g, $rebuild_rules, $suricata_gui_include, $pkg_interface; $suricata_gui_include = false; $pkg_interface = "console"; $g["suricata_postinstall"] = true; $rebuild_rules = true; sync_suricata_package_config(); $rebuild_rules = false;'`
	// pfBlockerUpdate rebuilds the aliases and rules from the downloaded
	// lists (updateip re-parses them; update would not re-parse a list it
	// already has, so a changed setting would not take).
	pfBlockerUpdate = "/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php updateip"
	pfUpgradeCmd    = "/usr/local/sbin/pfSense-upgrade"
	pfUpgrade       = pfUpgradeCmd + " -y"
)

// The rollback restores the services rc.reload_all leaves as the failed
// change made them: Suricata is stopped with that change's script, then
// resynced and started from the restored config, and pfBlockerNG reloaded.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1105 — `function reload_all_sync()`: interfaces, routing, cron, sshd and webgui, no package sync or start
// upstream: pfsense/FreeBSD-ports@70469728f9e1f7d75dbb7dbad220173cb3d450bb net/pfSense-pkg-pfBlockerNG/files/usr/local/www/pfblockerng/pfblockerng.php:165 — the verbs it takes: `in_array($argv[1], array('update', 'updateip'`
var (
	pfRollbackBefore = []string{pfSuricataStop}
	// The sync runs whether the script is there or not: a failed change
	// that disabled the last interface removed it, and the restored
	// config's sync writes it again (on a box without the package the
	// php fails harmlessly). pfBlockerNG's update fails harmlessly where
	// it is not installed.
	pfRollbackAfter = []string{pfSuricataSync + "; " + pfSuricataStart, pfBlockerUpdate}
	// pfRollbackAfterNoSuricata is pfRollbackAfter for a restored config
	// with no Suricata interface (pfForRestore).
	pfRollbackAfterNoSuricata = []string{pfNoSuricata, pfBlockerUpdate}
	// A rollback that reboots rebuilds Suricata's rule files from the
	// restored config first: the boot's sync writes none, and Suricata
	// would start on the failed change's rules (the sweep's canary rule
	// among them). The boot starts it, so it is not started here.
	//
	// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:66 — `sync_package($package['name']);`, the boot's sync, which sets no $rebuild_rules
	// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:3262 — `if (!$rebuild_rules)`, the return before any rule file is written
	//
	// The sync may wait on the config lock (install_cron_job saves), so
	// it gets five minutes: the reboot, which undoes the kernel modules,
	// must come whatever the sync does. It runs in the foreground, so the
	// restored config is put back only after its saves.
	//
	// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.bootup:352 — `mwexec("/usr/bin/timeout -k 45 30 …`: pfSense's own boot runs FreeBSD's timeout(1)
	// upstream: not settled — timeout(1) exits 124 when the limit is reached (FreeBSD 14's, which signals its children by procctl); an older one signals its own process group, and with KILL ends with 137; checked at run time: both are logged, and without the tool the sync runs unbounded, which the line says in the system log
	pfRollbackBeforeReboot = []string{"if [ -x /usr/bin/timeout ]; then /usr/bin/timeout -s KILL 300 " + pfSuricataSync + "; sync_rc=$?; [ $sync_rc -ne 124 ] && [ $sync_rc -ne 137 ] || logger -t fwab \"rollback: Suricata's rule rebuild did not end in 300 s; rebooting without it\"; " +
		"else logger -t fwab \"rollback: no /usr/bin/timeout; Suricata's rule rebuild runs unbounded\"; " + pfSuricataSync + "; fi"}
)

// pfNoSuricata ends Suricata on a box whose config has no Suricata
// interface, once its instances are stopped: it removes the rc script,
// which the package's sync writes only for a config that has one, so that
// the script of the config before (a change that added the first
// interface) does not start its instance again, now or at the next boot.
// The box ends as one where Suricata was never set up.
//
// upstream: not settled — sync_suricata_package_config() returns before `suricata_create_rc()` when `count(config_get_path('installedpackages/suricata/rule', [])) < 1` (pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc, read in the file index, about character 33,700); checked at run time by fwapi.VerifyRuntime, which finds a Suricata the config does not name (FWAB102)
// upstream: not settled — suricata_create_rc() itself ends `} else { unlink_if_exists("{$rcdir}suricata.sh"); }` where no interface is enabled, so a box whose config names none has no script (same file, about character 140,900); checked at run time by fwapi.VerifyRuntime as above
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:66 — `sync_package($package['name']);` then start_service, which runs the package's rc script, at every boot
var pfNoSuricata = "rm -f " + pfSuricataRC

// pfForRestore fits the rollback's and the lease's package lines to the
// config they restore: without a Suricata interface in it, Suricata is
// ended (pfNoSuricata) instead of resynced and started.
func pfForRestore(g ShellGuard, saved []byte) ShellGuard {
	if c, err := configxml.LoadBytes(saved); err != nil || c.SuricataConfigured() {
		return g
	}
	g.AfterReload = pfRollbackAfterNoSuricata
	g.BeforeReboot = []string{pfNoSuricata} // else the boot's start_service runs the old script
	return g
}

// pfSenseGuard is the lock and the rollback of a pfSense box, restoring
// its package services too and surviving a reboot.
func pfSenseGuard(sh Shell) ShellGuard {
	return ShellGuard{Sh: sh, ConfigPath: pfConfig, Reload: pfReloadAll, CachePath: pfConfigCache, ConfigLock: pfConfigLock,
		BeforeRestore: pfRollbackBefore, AfterReload: pfRollbackAfter, BeforeReboot: pfRollbackBeforeReboot, ForRestore: pfForRestore, BootHook: RollbackBootHook, LeaseHook: LeaseBootHook}
}

// PfSenseOptions tune the pfSense driver; zero values are the defaults.
type PfSenseOptions struct {
	Logger *slog.Logger
	// MetricsInterval is the gap between the two kern.cp_times samples
	// that give CPU load; default 1s.
	MetricsInterval time.Duration
	// RebootGrace is how long Upgrade waits, after pfSense-upgrade exits
	// cleanly, for the reboot it starts; default 2 minutes. No reboot in
	// that time means nothing was upgraded.
	RebootGrace time.Duration
	// RebootTimeout bounds the reboot action (crypto.hardware): the
	// reboot and the wait for SSH and pf; default 15 minutes.
	RebootTimeout time.Duration
	// OffloadSSHInterface lets Apply change the offload flags of the NIC
	// the SSH session runs over (and the interfaces over it) too, as the
	// GUI does; by default they are left as they are: a capability change
	// may reset the link on some drivers.
	OffloadSSHInterface bool
	// IPsecTimeout bounds re-establishing a tunnel after an IPsec change;
	// default DefaultIPsecTimeout.
	IPsecTimeout time.Duration
}

// PfSense drives pfSense over SSH. It implements Firewall and Guard.
type PfSense struct {
	ShellGuard
	sh   *SSHClient
	log  *slog.Logger
	opts PfSenseOptions

	mu      sync.Mutex
	adopted []byte // config.xml as the last Apply's package actions saved it (AdoptedConfig)
	written []byte // config.xml as WriteConfig wrote it, until the next Apply ends
	// hooked: a reboot left PfPackagesHook, and WaitReady waits for the
	// boot to run it. otherBootEnv: the next boot is of another boot
	// environment (ActivateBootEnvOnce), which has no such hook.
	hooked, otherBootEnv bool
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
	if opts.RebootTimeout <= 0 {
		opts.RebootTimeout = 15 * time.Minute
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &PfSense{
		ShellGuard: pfSenseGuard(sh),
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

// pfStagedConfig is where WriteConfig puts a new config before
// pfInstallConfig moves it into place.
const pfStagedConfig = "/conf/config.xml.fwab-new"

// pfInstallConfig installs the staged config as write_config() installs
// one, with pfSense's own functions: under the config lock (so no package
// or GUI save interleaves), the old file backed up as config-<its revision
// time>.xml and recorded in backup.cache (backup_config), the new file
// renamed into place, the config cache dropped, and the backups trimmed to
// the box's count (cleanup_backupcache, the lock already held).
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:660 — `backup_config();` before the write
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:669 — `$lockkey = lock('config', LOCK_EX);` around it
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:686 — `cleanup_backupcache(true);` with the lock held
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:1046 — backup_config names the old file `'/backup/config-' . $baktime . '.xml'`
// upstream: pfsense/pfsense@9363ac5b8651a1c7a333180425ce7719070f95f9 src/etc/inc/util.inc:783 — `function lock($lock, $op = LOCK_SH) {`: flock on /tmp/<name>.lock
//
// The config is parsed again once the lock is held (parse_config trusts a
// stale /tmp/config.cache on 2.6 and 2.7, and a save may land between the
// include and the lock), so that the backup is named after the file it
// copies; parse_config() itself would take a shared lock this process
// cannot get while it holds the exclusive one.
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:1033 — `if ($config['revision']['time'] == "") {`: the name comes from $config, not from the file copied
//
// First, with the lock held, a write is refused while the commit-confirmed
// rollback holds its hand-off (refuseWhileRollbackClaims; the rollback's
// restore takes this lock with lockf). Before that, a lock() that returned
// no handle ends it with exitConfigUnlocked, nothing written: 2.6 and 2.7's
// write_config goes on unlocked then, where a package's save could
// interleave; master's backs up, then refuses to write.
//
// upstream: pfsense/pfsense@9363ac5b8651a1c7a333180425ce7719070f95f9 src/etc/inc/util.inc:792 — `if ($fp = fopen(...)) { if (flock($fp, $op)) { return $fp; } else { fclose($fp); } }`: no handle when either fails
// upstream: pfsense/pfsense@6e1a14535673e5a1ca7af875110a9c34f729c0e5 src/etc/inc/util.inc:128 — 2.6.0: the same `if ($fp = fopen(` with the same fall-through
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/util.inc:154 — 2.7.2: the same `if ($fp = fopen(` with the same fall-through
var pfInstallConfig = `/usr/local/bin/php -r 'require_once("config.inc"); $l = lock("config", LOCK_EX); ` +
	`if (!is_resource($l)) { fwrite(STDERR, "lock(config) returned no handle\n"); exit(` + strconv.Itoa(exitConfigUnlocked) + `); } ` +
	`$h = @file_get_contents("` + RollbackClaim + `"); if (is_string($h) && strncmp($h, "rollback", 8) == 0) { unlock($l); fwrite(STDERR, $h); exit(` + strconv.Itoa(exitRollbackClaimed) + `); } ` +
	`$c = parse_xml_config("` + pfConfig + `", array($g["xml_rootobj"], "pfsense")); if (is_array($c)) { $config = $c; } backup_config(); ` +
	`$ok = rename("` + pfStagedConfig + `", "` + pfConfig + `"); @unlink("` + pfConfigCache + `"); cleanup_backupcache(true); unlock($l); exit($ok ? 0 : 1);' && sync`

// WriteConfig stages the config beside config.xml (an atomic write of its
// own) and installs it as pfSense's write_config() does (pfInstallConfig):
// the old file goes into /conf/backup under its revision time, where the
// GUI's backup page lists it, and pfSense rereads the new one.
func (p *PfSense) WriteConfig(ctx context.Context, config []byte, description string) error {
	if len(bytes.TrimSpace(config)) == 0 {
		return errors.New("pfsense write config: refusing an empty config")
	}
	if err := p.sh.WriteFileAtomic(ctx, pfStagedConfig, config); err != nil {
		return fmt.Errorf("pfsense write config: %w", err)
	}
	// The install's exit status does not settle whether config.xml was
	// replaced (die() exits 0; a failure after the rename does not), so
	// the file is compared with what was written.
	_, ierr := p.output(ctx, pfInstallConfig)
	if ce := (*CommandError)(nil); errors.As(ierr, &ce) {
		if claimed := rollbackClaimed(ce.Exit, ce.Stderr); claimed != nil {
			_, _ = p.output(context.WithoutCancel(ctx), "rm -f "+pfStagedConfig)
			return fmt.Errorf("pfsense write config: %w", claimed)
		}
		if ce.Exit == exitConfigUnlocked {
			_, _ = p.output(context.WithoutCancel(ctx), "rm -f "+pfStagedConfig)
			return fmt.Errorf("pfsense write config: %w", &ConfigLockError{Lock: pfConfigLock, Detail: strings.TrimSpace(ce.Stderr)})
		}
	}
	sum, serr := p.output(ctx, "sha256 -q "+pfConfig)
	if serr != nil {
		return fmt.Errorf("pfsense write config: config.xml could not be read back after the install (its error: %v): %w", ierr, serr)
	}
	if strings.TrimSpace(sum) != SHA256Hex(config) {
		_, _ = p.output(context.WithoutCancel(ctx), "rm -f "+pfStagedConfig)
		if ierr == nil {
			ierr = errors.New("the install reported success")
		}
		return fmt.Errorf("pfsense write config: config.xml not installed: %w", ierr)
	}
	if ierr != nil {
		p.log.Warn("config.xml is installed, but the install reported an error after it (backup list or trim)", "err", ierr)
	}
	p.log.Info("config written", "sha256", SHA256Hex(config), "description", description)
	p.mu.Lock()
	p.written = bytes.Clone(config)
	p.mu.Unlock()
	return nil
}

// actionOrder is the order actions run in within one Apply: interfaces
// first (inline IPS needs offloads off before Suricata starts), Suricata
// last. A reboot, when one is needed, is the only action: the boot applies
// the whole config.
var actionOrder = []configxml.Action{
	configxml.ActionInterfaces,
	configxml.ActionFilterReload,
	configxml.ActionBlocklistUpdate,
	configxml.ActionIPsecRestart,
	configxml.ActionIDSRestart,
	configxml.ActionReboot,
}

// PlanActions returns the distinct actions the changes need, in the order
// Apply runs them. A firmware change is refused (use Upgrade); an xml
// change must name its action.
func PlanActions(changes []configxml.Change) ([]configxml.Action, error) {
	need := map[configxml.Action]bool{}
	for _, c := range changes {
		switch c.Action {
		case configxml.ActionFirmware:
			return nil, fmt.Errorf("change %s: firmware is changed with Upgrade or a boot environment (ActivateBootEnvOnce), not Apply", c.Knob)
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
	return configxml.Effective(plan), nil
}

// Apply runs the narrowest pfSense command for each action the changes
// need, once each, in PlanActions order; offload changes as the GUI
// applies them (applyOffloads).
func (p *PfSense) Apply(ctx context.Context, changes []configxml.Change) error {
	plan, err := PlanActions(changes)
	if err != nil {
		return fmt.Errorf("pfsense apply: %w", err)
	}
	if _, err := offloadArgs(changes); err != nil {
		return fmt.Errorf("pfsense apply: %w", err)
	}
	if len(plan) == 0 {
		return nil
	}
	if _, err := p.output(ctx, "rm -f "+pfConfigCache); err != nil {
		return fmt.Errorf("pfsense apply: %w", err)
	}
	p.mu.Lock()
	p.adopted = nil
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.written = nil
		p.mu.Unlock()
	}()
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
		return p.applyOffloads(ctx)
	case configxml.ActionIDSRestart:
		// The package bakes each interface's run mode into suricata.sh when
		// it syncs: stop with the old script (it knows the old instances,
		// including those the new config disables), resync with the rules
		// rebuilt, then start with the new script.
		// upstream: not settled — suricata_create_rc() bakes `$run_mode` per enabled interface into suricata.sh at each sync, and suricata_prepare_rule_files() returns early `if (!$rebuild_rules)` (pfsense/FreeBSD-ports@e2173cf2 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc, an older copy, lines not verified); checked at run time by fwapi.VerifyRuntime, which reads the running mode from ps
		configured, err := p.suricataConfigured(ctx)
		if err != nil {
			return err
		}
		if !configured {
			return p.packageAction(ctx, "Suricata", suricataOwns, pfSuricataStop, pfNoSuricata)
		}
		return p.packageAction(ctx, "Suricata", suricataOwns, pfSuricataStop, pfSuricataSync, pfSuricataStart)
	case configxml.ActionIPsecRestart:
		return p.applyIPsec(ctx, changes)
	case configxml.ActionBlocklistUpdate:
		return p.packageAction(ctx, "pfBlockerNG", pfBlockerNGOwns, pfBlockerUpdate)
	case configxml.ActionReboot:
		// rc.bootup loads the accelerator modules (load_crypto) and
		// applies everything else; WaitReady tells the new boot from the
		// old system by the marker Reboot leaves in /var/run.
		if err := p.Reboot(ctx); err != nil {
			return err
		}
		return p.WaitReady(ctx, p.opts.RebootTimeout)
	}
	return fmt.Errorf("no pfSense command for action %q", a)
}

// applyIPsec runs the GUI's apply and re-establishes the tunnels the
// changes set (ipsec.go), with the GUI's own disconnect and connect
// commands, in the foreground.
func (p *PfSense) applyIPsec(ctx context.Context, changes []configxml.Change) error {
	if _, err := p.output(ctx, pfIPsecConfigure); err != nil {
		return err
	}
	cfg, err := p.appliedConfig(ctx)
	if err != nil {
		return err
	}
	s := ipsecSessions{
		// ipsec_configure() reloads in the background: wait until its
		// strongswanrc has finished, so that charon holds the new
		// connections before fwab looks.
		settle: func(ctx context.Context) error {
			deadline := time.Now().Add(ipsecTimeout(p.opts.IPsecTimeout))
			for {
				_, _, code, err := p.sh.Run(ctx, "pgrep -f strongswanrc", nil)
				switch {
				case err != nil:
					return err
				case code != 0:
					return nil
				case time.Now().After(deadline):
					return fmt.Errorf("ipsec: strongswanrc still running %v after ipsec_configure()", ipsecTimeout(p.opts.IPsecTimeout))
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(200 * time.Millisecond):
				}
			}
		},
		terminate: func(ctx context.Context, t configxml.Tunnel) error {
			// Exit 1 when no SA is up: not an error here.
			_, _, _, err := p.sh.Run(ctx, pfSwanctl+" --terminate --ike "+ShellQuote(t.Conn)+" --force --timeout 10", nil)
			return err
		},
		initiate: func(ctx context.Context, t configxml.Tunnel) (string, bool, error) {
			var failed []string
			final := false
			for _, child := range t.Children {
				out, errOut, code, err := p.sh.Run(ctx, pfSwanctl+" --initiate --child "+ShellQuote(child)+" --timeout 20", nil)
				if err != nil {
					return "", false, err
				}
				if code != 0 {
					text := string(out) + string(errOut)
					// After settle, neither a connection charon does not
					// know nor a charon that is not running will appear
					// by waiting.
					final = final || strings.Contains(text, "no config named") || strings.Contains(text, "charon.vici")
					failed = append(failed, fmt.Sprintf("%s: exit %d: %s", child, code, lastLine(text)))
				}
			}
			return strings.Join(failed, "; "), final, nil
		},
		sas: func(ctx context.Context) ([]IPsecSA, error) {
			out, _, code, err := p.sh.Run(ctx, pfSwanctl+" --list-sas", nil)
			if err != nil || code != 0 {
				return nil, err // exit 1: charon not (yet) answering, no SA
			}
			return ParseSwanctlSAs(string(out))
		},
		within: ipsecTimeout(p.opts.IPsecTimeout),
	}
	return s.apply(ctx, cfg, changes)
}

// appliedConfig is the config Apply applies: the one written before it,
// else config.xml as it is.
func (p *PfSense) appliedConfig(ctx context.Context) (*configxml.Config, error) {
	p.mu.Lock()
	data := p.written
	p.mu.Unlock()
	if data == nil {
		var err error
		if data, err = p.ReadConfig(ctx); err != nil {
			return nil, err
		}
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		return nil, fmt.Errorf("the config.xml written: %w", err)
	}
	return c, nil
}

// suricataConfigured reports whether the config Apply applies has a
// Suricata interface (configxml.SuricataConfigured).
func (p *PfSense) suricataConfigured(ctx context.Context) (bool, error) {
	c, err := p.appliedConfig(ctx)
	if err != nil {
		return false, err
	}
	return c.SuricataConfigured(), nil
}

// packageAction runs a package's commands, reading config.xml before and
// after: a save by the package is adopted when it changed only what the
// package owns (packageWriteAdoption), and fails the action otherwise.
func (p *PfSense) packageAction(ctx context.Context, pkg string, owns packageOwned, cmds ...string) error {
	// The baseline is the file fwab itself left (written, or adopted from
	// an earlier package of this Apply): a save by anyone else in between
	// is then a difference the package does not own, and refused.
	p.mu.Lock()
	before := p.adopted
	if before == nil {
		before = p.written
	}
	p.mu.Unlock()
	if before == nil {
		var err error
		if before, err = p.ReadConfig(ctx); err != nil {
			return err
		}
	}
	for _, cmd := range cmds {
		if _, err := p.output(ctx, cmd); err != nil {
			return err
		}
	}
	after, err := p.ReadConfig(ctx)
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) {
		return nil
	}
	if err := packageWriteAdoption(before, after, owns); err != nil {
		return fmt.Errorf("%s saved config.xml: %w", pkg, err)
	}
	p.log.Info("the package saved config.xml with changes of its own only (as it does on every run); adopting the new file for this step", "package", pkg, "sha256", SHA256Hex(after))
	p.mu.Lock()
	p.adopted = after
	p.mu.Unlock()
	return nil
}

// AdoptedConfig is the config.xml the last Apply left on the firewall when
// a package action saved it (see packageAction); ok is false when Apply
// left config.xml as written.
func (p *PfSense) AdoptedConfig() (config []byte, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.adopted, p.adopted != nil
}

// applyOffloads applies the config's offload flags as the GUI does
// (pfOffloadApply), leaving out the interfaces over the NIC fwab's SSH
// session uses unless PfSenseOptions.OffloadSSHInterface includes them.
func (p *PfSense) applyOffloads(ctx context.Context) error {
	cfg, devs, err := offloadSkip(ctx, p.ReadConfig, p.output, p.opts.OffloadSSHInterface)
	if err != nil {
		return err
	}
	skip := keysOver(cfg, devs)
	if len(skip) > 0 {
		p.log.Warn("offload flags not applied to the interfaces the SSH session runs over (offload_management: true in the target applies them there too)", "interfaces", strings.Join(skip, ","))
	}
	cmd, err := pfOffloadApply(skip)
	if err != nil {
		return err
	}
	_, err = p.output(ctx, cmd)
	return err
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
	if !p.opts.OffloadSSHInterface {
		if st.Management, err = managementDevices(ctx, p.output, nil); err != nil {
			return st, wrap(err)
		}
	}
	out, err := p.output(ctx, "pfctl -si")
	if err != nil {
		return st, wrap(err)
	}
	if st.PF, err = ParsePfctlStatus(out); err != nil {
		return st, wrap(err)
	}
	if out, err = p.output(ctx, "pfctl -sr"); err != nil {
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
	if len(st.IDS) > 0 {
		if out, err = p.output(ctx, suricataRulesCmd(st.IDS)); err != nil {
			return st, wrap(err)
		}
		if err := applyRuleCounts(st.IDS, out); err != nil {
			return st, wrap(err)
		}
	}
	if out, err = p.output(ctx, tableCountCmd); err != nil {
		return st, wrap(err)
	}
	if st.Tables, err = ParsePfctlTableCounts(out); err != nil {
		return st, wrap(err)
	}
	if out, err = p.output(ctx, cryptoModulesCmd(configxml.PfSense)); err != nil {
		return st, wrap(err)
	}
	if st.CryptoModules, err = ParseCryptoModules(configxml.PfSense, out); err != nil {
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
	if err := p.markReboot(ctx); err != nil {
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

// PfPackagesHook is the boot script a reboot of fwab's leaves for the
// boot's package start. pfSense answers SSH and loads pf at the end of
// rc.bootup, and starts its packages only later (rc.start_packages, after
// pfSense-upgrade's boot stages): it syncs each one and starts it in the
// background, Suricata among them, and then runs every other rc.d script
// with "start", this one too, in the background as well. The hook waits
// (five minutes at most) until Suricata's rc script has ended its start,
// then leaves PfPackagesStarted and removes itself. It does nothing in
// the boot before the reboot (the reboot marker is still there then),
// where a WAN address change can run rc.start_packages too.
//
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:482 — `/etc/rc.bootup`: sshd, the interfaces, the filter
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:556 — `${product_name}-upgrade -y -U -b 3`, then the packages
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:560 — `/usr/local/sbin/fcgicli -f /etc/rc.start_packages`
// upstream: pfsense 2.7.2 src/etc/rc.start_packages:66 — `sync_package($package['name']);` and :68 `start_service($internal_name, true);` for each package first
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/service-utils.inc:108 — start_service runs `mwexec_bg("{$prefix}{$service['rcfile']} start");`: in the background
// upstream: pfsense 2.7.2 src/etc/rc.start_packages:77 — then `fwrite($shell, "{$rcfile} start >>/tmp/bootup_messages 2>&1 &");` for the rc.d scripts of no package
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.newwanip:45 — `send_event("service reload packages");` (restart_packages, called at :276): rc.start_packages again on a WAN address change
// upstream: not settled — Suricata's rc_start holds `{$g['varrun_path']}/suricata_pkg_starting.lck` from its start to its end (pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc, about character 139,500); checked at run time: the hook also waits while any `suricata.sh start` runs
const (
	PfPackagesHook    = "/usr/local/etc/rc.d/fwab_packages.sh"
	PfPackagesStarted = "/var/run/fwab.packages-started"
	// pfNeedsPackageSync makes the boot skip rc.start_packages and
	// reinstall the packages in the background instead; the reinstall
	// runs rc.start_packages when it is done, and so the hook.
	// upstream: pfsense 2.7.2 src/etc/pfSense-rc:395 — `if [ -f /cf/conf/needs_package_sync ]; then` … `skip_packages=1`
	// upstream: pfsense 2.7.2 src/etc/rc.bootup:461 — `mwexec_bg("{$g['etc_path']}/rc.package_reinstall_all");`
	// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.package_reinstall_all:52 — `mwexec_bg("{$g['etc_path']}/rc.start_packages");` once the reinstall succeeded
	pfNeedsPackageSync = "/cf/conf/needs_package_sync"
)

// pfPackagesSlow is what the hook writes into PfPackagesStarted when
// Suricata's start had not ended after its five minutes.
const pfPackagesSlow = "suricata-start-not-ended-in-300s"

// pfPackagesHookScript is PfPackagesHook's text.
var pfPackagesHookScript = "#!/bin/sh\n" +
	"# fwab: pfSense's rc.start_packages runs this once it has started every package;\n" +
	"# fwab waits for it after a reboot. It removes itself.\n" +
	"[ \"$1\" = start ] || exit 0\n" +
	"[ -e " + rebootMarker + " ] && exit 0\n" +
	"n=0\n" +
	"while [ $n -lt 300 ] && { [ -e /var/run/suricata_pkg_starting.lck ] || pgrep -f 'suricata[.]sh start' >/dev/null; }; do sleep 1; n=$((n+1)); done\n" +
	"if [ $n -ge 300 ]; then echo " + pfPackagesSlow + " > " + PfPackagesStarted + "; else : > " + PfPackagesStarted + "; fi\n" +
	"rm -f " + PfPackagesHook + "\n"

// markReboot leaves the reboot marker, and the packages hook that
// WaitReady then waits for. A hook that cannot be written or made
// executable is left out with a warning: WaitReady then returns at pf up,
// as it did before it knew of the packages.
func (p *PfSense) markReboot(ctx context.Context) error {
	if _, err := p.output(ctx, "date +%s > "+rebootMarker); err != nil {
		return err
	}
	p.mu.Lock()
	other := p.otherBootEnv
	p.otherBootEnv, p.hooked = false, false
	p.mu.Unlock()
	if other {
		// The hook would be written to this environment's /usr/local,
		// which the next boot does not mount: WaitReady returns at pf up
		// there, before the boot has started the packages.
		p.log.Info("booting another boot environment: its package start is not waited for", "hook", PfPackagesHook)
		_, _ = p.output(ctx, "rm -f "+ShellQuote(PfPackagesHook))
		return nil
	}
	err := p.sh.WriteFileAtomic(ctx, PfPackagesHook, []byte(pfPackagesHookScript))
	if err == nil {
		q := ShellQuote(PfPackagesHook)
		_, err = p.output(ctx, "chmod 755 "+q+" && [ -x "+q+" ]")
	}
	p.mu.Lock()
	p.hooked = err == nil
	p.mu.Unlock()
	if err != nil {
		p.log.Warn("the boot's package start will not be waited for: its hook was not written", "hook", PfPackagesHook, "err", err)
	}
	return nil
}

// WaitReady waits until SSH answers, the reboot marker is gone (the box
// really restarted), pf is enabled and, after a reboot of fwab's, the
// boot has started the packages (PfPackagesHook). Whether traffic passes
// through the box is for the caller to probe from the endpoints.
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
			// A later WaitReady (after a reboot not of fwab's) does not
			// wait for the hook again.
			p.mu.Lock()
			p.hooked = false
			p.mu.Unlock()
			return fmt.Errorf("pfsense not ready after %v: %w", timeout, last)
		case <-time.After(time.Second):
		}
	}
}

func (p *PfSense) readyOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// In router mode (<system><disablefilter>) the boot's filter_configure
	// leaves pf disabled, so Disabled is the ready state there.
	out, err := p.output(ctx, "if [ -e "+rebootMarker+" ]; then echo pending; fi; if grep -q '<disablefilter' "+pfConfig+"; then echo routermode; fi; "+
		"if [ -e "+PfPackagesStarted+" ]; then echo packages-started; cat "+PfPackagesStarted+"; fi; if [ -e "+pfNeedsPackageSync+" ]; then echo packages-reinstall; fi; pfctl -si | head -n 1")
	if err != nil {
		return err
	}
	if strings.Contains(out, "pending") {
		return errors.New("reboot not started yet")
	}
	want := PFEnabled
	if strings.Contains(out, "routermode") {
		want = PFDisabled
	}
	if !strings.Contains(out, "Status: "+want) {
		return fmt.Errorf("pf not %s yet (%q)", strings.ToLower(want), strings.TrimSpace(out))
	}
	return p.packagesStarted(strings.Contains(out, "packages-started"), strings.Contains(out, pfPackagesSlow), strings.Contains(out, "packages-reinstall"))
}

// packagesStarted is WaitReady's last check after a reboot of fwab's:
// the boot ran PfPackagesHook. A boot that reinstalls the packages
// instead (pfNeedsPackageSync) runs it when the reinstall is done.
func (p *PfSense) packagesStarted(started, slow, reinstall bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !p.hooked:
		return nil
	case started:
		p.hooked = false
		if slow {
			p.log.Warn("the boot's Suricata start had not ended after 5 minutes; going on", "hook", PfPackagesHook)
		}
		return nil
	case reinstall:
		return fmt.Errorf("the boot reinstalls the packages (%s is there)", pfNeedsPackageSync)
	}
	return fmt.Errorf("the boot has not started the packages yet (rc.start_packages has not run %s, or Suricata still starts)", PfPackagesHook)
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

// NormalizePfSenseVersion turns a pfSense package version (2.7.2_1,
// 2.8.0,1) or an /etc/version text (2.7.2-RELEASE) into the product
// version they name: 2.7.2, 2.8.0.
//
// upstream: not settled — pkg versions are PORTVERSION[_PORTREVISION][,PORTEPOCH] (FreeBSD ports), and /etc/version's format (`$product_version = rtrim(file_get_contents($version_file))`, pfsense 2.7.2 src/etc/inc/globals.inc:49) is not in the sources read; Plus and development snapshot formats are unknown, checked at run time by Upgrade, which refuses unless the normalised offer equals the version asked for
func NormalizePfSenseVersion(v string) string {
	v = strings.TrimSpace(v)
	v, _, _ = strings.Cut(v, ",")
	v, _, _ = strings.Cut(v, "_")
	v, _, _ = strings.Cut(v, "-")
	return v
}

// pfUpgradeOffer matches the check mode's answer.
var pfUpgradeOffer = regexp.MustCompile(`(?m)^(\S+) version of (\S+) is available\s*$`)

// UpgradeRefusedError is an upgrade fwab refused before anything changed:
// the firewall would install another version than the one asked for.
type UpgradeRefusedError struct {
	Want, Offered, Running, Line string
}

func (e *UpgradeRefusedError) Error() string {
	if e.Offered == "" {
		return fmt.Sprintf("pfsense upgrade: asked for %s, but the firewall (running %s) offers no upgrade on its update branch (%q); nothing changed", e.Want, e.Running, e.Line)
	}
	return fmt.Sprintf("pfsense upgrade: asked for %s, but the firewall's update branch would install %s (%q; running %s); pfSense-upgrade cannot be told a version, so nothing was changed", e.Want, e.Offered, e.Line, e.Running)
}

// UpgradeOffer asks the firewall what an upgrade would install, with
// pfSense-upgrade's own check mode: the product version it names ("" when
// the box is up to date) and the line it printed. It first reads the
// usage and refuses a pfSense-upgrade without -c.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/pkg-utils.inc:1351 — pfSense's own check: `/* pfSense-upgrade returns 2 when there is a new version */` and takes the first word of the last line
// upstream: not settled — -c may refresh the repository metadata and upgrade pkg and the repo package (pfSense-upgrade's check_upgrade, pfsense/FreeBSD-ports@009c913849dd9b059a328e69864c01f01d2dd13b sysutils/pfSense-upgrade/files/pfSense-upgrade:39 `-c`); checked at run time by reading `pfSense-upgrade -h` first
func (p *PfSense) UpgradeOffer(ctx context.Context) (version, line string, err error) {
	usage, usageErr, _, err := p.sh.Run(ctx, pfUpgradeCmd+" -h", nil)
	if err != nil {
		return "", "", err
	}
	if !regexp.MustCompile(`\[-c[|\]]|(?m)^\s*-c\s`).Match(append(usage, usageErr...)) {
		return "", "", fmt.Errorf("this pfSense-upgrade lists no -c (check) option in its usage, so fwab cannot learn what it would install; upgrade by hand: %q", strings.TrimSpace(string(usage)+string(usageErr)))
	}
	out, errOut, code, err := p.sh.Run(ctx, pfUpgradeCmd+" -c", nil)
	if err != nil {
		return "", "", err
	}
	text := strings.TrimSpace(string(out))
	switch code {
	case 0:
		return "", lastLine(text), nil
	case 2:
		m := pfUpgradeOffer.FindAllStringSubmatch(text, -1)
		if m == nil {
			return "", "", fmt.Errorf("pfSense-upgrade -c exited 2 (upgrade available) without naming a version: %q", lastLine(text))
		}
		last := m[len(m)-1]
		return NormalizePfSenseVersion(last[1]), last[0], nil
	}
	return "", "", &CommandError{Cmd: pfUpgradeCmd + " -c", Exit: code, Stderr: string(errOut) + string(out)}
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[i+1:])
	}
	return s
}

// Upgrade first asks the firewall what it would install (UpgradeOffer)
// and refuses, changing nothing, unless that is version (empty: whatever
// it offers). Then it runs pfSense-upgrade -y, which takes no version,
// and waits for every reboot: a major upgrade reboots twice, and the
// upgrade is over when the kernel package has no next_stage annotation
// and /etc/version names the version.
//
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:401 — the boot runs `/usr/local/sbin/${product_name}-upgrade -y -U -b 2` (stage 3 at line 556); the stages keep a next_stage annotation on the kernel package (pfSense-upgrade's pkg_upgrade, same FreeBSD-ports commit)
func (p *PfSense) Upgrade(ctx context.Context, version string, progress func(string)) error {
	if progress == nil {
		progress = func(string) {}
	}
	running, err := p.output(ctx, "cat "+pfVersionFile)
	if err != nil {
		return fmt.Errorf("pfsense upgrade: %w", err)
	}
	running = strings.TrimSpace(running)
	offered, line, err := p.UpgradeOffer(ctx)
	if err != nil {
		return fmt.Errorf("pfsense upgrade: %w", err)
	}
	want := NormalizePfSenseVersion(version)
	switch {
	case offered == "" && (version == "" || want == NormalizePfSenseVersion(running)):
		progress("nothing to install: " + line)
		return nil
	case offered == "":
		return &UpgradeRefusedError{Want: version, Running: running, Line: line}
	case version != "" && offered != want:
		return &UpgradeRefusedError{Want: version, Offered: offered, Running: running, Line: line}
	}
	progress("the firewall offers " + offered + ": " + line)
	if version == "" {
		want = offered
	}
	if err := p.markReboot(ctx); err != nil {
		return fmt.Errorf("pfsense upgrade: %w", err)
	}
	lw := &lineWriter{fn: progress}
	code, errOut, err := p.sh.Stream(ctx, pfUpgrade, lw)
	lw.Flush()
	switch {
	case errors.Is(err, ErrConnectionLost):
		progress("connection closed: the firewall is rebooting")
	case err != nil:
		p.clearRebootMarker(ctx)
		return fmt.Errorf("pfsense upgrade: %w", err)
	case code != 0:
		p.clearRebootMarker(ctx)
		return fmt.Errorf("pfsense upgrade: %w", &CommandError{Cmd: pfUpgrade, Exit: code, Stderr: string(errOut)})
	}
	if err == nil && !p.awaitReboot(ctx) {
		p.clearRebootMarker(ctx)
		return fmt.Errorf("pfsense upgrade: pfSense-upgrade exited without rebooting, although the check offered %s", offered)
	}
	deadline, ok := ctx.Deadline()
	wait := 30 * time.Minute
	if ok {
		wait = time.Until(deadline)
	}
	got, err := p.awaitUpgradeStages(ctx, wait, progress)
	if err != nil {
		return fmt.Errorf("pfsense upgrade: %w", err)
	}
	if NormalizePfSenseVersion(got) != want {
		return fmt.Errorf("pfsense upgrade: the firewall reports version %q after the upgrade, want %q", got, want)
	}
	progress("version " + got)
	return nil
}

// pfUpgradeStageCmd prints "running" while pfSense-upgrade runs (its last
// stage reinstalls the packages with SSH already up, holding pkg's
// database, so that pkg's queries fail meanwhile); otherwise the kernel
// package's name, its next_stage annotation (empty when the upgrade is
// done), a blank line and /etc/version. The kernel package is found as
// pfSense-upgrade finds it: a Netgate model's has its own name, and a debug
// kernel may sit beside it. Any failure of pkg exits 3: fwab asks again.
//
// upstream: pfsense/FreeBSD-ports@314385e870766782a4df90631eac38bde9d693cf sysutils/pfSense-upgrade/files/pfSense-upgrade:2364 — `echo $$ > ${pid_file}`, with `pid_file="/var/run/$(basename $0).pid"` at 2159
// upstream: pfsense/FreeBSD-ports@314385e870766782a4df90631eac38bde9d693cf sysutils/pfSense-upgrade/files/pfSense-upgrade:1110 — `export kernel_pkg=$(_pkg query %n $(_pkg info \` with `${product}-kernel-\* | grep -v -- -debug-))` at 1111
// upstream: pfsense/FreeBSD-ports@314385e870766782a4df90631eac38bde9d693cf sysutils/pfSense-upgrade/files/pfSense-upgrade:1196 — `export next_stage=$(_pkg annotate -q -S ${kernel_pkg} next_stage)`
// upstream: not settled — `pkg query -g` (a glob instead of pfSense-upgrade's `query %n $(info GLOB)`) is pkg(8)'s, not in the upstream copy; checked at run time: no name, or an error, and fwab asks again
const pfUpgradeStageCmd = `if [ -f /var/run/pfSense-upgrade.pid ] && kill -0 "$(cat /var/run/pfSense-upgrade.pid)" 2>/dev/null; then echo running; exit 0; fi; ` +
	`k=$(pkg-static query -g %n 'pfSense-kernel-*' | grep -v -- -debug-) || exit 3; echo "$k"; pkg-static annotate -q -S "$k" next_stage || exit 3; echo; cat ` + pfVersionFile

// awaitUpgradeStages waits, through every reboot, until the box is ready,
// the kernel package has no next_stage annotation left, and returns
// /etc/version.
func (p *PfSense) awaitUpgradeStages(ctx context.Context, wait time.Duration, progress func(string)) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		progress("waiting for the firewall to come back")
		if err := p.WaitReady(ctx, time.Until(deadlineOf(ctx))); err != nil {
			return "", err
		}
		out, err := p.output(ctx, pfUpgradeStageCmd)
		switch kernel, rest, _ := strings.Cut(out, "\n"); {
		case err != nil:
			// pkg failed (its database locked, say): ask again.
		case kernel == "running":
			progress("pfSense-upgrade is still running (its last stage reinstalls the packages): waiting for it")
		default:
			stage, version, _ := strings.Cut(strings.TrimLeft(rest, " "), "\n")
			if strings.TrimSpace(stage) == "" {
				return strings.TrimSpace(version), nil
			}
			progress("upgrade stage " + strings.TrimSpace(stage) + " still to run: waiting for the next reboot")
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the upgrade did not finish in %v: %w", wait, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline()
	return d
}

// clearRebootMarker removes the marker after a reboot that did not start,
// so that a later WaitReady does not wait for it forever.
func (p *PfSense) clearRebootMarker(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	// The hook first: a hook run between the two would take this boot
	// for the next.
	p.sh.Run(ctx, "rm -f "+ShellQuote(PfPackagesHook)+" "+rebootMarker, nil)
	p.mu.Lock()
	p.hooked = false
	p.mu.Unlock()
}

// awaitReboot reports whether the box goes down (or has gone down: the
// marker is gone) within RebootGrace.
func (p *PfSense) awaitReboot(ctx context.Context) bool {
	deadline := time.Now().Add(p.opts.RebootGrace)
	for {
		out, _, _, err := p.sh.Run(ctx, "if [ -e "+rebootMarker+" ]; then echo pending; fi", nil)
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
