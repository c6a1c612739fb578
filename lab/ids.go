package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
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

// IDSPlan is which engines config.xml asks for: mode → FreeBSD devices.
type IDSPlan map[inspect.Mode][]string

// PlanIDS reads ids@IF for every interface of the config.
func PlanIDS(c *configxml.Config, ports Ports) (IDSPlan, error) {
	plan := IDSPlan{}
	for _, ifc := range c.Interfaces() {
		v, err := c.Get("ids@" + ifc.Key)
		if err != nil {
			return nil, fmt.Errorf("ids@%s: %w", ifc.Key, err)
		}
		if v == configxml.IDSOff || v == "" {
			continue
		}
		m, err := inspect.ParseMode(v)
		if err != nil {
			return nil, fmt.Errorf("ids@%s: %w", ifc.Key, err)
		}
		if _, ok := ports.Veth(ifc.Device); !ok {
			return nil, fmt.Errorf("ids@%s=%s: interface %s is not part of the lab (only %s and %s are)", ifc.Key, v, ifc.Device, ports.LanDev, ports.WanDev)
		}
		plan[m] = append(plan[m], ifc.Device)
	}
	for m := range plan {
		sort.Strings(plan[m])
	}
	if len(plan[inspect.Inline]) > 0 && len(plan[inspect.Legacy]) > 0 {
		return nil, fmt.Errorf("ips-inline on %s and ips-legacy on %s at once: the lab's engines share the DUT's steering rules, so it runs one of the two blocking modes at a time; set one of them to ids or off",
			strings.Join(plan[inspect.Inline], ","), strings.Join(plan[inspect.Legacy], ","))
	}
	return plan, nil
}

// Restart stops every engine and starts those the plan asks for, waiting
// until each is ready (bound to its queue or capture sockets), as
// `suricata.sh restart` does.
func (g *IDSEngines) Restart(ctx context.Context, plan IDSPlan, ports Ports) error {
	g.StopAll()
	return g.Start(ctx, plan, ports)
}

// Start starts the engines of the plan that do not run yet.
func (g *IDSEngines) Start(ctx context.Context, plan IDSPlan, ports Ports) error {
	g.op.Lock()
	defer g.op.Unlock()
	var errs []error
	for _, m := range []inspect.Mode{inspect.Inline, inspect.IDS, inspect.Legacy} {
		devs := plan[m]
		g.mu.Lock()
		runs := g.running[m] != nil && !g.running[m].exited()
		g.mu.Unlock()
		if len(devs) == 0 || runs {
			continue
		}
		eng, err := g.start(ctx, m, devs, ports)
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

func (g *IDSEngines) start(ctx context.Context, m inspect.Mode, devs []string, ports Ports) (*idsEngine, error) {
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
	g.logger().Info("ids engine started", "mode", m.Knob(), "pid", cmd.Process.Pid, "interfaces", strings.Join(eng.veths, ","), "rules", rules)

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

// suricata runs the Suricata service action: restart, start or stop. The
// inspection path changes the forwarding path, so a tracking slowdown
// measures it again afterwards.
//
// On pfSense the modes come from the rc script the last package sync
// baked (suricataRC), not from config.xml: a restart without a resync
// restarts the old mode, and stop stops only the interfaces that script
// knows.
func (e *Emulator) suricata(ctx context.Context, action string) error {
	if action != "stop" {
		e.did(configxml.ActionIDSRestart)
	}
	if !e.opnsense() {
		if err := e.suricataBaked(ctx, action); err != nil {
			return err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.applySlowdown(ctx)
	}
	return e.opnSuricata(ctx, action)
}

// bootIDS starts the engines config.xml asks for at boot. On pfSense the
// boot's rc.start_packages resyncs the package first, which bakes the rc
// script from config.xml; on OPNsense the boot renders the templates.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:66 — `sync_package($package['name']);` then start_service, for every package at boot
func (e *Emulator) bootIDS(ctx context.Context, root *configxml.Config) error {
	if !e.opnsense() {
		e.suricataRun = nil
		if err := e.bakeSuricataRC(root); err != nil {
			return err
		}
		return e.suricataBakedLocked(ctx, "start")
	}
	// The boot renders every template, then starts the enabled services.
	if err := e.renderIDS(root); err != nil {
		return err
	}
	plan, enabled, err := e.renderedIDS()
	if err != nil {
		return err
	}
	return e.opnSuricataSet(ctx, plan, enabled)
}

// stopIDS stops the engines (reboot, shutdown of the emulator).
func (e *Emulator) stopIDS() {
	if e.IDS != nil {
		e.IDS.StopAll()
	}
}

// suricataProcesses lists the running engines as Suricata processes; on
// an emulator without engines, the instances the rc script started.
func (e *Emulator) suricataProcesses() [][2]string {
	if e.IDS == nil {
		e.smu.Lock()
		defer e.smu.Unlock()
		var out [][2]string
		for i, dev := range slices.Sorted(maps.Keys(e.suricataRun)) {
			out = append(out, [2]string{strconv.Itoa(61000 + i), e.suricataRun[dev].cmd})
		}
		return out
	}
	return e.IDS.SuricataProcesses()
}

// suricataRC is the package's rc script, which suricata_create_rc() writes
// at every package sync with each enabled interface's run mode in it.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/inc/service-utils.inc:34 — `define("RCFILEPREFIX", "/usr/local/etc/rc.d/");` where the script lives
// upstream: not settled — the script's content (`$run_mode = $value['ips_mode'] == 'ips_mode_inline' ? '--netmap' : '-i ' . $if_real;`, enabled interfaces only, rebuilt on each sync) is from an older copy of suricata.inc (pfsense/FreeBSD-ports@e2173cf2, line not verified); checked at run time by fwapi.VerifyRuntime, which reads the running mode from ps after the apply
const suricataRC = "/usr/local/etc/rc.d/suricata.sh"

// bakedInstance is one interface's start line in the rc script, and the
// lab engine mode it stands for.
type bakedInstance struct {
	dev, mode, cmd string
}

// bakeSuricataRC is sync_suricata_package_config's create_rc: it writes the
// rc script for the enabled interfaces of root, each with its mode as it
// is now. The lab engine mode is kept in a comment line per interface.
func (e *Emulator) bakeSuricataRC(root *configxml.Config) error {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# This file was automatically generated\n# by the pfSense service handler (emulated by fwab lab).\n")
	for i, ifc := range root.Interfaces() {
		v, err := root.Get("ids@" + ifc.Key)
		if err != nil || v == configxml.IDSOff || v == "" {
			continue
		}
		runMode := "-i " + ifc.Device
		if v == configxml.IDSInlineIPS {
			runMode = "--netmap"
		}
		// The package names the folder suricata_<rule uuid>_<if>; the lab
		// numbers it by interface position instead.
		uuid := strconv.Itoa(10000 + i)
		if err := e.buildSuricataRules(root, ifc.Key, fmt.Sprintf("/usr/local/etc/suricata/suricata_%s_%s/rules", uuid, ifc.Device)); err != nil {
			return err
		}
		fmt.Fprintf(&b, "# fwab-lab %s %s\n/usr/local/bin/suricata %s -D -c /usr/local/etc/suricata/suricata_%s_%s/suricata.yaml --pidfile /var/run/suricata_%s%s.pid\n",
			ifc.Device, v, runMode, uuid, ifc.Device, ifc.Device, uuid)
	}
	if err := os.MkdirAll(filepath.Dir(e.path(suricataRC)), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(e.path(suricataRC), []byte(b.String()), 0o755)
}

// buildSuricataRules is the sync's rule build for one interface: the
// enforcing rules file in its folder, from the rulesets enabled for it.
// The lab has no ruleset files (its engines load a generated ruleset of
// their own), so it writes one stand-in rule per enabled ruleset: an
// interface without rulesets gets an empty file, as on the box.
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:1304 — `suricata_prepare_rule_files($suricatacfg, $suricatacfgdir);`
func (e *Emulator) buildSuricataRules(root *configxml.Config, iface, dir string) error {
	var b strings.Builder
	for i, name := range root.SuricataRulesets(iface) {
		fmt.Fprintf(&b, "alert ip any any -> any any (msg:\"fwab lab stand-in for %s\"; sid:%d; rev:1;)\n", name, 9000001+i)
	}
	if err := os.MkdirAll(e.path(dir), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(e.path(dir+"/suricata.rules"), []byte(b.String()), 0o644)
}

// bakedSuricata reads the rc script's instances.
func (e *Emulator) bakedSuricata() ([]bakedInstance, error) {
	data, err := os.ReadFile(e.path(suricataRC))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []bakedInstance
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) == 4 && f[0] == "#" && f[1] == "fwab-lab" && i+1 < len(lines) {
			out = append(out, bakedInstance{dev: f[2], mode: f[3], cmd: lines[i+1]})
		}
	}
	return out, nil
}

func (e *Emulator) suricataBaked(ctx context.Context, action string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.suricataBakedLocked(ctx, action)
}

// suricataBakedLocked runs the baked script: stop ends the instances it
// lists (an interface the last sync dropped keeps running), start starts
// those it lists that do not run, restart is stop then start.
func (e *Emulator) suricataBakedLocked(ctx context.Context, action string) error {
	baked, err := e.bakedSuricata()
	if err != nil {
		return err
	}
	e.smu.Lock()
	if action == "stop" || action == "restart" {
		for _, b := range baked {
			delete(e.suricataRun, b.dev)
		}
	}
	if action == "start" || action == "restart" {
		for _, b := range baked {
			if _, ok := e.suricataRun[b.dev]; !ok {
				if e.suricataRun == nil {
					e.suricataRun = map[string]bakedInstance{}
				}
				e.suricataRun[b.dev] = b
			}
		}
	}
	plan := IDSPlan{}
	for _, b := range e.suricataRun {
		m, err := inspect.ParseMode(b.mode)
		if err != nil {
			e.smu.Unlock()
			return err
		}
		plan[m] = append(plan[m], b.dev)
	}
	e.smu.Unlock()
	if e.IDS == nil {
		return nil
	}
	for m := range plan {
		sort.Strings(plan[m])
	}
	// The lab's engines are one per mode: they follow the instances the
	// script left running.
	return e.IDS.Restart(ctx, plan, e.Ports)
}
