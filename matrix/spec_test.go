package matrix

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

func parseFile(t *testing.T, path string) (*Spec, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return Parse(f)
}

// planSpec parses a spec and plans it against the pfSense fixture.
func planSpec(t *testing.T, spec string) *Plan {
	t.Helper()
	s, err := Parse(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(context.Background(), s, pfSense(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func pfSense(t *testing.T) *configxml.Config {
	t.Helper()
	c, err := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestParseInvalid(t *testing.T) {
	want := map[string]string{
		"invalid-unknown-field.yaml":     "line 4: unknown key `repeat` (did you mean `repeats`?)",
		"invalid-duration-fraction.yaml": "probe up: iperf3 duration 1.5s, omit 0s: iperf3 takes whole seconds",
		"invalid-duration-long.yaml":     "probe up: iperf3 duration 48h0m0s: use whole seconds from 1s",
		"invalid-duration-negative.yaml": "probe up: duration -3s must be positive, such as 30s",
		"invalid-bitrate.yaml":           `probe up: iperf3 bitrate "fast"`,
		"invalid-affinity.yaml":          `probe up: iperf3 CPU affinity "banana"`,
		"invalid-power-url.yaml":         `power: power meter URL "plug.local/status": use an http:// or https:// URL`,
		"invalid-tab.yaml":               "line 5: tabs are not allowed in YAML: indent with spaces",
		"invalid-repeats-word.yaml":      "line 4: repeats must be a whole number, not `five`",
		"invalid-unknown-knob.yaml":      `line 3: unknown knob "offload.gro"`,
		"invalid-duplicate-value.yaml":   `line 3: axis offload.tso lists "on" twice`,
		"invalid-empty-plan.yaml":        "the constraints leave no point to measure",
		"invalid-constraint-knob.yaml":   "line 5: constraint names offload.lro, which is neither an axis nor fixed",
		"invalid-constraint-key.yaml":    `line 5: constraint key "unless" is not one of exclude, only, if, requires`,
		"invalid-direction.yaml":         `direction "sideways" is not one of up, down, bidir`,
		"invalid-udp-bitrate.yaml":       "a UDP probe needs a bitrate",
		"invalid-omit.yaml":              "omit (5s) must be shorter than duration (5s)",
		"invalid-fixed-axis.yaml":        "fixed: offload.tso is also an axis",
		"invalid-no-axes.yaml":           "the spec has no axes",
		"invalid-syntax.yaml":            "line 2: did not find expected ',' or ']'",
		"invalid-duration.yaml":          `line 5: "ten" is not a duration`,
		"invalid-too-many-points.yaml":   "line 5: the axes make more than 10000 points (at axis nat.outbound)",
		"invalid-same-value.yaml":        `line 3: axis rules@lan lists "0" and "00", which are the same value`,
		"invalid-too-many-steps.yaml":    "300 points × 1000 repeats is more than 200000 steps",
		"invalid-idle.yaml":              "idle: 20m0s is outside 0s..10m0s (0s turns the idle phase off)",
		"invalid-probe-idle.yaml":        `probes: the name "idle" is the idle phase's; name the probe otherwise`,
	}
	files, _ := filepath.Glob("testdata/invalid-*.yaml")
	if len(files) != len(want) {
		t.Errorf("%d invalid specs in testdata, %d expected errors: keep one per rule", len(files), len(want))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s, err := parseFile(t, f)
			if err == nil {
				_, err = s.Expand(context.Background())
			}
			w := want[filepath.Base(f)]
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("error = %v; want it to contain %q", err, w)
			}
		})
	}
}

func TestExpand(t *testing.T) {
	s, err := parseFile(t, "testdata/valid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	points, err := s.Expand(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range points {
		got = append(got, p.Key())
	}
	want := []string{
		"offload.tso=on rules@lan=0 ids@lan=off offload.lro=off",
		"offload.tso=on rules@lan=0 ids@lan=ids offload.lro=off",
		"offload.tso=on rules@lan=100 ids@lan=off offload.lro=off",
		"offload.tso=off rules@lan=0 ids@lan=off offload.lro=off",
		"offload.tso=off rules@lan=0 ids@lan=ids offload.lro=off",
		"offload.tso=off rules@lan=0 ids@lan=ips-inline offload.lro=off",
		"offload.tso=off rules@lan=100 ids@lan=off offload.lro=off",
		"offload.tso=off rules@lan=100 ids@lan=ips-inline offload.lro=off",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	if s.Hash() == "" || len(s.Raw()) == 0 || s.Repeats != 2 || s.Probes[0].Name != "up" || s.Probes[0].Kind != "iperf3" {
		t.Errorf("defaults not filled: %+v", s)
	}
}

func TestCheckAgainstTarget(t *testing.T) {
	tests := []struct {
		yaml, want string
	}{
		{"axes:\n  ipsec@site-b: [aes128gcm16, 3des-sha1]\n", "line 2: knob ipsec@site-b: 3des is not valid on pfsense 2.7.2"},
		{"axes:\n  ids@dmz: [off, ids]\n", `line 2: knob ids@dmz: no interface "dmz" in this config; it has: wan, lan, opt1`},
		{"axes:\n  blocklist: [off, on]\n", ""},
		{"axes:\n  offload.tso: [on, off]\nfixed:\n  nat.outbound: sideways\n", `invalid value "sideways"`},
		{"axes:\n  firmware: [2.7.2-RELEASE, 2.8.0-RELEASE]\n", ""},
		{"axes:\n  firmware: [2.7.2-RELEASE, banana]\n", `line 2: firmware "banana": "banana" is not a dotted version`},
		{"axes:\n  firmware: [2.7.2-RELEASE, 26.1.2]\n", `line 2: firmware "26.1.2": 26.1.2 looks like an OPNsense version`},
	}
	for _, tt := range tests {
		s, err := Parse(strings.NewReader(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Check(pfSense(t))
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Check(%q) = %v; want %q", tt.yaml, err, tt.want)
		}
	}
}

func TestPlanCostAware(t *testing.T) {
	s, err := Parse(strings.NewReader(`
axes:
  rules@lan: [0, 100, 1000]
  offload.tso: [on, off]
  ids@lan: [off, ids]
repeats: 4
seed: 11
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(context.Background(), s, pfSense(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Steps) != 12*4+1 {
		t.Fatalf("%d steps; want 48 and the drift check", len(p.Steps))
	}
	if last := p.Steps[48]; last.Round != store.DriftRound || last.Point != p.Baseline {
		t.Errorf("last step: round %d point %d; want the drift check of the baseline", last.Round, last.Point.Index)
	}
	// Every point once per round.
	for r := 0; r < 4; r++ {
		seen := map[string]bool{}
		for _, st := range p.Steps[r*12 : (r+1)*12] {
			if st.Round != r {
				t.Fatalf("step in round %d has Round %d", r, st.Round)
			}
			seen[st.Point.Key()] = true
		}
		if len(seen) != 12 {
			t.Fatalf("round %d visits %d distinct points; want 12", r, len(seen))
		}
	}
	// The expensive knobs (ids restart 20 s, interfaces 15 s) change only as
	// often as the snake order needs: ids twice per round trip... at most
	// once between rounds' halves.
	actions := p.ServiceActions()
	if actions[configxml.ActionIDSRestart] > 4+1 { // +1: back to the baseline for the drift check
		t.Errorf("ids changes %d times in 4 rounds; the cost-aware order should change it at most once per round", actions[configxml.ActionIDSRestart])
	}
	if actions[configxml.ActionInterfaces] > 4*2+2 {
		t.Errorf("offload changes %d times; want at most %d", actions[configxml.ActionInterfaces], 4*2+2)
	}
	// Consecutive steps never change an expensive knob and ... the number of
	// changes per step equals the knobs that differ.
	for i, st := range p.Steps {
		if i == 0 {
			continue
		}
		prev := p.Steps[i-1].Point
		n := 0
		for _, kv := range st.Point.Values {
			if prev.Value(kv.Knob) != kv.Value {
				n++
			}
		}
		if n != len(st.Changes) {
			t.Fatalf("step %d: %d knobs differ from the previous point but %d changes are planned", i, n, len(st.Changes))
		}
	}
	// The same seed gives the same plan; another seed another order.
	again, _ := NewPlan(context.Background(), s, pfSense(t), 0)
	if keys(again) != keys(p) {
		t.Error("the same spec and seed gave two different plans")
	}
	s.Seed = nil
	other, _ := NewPlan(context.Background(), s, pfSense(t), 12345)
	if keys(other) == keys(p) {
		t.Error("a different seed gave the same order")
	}
	if p.Estimate() < 48*10*time.Second*2 {
		t.Errorf("estimate %v is less than the probes alone (48 steps × 2 probes × 10 s)", p.Estimate())
	}
}

func TestPlanOrders(t *testing.T) {
	spec := "axes:\n  rules@lan: [0, 10, 20, 30, 40, 50]\nrepeats: 3\nseed: 5\norder: %s\n"
	rounds := func(order string) [][]string {
		s, err := Parse(strings.NewReader(strings.Replace(spec, "%s", order, 1)))
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPlan(context.Background(), s, pfSense(t), 0)
		if err != nil {
			t.Fatal(err)
		}
		out := make([][]string, 3)
		for _, st := range p.Steps[:len(p.Steps)-1] { // without the drift check
			out[st.Round] = append(out[st.Round], st.Point.Value("rules@lan"))
		}
		return out
	}
	written := rounds("as-written")
	for _, r := range written {
		if !slices.Equal(r, []string{"0", "10", "20", "30", "40", "50"}) {
			t.Errorf("as-written round = %v", r)
		}
	}
	random := rounds("randomized")
	if slices.Equal(random[0], random[1]) && slices.Equal(random[1], random[2]) {
		t.Errorf("randomized rounds are all the same order: %v", random)
	}
	// Cheap knobs only: cost-aware randomizes them per round too.
	cheap := rounds("cost-aware")
	if slices.Equal(cheap[0], cheap[1]) && slices.Equal(cheap[1], cheap[2]) {
		t.Errorf("cost-aware rounds of a cheap knob are all the same order: %v", cheap)
	}
}

func TestBaseline(t *testing.T) {
	s, _ := Parse(strings.NewReader("axes:\n  rules@lan: [0, 10]\n  nat.outbound: [automatic, disabled]\nbaseline: {rules@lan: 10, nat.outbound: disabled}\n"))
	p, err := NewPlan(context.Background(), s, pfSense(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Baseline.Key() != "rules@lan=10 nat.outbound=disabled" {
		t.Errorf("baseline = %s", p.Baseline.Key())
	}
	s, _ = Parse(strings.NewReader("axes:\n  rules@lan: [0, 10]\nbaseline: {rules@lan: 5}\n"))
	if _, err := NewPlan(context.Background(), s, pfSense(t), 1); err == nil || !strings.Contains(err.Error(), "no point of the matrix matches it") {
		t.Errorf("unmatched baseline: %v", err)
	}
}

// TestRouterModeCombinations: filter=disabled with a knob that needs pf is
// refused with the reason; the constraint the message suggests fixes it.
func TestRouterModeCombinations(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"axes:\n  filter: [enabled, disabled]\n  rules@lan: [0, 100]\n", "point 3 (filter=disabled rules@lan=100): rules@lan=100 adds filter rules"},
		{"axes:\n  filter: [enabled, disabled]\nfixed:\n  nat.outbound: hybrid\n", "nat.outbound=hybrid is outbound NAT"},
		{"axes:\n  filter: [enabled, disabled]\n  blocklist: [off, on]\n", "blocklist=on blocks with pf tables"},
		{"axes:\n  filter: [enabled, disabled]\n  rules@lan: [0, 100]\n  nat.outbound: [disabled, automatic]\n" +
			"constraints:\n  - if: {filter: disabled}\n    requires: {rules@lan: 0, nat.outbound: disabled}\n", ""},
	} {
		s, err := Parse(strings.NewReader(tt.yaml))
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewPlan(context.Background(), s, pfSense(t), 1)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("NewPlan(%q) = %v; want %q", tt.yaml, err, tt.want)
		}
	}
}

// TestXMLActions: an xml: knob names the service action that makes it take
// effect; the plan runs it, an unknown one is refused with the known ones
// listed, and without one matrix check warns.
func TestXMLActions(t *testing.T) {
	const axis = "axes:\n  xml:system/maximumstates: [100000, 200000]\n"
	s, err := Parse(strings.NewReader(axis + "actions:\n  xml:system/maximumstates: filter-reload\n"))
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(); len(w) != 0 {
		t.Errorf("Warnings with an action = %q; want none", w)
	}
	p, err := NewPlan(context.Background(), s, pfSense(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.ServiceActions()[configxml.ActionFilterReload]; n == 0 {
		t.Errorf("plan runs no filter reload for the xml axis: %v", p.ServiceActions())
	}
	for _, st := range p.Steps {
		for _, c := range st.Changes {
			if c.Action != configxml.ActionFilterReload {
				t.Errorf("step change %s has action %s; want filter-reload", c.Knob, c.Action)
			}
		}
	}

	s, err = Parse(strings.NewReader(axis))
	if err != nil {
		t.Fatal(err)
	}
	if w := s.Warnings(); len(w) != 1 || !strings.Contains(w[0], "xml:system/maximumstates") || !strings.Contains(w[0], "will not take effect") {
		t.Errorf("Warnings without an action = %q; want one naming the knob", w)
	}
	if s, err = Parse(strings.NewReader(axis + "actions:\n  xml:system/maximumstates: none\n")); err != nil || len(s.Warnings()) != 0 {
		t.Errorf("action none (on purpose): %v, warnings %q; want neither", err, s.Warnings())
	}

	s, err = Parse(strings.NewReader(axis + "actions:\n  xml:system/maximumstates: blocklist-update\n"))
	if err != nil {
		t.Fatal(err)
	}
	opn, err := configxml.LoadBytes(fixtures.Read("configs/opnsense-26.1.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(opn); err == nil || !strings.Contains(err.Error(), "blocklist-update is pfBlockerNG's") {
		t.Errorf("Check(blocklist-update on OPNsense) = %v; want a refusal", err)
	}
	for _, tt := range []struct{ yaml, want string }{
		{axis + "actions:\n  xml:system/maximumstates: restart-everything\n", "known actions: filter-reload, interfaces-reconfigure, ids-restart, ipsec-restart, blocklist-update, reboot, none"},
		{axis + "actions:\n  xml:system/maximumstates: firmware-switch\n", "known actions:"},
		{axis + "actions:\n  rules@lan: filter-reload\n", "actions: rules@lan has its own action (filter-reload)"},
		{axis + "actions:\n  xml:system/hostname: filter-reload\n", "actions: xml:system/hostname is neither an axis nor fixed"},
	} {
		if _, err := Parse(strings.NewReader(tt.yaml)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v; want %q", tt.yaml, err, tt.want)
		}
	}
}

func TestExamplesParse(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		s, err := parseFile(t, f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if _, err := s.Expand(context.Background()); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func keys(p *Plan) string {
	var b strings.Builder
	for _, st := range p.Steps {
		b.WriteString(st.Point.Key() + "|")
	}
	return b.String()
}

// TestCostAwareIsCheaper: on the seeds' examples the cost-aware order never
// needs more service-action time than the written order.
func TestCostAwareIsCheaper(t *testing.T) {
	files, _ := filepath.Glob("../examples/*.yaml")
	for _, f := range files {
		cost := func(order Order) time.Duration {
			s, err := parseFile(t, f)
			if err != nil {
				t.Fatal(err)
			}
			s.Order = order
			p, err := NewPlan(context.Background(), s, pfSense(t), 3)
			if err != nil {
				t.Fatal(err)
			}
			var total time.Duration
			for _, st := range p.Steps {
				total += st.Cost
			}
			return total
		}
		aware, written := cost(OrderCostAware), cost(OrderAsWritten)
		if aware > written {
			t.Errorf("%s: cost-aware order costs %v of service actions, as-written %v", f, aware, written)
		}
		t.Logf("%s: service actions cost-aware %v, as-written %v", filepath.Base(f), aware, written)
	}
}

// TestNDRProbe: kind: ndr makes one search per frame size, its rates in
// UDP payload bits/s from the link's speed on the wire, and refuses what
// it cannot do.
func TestNDRProbe(t *testing.T) {
	s, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {kind: ndr, bitrate: 1G, frame_sizes: [64, 1518], loss_tolerance: 0.5%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	runs := s.ProbeRuns()
	if len(runs) != 2 || runs[0].Name != "pdr-64" || runs[1].Name != "pdr-1518" || runs[0].NDR == nil {
		t.Fatalf("ProbeRuns = %+v; want pdr-64 and pdr-1518 rate searches", runs)
	}
	n := runs[0].NDR
	if n.Frames.Name != "64" || n.Search.Tolerance != 0.5 || n.Search.FinalDuration != 10*time.Second || math.Abs(n.Search.Max-1e9*18/84) > 1 {
		t.Errorf("search %+v; want 64-byte frames, 0.5 %%, 10 s trials, at most 1 Gbit/s on the wire in payload bits", n)
	}
	all, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {kind: ndr, bitrate: 1G}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if runs := all.ProbeRuns(); len(runs) != 7 || runs[0].Name != "ndr-64" || runs[6].Name != "ndr-1518" {
		t.Errorf("default frame sizes: %d runs; want RFC 2544's seven", len(runs))
	} else if runs[0].NDR.LatencyAt != nil {
		t.Errorf("a search without ping measures latency at %v", runs[0].NDR.LatencyAt)
	}
	withPing, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {kind: ndr, bitrate: 1G, frame_sizes: [64], ping: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := withPing.ProbeRuns()[0].NDR; !slices.Equal(n.LatencyAt, []float64{0.1, 0.5, 0.9}) {
		t.Errorf("ping: true on a search: latency at %v, want CSIT's 10, 50 and 90 %% of the rate found", n.LatencyAt)
	}
	// IMIX (CSIT's 64/570/1518 at 7:4:1, 340.3 bytes a frame) both ways
	// at once: the search's maximum is the link's speed each way, in
	// payload bits, twice.
	mix, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {name: rfc, kind: ndr, bitrate: 1G, frame_sizes: [imix], direction: bidir}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if runs := mix.ProbeRuns(); len(runs) != 1 || runs[0].Name != "rfc-imix" || !runs[0].NDR.Bidir || len(runs[0].NDR.Frames.Sizes) != 3 {
		t.Errorf("imix both ways: %+v; want one bidirectional search named rfc-imix over three sizes", runs)
	} else if n := runs[0].NDR; math.Abs(n.Search.Max-2*1e9*n.Frames.MeanPayload()/(n.Frames.MeanFrame()+20)) > 1 || math.Abs(n.Frames.MeanFrame()-(7*64+4*570+1518)/12.0) > 1e-9 {
		t.Errorf("imix both ways: max %v, mean frame %v; want twice 1 Gbit/s in payload bits, 340.3 bytes", n.Search.Max, n.Frames.MeanFrame())
	}
	tg, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {kind: ndr, bitrate: 100M, frame_sizes: [64], generator: trafgen, direction: down}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n := tg.ProbeRuns()[0].NDR; n.Packets == nil || n.Iperf3.Direction != probe.Down {
		t.Errorf("generator: trafgen, direction: down: %+v; want trafgen trials from the server", n)
	}
	pg, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {kind: ndr, bitrate: 100M, frame_sizes: [64, 128], generator: pkt-gen}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if runs := pg.ProbeRuns(); len(runs) != 2 || runs[0].NDR.Packets == nil || runs[0].NDR.Packets.Name() != "pkt-gen" {
		t.Errorf("generator: pkt-gen: %+v; want two searches with pkt-gen trials", runs)
	}
	if n := s.ProbeRuns()[0].NDR; n.Packets != nil {
		t.Errorf("no generator: trafgen set; want iperf3's trials")
	}
	for spec, want := range map[string]string{
		"{kind: ndr, bitrate: 1G, frame_sizes: [63]}":    "frame size 63: Ethernet frames are 64 to 1518 bytes",
		"{kind: ndr, bitrate: 1G, frame_sizes: [9000]}":  "frame size 9000",
		"{kind: ndr, bitrate: 1G, loss_tolerance: 100%}": `loss_tolerance "100%": give a percentage from 0 to below 100`,
		"{kind: ndr, bitrate: 1G, loss_tolerance: -1}":   `loss_tolerance "-1"`,
		"{kind: ndr}": "kind ndr needs bitrate",
		"{kind: ndr, bitrate: 1G, frame_sizes: [imix, IMIX]}":                   "frame size imix is listed twice",
		"{kind: ndr, bitrate: 1G, parallel: 4}":                                 "leave out parallel",
		"{direction: up, frame_sizes: [64]}":                                    "frame_sizes, loss_tolerance and generator go with kind: ndr",
		"{direction: up, generator: trafgen}":                                   "frame_sizes, loss_tolerance and generator go with kind: ndr",
		"{kind: ndr, bitrate: 1G, generator: pktgen}":                           `generator "pktgen" is not known (iperf3, the default; trafgen from a Linux sender; pkt-gen from a FreeBSD one)`,
		"{kind: ndr, bitrate: 1G, generator: pkt-gen, direction: bidir}":        "the pkt-gen generator sends one way",
		"{kind: ndr, bitrate: 1G, generator: pkt-gen, ping: true}":              "netmap takes the sender's interface",
		"{kind: ndr, bitrate: 1G, generator: pkt-gen, frame_sizes: [64, imix]}": "pkt-gen sends frames of one size, not IMIX",
		"{kind: ndr, bitrate: 1G, generator: pkt-gen, cpuset: {client: 1}}":     "the pkt-gen generator takes none",
		"{kind: ndr, bitrate: 1G, generator: trafgen, direction: bidir}":        "the trafgen generator sends one way",
		"{kind: ndr, bitrate: 1G, generator: trafgen, ping: true}":              "ping beside a trafgen search",
		"{kind: ndr, bitrate: 1G, generator: trafgen, window: 4M}":              "window, affinity and cpuset are iperf3's settings",
		"{kind: ndr, bitrate: 1G, frame_sizes: [64, 64]}":                       "frame size 64 is listed twice",
		"{kind: rfc2544, bitrate: 1G}":                                          "is not known (iperf3, ndr, connect, http)",
	} {
		_, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - " + spec + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("probe %s: Parse = %v, want %q", spec, err, want)
		}
	}
}

// TestHTTPProbe: kind: http makes one load per object size (RFC 9411's
// four by default), over TLS with https, and refuses what it cannot do.
func TestHTTPProbe(t *testing.T) {
	s, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {kind: http}\n  - {kind: http, https: true, objects: [64K], parallel: 32, rate: 500, duration: 5s}\n  - {name: conns, kind: http, objects: [1K], parallel: 5000, rate: 500}\n"))
	if err != nil {
		t.Fatal(err)
	}
	runs := s.ProbeRuns()
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
	}
	if want := []string{"http-1K", "http-16K", "http-64K", "http-256K", "https-64K", "conns-1K"}; !slices.Equal(names, want) {
		t.Fatalf("ProbeRuns = %q, want %q", names, want)
	}
	if h := runs[1].HTTP; h == nil || h.Object != 16<<10 || h.TLS {
		t.Errorf("http-16K: %+v; want a 16 KiB object over HTTP", h)
	}
	if h := runs[4].HTTP; h.Object != 64<<10 || !h.TLS || h.Clients != 32 || h.Rate != 500 || h.Duration != 5*time.Second {
		t.Errorf("https-64K: %+v; want 64 KiB over TLS, 32 connections, 500 a second, 5 s", h)
	}
	if h := runs[5].HTTP; h.Clients != 5000 || h.Rate != 500 {
		t.Errorf("conns-1K: %+v; want 5000 connections held at 500 requests a second in all", h)
	}
	if s.ThroughputProbe() != "" {
		t.Errorf("ThroughputProbe = %q; an http load is no blackout's reference", s.ThroughputProbe())
	}
	for spec, want := range map[string]string{
		"{kind: http, objects: [1K, 1K]}":     "object size 1K is listed twice",
		"{kind: http, objects: [big]}":        `size "big"`,
		"{kind: http, objects: [2G]}":         "give 1 byte to 1G",
		"{kind: http, direction: down}":       "kind http loads from the LAN client",
		"{kind: http, udp: true}":             "leave out udp",
		"{kind: http, rate: -5}":              "rate -5",
		"{kind: http, cpuset: {client: '1'}}": "kind http runs nginx and h2load",
		"{kind: http, parallel: 10001}":       "10001 connections: give 1 to 10000",
		"{direction: up, parallel: 200}":      "parallel 200 is out of range 1..128",
		"{direction: up, https: true}":        "objects, https and rate go with kind: http",
		"{kind: ndr, bitrate: 1G, rate: 100}": "objects, https and rate go with kind: http",
	} {
		_, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - " + spec + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("probe %s: Parse = %v, want %q", spec, err, want)
		}
	}
}

// TestPlanReboots: crypto.hardware is applied by a reboot, the costliest
// action after a firmware upgrade, so the cost-aware order changes it once
// per round at most; a step that reboots runs nothing else (the boot
// applies the whole config), and the plan counts its reboots.
func TestPlanReboots(t *testing.T) {
	p := planSpec(t, `
axes:
  crypto.hardware: [none, aesni]
  rules@lan: [0, 100, 1000]
repeats: 6
seed: 3
`)
	reboots := p.ServiceActions()[configxml.ActionReboot]
	if reboots == 0 || reboots > 6 {
		t.Errorf("%d reboots in 6 rounds; want at least one and at most one per round", reboots)
	}
	for i, st := range p.Steps {
		if slices.Contains(st.Actions, configxml.ActionReboot) && len(st.Actions) != 1 {
			t.Errorf("step %d reboots and also runs %v; the boot applies the whole config", i, st.Actions)
		}
	}
	if p.Estimate() < time.Duration(reboots)*3*time.Minute {
		t.Errorf("estimate %v is below %d reboots of 3 min", p.Estimate(), reboots)
	}
}

// TestPlanDriftCheck: a plan re-measures its baseline at its end by
// default, not with drift_check: false, not when a firmware axis
// interleaves the firmwares, and not with adaptive repeats, with which
// asking for it is refused.
func TestPlanDriftCheck(t *testing.T) {
	const spec = "axes:\n  rules@lan: [0, 100]\nbaseline: {rules@lan: 100}\nrepeats: 3\n"
	for _, tc := range []struct {
		extra string
		want  bool
	}{{"", true}, {"drift_check: true\n", true}, {"drift_check: false\n", false}} {
		s, err := Parse(strings.NewReader(spec + tc.extra))
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPlan(context.Background(), s, pfSense(t), 1)
		if err != nil {
			t.Fatal(err)
		}
		last := p.Steps[len(p.Steps)-1]
		if got := last.Round == store.DriftRound; got != tc.want || p.DriftCheck() != tc.want || len(p.Steps) != 6+map[bool]int{true: 1}[tc.want] {
			t.Errorf("%q: %d steps, the last round %d; want drift check %v", tc.extra, len(p.Steps), last.Round, tc.want)
		}
		if tc.want && last.Point.Value("rules@lan") != "100" {
			t.Errorf("the drift check measures %s, not the baseline", last.Point.Key())
		}
	}
	fw := &Plan{Spec: &Spec{Axes: Axes{{Knob: "firmware", Values: []string{"2.7.2-RELEASE", "2.8.0-RELEASE"}}}}}
	if fw.DriftCheck() {
		t.Error("a firmware axis interleaves the firmwares, yet the plan has a drift check")
	}
	adaptive := "axes:\n  rules@lan: [0, 100]\nrepeats: {min: 3, max: 6, width: 5%}\n"
	s, err := Parse(strings.NewReader(adaptive))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := NewPlan(context.Background(), s, pfSense(t), 1); err != nil || p.DriftCheck() {
		t.Errorf("adaptive repeats: %v, drift check %v; want none", err, p != nil && p.DriftCheck())
	}
	s, _ = Parse(strings.NewReader(adaptive + "drift_check: true\n"))
	if _, err := NewPlan(context.Background(), s, pfSense(t), 1); err == nil || !strings.Contains(err.Error(), "drift_check: true with adaptive repeats") {
		t.Errorf("drift_check: true with adaptive repeats: %v", err)
	}
}

// TestProbeLinks: a probe on several links one after another is a run per
// link, on several at once one run for them all; what cannot be done is
// refused by name.
func TestProbeLinks(t *testing.T) {
	s, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {name: up, links: [a, b]}\n  - {name: both, links: [a, b], concurrent: true}\n  - {name: plain}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range s.ProbeRuns() {
		got = append(got, r.Name+"="+strings.Join(r.Links, "+"))
	}
	if want := []string{"up@a=a", "up@b=b", "both@a+b=a+b", "plain="}; !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q", got, want)
	}
	pinned, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {name: up, cpuset: {client: '2', server: 0-1}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := pinned.ProbeRuns()[0]; r.Iperf3.ClientCPUs != "2" || r.Iperf3.ServerCPUs != "0-1" {
		t.Errorf("cpuset: client %q, server %q; want 2 and 0-1", r.Iperf3.ClientCPUs, r.Iperf3.ServerCPUs)
	}
	own, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - {name: up, links: [a, b], cpuset: {client: '0', server: '1', links: {b: {client: '2', server: '3'}}}}\n  - {name: both, links: [a, b], concurrent: true, cpuset: {client: '0', server: '1', links: {b: {client: '2'}}}}\n  - {name: rate, kind: ndr, bitrate: 1G, frame_sizes: [1518], links: [b], cpuset: {client: '0', links: {b: {server: '3'}}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var cores []string
	for _, r := range own.ProbeRuns() {
		for _, l := range r.Links {
			c, sv := r.Iperf3.CPUsFor(l)
			cores = append(cores, r.Name+":"+l+"="+c+"/"+sv)
		}
	}
	if want := []string{"up@a:a=0/1", "up@b:b=2/3", "both@a+b:a=0/1", "both@a+b:b=2/1", "rate-1518@b:b=0/3"}; !slices.Equal(cores, want) {
		t.Errorf("cores per link %q, want %q", cores, want)
	}
	// A rate search's trials run on the NDR's own settings: the link's
	// cores must reach them too.
	if r := own.ProbeRuns()[3]; r.NDR == nil || r.NDR.Iperf3.ClientCPUs != "0" || r.NDR.Iperf3.ServerCPUs != "3" {
		t.Errorf("rate search on link b: %+v, want its trials on client 0, server 3", r.NDR)
	}
	if got := s.LinkNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("LinkNames = %q, want a, b", got)
	}
	for spec, want := range map[string]string{
		"{links: [a], concurrent: true}":                       "concurrent runs two or more links at once",
		"{concurrent: true}":                                   "concurrent runs two or more links at once",
		"{links: [a, a]}":                                      "link a is listed twice",
		"{links: ['a b']}":                                     `link "a b": name a link`,
		"{kind: ndr, bitrate: 1G, links: [a, b]}":              "kind ndr runs on one link",
		"{kind: connect, links: [a, b], concurrent: true}":     "kind connect runs on one link",
		"{cpuset: {client: x}}":                                `cpuset client: "x": list cores`,
		"{cpuset: {server: 3-1}}":                              "runs backwards",
		"{kind: connect, cpuset: {client: '1'}}":               "kind connect runs fwab's agent",
		"{links: [a, b], cpuset: {links: {c: {client: '1'}}}}": "cpuset links: c is not one of the probe's links (a, b)",
		"{cpuset: {links: {a: {server: '1'}}}}":                "cpuset links: a is not one of the probe's links (none",
		"{links: [a], cpuset: {links: {a: {server: 'z'}}}}":    `cpuset links: a: server: "z"`,
		"{name: up@a}":                                         "'@' and '+' name a probe's links",
	} {
		_, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\nprobes:\n  - " + spec + "\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("probe %s: Parse = %v, want %q", spec, err, want)
		}
	}
}

// The tunnel: section is checked against the target's config before a
// sweep needs it: each field, with a message that names it and the fix.
func TestTunnelChecked(t *testing.T) {
	const good = "  name: fwab\n  interface: wan\n  remote_addr: 198.19.0.2\n  local_net: 198.18.1.0/24\n  remote_net: 198.19.1.0/24\n"
	for _, tt := range []struct{ tunnel, want string }{
		{strings.Replace(good, "interface: wan", "interface: wan2", 1), `tunnel: interface "wan2" is not an interface of the config`},
		{strings.Replace(good, "198.19.0.2", "not-an-ip", 1), `tunnel: remote_addr "not-an-ip" is not an IP address`},
		{strings.Replace(good, "  remote_addr: 198.19.0.2\n", "", 1), "tunnel: remote_addr is missing"},
		{good + "  local_addr: 198.19.0.256\n", `tunnel: local_addr "198.19.0.256" is not an IP address`},
		{strings.Replace(good, "198.18.1.0/24", "198.18.1.0/33", 1), `tunnel: local_net "198.18.1.0/33" is not a network`},
		{strings.Replace(good, "198.19.1.0/24", "198.19.1.0", 1), `tunnel: remote_net "198.19.1.0" is not a network`},
		{strings.Replace(good, "  local_net: 198.18.1.0/24\n", "", 1), "tunnel: local_net is missing"},
		{strings.Replace(good, "198.19.1.0/24", "2001:db8::/64", 1), "tunnel: local_net 198.18.1.0/24 and remote_net 2001:db8::/64 are of two address families"},
	} {
		s, err := Parse(strings.NewReader("target: lab\naxes:\n  ipsec@fwab: [none, aes128gcm16]\ntunnel:\n" + tt.tunnel))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewPlan(context.Background(), s, pfSense(t), 1); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("tunnel:\n%s: NewPlan = %v; want %q", tt.tunnel, err, tt.want)
		}
	}
	s, err := Parse(strings.NewReader("target: lab\naxes:\n  ipsec@fwab: [none, aes128gcm16]\ntunnel:\n" + good))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPlan(context.Background(), s, pfSense(t), 1); err != nil {
		t.Errorf("a good tunnel: %v", err)
	}
}

// TestEveryProblemAtOnce: a spec with several mistakes names all of them,
// offline (Parse) and against the target (Check), so that fixing one does
// not reveal the next.
func TestEveryProblemAtOnce(t *testing.T) {
	_, err := Parse(strings.NewReader("axes:\n  offload.tso: [on, on]\n  offload.lro: [on, off]\nrepeats: 2000\nprobes:\n  - {name: a, direction: sideways}\n  - {name: b, duration: 10s, omit: 20s}\n"))
	for _, want := range []string{"4 problems", `line 2: axis offload.tso lists "on" twice`, "repeats: 2000 is out of range", `probe a: direction "sideways"`, "probe b: omit (20s) must be shorter"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse: %v\nwant it to say %q", err, want)
		}
	}
	var se *SpecError
	if !errors.As(err, &se) {
		t.Errorf("Parse error %T: errors.As finds no *SpecError", err)
	}

	s, err := Parse(strings.NewReader("axes:\n  ids@dmz: [off, ids]\n  nat.outbound: [automatic, sideways]\n  firmware: [banana]\n"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Check(pfSense(t))
	for _, want := range []string{"3 problems", `line 2: knob ids@dmz: no interface "dmz"`, `line 3: knob nat.outbound: invalid value "sideways"`, `line 4: firmware "banana"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Check: %v\nwant it to say %q", err, want)
		}
	}
}

// TestLongListsKeepTheFixFirst: a list of problems too long to print is
// cut, with the count in thousands and the advice before the list.
func TestLongListsKeepTheFixFirst(t *testing.T) {
	lines := make([]string, 7545)
	for i := range lines {
		lines[i] = fmt.Sprintf("point %d", i+1)
	}
	got := capList(lines, 5)
	if !strings.HasSuffix(got, "\n  … and 7,540 more") || strings.Count(got, "\n") != 5 {
		t.Errorf("capList = %q, want 5 lines and … and 7,540 more", got)
	}
	s, err := Parse(strings.NewReader("axes:\n  filter: [enabled, disabled]\n  rules@lan: [0, 10, 100, 1000, 2000, 3000, 4000, 5000]\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPlan(t.Context(), s, pfSense(t), 1)
	if err == nil || !strings.Contains(err.Error(), "7 points would not measure what they name: add a constraint") || !strings.Contains(err.Error(), "… and 2 more") {
		t.Errorf("NewPlan: %v\nwant the advice before a list cut at five", err)
	}
}

// TestPlanWarnings: what warning rules find in the points' configs reaches
// the plan, collapsed by finding with the points named, and points whose
// configs are the same are flagged; findings of the firewall's own config
// are not the points' doing.
func TestPlanWarnings(t *testing.T) {
	opn, err := configxml.LoadBytes(fixtures.Read("configs/opnsense-26.1.xml"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(strings.NewReader("axes:\n  nat.outbound: [automatic, hybrid]\n  offload.tso: [on, off]\norder: as-written\n"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(t.Context(), s, opn, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"points 2, 3: FWAB006 hybrid-nat-no-rules: outbound NAT is hybrid but there are no enabled manual rules"}
	if got := p.Warnings(); len(got) != len(want) || !strings.HasPrefix(got[0], want[0]) {
		t.Errorf("Warnings() = %q, want %q…", got, want)
	}

	// Two config files with the same content: points 0 and 2 are one config.
	dir := t.TempDir()
	for _, f := range []string{"a.xml", "b.xml"} {
		if err := os.WriteFile(filepath.Join(dir, f), fixtures.Read("configs/pfsense-2.7.xml"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("axes:\n  config: [a.xml, b.xml]\n  offload.tso: [on, off]\norder: as-written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if s, err = ParseFile(spec); err != nil {
		t.Fatal(err)
	}
	if p, err = NewPlan(t.Context(), s, pfSense(t), 1); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]int{{0, 2}, {1, 3}}, p.Identical); diff != "" {
		for _, pt := range p.Points {
			t.Logf("point %d: %s", pt.Index, pt.Key())
		}
		t.Errorf("Identical (-want +got):\n%s", diff)
	}
	if w := p.Warnings(); len(w) != 2 || !strings.HasPrefix(w[0], "points 0, 2 have identical configs") {
		t.Errorf("Warnings() = %q, want the two pairs of identical points", w)
	}

	// The firewall's own hybrid NAT is no warning of the points.
	if err := opn.Set("nat.outbound", "hybrid"); err != nil {
		t.Fatal(err)
	}
	if s, err = Parse(strings.NewReader("axes:\n  offload.tso: [on, off]\n")); err != nil {
		t.Fatal(err)
	}
	if p, err = NewPlan(t.Context(), s, opn, 1); err != nil {
		t.Fatal(err)
	}
	if w := p.Warnings(); len(w) != 0 {
		t.Errorf("Warnings() = %q, want none: the firewall's own config has the finding", w)
	}
}

func TestBlackoutSpec(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		want  probe.Blackout
		share float64
		err   string
	}{
		{yaml: "{}", want: probe.Blackout{Rate: 1000, Size: 64, Conns: 4}},
		{yaml: "{rate: 2000, conns: 0}", want: probe.Blackout{Rate: 2000, Size: 64, Conns: -1}},
		{yaml: "{rate: 10M, size: 1250}", want: probe.Blackout{Rate: 1000, Size: 1250, Conns: 4}},
		// A share of the measured throughput: the rate is set per step,
		// and full-size datagrams keep its packet rate that of the load.
		{yaml: "{rate: 50%}", want: probe.Blackout{Size: 1280, Conns: 4}, share: 0.5},
		{yaml: "{rate: 12.5 %, size: 200}", want: probe.Blackout{Size: 200, Conns: 4}, share: 0.125},
		{yaml: "{rate: 0%}", err: "use 1% to 100%"},
		{yaml: "{rate: 150%}", err: "use 1% to 100%"},
		{yaml: "{rate: half%}", err: "use 1% to 100%"},
		{yaml: "{rate: 5}", err: "give at least 10"},
		{yaml: "{rate: fast}", err: "datagrams a second"},
		{yaml: "{size: 4}", err: "blackout: size 4 bytes"},
	} {
		spec := "axes:\n  rules@lan: [0, 100]\nprobes:\n  - {name: up, direction: up, duration: 1s}\nblackout: " + tc.yaml + "\n"
		s, err := Parse(strings.NewReader(spec))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("blackout: %s: error %v, want one containing %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("blackout: %s: %v", tc.yaml, err)
			continue
		}
		got, err := s.Blackout.Probe()
		if err != nil || got != tc.want {
			t.Errorf("blackout: %s = %+v, %v; want %+v", tc.yaml, got, err, tc.want)
		}
		if share := s.Blackout.Share(); share != tc.share {
			t.Errorf("blackout: %s: share %v, want %v", tc.yaml, share, tc.share)
		}
	}
	// The share's reference: TCP, full-size, on the stream's own link.
	ref := "axes:\n  rules@lan: [0, 100]\nprobes:\n  - {name: small, udp: true, bitrate: 1G, lengths: [64], duration: 1s}\n  - {name: cps, kind: connect, duration: 1s}\n  - {name: tcp, direction: up, duration: 1s}\nblackout: {rate: 50%}\n"
	s, err := Parse(strings.NewReader(ref))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.ThroughputProbe(); got != "tcp" {
		t.Errorf("ThroughputProbe of small UDP, connect and TCP probes: %q, want tcp", got)
	}
	// A share needs a throughput to take it of.
	spec := "axes:\n  rules@lan: [0, 100]\nprobes:\n  - {name: cps, kind: connect, duration: 1s}\nblackout: {rate: 50%}\n"
	if _, err := Parse(strings.NewReader(spec)); err == nil || !strings.Contains(err.Error(), "throughput probe") {
		t.Errorf("a share with no throughput probe: error %v, want one asking for a throughput probe", err)
	}
}
