package fwapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Relocker is a Guard that can take its lock again when the firewall lost
// it. A Session uses it before every change.
type Relocker interface {
	// Relock makes sure owner holds the lock: it does nothing when owner
	// still holds it, takes it again (retaken) when it is gone, and
	// returns a *LockedError when another writer holds it.
	Relock(ctx context.Context, owner LockOwner) (retaken bool, err error)
}

var _ Relocker = ShellGuard{}

// bootMarker is a file OPNsense writes at every boot after emptying
// /var/run (see Relock).
const bootMarker = "/var/run/dmesg.boot"

// relocked is what Relock's command prints when it took the lock again.
const relocked = "fwab-relocked"

// Relock checks the lock and takes it again when it is gone, in one
// command, so that no other writer can slip in between the check and the
// mkdir (mkdir itself admits one writer).
//
// upstream: pfsense 2.7.2 src/etc/pfSense-rc:267 — a fresh `tmpfs` is
// mounted on /var/run at every boot, so a reboot takes the lock away.
// OPNsense deletes every file below /var/run at boot but keeps the
// directories, and writes /var/run/dmesg.boot after that: an empty lock
// directory older than dmesg.boot was emptied by the boot, and Relock
// removes it and takes the lock again (Lock and Unlock treat it alike:
// voidedLock, since the holder's lock ended with the boot). An empty
// one made after the boot is another writer between its mkdir and its owner
// file, and stays refused.
//
// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/etc/rc.subr.d/var:74 — `find ${RUNDIR} ! -type d -exec rm {} \;` keeps the directory tree
// upstream: opnsense/core@659e22be72c20439123559a08c629ae11f961baa src/etc/rc:194 — `/etc/rc.d/dmesg onestart` (writes /var/run/dmesg.boot) runs after rc.subr.d/var
func (g ShellGuard) Relock(ctx context.Context, owner LockOwner) (bool, error) {
	if strings.ContainsAny(owner.Owner, "\n") {
		return false, errors.New("relock: owner name has a newline")
	}
	d, f := ShellQuote(LockDir), ShellQuote(lockOwnerFile)
	take := "mkdir " + d + " && printf '%s' " + ShellQuote(owner.file()) + " > " + f + " && echo " + relocked
	cmd := "if [ -f " + f + " ]; then cat " + f +
		"; elif " + voidedLock + "; then rmdir " + d + " && " + take +
		"; else " + take + "; fi"
	out, errOut, code, err := g.Sh.Run(ctx, cmd, nil)
	if err != nil {
		return false, fmt.Errorf("relock: %w", err)
	}
	text := string(out)
	switch {
	case code == 0 && strings.TrimSpace(text) == relocked:
		return true, nil
	case code == 0 && strings.Contains(text, "token="+owner.Token+"\n"):
		return false, nil
	case code == 0:
		return false, &LockedError{Holder: oneLine(out)}
	}
	// mkdir lost a race: someone else holds it now.
	holder, rerr := g.Sh.ReadFile(ctx, lockOwnerFile)
	if rerr != nil && strings.Contains(string(errOut), "exists") {
		return false, &LockedError{Holder: "unknown holder: " + LockDir + " exists without an owner file"}
	}
	if rerr != nil {
		return false, fmt.Errorf("relock: %w", &CommandError{Cmd: "mkdir " + LockDir, Exit: code, Stderr: string(errOut)})
	}
	return false, &LockedError{Holder: oneLine(holder)}
}
