// Package matrix reads a sweep's matrix spec, checks it against the target
// firewall, expands it into an ordered plan of points and repeats, and runs
// the sweep.
package matrix

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/yamlerr"
	"github.com/fwab/fwab/probe"
)

// Spec is a matrix.yaml.
type Spec struct {
	Name        string       `yaml:"name"`
	Description string       `yaml:"description"`
	Target      string       `yaml:"target"`
	Axes        Axes         `yaml:"axes"`
	Fixed       KnobValues   `yaml:"fixed"`    // applied at every point
	Actions     KnobValues   `yaml:"actions"`  // xml:PATH → the service action that makes its change take effect
	Baseline    KnobValues   `yaml:"baseline"` // the point others are compared with; default the first
	Constraints []Constraint `yaml:"constraints"`
	Probes      []ProbeSpec  `yaml:"probes"`
	// Repeats is the rounds every point gets: repeats: N, or repeats.min.
	Repeats int `yaml:"-"`
	// RepeatsSpec is the repeats key as written: a number, or adaptive
	// repeats {min, max, width} (Adaptive).
	RepeatsSpec RepeatsSpec `yaml:"repeats"`
	Order       Order       `yaml:"order"`
	Seed        *uint64     `yaml:"seed"`
	Settle      Settle      `yaml:"settle"`
	Power       *PowerSpec  `yaml:"power"`
	// Idle is how long the idle phase before each point's first probe
	// samples the DUT with no traffic; nil is DefaultIdle, 0 none.
	Idle *Duration `yaml:"idle"`
	// DriftCheck re-measures the baseline at the run's end; nil is the
	// default (Plan.DriftCheck).
	DriftCheck *bool `yaml:"drift_check"`
	// Blackout measures the traffic each apply drops (probe.Blackout);
	// nil measures none.
	Blackout *BlackoutSpec `yaml:"blackout"`
	// Canary checks, at points running inline IPS, that the IPS still
	// drops what its rules say during every probe; nil or false checks
	// nothing.
	Canary *CanarySpec `yaml:"canary"`
	Tunnel *TunnelSpec `yaml:"tunnel"` // the IPsec tunnel ipsec@ axes create when absent
	Allow  []string    `yaml:"allow"`  // lint rules (by ID) a point may break, e.g. FWAB001 to measure an unsafe config on purpose
	// ConfigSets are the files the config axis names, read by
	// LoadConfigSets (ParseFile), by the name the spec gives them.
	ConfigSets map[string]*ConfigSet `yaml:"-"`

	hash string
	raw  []byte
}

// Axis is one knob and the values the sweep gives it, in written order.
type Axis struct {
	Knob   string
	Values []string
	line   int
}

// Axes keeps the order they were written in: it is the default point order.
type Axes []Axis

func (a *Axes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, "axes must be a mapping of knob: [values]")
	}
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		ax := Axis{Knob: k.Value, line: k.Line}
		switch v.Kind {
		case yaml.SequenceNode:
			for _, item := range v.Content {
				if item.Kind != yaml.ScalarNode {
					return lineErr(item, "axis %s: values must be plain scalars", k.Value)
				}
				ax.Values = append(ax.Values, item.Value)
			}
		case yaml.ScalarNode:
			ax.Values = []string{v.Value}
		default:
			return lineErr(v, "axis %s: give a list of values", k.Value)
		}
		*a = append(*a, ax)
	}
	return nil
}

// KnobValues is knob → value, in written order.
type KnobValues []KnobValue

// KnobValue is one knob=value pair.
type KnobValue struct{ Knob, Value string }

func (kv *KnobValues) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, "expected a mapping of knob: value")
	}
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return lineErr(v, "knob %s: give one value", k.Value)
		}
		*kv = append(*kv, KnobValue{k.Value, v.Value})
	}
	return nil
}

// Constraint drops points. Exclude drops the points that match it; Only keeps
// just the points that match one of the Only constraints; Requires drops the
// points that match If but not Then.
type Constraint struct {
	Exclude  KnobValues `yaml:"exclude"`
	Only     KnobValues `yaml:"only"`
	If       KnobValues `yaml:"if"`
	Requires KnobValues `yaml:"requires"`
	line     int
}

// ProbeSpec is one probe run at every point and repeat.
type ProbeSpec struct {
	Name      string   `yaml:"name"`
	Kind      string   `yaml:"kind"`      // iperf3 (default); ndr: a rate search per frame size; connect: new TCP connections a second
	Direction string   `yaml:"direction"` // up | down | bidir
	Parallel  int      `yaml:"parallel"`
	Duration  Duration `yaml:"duration"`
	Omit      Duration `yaml:"omit"`
	UDP       bool     `yaml:"udp"`
	Lengths   []int    `yaml:"lengths"` // a packet-size sweep: one probe per length
	Bitrate   string   `yaml:"bitrate"`
	Affinity  string   `yaml:"affinity"`
	Window    string   `yaml:"window"` // socket buffer size (iperf3 -w)
	Ping      bool     `yaml:"ping"`   // latency under load
	// FrameSizes are the Ethernet frame sizes of a kind: ndr probe, one
	// search each (default RFC 2544's seven); LossTolerance the loss a
	// passing rate may have ("0" for the NDR, "0.5%" for a PDR).
	FrameSizes    []string `yaml:"frame_sizes"`
	LossTolerance string   `yaml:"loss_tolerance"`
	// Generator sends a kind: ndr probe's trials: iperf3 (the default);
	// trafgen, whole frames through AF_PACKET from a Linux sender; or
	// pkt-gen, whole frames through netmap from a FreeBSD sender (one
	// frame size a search): for small frames at a link's rate, one
	// direction (up or down), counted at a Linux receiver's interface.
	Generator string `yaml:"generator"`
	// Objects are a kind: http probe's object sizes, one load each
	// (default RFC 9411's 1, 16, 64 and 256 KiB); HTTPS fetches them over
	// TLS; Rate is requests a second in all, a fixed rate (none: as fast
	// as the answers come).
	Objects []string `yaml:"objects"`
	HTTPS   bool     `yaml:"https"`
	Rate    float64  `yaml:"rate"`
	// Links names the target's endpoint pairs the probe runs on (default:
	// its first); Concurrent runs them all at once, summed, instead of
	// one after another.
	Links      []string `yaml:"links"`
	Concurrent bool     `yaml:"concurrent"`
	// CPUSet pins each side's iperf3 to cores of its endpoint.
	CPUSet CPUSet `yaml:"cpuset"`
}

// CPUSet is a probe's cores per side, as cpuset lists ("2", "0-1,4"):
// Client and Server on every link, save the sides Links gives cores of
// their own (links run at once on one host compete for the cores they
// share).
type CPUSet struct {
	Client string                    `yaml:"client"`
	Server string                    `yaml:"server"`
	Links  map[string]probe.CPUSides `yaml:"links"`
}

// ndrMTU is the MTU frame sizes are checked against: jumbo frames are not
// searched.
const ndrMTU = 1500

// tolerance is the probe's loss_tolerance in percent.
func (p ProbeSpec) tolerance() (float64, error) {
	t := strings.TrimSpace(p.LossTolerance)
	if t == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(t, "%")), 64)
	if err != nil || !(v >= 0 && v < 100) {
		return 0, fmt.Errorf("probe %s: loss_tolerance %q: give a percentage from 0 to below 100, such as 0.5%%", p.Name, p.LossTolerance)
	}
	return v, nil
}

// DefaultIdle is the idle phase of a spec that does not set one: long
// enough for several DUT and power readings at one a second.
const DefaultIdle = 10 * time.Second

// MaxIdle bounds the idle phase.
const MaxIdle = 10 * time.Minute

// IdleDuration is how long the idle phase before each point's first probe
// lasts; 0 when the spec turns it off (idle: 0s).
func (s *Spec) IdleDuration() time.Duration {
	if s.Idle == nil {
		return DefaultIdle
	}
	return s.Idle.D()
}

// Pings reports whether some probe measures latency under load (ping:
// true), so that the idle phase measures it at rest too.
func (s *Spec) Pings() bool {
	return slices.ContainsFunc(s.Probes, func(p ProbeSpec) bool { return p.Ping })
}

// Settle is how fwab decides traffic passes after an apply.
type Settle struct {
	Timeout Duration `yaml:"timeout"` // give up on the point after this
	Pause   Duration `yaml:"pause"`   // wait after traffic passes, before probing
}

// BlackoutSpec is the spec's blackout: a stream held through the
// firewall while each step's change is applied.
type BlackoutSpec struct {
	// Rate is datagrams a second ("2000"), a bit rate of Size-byte
	// payloads with a unit as iperf3 -b takes it ("10M"), or a share of
	// the baseline's measured throughput ("50%", Share), as FD.io CSIT
	// holds a load below the NDR while the DUT is reconfigured.
	Rate  string `yaml:"rate"`
	Size  int    `yaml:"size"`  // UDP payload bytes; default 64, 1280 for a share
	Conns *int   `yaml:"conns"` // TCP connections held across; default 4, 0 none
}

// Share is the rate's share of the baseline's throughput (0.5 for
// "50%"); 0 for a rate of its own, or one that does not parse.
func (b *BlackoutSpec) Share() float64 {
	pct, ok := strings.CutSuffix(strings.TrimSpace(b.Rate), "%")
	if !ok {
		return 0
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
	if err != nil || !(v >= 1 && v <= 100) {
		return 0
	}
	return v / 100
}

// Probe is the stream the spec asks for. For a share (Share) its Rate is
// 0: the sweep sets it at each step from what it has measured.
func (b *BlackoutSpec) Probe() (probe.Blackout, error) {
	out := probe.Blackout{Size: b.Size, Conns: 4}
	if b.Conns != nil {
		out.Conns = *b.Conns
	}
	rate := strings.TrimSpace(b.Rate)
	if out.Size == 0 {
		out.Size = 64
		if strings.HasSuffix(rate, "%") {
			// The throughput probe's load is of full-size packets: a
			// share of its bit rate in near-full-size datagrams is about
			// a share of its packet rate too (in 64-byte ones, twenty
			// times more). 1280 leaves room for a tunnel's headers
			// (ESP with NAT-T, WireGuard's 1420 MTU): no fragments.
			out.Size = 1280
		}
	}
	switch {
	case rate == "":
		out.Rate = 1000
	case strings.HasSuffix(rate, "%"):
		if b.Share() == 0 {
			return out, &SpecError{Msg: fmt.Sprintf("blackout: rate %q: a share of the baseline's throughput is a percentage, use 1%% to 100%% (such as 50%%)", b.Rate)}
		}
	default:
		if v, err := strconv.ParseFloat(rate, 64); err == nil {
			out.Rate = v
			break
		}
		bits, err := probe.ParseBitrate(rate)
		if err != nil {
			return out, &SpecError{Msg: fmt.Sprintf("blackout: %v; or datagrams a second, such as 2000", err)}
		}
		out.Rate = bits / 8 / float64(out.Size)
	}
	if out.Conns == 0 {
		out.Conns = -1 // none: probe.Blackout's zero is its default
	}
	if err := out.Validate(); err != nil {
		return out, &SpecError{Msg: "blackout: " + strings.TrimPrefix(err.Error(), "blackout ")}
	}
	if out.Rate < 10 && b.Share() == 0 {
		return out, &SpecError{Msg: fmt.Sprintf("blackout: %.3g datagrams a second resolves a blackout no finer than %.0f ms; give at least 10 (default 1000)", out.Rate, 1000/out.Rate)}
	}
	return out, nil
}

// PowerSpec reads a power meter, or records a figure entered by hand.
type PowerSpec struct {
	URL      string  `yaml:"url"`
	JSONPath string  `yaml:"json_path"`
	Watts    float64 `yaml:"watts"`
}

// TunnelSpec describes the IPsec tunnel an ipsec@ axis creates if absent.
// The PSK is read from a file, never written in the spec.
type TunnelSpec struct {
	Name       string `yaml:"name"`
	Interface  string `yaml:"interface"`
	LocalAddr  string `yaml:"local_addr"`
	RemoteAddr string `yaml:"remote_addr"`
	LocalNet   string `yaml:"local_net"`
	RemoteNet  string `yaml:"remote_net"`
	LocalID    string `yaml:"local_id"`
	RemoteID   string `yaml:"remote_id"`
	PSKFile    string `yaml:"psk_file"`
}

// RepeatsSpec is repeats: 6, or repeats: {min: 6, max: 20, width: 5%}:
// after min rounds, rounds that measure the points whose median's
// confidence interval is still wider than ±width (in percent of the
// median) together with the baseline, until every point meets it or max
// rounds are done.
type RepeatsSpec struct {
	Min, Max int
	Width    float64 // percent; 0 when the repeats are fixed
}

func (r *RepeatsSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		if err := n.Decode(&r.Min); err != nil {
			return err // yamlerr words it
		}
		r.Max = r.Min
		return nil
	case yaml.MappingNode:
	default:
		return lineErr(n, "repeats: give a number (repeats: 6) or {min: 6, max: 20, width: 5%%}")
	}
	for i := 0; i < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "min", "max":
			var x int
			if err := v.Decode(&x); err != nil {
				return lineErr(v, "repeats.%s: %q is not a whole number", k.Value, v.Value)
			}
			if k.Value == "min" {
				r.Min = x
			} else {
				r.Max = x
			}
		case "width":
			w, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v.Value), "%")), 64)
			if err != nil || !(w > 0 && w < 100) {
				return lineErr(v, "repeats.width: %q is not a percentage above 0 and below 100, such as 5%%", v.Value)
			}
			r.Width = w
		default:
			return lineErr(k, "repeats key %q is not one of min, max, width", k.Value)
		}
	}
	if r.Width == 0 {
		return lineErr(n, "repeats: give width (the target ± of each median, such as width: 5%%) with min and max, or a plain number of repeats")
	}
	return nil
}

// Adaptive reports whether the spec asks for rounds beyond Repeats until
// the intervals are narrow enough.
func (s *Spec) Adaptive() bool { return s.RepeatsSpec.Width > 0 && s.RepeatsSpec.Max > s.Repeats }

// Order is how points are ordered within a round.
type Order string

const (
	OrderCostAware  Order = "cost-aware" // fewest expensive transitions; cheap knobs randomized per round
	OrderRandomized Order = "randomized" // every round a fresh random order
	OrderAsWritten  Order = "as-written" // axes' written order, every round
)

// Duration is a time.Duration written as "10s" or a number of seconds.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if v, err := time.ParseDuration(n.Value); err == nil {
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := n.Decode(&secs); err != nil {
		return lineErr(n, "%q is not a duration such as 10s or 1m30s", n.Value)
	}
	*d = Duration(time.Duration(secs * float64(time.Second)))
	return nil
}

func (d Duration) D() time.Duration { return time.Duration(d) }

// SpecError is a problem in a matrix spec, with its line where known.
type SpecError struct {
	Line int
	Msg  string
}

func (e *SpecError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// SpecErrors are every problem found in a spec, in the order checked.
type SpecErrors []*SpecError

// maxShown is how many of a long list of problems are printed.
const maxShown = 20

func (es SpecErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return fmt.Sprintf("%d problems:\n  %s", len(es), capList(lines, maxShown))
}

// Unwrap gives the problems one by one (errors.As finds the first).
func (es SpecErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// add records err: a *SpecError, SpecErrors, or another error as a
// SpecError of its own. nil is nothing.
func (es *SpecErrors) add(err error) {
	switch e := err.(type) {
	case nil:
	case SpecErrors:
		*es = append(*es, e...)
	case *SpecError:
		*es = append(*es, e)
	default:
		*es = append(*es, &SpecError{Msg: err.Error()})
	}
}

// err is nil, the one problem, or all of them.
func (es SpecErrors) err() error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return es[0]
	}
	return es
}

func lineErr(n *yaml.Node, format string, args ...any) error {
	return &SpecError{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// Parse reads a matrix spec strictly: unknown fields are errors. Defaults
// are filled in and everything that can be checked without the target is
// checked.
func Parse(r io.Reader) (*Spec, error) {
	raw, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > 1<<20 {
		return nil, &SpecError{Msg: "the spec is larger than 1 MiB"}
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &SpecError{Msg: "the spec is empty"}
		}
		return nil, yamlErr(yamlerr.Translate(err, raw, &s))
	}
	s.raw = raw
	sum := sha256.Sum256(raw)
	s.hash = hex.EncodeToString(sum[:])
	s.defaults()
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// UnmarshalYAML records the constraint's line and refuses unknown keys
// (yaml.v3 does not check them below a custom unmarshaler).
func (c *Constraint) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return lineErr(n, "a constraint is a mapping: exclude:, only:, or if: with requires:")
	}
	for i := 0; i < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !slices.Contains([]string{"exclude", "only", "if", "requires"}, k) {
			return lineErr(n.Content[i], "constraint key %q is not one of exclude, only, if, requires", k)
		}
	}
	type plain Constraint
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*c = Constraint(p)
	c.line = n.Line
	return nil
}

// yamlErr turns a translated yaml.v3 error ("line 3: …") into a SpecError.
func yamlErr(err error) error {
	var se *SpecError
	if errors.As(err, &se) {
		return se
	}
	msg := err.Error()
	var line int
	if n, _ := fmt.Sscanf(msg, "line %d:", &line); n == 1 {
		msg = strings.TrimSpace(msg[strings.Index(msg, ":")+1:])
		return &SpecError{Line: line, Msg: msg}
	}
	return &SpecError{Msg: msg}
}

// Hash is the SHA-256 of the spec's bytes, recorded with every run.
func (s *Spec) Hash() string { return s.hash }

// DefaultSeed is the seed a plan of this spec uses when neither the spec
// nor the command line gives one: taken from the spec's hash, so that the
// plan a dry run prints is the plan the sweep runs.
func (s *Spec) DefaultSeed() uint64 {
	b, _ := hex.DecodeString(s.hash[:16])
	var seed uint64
	for _, c := range b {
		seed = seed<<8 | uint64(c)
	}
	return seed >> 1
}

// Raw is the spec as written.
func (s *Spec) Raw() []byte { return s.raw }

func (s *Spec) defaults() {
	if s.Repeats == 0 {
		s.Repeats = s.RepeatsSpec.Min
	}
	if s.Repeats == 0 {
		s.Repeats = 6 // the fewest with a finite 95 % interval for the median; a U test needs 5
	}
	if s.RepeatsSpec.Width > 0 && s.RepeatsSpec.Max == 0 {
		s.RepeatsSpec.Max = max(20, s.Repeats)
	}
	if s.Order == "" {
		s.Order = OrderCostAware
	}
	if s.Settle.Timeout == 0 {
		s.Settle.Timeout = Duration(60 * time.Second)
	}
	if len(s.Probes) == 0 {
		s.Probes = []ProbeSpec{{Name: "up", Direction: "up"}, {Name: "down", Direction: "down"}}
	}
	for i := range s.Probes {
		p := &s.Probes[i]
		if p.Kind == "" {
			p.Kind = "iperf3"
		}
		if p.Kind == "http" && len(p.Objects) == 0 {
			p.Objects = slices.Clone(HTTPObjects)
		}
		if p.Kind == "ndr" && len(p.FrameSizes) == 0 {
			for _, f := range probe.RFC2544FrameSizes {
				p.FrameSizes = append(p.FrameSizes, strconv.Itoa(f))
			}
		}
		if p.Direction == "" {
			p.Direction = "up"
		}
		if p.Duration == 0 {
			p.Duration = Duration(10 * time.Second)
		}
		if p.Name == "" {
			p.Name = p.Direction
			if p.UDP {
				p.Name += "-udp"
			}
			if p.Kind == "http" {
				p.Name = "http"
				if p.HTTPS {
					p.Name = "https"
				}
			}
			if p.Kind == "ndr" {
				p.Name = "ndr"
				if p.LossTolerance != "" {
					p.Name = "pdr"
				}
			}
		}
	}
}

// MaxPoints bounds the axes' product and MaxSteps the points times the
// repeats: beyond them expanding and ordering the matrix takes memory and
// time no sweep could use (10,000 points of 10 s each is 28 hours).
const (
	MaxPoints = 10_000
	MaxSteps  = 200_000
)

// check validates what needs no target. It reports every problem it finds
// (SpecErrors), each axis, probe and constraint checked on its own.
func (s *Spec) check() error {
	if len(s.Axes) == 0 {
		return &SpecError{Msg: "the spec has no axes: give at least one knob and its values under axes:"}
	}
	var errs SpecErrors
	seen := map[string]bool{}
	for _, ax := range s.Axes {
		errs.add(func() error {
			ref, err := configxml.ParseRef(ax.Knob)
			if err != nil {
				return &SpecError{Line: ax.line, Msg: err.Error()}
			}
			key := ref.String()
			if seen[key] {
				return &SpecError{Line: ax.line, Msg: fmt.Sprintf("axis %s appears twice", key)}
			}
			seen[key] = true
			if len(ax.Values) == 0 {
				return &SpecError{Line: ax.line, Msg: fmt.Sprintf("axis %s has no values", key)}
			}
			canon := map[string]string{} // canonical value → as written
			for _, v := range ax.Values {
				c := configxml.Canonical(key, v)
				if first, ok := canon[c]; ok {
					if first == v {
						return &SpecError{Line: ax.line, Msg: fmt.Sprintf("axis %s lists %q twice", key, v)}
					}
					return &SpecError{Line: ax.line, Msg: fmt.Sprintf("axis %s lists %q and %q, which are the same value", key, first, v)}
				}
				canon[c] = v
			}
			return nil
		}())
	}
	combos := 1
	for _, ax := range s.Axes {
		combos *= max(1, len(ax.Values))
		if combos > MaxPoints {
			// The matrix as written cannot be planned: what depends on
			// its size is not checked.
			errs.add(&SpecError{Line: ax.line, Msg: fmt.Sprintf("the axes make more than %d points (at axis %s); split the matrix into several specs", MaxPoints, ax.Knob)})
			return errs.err()
		}
	}
	for _, kv := range s.Fixed {
		errs.add(func() error {
			ref, err := configxml.ParseRef(kv.Knob)
			if err != nil {
				return &SpecError{Msg: "fixed: " + err.Error()}
			}
			if seen[ref.String()] {
				return &SpecError{Msg: fmt.Sprintf("fixed: %s is also an axis; a knob is either fixed or swept", ref)}
			}
			return nil
		}())
	}
	for _, kv := range s.Actions {
		errs.add(func() error {
			ref, err := configxml.ParseRef(kv.Knob)
			if err != nil {
				return &SpecError{Msg: "actions: " + err.Error()}
			}
			if ref.Name != "xml" {
				return &SpecError{Msg: fmt.Sprintf("actions: %s has its own action (%s); actions: names one for xml: knobs only", ref, configxml.ActionFor(ref.String()))}
			}
			if !seen[ref.String()] && !s.fixedHas(ref.String()) {
				return &SpecError{Msg: fmt.Sprintf("actions: %s is neither an axis nor fixed", ref)}
			}
			if !slices.Contains(configxml.XMLActions, configxml.Action(kv.Value)) {
				return &SpecError{Msg: fmt.Sprintf("actions: %s: %q is not a service action; known actions: %s", ref, kv.Value, joinActions(configxml.XMLActions))}
			}
			return nil
		}())
	}
	errs.add(s.checkRepeats(combos))
	switch s.Order {
	case OrderCostAware, OrderRandomized, OrderAsWritten:
	default:
		errs.add(&SpecError{Msg: fmt.Sprintf("order: %q is not one of cost-aware, randomized, as-written", s.Order)})
	}
	if s.Blackout != nil {
		if _, err := s.Blackout.Probe(); err != nil {
			errs.add(err)
		} else if s.Blackout.Share() > 0 && s.ThroughputProbe() == "" {
			errs.add(&SpecError{Msg: fmt.Sprintf("blackout: rate %s is a share of the baseline's throughput, and no probe measures one: add a throughput probe (kind iperf3), or give datagrams a second (2000)", s.Blackout.Rate)})
		}
	}
	if s.Canary.On() {
		if _, err := s.Canary.Probe(probe.NonceFrom("check")); err != nil {
			errs.add(err)
		}
	}
	if d := s.IdleDuration(); d < 0 || d > MaxIdle {
		errs.add(&SpecError{Msg: fmt.Sprintf("idle: %v is outside 0s..%v (0s turns the idle phase off)", d, MaxIdle)})
	}
	names := map[string]bool{}
	probesOK := true
	for _, p := range s.Probes {
		err := p.check(names)
		probesOK = probesOK && err == nil
		errs.add(err)
	}
	for _, id := range s.Allow {
		if !slices.ContainsFunc(configxml.LintRules, func(r configxml.LintRule) bool { return r.ID == id }) {
			errs.add(&SpecError{Msg: fmt.Sprintf("allow: %s is no lint rule (fwab config lint --help lists them)", id)})
		}
	}
	// What iperf3 and the power meter would refuse is refused here, so that
	// check, plan and --dry-run accept no spec the sweep then refuses.
	if probesOK {
		for _, pr := range s.ProbeRuns() {
			if err := pr.Validate(); err != nil {
				errs.add(&SpecError{Msg: fmt.Sprintf("probe %s: %v", pr.Name, err)})
			}
		}
	}
	if s.Power != nil && s.Power.URL == "" && s.Power.Watts <= 0 {
		errs.add(&SpecError{Msg: "power: give url (and json_path) of a meter, or watts measured by hand"})
	} else if _, err := s.PowerMeter(); err != nil {
		errs.add(err)
	}
	for _, c := range s.Constraints {
		errs.add(s.checkConstraint(c, seen))
	}
	return errs.err()
}

func (s *Spec) checkRepeats(combos int) error {
	if s.Repeats < 1 || s.Repeats > 1000 {
		return &SpecError{Msg: fmt.Sprintf("repeats: %d is out of range 1..1000", s.Repeats)}
	}
	if combos*s.Repeats > MaxSteps {
		return &SpecError{Msg: fmt.Sprintf("%d points × %d repeats is more than %d steps; lower repeats or split the matrix", combos, s.Repeats, MaxSteps)}
	}
	if r := s.RepeatsSpec; r.Width > 0 {
		if r.Max < s.Repeats || r.Max > 1000 {
			return &SpecError{Msg: fmt.Sprintf("repeats.max: %d must be at least repeats.min (%d) and at most 1000", r.Max, s.Repeats)}
		}
		if combos*r.Max > MaxSteps {
			return &SpecError{Msg: fmt.Sprintf("%d points × %d repeats (repeats.max) is more than %d steps; lower repeats.max or split the matrix", combos, r.Max, MaxSteps)}
		}
	}
	return nil
}

// check checks one probe; names are the probes' names seen so far.
func (p ProbeSpec) check(names map[string]bool) error {
	if names[p.Name] {
		return &SpecError{Msg: fmt.Sprintf("probes: two probes are named %q", p.Name)}
	}
	if strings.ContainsAny(p.Name, "@+") {
		return &SpecError{Msg: fmt.Sprintf("probes: the name %q: '@' and '+' name a probe's links (up@link1, up@link1+link2); name it without them", p.Name)}
	}
	if p.Name == probe.IdleProbe {
		return &SpecError{Msg: fmt.Sprintf("probes: the name %q is the idle phase's; name the probe otherwise", p.Name)}
	}
	names[p.Name] = true
	if !slices.Contains([]string{"iperf3", "ndr", "connect", "http"}, p.Kind) {
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind %q is not known (iperf3, ndr, connect, http)", p.Name, p.Kind)}
	}
	if err := p.checkHTTP(); err != nil {
		return err
	}
	if err := p.checkNDR(); err != nil {
		return err
	}
	if err := p.checkConnect(); err != nil {
		return err
	}
	if err := p.checkLinks(); err != nil {
		return err
	}
	if !slices.Contains([]string{"up", "down", "bidir"}, p.Direction) {
		return &SpecError{Msg: fmt.Sprintf("probe %s: direction %q is not one of up, down, bidir", p.Name, p.Direction)}
	}
	// An http probe's connections are h2load's (-c), up to the
	// thousands a concurrent connection test holds open; iperf3's
	// streams are threads.
	maxParallel := 128
	if p.Kind == "http" {
		maxParallel = 10000
	}
	if p.Parallel < 0 || p.Parallel > maxParallel {
		return &SpecError{Msg: fmt.Sprintf("probe %s: parallel %d is out of range 1..%d", p.Name, p.Parallel, maxParallel)}
	}
	if p.Duration <= 0 {
		return &SpecError{Msg: fmt.Sprintf("probe %s: duration %v must be positive, such as 30s", p.Name, p.Duration.D())}
	}
	if p.Omit >= p.Duration {
		return &SpecError{Msg: fmt.Sprintf("probe %s: omit (%v) must be shorter than duration (%v)", p.Name, p.Omit.D(), p.Duration.D())}
	}
	if p.UDP && p.Bitrate == "" {
		return &SpecError{Msg: fmt.Sprintf("probe %s: a UDP probe needs a bitrate (e.g. bitrate: 1G), or iperf3 sends only 1 Mbit/s", p.Name)}
	}
	if len(p.Lengths) > 0 && !p.UDP {
		return &SpecError{Msg: fmt.Sprintf("probe %s: lengths (a packet-size sweep) needs udp: true", p.Name)}
	}
	for _, l := range p.Lengths {
		if l < 16 || l > 65507 {
			return &SpecError{Msg: fmt.Sprintf("probe %s: length %d is outside 16..65507 bytes", p.Name, l)}
		}
	}
	return nil
}

// checkConstraint checks one constraint's form and that it names knobs the
// spec sets (seen: the axes).
func (s *Spec) checkConstraint(c Constraint, seen map[string]bool) error {
	n := 0
	for _, set := range []KnobValues{c.Exclude, c.Only, c.If} {
		if len(set) > 0 {
			n++
		}
	}
	if n != 1 || (len(c.If) > 0) != (len(c.Requires) > 0) {
		return &SpecError{Line: c.line, Msg: "a constraint is one of: exclude: {…}, only: {…}, or if: {…} with requires: {…}"}
	}
	for _, set := range []KnobValues{c.Exclude, c.Only, c.If, c.Requires} {
		for _, kv := range set {
			ref, err := configxml.ParseRef(kv.Knob)
			if err != nil {
				return &SpecError{Line: c.line, Msg: err.Error()}
			}
			if !seen[ref.String()] && !s.fixedHas(ref.String()) {
				return &SpecError{Line: c.line, Msg: fmt.Sprintf("constraint names %s, which is neither an axis nor fixed", ref)}
			}
		}
	}
	return nil
}

// checkLinks checks a probe's links: names, each once, and concurrent
// only over two or more, with an iperf3 probe. Whether the target has
// them is checked when the sweep opens it.
func (p ProbeSpec) checkLinks() error {
	seen := map[string]bool{}
	for _, l := range p.Links {
		if !ValidLinkName(l) {
			return &SpecError{Msg: fmt.Sprintf("probe %s: link %q: name a link of the target's endpoints (letters, digits, '-' and '_')", p.Name, l)}
		}
		if seen[l] {
			return &SpecError{Msg: fmt.Sprintf("probe %s: link %s is listed twice", p.Name, l)}
		}
		seen[l] = true
	}
	lists := map[string]string{"client": p.CPUSet.Client, "server": p.CPUSet.Server}
	for _, l := range slices.Sorted(maps.Keys(p.CPUSet.Links)) {
		if !slices.Contains(p.Links, l) {
			return &SpecError{Msg: fmt.Sprintf("probe %s: cpuset links: %s is not one of the probe's links (%s)", p.Name, l, cmp.Or(strings.Join(p.Links, ", "), "none: list them under links"))}
		}
		sides := p.CPUSet.Links[l]
		lists["links: "+l+": client"], lists["links: "+l+": server"] = sides.Client, sides.Server
	}
	for _, side := range slices.Sorted(maps.Keys(lists)) {
		l := lists[side]
		if l == "" {
			continue
		}
		if _, err := probe.ParseCPUList(l); err != nil {
			return &SpecError{Msg: fmt.Sprintf("probe %s: cpuset %s: %v", p.Name, side, err)}
		}
		switch p.Kind {
		case "connect":
			return &SpecError{Msg: fmt.Sprintf("probe %s: cpuset pins iperf3; kind connect runs fwab's agent (leave cpuset out)", p.Name)}
		case "http":
			return &SpecError{Msg: fmt.Sprintf("probe %s: cpuset pins iperf3; kind http runs nginx and h2load (leave cpuset out)", p.Name)}
		}
	}
	switch {
	case p.Concurrent && len(p.Links) < 2:
		return &SpecError{Msg: fmt.Sprintf("probe %s: concurrent runs two or more links at once: list them in links (it has %d)", p.Name, len(p.Links))}
	case len(p.Links) > 1 && p.Kind != "iperf3":
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind %s runs on one link; several links are built for iperf3 probes", p.Name, p.Kind)}
	}
	return nil
}

var linkNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// ValidLinkName says whether name can name a link of a target's endpoints:
// letters, digits, '-' and '_', at most 32, starting with a letter or digit.
func ValidLinkName(name string) bool { return linkNameRE.MatchString(name) }

// LinkNames are the links the spec's probes name, each once, in order.
func (s *Spec) LinkNames() []string {
	var out []string
	for _, p := range s.Probes {
		for _, l := range p.Links {
			if !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	return out
}

// checkConnect checks that a kind: connect probe uses only the keys that
// mean something to it.
func (p ProbeSpec) checkConnect() error {
	if p.Kind != "connect" {
		return nil
	}
	switch {
	case p.Direction != "up":
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind connect opens connections from the LAN client to the WAN server (direction up); down is not built yet", p.Name)}
	case p.UDP || len(p.Lengths) > 0 || p.Bitrate != "" || p.Omit > 0 || p.Affinity != "" || p.Window != "":
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind connect takes duration, parallel (workers) and ping: leave out udp, lengths, bitrate, omit, affinity and window", p.Name)}
	}
	return nil
}

// HTTPObjects are a kind: http probe's object sizes when it names none:
// RFC 9411's HTTP throughput sizes, section 7.3.1.
var HTTPObjects = []string{"1K", "16K", "64K", "256K"}

// checkHTTP checks a kind: http probe, and that other kinds do not use
// its keys.
func (p ProbeSpec) checkHTTP() error {
	if p.Kind != "http" {
		if len(p.Objects) > 0 || p.HTTPS || p.Rate != 0 {
			return &SpecError{Msg: fmt.Sprintf("probe %s: objects, https and rate go with kind: http", p.Name)}
		}
		return nil
	}
	switch {
	case p.Direction != "up":
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind http loads from the LAN client a server on the WAN side (direction up); down is not built yet", p.Name)}
	case p.UDP || len(p.Lengths) > 0 || p.Bitrate != "" || p.Omit > 0 || p.Affinity != "" || p.Window != "":
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind http takes objects, https, rate, parallel (connections), duration and ping: leave out udp, lengths, bitrate, omit, affinity and window", p.Name)}
	}
	seen := map[int64]bool{}
	for _, o := range p.Objects {
		n, err := probe.ParseBytes(o)
		if err != nil {
			return &SpecError{Msg: fmt.Sprintf("probe %s: objects: %v", p.Name, err)}
		}
		h := probe.HTTP{Object: n, Clients: p.Parallel, Rate: p.Rate}
		if err := h.Validate(); err != nil {
			return &SpecError{Msg: fmt.Sprintf("probe %s: %v", p.Name, err)}
		}
		if seen[n] {
			return &SpecError{Msg: fmt.Sprintf("probe %s: object size %s is listed twice", p.Name, o)}
		}
		seen[n] = true
	}
	return nil
}

// checkNDR checks what a kind: ndr probe needs, and that other kinds do not
// use its keys.
func (p ProbeSpec) checkNDR() error {
	if p.Kind != "ndr" {
		if len(p.FrameSizes) > 0 || p.LossTolerance != "" || p.Generator != "" {
			return &SpecError{Msg: fmt.Sprintf("probe %s: frame_sizes, loss_tolerance and generator go with kind: ndr", p.Name)}
		}
		return nil
	}
	frameGen := p.Generator == "trafgen" || p.Generator == "pkt-gen"
	switch {
	case !slices.Contains([]string{"", "iperf3", "trafgen", "pkt-gen"}, p.Generator):
		return &SpecError{Msg: fmt.Sprintf("probe %s: generator %q is not known (iperf3, the default; trafgen from a Linux sender; pkt-gen from a FreeBSD one)", p.Name, p.Generator)}
	case frameGen && p.Direction == string(probe.Bidir):
		return &SpecError{Msg: fmt.Sprintf("probe %s: the %s generator sends one way: give direction up or down, or generator: iperf3 for bidir", p.Name, p.Generator)}
	case p.Generator == "trafgen" && p.Ping:
		return &SpecError{Msg: fmt.Sprintf("probe %s: ping beside a trafgen search would wait in the tbf that paces trafgen's frames on the sender, and measure it: leave out ping, or use generator: iperf3 for latency at fractions of the rate", p.Name)}
	case p.Generator == "pkt-gen" && p.Ping:
		return &SpecError{Msg: fmt.Sprintf("probe %s: netmap takes the sender's interface from its host while pkt-gen runs, so a ping beside it cannot leave: leave out ping, or use generator: iperf3 for latency at fractions of the rate", p.Name)}
	case frameGen && (p.Window != "" || p.Affinity != "" || p.CPUSet.Client != "" || p.CPUSet.Server != "" || len(p.CPUSet.Links) > 0):
		return &SpecError{Msg: fmt.Sprintf("probe %s: window, affinity and cpuset are iperf3's settings; the %s generator takes none", p.Name, p.Generator)}
	case p.Parallel > 1 || len(p.Lengths) > 0 || p.UDP:
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind ndr sends one UDP stream per frame size: leave out parallel, lengths and udp", p.Name)}
	case p.Bitrate == "":
		return &SpecError{Msg: fmt.Sprintf("probe %s: kind ndr needs bitrate, the highest rate to offer (the link's speed, such as 1G)", p.Name)}
	}
	if _, err := probe.ParseBitrate(p.Bitrate); err != nil {
		return &SpecError{Msg: fmt.Sprintf("probe %s: bitrate: %v", p.Name, err)}
	}
	if _, err := p.tolerance(); err != nil {
		return &SpecError{Msg: err.Error()}
	}
	seen := map[string]bool{}
	for _, f := range p.FrameSizes {
		frames, err := probe.ParseFrames(f, ndrMTU)
		if err != nil {
			return &SpecError{Msg: fmt.Sprintf("probe %s: %v", p.Name, err)}
		}
		if seen[frames.Name] {
			return &SpecError{Msg: fmt.Sprintf("probe %s: frame size %s is listed twice", p.Name, frames.Name)}
		}
		if p.Generator == "pkt-gen" && len(frames.Sizes) != 1 {
			return &SpecError{Msg: fmt.Sprintf("probe %s: pkt-gen sends frames of one size, not %s: list single sizes, or use generator: trafgen from a Linux sender for a mix", p.Name, frames)}
		}
		seen[frames.Name] = true
	}
	return nil
}

func (s *Spec) fixedHas(knob string) bool {
	for _, kv := range s.Fixed {
		if ref, err := configxml.ParseRef(kv.Knob); err == nil && ref.String() == knob {
			return true
		}
	}
	return false
}

func joinActions(as []configxml.Action) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = string(a)
	}
	return strings.Join(out, ", ")
}

// ActionFor is the service action a change of knob needs in this spec: the
// one actions: names for an xml: knob, otherwise the knob's own.
func (s *Spec) ActionFor(knob string) configxml.Action {
	for _, kv := range s.Actions {
		if ref, err := configxml.ParseRef(kv.Knob); err == nil && ref.String() == knob {
			return configxml.Action(kv.Value)
		}
	}
	return configxml.ActionFor(knob)
}

// Warnings are what matrix check says about a spec it accepts: an xml:
// knob without an action is written to config.xml and not applied, so its
// points measure whatever ran before until something else applies it.
func (s *Spec) Warnings() []string {
	var out []string
	knobs := make([]string, 0, len(s.Axes)+len(s.Fixed))
	for _, ax := range s.Axes {
		knobs = append(knobs, ax.Knob)
	}
	for _, kv := range s.Fixed {
		knobs = append(knobs, kv.Knob)
	}
	for _, k := range knobs {
		ref, err := configxml.ParseRef(k)
		if err != nil || ref.Name != "xml" || slices.ContainsFunc(s.Actions, func(kv KnobValue) bool {
			r, err := configxml.ParseRef(kv.Knob)
			return err == nil && r == ref
		}) {
			continue
		}
		out = append(out, fmt.Sprintf("%s has no action: its change is written to config.xml but will not take effect until something applies it (a reboot, or another knob's action); name one under actions: {%s: ACTION} (%s; none to keep it so)",
			ref, ref, joinActions(configxml.XMLActions[:len(configxml.XMLActions)-1])))
	}
	return out
}
