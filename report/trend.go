package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/perf/benchmath"
	"golang.org/x/sync/errgroup"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fwab/fwab/store"
)

// TrendOptions tune change detection over a history of runs.
type TrendOptions struct {
	// Window is how many runs before a candidate run are compared with
	// it and the runs after it (as many); 5 when 0.
	Window int
	// Threshold is the smallest change of the median, in percent, that
	// counts; 3 when 0.
	Threshold float64
	// Alpha is the Mann–Whitney U test's significance level; 0.01 when 0.
	Alpha float64
}

func (o TrendOptions) withDefaults() TrendOptions {
	if o.Window <= 0 {
		o.Window = 5
	}
	if o.Threshold <= 0 {
		o.Threshold = 3
	}
	if o.Alpha <= 0 {
		o.Alpha = 0.01
	}
	return o
}

// Change is a run where the level of a series changed.
type Change struct {
	Index         int     // of the run in the series
	Before, After float64 // medians of the windows before and from it
	DeltaPct      float64
	P             float64
}

// ChangePoints finds where the level of a history changes: each element of
// runs is one run's values, oldest first. A run i is a change when the
// Window runs before it and the Window runs from it differ by a Mann–Whitney
// U test (benchmath, at Alpha) and their medians by at least Threshold
// percent; of adjacent such runs the one with the smallest p (then the
// largest change) is reported, and the next change is looked for a window later. The first
// and last Window runs cannot be changes: there is too little on one side.
func ChangePoints(runs [][]float64, o TrendOptions) []Change {
	return changePoints(sortedRuns(runs), o)
}

// changePoints is ChangePoints of runs whose values are each sorted.
func changePoints(runs [][]float64, o TrendOptions) []Change {
	o = o.withDefaults()
	w := o.Window
	th := benchmath.Thresholds{CompareAlpha: o.Alpha}
	// The window after run j-w is the window before run j: the median of
	// each window of w runs is taken once, by merging its runs' values.
	windows := make([]float64, max(0, len(runs)-w+1))
	heads := make([]int, w)
	for j := range windows {
		windows[j] = mergedMiddle(runs[j:j+w], heads)
	}
	var candidates []Change
	var before, after []float64
	for i := w; i+w <= len(runs); i++ {
		mb, ma := windows[i-w], windows[i]
		if math.IsNaN(mb) || math.IsNaN(ma) || mb == 0 {
			continue
		}
		delta := 100 * (ma - mb) / mb
		if math.Abs(delta) < o.Threshold {
			continue
		}
		before, after = pool(before[:0], runs[i-w:i]), pool(after[:0], runs[i:i+w])
		c := benchmath.AssumeNothing.Compare(benchmath.NewSample(before, &th), benchmath.NewSample(after, &th))
		if c.P > o.Alpha {
			continue
		}
		candidates = append(candidates, Change{Index: i, Before: mb, After: ma, DeltaPct: delta, P: c.P})
	}
	return pickChanges(candidates, w)
}

// pickChanges keeps, of candidate runs in order, the change of each run of
// adjacent ones, and looks for the next a window of w runs later.
func pickChanges(candidates []Change, w int) []Change {
	var out []Change
	for k := 0; k < len(candidates); {
		// A step shows in several windows in a row: keep the one that
		// separates best (a window straddling the step mixes both levels),
		// then the largest change.
		best, j := candidates[k], k+1
		for ; j < len(candidates) && candidates[j].Index == candidates[j-1].Index+1; j++ {
			if c := candidates[j]; c.P < best.P || c.P == best.P && math.Abs(c.DeltaPct) > math.Abs(best.DeltaPct) {
				best = c
			}
		}
		out = append(out, best)
		for k = j; k < len(candidates) && candidates[k].Index < best.Index+w; k++ {
		}
	}
	return out
}

// sortedRuns is a sorted copy of each run's values, all in one block.
func sortedRuns(runs [][]float64) [][]float64 {
	n := 0
	for _, r := range runs {
		n += len(r)
	}
	block := make([]float64, 0, n)
	out := make([][]float64, len(runs))
	for i, r := range runs {
		block = append(block, r...)
		out[i] = block[len(block)-len(r):]
		slices.Sort(out[i])
	}
	return out
}

// mergedMiddle is the median of the values of runs, each sorted: the
// median of them pooled, as middle gives it. heads is scratch space, one
// per run.
func mergedMiddle(runs [][]float64, heads []int) float64 {
	n := 0
	for i, r := range runs {
		n += len(r)
		heads[i] = 0
	}
	if n == 0 {
		return math.NaN()
	}
	// Take the values in order up to the middle one (or two).
	var prev, cur float64
	for k := 0; k <= n/2; k++ {
		best := -1
		for i, r := range runs {
			if h := heads[i]; h < len(r) && (best < 0 || cmp.Less(r[h], runs[best][heads[best]])) {
				best = i
			}
		}
		prev, cur = cur, runs[best][heads[best]]
		heads[best]++
	}
	if n%2 == 1 {
		return cur
	}
	return (prev + cur) / 2
}

// pool appends the values of runs to out.
func pool(out []float64, runs [][]float64) []float64 {
	for _, r := range runs {
		out = append(out, r...)
	}
	return out
}

// TrendRun is one run in a series.
type TrendRun struct {
	ID       int64
	Created  time.Time
	Firmware string
	// Values are the run's figures of the series' metric (Mbit/s, a
	// connect probe's conn/s or an http probe's tx/s), Median their median.
	Values []float64
	Median float64
}

// TrendSeries is one point and probe over the runs of a testbed.
type TrendSeries struct {
	Point string // knob=value pairs
	Probe string
	// Metric is what the series follows: throughput, a connect probe's
	// connection rate or an http probe's transactions a second.
	Metric  Metric
	Runs    []TrendRun
	Changes []Change
}

// MarshalJSON names each run's figures by the series' metric, as the
// report's CSV does: "mbps" and "median_mbps" for throughput,
// "connects_per_second" and "median_connects_per_second" for a connect
// probe's rate, "transactions_per_second" and
// "median_transactions_per_second" for an http probe's.
func (s TrendSeries) MarshalJSON() ([]byte, error) {
	type run struct {
		ID       int64     `json:"run"`
		Created  time.Time `json:"created"`
		Firmware string    `json:"firmware"`
	}
	metric := cmp.Or(s.Metric, Throughput)
	k, _ := json.Marshal(metric.info().key) // strings marshal without error
	mk, _ := json.Marshal("median_" + metric.info().key)
	runs := make([]json.RawMessage, len(s.Runs))
	for i, r := range s.Runs {
		head, err := json.Marshal(run{r.ID, r.Created, r.Firmware})
		if err != nil {
			return nil, err
		}
		values, err := json.Marshal(r.Values)
		if err != nil {
			return nil, err
		}
		median, err := json.Marshal(r.Median)
		if err != nil {
			return nil, err
		}
		runs[i] = fmt.Appendf(head[:len(head)-1], `,%s:%s,%s:%s}`, k, values, mk, median)
	}
	return json.Marshal(struct {
		Point   string            `json:"point"`
		Probe   string            `json:"probe"`
		Metric  Metric            `json:"metric"`
		Runs    []json.RawMessage `json:"runs"`
		Changes []Change          `json:"changes"`
	}{s.Point, s.Probe, metric, runs, s.Changes})
}

// Trend is the history of one spec on one testbed.
type Trend struct {
	Testbed string
	Runs    int
	Options TrendOptions
	Series  []TrendSeries
}

// NewTrend groups a history (store.History, the runs of one testbed) into
// a series per point and probe and finds each series' changes.
func NewTrend(testbed string, runs []store.HistoryRun, o TrendOptions) (*Trend, error) {
	o = o.withDefaults()
	t := &Trend{Testbed: testbed, Options: o, Runs: len(runs)}
	byKey := map[[2]string]*TrendSeries{}
	var order [][2]string
	keys := map[string]string{} // knobs JSON to the point's key, parsed once
	var slab []float64          // the runs' figures' backing
	for _, r := range runs {
		for _, m := range r.Measured {
			raw := r.Knobs[m.Point]
			point, ok := keys[raw]
			if !ok {
				var knobs map[string]string
				if err := json.Unmarshal([]byte(raw), &knobs); err != nil {
					return nil, fmt.Errorf("trend: run %d point %d: knobs: %w", r.ID, m.Point, err)
				}
				point = KnobsKey(knobs)
				keys[raw] = point
			}
			metric, figures, scale := Throughput, m.BitsPerSecond, 1e6
			switch {
			case len(m.TransactionsPerSecond) > 0:
				metric, figures, scale = HTTPRate, m.TransactionsPerSecond, 1
			case len(m.BitsPerSecond) == 0 && len(m.ConnectsPerSecond) > 0:
				metric, figures, scale = ConnectRate, m.ConnectsPerSecond, 1
			}
			k := [2]string{point, m.Probe}
			s := byKey[k]
			if s == nil {
				s = &TrendSeries{Point: k[0], Probe: k[1], Metric: metric}
				byKey[k] = s
				order = append(order, k)
			}
			if s.Metric != metric {
				return nil, fmt.Errorf("trend: run %d point %s probe %s measured %s where earlier runs measured %s; a series follows one", r.ID, point, m.Probe, metric, s.Metric)
			}
			if n := len(s.Runs); n == 0 || s.Runs[n-1].ID != r.ID {
				s.Runs = append(s.Runs, TrendRun{ID: r.ID, Created: r.Created, Firmware: r.Firmware})
			}
			last := &s.Runs[len(s.Runs)-1]
			if last.Values == nil { // carved from one block: a history has 100,000s
				if cap(slab)-len(slab) < len(figures) {
					slab = make([]float64, 0, max(len(figures), 4096))
				}
				n := len(slab)
				last.Values, slab = slab[n:n:n+len(figures)], slab[:n+len(figures)]
			}
			for _, v := range figures {
				last.Values = append(last.Values, v/scale)
			}
		}
	}
	slices.SortFunc(order, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	t.Series = make([]TrendSeries, len(order))
	for i, k := range order {
		t.Series[i] = *byKey[k]
	}
	// The series are independent: one at a time on each core.
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range t.Series {
		g.Go(func() error {
			s := &t.Series[i]
			values := make([][]float64, len(s.Runs))
			for i := range s.Runs {
				values[i] = s.Runs[i].Values
			}
			sorted := sortedRuns(values)
			for i, v := range sorted {
				s.Runs[i].Median = middleInPlace(v) // sorted already
			}
			s.Changes = changePoints(sorted, o)
			if s.Changes == nil {
				s.Changes = []Change{}
			}
			return nil
		})
	}
	g.Wait()
	return t, nil
}

// middle is the median of v, without the interval median computes: a
// history takes hundreds of thousands of them.
func middle(v []float64) float64 { return middleInPlace(slices.Clone(v)) }

// middleInPlace is middle, sorting v.
func middleInPlace(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// Changes counts the change points over every series.
func (t *Trend) Changes() int {
	n := 0
	for _, s := range t.Series {
		n += len(s.Changes)
	}
	return n
}

// WriteText writes one row per change point: the series, the run where
// the level changed, the medians before and after, the change and p.
func (t *Trend) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "testbed %s: %d runs, %d series; windows of %d runs, changes of at least %s%% at p ≤ %s\n",
		t.Testbed, t.Runs, len(t.Series), t.Options.Window, strconv.FormatFloat(t.Options.Threshold, 'f', -1, 64), strconv.FormatFloat(t.Options.Alpha, 'f', -1, 64))
	if t.Changes() == 0 {
		_, err := fmt.Fprintln(w, "no change in level")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tPROBE\tRUN\tCREATED\tFIRMWARE\tBEFORE\tAFTER\tCHANGE\tP")
	for _, s := range t.Series {
		for _, c := range s.Changes {
			r := s.Runs[c.Index]
			unit, prec := s.Metric.unit(), s.Metric.info().prec
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%.*f %s\t%.*f %s\t%+.1f%%\t%.3g\n", s.Point, s.Probe, r.ID,
				r.Created.UTC().Format(time.RFC3339), cmp.Or(r.Firmware, "-"), prec, c.Before, unit, prec, c.After, unit, c.DeltaPct, c.P)
		}
	}
	return tw.Flush()
}

// TrendCharts draws each series' run medians in run order with its change
// points marked.
func TrendCharts(t *Trend) ([]Chart, error) {
	var out []Chart
	for _, s := range t.Series {
		p := newPlot()
		p.X.Label.Text = "run (oldest first)"
		p.Y.Label.Text = "median " + s.Metric.unit()
		pts := make(plotter.XYs, len(s.Runs))
		for i, r := range s.Runs {
			pts[i] = plotter.XY{X: float64(i + 1), Y: r.Median}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		p.Add(line)
		if len(s.Changes) > 0 {
			marks := make(plotter.XYs, len(s.Changes))
			for i, c := range s.Changes {
				marks[i] = plotter.XY{X: float64(c.Index + 1), Y: s.Runs[c.Index].Median}
			}
			sc, err := plotter.NewScatter(marks)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Shape = draw.TriangleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(5)
			p.Add(sc)
			p.Legend.Add("change", sc)
		}
		title := s.Point + " · " + s.Probe
		c, err := render(p, title, 16*vg.Centimeter, 7*vg.Centimeter)
		if err != nil {
			return nil, err
		}
		what := "throughput"
		switch s.Metric {
		case ConnectRate:
			what = "connection rate"
		case HTTPRate:
			what = "transaction rate"
		}
		c.Caption = fmt.Sprintf("median %s of each run; triangles mark the %d change(s) found", what, len(s.Changes))
		out = append(out, *c)
	}
	return out, nil
}

var trendHTML = template.Must(template.New("trend").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>fwab trend: {{.Testbed}}</title>
<style>body{font-family:'Liberation Sans',Arial,Helvetica,sans-serif;margin:2em}pre{background:#f6f6f6;padding:1em}figure{margin:1em 0}</style>
</head><body>
<h1>Trend on {{.Testbed}}</h1>
<pre>{{.Text}}</pre>
{{range .Charts}}<figure><figcaption><b>{{.Title}}</b>: {{.Caption}}</figcaption>{{.SVG}}</figure>
{{end}}</body></html>
`))

// WriteHTML writes the table and a chart per series.
func (t *Trend) WriteHTML(w io.Writer) error {
	var text strings.Builder
	if err := t.WriteText(&text); err != nil {
		return err
	}
	charts, err := TrendCharts(t)
	if err != nil {
		return err
	}
	type chart struct {
		Title, Caption string
		SVG            template.HTML
	}
	view := struct {
		Testbed, Text string
		Charts        []chart
	}{Testbed: t.Testbed, Text: text.String()}
	for _, c := range charts {
		view.Charts = append(view.Charts, chart{c.Title, c.Caption, template.HTML(c.SVG)}) // rendered by gonum, not user text
	}
	return trendHTML.Execute(w, view)
}
