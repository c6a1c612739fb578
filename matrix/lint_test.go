package matrix

import (
	"strings"
	"testing"
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
	_, err = NewPlan(s, cfg, 1)
	if err == nil || !strings.Contains(err.Error(), "1 point configs break a lint rule") || !strings.Contains(err.Error(), "ids@lan=ips-inline offload.tso=on") || !strings.Contains(err.Error(), "FWAB001") || !strings.Contains(err.Error(), "allow: [RULE]") {
		t.Errorf("NewPlan = %v; want the one inline-IPS-with-TSO point refused, naming FWAB001 and allow:", err)
	}
	s, err = Parse(strings.NewReader(spec + "allow: [FWAB001]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(s, cfg, 1); err != nil {
		t.Errorf("NewPlan with allow: [FWAB001] = %v", err)
	}
	if _, err := Parse(strings.NewReader(spec + "allow: [FWAB999]\n")); err == nil || !strings.Contains(err.Error(), "FWAB999 is no lint rule") {
		t.Errorf("allow: [FWAB999] = %v", err)
	}
}
