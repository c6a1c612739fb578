package matrix

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/store"
)

// Point is one combination of knob values the sweep measures.
type Point struct {
	Index  int        // position in expansion order, stable for a spec
	Values KnobValues // every axis and fixed knob, canonical references
}

// Key names the point: "blocklist=on ids@lan=ips-inline".
func (p *Point) Key() string {
	parts := make([]string, len(p.Values))
	for i, kv := range p.Values {
		parts[i] = kv.Knob + "=" + kv.Value
	}
	return strings.Join(parts, " ")
}

// Value returns the point's value for a knob, or "".
func (p *Point) Value(knob string) string {
	for _, kv := range p.Values {
		if kv.Knob == knob {
			return kv.Value
		}
	}
	return ""
}

// Assignments are the point's knob=value strings, for configxml.SetAll.
func (p *Point) Assignments() []string {
	out := make([]string, len(p.Values))
	for i, kv := range p.Values {
		out[i] = kv.Knob + "=" + kv.Value
	}
	return out
}

// Step is one visit of a point: apply the changes, verify, settle, probe.
type Step struct {
	Round   int // 0-based; the repeat; store.DriftRound for the drift check
	Point   *Point
	Changes []configxml.Change // knob changes from the previous step's state
	Actions []configxml.Action // the service actions the changes need, once each
	Cost    time.Duration      // estimated time of the actions
}

// Plan is a validated, ordered sweep.
type Plan struct {
	Spec     *Spec
	Points   []*Point
	Baseline *Point
	Steps    []Step
	Seed     uint64
	Start    KnobValues // the knobs' values on the firewall before the sweep
	// Measured holds what service actions took on an earlier run of the
	// same target (MeasuredCosts); Estimate prefers it to the defaults.
	Measured map[configxml.Action]time.Duration
	// PointWarnings are what warning-level lint rules find in the points'
	// configs and not in the firewall's own, each with the points it holds
	// for; Identical are the groups of points whose configs are the same.
	PointWarnings []PointWarning
	Identical     [][]int
}

// PointWarning is one lint warning and the points (by index) whose
// configs have it.
type PointWarning struct {
	configxml.Finding
	Points []int
}

func (w PointWarning) String() string {
	return fmt.Sprintf("%s: %s %s: %s", pointList(w.Points), w.Rule, w.Name, w.Message)
}

// pointList names points by index, cut after ten: "point 3", "points 3, 7,
// 11", "points 1, 2, … and 40 more".
func pointList(idx []int) string {
	const shown = 10
	var parts []string
	for _, i := range idx[:min(shown, len(idx))] {
		parts = append(parts, strconv.Itoa(i))
	}
	if len(idx) > shown {
		parts = append(parts, "… and "+humanize.Comma(int64(len(idx)-shown))+" more")
	}
	if len(idx) == 1 {
		return "point " + parts[0]
	}
	return "points " + strings.Join(parts, ", ")
}

// Warnings are the spec's warnings, then the points': lint warnings
// collapsed by finding, and points whose configs are identical.
func (p *Plan) Warnings() []string {
	out := p.Spec.Warnings()
	for _, w := range p.PointWarnings {
		out = append(out, w.String())
	}
	for _, g := range p.Identical {
		out = append(out, fmt.Sprintf("%s have identical configs: each measures the same firewall; drop all but one (a value the config already has, or two values that write the same)", pointList(g)))
	}
	return out
}

// actionCost estimates what each service action takes on a real box; the
// cost-aware order keeps the expensive ones rare.
var actionCost = map[configxml.Action]time.Duration{
	configxml.ActionFirmware:        5 * time.Minute,
	configxml.ActionReboot:          3 * time.Minute,
	configxml.ActionReloadAll:       60 * time.Second,
	configxml.ActionInterfaces:      15 * time.Second,
	configxml.ActionIDSRestart:      20 * time.Second,
	configxml.ActionBlocklistUpdate: 30 * time.Second,
	configxml.ActionIPsecRestart:    10 * time.Second,
	configxml.ActionFilterReload:    2 * time.Second,
	configxml.ActionNone:            2 * time.Second,
}

// cheapestAction is the least any move to another point costs.
var cheapestAction = func() time.Duration {
	m := time.Duration(1<<63 - 1)
	for _, c := range actionCost {
		m = min(m, c)
	}
	return m
}()

// expensive is the cost from which a knob is not reordered at random.
const expensive = 10 * time.Second

func (s *Spec) knobCost(knob string) time.Duration { return actionCost[s.ActionFor(knob)] }

// Expand lists the points the axes and constraints allow, in the axes'
// written order (the first axis varies slowest).
// ctx stops a long expansion.
func (s *Spec) Expand(ctx context.Context) ([]*Point, error) {
	axes, err := s.canonicalAxes()
	if err != nil {
		return nil, err
	}
	fixed, err := canonical(s.Fixed)
	if err != nil {
		return nil, err
	}
	var points []*Point
	idx := make([]int, len(axes))
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vals := make(KnobValues, 0, len(axes)+len(fixed))
		for i, ax := range axes {
			vals = append(vals, KnobValue{ax.Knob, ax.Values[idx[i]]})
		}
		vals = append(vals, fixed...)
		p := &Point{Index: len(points), Values: vals}
		if ok, err := s.allowed(p); err != nil {
			return nil, err
		} else if ok {
			points = append(points, p)
		}
		// Next index, last axis fastest.
		i := len(axes) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(axes[i].Values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			break
		}
	}
	for i, p := range points {
		p.Index = i
	}
	if len(points) == 0 {
		return nil, &SpecError{Msg: "the constraints leave no point to measure; loosen an exclude, only or requires"}
	}
	return points, nil
}

func (s *Spec) canonicalAxes() ([]Axis, error) {
	out := make([]Axis, len(s.Axes))
	for i, ax := range s.Axes {
		ref, err := configxml.ParseRef(ax.Knob)
		if err != nil {
			return nil, &SpecError{Line: ax.line, Msg: err.Error()}
		}
		out[i] = Axis{Knob: ref.String(), line: ax.line}
		for _, v := range ax.Values {
			out[i].Values = append(out[i].Values, configxml.Canonical(ref.String(), v))
		}
	}
	return out, nil
}

func canonical(kvs KnobValues) (KnobValues, error) {
	out := make(KnobValues, len(kvs))
	for i, kv := range kvs {
		ref, err := configxml.ParseRef(kv.Knob)
		if err != nil {
			return nil, err
		}
		out[i] = KnobValue{ref.String(), configxml.Canonical(ref.String(), kv.Value)}
	}
	return out, nil
}

func matches(p *Point, set KnobValues) (bool, error) {
	c, err := canonical(set)
	if err != nil {
		return false, err
	}
	for _, kv := range c {
		if p.Value(kv.Knob) != kv.Value {
			return false, nil
		}
	}
	return true, nil
}

func (s *Spec) allowed(p *Point) (bool, error) {
	onlies, inOnly := 0, false
	for _, c := range s.Constraints {
		switch {
		case len(c.Exclude) > 0:
			if m, err := matches(p, c.Exclude); err != nil || m {
				return false, err
			}
		case len(c.Only) > 0:
			onlies++
			if m, err := matches(p, c.Only); err != nil {
				return false, err
			} else if m {
				inOnly = true
			}
		case len(c.If) > 0:
			m, err := matches(p, c.If)
			if err != nil {
				return false, err
			}
			if m {
				if ok, err := matches(p, c.Requires); err != nil || !ok {
					return false, err
				}
			}
		}
	}
	return onlies == 0 || inOnly, nil
}

// Check validates every value of the spec against the target's config:
// flavor, product version and interfaces. Nothing is changed.
func (s *Spec) Check(cfg *configxml.Config) error {
	_, err := s.checkAgainst(cfg)
	return err
}

// checkAgainst is Check returning the config sets' configs by name, as a point
// that names one starts from (checkConfigSets).
//
// It reports every problem it finds (SpecErrors); the values are checked
// on the config sets only once those load.
func (s *Spec) checkAgainst(cfg *configxml.Config) (map[string]*configxml.Config, error) {
	var errs SpecErrors
	if s.Tunnel != nil {
		if err := s.Tunnel.check(cfg); err != nil {
			errs.add(err)
		} else {
			cfg.DefineTunnel(s.Tunnel.spec(""))
		}
	}
	errs.add(s.checkValues(cfg, ""))
	sets, err := s.checkConfigSets(cfg)
	errs.add(err)
	if err == nil {
		// A point of a config set starts from it: each value holds there too.
		for _, name := range s.configNames() {
			errs.add(s.checkValues(sets[name], "config "+name+": "))
		}
	}
	for _, kv := range s.Actions {
		if configxml.Action(kv.Value) == configxml.ActionBlocklistUpdate && cfg.Flavor() != configxml.PfSense {
			errs.add(&SpecError{Msg: fmt.Sprintf("actions: %s: blocklist-update is pfBlockerNG's, which %s does not have", kv.Knob, cfg.Flavor())})
		}
	}
	if err := errs.err(); err != nil {
		return nil, err
	}
	return sets, nil
}

// checkValues checks every value the spec gives a knob against c, the
// config a point starts from; where names it in the errors ("config
// b.xml: ", or "" for the target's own).
func (s *Spec) checkValues(c *configxml.Config, where string) error {
	fail := func(line int, err error) error {
		return &SpecError{Line: line, Msg: fmt.Sprintf("%s%v (target runs %s %s)", where, err, c.Flavor(), c.Product().Version)}
	}
	check := func(line int, knob string, values ...string) error {
		switch knob {
		case "config":
			return nil // checkConfigSets
		case FirmwareKnob:
			// A version the box's boot environments hold: the sweep
			// checks it against them before anything changes.
			for _, value := range values {
				if value == "" || strings.ContainsAny(value, " \t\n'\"`$;&|<>\\/") {
					return &SpecError{Line: line, Msg: fmt.Sprintf("firmware %q: give a product version, such as 2.8.0-RELEASE or 26.1.2", value)}
				}
				if err := configxml.CheckVersion(c.Flavor(), value); err != nil {
					return &SpecError{Line: line, Msg: fmt.Sprintf("firmware %q: %v", value, err)}
				}
			}
			return nil
		}
		if configxml.CheckedTogether(knob) {
			// Each value with the spec's other knobs of the name at the
			// same value, the one combination in which none refuses
			// another; the combinations the points give are checkTogether's.
			name, _, _ := strings.Cut(knob, "@")
			for _, v := range values {
				set := []string{knob + "=" + v}
				for _, other := range s.knobNames() {
					if o, _, _ := strings.Cut(other, "@"); o == name && other != knob {
						set = append(set, other+"="+v)
					}
				}
				if err := c.CheckAll(set); err != nil {
					return fail(line, err)
				}
			}
			return nil
		}
		if err := c.CheckValues(knob, values); err != nil {
			return fail(line, err)
		}
		return nil
	}
	var errs SpecErrors
	for _, ax := range s.Axes {
		errs.add(check(ax.line, ax.Knob, ax.Values...))
	}
	for _, set := range []KnobValues{s.Fixed, s.Baseline} {
		for _, kv := range set {
			errs.add(check(0, kv.Knob, kv.Value))
		}
	}
	return errs.err()
}

// check holds the tunnel: section against the target's config, field by
// field, before a sweep would create the tunnel from it. The PSK file is
// the command's to read (it never enters the plan).
func (t *TunnelSpec) check(cfg *configxml.Config) error {
	bad := func(format string, args ...any) error {
		return &SpecError{Msg: "tunnel: " + fmt.Sprintf(format, args...)}
	}
	iface := cmp.Or(t.Interface, "wan")
	if !slices.ContainsFunc(cfg.Interfaces(), func(i configxml.Interface) bool { return i.Key == iface }) {
		var keys []string
		for _, i := range cfg.Interfaces() {
			keys = append(keys, i.Key)
		}
		return bad("interface %q is not an interface of the config; give one of %s (the interface's key, as in ids@ and rules@)", iface, strings.Join(keys, ", "))
	}
	for _, a := range []struct{ key, value string }{{"remote_addr", t.RemoteAddr}, {"local_addr", t.LocalAddr}} {
		if a.value == "" {
			if a.key == "remote_addr" {
				return bad("remote_addr is missing; give the peer's IP address")
			}
			continue
		}
		if _, err := netip.ParseAddr(a.value); err != nil {
			return bad("%s %q is not an IP address; give one such as 198.19.0.2 (fwab does not resolve names: the tunnel's end is where the probes go)", a.key, a.value)
		}
	}
	var nets []netip.Prefix
	for _, n := range []struct{ key, value string }{{"local_net", t.LocalNet}, {"remote_net", t.RemoteNet}} {
		if n.value == "" {
			return bad("%s is missing; give the network behind this end of the tunnel as address/bits, such as 198.18.1.0/24", n.key)
		}
		p, err := netip.ParsePrefix(n.value)
		if err != nil {
			return bad("%s %q is not a network; give address/bits, such as 198.18.1.0/24", n.key, n.value)
		}
		nets = append(nets, p)
	}
	if nets[0].Addr().Is4() != nets[1].Addr().Is4() {
		return bad("local_net %s and remote_net %s are of two address families; a phase 2 joins networks of one", t.LocalNet, t.RemoteNet)
	}
	return nil
}

func (t *TunnelSpec) spec(psk string) configxml.TunnelSpec {
	name := t.Name
	if name == "" {
		name = "fwab"
	}
	return configxml.TunnelSpec{
		Name: name, Interface: cmp.Or(t.Interface, "wan"), LocalAddr: t.LocalAddr, RemoteAddr: t.RemoteAddr,
		LocalNet: t.LocalNet, RemoteNet: t.RemoteNet, LocalID: t.LocalID, RemoteID: t.RemoteID, PSK: psk,
	}
}

// NewPlan expands and orders a checked spec. cfg is the firewall's current
// config: the first step's changes are relative to it. seed orders the
// randomized parts; the spec's own seed wins when it has one.
//
// A plan of many points takes a while: ctx stops it, with ctx's error.
func NewPlan(ctx context.Context, s *Spec, cfg *configxml.Config, seed uint64) (*Plan, error) {
	sets, err := s.checkAgainst(cfg)
	if err != nil {
		return nil, err
	}
	points, err := s.Expand(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkRouterMode(points); err != nil {
		return nil, err
	}
	if s.Seed != nil {
		seed = *s.Seed
	}
	p := &Plan{Spec: s, Points: points, Seed: seed, Baseline: points[0]}
	if len(s.Baseline) > 0 {
		p.Baseline = nil
		for _, pt := range points {
			if m, _ := matches(pt, s.Baseline); m {
				p.Baseline = pt
				break
			}
		}
		if p.Baseline == nil {
			return nil, &SpecError{Msg: "baseline: no point of the matrix matches it (is it excluded by a constraint?)"}
		}
	}
	for _, kv := range points[0].Values {
		if kv.Knob == "config" {
			p.Start = append(p.Start, KnobValue{kv.Knob, configxml.ConfigRunning})
			continue
		}
		v, err := cfg.Get(kv.Knob)
		if err != nil {
			return nil, err
		}
		p.Start = append(p.Start, KnobValue{kv.Knob, v})
	}
	if err := p.checkTogether(ctx, cfg, sets); err != nil {
		return nil, err
	}
	if err := p.lintPoints(ctx, cfg); err != nil {
		return nil, err
	}
	if s.Adaptive() && s.DriftCheck != nil && *s.DriftCheck {
		return nil, &SpecError{Msg: "drift_check: true with adaptive repeats: their extra rounds come after the planned ones, so the check would not measure the run's end; use a fixed repeats: N, or drop drift_check"}
	}
	if err := p.order(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// checkRouterMode refuses a point that disables the filter and also sets
// a knob that only pf makes work (NAT, rules, blocklist): with pf off no
// rule, translation or table is loaded, so the point would not measure
// what it names.
func checkRouterMode(points []*Point) error {
	var bad []string
	for _, pt := range points {
		if pt.Value("filter") != configxml.FilterDisabled {
			continue
		}
		for _, kv := range pt.Values {
			if why := configxml.NeedsFilter(kv.Knob, kv.Value); why != "" {
				bad = append(bad, fmt.Sprintf("point %d (%s): %s", pt.Index, pt.Key(), why))
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &SpecError{Msg: fmt.Sprintf("filter=disabled (router mode) loads no pf rules, so %s points would not measure what they name: "+
		"add a constraint such as `- if: {filter: disabled}` with `requires: {rules@lan: 0, nat.outbound: disabled}`:\n  %s", humanize.Comma(int64(len(bad))), capList(bad, 5))}
}

// knobNames are the knobs the axes and fixed: name, as written.
func (s *Spec) knobNames() []string {
	var out []string
	for _, ax := range s.Axes {
		out = append(out, ax.Knob)
	}
	for _, kv := range s.Fixed {
		out = append(out, kv.Knob)
	}
	return out
}

// checkTogether refuses a plan with a point whose knobs cannot hold
// together (configxml.CheckedTogether: OPNsense's one IDS mode for all
// interfaces; configxml.Entangled: a knob that reads what an xml:
// assignment writes, such as a rules count whose trackers an xml: path
// gives away), whatever lint rules the spec allows: the point could not
// be set up, or would be recorded under a name it does not have. Each
// distinct combination of such knobs is checked once.
// sets are the config sets' configs (Spec.checkAgainst).
func (p *Plan) checkTogether(ctx context.Context, cfg *configxml.Config, sets map[string]*configxml.Config) error {
	checked := map[string]error{}
	var bad []string
	for _, pt := range p.Points {
		if err := ctx.Err(); err != nil {
			return err
		}
		start, name := cfg, pt.Value("config")
		if c := sets[name]; c != nil {
			start = c
		}
		var set, all []string
		for _, kv := range pt.Values {
			a := kv.Knob + "=" + kv.Value
			if configxml.CheckedTogether(kv.Knob) {
				set = append(set, a)
			}
			if kv.Knob != "config" && kv.Knob != FirmwareKnob {
				all = append(all, a)
			}
		}
		for _, a := range start.Entangled(all) {
			if !slices.Contains(set, a) {
				set = append(set, a)
			}
		}
		if len(set) < 2 {
			continue // one alone was checked with the spec
		}
		key := name + "\x00" + strings.Join(set, "\x00")
		err, done := checked[key]
		if !done {
			err = start.CheckAll(set)
			checked[key] = err
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("point %d (%s): %v", pt.Index, pt.Key(), err))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return &SpecError{Msg: fmt.Sprintf("%s points cannot be set up as written: add constraints that keep their knobs together (if: … requires: …):\n  %s", humanize.Comma(int64(len(bad))), capList(bad, 5))}
}

// capList joins lines, at most n of them, saying how many more there are.
func capList(lines []string, n int) string {
	msg := strings.Join(lines[:min(n, len(lines))], "\n  ")
	if len(lines) > n {
		msg += fmt.Sprintf("\n  … and %s more", humanize.Comma(int64(len(lines)-n)))
	}
	return msg
}

// opaqueKnobs reports whether the points set knobs whose values do not
// tell their configs apart: xml: paths and whole configs, which can set
// what another knob does, or the same thing two ways. Without them, two
// points with different values have different configs (each knob reads
// back the value it was set to, configxml's TestSetEveryKnob), so only
// points with opaque knobs are compared whole.
func (p *Plan) opaqueKnobs() bool {
	for _, pt := range p.Points {
		for _, kv := range pt.Values {
			if strings.HasPrefix(kv.Knob, "xml:") || kv.Knob == "config" {
				return true
			}
		}
	}
	return false
}

// MaxIdentical bounds the plans whose points' configs are compared
// (Plan.Identical): each point's whole config is built, which for the
// largest plans would cost more than the rest of the plan.
const MaxIdentical = 2000

// lintPoints refuses a plan with a point whose config breaks an
// error-level lint rule the spec does not allow (allow: [FWAB001]): a sweep
// would push that config to the firewall. Warnings go to PointWarnings.
// Findings the firewall's config already has are not the points' doing
// and do not count.
//
// A rule's findings change only with the knobs it sees (LintRule.Sees), so
// each distinct combination of those is built and linted once, for every
// point that shares it, and a config built for one rule serves every rule
// that sees the same: a rules count no rule sees is never generated, and
// the work grows with the combinations, not the points.
//
// It also groups the points whose whole configs are the same (Identical),
// in plans of up to MaxIdentical points that set xml: or config knobs
// (opaqueKnobs).
func (p *Plan) lintPoints(ctx context.Context, cfg *configxml.Config) error {
	existing := map[string]bool{}
	for _, f := range configxml.Lint(cfg) {
		existing[f.Rule+"\x00"+f.Message] = true
	}
	var rules []configxml.LintRule
	for _, r := range configxml.LintRules {
		if r.Severity != configxml.SeverityError || !slices.Contains(p.Spec.Allow, r.ID) { // allowed: measured on purpose
			rules = append(rules, r)
		}
	}
	found := make([]map[string][]configxml.Finding, len(rules)) // by rule, by the point's seen knobs
	sees := make([]map[string]bool, len(rules))                 // r.Sees, by rule, by knob
	for i := range rules {
		found[i], sees[i] = map[string][]configxml.Finding{}, map[string]bool{}
	}
	type finding struct {
		point int
		line  string
	}
	var bad []finding
	warned := map[string]int{} // PointWarnings' index, by rule and message
	identical := len(p.Points) >= 2 && len(p.Points) <= MaxIdentical && p.opaqueKnobs()
	sums := map[[sha256.Size]byte][]int{} // points, by their configs' hash
	var sumOrder [][sha256.Size]byte
	data := cfg.Bytes()
	for _, pt := range p.Points {
		if err := ctx.Err(); err != nil {
			return err
		}
		built := map[string]*configxml.Config{} // this point's configs, by seen knobs
		build := func(seen *Point, key string) (*configxml.Config, error) {
			if c := built[key]; c != nil {
				return c, nil
			}
			c, err := p.Spec.pointConfigFrom(cfg, data, seen, "")
			if err != nil {
				return nil, &SpecError{Msg: fmt.Sprintf("point %d (%s): %v", pt.Index, pt.Key(), err)}
			}
			built[key] = c
			return c, nil
		}
		for i, r := range rules {
			seen := &Point{Index: pt.Index}
			for _, kv := range pt.Values {
				see, ok := sees[i][kv.Knob]
				if !ok {
					see = r.Sees(kv.Knob)
					sees[i][kv.Knob] = see
				}
				if see {
					seen.Values = append(seen.Values, kv)
				}
			}
			if len(seen.Values) == 0 {
				continue // the running config as it is: nothing new to find
			}
			// Joined with NUL: an xml: value may hold spaces and "=".
			key := strings.Join(seen.Assignments(), "\x00")
			fs, done := found[i][key]
			if !done {
				c, err := build(seen, key)
				if err != nil {
					return err
				}
				fs = r.Run(c)
				found[i][key] = fs
			}
			for _, f := range fs {
				fkey := f.Rule + "\x00" + f.Message
				switch {
				case existing[fkey]:
				case f.Severity == configxml.SeverityError:
					bad = append(bad, finding{pt.Index, fmt.Sprintf("point %d (%s): %s %s: %s", pt.Index, pt.Key(), f.Rule, f.Name, f.Message)})
				default:
					w, ok := warned[fkey]
					if !ok {
						w = len(p.PointWarnings)
						warned[fkey] = w
						p.PointWarnings = append(p.PointWarnings, PointWarning{Finding: f})
					}
					p.PointWarnings[w].Points = append(p.PointWarnings[w].Points, pt.Index)
				}
			}
		}
		if identical {
			c, err := build(pt, strings.Join(pt.Assignments(), "\x00"))
			if err != nil {
				return err
			}
			sum := configSum(c, pt.Value(FirmwareKnob))
			if _, ok := sums[sum]; !ok {
				sumOrder = append(sumOrder, sum)
			}
			sums[sum] = append(sums[sum], pt.Index)
		}
	}
	for _, sum := range sumOrder {
		if g := sums[sum]; len(g) > 1 {
			p.Identical = append(p.Identical, g)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	// In the points' order, each point's findings in the rules' order.
	slices.SortStableFunc(bad, func(a, b finding) int { return cmp.Compare(a.point, b.point) })
	var lines []string
	for _, f := range bad {
		lines = append(lines, f.line)
	}
	return &SpecError{Msg: fmt.Sprintf("%s point configs break a lint rule, and a sweep would push them to the firewall: fix the axes or constraints, or add allow: [RULE] to the spec to measure them on purpose:\n  %s", humanize.Comma(int64(len(bad))), capList(lines, 5))}
}

// configSum is the hash of a point's config without its <revision> (which
// names the change, not the config) and with the firmware it boots: points
// of two firmwares differ whatever their configs. c loses its revision.
func configSum(c *configxml.Config, firmware string) [sha256.Size]byte {
	if rev := c.Root().SelectElement("revision"); rev != nil {
		c.Root().RemoveChild(rev)
	}
	h := sha256.New()
	h.Write([]byte(firmware + "\x00"))
	h.Write(c.Bytes())
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

// order lays out the steps: every point once per round.
func (p *Plan) order(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(p.Seed, 0x66776162)) // "fwab"
	base, err := p.baseOrder(ctx)
	if err != nil {
		return err
	}
	state := map[string]string{}
	for _, kv := range p.Start {
		state[kv.Knob] = kv.Value
	}
	for round := 0; round < p.Spec.Repeats; round++ {
		var order []*Point
		switch p.Spec.Order {
		case OrderAsWritten:
			order = slices.Clone(base)
		case OrderRandomized:
			order = slices.Clone(base)
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		default:
			order = slices.Clone(base)
			if round%2 == 1 {
				slices.Reverse(order) // the last point of a round is the first of the next
			}
			p.shuffleCheap(order, rng)
		}
		for _, pt := range order {
			p.Steps = append(p.Steps, p.step(round, pt, state))
		}
	}
	if p.DriftCheck() {
		p.Steps = append(p.Steps, p.step(store.DriftRound, p.Baseline, state))
	}
	return nil
}

// step is a visit of pt from state, which it updates.
func (p *Plan) step(round int, pt *Point, state map[string]string) Step {
	st := Step{Round: round, Point: pt}
	for _, kv := range pt.Values {
		if state[kv.Knob] != kv.Value {
			a := p.Spec.ActionFor(kv.Knob)
			st.Changes = append(st.Changes, configxml.Change{Knob: kv.Knob, From: state[kv.Knob], To: kv.Value, Action: a})
			if !slices.Contains(st.Actions, a) {
				st.Actions = append(st.Actions, a)
			}
			state[kv.Knob] = kv.Value
		}
	}
	st.Actions = configxml.Effective(st.Actions)
	for _, a := range st.Actions {
		st.Cost += actionCost[a]
	}
	return st
}

// DriftCheck reports whether the plan measures its baseline once more
// after every regular round (store.DriftRound), so that a comparison with
// another run can tell a change from what drifted while the run ran. It is
// the spec's drift_check where given. By default it is on, unless a
// firmware axis interleaves firmwares in the run: two runs cannot be
// paired by round, and the drift check costs one visit of one point, a
// step among points × repeats; where the firmwares alternate within the
// run, the comparison pairs them by round instead, and the check would
// cost a reboot. Adaptive repeats have it off: their extra rounds come
// after the planned steps, so the check would not be the run's end
// (NewPlan refuses drift_check: true with them).
func (p *Plan) DriftCheck() bool {
	if p.Spec.DriftCheck != nil {
		return *p.Spec.DriftCheck
	}
	if p.Spec.Adaptive() {
		return false
	}
	for _, ax := range p.Spec.Axes {
		if strings.TrimSpace(ax.Knob) == "firmware" && len(ax.Values) > 1 {
			return false
		}
	}
	return true
}

// baseOrder is the points' order within a round before any shuffling. For
// cost-aware plans it is greedy: from the firewall's current state, always
// go to the unvisited point that is cheapest to reach, so that an expensive
// knob changes as rarely as the matrix allows. Rounds then alternate
// direction, so a round starts where the last one ended.
func (p *Plan) baseOrder(ctx context.Context) ([]*Point, error) {
	if p.Spec.Order != OrderCostAware {
		return p.Points, nil
	}
	current := &Point{Values: p.Start}
	transition := p.Spec.transitions()
	left := slices.Clone(p.Points)
	var out []*Point
	for len(left) > 0 {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		best := 0
		bestCost := transition(current, left[0])
		for i, pt := range left[1:] {
			if bestCost <= cheapestAction {
				break // no other point is cheaper to reach: the scan's answer is known
			}
			if c := transition(current, pt); c < bestCost {
				best, bestCost = i+1, c
			}
		}
		current = left[best]
		out = append(out, current)
		left = slices.Delete(left, best, best+1)
	}
	return out, nil
}

// transitions returns the cost of the service actions that take a point a
// to b, each knob's action looked up once: the cost-aware order asks it
// for many pairs of points.
func (s *Spec) transitions() func(a, b *Point) time.Duration {
	acts := map[string]configxml.Action{}
	var actions []configxml.Action
	return func(a, b *Point) time.Duration {
		actions = actions[:0]
		for i, kv := range b.Values {
			var from string
			if i < len(a.Values) && a.Values[i].Knob == kv.Knob {
				from = a.Values[i].Value // points list their knobs alike
			} else {
				from = a.Value(kv.Knob)
			}
			if from == kv.Value {
				continue
			}
			act, ok := acts[kv.Knob]
			if !ok {
				act = s.ActionFor(kv.Knob)
				acts[kv.Knob] = act
			}
			if !slices.Contains(actions, act) {
				actions = append(actions, act)
			}
		}
		var total time.Duration
		for _, act := range configxml.Effective(actions) {
			total += actionCost[act]
		}
		return total
	}
}

// shuffleCheap randomizes the order within each run of points that share
// every expensive knob's value: cheap transitions (a filter reload) are
// worth a random order, which keeps slow drift from masquerading as an
// effect.
func (p *Plan) shuffleCheap(order []*Point, rng *rand.Rand) {
	sig := func(pt *Point) string {
		var b strings.Builder
		for _, kv := range pt.Values {
			if p.Spec.knobCost(kv.Knob) >= expensive {
				b.WriteString(kv.Knob + "=" + kv.Value + " ")
			}
		}
		return b.String()
	}
	for i := 0; i < len(order); {
		j := i + 1
		for j < len(order) && sig(order[j]) == sig(order[i]) {
			j++
		}
		run := order[i:j]
		rng.Shuffle(len(run), func(a, b int) { run[a], run[b] = run[b], run[a] })
		i = j
	}
}

// Estimate is the plan's expected duration: the service actions (at the
// costs measured on an earlier run of the target where the plan has them,
// else the defaults), settling and the probes themselves.
func (p *Plan) Estimate() time.Duration {
	var probes time.Duration
	for _, pr := range p.Spec.Probes {
		n := max(1, len(pr.Lengths))
		// iperf3 runs omit + duration, plus about a second to start and stop
		each := pr.Omit.D() + pr.Duration.D() + time.Second
		if pr.Kind == "ndr" {
			// A rate search: about six trials at the final duration's
			// worth, shorter ones included, per frame size.
			n, each = len(pr.FrameSizes), 6*(pr.Duration.D()+time.Second)
		}
		probes += time.Duration(n) * each
	}
	var total time.Duration
	for _, st := range p.Steps {
		for _, a := range st.Actions {
			if c, ok := p.Measured[a]; ok {
				total += c
			} else {
				total += actionCost[a]
			}
		}
		total += probes + p.Spec.Settle.Pause.D() + time.Second
	}
	return total + time.Duration(len(p.Points))*p.Spec.IdleDuration()
}

// ServiceActions counts the actions the plan runs, by kind.
func (p *Plan) ServiceActions() map[configxml.Action]int {
	out := map[configxml.Action]int{}
	for _, st := range p.Steps {
		for _, a := range st.Actions {
			out[a]++
		}
	}
	return out
}

// ExtraRound lays out one round of adaptive repeats (Spec.Adaptive): the
// points given, which are still wider than the target, and the baseline
// with them, so that each comparison keeps its baseline measured alongside
// it, in a random order seeded by the plan's seed and the round. The
// sweep works out each step's changes as it goes.
func (p *Plan) ExtraRound(round int, points []int) []Step {
	var out []Step
	for _, pt := range p.Points {
		if pt == p.Baseline || slices.Contains(points, pt.Index) {
			out = append(out, Step{Round: round, Point: pt})
		}
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x66776162+uint64(round)))
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
