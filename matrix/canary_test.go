package matrix

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/store"
)

// canarySpec is a spec of one short probe over axis, offloads off for
// inline IPS, with canary as the canary key's value, one repeat unless
// more says otherwise, and the lines of more.
func canarySpec(axis, canary string, more ...string) string {
	repeats := "repeats: 1\n"
	if slices.ContainsFunc(more, func(l string) bool { return strings.HasPrefix(l, "repeats:") }) {
		repeats = ""
	}
	return "axes:\n  " + axis + "\nfixed: {offload.checksum: off, offload.tso: off, offload.lro: off}\ncanary: " + canary +
		"\nprobes:\n  - {name: up, direction: up, duration: 1s}\n" + repeats + "drift_check: false\nidle: 0s\n" + strings.Join(more, "\n") + "\n"
}

// canaryFixture is a sweep with a canary whose triggers the fake firewall
// drops exactly when its config runs inline IPS on lan with the canary's
// rule among lan's custom rules, and logs alerts for when it runs
// detect-only IDS there with the rule, as the box's Suricata would.
func canaryFixture(t *testing.T, spec string, prepare func(*configxml.Config)) (*sweepFixture, *[]string) {
	t.Helper()
	s, err := Parse(strings.NewReader(spec))
	if err != nil {
		t.Fatal(err)
	}
	f := newSweepSpec(t, s)
	// The fixture's wan runs detect-only Suricata, which would carry the
	// canary at every point; the tests here watch lan alone.
	if err := f.sweep.Config.Set("ids@wan", configxml.IDSOff); err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(f.sweep.Config)
	}
	f.fw.config = f.sweep.Config.Bytes()
	var nonces []string
	alerts := map[int]uint64{} // lan's alert logs: lines of the canary's sid, by port
	f.sweep.Alerts = func(_ context.Context, sid, port int) (probe.AlertLogs, error) {
		if sid != CanarySID {
			t.Errorf("alerts of sid %d counted, want the canary's %d", sid, CanarySID)
		}
		f.fw.mu.Lock()
		defer f.fw.mu.Unlock()
		return probe.AlertLogs{"/var/log/suricata/suricata_igb112345": alerts[port]}, nil
	}
	f.sweep.Canary = func(_ context.Context, c probe.Canary) (func(context.Context) (probe.CanaryResult, error), error) {
		nonces = append(nonces, string(c.Nonce))
		f.fw.mu.Lock()
		cfg, err := configxml.LoadBytes(f.fw.config)
		f.fw.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		mode, _ := cfg.Get("ids@lan")
		rules, _ := cfg.SuricataCustomRules("lan")
		passed := uint64(40)
		placed := strings.Contains(rules, `content:"`+string(c.Nonce)+`"`)
		if mode == configxml.IDSInlineIPS && placed {
			passed = 0
		}
		return func(context.Context) (probe.CanaryResult, error) {
			if mode == configxml.IDSAlert && placed {
				f.fw.mu.Lock()
				alerts[c.Port] += 40
				f.fw.mu.Unlock()
			}
			return probe.CanaryResult{Sent: 40, Passed: passed, ControlSent: 40, ControlPassed: 40}, nil
		}, nil
	}
	return f, &nonces
}

// TestSweepCanary: at inline-IPS and detect-only points the canary's rule
// is in the config the firewall gets, beside the interface's own custom
// rules, and every probe there runs the canary and records what passed
// and, detect-only, the alerts the box logged; the other points carry
// neither rule nor canary, and the interface's own rules come back as
// they were.
func TestSweepCanary(t *testing.T) {
	const own = "alert tcp any any -> any 23 (msg:\"telnet\"; sid:5000001; rev:1;)"
	f, nonces := canaryFixture(t, canarySpec("ids@lan: [off, ips-inline, ids]", "{rate: 40}", "repeats: 2", "order: as-written"), func(c *configxml.Config) {
		if err := c.Set("ids@lan", "ids"); err != nil {
			t.Fatal(err)
		}
		if err := c.SetSuricataCustomRules("lan", own); err != nil {
			t.Fatal(err)
		}
	})
	var configs []*configxml.Config
	apply := f.sweep.Apply
	f.sweep.Apply = func(ctx context.Context, config []byte, changes []configxml.Change) error {
		c, err := configxml.LoadBytes(config)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, c)
		return apply(ctx, config, changes)
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, err := f.st.Samples(t.Context(), f.sweep.Run)
	if err != nil {
		t.Fatal(err)
	}
	canaries := 0
	for _, x := range samples {
		var raw struct {
			Canary *probe.CanaryResult `json:"canary"`
		}
		if err := json.Unmarshal(x.Raw, &raw); err != nil {
			t.Fatal(err)
		}
		switch x.Point {
		case 1:
			if raw.Canary == nil || raw.Canary.Sent != 40 || raw.Canary.Passed != 0 || raw.Canary.ControlPassed != 40 || raw.Canary.Detect {
				t.Errorf("point %d round %d: canary %+v, want 40 sent and none passed", x.Point, x.Round, raw.Canary)
			}
		case 2:
			if raw.Canary == nil || !raw.Canary.Detect || raw.Canary.Sent != 40 || raw.Canary.Alerted != 40 || raw.Canary.FailOpen() || len(x.Warnings) > 0 {
				t.Errorf("point %d round %d: canary %+v (warnings %q), want 40 sent, detect-only, 40 alerted", x.Point, x.Round, raw.Canary, x.Warnings)
			}
		default:
			if raw.Canary != nil {
				t.Errorf("point %d round %d: canary %+v at a point without IDS", x.Point, x.Round, raw.Canary)
			}
		}
		if raw.Canary != nil {
			canaries++
		}
	}
	// Points 1 and 2 are applied in each round (as-written order takes
	// the points round by round): one canary waits for the IDS after
	// each apply, one runs beside each probe.
	if canaries != 4 || len(*nonces) != 8 {
		t.Errorf("%d samples with a canary, %d canaries started; want 4 and 8 (a settle and a probe in each of points 1's and 2's rounds)", canaries, len(*nonces))
	}
	for _, c := range configs {
		mode, _ := c.Get("ids@lan")
		rules, err := c.SuricataCustomRules("lan")
		if err != nil {
			t.Fatal(err)
		}
		rule := probe.Canary{Nonce: []byte((*nonces)[0])}.SuricataRule(CanarySID)
		want := own
		if mode == configxml.IDSInlineIPS || mode == configxml.IDSAlert {
			want = rule + "\n" + own
		}
		if rules != want {
			t.Errorf("ids@lan=%s: custom rules written\n%q\nwant\n%q", mode, rules, want)
		}
	}
}

// TestSweepCanaryNeedsItsOwnRestart: on a box already running inline IPS,
// a point that changes no IDS knob still gets the rule, with the Suricata
// resync that writes it (the package writes custom.rules only when it
// rebuilds its rules); a resumed run places the same nonce.
func TestSweepCanaryNeedsItsOwnRestart(t *testing.T) {
	spec := canarySpec("rules@lan: [0, 100]", "true", "order: as-written")
	f, nonces := canaryFixture(t, spec, func(c *configxml.Config) {
		for _, kv := range [][2]string{{"offload.checksum", "off"}, {"offload.tso", "off"}, {"offload.lro", "off"}, {"ids@lan", "ips-inline"}} {
			if err := c.Set(kv[0], kv[1]); err != nil {
				t.Fatal(err)
			}
		}
	})
	var changes [][]configxml.Change
	apply := f.sweep.Apply
	f.sweep.Apply = func(ctx context.Context, config []byte, ch []configxml.Change) error {
		changes = append(changes, ch)
		return apply(ctx, config, ch)
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(changes) == 0 || !containsChange(changes[0], configxml.Change{Knob: "canary@lan", From: "off", To: "on", Action: configxml.ActionIDSRestart}) {
		t.Errorf("first apply %+v: want canary@lan off→on with an ids-restart", changes)
	}
	for _, ch := range changes[1:] {
		for _, c := range ch {
			if c.Action == configxml.ActionIDSRestart {
				t.Errorf("apply %+v: the canary was placed already; no resync needed", ch)
			}
		}
	}
	// The same run swept again gives the same nonce.
	again := *f.sweep
	again.canary = nil
	if err := again.startCanary(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(*nonces) == 0 || string(again.canary.probe.Nonce) != (*nonces)[0] {
		t.Errorf("resumed run's nonce %q, first %q", again.canary.probe.Nonce, *nonces)
	}
}

func containsChange(ch []configxml.Change, want configxml.Change) bool {
	for _, c := range ch {
		if c == want {
			return true
		}
	}
	return false
}

func TestCanarySpec(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		on   bool
		err  string
	}{
		{"canary: true", true, ""},
		{"canary: false", false, ""},
		{"canary: {rate: 50}", true, ""},
		{"canary: {rate: 5000}", true, "canary: rate 5000 triggers/s: use 1 to 1,000"},
		{"canary: sometimes", false, "canary: give true, false or {rate: TRIGGERS_A_SECOND}"},
	} {
		s, err := Parse(strings.NewReader("axes:\n  ids@lan: [off, ips-inline]\nfixed: {offload.checksum: off, offload.tso: off, offload.lro: off}\nprobes:\n  - {name: up, direction: up, duration: 1s}\n" + tc.yaml + "\n"))
		if err == nil {
			err = s.Check(pfSense(t))
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want %q", tc.yaml, err, tc.err)
			}
			continue
		}
		if err != nil || s.Canary.On() != tc.on {
			t.Errorf("%s: on=%v, %v; want on=%v", tc.yaml, s != nil && s.Canary.On(), err, tc.on)
		}
	}
}

// TestCanaryKeepsEachConfigsRules: placing and taking off the rule gives
// back each config's own custom rules byte for byte, whichever config
// they come from (a config set, a boot environment), and a rule of the
// config's own with the canary's sid is refused by name.
func TestCanaryKeepsEachConfigsRules(t *testing.T) {
	cn := &canary{rule: probe.Canary{Nonce: probe.NonceFrom("t")}.SuricataRule(CanarySID)}
	for _, text := range []string{"", "alert ip any any -> any any (msg:\"a\"; sid:5000001;)", "alert ip any any -> any any (msg:\"b\"; sid:5000002;)\n\n"} {
		c := pfSense(t)
		if err := c.Set("ids@lan", "ips-inline"); err != nil {
			t.Fatal(err)
		}
		if err := c.SetSuricataCustomRules("lan", text); err != nil {
			t.Fatal(err)
		}
		on, err := cn.place(c)
		if got, _ := c.SuricataCustomRules("lan"); err != nil || !slices.Contains(on, "lan") || got != cn.rule+"\n"+text {
			t.Errorf("placed on %q: %q on %v (%v)", text, got, on, err)
		}
		// Detect-only IDS carries it too (its alerts are counted).
		if err := c.Set("ids@lan", "ids"); err != nil {
			t.Fatal(err)
		}
		on, err = cn.place(c)
		if got, _ := c.SuricataCustomRules("lan"); err != nil || !slices.Contains(on, "lan") || got != cn.rule+"\n"+text {
			t.Errorf("kept at ids on %q: %q on %v (%v)", text, got, on, err)
		}
		if err := c.Set("ids@lan", "ips-legacy"); err != nil {
			t.Fatal(err)
		}
		on, err = cn.place(c)
		if got, _ := c.SuricataCustomRules("lan"); err != nil || slices.Contains(on, "lan") || got != text {
			t.Errorf("taken off %q: %q on %v (%v)", text, got, on, err)
		}
	}
	c := pfSense(t)
	if err := c.Set("ids@lan", "ips-inline"); err != nil {
		t.Fatal(err)
	}
	c.SetSuricataCustomRules("lan", "drop ip any any -> any any (msg:\"mine\"; sid:1990001;)\n")
	if _, err := cn.place(c); err == nil || !strings.Contains(err.Error(), "already use sid 1990001") {
		t.Errorf("a rule of the config's own with the canary's sid: %v", err)
	}
}

// TestSweepCanaryWaitsForTheIPS: Suricata's start returns before it
// inspects, so after an apply the sweep sends triggers until the IPS
// drops them, and only then probes; an IPS that never does is a warning
// after the settle timeout, and the samples say fail-open.
func TestSweepCanaryWaitsForTheIPS(t *testing.T) {
	spec := canarySpec("ids@lan: [off, ips-inline]", "true", "order: as-written", "settle: {timeout: 2s}")
	for _, tc := range []struct {
		name      string
		ready     int // canary runs before the IPS inspects; -1 never
		wantRuns  int
		wantWarn  bool
		wantFails bool
	}{
		{"ready after two tries", 2, 4, false, false},
		{"never inspects", -1, 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := canaryFixture(t, spec, nil)
			inner := f.sweep.Canary
			runs := 0
			f.sweep.Canary = func(ctx context.Context, c probe.Canary) (func(context.Context) (probe.CanaryResult, error), error) {
				runs++
				stop, err := inner(ctx, c)
				if err != nil || tc.ready >= 0 && runs > tc.ready {
					return stop, err
				}
				return func(context.Context) (probe.CanaryResult, error) {
					return probe.CanaryResult{Sent: 10, Passed: 10, ControlSent: 10, ControlPassed: 10}, nil
				}, nil
			}
			if err := f.sweep.Execute(t.Context()); err != nil {
				t.Fatal(err)
			}
			if tc.wantRuns > 0 && runs != tc.wantRuns {
				t.Errorf("%d canary runs, want %d (two passing, one dropped to settle, one beside the probe)", runs, tc.wantRuns)
			}
			events, _ := f.st.Events(t.Context(), f.sweep.Run)
			warned := slices.ContainsFunc(events, func(e store.Event) bool {
				return strings.Contains(e.Message, "still let 10 of 10 triggers through") && strings.Contains(e.Message, "(10 of 10 control datagrams passed)")
			})
			if warned != tc.wantWarn {
				t.Errorf("warned %v, want %v: %+v", warned, tc.wantWarn, events)
			}
			samples, _ := f.st.Samples(t.Context(), f.sweep.Run)
			failOpen := slices.ContainsFunc(samples, func(x store.Sample) bool {
				return slices.ContainsFunc(x.Warnings, func(w string) bool { return strings.HasPrefix(w, "fail-open: 10 of 10") })
			})
			if failOpen != tc.wantFails {
				t.Errorf("fail-open sample %v, want %v", failOpen, tc.wantFails)
			}
		})
	}
}

// TestCanaryWarnsOfSuppressLists: an inline interface with a suppress list
// could turn the canary's drop rule off; the sweep says so, once.
func TestCanaryWarnsOfSuppressLists(t *testing.T) {
	f, _ := canaryFixture(t, canarySpec("rules@lan: [0, 100]", "true", "order: as-written"), func(c *configxml.Config) {
		if err := c.SetAll([]string{"offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline"}); err != nil {
			t.Fatal(err)
		}
		if err := c.SetAll([]string{"xml:installedpackages/suricata/rule[2]/suppresslistname=lab-noise"}); err != nil {
			t.Fatal(err)
		}
	})
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	events, _ := f.st.Events(t.Context(), f.sweep.Run)
	n := 0
	for _, e := range events {
		if strings.Contains(e.Message, `uses the suppress list "lab-noise"`) {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d suppress-list warnings, want 1: %+v", n, events)
	}
}

// TestSweepCanaryInconclusive: a probe whose triggers and control stream
// both did not pass shows nothing of the IPS: the sample keeps no canary,
// and says why.
func TestSweepCanaryInconclusive(t *testing.T) {
	f, _ := canaryFixture(t, canarySpec("ids@lan: [ips-inline]", "true", "settle: {timeout: 1s}"), nil)
	f.sweep.Canary = func(context.Context, probe.Canary) (func(context.Context) (probe.CanaryResult, error), error) {
		return func(context.Context) (probe.CanaryResult, error) {
			return probe.CanaryResult{Sent: 20, ControlSent: 20}, nil
		}, nil
	}
	if err := f.sweep.Execute(t.Context()); err != nil {
		t.Fatal(err)
	}
	samples, _ := f.st.Samples(t.Context(), f.sweep.Run)
	if len(samples) != 1 || strings.Contains(string(samples[0].Raw), `"canary"`) || !slices.ContainsFunc(samples[0].Warnings, func(w string) bool {
		return strings.HasPrefix(w, "canary inconclusive: none of its 20 triggers passed, but none of the 20 control")
	}) {
		t.Errorf("samples %+v: want one without a canary, saying it was inconclusive", samples)
	}
}

// TestSweepCanaryAlerts: at a detect-only point the sample keeps the
// alerts the box logged for its round's triggers, waiting for those
// written late; triggers that passed without an alert make it "ids
// missed"; more alerts than triggers, a count that went back (logs
// pruned), a box without an alert log, or a driver that cannot read them
// cost the sample its canary, with a warning that says why.
func TestSweepCanaryAlerts(t *testing.T) {
	for _, tc := range []struct {
		name string
		// logged is what the IDS writes for a round's 40 triggers: now,
		// and at the third reading after the round (late).
		now, late uint64
		stale     uint64 // lines for the round's port before it, which then go (pruned)
		nolog     bool
		noreader  bool
		alerted   uint64 // the sample's canary; 0: none
		warning   string
	}{
		{name: "late alerts waited for", now: 30, late: 10, alerted: 40},
		{name: "missed", now: 30, alerted: 30, warning: "ids missed: the IDS on lan logged no alert for 10 of the 40 canary triggers that passed (sid 1990001)"},
		{name: "more than sent", now: 50, warning: "canary's alerts not counted: 50 alerts for 40 triggers"},
		{name: "pruned", now: 40, stale: 45, warning: "canary's alerts not counted: the IDS's alert logs were pruned or emptied during the probe"},
		{name: "no log", nolog: true, warning: "canary's alerts not counted: the IDS has no alert log (alerts.log) on the box yet"},
		{name: "no reader", noreader: true, warning: "canary not run: fwab cannot read this firewall's IDS alert logs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := canaryFixture(t, canarySpec("ids@lan: [ids]", "true", "settle: {timeout: 1s}"), nil)
			var mu sync.Mutex
			count, reads := map[int]uint64{}, map[int]int{}
			f.sweep.Canary = func(_ context.Context, c probe.Canary) (func(context.Context) (probe.CanaryResult, error), error) {
				return func(context.Context) (probe.CanaryResult, error) {
					mu.Lock()
					defer mu.Unlock()
					count[c.Port] = tc.now
					reads[c.Port] = 0
					return probe.CanaryResult{Sent: 40, Passed: 40, ControlSent: 40, ControlPassed: 40, Port: c.Port}, nil
				}, nil
			}
			f.sweep.Alerts = func(_ context.Context, _, port int) (probe.AlertLogs, error) {
				mu.Lock()
				defer mu.Unlock()
				if tc.nolog {
					return probe.AlertLogs{}, nil
				}
				n := tc.stale // before the round
				if _, seen := count[port]; seen {
					if reads[port]++; reads[port] == 3 {
						count[port] += tc.late
					}
					n = count[port]
				}
				return probe.AlertLogs{"/var/log/suricata/suricata_igb112345": n}, nil
			}
			if tc.noreader {
				f.sweep.Alerts = nil
			}
			if err := f.sweep.Execute(t.Context()); err != nil {
				t.Fatal(err)
			}
			samples, _ := f.st.Samples(t.Context(), f.sweep.Run)
			if len(samples) != 1 {
				t.Fatalf("%d samples, want 1", len(samples))
			}
			var raw struct {
				Canary *probe.CanaryResult `json:"canary"`
			}
			if err := json.Unmarshal(samples[0].Raw, &raw); err != nil {
				t.Fatal(err)
			}
			got := uint64(0)
			if raw.Canary != nil {
				got = raw.Canary.Alerted
			}
			warned := tc.warning == "" && len(samples[0].Warnings) == 0 || tc.warning != "" && slices.ContainsFunc(samples[0].Warnings, func(w string) bool { return strings.HasPrefix(w, tc.warning) })
			if got != tc.alerted || (tc.alerted > 0) != (raw.Canary != nil) || !warned {
				t.Errorf("sample: canary %+v, warnings %q; want %d alerted and warning %q", raw.Canary, samples[0].Warnings, tc.alerted, tc.warning)
			}
		})
	}
}
