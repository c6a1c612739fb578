// Package report turns a sweep's samples into A/B statistics, tables and
// charts, and compares runs for regressions. It reads the results database
// and never talks to a firewall.
//
// The statistics are golang.org/x/perf/benchmath's, computed in stats.go
// only: per point the median with its distribution-free confidence interval;
// against the baseline the change of the median in percent, a conservative
// interval for it, the Mann-Whitney U test's p and "~" where no difference
// is shown, as benchstat reports them; and a Student's t view (mean, its
// interval, Welch's t-test) for readers used to ministat.
//
// Load reads a run; NewTable gives the seeds' table (one row per point:
// upload and download Mbit/s, change against the baseline, retransmits, DUT
// CPU, temperature, power); NewPivot the "% gained / lost" table by one
// knob; Write renders md, csv, json (stable field names), benchstat (Go
// benchmark lines that benchstat itself reads) or one self-contained HTML
// file with inline SVG charts drawn by gonum/plot.
//
// CompareRuns is the firmware-regression gate: it matches the points of two
// runs by their knob values and flags a regression where the test shows a
// change beyond a threshold in the bad direction.
//
// How many repeats the gate needs: with n samples per side the U test
// cannot reach p < 0.05 below n = 4, so at 3 repeats it never fails;
// Welch's t-test (TTest) can. Measured on synthetic runs shaped like the
// T730 review (8 comparisons a run, 3 % threshold, see validation_test.go):
// a 10 % slowdown is flagged at every point in every trial at 5 repeats with
// ±3 % noise; a 3 % slowdown, sitting on the threshold, in at most about
// half the comparisons; an A/A pair fails the gate in about 1 run of 20 at 5
// repeats (α is per comparison).
package report
