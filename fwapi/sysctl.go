package fwapi

import (
	"fmt"
	"strconv"
	"strings"
)

// CPUTimes is one kern.cp_times sample: per CPU, the ticks spent in user,
// nice, system, interrupt and idle.
type CPUTimes [][5]uint64

// ParseCPUTimes reads `sysctl -n kern.cp_times`.
func ParseCPUTimes(out string) (CPUTimes, error) {
	f := strings.Fields(out)
	if len(f) == 0 || len(f)%5 != 0 {
		return nil, fmt.Errorf("kern.cp_times: %d numbers, want a positive multiple of 5", len(f))
	}
	t := make(CPUTimes, len(f)/5)
	for i, s := range f {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("kern.cp_times: %q is not a tick count", s)
		}
		t[i/5][i%5] = n
	}
	return t, nil
}

// CPUBusy returns the busy percentage per CPU and overall between two
// samples. A CPU whose counters did not move counts as idle.
func CPUBusy(before, after CPUTimes) (perCPU []float64, total float64, err error) {
	if len(before) != len(after) {
		return nil, 0, fmt.Errorf("kern.cp_times: %d CPUs then %d", len(before), len(after))
	}
	var busyAll, allAll uint64
	perCPU = make([]float64, len(after))
	for i := range after {
		var all, busy uint64
		for j := 0; j < 5; j++ {
			if after[i][j] < before[i][j] {
				return nil, 0, fmt.Errorf("kern.cp_times: CPU %d counter %d went backwards", i, j)
			}
			d := after[i][j] - before[i][j]
			all += d
			if j != 4 {
				busy += d
			}
		}
		if all > 0 {
			perCPU[i] = 100 * float64(busy) / float64(all)
		}
		busyAll += busy
		allAll += all
	}
	if allAll > 0 {
		total = 100 * float64(busyAll) / float64(allAll)
	}
	return perCPU, total, nil
}

// ParseTemperature reads dev.cpu.N.temperature ("47.0C").
func ParseTemperature(out string) (float64, error) {
	s := strings.TrimSuffix(strings.TrimSpace(out), "C")
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("temperature %q: want a value such as 47.0C", strings.TrimSpace(out))
	}
	return v, nil
}

// ParseSysctlValues reads `sysctl -n A B C` output: one value a line, in
// the order asked.
func ParseSysctlValues(out string, names ...string) (map[string]string, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(names) {
		return nil, fmt.Errorf("sysctl: %d values for %d names (%s)", len(lines), len(names), strings.Join(names, " "))
	}
	m := make(map[string]string, len(names))
	for i, n := range names {
		m[n] = strings.TrimSpace(lines[i])
	}
	return m, nil
}
