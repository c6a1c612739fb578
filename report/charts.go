package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"regexp"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart is one rendered chart: an inline SVG element, without an XML
// declaration or namespace URLs, ready to be put into HTML.
type Chart struct {
	Title   string
	Caption string // what the chart shows and how to read it, not its title again
	SVG     string
}

// Charts draws the run's charts: throughput per point with confidence
// whiskers (one per probe), the knobs' effects as far as the design
// supports them (ef, from NewEffects), and a time series (per-interval throughput where the raw reports have it, else the
// DUT's CPU over the run).
func Charts(r *Run, t *Table, ef *Effects) ([]Chart, error) {
	var out []Chart
	for i, probe := range t.Probes {
		c, err := throughputChart(r, t, i, probe)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	if c, err := effectChart(ef); err != nil {
		return nil, err
	} else if c != nil {
		out = append(out, *c)
	}
	if c, err := blackoutChart(r); err != nil {
		return nil, err
	} else if c != nil {
		out = append(out, *c)
	}
	series, err := seriesCharts(r)
	if err != nil {
		return nil, err
	}
	return append(out, series...), nil
}

// blackoutChart shows the time each apply blocked, in the order of the
// applies, one series per service action; nil where the run measured no
// blackout.
func blackoutChart(r *Run) (*Chart, error) {
	if len(r.Blackouts) == 0 {
		return nil, nil
	}
	p := newPlot()
	title := "Time blocked by each apply, in the order applied"
	p.Title.Text = title
	p.X.Label.Text = "apply"
	p.Y.Label.Text = "blocked ms"
	p.Y.Min = 0
	byActions := map[string]plotter.XYs{}
	var order []string
	top := 0.0
	for i, b := range r.Blackouts {
		k := actionsText(b.Actions)
		if _, ok := byActions[k]; !ok {
			order = append(order, k)
		}
		byActions[k] = append(byActions[k], plotter.XY{X: float64(i + 1), Y: b.BlockedMS})
		top = math.Max(top, b.BlockedMS)
	}
	for i, k := range order {
		s, err := plotter.NewScatter(byActions[k])
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		s.Color, s.Shape, s.Radius = plotutil.Color(i), draw.CircleGlyph{}, vg.Points(3)
		p.Add(s)
		p.Legend.Add(k, s)
	}
	p.Y.Max = math.Max(1, top) * (1.15 + 0.07*float64(len(order)))
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	c, err := render(p, title, 9*vg.Inch, 3.5*vg.Inch)
	if c != nil {
		c.Caption = "Each dot is one apply: the datagrams its blackout stream lost ÷ the rate, from just before the write until traffic passed again."
	}
	return c, err
}

// whiskers are horizontal confidence intervals around bar ends.
type whiskers struct {
	plotter.XYs
	plotter.XErrors
}

// throughputChart is a dot plot of one probe: per point every sample as a
// small dot, the median as a diamond with its confidence interval as a
// whisker beside them.
func throughputChart(r *Run, t *Table, probe int, name string) (*Chart, error) {
	var rows []int // t.Rows with samples of the probe
	for ri, row := range t.Rows {
		if row.Cells[probe].Mbps.N > 0 {
			rows = append(rows, ri)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	labels := make([]string, len(rows)) // NominalY counts from the bottom
	var samples, medians plotter.XYs
	var w whiskers
	noInterval := 0
	for k, ri := range rows {
		row, c := t.Rows[ri], t.Rows[ri].Cells[probe]
		y := float64(len(rows) - 1 - k) // points from the top, in point order
		labels[len(rows)-1-k] = row.Label
		if row.Baseline {
			labels[len(rows)-1-k] += " (baseline)"
		}
		for i, v := range finite(samplesAt(r.Points[ri], name)) {
			// A band of dots below the median, staggered so that equal
			// values stay visible.
			samples = append(samples, plotter.XY{X: v, Y: y - 0.12 - 0.04*float64(i%5)})
		}
		medians = append(medians, plotter.XY{X: c.Mbps.Median, Y: y + 0.18})
		if isFinite(c.Mbps.Lo) && isFinite(c.Mbps.Hi) {
			w.XYs = append(w.XYs, plotter.XY{X: c.Mbps.Median, Y: y + 0.18})
			w.XErrors = append(w.XErrors, struct{ Low, High float64 }{c.Mbps.Median - c.Mbps.Lo, c.Mbps.Hi - c.Mbps.Median})
		} else {
			noInterval++
		}
	}
	title := fmt.Sprintf("Throughput, probe %s: every sample, the median and its %s%% confidence interval", name, percent(t.Confidence))
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = "Mbit/s"
	col := plotutil.Color(probe)
	dots, err := plotter.NewScatter(samples)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", title, err)
	}
	dots.Shape, dots.Radius, dots.Color = draw.RingGlyph{}, vg.Points(2.5), color.Gray{Y: 60}
	med, err := plotter.NewScatter(medians)
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", title, err)
	}
	med.Shape, med.Radius, med.Color = draw.PyramidGlyph{}, vg.Points(5), col
	p.Add(dots, med)
	p.Legend.Add("sample", dots)
	p.Legend.Add("median", med)
	if len(w.XYs) > 0 {
		eb, err := plotter.NewXErrorBars(w)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		eb.Color = col
		eb.LineStyle.Width = vg.Points(2)
		eb.CapWidth = vg.Points(8)
		p.Add(eb)
		p.Legend.Add(fmt.Sprintf("%s%% interval", percent(t.Confidence)), &plotter.Line{LineStyle: eb.LineStyle})
	}
	p.NominalY(labels...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(labels))+0.2
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	c, err := render(p, title, 9*vg.Inch, vg.Length(1.6+0.45*float64(len(labels)))*vg.Inch)
	if c != nil {
		c.Caption = fmt.Sprintf("Probe %s at each point: the rings are the individual samples, the triangle the median, the whisker its %s %% confidence interval.", name, percent(t.Confidence))
		if noInterval > 0 {
			c.Caption += fmt.Sprintf(" %d points have no whisker: with n < %d samples the interval of the median does not exist.", noInterval, MinSamplesAt(t.Confidence))
		}
	}
	return c, err
}

// effectChart draws the run's knob effects (NewEffects): per step or axis
// value and probe, the change as a dot with its interval (steps: the
// change's conservative confidence interval; main effects: the range over
// the balanced pairs), labelled with what changed.
func effectChart(ef *Effects) (*Chart, error) {
	if ef == nil || len(ef.Rows) == 0 {
		return nil, nil
	}
	title := ef.Title()
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = "% change of throughput"
	if ef.Kind == Steps {
		p.X.Label.Text = "% change of throughput from the point before"
	}
	n := len(ef.Probes)
	labels := make([]string, len(ef.Rows))
	for i, r := range ef.Rows {
		labels[i] = r.Label
		if ef.Kind == Steps {
			labels[i] = fmt.Sprintf("%s: %s", r.stepName(), r.Label)
		}
	}
	lo, hi := 0.0, 0.0
	for pi, name := range ef.Probes {
		var dots plotter.XYs
		var w whiskers
		for i, r := range ef.Rows {
			if !isFinite(r.Pct[pi]) {
				continue
			}
			// Rows from the top; the probes side by side within a row.
			y := float64(len(ef.Rows)-1-i) + 0.25*(float64(pi)-float64(n-1)/2)
			dots = append(dots, plotter.XY{X: r.Pct[pi], Y: y})
			lo, hi = math.Min(lo, r.Pct[pi]), math.Max(hi, r.Pct[pi])
			if isFinite(r.PctLo[pi]) && isFinite(r.PctHi[pi]) {
				w.XYs = append(w.XYs, plotter.XY{X: r.Pct[pi], Y: y})
				w.XErrors = append(w.XErrors, struct{ Low, High float64 }{r.Pct[pi] - r.PctLo[pi], r.PctHi[pi] - r.Pct[pi]})
				lo, hi = math.Min(lo, r.PctLo[pi]), math.Max(hi, r.PctHi[pi])
			}
		}
		if len(dots) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		sc.Color = plotutil.Color(pi)
		sc.Shape = draw.CircleGlyph{}
		sc.Radius = vg.Points(4)
		p.Add(sc)
		p.Legend.Add(name, sc)
		if len(w.XYs) > 0 {
			eb, err := plotter.NewXErrorBars(w)
			if err != nil {
				return nil, fmt.Errorf("chart %q: %w", title, err)
			}
			eb.Color = plotutil.Color(pi)
			eb.LineStyle.Width = vg.Points(1.5)
			eb.CapWidth = vg.Points(6)
			p.Add(eb)
		}
	}
	zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: -0.5}, {X: 0, Y: float64(len(ef.Rows)) - 0.5}})
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", title, err)
	}
	zero.Color = color.Gray{Y: 80}
	p.Add(zero)
	rows := slices.Clone(labels)
	slices.Reverse(rows)
	p.NominalY(rows...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))+0.3 // room on top for the legend
	pad := math.Max(2, 0.08*(hi-lo))
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	caption := "Steps from the baseline, each labelled with the knobs it changed; a step that changed several knobs together credits none of them alone. Dots: the change of the median; whiskers: its conservative confidence interval where both points have one."
	if ef.Kind == MainEffects {
		caption = "The matrix is a full factorial, so every other axis is balanced: each dot is the median change against the axis's first value over every combination of the other axes, the whisker the smallest and largest of those changes."
	}
	c, err := render(p, title, 9*vg.Inch, vg.Length(1.4+0.45*float64(len(rows)))*vg.Inch)
	if c != nil {
		c.Caption = caption
	}
	return c, err
}

// seriesCharts draws, per probe, the per-interval throughput of every
// sample at the baseline and at the point looked at, the probe's slowest;
// without interval data, one chart of the DUT's CPU for each sample in the
// order they were measured.
func seriesCharts(r *Run) ([]Chart, error) {
	var out []Chart
	for pi, name := range r.Probes {
		c, err := probeSeriesChart(r, pi, name)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, *c)
		}
	}
	if len(out) > 0 {
		return out, nil
	}
	c, err := cpuChart(r)
	if err != nil || c == nil {
		return nil, err
	}
	return []Chart{*c}, nil
}

// seriesLine is one line of a time-series chart.
type seriesLine struct {
	xys   plotter.XYs
	color color.Color
}

func probeSeriesChart(r *Run, pi int, name string) (*Chart, error) {
	var slowest *Point
	slowestMbps := math.Inf(1)
	for _, pt := range r.Points {
		if ps := pt.Probes[name]; ps != nil && len(ps.Series) > 0 && pt != r.Baseline {
			if m := median(ps.Mbps); isFinite(m) && m < slowestMbps {
				slowest, slowestMbps = pt, m
			}
		}
	}
	type group struct {
		pt    *Point
		what  string
		color color.Color
	}
	var groups []group
	if r.Baseline != nil {
		groups = append(groups, group{r.Baseline, "baseline", color.Gray{Y: 110}})
	}
	if slowest != nil {
		groups = append(groups, group{slowest, "slowest", plotutil.Color(pi)})
	}
	p := newPlot()
	var lines []seriesLine
	var legend []string
	top := 0.0
	for _, g := range groups {
		ps := g.pt.Probes[name]
		if ps == nil || len(ps.Series) == 0 {
			continue
		}
		for i, s := range ps.Series {
			var xys plotter.XYs
			for j := range s.Seconds {
				xys = append(xys, plotter.XY{X: s.Seconds[j], Y: s.Mbps[j]})
				top = math.Max(top, s.Mbps[j])
			}
			if len(xys) == 0 {
				continue
			}
			lines = append(lines, seriesLine{xys, g.color})
			if i == 0 {
				legend = append(legend, fmt.Sprintf("point %d (%s): %d samples", g.pt.Index, g.what, len(ps.Series)))
			} else {
				legend = append(legend, "")
			}
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	title := fmt.Sprintf("Throughput over time, probe %s: every sample at the baseline and the slowest point", name)
	p.Title.Text = title
	p.X.Label.Text = "seconds into the probe"
	p.Y.Label.Text = "Mbit/s"
	p.Y.Min = 0
	p.Y.Max = top * 1.3 // room for the legend above the lines
	for i, l := range lines {
		lp, err := plotter.NewLine(l.xys)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		lp.Color = l.color
		lp.Width = vg.Points(1)
		p.Add(lp)
		if legend[i] != "" {
			p.Legend.Add(legend[i], lp)
		}
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	c, err := render(p, title, 9*vg.Inch, 4*vg.Inch)
	if c != nil {
		c.Caption = fmt.Sprintf("Probe %s: each line is one sample's throughput per reporting interval, as iperf3 reported it; grey at the baseline, coloured at the point with the lowest median.", name)
	}
	return c, err
}

// cpuChart is the DUT's CPU for each sample in recorded order, per probe.
func cpuChart(r *Run) (*Chart, error) {
	p := newPlot()
	title := "DUT CPU during the run, per sample in recorded order"
	p.Title.Text = title
	p.X.Label.Text = "sample"
	p.Y.Label.Text = "DUT CPU %"
	p.Y.Min = 0
	top, drawn := 0.0, 0
	for pi, name := range r.Probes {
		var xys plotter.XYs
		i := 0
		for _, pt := range r.Points {
			if ps := pt.Probes[name]; ps != nil {
				for _, f := range ps.Figures {
					if isFinite(f.DUTCPU) {
						xys = append(xys, plotter.XY{X: float64(i), Y: f.DUTCPU})
						top = math.Max(top, f.DUTCPU)
					}
					i++
				}
			}
		}
		if len(xys) == 0 {
			continue
		}
		lp, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		lp.Color, lp.Width = plotutil.Color(pi), vg.Points(1.5)
		points.Color, points.Shape, points.Radius = plotutil.Color(pi), draw.CircleGlyph{}, vg.Points(2)
		p.Add(lp, points)
		p.Legend.Add(name, lp)
		drawn++
	}
	if drawn == 0 {
		return nil, nil
	}
	p.Y.Max = top * (1.15 + 0.07*float64(drawn))
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	c, err := render(p, title, 9*vg.Inch, 4*vg.Inch)
	if c != nil {
		c.Caption = "The raw reports hold no per-interval throughput, so this shows the DUT's mean CPU during each sample, point after point."
	}
	return c, err
}

// newPlot is a plot whose text is in Liberation Sans, which has Arial's
// metrics: a browser without Liberation draws the labels in Arial or
// Helvetica at nearly the widths gonum/plot measured.
func newPlot() *plot.Plot {
	p := plot.New()
	sans := func(f *font.Font) { f.Typeface, f.Variant = "Liberation", "Sans" }
	sans(&p.Title.TextStyle.Font)
	sans(&p.X.Label.TextStyle.Font)
	sans(&p.Y.Label.TextStyle.Font)
	sans(&p.X.Tick.Label.Font)
	sans(&p.Y.Tick.Label.Font)
	sans(&p.Legend.TextStyle.Font)
	return p
}

var (
	svgProlog = regexp.MustCompile(`(?s)\A<\?xml[^>]*\?>\s*(<!--.*?-->\s*)?`)
	svgXMLNS  = regexp.MustCompile(`\s+xmlns(:xlink)?="[^"]*"`)
)

// render draws p as SVG for inline use in HTML: no XML declaration and no
// namespace attributes, which HTML does not need and which name URLs.
func render(p *plot.Plot, title string, w, h vg.Length) (*Chart, error) {
	p.BackgroundColor = color.White
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("chart %q: %w", title, err)
	}
	svg := svgProlog.ReplaceAllString(b.String(), "")
	svg = svgXMLNS.ReplaceAllString(svg, "")
	svg = strings.ReplaceAll(svg, "font-family:Liberation Sans;", "font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
	return &Chart{Title: title, SVG: svg}, nil
}
