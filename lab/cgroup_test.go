package lab

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// fakeCgroups makes plain directories standing in for cgroup hierarchies and
// the mountinfo lines that name them.
func fakeCgroups(t *testing.T, v2Controllers string, v1 ...string) ([]byte, string) {
	t.Helper()
	root := t.TempDir()
	var mi strings.Builder
	mi.WriteString("22 1 0:21 / /proc rw,nosuid - proc proc rw\n")
	if v2Controllers != "-" {
		d := filepath.Join(root, "unified")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.controllers"), []byte(v2Controllers+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mi.WriteString("30 25 0:26 / " + d + " rw,relatime - cgroup2 cgroup2 rw\n")
	}
	for i, opts := range v1 {
		d := filepath.Join(root, strings.ReplaceAll(opts, ",", "+"))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		mi.WriteString("3" + string(rune('1'+i)) + " 25 0:27 / " + d + " rw,relatime - cgroup cgroup rw," + opts + "\n")
	}
	return []byte(mi.String()), root
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestCPUGroupV1(t *testing.T) {
	mi, root := fakeCgroups(t, "hugetlb", "cpu", "cpuacct", "cpuset")
	m := findCgroupMounts(mi, os.ReadFile)
	if m.v2 != "" || m.v1CPU != filepath.Join(root, "cpu") || m.v1CPUAcct != filepath.Join(root, "cpuacct") {
		t.Fatalf("findCgroupMounts = %+v, want v1 cpu and cpuacct, no v2 (its root lacks cpu)", m)
	}
	g, err := newCPUGroup(m, "fwt1-dut", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	cpu, acct := filepath.Join(root, "cpu", "fwt1-dut"), filepath.Join(root, "cpuacct", "fwt1-dut")
	if q, p := readTrim(t, filepath.Join(cpu, "cpu.cfs_quota_us")), readTrim(t, filepath.Join(cpu, "cpu.cfs_period_us")); q != "50000" || p != "100000" {
		t.Errorf("cfs quota/period = %s/%s, want 50000/100000 (half a core)", q, p)
	}
	argv := g.Wrap("nft", "-f", "x")
	want := []string{"/bin/sh", "-c", "echo $$ > " + fwapi.ShellQuote(cpu+"/cgroup.procs") + " && echo $$ > " + fwapi.ShellQuote(acct+"/cgroup.procs") + " && exec \"$@\"", "fwab-cgroup", "nft", "-f", "x"}
	if strings.Join(argv, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("Wrap = %q, want %q", argv, want)
	}
	// One second after the group was made, the services used 0.25 s of a
	// half-core budget: busy half the budget.
	if err := os.WriteFile(filepath.Join(acct, "cpuacct.usage"), []byte("250000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := g.CPTimes(g.created.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if want := "25 0 0 0 25"; got != want {
		t.Errorf("CPTimes = %q, want %q (1 CPU, 25 ticks used, 25 idle)", got, want)
	}
	// Usage over the budget for a moment: idle stays where it was.
	if err := os.WriteFile(filepath.Join(acct, "cpuacct.usage"), []byte("900000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := g.CPTimes(g.created.Add(1500 * time.Millisecond)); got != "90 0 0 0 25" {
		t.Errorf("CPTimes over budget = %q, want idle kept at 25", got)
	}
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{cpu, acct} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s still there after Remove (%v)", d, err)
		}
	}
	if err := g.Remove(); err != nil {
		t.Errorf("second Remove: %v, want nil (already gone)", err)
	}
}

func TestCPUGroupV1CoMounted(t *testing.T) {
	mi, root := fakeCgroups(t, "-", "cpu,cpuacct")
	g, err := newCPUGroup(findCgroupMounts(mi, os.ReadFile), "fwt2-dut", 1.5)
	if err != nil {
		t.Fatal(err)
	}
	if len(g.dirs) != 1 || g.CPUs() != 2 {
		t.Errorf("co-mounted cpu,cpuacct: dirs %v, CPUs %d; want one directory and 2 CPUs for 1.5 cores", g.dirs, g.CPUs())
	}
	if q := readTrim(t, filepath.Join(root, "cpu+cpuacct", "fwt2-dut", "cpu.cfs_quota_us")); q != "150000" {
		t.Errorf("quota %s, want 150000", q)
	}
}

func TestCPUGroupV2(t *testing.T) {
	mi, root := fakeCgroups(t, "cpuset cpu io memory pids", "cpu", "cpuacct")
	m := findCgroupMounts(mi, os.ReadFile)
	g, err := newCPUGroup(m, "fwt3-dut", 1)
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(root, "unified", "fwt3-dut")
	if got := readTrim(t, filepath.Join(d, "cpu.max")); got != "100000 100000" {
		t.Errorf("cpu.max = %q, want \"100000 100000\" (v2 preferred where it has cpu)", got)
	}
	if got := readTrim(t, filepath.Join(root, "unified", "cgroup.subtree_control")); got != "+cpu" {
		t.Errorf("subtree_control = %q, want +cpu", got)
	}
	if err := os.WriteFile(filepath.Join(d, "cpu.stat"), []byte("usage_usec 1500000\nuser_usec 1000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ns, err := g.UsageNS(); err != nil || ns != 1500000000 {
		t.Errorf("UsageNS = %d, %v; want 1.5 s", ns, err)
	}
}

func TestCPUGroupMissingControllers(t *testing.T) {
	for _, tt := range []struct {
		name string
		v2   string
		v1   []string
		want string
	}{
		{"nothing", "-", nil, "neither cgroup v2's cpu.max (a cgroup2 mount whose cgroup.controllers lists cpu) nor cgroup v1's cpu.cfs_quota_us"},
		{"v2 without cpu", "memory pids", []string{"memory"}, "no cgroup cpu controller"},
		{"v1 cpu without cpuacct", "-", []string{"cpu"}, "no cpuacct hierarchy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mi, _ := fakeCgroups(t, tt.v2, tt.v1...)
			_, err := newCPUGroup(findCgroupMounts(mi, os.ReadFile), "fwt4-dut", 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--profile unlimited") {
				t.Errorf("newCPUGroup error = %v, want it to say %q and how to run without a budget", err, tt.want)
			}
		})
	}
}

func TestCheckCPUBudget(t *testing.T) {
	for _, c := range []float64{0, 0.1, 1, 2} {
		if err := checkCPUBudget(c, 2); err != nil {
			t.Errorf("checkCPUBudget(%v, 2 cores) = %v, want nil", c, err)
		}
	}
	for _, c := range []float64{0.05, -1, 2.5, 64} {
		err := checkCPUBudget(c, 2)
		if err == nil || !strings.Contains(err.Error(), "want 0.1 to 2 (this machine's cores)") {
			t.Errorf("checkCPUBudget(%v, 2 cores) = %v, want the range named", c, err)
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	if got := unescapeMount(`/sys/fs/cgroup/a\040b`); got != "/sys/fs/cgroup/a b" {
		t.Errorf("unescapeMount = %q", got)
	}
}

// TestCloseInheritedOnExec: a descriptor fwab inherited without
// close-on-exec (a flock lock, say) is not passed on to the lab daemon.
func TestCloseInheritedOnExec(t *testing.T) {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(p[0])
	defer syscall.Close(p[1])
	flags := func(fd int) int {
		r, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno != 0 {
			t.Fatal(errno)
		}
		return int(r)
	}
	if flags(p[0])&syscall.FD_CLOEXEC != 0 {
		t.Fatal("syscall.Pipe gave a close-on-exec descriptor: the test cannot show anything")
	}
	closeInheritedOnExec()
	for _, fd := range p {
		if flags(fd)&syscall.FD_CLOEXEC == 0 {
			t.Errorf("fd %d is not close-on-exec", fd)
		}
	}
}

// TestNoCPUGroupIsNoBudget: a lab without a DUT CPU budget (the default)
// has no cgroup, and its firewall reports this machine's CPUs.
func TestNoCPUGroupIsNoBudget(t *testing.T) {
	var none *CPUGroup
	f := labtest.Start(t, labtest.Options{Configure: func(e *emu.Emulator) { e.CPU = none.budget() }})
	if out, errOut, code := f.Run(t, "sysctl -n hw.ncpu", ""); code != 0 || strings.TrimSpace(out) != strconv.Itoa(runtime.NumCPU()) {
		t.Errorf("sysctl -n hw.ncpu without a budget = %q (exit %d, %s), want %d", out, code, errOut, runtime.NumCPU())
	}
}
