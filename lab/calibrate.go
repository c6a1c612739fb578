package lab

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// An appliance profile's CPU budget is calibrated, not guessed: at `lab up`
// the lab runs 7-Zip's own benchmark on one thread of this machine, and
// sets the firewall services' budget to the appliance's single-thread
// speed relative to that, read from 7-Zip ratings published for the
// appliance's CPU core (CPURef). 7-Zip is the one CPU benchmark that a
// Debian package runs here and that has public per-core figures for the
// appliances' cores; its LZMA coder is integer and branch work on a
// cache-sized working set, nearer to packet inspection than a prime loop
// or a cipher with hardware help.
//
// The rating compared is decompression's (Column), for the references
// and this machine alike: it hardly depends on the dictionary size, so
// one pass at one size stands for the runs the references made over
// several. Three runs' decompression ratings varied 6 % here against 13 %
// for the total; their R/U, which is compared, 1.2 % at rest
// (`fwab lab calibrate --runs 3`, BENCHMARKS.md).

// SevenZipCommand is the benchmark the lab runs: one pass, one thread, a
// 4 MiB dictionary (8–10 s on this project's machines).
var SevenZipCommand = []string{"7zz", "b", "1", "-mmt1", "-md22"}

// SevenZip is one run of 7-Zip's benchmark.
type SevenZip struct {
	Version    string  `json:"version"`    // 7-Zip's own version line's number, e.g. 26.02
	Decompress float64 `json:"decompress"` // the Avr line's decompression R/U, MIPS
	Total      float64 `json:"total"`      // the Tot line's R/U, MIPS
}

// Rating is the rating a column names (CPURef.Column).
func (s SevenZip) Rating(column string) float64 {
	if column == RatingTotal {
		return s.Total
	}
	return s.Decompress
}

// The 7-Zip rating columns a reference may give.
const (
	RatingDecompress = "decompression"
	RatingTotal      = "total"
)

var (
	sevenZipVersionRE = regexp.MustCompile(`(?m)^7-Zip(?: \(\w+\))?(?: \[\d+\])? (\d+\.\d+)`)
	sevenZipAvrRE     = regexp.MustCompile(`(?m)^Avr:.*\|.*?(\d+)[ \t]+\d+[ \t]*$`)
	sevenZipTotRE     = regexp.MustCompile(`(?m)^Tot:.*?(\d+)[ \t]+\d+[ \t]*$`)
)

// ParseSevenZip reads the output of `7zz b`: its version, and the R/U
// (rating per usage: the speed of a thread while it ran, which 7-Zip
// prints before each rating) of the Avr line's decompression half and of
// the Tot line. R/U, not the rating, so that other work on this machine
// during the run lowers the thread's usage, not its figure; the
// references are R/U figures too.
func ParseSevenZip(out string) (SevenZip, error) {
	var s SevenZip
	if m := sevenZipVersionRE.FindStringSubmatch(out); m != nil {
		s.Version = m[1]
	}
	avr, tot := sevenZipAvrRE.FindStringSubmatch(out), sevenZipTotRE.FindStringSubmatch(out)
	if avr == nil || tot == nil {
		return s, fmt.Errorf("7-Zip benchmark: no Avr: and Tot: lines in its output (%q)", lastLine(out))
	}
	s.Decompress, _ = strconv.ParseFloat(avr[1], 64)
	s.Total, _ = strconv.ParseFloat(tot[1], 64)
	if s.Decompress <= 0 || s.Total <= 0 {
		return s, fmt.Errorf("7-Zip benchmark: a rating of 0 MIPS (%q)", lastLine(out))
	}
	return s, nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// RunSevenZip runs SevenZipCommand on this machine.
func RunSevenZip(ctx context.Context) (SevenZip, error) {
	if _, err := exec.LookPath(SevenZipCommand[0]); err != nil {
		return SevenZip{}, fmt.Errorf("the CPU calibration needs 7-Zip's %s: install with: apt-get install -y 7zip (or run scripts/setup.sh), or give the budget yourself with --dut-cpu CORES", SevenZipCommand[0])
	}
	out, err := run(ctx, nil, SevenZipCommand[0], SevenZipCommand[1:]...)
	if err != nil {
		return SevenZip{}, fmt.Errorf("7-Zip benchmark: %w", err)
	}
	return ParseSevenZip(out)
}

// CPURef is an appliance's CPU as the profile models it: its cores, and
// one core's 7-Zip rating, scaled by clock from a published run on a CPU
// of the same core.
type CPURef struct {
	Model  string  `json:"model"`  // the appliance's CPU
	Cores  int     `json:"cores"`  // its cores
	MHz    float64 `json:"mhz"`    // the clock its cores run at under load
	Column string  `json:"column"` // the rating compared: RatingDecompress or RatingTotal
	// PerMHz is the published rating per MHz of a core of that kind
	// (the rating ÷ the clock the publisher's run measured).
	PerMHz float64 `json:"mips_per_mhz"`
	Source string  `json:"source"` // the published run: CPU, figure, address
}

// MIPS is one appliance core's rating.
func (r CPURef) MIPS() float64 { return r.PerMHz * r.MHz }

// CPUCalibration is a lab's CPU budget as calibrated at `lab up`.
type CPUCalibration struct {
	Appliance CPURef   `json:"appliance"`
	Machine   SevenZip `json:"machine"` // this machine's run
	// Ratio is one appliance core's speed over one of this machine's.
	Ratio float64 `json:"ratio"`
	// Threads are the appliance cores the budget stands for (Budget).
	Threads int `json:"threads"`
	// Budget is the services' CPU budget in this machine's cores:
	// Threads × Ratio, within MinCPUBudget and the machine's cores.
	Budget float64 `json:"budget"`
}

// EngineThreads is how many threads the lab's inspection engine
// inspects a mode's traffic on: one NFQUEUE consumer (inline) or one
// capture reader per interface (IDS), so a profile's budget stands for
// that many of the appliance's cores, not all of them. A single-flow probe
// reaches one RSS queue, and so one Suricata worker, on the appliance too;
// budgeting all four cores would let the lab's one thread run at this
// machine's full speed.
const EngineThreads = 1

// Calibrate computes the budget for ref on a machine of ncpu cores whose
// benchmark gave machine.
func Calibrate(ref CPURef, machine SevenZip, ncpu int) (CPUCalibration, error) {
	have := machine.Rating(ref.Column)
	if have <= 0 || ref.MIPS() <= 0 {
		return CPUCalibration{}, fmt.Errorf("CPU calibration for %s: no %s rating (machine %g MIPS, appliance %g MIPS)", ref.Model, ref.Column, have, ref.MIPS())
	}
	c := CPUCalibration{Appliance: ref, Machine: machine, Ratio: ref.MIPS() / have, Threads: min(ref.Cores, EngineThreads)}
	budget := float64(c.Threads) * c.Ratio
	budget = math.Round(budget*100) / 100
	c.Budget = math.Min(math.Max(budget, MinCPUBudget), float64(ncpu))
	return c, nil
}

// String is the calibration in one line, for `lab status` and reports.
func (c CPUCalibration) String() string {
	return fmt.Sprintf("%d × %s at %g MHz ≈ %.0f MIPS a core (7-Zip %s rating: %s) ÷ this machine's %.0f (7-Zip %s, `%s`) = %.2f; budget %g cores for the engine's %d thread",
		c.Appliance.Cores, c.Appliance.Model, c.Appliance.MHz, c.Appliance.MIPS(), c.Appliance.Column, c.Appliance.Source,
		c.Machine.Rating(c.Appliance.Column), c.Machine.Version, strings.Join(SevenZipCommand, " "), c.Ratio, c.Budget, c.Threads)
}
