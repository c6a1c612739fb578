package fwapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Paths on the firewall used by the lock and the commit-confirmed rollback.
const (
	LockDir       = "/var/run/fwab.lock"
	lockOwnerFile = LockDir + "/owner"
	// RollbackConfig is a dot file for the reason LeaseOriginal is.
	RollbackConfig = "/conf/backup/.fwab-rollback.xml"
	// legacyRollbackConfig is where earlier versions kept it.
	legacyRollbackConfig = "/conf/backup/fwab-rollback.xml"
	RollbackPIDFile      = "/var/run/fwab-rollback.pid"
)

// The rollback's files that must outlive a reboot.
const (
	// RollbackScript and RollbackFired live in /conf (pfSense's /cf/conf),
	// which survives a reboot; /var/run is emptied at boot.
	// upstream: pfsense 2.7.2 src/etc/pfSense-rc:267 — `/sbin/mount -o rw,size=4m,mode=1777 -t tmpfs tmpfs $varrunpath` at every boot (2.6.0: line 248)
	RollbackScript = "/conf/fwab-rollback.sh"
	// RollbackFired is written by the rollback script once it has restored
	// the previous config; it holds the time it fired. Disarm renames it to
	// RollbackFired+".seen" once it has said so.
	RollbackFired = "/conf/fwab-rollback.fired"
	// rollbackBroken is written by a disarm that took over from a rollback
	// that died half-way; it holds when the rollback had started, and is
	// reported until Disarm has said so, as RollbackFired is.
	rollbackBroken = "/conf/fwab-rollback.broken"
	// RollbackBootHook re-arms, at boot, a rollback a reboot interrupted:
	// pfSense's rc.start_packages starts every /usr/local/etc/rc.d/*.sh.
	// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:54 — `$rcfiles = glob(RCFILEPREFIX . "*.sh");` started with `start` at boot
	RollbackBootHook = "/usr/local/etc/rc.d/fwab_rollback.sh"
	// OPNsenseRollbackBootHook is the same on OPNsense, whose boot runs
	// every script of the start syshook (without arguments).
	// upstream: opnsense/core@8215982 src/etc/rc:243 — `/usr/local/etc/rc.syshook start` near the end of the boot
	// upstream: opnsense/core@8215982 src/etc/rc.syshook:61 — `SYSHOOKS="$(find -s ${SYSDIR}/${SYSLEVEL} -type f})"`, each run in turn
	OPNsenseRollbackBootHook = "/usr/local/etc/rc.syshook.d/start/99-fwab-rollback"
	// RollbackClaim makes firing and disarming one hand-off: the rollback
	// script, when its timer runs out, and Disarm both try to claim this
	// name (claimCmd: each writes a file saying who it is and hard-links
	// it to the name; link(2) is atomic and fails when the name exists, so
	// exactly one succeeds and the name always says who). The loser stands
	// down; a Disarm that lost waits for the rollback to finish. It lives
	// in /conf, beside the script, so that a boot knows whether a restore
	// was under way when the box went down. A session's lease claims it
	// too, before it restores the original.
	RollbackClaim = "/conf/fwab-rollback.claim"
)

// RollbackRanError is Disarm's answer when the rollback had already run:
// the firewall runs the previous config since At. Failed: it restored
// nothing, having found its saved copy corrupt ("checksum") or config.xml
// changed by someone else ("stood-down").
type RollbackRanError struct {
	At     string
	Failed bool
}

func (e *RollbackRanError) Error() string {
	if e.Failed && strings.HasPrefix(e.At, "stood-down") {
		return "the commit-confirmed rollback ran but found config.xml changed by someone else (" + e.At + ") and left it as it is: the firewall runs that edit, not the previous config"
	}
	if e.Failed {
		return "the commit-confirmed rollback ran but found its saved copy of the previous config corrupt (" + e.At + ") and restored nothing: the firewall still runs the change"
	}
	return "the commit-confirmed rollback already ran (at " + e.At + "): the firewall runs the previous config, restored with its services"
}

// RollbackRunningError is Disarm's answer when the rollback had claimed
// the hand-off first and did not finish within the guard's RunWait: the
// firewall is restoring the previous config (or stopped half-way).
type RollbackRunningError struct {
	Since string // when the rollback claimed the hand-off (Unix time on the box)
	Wait  time.Duration
}

func (e *RollbackRunningError) Error() string {
	return fmt.Sprintf("the commit-confirmed rollback started (at %s) before fwab could confirm, and has not finished after %v: the firewall is restoring the previous config; run 'fwab fw recover --target NAME' once it is done", e.Since, e.Wait)
}

// RollbackClaimedError is WriteConfig's answer when the commit-confirmed
// rollback has claimed the hand-off (RollbackClaim): it is restoring the
// previous config, or has restored it and the session has not yet seen
// that (Disarm reports it and clears the claim). A write then would land
// between the restore and the reload or reboot that follows it and
// survive them, or go over a restore nobody has seen, so it is refused
// under the product's config lock and config.xml is left as it is.
type RollbackClaimedError struct {
	Since string // the claim's line: "rollback <Unix time on the box>"
}

func (e *RollbackClaimedError) Error() string {
	return "the commit-confirmed rollback has taken over (" + e.Since + ") and restores the previous config, so this write was refused and config.xml left as it is; fwab's next disarm reports the rollback"
}

// exitRollbackClaimed is the exit status of a config write that found the
// rollback holding the hand-off (RollbackClaimedError).
const exitRollbackClaimed = 4

// exitConfigUnlocked is the exit status of a config write that could not
// take the product's config lock (ConfigLockError).
const exitConfigUnlocked = 5

// ConfigLockError is a config write the box refused before it wrote
// anything, because the product's config lock could not be taken.
type ConfigLockError struct {
	Lock   string // the lock file
	Detail string // the box's line
}

// StopsSweep: no later point can be written until the lock is fixed.
func (e *ConfigLockError) StopsSweep() bool { return true }

func (e *ConfigLockError) Error() string {
	return fmt.Sprintf("the firewall's config lock %s could not be taken (%s), so nothing was written: check on the firewall that %s is a file root can open and lock (ls -l %s)", e.Lock, e.Detail, e.Lock, e.Lock)
}

// refuseWhileRollbackClaims is the shell words a config write runs first,
// under the product's config lock: while the rollback holds RollbackClaim
// it exits exitRollbackClaimed with the claim's line on stderr. The
// rollback claims before it restores, and its restore takes the same lock
// (install), so a write either finished before the claim (and the restore
// goes over it) or is refused.
func refuseWhileRollbackClaims() string {
	return "h=$(cat " + ShellQuote(RollbackClaim) + " 2>/dev/null); case \"$h\" in rollback*) echo \"$h\" >&2; exit " + strconv.Itoa(exitRollbackClaimed) + " ;; esac; "
}

// rollbackClaimed is the *RollbackClaimedError a write's exit status and
// stderr say, or nil.
func rollbackClaimed(exit int, stderr string) error {
	if exit != exitRollbackClaimed {
		return nil
	}
	return &RollbackClaimedError{Since: strings.TrimSpace(stderr)}
}

// RollbackBrokenError is Disarm's answer when the rollback had claimed the
// hand-off but its process is gone without having finished (killed, or a
// reboot whose boot did not run its hook): Disarm took the hand-off over,
// so nothing more runs, and the box may hold a half-restored config.
type RollbackBrokenError struct{ Since string }

func (e *RollbackBrokenError) Error() string {
	return "the commit-confirmed rollback started (at " + e.Since + ") and stopped before it finished: fwab took over; the firewall may run a half-restored config"
}

// rollbackOver reports whether err says no rollback will run any more,
// having run or stopped half-way: a restore that writes the config itself
// can go on.
func rollbackOver(err error) bool {
	var broken *RollbackBrokenError
	return rollbackRan(err) || errors.As(err, &broken)
}

// claimCmd is the shell words that claim the hand-off name claim for who,
// if no one holds it: who's file is written, then hard-linked to the name
// (link(2) fails when the name exists). It succeeds only for the winner.
func claimCmd(claim, who string) string {
	f := ShellQuote(claim + "." + who)
	return "echo \"" + who + " $(date +%s)\" > " + f + " && ln " + f + " " + ShellQuote(claim) + " 2>/dev/null"
}

// holderOf is the shell words for the holder's line of claim ("" for none).
func holderOf(claim string) string {
	return "\"$(cat " + ShellQuote(claim) + " 2>/dev/null)\""
}

// clearClaimCmd removes a hand-off name and every party's file.
func clearClaimCmd(claim string, parties ...string) string {
	words := []string{"rm", "-f", ShellQuote(claim)}
	for _, p := range parties {
		words = append(words, ShellQuote(claim+"."+p))
	}
	return strings.Join(words, " ")
}

// The parties to the rollback's hand-off.
var rollbackParties = []string{"rollback", "disarm", "lease"}

// rollbackRan reports whether err is Disarm saying the rollback had run:
// the previous config is back, which restoring and recovering expect.
func rollbackRan(err error) bool {
	var ran *RollbackRanError
	return errors.As(err, &ran)
}

// Shell is what the safety functions need from a firewall's shell;
// *SSHClient implements it.
type Shell interface {
	Run(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, exit int, err error)
	ReadFile(ctx context.Context, name string) ([]byte, error)
	WriteFileAtomic(ctx context.Context, name string, data []byte) error
}

var _ Shell = (*SSHClient)(nil)

// Guard is the firewall-side safety a Session needs: a lock that admits
// one writer, and a rollback armed on the firewall itself.
type Guard interface {
	Lock(ctx context.Context, owner LockOwner) error
	Unlock(ctx context.Context, owner LockOwner) error
	// ForceUnlock removes a lock left by a crashed fwab.
	ForceUnlock(ctx context.Context) error
	ArmRollback(ctx context.Context, previous []byte, after time.Duration) error
	Disarm(ctx context.Context) error
	// RollbackFired reports whether an armed rollback ran, and when.
	RollbackFired(ctx context.Context) (bool, string, error)
}

// LockOwner names the holder of the firewall lock.
type LockOwner struct {
	Owner string // user@host
	PID   int
	Time  time.Time
	Token string // random, to tell two holders with the same name apart
}

func (o LockOwner) String() string {
	return fmt.Sprintf("owner=%s pid=%d time=%s", o.Owner, o.PID, o.Time.UTC().Format(time.RFC3339))
}

func (o LockOwner) file() string {
	return fmt.Sprintf("owner=%s\npid=%d\ntime=%s\ntoken=%s\n", o.Owner, o.PID, o.Time.UTC().Format(time.RFC3339), o.Token)
}

// LockedError is a firewall another fwab holds.
type LockedError struct {
	Holder string // the holder's owner file, one line
	// LeaseEnds is when the holder's lease on the box ends (zero: no lease).
	LeaseEnds time.Time
}

func (e *LockedError) Error() string {
	if !e.LeaseEnds.IsZero() {
		return fmt.Sprintf("firewall is locked by another fwab (%s); its lease on the box ends at %s, and if that fwab is gone the box then restores its original by itself: wait for it, or, once that fwab is gone, run 'fwab fw recover --target NAME' (from any machine)",
			e.Holder, e.LeaseEnds.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("firewall is locked by another fwab (%s): wait for it to finish; if it crashed, run 'fwab fw recover --target NAME' from the machine that ran it", e.Holder)
}

// ShellGuard implements Guard with the contract's shell commands: mkdir for
// the lock, daemon(8) for the rollback timer.
type ShellGuard struct {
	Sh Shell
	// ConfigPath is the firewall's config.xml; default /conf/config.xml.
	ConfigPath string
	// Reload is what the rollback runs after restoring the config; it runs
	// only when fwab has lost the firewall, so it reloads everything.
	// Default /etc/rc.reload_all.
	Reload string
	// CachePath is removed before the reload; default /tmp/config.cache.
	CachePath string
	// ConfigLock is the file whose flock(2) the product's own config saves
	// hold while they write (pfSense /tmp/config.lock, OPNsense
	// config.xml itself); a restore puts the config back holding it, so
	// never over a save under way. "" takes no lock.
	ConfigLock string
	// ConfigInPlace writes the restored config into config.xml in place
	// under ConfigLock, as OPNsense's saves do (the lock is config.xml's
	// own, so a rename would send a save that waited for it to a removed
	// file); otherwise it is renamed over config.xml.
	ConfigInPlace bool
	// BeforeRestore run, in order, before the config is put back, while the
	// failed change's scripts are still in place (stop its Suricata); a
	// command that fails does not stop the rollback.
	BeforeRestore []string
	// AfterReload run after Reload: what it does not restore (package
	// services).
	AfterReload []string
	// ForRestore, when set, fits the guard to the config a restore puts
	// back (saved): package lines that depend on what that config holds.
	ForRestore func(g ShellGuard, saved []byte) ShellGuard
	// BeforeReboot run, for a rollback that reboots, after the config is
	// put back and before the reboot: what the boot does not rebuild
	// from the restored config (Suricata's rule files).
	BeforeReboot []string
	// BootHook, when set, is where the rollback installs a boot script
	// (RollbackBootHook, OPNsenseRollbackBootHook) so that a reboot does
	// not lose an armed rollback.
	BootHook string
	// LeaseHook, when set, is where a session's lease installs its boot
	// script (LeaseBootHook, OPNsenseLeaseBootHook).
	LeaseHook string
	// RunWait is how long a Disarm that lost the hand-off waits for the
	// rollback to finish (a full reload, or a reboot); default 10 minutes.
	RunWait time.Duration
}

// RebootRollbacker arms a rollback for a change only a boot applies
// (crypto.hardware): after restoring the config it reboots the firewall
// instead of reloading it, so the kernel's modules are the old config's
// again.
type RebootRollbacker interface {
	ArmRollbackReboot(ctx context.Context, previous []byte, after time.Duration) error
}

// forRestore is g fitted to the config a restore puts back (ForRestore).
func (g ShellGuard) forRestore(saved []byte) ShellGuard {
	if g.ForRestore == nil {
		return g
	}
	return g.ForRestore(g, saved)
}

// afterReload are the AfterReload lines, then, when there are any, the
// saved config put back once more: the package syncs they run save
// config.xml themselves (Suricata's cron jobs, pfBlockerNG's aliases and
// rules), and the box must end on the very file it restored. Their
// additions stay in force until the next save, as after fwab's own
// restore (rewriteAdopted).
//
// upstream: pfsense 2.7.2 src/etc/inc/services.inc:5090 — install_cron_job saves with `write_config(` when a job changes (Suricata's sync installs its log-limit job)
func (g ShellGuard) afterReload(saved, conf string) []string {
	return g.thenAgain(g.AfterReload, saved, conf)
}

// lockBarrier is the line a restore runs once it holds the hand-off,
// before it reads config.xml: it waits (up to a minute) for the product's
// config lock, so that a write already under the lock ends first; later
// writes of fwab's are refused (refuseWhileRollbackClaims).
func (g ShellGuard) lockBarrier() []string {
	if g.ConfigLock == "" {
		return nil
	}
	return []string{"lockf -k -t 60 " + ShellQuote(g.ConfigLock) + " /bin/sh -c : || logger -t fwab \"fwab restore: could not wait for the config lock (lockf exit $?; 75: held for 60 s); restoring without it\""}
}

// putAgain is the shell words that install the saved config (quoted
// conf) once more, through a copy so that saved stays.
func (g ShellGuard) putAgain(saved, conf string) string {
	again := ShellQuote(saved + ".again")
	return "cp " + ShellQuote(saved) + " " + again + " && " + g.install(again, conf)
}

// againIfChanged are the lines, after a restore's reload (or before its
// reboot: reload ""), that find config.xml other than the saved config
// (sum, its SHA-256): a save that was under way when the restore began (a
// package sync the step's apply started) landed after it, and the reload
// applied it. The saved config goes back, and is reloaded once more.
func (g ShellGuard) againIfChanged(saved, conf, sum, reload string) []string {
	then := "sync; rm -f " + ShellQuote(g.cachePath())
	if reload != "" {
		then += "; " + reload
	}
	return []string{
		"if [ \"$(sha256 -q " + conf + ")\" != " + sum + " ]; then",
		"\tif " + g.putAgain(saved, conf) + "; then",
		"\t\t" + then,
		"\t\tlogger -t fwab \"fwab restore: config.xml changed while it was restored (a save under way); put back again\"",
		"\telse",
		"\t\tlogger -t fwab \"fwab restore: config.xml changed while it was restored, and putting it back again failed\"",
		"\tfi",
		"fi",
	}
}

// thenAgain are cmds, then, when there are any, the saved config put back
// once more (see afterReload).
func (g ShellGuard) thenAgain(cmds []string, saved, conf string) []string {
	if len(cmds) == 0 {
		return nil
	}
	return append(slices.Clone(cmds),
		g.putAgain(saved, conf)+" && sync",
		"rm -f "+ShellQuote(g.cachePath()),
	)
}

// install is the restore's write of the staged config tmp onto conf (both
// quoted), holding the product's config lock (ConfigLock) as its own saves
// do, in place where they write in place (ConfigInPlace); after a minute of
// waiting, or when the write fails, it renames without the lock: a safety
// net must restore.
//
// upstream: pfsense/pfsense@9363ac5b86 src/etc/inc/util.inc:783 — `function lock($lock, $op = LOCK_SH) {`, an flock on `{$g['tmp_path']}/{$lock}.lock` (write_config takes `lock('config', LOCK_EX)`)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:751 — `if (flock($this->config_file_handle, LOCK_EX)) {`
func (g ShellGuard) install(tmp, conf string) string {
	mv := "mv " + tmp + " " + conf
	if g.ConfigLock == "" {
		return mv
	}
	locked := mv
	if g.ConfigInPlace {
		locked = "/bin/sh -c " + ShellQuote("cat "+tmp+" > "+conf+" && rm -f "+tmp)
	}
	return "{ lockf -k -t 60 " + ShellQuote(g.ConfigLock) + " " + locked + " || " + mv + "; }"
}

func (g ShellGuard) configPath() string {
	if g.ConfigPath != "" {
		return g.ConfigPath
	}
	return "/conf/config.xml"
}

func (g ShellGuard) run(ctx context.Context, cmd string) (string, error) {
	out, errOut, code, err := g.Sh.Run(ctx, cmd, nil)
	if err != nil {
		return "", err
	}
	if code != 0 {
		return string(out), &CommandError{Cmd: cmd, Exit: code, Stderr: string(errOut)}
	}
	return string(out), nil
}

// query runs a command that only reads: when the connection is lost under
// it (a reload on the box reconfigured the interface the session runs
// over: the rollback's or the lease's rc.reload_all), it runs again on a
// new connection, up to three times.
func (g ShellGuard) query(ctx context.Context, cmd string) (string, error) {
	var err error
	for range 3 {
		var out string
		if out, err = g.run(ctx, cmd); !errors.Is(err, ErrConnectionLost) {
			return out, err
		}
	}
	return "", err
}

// Lock takes the firewall lock, or returns a *LockedError naming the holder.
func (g ShellGuard) Lock(ctx context.Context, owner LockOwner) error {
	if strings.ContainsAny(owner.Owner, "\n") {
		return errors.New("lock: owner name has a newline")
	}
	// A lock the boot voided (OPNsense keeps the emptied folder; see
	// Relock) is removed first: its holder's lock ended with the boot.
	cmd := "if " + voidedLock + "; then rmdir " + ShellQuote(LockDir) + "; fi; " +
		"mkdir " + ShellQuote(LockDir) + " && printf '%s' " + ShellQuote(owner.file()) + " > " + ShellQuote(lockOwnerFile)
	_, errOut, code, err := g.Sh.Run(ctx, cmd, nil)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if code == 0 {
		return nil
	}
	holder, rerr := g.Sh.ReadFile(ctx, lockOwnerFile)
	if rerr != nil {
		if strings.Contains(string(errOut), "exists") {
			return &LockedError{Holder: "unknown holder: " + LockDir + " exists without an owner file"}
		}
		// The command holds the owner file; name only the mkdir.
		return fmt.Errorf("lock: %w", &CommandError{Cmd: "mkdir " + LockDir, Exit: code, Stderr: string(errOut)})
	}
	return &LockedError{Holder: oneLine(holder)}
}

func oneLine(b []byte) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "token=") {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}

// Unlock releases the lock if owner still holds it.
func (g ShellGuard) Unlock(ctx context.Context, owner LockOwner) error {
	out, err := g.run(ctx, "if [ -f "+ShellQuote(lockOwnerFile)+" ]; then cat "+ShellQuote(lockOwnerFile)+
		"; elif "+voidedLock+"; then rmdir "+ShellQuote(LockDir)+" && echo "+lockGone+
		"; elif [ -d "+ShellQuote(LockDir)+" ]; then echo "+ShellQuote("unknown holder (an empty "+LockDir+")")+
		"; else echo "+lockGone+"; fi")
	if err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	if strings.TrimSpace(out) == lockGone {
		// /var/run is a memory disk: a reboot of the firewall took the
		// lock away. There is nothing to release.
		return nil
	}
	if !strings.Contains(out, "token="+owner.Token+"\n") {
		return fmt.Errorf("unlock: the lock is now held by %s, not by us: left in place", oneLine([]byte(out)))
	}
	if _, err := g.run(ctx, "rm -r "+ShellQuote(LockDir)); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// voidedLock is a shell test: the lock folder is there, empty, and older
// than the boot (its owner file went with /var/run's files at the boot, as
// OPNsense's boot deletes them and keeps the folders; see Relock).
var voidedLock = "[ -d " + ShellQuote(LockDir) + " ] && [ ! -f " + ShellQuote(lockOwnerFile) + " ] && [ " + ShellQuote(LockDir) + " -ot " + ShellQuote(bootMarker) + " ]"

// lockGone is what Unlock's command prints when there is no lock.
const lockGone = "fwab-no-lock"

// ForceUnlock removes the lock whoever holds it.
func (g ShellGuard) ForceUnlock(ctx context.Context) error {
	if _, err := g.run(ctx, "rm -rf "+ShellQuote(LockDir)); err != nil {
		return fmt.Errorf("force unlock: %w", err)
	}
	return nil
}

// ArmRollback saves previous to RollbackConfig and starts, detached on the
// firewall, a script that after the delay puts it back as config.xml and
// reloads, unless Disarm runs first. A rollback already armed is replaced.
func (g ShellGuard) ArmRollback(ctx context.Context, previous []byte, after time.Duration) error {
	return g.arm(ctx, previous, after, false)
}

// ArmRollbackReboot is ArmRollback ending in a reboot: the boot loads what
// the restored config names, and starts every service.
func (g ShellGuard) ArmRollbackReboot(ctx context.Context, previous []byte, after time.Duration) error {
	return g.arm(ctx, previous, after, true)
}

func (g ShellGuard) arm(ctx context.Context, previous []byte, after time.Duration, reboot bool) error {
	g = g.forRestore(previous)
	if after < time.Second {
		return fmt.Errorf("arm rollback: delay %v is under one second", after)
	}
	// A rollback still at work from an earlier step is waited for; one
	// that ran is the caller's to have seen (Disarm after each step).
	if err := g.Disarm(ctx); err != nil && !rollbackOver(err) {
		return fmt.Errorf("arm rollback: %w", err)
	}
	// Earlier versions kept it without the dot, where pfSense's boot may
	// take it for the last good config (see LeaseOriginal).
	if _, err := g.run(ctx, "rm -f "+ShellQuote(legacyRollbackConfig)); err != nil {
		return fmt.Errorf("arm rollback: %w", err)
	}
	if err := g.Sh.WriteFileAtomic(ctx, RollbackConfig, previous); err != nil {
		return fmt.Errorf("arm rollback: %w", err)
	}
	reload, cache := g.reload(), g.cachePath()
	conf := ShellQuote(g.configPath())
	tmp := ShellQuote(g.configPath() + ".fwab-rollback")
	sum := sha256.Sum256(previous)
	sumHex := hex.EncodeToString(sum[:])
	lines := []string{
		"# fwab commit-confirmed rollback: restores the config saved before a change",
		"# unless fwab confirms the change in time. Whichever of this script and",
		"# fwab's disarm claims " + RollbackClaim + " first goes on; the other stands down.",
		"# With \"resume\" (the boot hook, after a reboot that cut a restore short)",
		"# the claim is already this script's.",
		"if [ \"$1\" != resume ]; then",
		// Whole seconds, rounded up: never earlier than the session counts.
		"\tsleep " + strconv.Itoa(int((after+time.Second-1)/time.Second)),
		"\t" + claimCmd(RollbackClaim, "rollback") + " || exit 0",
		"fi",
	}
	lines = append(lines, g.lockBarrier()...)
	lines = append(lines,
		// Never over someone else's edit: with a session's lease on the
		// box, config.xml must be one the session may have left there.
		"cur=$(sha256 -q "+conf+")",
		"if [ -f "+ShellQuote(LeaseWritten)+" ] && ! grep -qF \"$cur\" "+ShellQuote(LeaseWritten)+"; then",
		"\tlogger -t fwab \"rollback: config.xml (sha256 $cur) is not one fwab wrote: someone else changed it, so it was left as it is\"",
		"\techo \"stood-down $(date +%s) $cur\" > "+ShellQuote(RollbackFired),
		"\trm -f "+ShellQuote(RollbackScript)+hookWord(g.BootHook),
		"\texit 0",
		"fi",
		"cp "+ShellQuote(RollbackConfig)+" "+tmp,
		"sync",
		"if [ \"$(sha256 -q "+tmp+")\" != "+sumHex+" ]; then echo checksum >> "+ShellQuote(RollbackFired)+"; exit 1; fi",
	)
	lines = append(lines, g.BeforeRestore...)
	lines = append(lines,
		g.install(tmp, conf),
		"sync",
		"rm -f "+ShellQuote(cache),
	)
	var hookRm []string
	if g.BootHook != "" {
		hookRm = []string{"rm -f " + ShellQuote(g.BootHook)}
	}
	if reboot {
		// Marked fired before the reboot: nothing runs after it, and the
		// boot hook is gone so the boot does not arm it again.
		lines = append(lines, g.thenAgain(g.BeforeReboot, RollbackConfig, conf)...)
		lines = append(lines, g.againIfChanged(RollbackConfig, conf, sumHex, "")...)
		lines = append(lines, hookRm...)
		lines = append(lines, "date +%s > "+ShellQuote(RollbackFired), "sync", "shutdown -r now", "")
	} else {
		lines = append(lines, reload)
		lines = append(lines, g.againIfChanged(RollbackConfig, conf, sumHex, reload)...)
		lines = append(lines, g.afterReload(RollbackConfig, conf)...)
		lines = append(lines, hookRm...)
		lines = append(lines, "date +%s > "+ShellQuote(RollbackFired), "")
	}
	script := strings.Join(lines, "\n")
	if _, err := g.run(ctx, "rm -f "+ShellQuote(RollbackFired)+" "+ShellQuote(RollbackFired+".seen")+" "+ShellQuote(rollbackBroken)+"; "+clearClaimCmd(RollbackClaim, rollbackParties...)); err != nil {
		return fmt.Errorf("arm rollback: %w", err)
	}
	if err := g.Sh.WriteFileAtomic(ctx, RollbackScript, []byte(script)); err != nil {
		return fmt.Errorf("arm rollback: %w", err)
	}
	if g.BootHook != "" {
		// pfSense starts rc.d scripts with "start" (and stops them with
		// "stop"); OPNsense's syshook passes nothing.
		// The boot runs the hook by path, so it must be executable (a
		// file written 0644 fails with "Permission denied" and the
		// rollback is lost). A restore the reboot cut short (the claim is
		// the rollback's) is finished at once; a timer the reboot ended
		// starts again; a claim that is disarm's means nothing to do.
		// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:77 — `fwrite($shell, "{$rcfile} start >>/tmp/bootup_messages 2>&1 &");`
		// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/rc.syshook:71 — `if ! ${_SYSHOOK} "${@}"; then`
		hook := g.bootHook(RollbackScript, RollbackFired, RollbackClaim, "rollback", RollbackPIDFile, "a commit-confirmed rollback")
		if err := g.Sh.WriteFileAtomic(ctx, g.BootHook, []byte(hook)); err != nil {
			return fmt.Errorf("arm rollback: %w", err)
		}
		q := ShellQuote(g.BootHook)
		if _, err := g.run(ctx, "chmod 755 "+q+" && [ -x "+q+" ]"); err != nil {
			return fmt.Errorf("arm rollback: the boot hook %s is not executable, so a reboot would lose the rollback: %w", g.BootHook, err)
		}
	}
	if _, err := g.run(ctx, shellJoin("daemon", "-f", "-p", RollbackPIDFile, "/bin/sh", RollbackScript)); err != nil {
		return fmt.Errorf("arm rollback: %w", err)
	}
	return nil
}

// Disarm stops an armed rollback and removes its script and boot hook;
// with none armed it does nothing. Disarming and firing are one hand-off
// (RollbackClaim): when the rollback had claimed it first, Disarm waits
// for it to finish (RunWait) and says it ran with a *RollbackRanError
// (once: RollbackFired still reports it), or with a *RollbackRunningError
// when it has not finished by then. A nil error means the rollback will
// not run.
func (g ShellGuard) Disarm(ctx context.Context) error {
	st, at, err := g.disarm(ctx)
	// The command is safe to run again (its reports stay until they are
	// acknowledged), so an answer lost on the way back is asked for again.
	for i := 0; i < 2 && errors.Is(err, ErrConnectionLost); i++ {
		st, at, err = g.disarm(ctx)
	}
	if err != nil {
		return err
	}
	if st == disarmRunning {
		st, at, err = g.awaitRunning(ctx, at)
		if err != nil {
			return err
		}
	}
	switch st {
	case disarmFired:
		// Acknowledged apart from the report, once the report is here: a
		// report whose answer was lost (a reload resetting the management
		// link) is made again by the next poll instead of being consumed
		// unseen. An acknowledgement that is lost only reports it twice.
		fired := ShellQuote(RollbackFired)
		_, _ = g.run(ctx, "if [ -f "+fired+" ]; then mv "+fired+" "+ShellQuote(RollbackFired+".seen")+"; fi")
		failed := strings.HasPrefix(at, "checksum") || strings.HasPrefix(at, "stood-down")
		return &RollbackRanError{At: at, Failed: failed}
	case disarmDead:
		_, _ = g.run(ctx, "rm -f "+ShellQuote(rollbackBroken))
		return &RollbackBrokenError{Since: at}
	}
	return nil
}

// What the disarm command found.
const (
	disarmDone    = "disarmed" // the rollback will not run (or none was armed)
	disarmFired   = "fired"    // the rollback ran to its end, at the time that follows
	disarmRunning = "running"  // the rollback claimed the hand-off first and is still at work
	disarmDead    = "dead"     // the rollback claimed it and its process is gone unfinished: taken over
)

// disarm takes the hand-off for fwab or finds who has it, in one command.
func (g ShellGuard) disarm(ctx context.Context) (state, at string, err error) {
	pid, fired, claim := ShellQuote(RollbackPIDFile), ShellQuote(RollbackFired), ShellQuote(RollbackClaim)
	hook := ""
	if g.BootHook != "" {
		hook = " " + ShellQuote(g.BootHook)
	}
	stop := "if [ -f " + pid + " ]; then pkill -F " + pid + "; rm -f " + pid + "; fi; rm -f " + ShellQuote(RollbackScript) + " " + ShellQuote(RollbackConfig) + hook
	broken := ShellQuote(rollbackBroken)
	cmd := "if [ -f " + fired + " ]; then echo " + disarmFired + " $(cat " + fired + "); " + clearClaimCmd(RollbackClaim, rollbackParties...) + "; rm -f " + ShellQuote(RollbackScript) + hook +
		"; elif [ -f " + broken + " ]; then echo " + disarmDead + " $(cat " + broken + ")" +
		"; else " + claimCmd(RollbackClaim, "disarm") + "; h=" + holderOf(RollbackClaim) + "; case \"$h\" in" +
		" disarm*|lease*) " + stop + "; echo " + disarmDone + " ;;" +
		// The rollback holds it: at work while its process lives; else it
		// died half-way, and disarm takes the name over (rename is atomic)
		// so that no boot hook resumes it.
		" rollback*) if [ -f " + pid + " ] && kill -0 \"$(cat " + pid + ")\" 2>/dev/null; then echo " + disarmRunning + " \"${h#rollback }\";" +
		" else echo \"disarm $(date +%s)\" > " + ShellQuote(RollbackClaim+".disarm") + " && mv " + ShellQuote(RollbackClaim+".disarm") + " " + claim + "; echo \"${h#rollback }\" > " + broken + "; " + stop + "; echo " + disarmDead + " \"${h#rollback }\"; fi ;;" +
		" *) echo noclaim ;; esac; fi"
	out, errOut, code, err := g.Sh.Run(ctx, cmd, nil)
	if err != nil {
		return "", "", fmt.Errorf("disarm rollback: %w", err)
	}
	if code != 0 {
		return "", "", fmt.Errorf("disarm rollback: %w", &CommandError{Cmd: "disarm", Exit: code, Stderr: string(errOut)})
	}
	state, at, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	switch state {
	case disarmDone, disarmFired, disarmRunning, disarmDead:
		return state, strings.TrimSpace(at), nil
	case "noclaim":
		return "", "", fmt.Errorf("disarm rollback: could not take the hand-off (%s could not be written: is /conf full? %s): the rollback stays armed and will restore the previous config", RollbackClaim, strings.TrimSpace(string(errOut)))
	}
	return "", "", fmt.Errorf("disarm rollback: unexpected answer %q", strings.TrimSpace(string(out)))
}

// awaitRunning waits for a rollback that won the hand-off to finish: its
// reload may drop the connection, its reboot takes the box away, so a
// failed poll is retried until RunWait has passed.
func (g ShellGuard) awaitRunning(ctx context.Context, since string) (state, at string, err error) {
	wait := g.runWait()
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-ctx.Done():
			return "", "", fmt.Errorf("disarm rollback: %w (the rollback on the firewall is running)", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
		st, at, err := g.disarm(ctx)
		if err == nil && st != disarmRunning {
			return st, at, nil
		}
		if time.Now().After(deadline) {
			return "", "", &RollbackRunningError{Since: since, Wait: wait}
		}
	}
}

// RollbackFired reports whether the rollback script completed.
func (g ShellGuard) RollbackFired(ctx context.Context) (bool, string, error) {
	fired, seen := ShellQuote(RollbackFired), ShellQuote(RollbackFired+".seen")
	out, err := g.query(ctx, "if [ -f "+fired+" ]; then cat "+fired+"; elif [ -f "+seen+" ]; then cat "+seen+"; else echo no; fi")
	if err != nil {
		return false, "", fmt.Errorf("rollback status: %w", err)
	}
	out = strings.TrimSpace(out)
	if out == "no" {
		return false, "", nil
	}
	return true, out, nil
}

// SHA256Hex is the hex SHA-256 of data, as FreeBSD's sha256 -q prints it.
func SHA256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// OPNsenseShellGuard is the lock and rollback for an OPNsense box reached
// over SSH (the same FreeBSD commands; OPNsense has no config cache and
// reloads everything with its own rc.reload_all).
func OPNsenseShellGuard(sh Shell) ShellGuard {
	return ShellGuard{Sh: sh, ConfigPath: "/conf/config.xml", Reload: "/usr/local/etc/rc.reload_all", CachePath: "/tmp/config.cache", ConfigLock: opnConfigPath, ConfigInPlace: true,
		AfterReload: opnRollbackAfter, BootHook: OPNsenseRollbackBootHook, LeaseHook: OPNsenseLeaseBootHook}
}

// opnRollbackAfter renders Suricata's files from the restored config and
// restarts it from them, as the IDS service reconfigure does: Suricata
// runs from its rendered rc.conf.d and suricata.yaml, which only a
// template reload writes, and rc.reload_all's rc.freebsd stop and start
// run it again from the files the failed change rendered. The stop comes
// first because rc.subr refuses a restart of a service rendered off, and
// rc.freebsd stops only services rendered on.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:81 — `$bckresult = trim($backend->configdRun('template reload OPNsense/IDS'));` then the rules install (line 85) and a start or restart
// upstream: opnsense-core 26.1 src/etc/rc.reload_all:61 — `pass_safe('/usr/local/etc/rc.freebsd start');`: services start again from what is rendered
// upstream: opnsense-core 26.1 src/etc/inc/plugins.inc.d/core.inc:252 — the product's own jobs call `/usr/local/sbin/configctl`
var opnRollbackAfter = []string{
	"/usr/local/sbin/configctl template reload OPNsense/IDS",
	"/usr/local/sbin/configctl ids stop",
	"/usr/local/sbin/configctl ids install rules",
	"/usr/local/sbin/configctl ids start",
}

// hookWord is " 'path'" for a boot hook to remove, "" for none.
func hookWord(hook string) string {
	if hook == "" {
		return ""
	}
	return " " + ShellQuote(hook)
}
