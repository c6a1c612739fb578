package lab

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/atomicfile"
)

// DefaultDir is where the lab keeps its state.
const DefaultDir = "/var/lib/fwab/lab"

// TargetName is the name of the target the lab writes into the targets file.
const TargetName = "lab"

// Layout of the lab folder.
const (
	stateFile    = "lab.json"
	serveLog     = "serve.log"
	servePid     = "serve.pid"
	profilesFile = "firmware.yaml"
)

// Options configure a lab.
type Options struct {
	Dir          string // lab folder; default DefaultDir
	Prefix       string // namespace prefix; default DefaultPrefix
	TargetsPath  string // targets file; default fwapi.DefaultTargetsPath()
	ProfilesFile string // firmware profiles YAML; empty = embedded
	Flavor       string // "pfsense" (default) or "opnsense"
	// Executable and ServeArgs start the emulator daemon; Up runs
	// Executable ServeArgs... --dir DIR. Default: this program, "lab serve".
	Executable string
	ServeArgs  []string
	Logger     *slog.Logger
	// IDSRules is the ruleset size of the IDS/IPS engines; 0 means
	// DefaultIDSRules.
	IDSRules int
	// Appliance names the lab profile (LookupAppliance): its link and CPU
	// budget, unless Link or DUTCPU say otherwise; empty is "unlimited".
	Appliance string
	// emu.Link is every DUT interface's emulated NIC (ParseLinkSpec: 1g,
	// 2.5g, 10g, unlimited, optionally /half); empty means the profile's.
	// InterfaceLinks overrides it per interface, by the lab's name for it
	// (lan, wan: Topology.DUTVeths).
	Link           string
	InterfaceLinks map[string]string
	// DUTCPU is the CPU budget, in cores, of the emulated firewall's
	// userspace services (CPUGroup); 0 means the profile's.
	DUTCPU float64
	// Pairs is how many client/server pairs cross the DUT (Topology.Pairs):
	// 1 (0 too), or 2 for a second link on ports of its own.
	Pairs int
	// Benchmark runs the CPU benchmark a calibrated profile's budget comes
	// from (Calibrate); nil means RunSevenZip.
	Benchmark func(context.Context) (SevenZip, error)
}

// calibrate is the CPU calibration of a profile with an appliance CPU,
// unless DUTCPU gives the budget: the running lab's when it is up,
// healthy and calibrated for the same CPU (a second `lab up` keeps its
// budget), else measured now; running says whether the lab a lab.json
// describes is up and healthy. A lab that is down or half built is
// measured again, as is one whose machine changed cores.
func (o Options) calibrate(ctx context.Context, running func(*State) bool) (*CPUCalibration, error) {
	a, err := LookupAppliance(o.Appliance)
	if err != nil || a.CPU == nil || o.DUTCPU != 0 {
		return nil, err
	}
	if st, err := readState(o.Dir); err == nil && st.Appliance == a.Name && st.CPU != nil && st.CPU.Appliance == *a.CPU &&
		st.CPU.Budget <= float64(runtime.NumCPU()) && st.Prefix == o.Prefix && running(st) {
		return st.CPU, nil
	}
	bench := o.Benchmark
	if bench == nil {
		bench = RunSevenZip
	}
	o.Logger.Info("calibrating the CPU budget", "profile", a.Name, "cpu", a.CPU.Model, "benchmark", strings.Join(SevenZipCommand, " "))
	m, err := bench(ctx)
	if err != nil {
		return nil, fmt.Errorf("lab profile %s: %w", a.Name, err)
	}
	c, err := Calibrate(*a.CPU, m, runtime.NumCPU())
	if err != nil {
		return nil, fmt.Errorf("lab profile %s: %w", a.Name, err)
	}
	if c.Ratio > 1 {
		o.Logger.Warn("this machine's core is slower than the appliance's: the engine's one thread cannot run faster than one core here", "profile", a.Name, "ratio", c.Ratio)
	}
	return &c, nil
}

// CheckAppliance checks the lab profile, links and CPU budget asked for
// (not whether this machine can hold the budget: Up checks that).
func (o Options) CheckAppliance() error {
	_, _, _, err := o.resolveAppliance(Topology{Prefix: DefaultPrefix, Pairs: o.Pairs})
	return err
}

// appliance resolves the profile and the options that override it: the
// profile's name, a link per DUT interface and the CPU budget. It checks
// the budget's range, and that this machine can hold one.
func (o Options) appliance(t Topology) (string, map[string]emu.LinkSpec, float64, error) {
	name, links, cpu, err := o.resolveAppliance(t)
	if err != nil {
		return "", nil, 0, err
	}
	if cpu != 0 {
		if err := CheckCPUControllers(); err != nil {
			return "", nil, 0, fmt.Errorf("lab profile %s: %w", name, err)
		}
	}
	return name, links, cpu, nil
}

func (o Options) resolveAppliance(t Topology) (string, map[string]emu.LinkSpec, float64, error) {
	a, err := LookupAppliance(o.Appliance)
	if err != nil {
		return "", nil, 0, err
	}
	if o.Link == "" {
		o.Link = a.Link.String()
	}
	links, err := o.links(t)
	if err != nil {
		return "", nil, 0, err
	}
	cpu := a.DUTCPU
	if o.DUTCPU != 0 {
		cpu = o.DUTCPU
	}
	if err := CheckCPUBudget(cpu); err != nil {
		return "", nil, 0, err
	}
	return a.Name, links, cpu, nil
}

// links resolves Link and InterfaceLinks into a link per DUT interface.
func (o Options) links(t Topology) (map[string]emu.LinkSpec, error) {
	all, err := emu.ParseLinkSpec(o.Link)
	if err != nil {
		return nil, err
	}
	ifs := t.DUTVeths()
	out := make(map[string]emu.LinkSpec, len(ifs))
	for name := range ifs {
		out[name] = all
	}
	for _, name := range slices.Sorted(maps.Keys(o.InterfaceLinks)) {
		if _, ok := ifs[name]; !ok {
			return nil, fmt.Errorf("link of interface %q: the lab's DUT interfaces are %s", name, strings.Join(slices.Sorted(maps.Keys(ifs)), ", "))
		}
		l, err := emu.ParseLinkSpec(o.InterfaceLinks[name])
		if err != nil {
			return nil, fmt.Errorf("interface %s: %w", name, err)
		}
		out[name] = l
	}
	return out, nil
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = DefaultDir
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.TargetsPath == "" {
		o.TargetsPath = fwapi.DefaultTargetsPath()
	}
	if o.Flavor == "" {
		o.Flavor = "pfsense"
	}
	if o.ServeArgs == nil {
		o.ServeArgs = []string{"lab", "serve"}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// State is what lab.json records about a running lab.
type State struct {
	Prefix  string `json:"prefix"`
	Flavor  string `json:"flavor"`
	SSHAddr string `json:"ssh_addr"`
	// APIAddr is the OPNsense REST API's HTTPS address (opnsense only).
	APIAddr string `json:"api_addr,omitempty"`
	// IDSRules is the IDS/IPS engines' ruleset size.
	IDSRules int `json:"ids_rules,omitempty"`
	// Appliance is the lab profile the links and budget came from.
	Appliance string `json:"appliance,omitempty"`
	// Links is each DUT interface's emulated NIC, by interface (lan, wan).
	Links map[string]emu.LinkSpec `json:"links,omitempty"`
	// DUTCPU is the services' CPU budget in cores; 0: none.
	DUTCPU float64 `json:"dut_cpu,omitempty"`
	// CPU is how a calibrated profile's budget was found; nil for a
	// budget given in cores.
	CPU *CPUCalibration `json:"cpu_calibration,omitempty"`
	// Pairs is the client/server pairs crossing the DUT; 0 is 1.
	Pairs int `json:"pairs,omitempty"`
}

// Describe says what the lab's emulated box stands for: its profile, the
// DUT's links, the services' CPU budget and, for a calibrated profile,
// where the budget comes from.
func (s *State) Describe() string {
	var links []string
	for _, name := range slices.Sorted(maps.Keys(s.Links)) {
		links = append(links, name+" "+s.Links[name].String())
	}
	line := "lab profile " + cmp.Or(s.Appliance, "unlimited") + ": links " + cmp.Or(strings.Join(links, ", "), "unlimited")
	a, _ := LookupAppliance(s.Appliance)
	switch {
	case s.CPU != nil:
		return line + fmt.Sprintf("; services on a %g-core budget (cgroup %s-dut): %s", s.DUTCPU, s.Prefix, s.CPU)
	case a.CPU != nil && s.DUTCPU > 0:
		return line + fmt.Sprintf("; services on a %g-core budget (cgroup %s-dut), set by --dut-cpu, not calibrated", s.DUTCPU, s.Prefix)
	case s.DUTCPU > 0:
		return line + fmt.Sprintf("; services on a %g-core budget (cgroup %s-dut)", s.DUTCPU, s.Prefix)
	}
	return line + "; services unbudgeted"
}

// topology is the running lab's namespaces and ports.
func (s *State) topology() Topology { return Topology{Prefix: s.Prefix, Pairs: s.Pairs} }

// sameAppliance reports whether a running lab has the links asked for.
func (s *State) sameAppliance(links map[string]emu.LinkSpec, dutCPU float64) bool {
	if s.DUTCPU != dutCPU {
		return false
	}
	if s.Links == nil { // a lab.json from before links: all unlimited
		for _, l := range links {
			if l != (emu.LinkSpec{}) && l.String() != "unlimited" {
				return false
			}
		}
		return true
	}
	return maps.Equal(s.Links, links)
}

// tool is a program the lab needs and the Debian package that has it.
type tool struct{ bin, pkg string }

var requiredTools = []tool{
	{"ip", "iproute2"}, {"nft", "nftables"}, {"ethtool", "ethtool"}, {"tc", "iproute2"},
	{"iperf3", "iperf3"}, {"swanctl", "strongswan-swanctl"}, {"charon-systemd", "charon-systemd"},
}

// CheckTools reports every missing program in one error that gives the
// apt-get line to run.
func CheckTools() error {
	return checkTools(func(bin string) bool {
		if _, err := exec.LookPath(bin); err == nil {
			return true
		}
		// sudo and cron may run fwab without /usr/sbin on PATH.
		_, err := os.Stat(filepath.Join("/usr/sbin", bin))
		return err == nil
	})
}

func checkTools(have func(bin string) bool) error {
	var missing, pkgs []string
	seen := map[string]bool{}
	for _, t := range requiredTools {
		if !have(t.bin) {
			missing = append(missing, t.bin)
			if !seen[t.pkg] {
				seen[t.pkg] = true
				pkgs = append(pkgs, t.pkg)
			}
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the lab needs %s; install with: apt-get install -y %s (or run scripts/setup.sh)",
			strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	return nil
}

// CheckRoot fails clearly when not root: namespaces need it.
func CheckRoot() error {
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root (network namespaces, nftables): run it with sudo")
	}
	return nil
}

func readState(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

// Up builds the lab, starts the emulated firewall and writes the "lab"
// target. When the lab is up and healthy already, it only rewrites the
// target; a half-built lab is torn down and built again.
func Up(ctx context.Context, o Options) (*State, error) {
	o.defaults()
	flavor, err := labFlavor(o.Flavor)
	if err != nil {
		return nil, err
	}
	topo := Topology{Prefix: o.Prefix, Pairs: o.Pairs}
	if err := topo.Validate(); err != nil {
		return nil, err
	}
	if err := o.CheckAppliance(); err != nil {
		return nil, err
	}
	if err := CheckRoot(); err != nil {
		return nil, err
	}
	if err := CheckTools(); err != nil {
		return nil, err
	}
	// A budget needs the cgroup controllers: say so before the benchmark.
	if a, err := LookupAppliance(o.Appliance); err == nil && a.CPU != nil && o.DUTCPU == 0 {
		if err := CheckCPUControllers(); err != nil {
			return nil, fmt.Errorf("lab profile %s: %w", a.Name, err)
		}
	}
	cal, err := o.calibrate(ctx, func(st *State) bool { return healthy(ctx, o.Dir, topo, st) == nil })
	if err != nil {
		return nil, err
	}
	if cal != nil {
		o.DUTCPU = cal.Budget
	}
	appliance, links, dutCPU, err := o.appliance(topo)
	if err != nil {
		return nil, err
	}
	profiles := emu.DefaultProfilesFor(flavor)
	if o.ProfilesFile != "" {
		if profiles, err = emu.LoadProfiles(o.ProfilesFile); err != nil {
			return nil, err
		}
	}
	if st, err := readState(o.Dir); err == nil && st.Prefix == o.Prefix && st.Flavor == o.Flavor && st.sameAppliance(links, dutCPU) && st.topology().second() == topo.second() {
		if healthy(ctx, o.Dir, topo, st) == nil {
			o.Logger.Info("lab already up", "ssh", st.SSHAddr)
			return st, writeTarget(o, st)
		}
	}
	if err := Down(ctx, o); err != nil {
		return nil, fmt.Errorf("clean up the previous lab: %w", err)
	}
	if err := topo.Create(ctx); err != nil {
		return nil, err
	}
	for _, d := range []string{"keys", "root"} {
		if err := os.MkdirAll(filepath.Join(o.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if _, err := emu.EnsureKey(filepath.Join(o.Dir, emu.HostKeyFile)); err != nil {
		return nil, err
	}
	if _, err := emu.EnsureKey(filepath.Join(o.Dir, emu.UserKeyFile)); err != nil {
		return nil, err
	}
	raw := emu.DefaultProfilesYAMLFor(flavor)
	if o.ProfilesFile != "" {
		if raw, err = os.ReadFile(o.ProfilesFile); err != nil {
			return nil, err
		}
	}
	if err := atomicfile.WriteFile(filepath.Join(o.Dir, profilesFile), raw, 0o644); err != nil {
		return nil, err
	}
	if err := emu.WriteTunnelPSK(o.Dir); err != nil {
		return nil, err
	}
	if flavor == configxml.OPNsense {
		if _, err := emu.EnsureAPICert(o.Dir); err != nil {
			return nil, err
		}
		if _, err := emu.EnsureAPICredentials(o.Dir); err != nil {
			return nil, err
		}
	}
	em := &emu.Emulator{Root: filepath.Join(o.Dir, "root"), Flavor: flavor, Profiles: profiles}
	if err := em.Init(); err != nil {
		return nil, err
	}
	if topo.second() {
		if err := em.AddSecondLink(); err != nil {
			return nil, err
		}
	}
	st := &State{Prefix: o.Prefix, Flavor: o.Flavor, IDSRules: o.IDSRules, Appliance: appliance, Links: links, DUTCPU: dutCPU, CPU: cal, Pairs: topo.Pairs}
	data, _ := json.MarshalIndent(st, "", "  ")
	if err := atomicfile.WriteFile(filepath.Join(o.Dir, stateFile), data, 0o644); err != nil {
		return nil, err
	}
	proc, err := startDaemon(ctx, o)
	if err != nil {
		return nil, err
	}
	st, err = waitReady(ctx, o.Dir, proc, 60*time.Second)
	_ = proc.Release()
	if err != nil {
		return nil, err
	}
	if err := emu.WriteKnownHosts(o.Dir, st.SSHAddr); err != nil {
		return nil, err
	}
	return st, writeTarget(o, st)
}

// healthy checks that the namespaces exist, the daemon runs and SSH answers.
func healthy(ctx context.Context, dir string, topo Topology, st *State) error {
	ns, err := topo.ExistingNamespaces(ctx)
	if err != nil || len(ns) != len(roles) {
		return fmt.Errorf("namespaces missing")
	}
	if _, err := daemonPID(dir); err != nil {
		return err
	}
	if st.SSHAddr == "" {
		return fmt.Errorf("no ssh address")
	}
	addrs := []string{st.SSHAddr}
	if st.Flavor == string(configxml.OPNsense) {
		if st.APIAddr == "" {
			return fmt.Errorf("no api address")
		}
		addrs = append(addrs, st.APIAddr)
	}
	for _, a := range addrs {
		c, err := net.DialTimeout("tcp", a, 2*time.Second)
		if err != nil {
			return err
		}
		c.Close()
	}
	return nil
}

// labFlavor checks a lab flavor name.
func labFlavor(name string) (configxml.Flavor, error) {
	switch configxml.Flavor(name) {
	case configxml.PfSense, "":
		return configxml.PfSense, nil
	case configxml.OPNsense:
		return configxml.OPNsense, nil
	}
	return "", fmt.Errorf("flavor %q: the lab emulates pfsense or opnsense", name)
}

// startDaemon starts the emulator daemon in a session of its own, its
// output appended to serve.log, and records its pid. The caller waits for it
// (waitReady), then releases proc.
func startDaemon(ctx context.Context, o Options) (proc *os.Process, err error) {
	exe := o.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	logf, err := os.OpenFile(filepath.Join(o.Dir, serveLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	args := append(append([]string{}, o.ServeArgs...), "--dir", o.Dir)
	cmd := exec.Command(exe, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	closeInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the emulated firewall: %w", err)
	}
	if err := atomicfile.WriteFile(filepath.Join(o.Dir, servePid), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		return nil, err
	}
	return cmd.Process, nil
}

// closeInheritedOnExec marks every descriptor above stderr close-on-exec,
// so that the detached daemon keeps none that fwab itself inherited (a
// `flock LOCK fwab lab up` would otherwise hold LOCK until lab down). Go
// opens its own descriptors close-on-exec already.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// waitReady waits for the daemon proc to record its SSH address (and, for
// OPNsense, its API address) in lab.json. A daemon that ends first is
// reaped, and the error says how it ended: one killed before it wrote a
// line leaves serve.log empty.
func waitReady(ctx context.Context, dir string, proc *os.Process, timeout time.Duration) (*State, error) {
	// A daemon given up on is not left behind half-started.
	giveUp := func(err error) (*State, error) {
		_ = syscall.Kill(proc.Pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(proc.Pid, &ws, 0, nil)
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if st, err := readState(dir); err == nil && st.SSHAddr != "" && (st.Flavor != string(configxml.OPNsense) || st.APIAddr != "") {
			return st, nil
		}
		var ws syscall.WaitStatus
		if pid, err := syscall.Wait4(proc.Pid, &ws, syscall.WNOHANG, nil); err != nil || pid == proc.Pid {
			return nil, daemonExited(dir, ws, err)
		}
		select {
		case <-ctx.Done():
			return giveUp(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return giveUp(fmt.Errorf("the emulated firewall did not start within %v; see %s", timeout, filepath.Join(dir, serveLog)))
}

// daemonExited says how the daemon ended, with serve.log's last line.
func daemonExited(dir string, ws syscall.WaitStatus, werr error) error {
	how := "exit status " + strconv.Itoa(ws.ExitStatus())
	switch {
	case werr != nil:
		how = "wait: " + werr.Error()
	case ws.Signaled():
		how = "killed by signal " + ws.Signal().String()
	}
	log := filepath.Join(dir, serveLog)
	b, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if last := lines[len(lines)-1]; last != "" {
		how += ": " + last
	}
	return fmt.Errorf("the emulated firewall exited (%s); see %s", how, log)
}

// daemonPID returns the running emulator's pid, checking that the pid file
// names a live fwab "lab serve" process and not a reused pid.
func daemonPID(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, servePid))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(dir, servePid), err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !alive(pid) {
		return 0, fmt.Errorf("emulated firewall (pid %d) is not running", pid)
	}
	if !strings.Contains(string(cmdline), "serve\x00--dir\x00"+dir+"\x00") {
		return 0, fmt.Errorf("pid %d is not the lab's emulated firewall", pid)
	}
	return pid, nil
}

// alive reports whether a process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// killPID sends SIGTERM, waits up to 5 s, then sends SIGKILL.
func killPID(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for i := 0; i < 50; i++ {
		if !alive(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// Down stops the emulated firewall, removes the namespaces (and so the
// veths), the lab folder and the "lab" target. Parts already gone are
// skipped, so Down also cleans up after a crashed Up.
func Down(ctx context.Context, o Options) error {
	o.defaults()
	if err := CheckRoot(); err != nil {
		return err
	}
	prefix := o.Prefix
	if st, err := readState(o.Dir); err == nil && st.Prefix != "" {
		prefix = st.Prefix
	}
	var errs []error
	if pid, err := daemonPID(o.Dir); err == nil {
		if err := killPID(pid); err != nil {
			errs = append(errs, fmt.Errorf("stop the emulated firewall: %w", err))
		}
		// Wait for it to be gone: it may be running nft in the namespace.
		for i := 0; i < 50 && alive(pid); i++ {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := (Topology{Prefix: prefix}).Destroy(ctx); err != nil {
		errs = append(errs, err)
	}
	// The daemon removes the services' cgroup when it stops; this is for
	// one that was killed.
	if err := RemoveCPUGroup(Topology{Prefix: prefix}.Namespace("dut")); err != nil {
		errs = append(errs, err)
	}
	if err := removeTarget(o.TargetsPath, o.Dir); err != nil {
		errs = append(errs, err)
	}
	if _, err := os.Stat(filepath.Join(o.Dir, stateFile)); err == nil || isLabDir(o.Dir) {
		if err := os.RemoveAll(o.Dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isLabDir recognises a lab folder left by a crashed Up before lab.json.
func isLabDir(dir string) bool {
	for _, f := range []string{"keys", "root", servePid, serveLog} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// Status describes the lab.
type Status struct {
	Dir        string
	State      *State
	Namespaces []string // nil when not root: they cannot be listed reliably
	Checked    bool     // namespaces were checked
	DaemonPID  int
	DaemonErr  string
	SSHUp      bool
	APIUp      bool // OPNsense: the REST API port answers
	Version    string
}

// GetStatus reports what exists of the lab.
func GetStatus(ctx context.Context, o Options) (Status, error) {
	o.defaults()
	s := Status{Dir: o.Dir}
	prefix := o.Prefix
	if st, err := readState(o.Dir); err == nil {
		s.State = st
		prefix = st.Prefix
	}
	if os.Geteuid() == 0 {
		ns, err := (Topology{Prefix: prefix}).ExistingNamespaces(ctx)
		if err != nil {
			return s, err
		}
		s.Namespaces, s.Checked = ns, true
	}
	if pid, err := daemonPID(o.Dir); err == nil {
		s.DaemonPID = pid
	} else if !errors.Is(err, fs.ErrNotExist) {
		s.DaemonErr = err.Error()
	}
	up := func(addr string) bool {
		if addr == "" {
			return false
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	flavor := configxml.PfSense
	if s.State != nil {
		s.SSHUp, s.APIUp = up(s.State.SSHAddr), up(s.State.APIAddr)
		if f, err := labFlavor(s.State.Flavor); err == nil {
			flavor = f
		}
	}
	s.Version = (&emu.Emulator{Root: filepath.Join(o.Dir, "root"), Flavor: flavor}).Version()
	return s, nil
}

func writeTarget(o Options, st *State) error {
	host, port, err := net.SplitHostPort(st.SSHAddr)
	if err != nil {
		return err
	}
	p, _ := strconv.Atoi(port)
	tf, err := fwapi.EditTargets(o.TargetsPath) // the lab replaces its own target, whatever the others hold
	if err != nil {
		return err
	}
	topo := st.topology()
	var api *fwapi.APISpec
	if st.Flavor == string(configxml.OPNsense) {
		// The secret stays in its 0600 file: the targets file only names it.
		api = &fwapi.APISpec{
			URL:        "https://" + st.APIAddr,
			KeyFile:    filepath.Join(o.Dir, emu.APIKeyFile),
			SecretFile: filepath.Join(o.Dir, emu.APISecretFile),
			CAFile:     filepath.Join(o.Dir, emu.APICAFile),
		}
	}
	tf.Targets[TargetName] = &fwapi.Target{
		Name:   TargetName,
		Flavor: st.Flavor,
		Host:   host,
		SSH: &fwapi.SSHSpec{
			Port:       p,
			User:       "root",
			KeyFile:    filepath.Join(o.Dir, emu.UserKeyFile),
			KnownHosts: filepath.Join(o.Dir, emu.KnownHostFile),
		},
		API: api,
		Endpoints: fwapi.Endpoints{
			Client: fwapi.Endpoint{Addr: emu.ClientAddr, Netns: topo.Namespace("lan")},
			Server: fwapi.Endpoint{Addr: emu.ServerAddr, Netns: topo.Namespace("wan")},
		},
		// The lab's management interface is its LAN (SSHVia); its emulated
		// link rides out a capability change, so offload changes reach it
		// too, as the GUI's do.
		OffloadManagement: true,
		Lab:               st.Describe(),
	}
	if topo.second() {
		tf.Targets[TargetName].Endpoints.Name = "link1"
		tf.Targets[TargetName].Endpoints.Links = map[string]fwapi.EndpointPair{"link2": {
			Client: fwapi.Endpoint{Addr: emu.Client2Addr, Netns: topo.Namespace("lan2")},
			Server: fwapi.Endpoint{Addr: emu.Server2Addr, Netns: topo.Namespace("wan2")},
		}}
	}
	return tf.Save(o.TargetsPath)
}

// removeTarget drops the "lab" target when it points into this lab folder.
func removeTarget(path, dir string) error {
	tf, err := fwapi.EditTargets(path)
	if err != nil {
		return err
	}
	t, ok := tf.Targets[TargetName]
	if !ok || t.SSH == nil || !strings.HasPrefix(t.SSH.KeyFile, dir+string(os.PathSeparator)) {
		return nil
	}
	delete(tf.Targets, TargetName)
	return tf.Save(path)
}

// Serve runs the emulated firewall of the lab in dir until ctx ends: it
// boots the data plane from config.xml, serves SSH on 127.0.0.1 and records
// the address in lab.json. `fwab lab serve` calls it.
func Serve(ctx context.Context, dir string, logger *slog.Logger) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	st, err := readState(dir)
	if err != nil {
		return fmt.Errorf("no lab in %s (run 'fwab lab up'): %w", dir, err)
	}
	profiles, err := emu.LoadProfiles(filepath.Join(dir, profilesFile))
	if err != nil {
		return err
	}
	hostKey, err := emu.EnsureKey(filepath.Join(dir, emu.HostKeyFile))
	if err != nil {
		return err
	}
	userKey, err := emu.EnsureKey(filepath.Join(dir, emu.UserKeyFile))
	if err != nil {
		return err
	}
	flavor, err := labFlavor(st.Flavor)
	if err != nil {
		return err
	}
	topo := st.topology()
	tmp := filepath.Join(dir, "run")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	var cpu *CPUGroup
	if st.DUTCPU > 0 {
		if cpu, err = NewCPUGroup(topo.Namespace("dut"), st.DUTCPU); err != nil {
			return err
		}
		defer func() {
			if err := cpu.Remove(); err != nil {
				logger.Error("remove the services' cgroup", "err", err)
			}
		}()
		logger.Info("dut cpu budget", "cgroup", cpu.Name, "cores", cpu.Cores)
	}
	em := &emu.Emulator{
		Root:           filepath.Join(dir, "root"),
		Flavor:         flavor,
		DataPlane:      &LinuxDataPlane{Topo: topo, TmpDir: tmp, CPU: cpu},
		CPU:            cpu.budget(),
		Ports:          topo.Ports(),
		Profiles:       profiles,
		HostKey:        hostKey,
		AuthorizedKeys: []ssh.PublicKey{userKey.PublicKey()},
		PasswordFile:   filepath.Join(dir, emu.PasswordFile),
		Logger:         logger,
		RebootDelay:    5 * time.Second,
		// A real pfSense starts its packages seconds to minutes after
		// SSH answers (pfSense-upgrade's boot stages first).
		PackageStartDelay: 3 * time.Second,
		SSHVia:            "lan", // the management interface, as on a factory box (management.go)
		IDS:               &IDSEngines{Netns: topo.Namespace("dut"), Dir: filepath.Join(dir, "ids"), Rules: st.IDSRules, Logger: logger, CPU: cpu},
		Links:             map[string]emu.LinkSpec{},
	}
	for name, veth := range topo.DUTVeths() {
		if l, ok := st.Links[name]; ok {
			em.Links[veth] = l
		}
	}
	if err := em.Init(); err != nil {
		return err
	}
	em.IPsec = &StrongSwan{Topo: topo, Dir: filepath.Join(dir, "ipsec"), FirewallRoot: filepath.Join(dir, "root"), CPU: cpu}
	defer em.Shutdown(context.WithoutCancel(ctx))
	if err := em.Boot(ctx); err != nil {
		return err
	}
	var stmu sync.Mutex
	record := func(what string, field *string, a net.Addr) {
		stmu.Lock()
		defer stmu.Unlock()
		*field = a.String()
		data, _ := json.MarshalIndent(st, "", "  ")
		if err := atomicfile.WriteFile(filepath.Join(dir, stateFile), data, 0o644); err != nil {
			logger.Error("record "+what+" address", "err", err)
		}
		logger.Info(what+" listening", "addr", a.String())
	}
	orDefault := func(addr string) string {
		if addr == "" {
			return "127.0.0.1:0"
		}
		return addr
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	apiDone := make(chan error, 1)
	if flavor == configxml.OPNsense {
		cert, err := emu.EnsureAPICert(dir)
		if err != nil {
			return err
		}
		creds, err := emu.EnsureAPICredentials(dir)
		if err != nil {
			return err
		}
		go func() {
			err := em.ServeAPI(ctx, orDefault(st.APIAddr), cert, creds, func(a net.Addr) { record("api", &st.APIAddr, a) })
			if err != nil {
				logger.Error("api", "err", err)
			}
			cancel() // without its API the firewall is of no use: stop
			apiDone <- err
		}()
	} else {
		apiDone <- nil
	}
	go em.WatchFaults(ctx, dir)
	err = em.Serve(ctx, orDefault(st.SSHAddr), func(a net.Addr) { record("ssh", &st.SSHAddr, a) })
	cancel()
	return errors.Join(err, <-apiDone)
}
