package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// EffectKind says what a run's design lets the report attribute to knobs.
type EffectKind string

// Effect kinds.
const (
	// Steps: the change between points that differ in the fewest knobs, a
	// ladder from the baseline (defaults → +blocklist → +IDS → +inline
	// IPS); a step that changes several knobs at once is labelled with all
	// of them and attributes nothing to any one.
	Steps EffectKind = "steps"
	// MainEffects: the run is a full factorial over its axes, so every
	// other axis is balanced and a value's effect is the median of the
	// changes it makes at every combination of the others.
	MainEffects EffectKind = "main"
)

// Effects are the run's knob effects on throughput, as far as the design
// supports them: no effect is ever credited to a knob that did not change
// alone (or, in a full factorial, balanced against every other).
type Effects struct {
	Kind   EffectKind
	Probes []string
	Rows   []Effect
	Note   string // what the effects are, for the reader
}

// Effect is one step or one axis value's main effect.
type Effect struct {
	Label    string   // "+blocklist=on", "+ids@lan=ips-inline, offload.checksum=off (together)", "nat.outbound=automatic"
	Changed  []string // the knob=value settings that changed, in axis order
	From, To int      // steps: the points' indexes; main effects: -1
	// Per probe. Steps: the change from From to To (nil where either has
	// no samples), adjusted by Benjamini–Hochberg over every step and
	// probe. Main effects: Pct is the median change over Pairs pairs and
	// PctLo/PctHi the smallest and largest of them; Delta is nil.
	Deltas []*Delta
	Pct    []float64
	PctLo  []float64
	PctHi  []float64
	Pairs  int
}

// NewEffects works out the run's knob effects; nil when the run has no
// baseline or no axis.
func NewEffects(r *Run, confidence float64) *Effects {
	if r.Baseline == nil || len(r.Knobs) == 0 {
		return nil
	}
	var pts []*Point
	for _, p := range r.Points {
		if measuredWithSamples(p) {
			pts = append(pts, p)
		}
	}
	if fullFactorial(r.Knobs, pts) {
		return mainEffects(r, pts)
	}
	return steps(r, pts, confidence)
}

// fullFactorial reports whether the points hold every combination of the
// axis values they have, once each.
func fullFactorial(knobs []string, pts []*Point) bool {
	combos := 1
	for _, k := range knobs {
		vals := map[string]bool{}
		for _, p := range pts {
			vals[p.Knobs[k]] = true
		}
		combos *= len(vals)
	}
	seen := map[string]bool{}
	for _, p := range pts {
		seen[axisKey(knobs, p, "")] = true
	}
	return len(seen) == len(pts) && len(pts) == combos && len(pts) > 1
}

// axisKey names a point by its axis values, leaving out one axis.
func axisKey(knobs []string, p *Point, except string) string {
	var parts []string
	for _, k := range knobs {
		if k != except {
			parts = append(parts, k+"="+p.Knobs[k])
		}
	}
	return strings.Join(parts, "\x00")
}

// changed lists the axis settings of to that differ from from's.
func changed(knobs []string, from, to *Point) []string {
	var out []string
	for _, k := range knobs {
		if from.Knobs[k] != to.Knobs[k] {
			out = append(out, k+"="+to.Knobs[k])
		}
	}
	return out
}

// steps builds the ladder: each measured point's step from the point it
// differs from in the fewest knobs among those nearer the baseline (ties:
// the one farthest from the baseline, then the latest in point order).
func steps(r *Run, pts []*Point, confidence float64) *Effects {
	e := &Effects{Kind: Steps, Probes: r.Probes,
		Note: "Each step is the change of throughput (of the connection rate for a connect probe), in %, from the point before it; a step that changes several knobs at once credits none of them alone."}
	dist := func(a, b *Point) int { return len(changed(r.Knobs, a, b)) }
	var family []*Delta
	for _, p := range pts {
		if p == r.Baseline {
			continue
		}
		d := dist(r.Baseline, p)
		var from *Point
		for _, q := range pts {
			if q == p || dist(r.Baseline, q) >= d {
				continue
			}
			if from == nil || dist(q, p) < dist(from, p) ||
				(dist(q, p) == dist(from, p) && dist(r.Baseline, q) >= dist(r.Baseline, from)) {
				from = q
			}
		}
		if from == nil {
			continue
		}
		ch := changed(r.Knobs, from, p)
		row := Effect{Label: "+" + strings.Join(ch, ", "), Changed: ch, From: from.Index, To: p.Index}
		if len(ch) > 1 {
			row.Label += " (together)"
		}
		for _, probe := range r.Probes {
			var dp *Delta
			if a, b := samplesAt(from, probe), samplesAt(p, probe); len(a) > 0 && len(b) > 0 {
				d := CompareAt(a, b, confidence)
				dp = &d
			}
			row.Deltas = append(row.Deltas, dp)
			family = append(family, dp)
			pct := math.NaN()
			if dp != nil {
				pct = dp.Pct
			}
			row.Pct = append(row.Pct, pct)
			row.PctLo = append(row.PctLo, deltaOr(dp, func(d *Delta) float64 { return d.PctLo }))
			row.PctHi = append(row.PctHi, deltaOr(dp, func(d *Delta) float64 { return d.PctHi }))
		}
		e.Rows = append(e.Rows, row)
	}
	AdjustDeltas(family)
	return e
}

func deltaOr(d *Delta, f func(*Delta) float64) float64 {
	if d == nil {
		return math.NaN()
	}
	return f(d)
}

// mainEffects is, for every axis value but the first measured, the median
// change against the axis's first value over every combination of the
// other axes.
func mainEffects(r *Run, pts []*Point) *Effects {
	e := &Effects{Kind: MainEffects, Probes: r.Probes,
		Note: "Full factorial: every other axis is balanced, so each value's main effect is the median change of throughput (of the connection rate for a connect probe), in %, against the axis's first value over every combination of the other axes; the range is the smallest and largest of those changes."}
	for _, k := range r.Knobs {
		values := slices.DeleteFunc(r.AxisValues(k), func(v string) bool {
			return !slices.ContainsFunc(pts, func(p *Point) bool { return p.Knobs[k] == v })
		})
		if len(values) < 2 {
			continue
		}
		ref := map[string]*Point{} // by the other axes, at values[0]
		for _, p := range pts {
			if p.Knobs[k] == values[0] {
				ref[axisKey(r.Knobs, p, k)] = p
			}
		}
		for _, v := range values[1:] {
			row := Effect{Label: k + "=" + v, Changed: []string{k + "=" + v}, From: -1, To: -1}
			for _, probe := range r.Probes {
				var pcts []float64
				for _, p := range pts {
					if p.Knobs[k] != v {
						continue
					}
					a, b := median(samplesAt(ref[axisKey(r.Knobs, p, k)], probe)), median(samplesAt(p, probe))
					if isFinite(a) && isFinite(b) && a != 0 {
						pcts = append(pcts, (b/a-1)*100)
					}
				}
				row.Pairs = max(row.Pairs, len(pcts))
				lo, hi := math.NaN(), math.NaN()
				if len(pcts) > 0 {
					lo, hi = slices.Min(pcts), slices.Max(pcts)
				}
				row.Pct, row.PctLo, row.PctHi = append(row.Pct, median(pcts)), append(row.PctLo, lo), append(row.PctHi, hi)
				row.Deltas = append(row.Deltas, nil)
			}
			e.Rows = append(e.Rows, row)
		}
	}
	return e
}

// Title is the effects' heading.
func (e *Effects) Title() string {
	if e.Kind == MainEffects {
		return "Main effect of each axis value (full factorial)"
	}
	return "Effect of each step, from the point before it"
}

// stepName is a row's first column: "0 → 1" for a step.
func (ef Effect) stepName() string {
	if ef.From < 0 {
		return ef.Label
	}
	return fmt.Sprintf("%d → %d", ef.From, ef.To)
}

// writeEffectsMarkdown is the effects' section of the Markdown report.
func writeEffectsMarkdown(b *strings.Builder, e *Effects) {
	fmt.Fprintf(b, "## %s\n\n", e.Title())
	b.WriteString(e.Note)
	head := []string{"step", "changed"}
	if e.Kind == MainEffects {
		head = []string{"axis value", "pairs"}
	} else if m := effectsFamily(e); m > 0 {
		fmt.Fprintf(b, " `~` where the U test shows no difference (%s).", familyText(m))
	}
	b.WriteString("\n\n")
	for _, p := range e.Probes {
		if e.Kind == MainEffects {
			head = append(head, p+" median Δ", p+" range")
		} else {
			head = append(head, p+" Δ", p+" p adj")
		}
	}
	mdRow(b, head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = "---"
		if i >= 2 {
			sep[i] = "---:"
		}
	}
	mdRow(b, sep)
	for _, r := range e.Rows {
		cells := []string{r.stepName(), r.Label}
		if e.Kind == MainEffects {
			cells[1] = fmt.Sprint(r.Pairs)
		}
		for i := range e.Probes {
			if e.Kind == MainEffects {
				cells = append(cells, formatPct(r.Pct[i]), formatPct(r.PctLo[i])+" … "+formatPct(r.PctHi[i]))
			} else {
				cells = append(cells, deltaCell(r.Deltas[i]), formatP(pAdjOf(r.Deltas[i])))
			}
		}
		for i := range cells {
			cells[i] = mdEscape(cells[i])
		}
		mdRow(b, cells)
	}
}

// effectsFamily is how many step comparisons the p-values are adjusted over.
func effectsFamily(e *Effects) int {
	for _, r := range e.Rows {
		for _, d := range r.Deltas {
			if d != nil && d.Family > 0 {
				return d.Family
			}
		}
	}
	return 0
}

func formatPct(v float64) string {
	if !isFinite(v) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", v)
}

type jsonEffects struct {
	Kind  string       `json:"kind"` // "steps" or "main"
	Title string       `json:"title"`
	Note  string       `json:"note"`
	Rows  []jsonEffect `json:"rows"`
}

type jsonEffect struct {
	Label   string             `json:"label"`
	Changed []string           `json:"changed"`
	From    *int               `json:"from"` // steps only
	To      *int               `json:"to"`
	Pairs   int                `json:"pairs,omitempty"` // main effects only
	Probes  []jsonEffectValues `json:"probes"`
}

type jsonEffectValues struct {
	Probe string     `json:"probe"`
	Pct   *float64   `json:"pct"`
	PctLo *float64   `json:"pct_lo"`
	PctHi *float64   `json:"pct_hi"`
	Delta *jsonDelta `json:"delta,omitempty"` // steps only
}

func toJSONEffects(e *Effects) *jsonEffects {
	if e == nil {
		return nil
	}
	out := &jsonEffects{Kind: string(e.Kind), Title: e.Title(), Note: e.Note, Rows: []jsonEffect{}}
	for _, r := range e.Rows {
		je := jsonEffect{Label: r.Label, Changed: r.Changed, Pairs: r.Pairs}
		if r.From >= 0 {
			je.From, je.To = &r.From, &r.To
		}
		for i, p := range e.Probes {
			je.Probes = append(je.Probes, jsonEffectValues{Probe: p, Pct: known(r.Pct[i]), PctLo: known(r.PctLo[i]), PctHi: known(r.PctHi[i]), Delta: toJSONDelta(r.Deltas[i])})
		}
		out.Rows = append(out.Rows, je)
	}
	return out
}
