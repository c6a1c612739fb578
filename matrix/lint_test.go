package matrix

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/store"
)

// A point whose config breaks an error-level lint rule is refused before a
// sweep could push it to the firewall, unless the spec allows the rule.
func TestPlanRefusesUnsafePoints(t *testing.T) {
	const spec = "target: lab\naxes:\n  ids@lan: [off, ips-inline]\n  offload.tso: [on, off]\nfixed: {offload.checksum: off, offload.lro: off}\n"
	cfg := pfSense(t)
	s, err := Parse(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPlan(context.Background(), s, cfg, 1)
	if err == nil || !strings.Contains(err.Error(), "1 point configs break a lint rule") || !strings.Contains(err.Error(), "ids@lan=ips-inline offload.tso=on") || !strings.Contains(err.Error(), "FWAB001") || !strings.Contains(err.Error(), "allow: [RULE]") {
		t.Errorf("NewPlan = %v; want the one inline-IPS-with-TSO point refused, naming FWAB001 and allow:", err)
	}
	s, err = Parse(strings.NewReader(spec + "allow: [FWAB001]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(context.Background(), s, cfg, 1); err != nil {
		t.Errorf("NewPlan with allow: [FWAB001] = %v", err)
	}
	if _, err := Parse(strings.NewReader(spec + "allow: [FWAB999]\n")); err == nil || !strings.Contains(err.Error(), "FWAB999 is no lint rule") {
		t.Errorf("allow: [FWAB999] = %v", err)
	}
}

// The plan lints each combination of the knobs a rule sees once: it
// refuses exactly the points that linting each point's whole config
// refuses, in the same order, on both products.
func TestPlanLintByDifferenceMatchesEveryPoint(t *testing.T) {
	for _, tt := range []struct{ fixture, spec string }{
		{"configs/pfsense-2.7.xml", "axes:\n  rules@lan: [0, 7, 2]\n  ids@lan: [off, ips-inline, ids]\n  offload.tso: [on, off]\n  nat.outbound: [hybrid, advanced]\nfixed: {offload.lro: off}\n"},
		{"configs/opnsense-26.1.xml", "axes:\n  ids@wan: [off, ips-inline]\n  rules@lan: [0, 5]\n  offload.checksum: [on, off]\n  offload.tso: [on, off]\n"},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			cfg, err := configxml.LoadBytes(fixtures.Read(tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(strings.NewReader("target: lab\n" + tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			points, err := s.Expand(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			existing := configxml.Lint(cfg)
			var want []string
			for _, pt := range points {
				c, err := s.pointConfig(cfg, pt, "")
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range configxml.Lint(c) {
					if f.Severity == configxml.SeverityError && !slices.Contains(existing, f) {
						want = append(want, fmt.Sprintf("point %d (%s): %s %s: %s", pt.Index, pt.Key(), f.Rule, f.Name, f.Message))
					}
				}
			}
			if len(want) == 0 {
				t.Fatal("no point breaks a rule: the spec tests nothing")
			}
			_, err = NewPlan(context.Background(), s, cfg, 1)
			if err == nil {
				t.Fatalf("NewPlan accepted the spec; linting every point refuses:\n%s", strings.Join(want, "\n"))
			}
			head := fmt.Sprintf("%d point configs break a lint rule", len(want))
			shown := strings.Join(want[:min(5, len(want))], "\n  ")
			if !strings.Contains(err.Error(), head) || !strings.Contains(err.Error(), shown) {
				t.Errorf("NewPlan = %v\nwant %q with\n  %s", err, head, shown)
			}
		})
	}
}

// A point whose knobs cannot hold together is refused by matrix check,
// whatever lint rules the spec allows: OPNsense runs one IDS mode for all
// its interfaces, so a point with two would be recorded under a name it
// does not have. The points the constraints leave are what counts.
func TestPlanRefusesPointsThatCannotExist(t *testing.T) {
	cfg, err := configxml.LoadBytes(fixtures.Read("configs/opnsense-26.1.xml"))
	if err != nil {
		t.Fatal(err)
	}
	const axes = "target: lab\naxes:\n  ids@wan: [ids, ips-inline]\n  ids@lan: [ids, ips-inline]\nfixed: {offload.checksum: off, offload.tso: off, offload.lro: off}\nallow: [FWAB001, FWAB003]\n"
	s, err := Parse(strings.NewReader(axes))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPlan(context.Background(), s, cfg, 1)
	if err == nil || !strings.Contains(err.Error(), "one IDS mode") || !strings.Contains(err.Error(), "ids@wan=ids ids@lan=ips-inline") {
		t.Errorf("NewPlan of mixed OPNsense IDS modes = %v; want the point refused, naming the rule", err)
	}
	s, err = Parse(strings.NewReader(axes + "constraints:\n  - if: {ids@wan: ids}\n    requires: {ids@lan: ids}\n  - if: {ids@wan: ips-inline}\n    requires: {ids@lan: ips-inline}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(context.Background(), s, cfg, 1); err != nil {
		t.Errorf("NewPlan with the constraints that keep one mode per point: %v", err)
	}
}

// The estimate uses what each action took on an earlier run where it can,
// and counts iperf3's omitted seconds.
func TestEstimateWithMeasuredCosts(t *testing.T) {
	s, err := Parse(strings.NewReader("target: lab\naxes:\n  ids@lan: [off, ids]\nprobes:\n  - {duration: 3s, omit: 1s}\nrepeats: 2\norder: as-written\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(context.Background(), s, pfSense(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	restarts := p.ServiceActions()[configxml.ActionIDSRestart]
	before := p.Estimate()
	events := []store.Event{
		{Kind: EventApplyCost, Message: `{"actions":["ids-restart"],"seconds":2}`},
		{Kind: EventApplyCost, Message: `{"actions":["ids-restart"],"seconds":3}`},
		{Kind: EventApplyCost, Message: `{"actions":["ids-restart"],"seconds":90}`},
		{Kind: EventApplyCost, Message: `{"actions":["ids-restart","filter-reload"],"seconds":50}`},
		{Kind: "warning", Message: `{"actions":["ids-restart"],"seconds":500}`},
	}
	p.Measured = MeasuredCosts(events)
	if got := p.Measured[configxml.ActionIDSRestart]; got != 3*time.Second {
		t.Errorf("measured ids-restart = %v, want the median of the single-action applies, 3s", got)
	}
	want := before - time.Duration(restarts)*(actionCost[configxml.ActionIDSRestart]-3*time.Second)
	if got := p.Estimate(); got != want || restarts == 0 {
		t.Errorf("Estimate with measured costs = %v, want %v (before %v, %d restarts)", got, want, before, restarts)
	}
	// 4 steps × (1s omit + 3s + 1s, plus 1s settle) at least.
	if before < 4*6*time.Second {
		t.Errorf("Estimate %v leaves out the omitted seconds", before)
	}
}

// A point's xml: assignment can make another of its knobs invalid: here it
// gives a filter rule the tracker the rules count would generate. The
// count is checked on the config the point makes, so the plan refuses it.
func TestPlanChecksKnobsWithTheirXML(t *testing.T) {
	s, err := Parse(strings.NewReader("target: lab\nfixed:\n  \"xml:filter/rule[1]/tracker\": \"4110000003\"\naxes:\n  rules@lan: [0, 2, 5]\norder: as-written\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPlan(context.Background(), s, pfSense(t), 1)
	if err == nil || !strings.Contains(err.Error(), "1 points cannot be set up") || !strings.Contains(err.Error(), "point 2 (rules@lan=5") || !strings.Contains(err.Error(), "at most 2 rules on lan") {
		t.Errorf("NewPlan = %v; want point 2 refused for the tracker its xml: assignment takes", err)
	}
}
