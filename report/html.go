package report

import (
	"html/template"
	"io"
)

// The HTML report is one file that fetches nothing: inline CSS, inline SVG
// charts, no scripts, fonts or links.
var htmlReport = template.Must(template.New("report").Funcs(template.FuncMap{
	"mbps":           formatMbps,
	"mean":           formatMean,
	"delta":          deltaCell,
	"tdelta":         tDeltaCell,
	"p":              func(d *Delta) string { return formatP(pOf(d)) },
	"padj":           func(d *Delta) string { return formatP(pAdjOf(d)) },
	"family":         familyText,
	"links":          linksText,
	"linksLegend":    func() string { return linksLegend },
	"blackoutLegend": func() string { return blackoutLegend },
	"blackoutHead":   func() []string { return blackoutHead },
	"blackoutCells":  blackoutCells,
	"tp":             formatTP,
	"num":            formatNum,
	"pivot":          pivotCell,
	"fixed":          KnobsKey,
	"point":          pointCell,
	"percent":        percent,
	"svg":            func(s string) template.HTML { return template.HTML(s) }, // drawn by gonum/plot, text escaped by vgsvg
	"sig": func(d *Delta) string {
		switch {
		case d == nil || !d.Significant:
			return ""
		case d.Pct < 0:
			return "down"
		default:
			return "up"
		}
	},
	"rest":       func(ds []*Delta) []*Delta { return ds[1:] },
	"label":      func(m Metric) string { return m.unit() },
	"mval":       func(mc MetricCell) string { return mc.Metric.formatValue(mc.Value) },
	"mdelta":     func(mc MetricCell) string { return mc.Metric.deltaText(mc.Delta) },
	"legend":     func() string { return extraLegend },
	"idlelegend": func() string { return idleLegend },
	// msig marks a metric's change as better or worse, whichever way the
	// metric improves.
	"msig": func(mc MetricCell) string {
		d := mc.Delta
		if d == nil || !d.Significant || !isFinite(mc.Metric.change(d, false)) {
			return ""
		}
		if (mc.Metric.change(d, false) > 0) == mc.Metric.HigherIsBetter() {
			return "up"
		}
		return "down"
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>fwab report: run {{.T.Run}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; background: #fff; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.baseline { font-weight: bold; background: #f6f9ff; }
td.down { color: #b00020; }
td.up { color: #006400; }
figure { margin: 2em 0; }
figure svg { max-width: 100%; height: auto; }
.warnings { color: #8a5a00; }
small.failopen { color: #b00020; font-weight: bold; }
</style>
</head>
<body>
<h1>Run {{.T.Run}}{{with .T.Where}} on {{.}}{{end}}{{if .T.Firmware}} ({{.T.Firmware}}){{end}}</h1>
{{with .T.LabLine}}<p>{{.}}.</p>
{{end}}<p>{{if .T.Baseline}}Baseline: <b>{{.T.Baseline}}</b>. {{end}}{{if .T.AnyThroughput}}Throughput in Mbit/s{{else}}Connection rate in conn/s{{end}}: median ± its {{percent .T.Confidence}}&nbsp;% confidence interval. Δ is the change of the median against the baseline; <code>~</code> where the Mann-Whitney U test shows no difference ({{family .T.Family}}).
{{with fixed .T.Fixed}}Fixed at every point: {{.}}.{{end}}{{if .T.HasExtra}} {{legend}}{{end}}{{if .T.Idle}} {{idlelegend}}{{end}}</p>
<table id="points">
<tr><th>point</th>{{range .T.Knobs}}<th>{{.}}</th>{{end}}{{range $i, $p := .T.Probes}}{{if index $.T.Throughput $i}}<th>{{$p}} Mbit/s</th><th>{{$p}} Δ</th><th>{{$p}} p</th><th>{{$p}} p adj</th><th>{{$p}} retr</th>{{if $.T.StudentT}}<th>{{$p}} mean</th><th>{{$p}} Δ mean</th><th>{{$p}} t-test p</th>{{end}}{{end}}{{range index $.T.Extra $i}}<th>{{$p}} {{label .}}</th><th>{{$p}} {{label .}} Δ</th>{{end}}{{end}}<th>DUT CPU %</th><th>temp °C</th><th>power W</th>{{if .T.Idle}}<th>idle CPU %</th><th>idle temp °C</th><th>idle power W</th>{{if .T.IdleLatency}}<th>idle ping ms</th>{{end}}{{end}}{{if .T.Blackouts}}<th>blackout ms</th>{{end}}</tr>
{{range .T.Rows}}<tr{{if .Baseline}} class="baseline"{{end}}><td>{{point .}}</td>{{range .Values}}<td>{{.}}</td>{{end}}{{range $pi, $c := .Cells}}{{if index $.T.Throughput $pi}}<td class="num">{{mbps .Mbps}}{{with .InvalidNote}}<br><small class="invalid">{{.}}</small>{{end}}{{with .CanaryNote}}<br><small class="{{if $c.Canary.Bad}}failopen{{else}}held{{end}}">{{.}}</small>{{end}}</td><td class="num {{sig .Delta}}">{{delta .Delta}}</td><td class="num">{{p .Delta}}</td><td class="num">{{padj .Delta}}</td><td class="num">{{num .Retransmits 0}}</td>{{if $.T.StudentT}}<td class="num">{{mean .Mbps}}</td><td class="num">{{tdelta .Delta}}</td><td class="num">{{tp .Delta}}</td>{{end}}{{end}}{{range .Extra}}<td class="num">{{mval .}}</td><td class="num {{msig .}}">{{mdelta .}}</td>{{end}}{{end}}<td class="num">{{num .DUTCPU 1}}</td><td class="num">{{num .TempC 1}}</td><td class="num">{{num .PowerW 1}}</td>{{if $.T.Idle}}<td class="num">{{num .Idle.DUTCPU 1}}</td><td class="num">{{num .Idle.TempC 1}}</td><td class="num">{{num .Idle.PowerW 1}}</td>{{if $.T.IdleLatency}}<td class="num">{{num .Idle.LatencyMS 3}}</td>{{end}}{{end}}{{if $.T.Blackouts}}<td class="num">{{num .Blackout.BlockedMS 0}}</td>{{end}}</tr>
{{end}}</table>
{{with .T.Blackouts}}<h2>Blackout per change</h2>
<p>{{blackoutLegend}}</p>
<table id="blackouts">
<tr>{{range blackoutHead}}<th>{{.}}</th>{{end}}</tr>
{{range .}}<tr>{{range $i, $c := blackoutCells .}}<td{{if $i}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{if .T.HasLinks}}<p>{{linksLegend}}</p>
<table id="links">
<tr><th>point</th><th>probe</th><th>sum Mbit/s</th><th>each link's Mbit/s</th></tr>
{{range $r := .T.Rows}}{{range .Cells}}{{if .Links}}<tr><td>{{point $r}}</td><td>{{.Probe}}</td><td class="num">{{mbps .Mbps}}</td><td>{{links .}}</td></tr>
{{end}}{{end}}{{end}}</table>
{{end}}{{with .P}}<h2>% gained / lost by {{.Knob}}</h2>
<p>The first column is Mbit/s at {{.Knob}}={{index .Values 0}}; the others the change against it, <code>~</code> where no difference is shown ({{family .Family}}; the point estimate in parentheses).{{if .Skipped}} {{.Skipped}} combinations of the other knobs measured at one value of {{.Knob}} only are left out.{{end}}</p>
<table id="pivot">
<tr>{{range .Others}}<th>{{.}}</th>{{end}}<th>probe</th>{{range $i, $v := .Values}}<th>{{$.P.Knob}}={{$v}}{{if eq $i 0}} Mbit/s{{end}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .Values}}<td>{{.}}</td>{{end}}<td>{{.Probe}}</td><td class="num">{{mbps .Base}}</td>{{range rest .Deltas}}<td class="num {{sig .}}">{{pivot .}}</td>{{end}}</tr>
{{end}}</table>
{{end}}{{range .Charts}}<figure>
{{svg .SVG}}
{{with .Caption}}<figcaption>{{.}}</figcaption>{{end}}
</figure>
{{end}}{{with .T.Warnings}}<h2>Warnings</h2>
<ul class="warnings">{{range .}}<li>{{.}}</li>{{end}}</ul>
{{end}}</body>
</html>
`))

func writeHTML(w io.Writer, r *Run, t *Table, pv *Pivot, ef *Effects) error {
	charts, err := Charts(r, t, ef)
	if err != nil {
		return err
	}
	return htmlReport.Execute(w, struct {
		T      *Table
		P      *Pivot
		Charts []Chart
	}{t, pv, charts})
}
