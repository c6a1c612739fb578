package report

import (
	"fmt"
	"math"
	"strings"
)

// Metric is a figure a report shows and two runs are compared on. Which way
// is better, its unit and how its change is told are properties of the
// metric (metricInfo), so that every metric goes through the same tables,
// intervals, deltas and gate.
type Metric string

// Metrics.
const (
	Throughput  Metric = "throughput"  // Mbit/s received
	Retransmits Metric = "retransmits" // TCP retransmits per probe
	DUTCPU      Metric = "dut-cpu"     // the DUT's CPU %
	PPS         Metric = "pps"         // UDP datagrams received per second
	Loss        Metric = "loss"        // UDP datagrams lost, % of those sent
	Jitter      Metric = "jitter"      // UDP jitter, ms (RFC 1889, as iperf3 computes it)
	Latency     Metric = "latency"     // ping round trip under load, ms (flent's "latency under load")
	PingLoss    Metric = "ping-loss"   // pings lost under load, %
	// WattsPerGbps is the DUT's power draw per Gbit/s of the probe's
	// throughput, where a power meter is read.
	WattsPerGbps Metric = "watts-per-gbps"
	// ConnectRate is a connect probe's new TCP connections a second;
	// ConnectTime their median handshake time.
	ConnectRate Metric = "connect-rate"
	ConnectTime Metric = "connect-ms"
	// HTTPRate is an http probe's transactions a second (RFC 9411's
	// 7.4), TTLB and TTLBP99 the median and 99th percentile of its time
	// to the last byte, ms (7.6).
	HTTPRate Metric = "http-rate"
	TTLB     Metric = "ttlb-ms"
	TTLBP99  Metric = "ttlb-p99-ms"
	// HTTPHeld are the connections established at the server during an
	// http probe's load (probe.HTTPResult.Held): with many connections at
	// a low rate, towards RFC 9411's concurrent connection capacity (7.5,
	// 7.9).
	HTTPHeld Metric = "http-held"
	// BlackoutTime is the time an apply blocked traffic (Run.Blackouts), ms,
	// one value per apply of the point; TCPSurvived the share of the
	// connections held across it that survived, %. Neither belongs to a
	// probe: compare shows them as probe "apply".
	BlackoutTime Metric = "blackout"
	TCPSurvived  Metric = "tcp-survived"
	// CanaryPassed is the share of an IPS canary's triggers that passed
	// the inline IPS during a probe, %: above 0, the box let through
	// what its rules drop (fail-open).
	CanaryPassed Metric = "canary-passed"
	// CanaryMissed is the share of the canary's triggers a detect-only
	// IDS logged no alert for during a probe, %: above 0, the IDS did not
	// see (or not inspect) all the traffic it watches.
	CanaryMissed Metric = "canary-missed"
)

// DefaultGate are the metrics that fail compare's gate unless told
// otherwise: each probe's headline, throughput or the connection rate,
// an http probe's transactions a second, and the IPS canary's passed
// (inline) or unalerted (detect-only) triggers where both runs ran one.
var DefaultGate = []Metric{Throughput, ConnectRate, HTTPRate, CanaryPassed, CanaryMissed}

// AllMetrics lists the metrics in report order.
var AllMetrics = []Metric{Throughput, Retransmits, DUTCPU, PPS, Loss, Jitter, Latency, PingLoss, WattsPerGbps, ConnectRate, ConnectTime, HTTPRate, TTLB, TTLBP99, HTTPHeld, BlackoutTime, TCPSurvived, CanaryPassed, CanaryMissed}

// extraMetrics are the metrics a report's table shows beside throughput,
// with their intervals and deltas, for each probe that measured them.
var extraMetrics = []Metric{PPS, Loss, Jitter, Latency, PingLoss, WattsPerGbps, ConnectRate, ConnectTime, HTTPRate, TTLB, TTLBP99, HTTPHeld}

// metricInfo is what tables, comparisons and exports need to know of a
// metric.
type metricInfo struct {
	label  string // column header and compare's table heading: "loss %"
	key    string // CSV column stem and JSON name: "loss_percent"
	bench  string // benchstat unit
	prec   int    // decimals shown
	higher bool   // higher is better
	// points: the change is told in the metric's own unit (percentage
	// points), not in percent of the baseline: a good baseline loses 0 %,
	// from which any change is an infinite percentage.
	points bool
}

var metricInfos = map[Metric]metricInfo{
	Throughput:   {label: "Mbit/s", key: "mbps", bench: "bits/s", prec: 1, higher: true},
	Retransmits:  {label: "retransmits", key: "retransmits", bench: "retransmits", prec: 0},
	DUTCPU:       {label: "DUT CPU %", key: "dut_cpu_percent", bench: "dut-cpu-%", prec: 1},
	PPS:          {label: "pkt/s", key: "pps", bench: "pkts/s", prec: 0, higher: true},
	Loss:         {label: "loss %", key: "loss_percent", bench: "lost-%", prec: 3, points: true},
	Jitter:       {label: "jitter ms", key: "jitter_ms", bench: "jitter-ms", prec: 3},
	Latency:      {label: "ping ms", key: "latency_ms", bench: "ping-ms", prec: 3},
	PingLoss:     {label: "ping loss %", key: "ping_loss_percent", bench: "ping-lost-%", prec: 1, points: true},
	WattsPerGbps: {label: "W per Gbit/s", key: "watts_per_gbps", bench: "W/Gbit/s", prec: 2},
	ConnectRate:  {label: "conn/s", key: "connects_per_second", bench: "conns/s", prec: 0, higher: true},
	ConnectTime:  {label: "connect ms", key: "connect_ms", bench: "connect-ms", prec: 3},
	HTTPRate:     {label: "tx/s", key: "transactions_per_second", bench: "tx/s", prec: 0, higher: true},
	TTLB:         {label: "TTLB ms", key: "ttlb_ms", bench: "ttlb-ms", prec: 3},
	TTLBP99:      {label: "TTLB p99 ms", key: "ttlb_p99_ms", bench: "ttlb-p99-ms", prec: 3},
	HTTPHeld:     {label: "conns held", key: "held_connections", bench: "conns-held", prec: 0, higher: true},
	// Told in their own units: a good change blocks 0 ms, from which
	// any change is an infinite percentage.
	BlackoutTime: {label: "blackout ms", key: "blackout_ms", bench: "blackout-ms", prec: 0, points: true},
	TCPSurvived:  {label: "TCP survived %", key: "tcp_survived_percent", bench: "tcp-survived-%", prec: 0, higher: true, points: true},
	CanaryPassed: {label: "canary passed %", key: "canary_passed_percent", bench: "canary-passed-%", prec: 1, points: true},
	CanaryMissed: {label: "canary missed %", key: "canary_missed_percent", bench: "canary-missed-%", prec: 1, points: true},
}

func (m Metric) info() metricInfo { return metricInfos[m] }

// HigherIsBetter reports which way the metric improves.
func (m Metric) HigherIsBetter() bool { return m.info().higher }

// InPoints reports whether the metric's change is told in its own unit
// (percentage points) rather than in percent of the baseline.
func (m Metric) InPoints() bool { return m.info().points }

func (m Metric) unit() string { return m.info().label }

// ParseMetric checks a metric name.
func ParseMetric(s string) (Metric, error) {
	for _, m := range AllMetrics {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(AllMetrics))
	for i, m := range AllMetrics {
		names[i] = string(m)
	}
	return "", fmt.Errorf("metric %q: use one of %s", s, strings.Join(names, ", "))
}

// values are the probe's samples of the metric at one point.
func (m Metric) values(ps *ProbeSamples) []float64 {
	if ps == nil {
		return nil
	}
	if v := ps.slice(m); v != nil {
		return *v
	}
	return nil
}

// of is the metric's figure in one sample's Figures.
func (m Metric) of(f Figures) float64 {
	switch m {
	case Throughput:
		return f.Mbps
	case Retransmits:
		return f.Retransmits
	case DUTCPU:
		return f.DUTCPU
	case PPS:
		return f.PPS
	case Loss:
		return f.Loss
	case Jitter:
		return f.Jitter
	case Latency:
		return f.Latency
	case PingLoss:
		return f.PingLoss
	case WattsPerGbps:
		return f.WattsPerGbps
	case ConnectRate:
		return f.ConnectRate
	case ConnectTime:
		return f.ConnectMS
	case HTTPRate:
		return f.HTTPRate
	case TTLB:
		return f.TTLB
	case TTLBP99:
		return f.TTLBP99
	case HTTPHeld:
		return f.HTTPHeld
	case CanaryPassed:
		return f.CanaryPct
	case CanaryMissed:
		return f.MissedPct
	}
	return math.NaN()
}

// change is the delta as the metric tells it: percentage points or percent
// of the baseline's median (of the mean for the t-test view).
func (m Metric) change(d *Delta, mean bool) float64 {
	switch {
	case d == nil:
		return math.NaN()
	case m.InPoints() && mean:
		return d.MeanDiff
	case m.InPoints():
		return d.Diff
	case mean:
		return d.MeanPct
	}
	return d.Pct
}

// changeUnit is "pp" for a metric told in percentage points, "ms" for
// the blackout, "%" otherwise.
func (m Metric) changeUnit() string {
	switch {
	case m == BlackoutTime:
		return " ms"
	case m.InPoints():
		return " pp"
	}
	return "%"
}

// deltaText is benchstat's form of the change: "+12.34%", "+0.42 pp", or
// "~" where the test shows no difference.
func (m Metric) deltaText(d *Delta) string {
	switch {
	case d == nil:
		return "-"
	case !d.Significant:
		return "~"
	}
	c := m.change(d, false)
	if math.IsNaN(c) {
		return "?"
	}
	return fmt.Sprintf("%+.2f%s", c, m.changeUnit())
}

// formatValue is a summary's median with its interval: benchstat's "± x%"
// of the median, or for a metric told in points "± x" in its own unit.
func (m Metric) formatValue(s Summary) string {
	if s.N == 0 {
		return "-"
	}
	prec := m.info().prec
	if !m.InPoints() {
		return formatNum(s.Median, prec) + " " + medianSpread(s)
	}
	half := math.Max(s.Median-s.Lo, s.Hi-s.Median)
	if !isFinite(half) {
		if need := MinSamplesAt(s.Confidence); s.N < need {
			return formatNum(s.Median, prec) + fmt.Sprintf(" ± n/a (n < %d)", need)
		}
		return formatNum(s.Median, prec) + " ± n/a"
	}
	return formatNum(s.Median, prec) + " ± " + formatNum(half, prec)
}
