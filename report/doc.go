// Package report turns a sweep's samples into A/B statistics, tables and
// charts, and compares runs for regressions. It reads the results database
// and never talks to a firewall.
//
// The statistics are golang.org/x/perf/benchmath's, computed in stats.go
// only: per point the median with its distribution-free confidence interval;
// against the baseline the change of the median in percent, a conservative
// interval for it, the Mann-Whitney U test's p and "~" where no difference
// is shown, as benchstat reports them ("n/a (n < 6)" where the median's
// interval does not exist); and a Student's t view (mean, its
// interval, Welch's t-test) for readers used to ministat.
//
// Load reads a run; NewTable gives the seeds' table (one row per point:
// upload and download Mbit/s, change against the baseline, retransmits, DUT
// CPU, temperature, power); NewPivot the "% gained / lost" table by one
// knob; Write renders md, csv, json (stable field names), benchstat (Go
// benchmark lines that benchstat itself reads) or one self-contained HTML
// file with inline SVG charts drawn by gonum/plot.
//
// NewEffects says what the knobs cost as far as the design supports it,
// never crediting a knob with a change it did not make alone: in a full
// factorial the main effect of each axis value (every other axis is
// balanced); otherwise the steps between points that differ in the fewest
// knobs, a ladder from the baseline, each labelled with everything it
// changed (in the T730 matrix checksum offload goes off only together with
// inline IPS, so no effect is ever given to it alone). Wider names the
// points whose intervals are still wider than adaptive repeats' target.
//
// CompareRuns is the firmware-regression gate: it matches the points of two
// runs by their knob values and flags a regression where the test shows a
// change beyond a threshold in the bad direction.
//
// Many comparisons, one gate: the p-values of every (point, probe, metric)
// the gate judges are one family, adjusted by Benjamini–Hochberg
// (AdjustBH); a regression needs the adjusted p below α = 0.05 and the
// threshold. When nothing changed the chance that a run fails somewhere
// stays at most α however many points it has; when a slowdown touches many
// points, each keeps nearly the power it has alone. Holm's adjustment would
// be stricter and cannot work at the usual repeats: the exact U test's
// smallest p at 6 against 6 is 2/924 ≈ 0.0022, above Holm's first threshold
// α/m for m > 23. A run's table is a family too (every point and probe
// against the baseline), and so is a pivot table. Raw and adjusted p are
// both reported.
//
// How many repeats the gate needs: with n samples per side the U test
// cannot reach p < 0.05 below n = 4, so at 3 repeats it never fails;
// Welch's t-test (TTest) can. After the adjustment a change at one point
// alone can be flagged only when the smallest p times the family's size is
// below α (RepeatsForFamily: 6 repeats for 8 comparisons, 7 for 60, 8 for
// 200); compare warns and names the repeats when it cannot. Each gated row
// states its detectable change (DetectableChange): the smallest change the
// gate flags at that point alone with 80 % power at the samples' noise.
// Measured on synthetic runs (validation_test.go, BENCHMARKS.md "The
// regression gate on synthetic runs"): at 6 repeats an A/A pair fails the
// gate in at most 1 % of runs at 8, 60 and 200 comparisons; a 10 %
// slowdown of every point at ±3 % noise is flagged at every point.
package report
