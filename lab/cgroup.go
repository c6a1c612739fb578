package lab

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
)

// MinCPUBudget is the smallest CPU budget the lab gives the DUT's services,
// in cores.
const MinCPUBudget = 0.1

// cfsPeriodUS is the CFS period of the budget's quota (the kernel's default).
const cfsPeriodUS = 100000

// CheckCPUBudget checks a budget in cores: 0 is none, else from
// MinCPUBudget to this machine's cores.
func CheckCPUBudget(cores float64) error {
	return checkCPUBudget(cores, runtime.NumCPU())
}

func checkCPUBudget(cores float64, ncpu int) error {
	if cores == 0 {
		return nil
	}
	if math.IsNaN(cores) || cores < MinCPUBudget || cores > float64(ncpu) {
		return fmt.Errorf("dut cpu budget %g cores: want %g to %d (this machine's cores), or 0 for none", cores, MinCPUBudget, ncpu)
	}
	return nil
}

// cgroupMounts are the cgroup hierarchies that can hold a CPU budget: the
// cgroup v2 mount when its root offers the cpu controller, else cgroup v1's
// cpu and cpuacct hierarchies (one mount or two).
type cgroupMounts struct {
	v2        string // cgroup2 mount point with the cpu controller; "" if none
	v1CPU     string // v1 hierarchy with the cpu controller (cpu.cfs_quota_us)
	v1CPUAcct string // v1 hierarchy with cpuacct (cpuacct.usage)
}

// findCgroupMounts reads /proc/self/mountinfo. readFile reads a cgroup2
// root's cgroup.controllers (the cgroup2 mount may exist without the cpu
// controller, which v1 then holds: this project's machines).
func findCgroupMounts(mountinfo []byte, readFile func(string) ([]byte, error)) cgroupMounts {
	var m cgroupMounts
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 {
			continue
		}
		point := unescapeMount(f[4])
		switch g[0] {
		case "cgroup2":
			if b, err := readFile(filepath.Join(point, "cgroup.controllers")); err == nil && m.v2 == "" &&
				hasWord(strings.Fields(string(b)), "cpu") {
				m.v2 = point
			}
		case "cgroup":
			opts := strings.Split(g[2], ",")
			if hasWord(opts, "cpu") && m.v1CPU == "" {
				m.v1CPU = point
			}
			if hasWord(opts, "cpuacct") && m.v1CPUAcct == "" {
				m.v1CPUAcct = point
			}
		}
	}
	return m
}

func hasWord(words []string, w string) bool {
	for _, x := range words {
		if x == w {
			return true
		}
	}
	return false
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// check says what is missing for a budget, or nil.
func (m cgroupMounts) check() error {
	switch {
	case m.v2 != "":
		return nil
	case m.v1CPU != "" && m.v1CPUAcct != "":
		return nil
	case m.v1CPU != "":
		return errors.New("dut cpu budget: cgroup v1 has the cpu controller but no cpuacct hierarchy (cpuacct.usage, for the DUT's CPU metric); mount one (mount -t cgroup -o cpuacct cgroup /sys/fs/cgroup/cpuacct) or run without a budget (--profile unlimited)")
	}
	return errors.New("dut cpu budget: this machine has no cgroup cpu controller: neither cgroup v2's cpu.max (a cgroup2 mount whose cgroup.controllers lists cpu) nor cgroup v1's cpu.cfs_quota_us (a cgroup mount with the cpu option); mount one (mount -t cgroup -o cpu,cpuacct cgroup /sys/fs/cgroup/cpu) or run without a budget (--profile unlimited)")
}

// mountinfoPath is where systemCgroupMounts reads the mounts (tests point
// it at a machine without cgroups).
var mountinfoPath = "/proc/self/mountinfo"

// systemCgroupMounts reads this machine's cgroup mounts.
func systemCgroupMounts() (cgroupMounts, error) {
	b, err := os.ReadFile(mountinfoPath)
	if err != nil {
		return cgroupMounts{}, fmt.Errorf("dut cpu budget: %w", err)
	}
	return findCgroupMounts(b, os.ReadFile), nil
}

// CheckCPUControllers reports whether this machine can hold a CPU budget,
// naming what is missing when it cannot.
func CheckCPUControllers() error {
	m, err := systemCgroupMounts()
	if err != nil {
		return err
	}
	return m.check()
}

// CPUGroup is the cgroup the DUT's userspace services run in (the
// inspection engine, charon, the blocklist loader), with a CPU quota of
// Cores: as packages on a small appliance share a few cores. Kernel
// forwarding (softirq) is not in it. On cgroup v2 it is one directory with
// cpu.max; on v1 a directory in the cpu hierarchy (cpu.cfs_quota_us over
// cpu.cfs_period_us) and one in cpuacct (cpuacct.usage). No cpuset: pinning
// the services to given cores of a small shared machine would put them on
// one endpoint's core; the quota alone is a core's worth of time.
type CPUGroup struct {
	Name  string
	Cores float64
	dirs  []string // the group's directories: v2's, or v1 cpu's and cpuacct's
	v2    bool

	mu       sync.Mutex
	created  time.Time
	lastIdle uint64 // ns; kern.cp_times' idle must not go back
}

// NewCPUGroup makes (or takes over) the cgroup name with a quota of cores.
func NewCPUGroup(name string, cores float64) (*CPUGroup, error) {
	if err := CheckCPUBudget(cores); err != nil {
		return nil, err
	}
	m, err := systemCgroupMounts()
	if err != nil {
		return nil, err
	}
	return newCPUGroup(m, name, cores)
}

func newCPUGroup(m cgroupMounts, name string, cores float64) (*CPUGroup, error) {
	if err := m.check(); err != nil {
		return nil, err
	}
	if name == "" || strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
		return nil, fmt.Errorf("cgroup name %q: want one path element", name)
	}
	g := &CPUGroup{Name: name, Cores: cores, created: time.Now()}
	quota := strconv.Itoa(int(math.Round(cores * cfsPeriodUS)))
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			return fmt.Errorf("dut cpu budget: %w", err)
		}
		return nil
	}
	if m.v2 != "" {
		// The root must hand the cpu controller to its children.
		if err := write(m.v2, "cgroup.subtree_control", "+cpu"); err != nil {
			return nil, err
		}
		g.v2, g.dirs = true, []string{filepath.Join(m.v2, name)}
	} else {
		g.dirs = []string{filepath.Join(m.v1CPU, name)}
		if m.v1CPUAcct != m.v1CPU {
			g.dirs = append(g.dirs, filepath.Join(m.v1CPUAcct, name))
		}
	}
	for _, d := range g.dirs {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("dut cpu budget: %w", err)
		}
	}
	var err error
	if g.v2 {
		err = write(g.dirs[0], "cpu.max", quota+" "+strconv.Itoa(cfsPeriodUS))
	} else if err = write(g.dirs[0], "cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS)); err == nil {
		err = write(g.dirs[0], "cpu.cfs_quota_us", quota)
	}
	if err != nil {
		_ = g.Remove()
		return nil, err
	}
	return g, nil
}

// Wrap returns a command line (argv) that runs argv inside the group: a
// shell joins the group, then execs the command, so the command's first
// instruction already runs under the quota (and keeps the shell's pid).
// A nil group returns argv unchanged.
func (g *CPUGroup) Wrap(argv ...string) []string {
	if g == nil {
		return argv
	}
	var script strings.Builder
	for _, d := range g.dirs {
		fmt.Fprintf(&script, "echo $$ > %s && ", fwapi.ShellQuote(filepath.Join(d, "cgroup.procs")))
	}
	script.WriteString(`exec "$@"`)
	return append([]string{"/bin/sh", "-c", script.String(), "fwab-cgroup"}, argv...)
}

// UsageNS is the CPU time the group's processes used, in nanoseconds:
// cpuacct.usage on v1, cpu.stat's usage_usec on v2.
func (g *CPUGroup) UsageNS() (uint64, error) {
	if g.v2 {
		b, err := os.ReadFile(filepath.Join(g.dirs[0], "cpu.stat"))
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				return us * 1000, err
			}
		}
		return 0, fmt.Errorf("%s: no usage_usec", filepath.Join(g.dirs[0], "cpu.stat"))
	}
	b, err := os.ReadFile(filepath.Join(g.dirs[len(g.dirs)-1], "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

// hz is the tick rate of the kern.cp_times the group reports.
const hz = 100

// CPUs is how many CPUs the emulated firewall shows with this budget: the
// budget rounded up.
func (g *CPUGroup) CPUs() int { return max(1, int(math.Ceil(g.Cores-1e-9))) }

// CPTimes is kern.cp_times for a firewall whose CPU is the budget: CPUs()
// CPUs sharing Cores×(time since the group was made) between the group's
// usage (user) and idle, in ticks of 1/hz s. Busy is then the group's usage
// against its budget, not the machine's load. Idle never goes back (the
// quota lets a period's usage run slightly over before it throttles).
func (g *CPUGroup) CPTimes(now time.Time) (string, error) {
	used, err := g.UsageNS()
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	budget := uint64(g.Cores * float64(now.Sub(g.created).Nanoseconds()))
	idle := g.lastIdle
	if budget > used && budget-used > idle {
		idle = budget - used
	}
	g.lastIdle = idle
	g.mu.Unlock()
	n := uint64(g.CPUs())
	tick := uint64(time.Second / hz)
	var vals []string
	for range n {
		vals = append(vals, strconv.FormatUint(used/n/tick, 10), "0", "0", "0", strconv.FormatUint(idle/n/tick, 10))
	}
	return strings.Join(vals, " "), nil
}

// Remove moves any process still in the group to its parent and removes
// the group's directories. A group already gone is not an error.
func (g *CPUGroup) Remove() error {
	var errs []error
	for _, d := range g.dirs {
		if err := removeCgroupDir(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isCgroupFS reports whether d is on a cgroup (v1 or v2) file system.
func isCgroupFS(d string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(d, &st); err != nil {
		return false
	}
	const cgroupMagic, cgroup2Magic = 0x27e0eb, 0x63677270
	return st.Type == cgroupMagic || st.Type == cgroup2Magic
}

func removeCgroupDir(d string) error {
	b, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(d); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
	}
	for _, pid := range strings.Fields(string(b)) {
		_ = os.WriteFile(filepath.Join(filepath.Dir(d), "cgroup.procs"), []byte(pid), 0o644)
	}
	// A cgroup directory holds only the kernel's files: rmdir removes it
	// with them; a plain directory (tests) needs its files removed first.
	if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
		if ents, rerr := os.ReadDir(d); rerr == nil && !isCgroupFS(d) {
			for _, e := range ents {
				_ = os.Remove(filepath.Join(d, e.Name()))
			}
			return os.Remove(d)
		}
		return fmt.Errorf("remove cgroup %s: %w", d, err)
	}
	return nil
}

// RemoveCPUGroup removes the cgroup name from every cpu hierarchy this
// machine has (lab down, after a daemon that could not clean up). A machine
// without cgroups, or without the group, is not an error.
func RemoveCPUGroup(name string) error {
	if name == "" || strings.ContainsAny(name, "/\x00") {
		return nil
	}
	m, err := systemCgroupMounts()
	if err != nil {
		return nil
	}
	var errs []error
	for _, root := range []string{m.v2, m.v1CPU, m.v1CPUAcct} {
		if root != "" {
			if err := removeCgroupDir(filepath.Join(root, name)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// budget is g as the emulator's CPU budget: none for a nil group (an
// interface holding a nil *CPUGroup would not be nil, and the emulator
// would read it).
func (g *CPUGroup) budget() emu.CPUBudget {
	if g == nil {
		return nil
	}
	return g
}
