package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// faultFile in the lab folder switches injected faults on and off; the
// serve daemon watches it (fault-injection tests, `fwab lab fault`).
const faultFile = "fault.json"

// Fault is the set of faults the emulated firewall suffers.
type Fault struct {
	// Disk makes writes under /conf, /var/run and /tmp fail: "enospc"
	// (No space left on device) or "erofs" (Read-only file system; removing
	// files fails too). Empty: the disk works.
	Disk string `json:"disk,omitempty"`
	// LinkDownUntil cuts the management link: every SSH connection is
	// closed and new ones are refused until then. Processes on the
	// firewall (a rollback timer) keep running.
	LinkDownUntil time.Time `json:"link_down_until,omitzero"`
	// LinkDownOn cuts the management link for LinkDownFor as soon as a
	// command line containing it starts (once per fault written), so that
	// the link goes away in the middle of, say, a filter reload.
	LinkDownOn  string        `json:"link_down_on,omitempty"`
	LinkDownFor time.Duration `json:"link_down_for,omitempty"`
	// RebootAt reboots the firewall at that time (once per fault written),
	// as a power cut or a watchdog would.
	RebootAt time.Time `json:"reboot_at,omitzero"`
}

// Disk faults.
const (
	DiskFull     = "enospc"
	DiskReadOnly = "erofs"
)

func (f Fault) validate() error {
	switch f.Disk {
	case "", DiskFull, DiskReadOnly:
		return nil
	}
	return fmt.Errorf("disk fault %q: want %s or %s", f.Disk, DiskFull, DiskReadOnly)
}

// linkTrigger is an armed LinkDownOn fault.
type linkTrigger struct {
	on  string
	dur time.Duration
}

// SetFault switches the lab's faults to f (the zero Fault clears them).
// The daemon picks the change up within a tenth of a second.
func SetFault(dir string, f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	if !isLabDir(dir) {
		return fmt.Errorf("no lab in %s (run 'fwab lab up')", dir)
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, faultFile), data, 0o644)
}

// readFault reads the fault file; no file means no fault.
func readFault(dir string) (Fault, error) {
	var f Fault
	data, err := os.ReadFile(filepath.Join(dir, faultFile))
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, err
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return f, fmt.Errorf("%s: %w", faultFile, err)
	}
	return f, f.validate()
}

// watchFaults applies the lab's fault file until ctx ends.
func (e *Emulator) watchFaults(ctx context.Context, dir string) {
	var last Fault
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		f, err := readFault(dir)
		if err != nil {
			e.logger().Warn("fault file", "err", err)
		} else {
			e.setDiskFault(f.Disk)
			if f.LinkDownUntil.After(time.Now()) && !f.LinkDownUntil.Equal(last.LinkDownUntil) {
				go e.dropLink(ctx, f.LinkDownUntil)
			}
			if f.LinkDownOn != "" && (f.LinkDownOn != last.LinkDownOn || f.LinkDownFor != last.LinkDownFor) {
				e.fmu.Lock()
				e.linkTrigger = &linkTrigger{on: f.LinkDownOn, dur: f.LinkDownFor}
				e.fmu.Unlock()
				e.logger().Warn("fault: link down armed", "on", f.LinkDownOn, "for", f.LinkDownFor)
			}
			if !f.RebootAt.IsZero() && !f.RebootAt.Equal(last.RebootAt) {
				go func(at time.Time) {
					select {
					case <-time.After(time.Until(at)):
						e.logger().Warn("fault: reboot")
						e.Reboot(ctx)
					case <-ctx.Done():
					}
				}(f.RebootAt)
			}
			last = f
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Emulator) setDiskFault(kind string) {
	e.fmu.Lock()
	defer e.fmu.Unlock()
	if e.diskFault != kind {
		e.logger().Warn("fault: disk", "fault", kind)
	}
	e.diskFault = kind
}

// commandFault runs before each command line: an armed LinkDownOn fault
// whose text the line contains takes the link down, once.
func (e *Emulator) commandFault(ctx context.Context, line string) {
	e.fmu.Lock()
	t := e.linkTrigger
	if t == nil || !strings.Contains(line, t.on) {
		e.fmu.Unlock()
		return
	}
	e.linkTrigger = nil
	e.fmu.Unlock()
	e.logger().Warn("fault: link down on command", "command", line)
	go e.dropLink(ctx, time.Now().Add(t.dur))
}

// writeFault is the error a write (or, on a read-only disk, a removal) of
// the firewall path p meets under the current disk fault, or nil.
func (e *Emulator) writeFault(p string, removal bool) error {
	e.fmu.Lock()
	kind := e.diskFault
	e.fmu.Unlock()
	if kind == "" || (removal && kind != DiskReadOnly) {
		return nil
	}
	p = filepath.Clean("/" + p)
	for _, d := range []string{"/conf", "/cf/conf", "/var/run", "/tmp"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			errno := syscall.ENOSPC
			if kind == DiskReadOnly {
				errno = syscall.EROFS
			}
			return &fs.PathError{Op: "write", Path: p, Err: errno}
		}
	}
	return nil
}

// dropLink takes the management link away until the given time, as a
// pulled cable or a dead switch port would, then listens again.
func (e *Emulator) dropLink(ctx context.Context, until time.Time) {
	if !e.linkDown() {
		return
	}
	e.logger().Warn("fault: management link down", "until", until.Format(time.RFC3339Nano))
	select {
	case <-time.After(time.Until(until)):
	case <-ctx.Done():
	}
	e.linkUp()
	e.logger().Warn("fault: management link up")
}
