package report

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// halfWidthPct is the larger half of a median's interval in percent of the
// median, benchstat's "± x%": +Inf where the interval does not exist.
func halfWidthPct(center, lo, hi float64) float64 {
	if !isFinite(lo) || !isFinite(hi) {
		return math.Inf(1)
	}
	if center == 0 {
		return 0
	}
	return math.Max(center-lo, hi-center) / math.Abs(center) * 100
}

// Wider lists the measured points, by index, at which some probe's
// throughput median has a 95 % interval wider than ±width percent, or none
// yet (too few samples): where adaptive repeats measure again.
func Wider(r *Run, width float64) []int {
	var out []int
	for _, p := range r.Points {
		if !p.Measured() {
			continue
		}
		if w := widestProbe(r, p); w > width {
			out = append(out, p.Index)
		}
	}
	return out
}

// widestProbe is the widest half-width over the point's probes; +Inf when
// a probe has samples too few for an interval, or none.
func widestProbe(r *Run, p *Point) float64 {
	widest := 0.0
	for _, name := range r.Probes {
		ps := p.Probes[name]
		if ps == nil || len(ps.Headline()) == 0 {
			return math.Inf(1)
		}
		s := Summarize(ps.Headline())
		widest = math.Max(widest, halfWidthPct(s.Median, s.Lo, s.Hi))
	}
	return widest
}

// adaptiveRepeats reads a run's spec for adaptive repeats, as
// matrix.RepeatsSpec does: repeats: {min: 6, max: 20, width: 5%}. width is
// 0 when the repeats were fixed.
func adaptiveRepeats(spec string) (width float64, maxRounds int) {
	var h struct {
		Repeats yaml.Node `yaml:"repeats"`
	}
	if yaml.Unmarshal([]byte(spec), &h) != nil || h.Repeats.Kind != yaml.MappingNode {
		return 0, 0
	}
	for i := 0; i+1 < len(h.Repeats.Content); i += 2 {
		k, v := h.Repeats.Content[i].Value, h.Repeats.Content[i+1].Value
		switch k {
		case "width":
			width, _ = strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "%")), 64)
		case "max":
			maxRounds, _ = strconv.Atoi(v)
		}
	}
	return width, maxRounds
}

// widthWarning says which points of an adaptive run did not reach the
// target width; "" when all did or the repeats were fixed.
func widthWarning(r *Run) string {
	width, maxRounds := adaptiveRepeats(r.Info.Spec)
	if width <= 0 {
		return ""
	}
	wide := Wider(r, width)
	if len(wide) == 0 {
		return ""
	}
	var parts []string
	for _, p := range r.Points {
		if slices.Contains(wide, p.Index) {
			w := widestProbe(r, p)
			ws := "no interval yet"
			if isFinite(w) {
				ws = fmt.Sprintf("±%.1f%%", w)
			}
			parts = append(parts, fmt.Sprintf("%d (%s)", p.Index, ws))
		}
	}
	target := strconv.FormatFloat(width, 'f', -1, 64)
	measured := 0
	for _, p := range r.Points {
		if p.Measured() {
			measured++
		}
	}
	return fmt.Sprintf("repeats: %d of %d points did not reach the target width ±%s%% (repeats.max %d): %s; their figures are less certain than the rest", len(wide), measured, target, maxRounds, strings.Join(parts, ", "))
}
