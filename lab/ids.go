package lab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/lab/inspect"
)

// DefaultIDSRules is the size of the generated ruleset the lab's IDS
// engines load (Options.IDSRules).
const DefaultIDSRules = 10000

// idsStreamDepth is Suricata's default stream.reassembly.depth. Without it
// the passive IDS misses most packets on this machine (lab/inspect's
// figures).
const idsStreamDepth = 1 << 20

// idsSeed seeds the generated ruleset; it also names the engines'
// Suricata-style config folders in ps.
const idsSeed = 1

// IDSEngines runs the lab's inspection engines (`fwab lab inspect`) where a
// pfSense runs Suricata: inside the DUT's namespace, one engine per mode,
// covering every interface whose ids@IF has that mode. The inline engine
// steers the FORWARD traffic of its interfaces through NFQUEUE, the legacy
// engine installs the snort2c blocking set.
type IDSEngines struct {
	Netns      string // the DUT namespace
	Executable string // the fwab binary; empty means os.Executable()
	Dir        string // status files and logs
	Rules      int    // generated rules; 0 means DefaultIDSRules
	// StartTimeout bounds how long a start waits for an engine to report
	// itself ready; 0 means 60 s.
	StartTimeout time.Duration
	Logger       *slog.Logger
	// CPU is the cgroup the engines run in (the DUT's service budget); nil:
	// none.
	CPU *CPUGroup

	op      sync.Mutex // serialises starts and stops
	mu      sync.Mutex // guards running; never held while waiting for an engine
	running map[inspect.Mode]*idsEngine
}

type idsEngine struct {
	mode    inspect.Mode
	devices []string // FreeBSD names (igb1)
	veths   []string
	status  string
	cmd     *exec.Cmd
	done    chan struct{}
}

func (g *IDSEngines) logger() *slog.Logger {
	if g.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.Logger
}

// Restart stops every engine and starts those the plan asks for, waiting
// until each is ready (bound to its queue or capture sockets), as
// `suricata.sh restart` does.
func (g *IDSEngines) Restart(ctx context.Context, plan emu.IDSPlan, ports emu.Ports, instances map[string]emu.IDSInstance) error {
	g.StopAll()
	return g.Start(ctx, plan, ports, instances)
}

// Start starts the engines of the plan that do not run yet. Each engine
// loads its devices' rules files (instances, by device) beside its
// generated ruleset, when every device of its mode has the same
// (sharedRules), and writes each device's alerts to its alert log.
func (g *IDSEngines) Start(ctx context.Context, plan emu.IDSPlan, ports emu.Ports, instances map[string]emu.IDSInstance) error {
	g.op.Lock()
	defer g.op.Unlock()
	var errs []error
	for k := range plan {
		if m, err := inspect.ParseMode(k); err != nil || m.Knob() != k {
			return fmt.Errorf("ids plan: mode %q is not an ids@IF mode (%s)", k, strings.Join(emu.IDSModes, ", "))
		}
	}
	for _, m := range []inspect.Mode{inspect.Inline, inspect.IDS, inspect.Legacy} {
		devs := plan[m.Knob()]
		g.mu.Lock()
		runs := g.running[m] != nil && !g.running[m].exited()
		g.mu.Unlock()
		if len(devs) == 0 || runs {
			continue
		}
		rules := map[string][]string{}
		for d, in := range instances {
			rules[d] = in.Rules
		}
		eng, err := g.start(ctx, m, devs, ports, g.sharedRules(m, devs, rules), instances)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.mu.Lock()
		if g.running == nil {
			g.running = map[inspect.Mode]*idsEngine{}
		}
		g.running[m] = eng
		g.mu.Unlock()
	}
	return errors.Join(errs...)
}

// sharedRules are the rules files one engine for devs loads: the first
// device's, when every device's files hold the same rules. One engine
// serves every device of its mode where the box runs a Suricata per
// interface, so rules that differ between devices are loaded for none,
// with a warning: the lab then drops less than the box (a canary shows a
// fail-open the box would not have), never more (a drop that would hide a
// rule put on the wrong interface).
func (g *IDSEngines) sharedRules(m inspect.Mode, devs []string, rules map[string][]string) []string {
	content := func(dev string) string {
		var b strings.Builder
		for _, f := range rules[dev] {
			data, err := os.ReadFile(f)
			if err != nil {
				return "unreadable " + f
			}
			b.Write(data)
		}
		return b.String()
	}
	first := content(devs[0])
	for _, d := range devs[1:] {
		if content(d) != first {
			g.logger().Warn("ids engine: custom rules differ between interfaces of one mode; the lab's one engine loads none of them", "mode", m.Knob(), "interfaces", strings.Join(devs, ","))
			return nil
		}
	}
	return rules[devs[0]]
}

func (g *IDSEngines) start(ctx context.Context, m inspect.Mode, devs []string, ports emu.Ports, ruleFiles []string, instances map[string]emu.IDSInstance) (*idsEngine, error) {
	exe := g.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("suricata: find the fwab binary: %w", err)
		}
	}
	if err := os.MkdirAll(g.Dir, 0o755); err != nil {
		return nil, err
	}
	rules := g.Rules
	if rules <= 0 {
		rules = DefaultIDSRules
	}
	name := "suricata-" + m.Knob()
	eng := &idsEngine{mode: m, devices: devs, status: filepath.Join(g.Dir, name+".json"), done: make(chan struct{})}
	_ = os.Remove(eng.status)
	args := []string{"netns", "exec", g.Netns, exe, "lab", "inspect",
		"--mode", string(m),
		"--rules", strconv.Itoa(rules),
		"--seed", strconv.Itoa(idsSeed),
		"--stream-depth", strconv.Itoa(idsStreamDepth),
		"--status", eng.status,
	}
	for _, d := range devs {
		v, _ := ports.Veth(d)
		eng.veths = append(eng.veths, v)
		args = append(args, "--iface", v)
		if log := instances[d].AlertLog; log != "" {
			args = append(args, "--alert-log", v+"="+log)
		}
	}
	for _, f := range ruleFiles {
		args = append(args, "--rules-file", f)
	}
	if m != inspect.IDS {
		args = append(args, "--steer")
	}
	logf, err := os.OpenFile(filepath.Join(g.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	argv := g.CPU.Wrap(append([]string{"ip"}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: the engine outlives the SSH session that
	// started it and gets its signals only from the lab.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("suricata: start %s engine: %w", m.Knob(), err)
	}
	eng.cmd = cmd
	go func() {
		err := cmd.Wait()
		g.logger().Info("ids engine exited", "mode", m.Knob(), "pid", cmd.Process.Pid, "err", err)
		close(eng.done)
	}()
	g.logger().Info("ids engine started", "mode", m.Knob(), "pid", cmd.Process.Pid, "interfaces", strings.Join(eng.veths, ","), "rules", rules, "rules_files", ruleFiles)

	timeout := g.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, err := inspect.ReadStatus(eng.status); err == nil && st.Running {
			for _, w := range st.Warnings {
				g.logger().Warn("ids engine", "mode", m.Knob(), "warning", w)
			}
			return eng, nil
		}
		select {
		case <-eng.done:
			return nil, fmt.Errorf("suricata: the %s engine on %s exited before it was ready; see %s", m.Knob(), strings.Join(devs, ","), filepath.Join(g.Dir, name+".log"))
		case <-deadline.C:
			stopEngine(eng)
			return nil, fmt.Errorf("suricata: the %s engine on %s was not ready after %s; see %s", m.Knob(), strings.Join(devs, ","), timeout, filepath.Join(g.Dir, name+".log"))
		case <-ctx.Done():
			stopEngine(eng)
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

func (eng *idsEngine) exited() bool {
	select {
	case <-eng.done:
		return true
	default:
		return false
	}
}

// stopEngine sends SIGTERM (the engine removes its steering rules), then
// SIGKILL to the group after 5 s.
func stopEngine(eng *idsEngine) {
	pid := eng.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-eng.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-eng.done
}

// StopAll stops every engine and waits for them.
func (g *IDSEngines) StopAll() {
	g.op.Lock()
	defer g.op.Unlock()
	g.mu.Lock()
	engines := g.running
	g.running = nil
	g.mu.Unlock()
	for _, eng := range engines {
		stopEngine(eng)
	}
	if len(engines) > 0 && g.Netns != "" {
		// An engine that crashed (Kill) or needed SIGKILL left its
		// steering behind; stopping Suricata on the product leaves no
		// interface diverted, so neither does the lab.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := (inspect.Steerer{}).Remove(ctx, g.Netns); err != nil {
			g.logger().Warn("ids: remove the steering rules", "err", err)
		}
	}
}

// Kill ends every engine's process group at once (SIGKILL), as a crash
// would, and the engines stay gone until the next Restart. Their steering
// goes with them: when the process holding a netmap port dies, FreeBSD
// hands the NIC back to the host stack, so inline traffic passes
// uninspected (fails open), the harder case for fwab: only the box's
// health shows that anything happened.
//
// upstream: not settled — netmap's release of a dead process's port is FreeBSD's kernel (not in the upstream copy); the lab takes the fail-open reading, which hides the crash from throughput; checked at run time by the sweep's health readings, which see the crash whatever the traffic does
func (g *IDSEngines) Kill() {
	g.op.Lock()
	defer g.op.Unlock()
	g.mu.Lock()
	engines := slices.Collect(maps.Values(g.running))
	g.mu.Unlock()
	for _, eng := range engines {
		_ = syscall.Kill(-eng.cmd.Process.Pid, syscall.SIGKILL)
		<-eng.done
	}
	if len(engines) > 0 && g.Netns != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := (inspect.Steerer{}).Remove(ctx, g.Netns); err != nil {
			g.logger().Warn("ids: remove the steering rules of the killed engines", "err", err)
		}
	}
}

// SuricataProcesses are the ps lines of the engines that run and are ready:
// pid and the command pfSense's Suricata would show, one per interface.
func (g *IDSEngines) SuricataProcesses() [][2]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [][2]string
	for _, m := range []inspect.Mode{inspect.Inline, inspect.IDS, inspect.Legacy} {
		eng := g.running[m]
		if eng == nil {
			continue
		}
		if eng.exited() {
			continue // Suricata is not running
		}
		st, err := inspect.ReadStatus(eng.status)
		if err != nil || !st.Running {
			continue
		}
		for _, d := range eng.devices {
			out = append(out, [2]string{strconv.Itoa(eng.cmd.Process.Pid), st.SuricataCommand(d)})
		}
	}
	return out
}

// Statuses returns the status of each running engine (for tests and `lab
// status`).
func (g *IDSEngines) Statuses() []inspect.Status {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []inspect.Status
	for _, eng := range g.running {
		if st, err := inspect.ReadStatus(eng.status); err == nil {
			out = append(out, st)
		}
	}
	return out
}
