package emu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fwab/fwab/internal/atomicfile"
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
	// Kill ends a service at KillAt (once per time written), as a crash
	// would: "suricata" (KillService).
	Kill   string    `json:"kill,omitempty"`
	KillAt time.Time `json:"kill_at,omitzero"`
	// LinkDown cuts the management link (SSH and the REST API) for as long
	// as it is set, as LinkDownUntil does for a while.
	LinkDown bool `json:"link_down,omitempty"`
	// SilentUntil makes the management link drop every packet silently
	// until then, as a dead path with no RST would: new SSH and API
	// connections are accepted and never answered, open ones neither read
	// nor write. What was sent meanwhile arrives afterwards, as TCP's
	// retransmissions would deliver it, unless the client gave up.
	SilentUntil time.Time `json:"silent_until,omitzero"`
	// LinkErrors adds input errors to interfaces' counters at
	// LinkErrorsAt (once per time written), by FreeBSD name ("igb1": 40),
	// as a bad cable's damaged frames would: netstat -i shows them on top
	// of what the data plane counted, until the next boot zeroes them.
	LinkErrors   map[string]uint64 `json:"link_errors,omitempty"`
	LinkErrorsAt time.Time         `json:"link_errors_at,omitzero"`
	// Commands make SSH command lines fail, stall or lose their connection;
	// the first that matches a line applies.
	Commands []CommandFault `json:"commands,omitempty"`
	// Requests replace the REST API's answer to requests (OPNsense); the
	// first that matches applies.
	Requests []RequestFault `json:"requests,omitempty"`
}

// CommandFault is what happens to SSH command lines containing On.
type CommandFault struct {
	On string `json:"on"`
	// Delay stalls the command before it runs.
	Delay time.Duration `json:"delay,omitempty"`
	// Exit, Stdout and Stderr, when any is set, answer instead of running
	// the command: a failing or odd firewall command.
	Exit   int    `json:"exit,omitempty"`
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// Skip makes the command do nothing and succeed: a setting accepted
	// and ignored.
	Skip bool `json:"skip,omitempty"`
	// Drop cuts the SSH connection (not the link: new connections work)
	// once the command has read DropAfter bytes of its standard input (0:
	// before it runs), as a session lost mid-transfer would.
	Drop      bool `json:"drop,omitempty"`
	DropAfter int  `json:"drop_after,omitempty"`
	// Times limits the fault to the next n matching lines; 0 is every one.
	Times int `json:"times,omitempty"`
}

func (c CommandFault) answers() bool { return c.Exit != 0 || c.Stdout != "" || c.Stderr != "" }

// RequestFault replaces the answer to REST API requests whose "METHOD
// /path" starts with Route, e.g. "POST /api/firewall/filter/apply".
type RequestFault struct {
	Route  string            `json:"route"`
	Status int               `json:"status,omitempty"` // 0 is 200
	Body   string            `json:"body,omitempty"`
	Header map[string]string `json:"header,omitempty"`
	// Drop runs the request (its effects happen on the firewall) and then
	// cuts the connection instead of answering: the answer was lost.
	Drop bool `json:"drop,omitempty"`
	// Times limits the fault to the next n matching requests; 0 is every one.
	Times int `json:"times,omitempty"`
}

// Disk faults.
const (
	DiskFull     = "enospc"
	DiskReadOnly = "erofs"
)

func (f Fault) validate() error {
	switch f.Disk {
	case "", DiskFull, DiskReadOnly:
	default:
		return fmt.Errorf("disk fault %q: want %s or %s", f.Disk, DiskFull, DiskReadOnly)
	}
	if f.Kill != "" && f.Kill != "suricata" {
		return fmt.Errorf("kill %q: the lab kills suricata (the inspection engine)", f.Kill)
	}
	return nil
}

// linkTrigger is an armed LinkDownOn fault.
type linkTrigger struct {
	on  string
	dur time.Duration
}

// WriteFault writes f into the fault file of the emulator folder dir (the
// zero Fault clears the faults), which a running emulator's WatchFaults
// picks up within a tenth of a second.
func WriteFault(dir string, f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, faultFile), data, 0o644)
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

// WatchFaults applies the lab's fault file until ctx ends; a change of the
// file is a new fault.
func (e *Emulator) WatchFaults(ctx context.Context, dir string) {
	var last Fault
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		f, err := readFault(dir)
		switch {
		case err != nil:
			e.logger().Warn("fault file", "err", err)
		case !reflect.DeepEqual(f, last):
			e.SetFault(f)
			last = f
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SetFault makes the emulator suffer f from now on (the zero Fault clears
// every fault). A LinkDownUntil or RebootAt time and a LinkDownOn trigger
// act once per value: setting the same one again does nothing more. The
// Commands and Requests lists, with their Times, start again with each
// call.
func (e *Emulator) SetFault(f Fault) {
	ctx := e.lifetime()
	e.fmu.Lock()
	prev := e.fault
	if prev.Disk != f.Disk {
		e.logger().Warn("fault: disk", "fault", f.Disk)
	}
	e.fault = f
	e.fault.Commands = slices.Clone(f.Commands)
	e.fault.Requests = slices.Clone(f.Requests)
	switch {
	case f.LinkDownOn == "":
		e.linkTrigger = nil
	case f.LinkDownOn != prev.LinkDownOn || f.LinkDownFor != prev.LinkDownFor:
		e.linkTrigger = &linkTrigger{on: f.LinkDownOn, dur: f.LinkDownFor}
		e.logger().Warn("fault: link down armed", "on", f.LinkDownOn, "for", f.LinkDownFor)
	}
	hold := f.LinkDown && !e.linkHeld
	release := !f.LinkDown && e.linkHeld
	if hold {
		e.linkHeld = e.linkDown()
	}
	if release {
		e.linkHeld = false
	}
	e.fmu.Unlock()
	if release {
		e.linkUp()
	}
	if f.LinkDownUntil.After(time.Now()) && !f.LinkDownUntil.Equal(prev.LinkDownUntil) {
		go e.dropLink(ctx, f.LinkDownUntil)
	}
	if len(f.LinkErrors) > 0 && !f.LinkErrorsAt.Equal(prev.LinkErrorsAt) {
		e.fmu.Lock()
		if e.linkErrs == nil {
			e.linkErrs = map[string]uint64{}
		}
		for dev, n := range f.LinkErrors {
			e.linkErrs[dev] += n
		}
		e.fmu.Unlock()
		e.logger().Warn("fault: link errors", "added", f.LinkErrors)
	}
	if f.Kill != "" && !f.KillAt.IsZero() && !f.KillAt.Equal(prev.KillAt) {
		go func(name string, at time.Time) {
			select {
			case <-time.After(time.Until(at)):
				if err := e.KillService(name); err != nil {
					e.logger().Error("fault: kill", "err", err)
				}
			case <-ctx.Done():
			}
		}(f.Kill, f.KillAt)
	}
	if !f.RebootAt.IsZero() && !f.RebootAt.Equal(prev.RebootAt) {
		go func(at time.Time) {
			select {
			case <-time.After(time.Until(at)):
				e.logger().Warn("fault: reboot")
				e.Reboot(ctx)
			case <-ctx.Done():
			}
		}(f.RebootAt)
	}
}

// commandFault runs before each command line: an armed LinkDownOn fault
// whose text the line contains takes the link down, once; it returns the
// CommandFault for the line, if any.
func (e *Emulator) commandFault(ctx context.Context, line string) (CommandFault, bool) {
	e.fmu.Lock()
	defer e.fmu.Unlock()
	if t := e.linkTrigger; t != nil && strings.Contains(line, t.on) {
		e.linkTrigger = nil
		e.logger().Warn("fault: link down on command", "command", line)
		go e.dropLink(ctx, time.Now().Add(t.dur))
	}
	for i, c := range e.fault.Commands {
		if !strings.Contains(line, c.On) {
			continue
		}
		e.fault.Commands = countDown(e.fault.Commands, i, func(c *CommandFault) *int { return &c.Times })
		e.logger().Warn("fault: command", "command", line, "fault", c)
		return c, true
	}
	return CommandFault{}, false
}

// requestFault returns the RequestFault for an API request, if any.
func (e *Emulator) requestFault(method, path string) (RequestFault, bool) {
	e.fmu.Lock()
	defer e.fmu.Unlock()
	for i, r := range e.fault.Requests {
		if strings.HasPrefix(method+" "+path, r.Route) {
			e.fault.Requests = countDown(e.fault.Requests, i, func(r *RequestFault) *int { return &r.Times })
			return r, true
		}
	}
	return RequestFault{}, false
}

// countDown uses up one of fault i's Times, removing it when none are
// left.
func countDown[F any](fs []F, i int, times func(*F) *int) []F {
	n := times(&fs[i])
	if *n == 0 {
		return fs
	}
	if *n--; *n == 0 {
		return slices.Delete(fs, i, i+1)
	}
	return fs
}

// writeFault is the error a write (or, on a read-only disk, a removal) of
// the firewall path p meets under the current disk fault, or nil.
func (e *Emulator) writeFault(p string, removal bool) error {
	e.fmu.Lock()
	kind := e.fault.Disk
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

// silent reports whether the management link drops packets silently now.
func (e *Emulator) silent() bool {
	e.fmu.Lock()
	defer e.fmu.Unlock()
	now := time.Now()
	return now.Before(e.fault.SilentUntil) || now.Before(e.resetUntil)
}

// waitAudible blocks while the link is silent (or until ctx ends).
func (e *Emulator) waitAudible(ctx context.Context) {
	for e.silent() && ctx.Err() == nil {
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

// silentConn is a management connection that a silent link holds: reads
// and writes wait until the link carries packets again.
type silentConn struct {
	net.Conn
	e   *Emulator
	ctx context.Context
}

func (c silentConn) Read(p []byte) (int, error) {
	c.e.waitAudible(c.ctx)
	n, err := c.Conn.Read(p)
	// What arrived while the link was silent was lost and retransmitted
	// later: it is seen once the link is back.
	c.e.waitAudible(c.ctx)
	return n, err
}

func (c silentConn) Write(p []byte) (int, error) {
	c.e.waitAudible(c.ctx)
	return c.Conn.Write(p)
}

// silentListener wraps the connections it accepts in silentConns.
type silentListener struct {
	net.Listener
	e   *Emulator
	ctx context.Context
}

func (l silentListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return silentConn{Conn: c, e: l.e, ctx: l.ctx}, nil
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
