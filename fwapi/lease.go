package fwapi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A session's lease on the box is its dead-man switch: a watchdog on the
// firewall restores the session's original config and its services unless
// fwab renews the lease in time. It covers what the per-step rollback does
// not: fwab dying between steps (a CI runner killed, a laptop lid closed, a
// lost route). Everything it needs is on the box, so a box whose client
// vanished restores itself, and 'fwab fw recover' works from any machine.
//
// Its files live in /conf, which survives a reboot; its timer's pid lives
// in /var/run, which a boot empties, and its boot hook starts the watchdog
// again (it must be executable: both products run hooks by path).
//
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:267 — `/sbin/mount -o rw,size=4m,mode=1777 -t tmpfs tmpfs $varrunpath` at every boot
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:77 — `fwrite($shell, "{$rcfile} start >>/tmp/bootup_messages 2>&1 &");`
// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/etc/rc.syshook:71 — `if ! ${_SYSHOOK} "${@}"; then`
const (
	// LeaseOriginal is a dot file: pfSense's discover_last_backup() takes
	// the last *.xml of the backup folder by name when config.xml is
	// broken at boot, and must never take fwab's.
	// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:195 — `$backups = glob('/cf/conf/backup/*.xml');`
	LeaseOriginal = "/conf/backup/.fwab-lease-original.xml"
	LeaseScript   = "/conf/fwab-lease.sh"
	// LeaseExpires holds "SEQ SECONDS RENEWED_AT": the watchdog counts
	// SECONDS down in its own one-second sleeps, starting again at each
	// new SEQ (a renewal), so that a step of the box's clock (NTP at
	// boot, a box without a real-time clock) neither fires the lease
	// early nor holds it forever; RENEWED_AT (the box's clock) is only
	// for people (LeaseInfo.Expires).
	LeaseExpires = "/conf/fwab-lease.expires"
	// LeaseOwner names the session: its lock owner line and the lease.
	LeaseOwner = "/conf/fwab-lease.owner"
	// LeaseWritten lists the SHA-256 of every config.xml the session may
	// have left on the box (what it last wrote, and the step's previous
	// one): the watchdog restores only over one of them, and stands down
	// (logging why to syslog) over anyone else's edit.
	LeaseWritten = "/conf/fwab-lease.written"
	// LeaseClaim is the lease's hand-off, as RollbackClaim is the
	// rollback's: the expired watchdog and ReleaseLease both claim it.
	LeaseClaim = "/conf/fwab-lease.claim"
	// LeaseFired is written by the watchdog when it is done: "restored
	// TIME" or "stood-down TIME SHA256" (config.xml was someone else's).
	LeaseFired   = "/conf/fwab-lease.fired"
	LeasePIDFile = "/var/run/fwab-lease.pid"
	// LeaseBootHook and OPNsenseLeaseBootHook start the watchdog again at
	// boot (pfSense's rc.start_packages, OPNsense's start syshooks).
	LeaseBootHook         = "/usr/local/etc/rc.d/fwab_lease.sh"
	OPNsenseLeaseBootHook = "/usr/local/etc/rc.syshook.d/start/98-fwab-lease"
)

// DefaultLease is a session's lease unless the target or the command sets
// one. It must outlast what a live fwab cannot renew through: a reboot of
// the box (a firmware or crypto.hardware step; a slow appliance boots in
// 3–5 minutes) on top of a step's rollback deadline (2 minutes by
// default). It is short enough that a box whose client vanished is back on
// its original config within about ten minutes.
const DefaultLease = 10 * time.Minute

// Leaser is a Guard that can hold a lease on the box for a session.
type Leaser interface {
	// TakeLease puts the original config and the watchdog on the box;
	// the lease ends after length unless renewed. It refuses when another
	// session's lease is still on the box.
	TakeLease(ctx context.Context, owner LockOwner, original []byte, length time.Duration) error
	// RenewLease moves the end to length from now (the box's clock); a
	// *LeaseLostError when the lease already ended.
	RenewLease(ctx context.Context, length time.Duration) error
	// ExpectConfigs records the configs (by SHA-256) the session may leave
	// on the box: the watchdog restores only over one of them.
	ExpectConfigs(ctx context.Context, sums ...string) error
	// ReleaseLease ends the lease: the watchdog will not run. When the
	// watchdog had taken the hand-off, it waits for it and returns a
	// *LeaseLostError saying what it did.
	ReleaseLease(ctx context.Context) error
	// LeaseStatus reads the lease on the box.
	LeaseStatus(ctx context.Context) (LeaseInfo, error)
	// ReadLeaseOriginal reads the original config the lease keeps.
	ReadLeaseOriginal(ctx context.Context) ([]byte, error)
	// ClaimLease takes the lease's hand-off (the watchdog will not run)
	// and keeps its files, for a restore that may have to be tried again;
	// ReleaseLease then removes them.
	ClaimLease(ctx context.Context) error
}

var _ Leaser = ShellGuard{}

// LeaseInfo is what the box says of a lease.
type LeaseInfo struct {
	Held    bool      // a lease is on the box and has not ended
	Owner   string    // the owner line (user@host pid time), no token
	Token   string    // the owner's token
	Expires time.Time // by the box's clock
	Now     time.Time // the box's clock when read
	Ended   string    // "restored TIME", "stood-down TIME SHA256", "running" (the watchdog is restoring) or ""
	Written []string  // SHA-256 of the configs the session may have left on the box
}

// LeaseLostError is a lease that ended without fwab: the watchdog restored
// the original (or stood down over someone else's edit).
type LeaseLostError struct{ What string }

// StopsSweep: the box restored itself; no later point can be measured.
func (e *LeaseLostError) StopsSweep() bool { return true }

func (e *LeaseLostError) Error() string {
	return "the session's lease on the firewall ended without fwab (" + e.What + "): fwab did not renew it in time"
}

// LeaseHeldError is another session's lease still on the box.
type LeaseHeldError struct{ Info LeaseInfo }

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("the firewall holds the lease of another fwab session (%s), which ends at %s: its session did not finish; wait for the lease to end (the box then restores that session's original) or run 'fwab fw recover --target NAME'",
		e.Info.Owner, e.Info.Expires.UTC().Format(time.RFC3339))
}

// TakeLease implements Leaser.
func (g ShellGuard) TakeLease(ctx context.Context, owner LockOwner, original []byte, length time.Duration) error {
	if length < 2*time.Second {
		return fmt.Errorf("lease: %v is under two seconds", length)
	}
	info, err := g.LeaseStatus(ctx)
	if err != nil {
		return err
	}
	if info.Held && info.Token != owner.Token {
		return &LeaseHeldError{Info: info}
	}
	if info.Owner != "" && info.Token != owner.Token && info.Ended == "" {
		// Released but not cleared (a recover that stopped half-way):
		// the box's copy of that session's original must not go.
		return fmt.Errorf("lease: the box still holds the files of the lease of %s, whose session was not finished: run 'fwab fw recover --target NAME' first", info.Owner)
	}
	if info.Ended == "running" {
		return fmt.Errorf("lease: the box is restoring the original of an earlier session (%s) whose lease ended: wait for it to finish, then run 'fwab fw recover --target NAME'", info.Owner)
	}
	// An ended lease (its owner recovered or not) leaves its files: clear.
	if err := g.clearLease(ctx); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if err := g.Sh.WriteFileAtomic(ctx, LeaseOriginal, original); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	sum := SHA256Hex(original)
	ownerText := owner.file() + "lease=" + strconv.Itoa(int(length/time.Second)) + "\nsha256=" + sum + "\n"
	q := ShellQuote
	cmd := "chmod 600 " + q(LeaseOriginal) +
		" && printf '%s' " + q(ownerText) + " > " + q(LeaseOwner) +
		" && echo " + sum + " > " + q(LeaseWritten) +
		" && echo \"1 " + strconv.Itoa(int(length/time.Second)) + " $(date +%s)\" > " + q(LeaseExpires)
	if _, err := g.run(ctx, cmd); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if err := g.Sh.WriteFileAtomic(ctx, LeaseScript, []byte(g.forRestore(original).leaseScript(sum, owner.Token))); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if hook := g.LeaseHook; hook != "" {
		if err := g.Sh.WriteFileAtomic(ctx, hook, []byte(g.bootHook(LeaseScript, LeaseFired, LeaseClaim, "expired", LeasePIDFile, "the session lease"))); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		if _, err := g.run(ctx, "chmod 755 "+q(hook)+" && [ -x "+q(hook)+" ]"); err != nil {
			return fmt.Errorf("lease: the boot hook %s is not executable, so a reboot would lose the lease: %w", hook, err)
		}
	}
	if _, err := g.run(ctx, shellJoin("daemon", "-f", "-p", LeasePIDFile, "/bin/sh", LeaseScript)); err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	return nil
}

// leaseScript is the watchdog: it waits until the lease's end passes
// (renewals move it), takes the lease's hand-off, takes the step
// rollback's hand-off too (or lets a running rollback finish), and then
// restores the original config with a full reload, unless config.xml is
// not one the session left there.
func (g ShellGuard) leaseScript(sum, token string) string {
	q := ShellQuote
	exp, fired := q(LeaseExpires), q(LeaseFired)
	conf := q(g.configPath())
	tmp := q(g.configPath() + ".fwab-lease")
	// The files to remove with the rollback's and the lease's boot hooks.
	rollbackHook, leaseHook := "", ""
	if g.BootHook != "" {
		rollbackHook = " " + q(g.BootHook)
	}
	if g.LeaseHook != "" {
		leaseHook = " " + q(g.LeaseHook)
	}
	lines := []string{
		"# fwab session lease: restores the session's original config unless fwab",
		"# renews the lease (" + LeaseExpires + ") in time. With \"resume\" (the boot",
		"# hook, after a reboot that cut a restore short) the hand-off is already this script's.",
		"if [ \"$1\" != resume ]; then",
		// A torn or empty file (a power cut) ends the lease: the safe side.
		"\tread seq left at < " + exp + " || left=0",
		"\twhile [ -f " + exp + " ] && [ \"$left\" -gt 0 ]; do",
		"\t\tsleep 1; left=$((left - 1))",
		"\t\tread n l at < " + exp + " 2>/dev/null && [ \"$n\" != \"$seq\" ] && seq=$n && left=$l",
		"\tdone",
		"\t[ -f " + exp + " ] || exit 0",
		"\t" + claimCmd(LeaseClaim, "expired") + " || exit 0",
		"fi",
		"# The step's rollback must not run over this restore: take its hand-off,",
		"# or let a rollback already at work finish first (while its process lives).",
		claimCmd(RollbackClaim, "lease"),
		"case " + holderOf(RollbackClaim) + " in",
		"lease*) if [ -f " + q(RollbackPIDFile) + " ]; then pkill -F " + q(RollbackPIDFile) + "; rm -f " + q(RollbackPIDFile) + "; fi; rm -f " + q(RollbackScript) + rollbackHook + " ;;",
		"rollback*) i=0; while [ ! -f " + q(RollbackFired) + " ] && [ $i -lt 900 ] && [ -f " + q(RollbackPIDFile) + " ] && kill -0 \"$(cat " + q(RollbackPIDFile) + ")\" 2>/dev/null; do sleep 1; i=$((i+1)); done ;;",
		"esac",
	}
	lines = append(lines, g.lockBarrier()...)
	lines = append(lines,
		"cur=$(sha256 -q "+conf+")",
		// The original itself is always fwab's (a restore a reboot cut
		// short after its mv).
		"if [ \"$cur\" != "+sum+" ] && ! grep -qF \"$cur\" "+q(LeaseWritten)+"; then",
		"\tlogger -t fwab \"session lease ended, but config.xml (sha256 $cur) is not one fwab wrote: someone else changed it, so it was left as it is\"",
		"\techo \"stood-down $(date +%s) $cur\" > "+fired,
		"\trm -f "+exp+leaseHook,
		"\texit 0",
		"fi",
		"cp "+q(LeaseOriginal)+" "+tmp,
		"sync",
		"if [ \"$(sha256 -q "+tmp+")\" != "+sum+" ]; then echo \"failed $(date +%s) checksum\" > "+fired+"; exit 1; fi",
	)
	lines = append(lines, g.BeforeRestore...)
	lines = append(lines, g.install(tmp, conf), "sync", "rm -f "+q(g.cachePath()), g.reload())
	lines = append(lines, g.againIfChanged(LeaseOriginal, conf, sum, g.reload())...)
	lines = append(lines, g.afterReload(LeaseOriginal, conf)...)
	lines = append(lines,
		"rm -f "+exp+leaseHook,
		// The session is over: its lock goes too, if it is still its own.
		"if grep -qF "+q("token="+token)+" "+q(lockOwnerFile)+" 2>/dev/null; then rm -rf "+q(LockDir)+"; fi",
		"echo \"restored $(date +%s)\" > "+fired,
		"logger -t fwab \"session lease ended without fwab: the original config was restored\"",
		"",
	)
	return strings.Join(lines, "\n")
}

// bootHook is the boot script of a timer (the rollback's or the lease's):
// with the hand-off unclaimed, the timer the reboot ended starts again;
// claimed by the timer itself (timer), the restore the reboot cut short
// is finished at once; claimed by anyone else, nothing runs. pfSense
// starts rc.d scripts with "start" (and stops them with "stop");
// OPNsense's syshook passes nothing.
func (g ShellGuard) bootHook(script, fired, claim, timer, pid, what string) string {
	q := ShellQuote
	return strings.Join([]string{
		"#!/bin/sh",
		"# fwab: starts again " + what + " that a reboot interrupted.",
		"case \"$1\" in \"\"|start) ;; *) exit 0 ;; esac",
		"if [ -f " + q(script) + " ] && [ ! -f " + q(fired) + " ]; then",
		"\tcase " + holderOf(claim) + " in",
		"\t\"\") daemon -f -p " + q(pid) + " /bin/sh " + q(script) + " ;;",
		"\t" + timer + "*) daemon -f -p " + q(pid) + " /bin/sh " + q(script) + " resume ;;",
		"\tesac",
		"fi",
		"",
	}, "\n")
}

// RenewLease implements Leaser.
func (g ShellGuard) RenewLease(ctx context.Context, length time.Duration) error {
	q := ShellQuote
	n := strconv.Itoa(int((length + time.Second - 1) / time.Second))
	cmd := "if [ -f " + q(LeaseFired) + " ]; then echo ended $(cat " + q(LeaseFired) + ")" +
		"; elif [ -f " + q(LeaseClaim) + " ]; then echo ended running" +
		"; elif read seq left at < " + q(LeaseExpires) + "; then echo \"$((seq + 1)) " + n + " $(date +%s)\" > " + q(LeaseExpires+".new") + " && mv " + q(LeaseExpires+".new") + " " + q(LeaseExpires) + " && echo renewed" +
		"; else echo ended none; fi"
	out, err := g.run(ctx, cmd)
	if err != nil {
		return fmt.Errorf("renew lease: %w", err)
	}
	out = strings.TrimSpace(out)
	if out == "renewed" {
		return nil
	}
	return &LeaseLostError{What: strings.TrimPrefix(out, "ended ")}
}

// ExpectConfigs implements Leaser.
func (g ShellGuard) ExpectConfigs(ctx context.Context, sums ...string) error {
	var b strings.Builder
	for _, s := range sums {
		if len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
			return fmt.Errorf("expect configs: %q is not a SHA-256", s)
		}
		b.WriteString(s + "\n")
	}
	q := ShellQuote
	if _, err := g.run(ctx, "printf '%s' "+q(b.String())+" > "+q(LeaseWritten+".new")+" && mv "+q(LeaseWritten+".new")+" "+q(LeaseWritten)); err != nil {
		return fmt.Errorf("expect configs: %w", err)
	}
	return nil
}

// ReleaseLease implements Leaser.
func (g ShellGuard) ReleaseLease(ctx context.Context) error {
	err := g.ClaimLease(ctx)
	var lost *LeaseLostError
	if err != nil && !errors.As(err, &lost) {
		return err
	}
	// Claimed, or ended and said once: the files go. A cleanup that fails
	// keeps the report that the lease ended: its files may be gone
	// already, and the report is all fwab learns of the box's restore.
	if cerr := g.clearLease(ctx); cerr != nil {
		return errors.Join(err, fmt.Errorf("release lease: %w", cerr))
	}
	return err
}

// ClaimLease takes the lease's hand-off for fwab, so that the watchdog
// will not run, and leaves the lease's files (its original) in place; a
// lease that ended is reported (*LeaseLostError) and its files cleared.
func (g ShellGuard) ClaimLease(ctx context.Context) error {
	q := ShellQuote
	cmd := "if [ -f " + q(LeaseFired) + " ]; then echo ended $(cat " + q(LeaseFired) + ")" +
		"; elif [ ! -f " + q(LeaseScript) + " ]; then echo released" +
		"; else " + claimCmd(LeaseClaim, "released") + "; case " + holderOf(LeaseClaim) + " in" +
		" released*) if [ -f " + q(LeasePIDFile) + " ]; then pkill -F " + q(LeasePIDFile) + "; rm -f " + q(LeasePIDFile) + "; fi; echo released ;;" +
		" expired*) echo running ;;" +
		" *) echo noclaim ;; esac; fi"
	deadline := time.Now().Add(g.runWait())
	for {
		out, err := g.run(ctx, cmd)
		out = strings.TrimSpace(out)
		switch {
		case err == nil && out == "released":
			return nil
		case err == nil && strings.HasPrefix(out, "ended "):
			// The files stay until ReleaseLease: a recover that stops
			// half-way must find the same story when it runs again.
			return &LeaseLostError{What: strings.TrimPrefix(out, "ended ")}
		case err == nil && out == "noclaim":
			return fmt.Errorf("release lease: could not write %s (is /conf full?): the lease stays and will restore the original when it ends", LeaseClaim)
		case time.Now().After(deadline):
			if err == nil {
				err = errors.New("the watchdog is restoring the original config")
			}
			return fmt.Errorf("release lease: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("release lease: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// clearLease removes every file of a lease that has ended or was released.
func (g ShellGuard) clearLease(ctx context.Context) error {
	q := ShellQuote
	files := []string{LeaseScript, LeaseExpires, LeaseOwner, LeaseWritten, LeaseFired, LeaseOriginal, LeasePIDFile}
	if h := g.LeaseHook; h != "" {
		files = append(files, h)
	}
	var qs []string
	for _, f := range files {
		qs = append(qs, q(f))
	}
	_, err := g.run(ctx, "rm -f "+strings.Join(qs, " ")+"; "+clearClaimCmd(LeaseClaim, "expired", "released"))
	return err
}

// LeaseStatus implements Leaser.
func (g ShellGuard) LeaseStatus(ctx context.Context) (LeaseInfo, error) {
	q := ShellQuote
	cmd := "echo now $(date +%s); if [ -f " + q(LeaseOwner) + " ]; then while IFS= read -r l; do echo \"owner $l\"; done < " + q(LeaseOwner) + "; fi" +
		"; if read seq left at < " + q(LeaseExpires) + " 2>/dev/null; then echo expires $((at + left)); fi" +
		"; if [ -f " + q(LeaseFired) + " ]; then echo ended $(cat " + q(LeaseFired) + "); else case " + holderOf(LeaseClaim) + " in expired*) echo ended running ;; released*) echo released ;; esac; fi" +
		"; if [ -f " + q(LeaseScript) + " ]; then echo script; fi" +
		"; if [ -f " + q(LeaseWritten) + " ]; then while read h; do echo written $h; done < " + q(LeaseWritten) + "; fi"
	out, err := g.query(ctx, cmd)
	if err != nil {
		return LeaseInfo{}, fmt.Errorf("lease status: %w", err)
	}
	var info LeaseInfo
	var script, released bool
	var owner []string
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		switch k {
		case "now", "expires":
			n, _ := strconv.ParseInt(v, 10, 64)
			if k == "now" {
				info.Now = time.Unix(n, 0)
			} else {
				info.Expires = time.Unix(n, 0)
			}
		case "owner":
			if tok, ok := strings.CutPrefix(v, "token="); ok {
				info.Token = tok
			} else if !strings.HasPrefix(v, "lease=") && !strings.HasPrefix(v, "sha256=") {
				owner = append(owner, v)
			}
		case "ended":
			info.Ended = v
		case "script":
			script = true
		case "released":
			released = true
		case "written":
			info.Written = append(info.Written, v)
		}
	}
	info.Owner = strings.Join(owner, " ")
	info.Held = script && info.Ended == "" && !released
	return info, nil
}

func (g ShellGuard) reload() string {
	if g.Reload != "" {
		return g.Reload
	}
	return "/etc/rc.reload_all"
}

func (g ShellGuard) cachePath() string {
	if g.CachePath != "" {
		return g.CachePath
	}
	return "/tmp/config.cache"
}

// runWait is RunWait, or 10 minutes: a restore may wait a minute for the
// config lock twice (lockBarrier, install) and reload twice
// (againIfChanged), each reload minutes on a slow box.
func (g ShellGuard) runWait() time.Duration {
	if g.RunWait > 0 {
		return g.RunWait
	}
	return 10 * time.Minute
}

// ReadLeaseOriginal reads the original config a lease keeps on the box,
// checked against the hash the lease recorded when it was taken.
func (g ShellGuard) ReadLeaseOriginal(ctx context.Context) ([]byte, error) {
	data, err := g.Sh.ReadFile(ctx, LeaseOriginal)
	if err != nil {
		return nil, fmt.Errorf("the lease's original config: %w", err)
	}
	out, err := g.run(ctx, "grep '^sha256=' "+ShellQuote(LeaseOwner))
	if err != nil {
		return nil, fmt.Errorf("the lease's original config: its recorded hash: %w", err)
	}
	if want := strings.TrimPrefix(strings.TrimSpace(out), "sha256="); want != SHA256Hex(data) {
		return nil, fmt.Errorf("the lease's original config %s has sha256 %s but the lease recorded %s: refusing to write it", LeaseOriginal, SHA256Hex(data), want)
	}
	return data, nil
}
