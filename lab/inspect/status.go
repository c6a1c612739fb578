package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/atomicfile"
)

// Status is what the engine publishes about itself, in the status file and
// on request. The lab's emulated firewall reads it to report the running
// IDS instance and its mode, as pfSense reports Suricata's.
type Status struct {
	Mode       string    `json:"mode"` // ips-inline | ids | ips-legacy
	PID        int       `json:"pid"`
	Started    time.Time `json:"started"`
	Updated    time.Time `json:"updated"`
	Running    bool      `json:"running"` // false in the file written at exit
	Rules      int       `json:"rules"`
	DropRules  int       `json:"drop_rules"`
	Seed       uint64    `json:"seed"`
	Interfaces []string  `json:"interfaces,omitempty"`
	Queues     []uint16  `json:"queues,omitempty"`
	FailOpen   bool      `json:"failopen,omitempty"`
	// StreamDepth is the per-flow inspection depth in bytes; 0 is unlimited.
	StreamDepth uint64              `json:"stream_depth,omitempty"`
	Offloads    map[string][]string `json:"offloads,omitempty"` // interface -> offloads on
	Warnings    []string            `json:"warnings,omitempty"`
	Stats       Stats               `json:"stats"`
}

// Status returns the engine's current status.
func (e *Engine) Status() Status {
	rs := e.opts.Ruleset
	e.mu.Lock()
	started, offload := e.started, e.offload
	e.mu.Unlock()
	st := Status{
		Mode:        e.opts.Mode.Knob(),
		PID:         os.Getpid(),
		Started:     started,
		Updated:     time.Now(),
		Running:     true,
		Rules:       len(rs.Rules),
		DropRules:   rs.Drops(),
		Seed:        rs.Seed,
		Interfaces:  e.opts.Interfaces,
		FailOpen:    e.opts.FailOpen,
		StreamDepth: e.opts.StreamDepth,
		Offloads:    offload,
		Stats:       e.Stats(),
	}
	if e.opts.Mode == Inline {
		for q := range e.opts.Queues {
			st.Queues = append(st.Queues, e.opts.Queue+uint16(q))
		}
		for _, ifc := range e.opts.Interfaces {
			if on := offload[ifc]; len(on) > 0 {
				st.Warnings = append(st.Warnings, fmt.Sprintf(
					"inline IPS on %s with offloads on (%s): a real pfSense needs them off for netmap; turn them off with offload.checksum/tso/lro=off",
					ifc, strings.Join(on, ",")))
			}
		}
	}
	return st
}

// Line is the status as one line of text.
func (st Status) Line() string {
	return fmt.Sprintf("mode=%s rules=%d %s", st.Mode, st.Rules, st.Stats)
}

func (e *Engine) statusLoop(ctx context.Context) {
	t := time.NewTicker(e.opts.StatusEvery)
	defer t.Stop()
	for {
		if err := e.writeStatus(true); err != nil {
			e.log.Warn("status file", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (e *Engine) writeStatus(running bool) error {
	st := e.Status()
	st.Running = running
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(e.opts.StatusFile, append(b, '\n'), 0o644)
}

// ReadStatus reads a status file written by an engine.
func ReadStatus(path string) (Status, error) {
	var st Status
	b, err := os.ReadFile(path)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("status file %s: %w", path, err)
	}
	return st, nil
}

// IDSInstances is the status as the firewall's runtime state reports it: one
// instance per inspected interface while the engine runs, none after it
// stopped.
func (st Status) IDSInstances() []fwapi.IDSInstance {
	if !st.Running {
		return nil
	}
	ifaces := st.Interfaces
	if len(ifaces) == 0 {
		ifaces = []string{""} // inline on all forwarded traffic
	}
	var out []fwapi.IDSInstance
	for _, ifc := range ifaces {
		out = append(out, fwapi.IDSInstance{Interface: ifc, Mode: st.Mode, PID: st.PID, Rules: st.Rules})
	}
	return out
}

// SuricataCommand is the command line pfSense's Suricata would show in
// `ps ax -o pid,command` for this engine on device (the emulated
// firewall's name for the interface): `--netmap` for inline mode, `-i DEV`
// (pcap) for IDS and legacy mode, which ps cannot tell apart on a real box
// either.
func (st Status) SuricataCommand(device string) string {
	yaml := fmt.Sprintf("/usr/local/etc/suricata/suricata_%d_%s/suricata.yaml", st.Seed%100000, device)
	pidfile := fmt.Sprintf("/var/run/suricata_%s%d.pid", device, st.Seed%100000)
	capture := "-i " + device
	if st.Mode == Inline.Knob() {
		capture = "--netmap"
	}
	return fmt.Sprintf("/usr/local/bin/suricata %s -D -c %s --pidfile %s", capture, yaml, pidfile)
}
