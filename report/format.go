package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/fwab/fwab/probe"
)

// Format is an output format of fwab report.
type Format string

// Formats.
const (
	Markdown  Format = "md"
	CSV       Format = "csv"
	JSON      Format = "json"
	HTML      Format = "html"
	Benchstat Format = "benchstat"
)

// Formats lists every format, for help texts and errors.
var Formats = []Format{Markdown, CSV, JSON, HTML, Benchstat}

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return "", fmt.Errorf("format %q: use one of %s", s, strings.Join(names, ", "))
}

// Write writes the run's report in the format.
func Write(w io.Writer, r *Run, f Format, opts Options) error {
	t := NewTable(r, opts)
	var pv *Pivot
	if opts.Pivot != "" {
		var err error
		if pv, err = NewPivotAt(r, opts.Pivot, opts.confidence()); err != nil {
			return err
		}
	}
	ef := NewEffects(r, opts.confidence())
	switch f {
	case Markdown:
		return writeMarkdown(w, t, pv, ef)
	case CSV:
		if pv != nil {
			return writePivotCSV(w, pv)
		}
		return writeCSV(w, t)
	case JSON:
		return writeJSON(w, t, pv, ef)
	case HTML:
		return writeHTML(w, r, t, pv, ef)
	case Benchstat:
		return WriteBenchstat(w, r)
	}
	_, err := ParseFormat(string(f))
	return err
}

// percent writes a confidence level as a percentage: 0.95 → "95".
func percent(confidence float64) string {
	return strconv.FormatFloat(confidence*100, 'f', -1, 64)
}

// formatNum writes v with prec decimals, "-" when unknown.
func formatNum(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

// formatMbps is a throughput with benchstat's "± x%" interval width.
func formatMbps(s Summary) string {
	if s.N == 0 {
		return "-"
	}
	return formatNum(s.Median, 1) + " " + medianSpread(s)
}

// medianSpread is spread for a summary's median.
func medianSpread(s Summary) string {
	return spread(s.Median, s.Lo, s.Hi, s.N, MinSamplesAt(s.Confidence))
}

// meanSpread is spread for a summary's mean: Student's t needs 2 samples.
func meanSpread(s Summary) string { return spread(s.Mean, s.MeanLo, s.MeanHi, s.N, 2) }

// spread is benchstat's "± 2%": the interval's larger half-width relative to
// the center; "± n/a (n < 6)" when n is below the need samples the
// interval takes to exist (a 95 % interval of the median needs 6), never an
// infinite one.
func spread(center, lo, hi float64, n, need int) string {
	half := halfWidthPct(center, lo, hi)
	if math.IsInf(half, 1) {
		if n < need {
			return fmt.Sprintf("± n/a (n < %d)", need)
		}
		return "± n/a"
	}
	switch {
	case center == 0:
		return "± 0%"
	case half < 1:
		return fmt.Sprintf("± %.1f%%", half)
	default:
		return fmt.Sprintf("± %.0f%%", half)
	}
}

func formatMean(s Summary) string {
	if s.N == 0 || !isFinite(s.Mean) {
		return "-"
	}
	return formatNum(s.Mean, 1) + " " + meanSpread(s)
}

func formatP(p float64) string {
	if math.IsNaN(p) {
		return "-"
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}

func deltaCell(d *Delta) string {
	if d == nil {
		return "-"
	}
	return d.String()
}

func tDeltaCell(d *Delta) string {
	if d == nil {
		return "-"
	}
	if !d.TSignificant || math.IsNaN(d.MeanPct) {
		return "~"
	}
	return fmt.Sprintf("%+.2f%%", d.MeanPct)
}

func pOf(d *Delta) float64 {
	if d == nil {
		return math.NaN()
	}
	return d.P
}

func pAdjOf(d *Delta) float64 {
	if d == nil {
		return math.NaN()
	}
	return d.PAdj
}

// familyText says what "no difference" means for a family of m
// comparisons.
func familyText(m int) string {
	if m <= 1 {
		return "p ≥ 0.05"
	}
	return fmt.Sprintf("p adj ≥ 0.05: p adjusted by Benjamini–Hochberg over the %d comparisons", m)
}

// mdEscape keeps a value from breaking a Markdown table.
func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}

// mbpsCell is a cell's throughput, with how many samples were invalid and
// why where any was, and what the IPS canary saw where one ran.
func mbpsCell(c Cell) string {
	var notes []string
	for _, n := range []string{c.InvalidNote(), c.CanaryNote()} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	if len(notes) > 0 {
		return formatMbps(c.Mbps) + " (" + strings.Join(notes, "; ") + ")"
	}
	return formatMbps(c.Mbps)
}

func writeMarkdown(w io.Writer, t *Table, pv *Pivot, ef *Effects) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# Run %d", t.Run)
	if where := t.Where(); where != "" {
		fmt.Fprintf(&b, " on %s", mdEscape(where))
	}
	if t.Firmware != "" {
		fmt.Fprintf(&b, " (%s)", mdEscape(t.Firmware))
	}
	b.WriteString("\n\n")
	if t.Lab != "" {
		fmt.Fprintf(&b, "%s.\n\n", mdEscape(t.LabLine()))
	}
	if t.Baseline != "" {
		fmt.Fprintf(&b, "Baseline: %s. ", mdEscape(t.Baseline))
	}
	what := "Throughput in Mbit/s"
	if !t.AnyThroughput() {
		what = "Connection rate in conn/s"
	}
	fmt.Fprintf(&b, "%s: median ± its %s %% confidence interval; Δ is the change of the median against the baseline, `~` where the Mann-Whitney U test shows no difference (%s).\n", what, percent(t.Confidence), familyText(t.Family()))
	if t.HasExtra() {
		b.WriteString(extraLegend + "\n")
	}
	if t.Idle {
		b.WriteString(idleLegend + "\n")
	}
	if fixed := KnobsKey(t.Fixed); fixed != "" {
		fmt.Fprintf(&b, "Fixed at every point: %s.\n", mdEscape(fixed))
	}
	b.WriteString("\n")
	head := append([]string{"point"}, t.Knobs...)
	for pi, p := range t.Probes {
		if t.Throughput[pi] {
			head = append(head, p+" Mbit/s", p+" Δ", p+" p", p+" p adj", p+" retr")
			if t.StudentT {
				head = append(head, p+" mean", p+" Δ mean", p+" t-test p")
			}
		}
		for _, m := range t.Extra[pi] {
			head = append(head, p+" "+m.unit(), p+" "+m.unit()+" Δ")
		}
	}
	head = append(head, "DUT CPU %", "temp °C", "power W")
	if t.Idle {
		head = append(head, "idle CPU %", "idle temp °C", "idle power W")
		if t.IdleLatency {
			head = append(head, "idle ping ms")
		}
	}
	if len(t.Blackouts) > 0 {
		head = append(head, "blackout ms")
	}
	mdRow(&b, head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
		if i > len(t.Knobs) {
			sep[i] = "---:"
		}
	}
	mdRow(&b, sep)
	for _, r := range t.Rows {
		cells := append([]string{pointCell(r)}, r.Values...)
		for pi, c := range r.Cells {
			if t.Throughput[pi] {
				cells = append(cells, mbpsCell(c), deltaCell(c.Delta), formatP(pOf(c.Delta)), formatP(pAdjOf(c.Delta)), formatNum(c.Retransmits, 0))
				if t.StudentT {
					cells = append(cells, formatMean(c.Mbps), tDeltaCell(c.Delta), formatTP(c.Delta))
				}
			}
			for _, mc := range c.Extra {
				cells = append(cells, mc.Metric.formatValue(mc.Value), mc.Metric.deltaText(mc.Delta))
			}
		}
		cells = append(cells, formatNum(r.DUTCPU, 1), formatNum(r.TempC, 1), formatNum(r.PowerW, 1))
		if t.Idle {
			cells = append(cells, formatNum(r.Idle.DUTCPU, 1), formatNum(r.Idle.TempC, 1), formatNum(r.Idle.PowerW, 1))
			if t.IdleLatency {
				cells = append(cells, formatNum(r.Idle.LatencyMS, 3))
			}
		}
		if len(t.Blackouts) > 0 {
			cells = append(cells, formatNum(r.Blackout.BlockedMS, 0))
		}
		for i := range cells {
			cells[i] = mdEscape(cells[i])
		}
		mdRow(&b, cells)
	}
	if t.HasLinks() {
		b.WriteString("\n" + linksLegend + "\n\n")
		mdRow(&b, []string{"point", "probe", "sum Mbit/s", "each link's Mbit/s"})
		mdRow(&b, []string{"---", "---", "---:", "---"})
		for _, r := range t.Rows {
			for _, c := range r.Cells {
				if len(c.Links) > 0 {
					mdRow(&b, []string{mdEscape(pointCell(r)), mdEscape(c.Probe), mdEscape(formatMbps(c.Mbps)), mdEscape(linksText(c))})
				}
			}
		}
	}
	if len(t.Blackouts) > 0 {
		b.WriteString("\n## Blackout per change\n\n" + blackoutLegend + "\n\n")
		mdRow(&b, blackoutHead)
		mdRow(&b, []string{"---", "---:", "---:", "---:", "---:", "---:"})
		for _, f := range t.Blackouts {
			mdRow(&b, blackoutCells(f))
		}
	}
	if ef != nil && len(ef.Rows) > 0 {
		b.WriteString("\n")
		writeEffectsMarkdown(&b, ef)
	}
	if pv != nil {
		b.WriteString("\n")
		writePivotMarkdown(&b, pv)
	}
	if len(t.Warnings) > 0 {
		b.WriteString("\nWarnings:\n\n")
		for _, wn := range t.Warnings {
			fmt.Fprintf(&b, "- %s\n", mdEscape(wn))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// linksLegend introduces the links-at-once table in every format.
const blackoutLegend = "Traffic each change dropped while it was applied: a steady UDP stream ran through the firewall from just before the write until traffic passed again after it (the end of settling; a firmware switch's reboot included); blocked is the datagrams lost ÷ the rate, the longest gap the longest time between two that arrived, and TCP survived the connections held open across the change that still passed data after it. The table's blackout ms column is each point's median."

var blackoutHead = []string{"change", "applies", "blocked ms (median)", "blocked ms (max)", "longest gap ms", "TCP survived"}

// blackoutCells is a row of the blackout table.
func blackoutCells(f BlackoutFigures) []string {
	n := strconv.Itoa(f.N)
	if f.Failed > 0 {
		n += fmt.Sprintf(" (%d failed)", f.Failed)
	}
	return []string{f.Actions, n, formatNum(f.BlockedMS, 0), formatNum(f.MaxMS, 0), formatNum(f.MaxGapMS, 0), f.TCPText()}
}

const linksLegend = "Links at once: a probe that ran several links together shows their sum in the table above; here each link's own median Mbit/s ± its confidence interval within it."

// pointCell is the point's number, marked when it is the baseline or was
// not measured.
func pointCell(r Row) string {
	s := strconv.Itoa(r.Point)
	if r.Baseline {
		s += " (baseline)"
	}
	if r.Status != "" && r.Status != "valid" && r.Status != "pending" {
		s += " (" + r.Status + ")"
	}
	return s
}

func formatTP(d *Delta) string {
	if d == nil {
		return "-"
	}
	return formatP(d.TP)
}

func writePivotMarkdown(b *strings.Builder, pv *Pivot) {
	fmt.Fprintf(b, "## %% gained / lost by %s\n\n", mdEscape(pv.Knob))
	fmt.Fprintf(b, "The first column is Mbit/s at %s=%s; the others the change against it, `~` where no difference is shown (%s; the point estimate in parentheses).", mdEscape(pv.Knob), mdEscape(pv.Values[0]), familyText(pv.Family()))
	if pv.Skipped > 0 {
		fmt.Fprintf(b, " %d combinations of the other knobs measured at one value of %s only are left out.", pv.Skipped, mdEscape(pv.Knob))
	}
	b.WriteString("\n\n")
	head := append(append([]string{}, pv.Others...), "probe")
	for i, v := range pv.Values {
		if i == 0 {
			head = append(head, pv.Knob+"="+v+" Mbit/s")
			continue
		}
		head = append(head, pv.Knob+"="+v)
	}
	mdRow(b, head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
		if i > len(pv.Others) {
			sep[i] = "---:"
		}
	}
	mdRow(b, sep)
	for _, r := range pv.Rows {
		cells := append(append([]string{}, r.Values...), r.Probe, formatMbps(r.Base))
		for _, d := range r.Deltas[1:] {
			cells = append(cells, pivotCell(d))
		}
		for i := range cells {
			cells[i] = mdEscape(cells[i])
		}
		mdRow(b, cells)
	}
}

// pivotCell is the change in percent, or "~ (x%)" where no difference is
// shown.
func pivotCell(d *Delta) string {
	switch {
	case d == nil:
		return "-"
	case math.IsNaN(d.Pct):
		return "?"
	case d.Significant:
		return fmt.Sprintf("%+.1f%%", d.Pct)
	default:
		return fmt.Sprintf("~ (%+.1f%%)", d.Pct)
	}
}

func mdRow(b *strings.Builder, cells []string) {
	b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
}

func csvNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func writeCSV(w io.Writer, t *Table) error {
	cw := csv.NewWriter(w)
	head := append([]string{"point"}, t.Knobs...)
	head = append(head, "baseline", "status", "probe", "n", "failed", "mbps_median", "mbps_lo", "mbps_hi", "mbps_mean", "mbps_mean_lo", "mbps_mean_hi",
		"delta_pct", "delta_pct_lo", "delta_pct_hi", "p", "p_adjusted", "significant", "delta_mean_pct", "t_test_p", "retransmits", "dut_cpu_percent", "temp_celsius", "power_watts")
	head = append(head, "idle_n", "idle_dut_cpu_percent", "idle_temp_celsius", "idle_power_watts", "idle_latency_ms")
	for _, m := range extraMetrics {
		k, change := m.info().key, "_delta_pct"
		if m.InPoints() {
			change = "_delta_pp"
		}
		head = append(head, k+"_n", k+"_median", k+"_lo", k+"_hi", k+change, k+"_p_adjusted", k+"_significant")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range t.Rows {
		for _, c := range r.Cells {
			rec := append([]string{strconv.Itoa(r.Point)}, r.Values...)
			rec = append(rec, strconv.FormatBool(r.Baseline), r.Status, c.Probe, strconv.Itoa(c.Mbps.N), strconv.Itoa(c.Failed),
				csvNum(c.Mbps.Median), csvNum(c.Mbps.Lo), csvNum(c.Mbps.Hi), csvNum(c.Mbps.Mean), csvNum(c.Mbps.MeanLo), csvNum(c.Mbps.MeanHi))
			if d := c.Delta; d != nil {
				rec = append(rec, csvNum(d.Pct), csvNum(d.PctLo), csvNum(d.PctHi), csvNum(d.P), csvNum(d.PAdj), strconv.FormatBool(d.Significant), csvNum(d.MeanPct), csvNum(d.TP))
			} else {
				rec = append(rec, "", "", "", "", "", "", "", "")
			}
			rec = append(rec, csvNum(c.Retransmits), csvNum(r.DUTCPU), csvNum(r.TempC), csvNum(r.PowerW),
				strconv.Itoa(r.Idle.N), csvNum(r.Idle.DUTCPU), csvNum(r.Idle.TempC), csvNum(r.Idle.PowerW), csvNum(r.Idle.LatencyMS))
			for _, m := range extraMetrics {
				mc := c.extra(m)
				if mc == nil || mc.Value.N == 0 {
					rec = append(rec, "", "", "", "", "", "", "")
					continue
				}
				v := mc.Value
				rec = append(rec, strconv.Itoa(v.N), csvNum(v.Median), csvNum(v.Lo), csvNum(v.Hi))
				if d := mc.Delta; d != nil {
					rec = append(rec, csvNum(m.change(d, false)), csvNum(d.PAdj), strconv.FormatBool(d.Significant))
				} else {
					rec = append(rec, "", "", "")
				}
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

func writePivotCSV(w io.Writer, pv *Pivot) error {
	cw := csv.NewWriter(w)
	head := append(append([]string{}, pv.Others...), "probe", pv.Knob, "mbps_median", "delta_pct", "p", "p_adjusted", "significant")
	if err := cw.Write(head); err != nil {
		return err
	}
	for _, r := range pv.Rows {
		for i, v := range pv.Values {
			rec := append(append([]string{}, r.Values...), r.Probe, v)
			switch d := r.Deltas[i]; {
			case i == 0:
				rec = append(rec, csvNum(r.Base.Median), "", "", "", "")
			case d == nil:
				rec = append(rec, "", "", "", "", "")
			default:
				rec = append(rec, csvNum(d.New.Median), csvNum(d.Pct), csvNum(d.P), csvNum(d.PAdj), strconv.FormatBool(d.Significant))
			}
			if err := cw.Write(rec); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// The JSON report's field names are stable: new fields may be added, none
// renamed or removed. Unknown figures are null.

type jsonReport struct {
	Run        int64             `json:"run"`
	Target     string            `json:"target"`
	Testbed    string            `json:"testbed"`       // name@fingerprint; "" for runs from before testbeds
	Lab        string            `json:"lab,omitempty"` // a lab target's profile and CPU budget
	Firmware   string            `json:"firmware"`
	Status     string            `json:"status"`
	Confidence float64           `json:"confidence"`
	Knobs      []string          `json:"knobs"`
	Fixed      map[string]string `json:"fixed"`
	Probes     []string          `json:"probes"`
	Baseline   string            `json:"baseline"`
	Points     []jsonPoint       `json:"points"`
	Pivot      *jsonPivot        `json:"pivot,omitempty"`
	Effects    *jsonEffects      `json:"effects,omitempty"`
	// Blackouts are the applies' blackouts by service actions; empty
	// when the run measured none.
	Blackouts []jsonBlackout `json:"blackouts"`
	Warnings  []string       `json:"warnings"`
}

// jsonBlackout summarizes applies' blackouts (BlackoutFigures).
type jsonBlackout struct {
	Actions     string   `json:"actions,omitempty"` // in the run's list only
	N           int      `json:"n"`
	Failed      int      `json:"failed"`
	BlackoutMS  *float64 `json:"blackout_ms"` // the median time blocked
	MaxMS       *float64 `json:"blackout_ms_max"`
	MaxGapMS    *float64 `json:"max_gap_ms"`
	TCPHeld     int      `json:"tcp_held"`
	TCPSurvived int      `json:"tcp_survived"`
}

func toJSONBlackout(f BlackoutFigures) jsonBlackout {
	return jsonBlackout{Actions: f.Actions, N: f.N, Failed: f.Failed, BlackoutMS: known(f.BlockedMS), MaxMS: known(f.MaxMS), MaxGapMS: known(f.MaxGapMS), TCPHeld: f.TCPHeld, TCPSurvived: f.TCPSurvived}
}

type jsonPoint struct {
	Point    int               `json:"point"`
	Knobs    map[string]string `json:"knobs"`
	Baseline bool              `json:"baseline"`
	Status   string            `json:"status"`
	Reason   string            `json:"reason,omitempty"`
	Probes   []jsonCell        `json:"probes"`
	DUTCPU   *float64          `json:"dut_cpu_percent"`
	TempC    *float64          `json:"temp_celsius"`
	PowerW   *float64          `json:"power_watts"`
	Idle     *jsonIdle         `json:"idle"`     // null when the point had no idle phase
	Blackout *jsonBlackout     `json:"blackout"` // its applies' blackouts; null when none was measured
}

// jsonIdle is a point's figures at rest: the medians over its idle phases.
type jsonIdle struct {
	N         int      `json:"n"`
	DUTCPU    *float64 `json:"dut_cpu_percent"`
	TempC     *float64 `json:"temp_celsius"`
	PowerW    *float64 `json:"power_watts"`
	LatencyMS *float64 `json:"latency_ms"`
}

type jsonCell struct {
	Probe      string `json:"probe"`
	N          int    `json:"n"`
	Failed     int    `json:"failed"`
	Invalid    int    `json:"invalid,omitempty"`     // of failed, the samples the firewall changed under
	InvalidWhy string `json:"invalid_why,omitempty"` // what changed under them, counted by kind
	// The IPS canary, where one ran: its triggers sent and passed over
	// every sample, and the samples any passed in; at a detect-only IDS
	// the triggers it logged an alert for, and the samples it missed any.
	CanarySent    *uint64     `json:"canary_sent,omitempty"`
	CanaryPassed  *uint64     `json:"canary_passed,omitempty"`
	FailOpen      *int        `json:"fail_open,omitempty"`
	CanaryAlerted *uint64     `json:"canary_alerted,omitempty"`
	IDSMissed     *int        `json:"ids_missed,omitempty"`
	Mbps          jsonSummary `json:"mbps"`
	Delta         *jsonDelta  `json:"delta"`
	Retransmits   *float64    `json:"retransmits"`
	// Metrics are the figures measured beside throughput (UDP loss,
	// jitter and packet rate; ping latency and loss under load).
	Metrics []jsonMetric `json:"metrics"`
	// Links are each link's throughput where the probe ran several at
	// once (Mbps is their sum).
	Links []jsonLink `json:"links,omitempty"`
}

type jsonLink struct {
	Link string      `json:"link"`
	Mbps jsonSummary `json:"mbps"`
}

type jsonMetric struct {
	Metric         string      `json:"metric"` // as compare --metric names it
	Unit           string      `json:"unit"`
	HigherIsBetter bool        `json:"higher_is_better"`
	Change         string      `json:"change"` // what delta.change is in: "percent" or "points"
	N              int         `json:"n"`
	Value          jsonSummary `json:"value"`
	Delta          *jsonDelta  `json:"delta"`
}

type jsonSummary struct {
	Median *float64 `json:"median"`
	Lo     *float64 `json:"lo"`
	Hi     *float64 `json:"hi"`
	Mean   *float64 `json:"mean"`
	MeanLo *float64 `json:"mean_lo"`
	MeanHi *float64 `json:"mean_hi"`
}

type jsonDelta struct {
	Pct         *float64 `json:"pct"`
	PctLo       *float64 `json:"pct_lo"`
	PctHi       *float64 `json:"pct_hi"`
	P           *float64 `json:"p"`
	PAdj        *float64 `json:"p_adjusted"` // Benjamini–Hochberg over the family
	Family      int      `json:"family"`     // comparisons adjusted over
	Alpha       float64  `json:"alpha"`
	Significant bool     `json:"significant"`
	Text        string   `json:"text"`
	MeanPct     *float64 `json:"mean_pct"`
	TP          *float64 `json:"t_test_p"`
	Diff        *float64 `json:"diff"` // the median's change in the metric's own unit
	DiffLo      *float64 `json:"diff_lo"`
	DiffHi      *float64 `json:"diff_hi"`
	// Change is the change as the metric tells it: Pct, or Diff for a
	// metric told in percentage points (loss).
	Change *float64 `json:"change"`
}

type jsonPivot struct {
	Knob   string         `json:"knob"`
	Values []string       `json:"values"`
	Others []string       `json:"others"`
	Rows   []jsonPivotRow `json:"rows"`
}

type jsonPivotRow struct {
	Knobs  map[string]string `json:"knobs"`
	Probe  string            `json:"probe"`
	Base   jsonSummary       `json:"base_mbps"`
	Deltas []*jsonDelta      `json:"deltas"`
}

func known(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func toJSONSummary(s Summary) jsonSummary {
	return jsonSummary{known(s.Median), known(s.Lo), known(s.Hi), known(s.Mean), known(s.MeanLo), known(s.MeanHi)}
}

func toJSONDelta(d *Delta) *jsonDelta { return toJSONMetricDelta(Throughput, d) }

func toJSONMetricDelta(m Metric, d *Delta) *jsonDelta {
	if d == nil {
		return nil
	}
	return &jsonDelta{Pct: known(d.Pct), PctLo: known(d.PctLo), PctHi: known(d.PctHi), P: known(d.P), PAdj: known(d.PAdj), Family: d.Family, Alpha: d.Alpha,
		Significant: d.Significant, Text: m.deltaText(d), MeanPct: known(d.MeanPct), TP: known(d.TP),
		Diff: known(d.Diff), DiffLo: known(d.DiffLo), DiffHi: known(d.DiffHi), Change: known(m.change(d, false))}
}

func toJSONMetric(mc MetricCell) jsonMetric {
	change := "percent"
	if mc.Metric.InPoints() {
		change = "points"
	}
	return jsonMetric{Metric: string(mc.Metric), Unit: mc.Metric.unit(), HigherIsBetter: mc.Metric.HigherIsBetter(), Change: change,
		N: mc.Value.N, Value: toJSONSummary(mc.Value), Delta: toJSONMetricDelta(mc.Metric, mc.Delta)}
}

func writeJSON(w io.Writer, t *Table, pv *Pivot, ef *Effects) error {
	out := jsonReport{Effects: toJSONEffects(ef), Run: t.Run, Target: t.Target, Testbed: t.Testbed, Lab: t.Lab, Firmware: t.Firmware, Confidence: t.Confidence, Knobs: nonNil(t.Knobs), Fixed: t.Fixed,
		Probes: nonNil(t.Probes), Baseline: t.Baseline, Status: t.Status, Points: []jsonPoint{}, Blackouts: []jsonBlackout{}, Warnings: nonNil(t.Warnings)}
	for _, f := range t.Blackouts {
		out.Blackouts = append(out.Blackouts, toJSONBlackout(f))
	}
	for _, r := range t.Rows {
		p := jsonPoint{Point: r.Point, Knobs: map[string]string{}, Baseline: r.Baseline, Status: r.Status, Reason: r.Reason, Probes: []jsonCell{},
			DUTCPU: known(r.DUTCPU), TempC: known(r.TempC), PowerW: known(r.PowerW)}
		if i := r.Idle; i.N > 0 {
			p.Idle = &jsonIdle{N: i.N, DUTCPU: known(i.DUTCPU), TempC: known(i.TempC), PowerW: known(i.PowerW), LatencyMS: known(i.LatencyMS)}
		}
		if r.Blackout.N > 0 {
			jb := toJSONBlackout(r.Blackout)
			p.Blackout = &jb
		}
		for i, k := range t.Knobs {
			p.Knobs[k] = r.Values[i]
		}
		for _, c := range r.Cells {
			jc := jsonCell{Probe: c.Probe, N: c.Mbps.N, Failed: c.Failed, Invalid: c.Invalid, InvalidWhy: c.InvalidWhy, Mbps: toJSONSummary(c.Mbps), Delta: toJSONDelta(c.Delta), Retransmits: known(c.Retransmits), Metrics: []jsonMetric{}}
			if k := c.Canary; k.Samples > 0 {
				jc.CanarySent, jc.CanaryPassed, jc.FailOpen = &k.Sent, &k.Passed, &k.FailOpen
				if k.Detect > 0 {
					jc.CanaryAlerted, jc.IDSMissed = &k.Alerted, &k.Missed
				}
			}
			for _, mc := range c.Extra {
				jc.Metrics = append(jc.Metrics, toJSONMetric(mc))
			}
			for _, l := range c.Links {
				jc.Links = append(jc.Links, jsonLink{Link: l.Name, Mbps: toJSONSummary(l.Mbps)})
			}
			p.Probes = append(p.Probes, jc)
		}
		out.Points = append(out.Points, p)
	}
	if pv != nil {
		jp := &jsonPivot{Knob: pv.Knob, Values: pv.Values, Others: nonNil(pv.Others), Rows: []jsonPivotRow{}}
		for _, r := range pv.Rows {
			row := jsonPivotRow{Knobs: map[string]string{}, Probe: r.Probe, Base: toJSONSummary(r.Base)}
			for i, k := range pv.Others {
				row.Knobs[k] = r.Values[i]
			}
			for _, d := range r.Deltas {
				row.Deltas = append(row.Deltas, toJSONDelta(d))
			}
			jp.Rows = append(jp.Rows, row)
		}
		out.Pivot = jp
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// WriteBenchstat writes every successful sample as a Go benchmark result
// line, so that benchstat (golang.org/x/perf/cmd/benchstat) can read a run
// and compare two:
//
//	fwab-target: lab
//	BenchmarkFwab/probe=up/blocklist=off/ids@lan=off 1 941250000 bits/s 17 retransmits 50 dut-cpu-%
//
// The knobs are name parts, so benchstat pivots by a knob with
// -col '"/ids@lan"' (quoted: '@' is part of benchstat's own syntax). The run's number and firmware are left out of the configuration
// lines on purpose: benchstat separates results whose configuration differs,
// and comparing two runs or two firmwares is the point.
func WriteBenchstat(w io.Writer, r *Run) error {
	var b strings.Builder
	if r.Info.Target != "" {
		fmt.Fprintf(&b, "fwab-target: %s\n", benchValue(r.Info.Target))
	}
	for _, p := range r.Points {
		if !p.Measured() {
			continue
		}
		for _, name := range r.Probes {
			ps := p.Probes[name]
			if ps == nil {
				continue
			}
			writeBenchFigures(&b, benchName(name, r.Knobs, p.Knobs), ps.Figures)
		}
		if p.Idle != nil {
			writeBenchFigures(&b, benchName(probe.IdleProbe, r.Knobs, p.Knobs), p.Idle.Figures)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeBenchFigures writes one benchmark result line per sample: every
// figure it has, each with its unit (an idle phase has no bits/s).
func writeBenchFigures(b *strings.Builder, name string, figures []Figures) {
	for _, f := range figures {
		var line strings.Builder
		value := func(v float64, prec int, unit string) {
			if isFinite(v) {
				fmt.Fprintf(&line, " %s %s", strconv.FormatFloat(v, 'f', prec, 64), unit)
			}
		}
		value(f.Mbps*1e6, -1, "bits/s")
		value(f.Retransmits, -1, "retransmits")
		value(f.DUTCPU, 2, "dut-cpu-%")
		value(f.DUTTemp, 2, "dut-°C")
		value(f.Power, 2, "W")
		for _, m := range extraMetrics {
			value(m.of(f), -1, m.info().bench)
		}
		if line.Len() > 0 { // a result needs a value
			b.WriteString(name + " 1" + line.String() + "\n")
		}
	}
}

var trailingProcs = regexp.MustCompile(`-([0-9]+)$`)

// benchName is "BenchmarkFwab/probe=NAME/knob=value...". Characters a
// benchmark name cannot hold are escaped as in URLs, and a trailing "-N",
// which benchstat would read as GOMAXPROCS, has its dash escaped.
func benchName(probe string, knobs []string, values map[string]string) string {
	parts := []string{"BenchmarkFwab", "probe=" + url.PathEscape(probe)}
	for _, k := range knobs {
		parts = append(parts, url.PathEscape(k)+"="+url.PathEscape(values[k]))
	}
	name := strings.Join(parts, "/")
	return trailingProcs.ReplaceAllString(name, "%2D$1")
}

// benchValue keeps a configuration value on one line.
func benchValue(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
