package matrix

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
)

// writeSets writes the spec and two config sets made from the pfSense
// fixture (one with a new hostname, one with 150 generated rules) into a
// folder and returns the spec's path.
func writeSets(t *testing.T, spec string, edits map[string]func(*configxml.Config) error) string {
	t.Helper()
	dir := t.TempDir()
	for name, edit := range edits {
		c, err := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := edit(c); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), c.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const setsSpec = `
axes:
  config: [base.xml, services.xml]
  offload.tso: [on, off]
probes:
  - {name: up, direction: up, duration: 1s}
repeats: 2
order: cost-aware
`

// TestConfigSetsSweep: each point pushes its whole config set with the
// other knobs on top, with every service action a whole config may need;
// the file names the points, and the files' contents are in the spec's
// hash.
func TestConfigSetsSweep(t *testing.T) {
	path := writeSets(t, setsSpec, map[string]func(*configxml.Config) error{
		"base.xml":     func(c *configxml.Config) error { return nil },
		"services.xml": func(c *configxml.Config) error { return c.Set("rules@lan", "150") },
	})
	s, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := Parse(strings.NewReader(setsSpec))
	if s.Hash() == raw.Hash() {
		t.Error("the config sets' contents are not in the spec's hash: a resume would not notice a changed file")
	}
	f := newSweepSpec(t, s)
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 4*2+1 { // and the drift check's
		t.Fatalf("%d samples; want 9", len(samples))
	}
	for _, smp := range samples {
		pt := f.sweep.Plan.Points[smp.Point]
		want := map[string]float64{"base.xml": 1e9, "services.xml": 0.85e9}[pt.Value("config")]
		if smp.BitsPerSecond != want {
			t.Errorf("point %s: %v bit/s; want %v (measured on the wrong config set?)", pt.Key(), smp.BitsPerSecond, want)
		}
	}
	// Each switch ran every action a whole config needs.
	var switched bool
	for _, st := range f.sweep.Plan.Steps {
		for _, ch := range st.Changes {
			switched = switched || ch.Knob == "config"
		}
	}
	if !switched || f.sweep.Stats.Actions[configxml.ActionInterfaces] == 0 || f.sweep.Stats.Actions[configxml.ActionIPsecRestart] == 0 {
		t.Errorf("config switches ran %v; want interfaces, filter and IPsec among them", f.sweep.Stats.Actions)
	}
	c, _ := configxml.LoadBytes(f.fw.config)
	if v, _ := c.Get("offload.tso"); v == "" {
		t.Error("the last pushed config has no offload.tso value")
	}
}

// TestConfigSetsRefused: a missing file, one that does not parse (line and
// column), one of the other product and one that changes how fwab reaches
// the box are refused before anything is applied.
func TestConfigSetsRefused(t *testing.T) {
	spec := "axes:\n  config: [a.xml, b.xml]\nprobes:\n  - {name: up, direction: up, duration: 1s}\n"
	dir := t.TempDir()
	p := filepath.Join(dir, "spec.yaml")
	os.WriteFile(p, []byte(spec), 0o644)
	os.WriteFile(filepath.Join(dir, "a.xml"), fixtures.Read("configs/pfsense-2.7.xml"), 0o644)
	if _, err := ParseFile(p); err == nil || !strings.Contains(err.Error(), "config b.xml") {
		t.Errorf("a missing set: %v; want it named", err)
	}
	os.WriteFile(filepath.Join(dir, "b.xml"), []byte("<pfsense>\n  <system>\n</pfsense>\n"), 0o644)
	if _, err := ParseFile(p); err == nil || !strings.Contains(err.Error(), "config b.xml") || !strings.Contains(err.Error(), ":3:1") {
		t.Errorf("a set that does not parse: %v; want its name and line", err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"other product", fixtures.Read("configs/opnsense-26.1.xml"), "opnsense config"},
		{"ssh changed", func() []byte {
			c, _ := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
			c.Set("xml:system/ssh/port", "2222")
			return c.Bytes()
		}(), "<system/ssh> differs"},
		{"lan address changed", []byte(strings.Replace(string(fixtures.Read("configs/pfsense-2.7.xml")), "<ipaddr>198.18.1.1</ipaddr>", "<ipaddr>198.18.1.254</ipaddr>", 1)), "interface lan's address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.WriteFile(filepath.Join(dir, "b.xml"), tc.data, 0o644)
			s, err := ParseFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := NewPlan(context.Background(), s, pfSense(t), 1); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "config b.xml") {
				t.Errorf("NewPlan = %v; want a refusal naming b.xml and %q", err, tc.want)
			}
		})
	}
}

// Each knob value is checked against every config set a point may start
// from, not only the running config, whatever lint rules the spec allows:
// advanced outbound NAT needs manual rules, which one set lacks.
func TestConfigSetValuesChecked(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "spec.yaml")
	os.WriteFile(p, []byte("axes:\n  config: [a.xml, b.xml]\n  nat.outbound: [hybrid, advanced]\nallow: [FWAB001, FWAB002, FWAB003]\nprobes:\n  - {name: up, direction: up, duration: 1s}\n"), 0o644)
	base := fixtures.Read("configs/pfsense-2.7.xml")
	os.WriteFile(filepath.Join(dir, "a.xml"), base, 0o644)
	// b.xml: the same config without its manual outbound NAT rule.
	rule := regexp.MustCompile(`(?s)(<outbound>\s*<mode>hybrid</mode>)\s*<rule>.*?</rule>`)
	if !rule.Match(base) {
		t.Fatal("the fixture's manual outbound NAT rule is not where the test looks")
	}
	os.WriteFile(filepath.Join(dir, "b.xml"), rule.ReplaceAll(base, []byte("$1")), 0o644)
	s, err := ParseFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(context.Background(), s, pfSense(t), 1); err == nil || !strings.Contains(err.Error(), "config b.xml") || !strings.Contains(err.Error(), "nat.outbound") {
		t.Errorf("NewPlan = %v; want advanced NAT refused on b.xml", err)
	}
}
