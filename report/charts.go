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
		c, err := throughputChart(t, i, probe)
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
	if c, err := seriesChart(r); err != nil {
		return nil, err
	} else if c != nil {
		out = append(out, *c)
	}
	return out, nil
}

// whiskers are horizontal confidence intervals around bar ends.
type whiskers struct {
	plotter.XYs
	plotter.XErrors
}

func throughputChart(t *Table, probe int, name string) (*Chart, error) {
	var labels []string
	var values plotter.Values
	var w whiskers
	for _, r := range t.Rows {
		c := r.Cells[probe]
		if c.Mbps.N == 0 {
			continue
		}
		y := float64(len(labels))
		label := r.Label
		if r.Baseline {
			label += " (baseline)"
		}
		labels = append(labels, label)
		values = append(values, c.Mbps.Median)
		if isFinite(c.Mbps.Lo) && isFinite(c.Mbps.Hi) {
			w.XYs = append(w.XYs, plotter.XY{X: c.Mbps.Median, Y: y})
			w.XErrors = append(w.XErrors, struct{ Low, High float64 }{c.Mbps.Median - c.Mbps.Lo, c.Mbps.Hi - c.Mbps.Median})
		}
	}
	if len(labels) == 0 {
		return nil, nil
	}
	title := fmt.Sprintf("Throughput, probe %s: median with its %s%% confidence interval", name, percent(t.Confidence))
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = "Mbit/s"
	p.X.Min = 0
	bars, err := plotter.NewBarChart(values, vg.Points(14))
	if err != nil {
		return nil, fmt.Errorf("chart %q: %w", title, err)
	}
	bars.Horizontal = true
	bars.Color = plotutil.Color(probe)
	bars.LineStyle.Width = 0
	p.Add(bars)
	if len(w.XYs) > 0 {
		eb, err := plotter.NewXErrorBars(w)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		eb.LineStyle.Width = vg.Points(1.5)
		eb.CapWidth = vg.Points(8)
		p.Add(eb)
	}
	p.NominalY(labels...)
	p.Add(plotter.NewGrid())
	return render(p, title, 9*vg.Inch, vg.Length(1.2+0.3*float64(len(labels)))*vg.Inch)
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

// seriesChart draws the per-interval throughput of the first sample of each
// probe at the baseline and at the slowest point; without interval data, the
// DUT's CPU for each sample in the order they were measured.
func seriesChart(r *Run) (*Chart, error) {
	type line struct {
		name string
		xys  plotter.XYs
	}
	var lines []line
	var slowest *Point
	slowestMbps := math.Inf(1)
	for _, pt := range r.Points {
		for _, ps := range pt.Probes {
			if m := median(ps.Mbps); isFinite(m) && m < slowestMbps && len(ps.Series) > 0 {
				slowest, slowestMbps = pt, m
			}
		}
	}
	for _, pt := range []*Point{r.Baseline, slowest} {
		if pt == nil || (pt == slowest && pt == r.Baseline && len(lines) > 0) {
			continue
		}
		for _, name := range r.Probes {
			ps := pt.Probes[name]
			if ps == nil || len(ps.Series) == 0 {
				continue
			}
			s := ps.Series[0]
			var xys plotter.XYs
			for i := range s.Seconds {
				xys = append(xys, plotter.XY{X: s.Seconds[i], Y: s.Mbps[i]})
			}
			what := "slowest"
			if pt == r.Baseline {
				what = "baseline"
			}
			lines = append(lines, line{fmt.Sprintf("%s, point %d (%s)", name, pt.Index, what), xys})
		}
	}
	title := "Throughput over time of one probe (per-interval Mbit/s)"
	xLabel, yLabel := "seconds into the probe", "Mbit/s"
	if len(lines) == 0 {
		title, xLabel, yLabel = "DUT CPU during the run, per sample in recorded order", "sample", "DUT CPU %"
		for _, name := range r.Probes {
			var xys plotter.XYs
			i := 0
			for _, pt := range r.Points {
				if ps := pt.Probes[name]; ps != nil {
					for _, f := range ps.Figures {
						if isFinite(f.DUTCPU) {
							xys = append(xys, plotter.XY{X: float64(i), Y: f.DUTCPU})
						}
						i++
					}
				}
			}
			if len(xys) > 0 {
				lines = append(lines, line{name, xys})
			}
		}
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := newPlot()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	top := 0.0
	for _, l := range lines {
		for _, xy := range l.xys {
			top = math.Max(top, xy.Y)
		}
	}
	p.Y.Max = top * (1.15 + 0.07*float64(len(lines))) // room for the legend above the lines
	for i, l := range lines {
		lp, points, err := plotter.NewLinePoints(l.xys)
		if err != nil {
			return nil, fmt.Errorf("chart %q: %w", title, err)
		}
		lp.Color = plotutil.Color(i)
		lp.Width = vg.Points(1.5)
		points.Color = plotutil.Color(i)
		points.Shape = draw.CircleGlyph{}
		points.Radius = vg.Points(2)
		p.Add(lp, points)
		p.Legend.Add(l.name, lp)
	}
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return render(p, title, 9*vg.Inch, 4*vg.Inch)
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
