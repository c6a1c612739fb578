package matrix

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// ConfigSet is one value of the config axis: a whole config.xml the sweep
// switches the firewall to, other knobs applied on top.
type ConfigSet struct {
	Name   string // as the spec writes it
	Path   string // where it was read
	Data   []byte
	SHA256 string
}

// ParseFile reads a spec file and the config sets it names, relative to
// the file's folder.
func ParseFile(path string) (*Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		return nil, err
	}
	if err := s.LoadConfigSets(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return s, nil
}

// configNames are the config sets the spec names, in written order.
func (s *Spec) configNames() []string {
	var out []string
	add := func(v string) {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, ax := range s.Axes {
		if ax.Knob == "config" {
			for _, v := range ax.Values {
				add(v)
			}
		}
	}
	for _, set := range []KnobValues{s.Fixed, s.Baseline} {
		for _, kv := range set {
			if kv.Knob == "config" {
				add(kv.Value)
			}
		}
	}
	return out
}

// LoadConfigSets reads every config set the spec names (paths relative to
// dir) and checks that each parses as a firewall config; a file that does
// not is named with its line and column, and nothing is applied. The
// sets' contents join the spec's hash, so a run is resumed only with the
// same files.
func (s *Spec) LoadConfigSets(dir string) error {
	names := s.configNames()
	if len(names) == 0 {
		return nil
	}
	s.ConfigSets = map[string]*ConfigSet{}
	h := sha256.New()
	h.Write(s.raw)
	for _, name := range names {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return &SpecError{Msg: fmt.Sprintf("config %s: %v; give the path of a config.xml, relative to the spec", name, err)}
		}
		if _, err := configxml.LoadBytes(data); err != nil {
			return &SpecError{Msg: fmt.Sprintf("config %s (%s): %v; nothing is applied", name, p, err)}
		}
		sum := sha256.Sum256(data)
		set := &ConfigSet{Name: name, Path: p, Data: data, SHA256: hex.EncodeToString(sum[:])}
		s.ConfigSets[name] = set
		fmt.Fprintf(h, "\x00config %s %s", name, set.SHA256)
	}
	s.hash = hex.EncodeToString(h.Sum(nil))
	return nil
}

// checkConfigSets holds each config set against the firewall's config:
// the same product, every interface the firewall assigns, and nothing
// that changes how fwab reaches the box. It returns each set's config by
// name as a point that names it starts from (prepare).
func (s *Spec) checkConfigSets(cfg *configxml.Config) (map[string]*configxml.Config, error) {
	out := map[string]*configxml.Config{}
	for _, name := range s.configNames() {
		set := s.ConfigSets[name]
		if set == nil {
			return nil, &SpecError{Msg: fmt.Sprintf("config %s: the config sets were not read (matrix.ParseFile reads them with the spec)", name)}
		}
		c, err := configxml.LoadBytes(set.Data)
		if err != nil {
			return nil, &SpecError{Msg: fmt.Sprintf("config %s: %v", name, err)}
		}
		if diff := configxml.ReachDiff(cfg, c); len(diff) > 0 {
			return nil, &SpecError{Msg: fmt.Sprintf("config %s would change how fwab reaches the firewall, so a sweep could lock itself out: %s; make the set's SSH, web GUI, users and interface addresses the running config's (fwab config diff shows them)", name, strings.Join(diff, "; "))}
		}
		if err := s.prepare(c, cfg, ""); err != nil {
			return nil, &SpecError{Msg: fmt.Sprintf("config %s: %v", name, err)}
		}
		out[name] = c
	}
	return out, nil
}

// pointConfig is the config a point pushes: its config set, or base (the
// config before the point) when it names none or the running one, with
// the tunnel the spec creates and the point's other knobs set on top.
func (s *Spec) pointConfig(base *configxml.Config, pt *Point, psk string) (*configxml.Config, error) {
	return s.pointConfigFrom(base, base.Bytes(), pt, psk)
}

// pointConfigFrom is pointConfig with base's bytes already at hand.
func (s *Spec) pointConfigFrom(base *configxml.Config, data []byte, pt *Point, psk string) (*configxml.Config, error) {
	if set := s.ConfigSets[pt.Value("config")]; set != nil {
		data = set.Data
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		return nil, err
	}
	if err := s.prepare(c, base, psk); err != nil {
		return nil, err
	}
	var knobs []string
	for _, kv := range pt.Values {
		if kv.Knob != "config" && kv.Knob != FirmwareKnob {
			knobs = append(knobs, kv.Knob+"="+kv.Value)
		}
	}
	if err := c.SetAll(knobs); err != nil {
		return nil, err
	}
	return c, nil
}

// prepare makes c a config a point starts from: base's product version
// (when the firewall reported it) and the tunnel the spec creates.
func (s *Spec) prepare(c, base *configxml.Config, psk string) error {
	if !base.Product().Inferred {
		if err := c.SetProduct(base.Product().Version); err != nil {
			return err
		}
	}
	if s.Tunnel != nil {
		c.DefineTunnel(s.Tunnel.spec(psk))
	}
	return nil
}

// ConfigBeyondKnobs lists where config b differs from config a once the
// knobs of the plan's first point (and its tunnel) are set alike on both:
// what the sweep would not control. A firmware axis compares the configs
// its boot environments boot with, since each firmware is measured on its
// own. Each config's <version> and <revision> are left out: every
// firmware writes its own config version, every save its revision.
func (p *Plan) ConfigBeyondKnobs(a, b *configxml.Config) ([]configxml.PathChange, error) {
	if len(p.Points) == 0 {
		return nil, nil
	}
	pt := p.Points[0]
	ca, err := p.Spec.pointConfig(a, pt, "")
	if err != nil {
		return nil, err
	}
	cb, err := p.Spec.pointConfig(b, pt, "")
	if err != nil {
		return nil, err
	}
	_, paths := configxml.Diff(ca, cb)
	var out []configxml.PathChange
	for _, pc := range paths {
		// Paths start below the root element: "version", "revision/time".
		f := strings.Split(strings.Trim(pc.Path, "/"), "/")
		if f[0] == "version" && len(f) == 1 || f[0] == "revision" || strings.HasPrefix(f[0], "revision[") {
			continue
		}
		out = append(out, pc)
	}
	return out, nil
}
