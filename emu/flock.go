package emu

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// opnConfigFile is OPNsense's config.xml, whose own flock is the config
// lock: Config::save() takes it exclusively while it writes.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:751 — `if (flock($this->config_file_handle, LOCK_EX)) {`
const opnConfigFile = "/conf/config.xml"

// pfConfigLock is pfSense's config lock: lock('config') flocks it, and
// write_config takes it exclusively. The emulator takes it after e.mu.
//
// upstream: pfsense/pfsense@9363ac5b86 src/etc/inc/util.inc:783 — `function lock($lock, $op = LOCK_SH) {`, an flock on `{$g['tmp_path']}/{$lock}.lock`
const pfConfigLock = "/tmp/config.lock"

// flocks are the flock(2) locks held on the firewall's files, by path:
// lockf(1) holds one while its command runs, and the products' own config
// saves take theirs (OPNsense's on /conf/config.xml). The zero value has
// no lock held.
type flocks struct {
	mu   sync.Mutex
	held map[string]chan struct{} // a path's lock: a full channel while held
}

// errLocked is a lock that stayed held for as long as the caller would wait.
var errLocked = errors.New("already locked")

// lock takes path's lock, waiting at most wait (0: not at all; < 0: for
// as long as ctx lasts), and returns its release.
func (f *flocks) lock(ctx context.Context, path string, wait time.Duration) (func(), error) {
	f.mu.Lock()
	if f.held == nil {
		f.held = map[string]chan struct{}{}
	}
	ch := f.held[path]
	if ch == nil {
		ch = make(chan struct{}, 1)
		f.held[path] = ch
	}
	f.mu.Unlock()
	release := func() { <-ch }
	select {
	case ch <- struct{}{}:
		return release, nil
	default:
	}
	if wait == 0 {
		return nil, errLocked
	}
	var timeout <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case ch <- struct{}{}:
		return release, nil
	case <-timeout:
		return nil, errLocked
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// cmdLockf is lockf(1): `lockf [-k] [-s] [-t seconds] file command [args]`
// runs command while it holds the flock on file (created when missing, and
// removed afterwards unless -k); it waits for the
// lock for -t seconds (forever without -t) and fails with exit 75 when it
// stays held, silently with -s. The command's exit status is lockf's.
//
// upstream: not settled — lockf(1) is FreeBSD base, not in the upstream copy (its O_EXLOCK open is a flock(2) lock, the one OPNsense's Config and pfSense's lock() take); checked at run time by fwab, which reads config.xml's SHA-256 after every write
func (e *Emulator) cmdLockf(ctx context.Context, c *call) error {
	args := c.args[1:]
	wait, silent, keep := time.Duration(-1), false, false
	for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
		switch a := args[0]; a {
		case "-k":
			keep = true
		case "-n":
		case "-s":
			silent = true
		case "-t":
			if len(args) < 2 {
				return c.errorf(64, "usage: lockf [-kns] [-t seconds] file command [arguments]")
			}
			n, err := strconv.Atoi(args[1])
			if err != nil || n < 0 {
				return c.errorf(64, "lockf: invalid timeout %q", args[1])
			}
			wait, args = time.Duration(n)*time.Second, args[1:]
		default:
			return c.errorf(64, "lockf: only -k, -n, -s and -t are emulated")
		}
		args = args[1:]
	}
	if len(args) < 2 {
		return c.errorf(64, "usage: lockf [-kns] [-t seconds] file command [arguments]")
	}
	file := filepath.Clean(c.abs(args[0]))
	if err := e.touch(file); err != nil {
		return c.fail("lockf", args[0], err)
	}
	unlock, err := e.flocks.lock(ctx, file, wait)
	if errors.Is(err, errLocked) {
		if silent {
			return status(75)
		}
		return c.errorf(75, "lockf: %s: already locked", args[0])
	}
	if err != nil {
		return c.errorf(75, "lockf: %v", err)
	}
	defer func() {
		// Without -k the file goes when the command is done.
		if !keep {
			_ = os.Remove(e.path(file))
		}
		unlock()
	}()
	return e.dispatch(ctx, e.commands(), args[1:])
}

// touch creates a firewall file that does not exist, empty.
func (e *Emulator) touch(p string) error {
	f, err := os.OpenFile(e.path(p), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	return f.Close()
}
