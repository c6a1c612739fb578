package matrix

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
)

// CanarySpec is the spec's IPS canary (probe.Canary): at every point that
// runs inline IPS, a drop rule of fwab's own in the ruleset the box
// loads, and triggers that it matches sent beside every probe. Written
// canary: true for the defaults, or canary: {rate: 50}.
type CanarySpec struct {
	Rate float64 `yaml:"rate"` // triggers a second; default 20
	off  bool    // canary: false
}

func (c *CanarySpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var on bool
		if err := n.Decode(&on); err != nil {
			return lineErr(n, "canary: give true, false or {rate: TRIGGERS_A_SECOND}")
		}
		c.off = !on
		return nil
	}
	type plain CanarySpec
	return n.Decode((*plain)(c))
}

// On reports whether the spec asks for a canary.
func (c *CanarySpec) On() bool { return c != nil && !c.off }

// Probe is the canary the spec asks for, with nonce.
func (c *CanarySpec) Probe(nonce []byte) (probe.Canary, error) {
	out := probe.Canary{Rate: c.Rate, Nonce: nonce}
	if err := out.Validate(); err != nil {
		return out, &SpecError{Msg: "canary: " + strings.TrimPrefix(err.Error(), "canary ")}
	}
	return out, nil
}

// CanarySID is the canary rule's signature id, from the range Suricata
// leaves to local rules (1000000–1999999).
const CanarySID = 1990001

// canaryModes are the IDS modes whose points carry the canary: inline
// IPS, which must drop the triggers, and detect-only IDS, which must
// alert on them (Suricata logs a drop rule it cannot act on as an alert).
// Legacy blocking mode inspects copies of the packets and blocks an
// offender's address only after the alert (alert-pf), so the trigger
// that alerts always passes, and with the package's default block-ip
// both the offender is the client or the server itself: a canary there
// would block the probe's own endpoints.
var canaryModes = []string{configxml.IDSInlineIPS, configxml.IDSAlert}

// canary is a sweep's IPS canary once its run is known.
type canary struct {
	probe  probe.Canary
	rule   string          // the Suricata rule placed on inline interfaces
	warned map[string]bool // what warn said already
}

// warn says once what could make the canary read wrong in a config: a
// suppress list (a suppress or rate_filter entry can turn the drop rule
// off for the client's address, and the samples would call a working IPS
// fail-open), and inline IPS on several interfaces (one on the path that
// drops the triggers stands for all of them).
func (cn *canary) warn(ctx context.Context, s *Sweep, c *configxml.Config, on []string) {
	if cn.warned == nil {
		cn.warned = map[string]bool{}
	}
	say := func(key, msg string) {
		if !cn.warned[key] {
			cn.warned[key] = true
			s.event(ctx, "warning", -1, msg)
		}
	}
	for _, i := range on {
		if list := c.SuricataSuppressList(i); list != "" {
			say("suppress "+i+" "+list, fmt.Sprintf("canary: Suricata on %s uses the suppress list %q; a suppress or rate_filter entry for the canary's sid (%d), sid 0 or the client's address turns its drop rule off, and the samples would say fail-open of a working IPS", i, list, CanarySID))
		}
	}
	if len(on) > 1 {
		say("several "+strings.Join(on, ","), fmt.Sprintf("canary: inline IPS runs on %s; the triggers test only the interfaces on the path from client to server, and one of them that drops them stands for all", strings.Join(on, " and ")))
	}
}

// free checks that no custom rule of c's takes the canary's sid.
func (cn *canary) free(c *configxml.Config) error {
	for _, i := range c.Interfaces() {
		text, err := c.SuricataCustomRules(i.Key)
		if err != nil {
			return fmt.Errorf("canary: %w", err)
		}
		if strings.Contains(own(text, cn.rule), fmt.Sprintf("sid:%d;", CanarySID)) {
			return fmt.Errorf("canary: the custom Suricata rules on %s already use sid %d, the canary's; renumber that rule (Services → Suricata → %s → Rules → custom.rules) or set canary: false", i.Key, CanarySID, i.Key)
		}
	}
	return nil
}

// startCanary sets up the run's canary: its nonce comes from the run's
// id and creation time, so that a resumed run places and sends the same
// one as the sweep that began it.
func (s *Sweep) startCanary(ctx context.Context) error {
	spec := s.Plan.Spec.Canary
	if !spec.On() || s.Canary == nil {
		return nil
	}
	if s.Config.Flavor() != configxml.PfSense {
		s.event(ctx, "warning", -1, "canary not placed: on OPNsense fwab does not yet put its rule where the IDS loads custom rules; the inline points run without one")
		return nil
	}
	run, err := s.Store.Run(ctx, s.Run)
	if err != nil {
		return err
	}
	p, err := spec.Probe(probe.NonceFrom(fmt.Sprintf("fwab run %d created %d", s.Run, run.Created.UnixNano())))
	if err != nil {
		return err
	}
	c := &canary{probe: p, rule: p.SuricataRule(CanarySID)}
	if err := c.free(s.Config); err != nil {
		return err
	}
	s.canary = c
	return nil
}

// own is custom rules text without the canary rule. The rule is put
// first, on a line of its own, so that taking it off gives back the
// interface's own rules byte for byte, whatever config they came from (a
// config set, a boot environment).
func own(text, rule string) string { return strings.TrimPrefix(text, rule+"\n") }

// place puts the canary rule on every interface of c that runs inline IPS
// or detect-only IDS and takes it off every other, each interface's own
// custom rules kept. It returns the interfaces that carry it.
func (cn *canary) place(c *configxml.Config) ([]string, error) {
	var on []string
	for _, i := range c.Interfaces() {
		mode, err := c.Get("ids@" + i.Key)
		if err != nil {
			continue // an interface the IDS knob does not take
		}
		text, err := c.SuricataCustomRules(i.Key)
		if err != nil {
			return nil, fmt.Errorf("canary: %w", err)
		}
		want := own(text, cn.rule)
		if slices.Contains(canaryModes, mode) {
			if strings.Contains(want, fmt.Sprintf("sid:%d;", CanarySID)) {
				return nil, fmt.Errorf("canary: the custom Suricata rules on %s already use sid %d, the canary's; renumber that rule or set canary: false", i.Key, CanarySID)
			}
			want = cn.rule + "\n" + want
			on = append(on, i.Key)
		}
		if text == want {
			continue
		}
		if err := c.SetSuricataCustomRules(i.Key, want); err != nil {
			return nil, fmt.Errorf("canary: %w", err)
		}
	}
	return on, nil
}

// placeCanary gives next the canary as its point needs it and adds the
// Suricata resync that writes the rule files where the changes do not
// already run one (the package writes custom.rules only when it
// rebuilds the rules: fwapi's ids-restart). next may be current itself
// when the point changes no knob; it is then copied first.
//
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:3442 — `@file_put_contents("{$suricatacfgdir}/rules/custom.rules", base64_decode($suricatacfg['customrules']));`
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:1316 — `if (file_exists("{$suricatacfgdir}/rules/custom.rules")) {`, then listed in rule-files when not empty
func (s *Sweep) placeCanary(ctx context.Context, current, next *configxml.Config, changes []configxml.Change) (*configxml.Config, []configxml.Change, error) {
	if s.canary == nil {
		return next, changes, nil
	}
	copied := next == current
	if copied {
		c, err := configxml.LoadBytes(current.Bytes())
		if err != nil {
			return nil, nil, err
		}
		next = c
	}
	before := canaryOn(current, s.canary.rule)
	on, err := s.canary.place(next)
	if err != nil {
		return nil, nil, err
	}
	s.canary.warn(ctx, s, next, on)
	if copied && slices.Equal(before, on) && bytes.Equal(next.Bytes(), current.Bytes()) {
		return current, changes, nil
	}
	restarts := slices.ContainsFunc(changes, func(c configxml.Change) bool { return c.Action == configxml.ActionIDSRestart })
	if !restarts && !slices.Equal(before, on) {
		for _, i := range next.Interfaces() {
			was, is := slices.Contains(before, i.Key), slices.Contains(on, i.Key)
			if was != is {
				changes = append(changes, configxml.Change{Knob: "canary@" + i.Key, From: onOff(was), To: onOff(is), Action: configxml.ActionIDSRestart})
			}
		}
	}
	return next, changes, nil
}

// canaryOn are the interfaces whose custom rules in c hold rule.
func canaryOn(c *configxml.Config, rule string) []string {
	var out []string
	for _, i := range c.Interfaces() {
		if text, err := c.SuricataCustomRules(i.Key); err == nil && strings.HasPrefix(text, rule+"\n") {
			out = append(out, i.Key)
		}
	}
	return out
}

// noteCanary records which interfaces of current carry the canary rule,
// and whether all of them only detect.
func (s *Sweep) noteCanary(current *configxml.Config) {
	s.canaryAt = canaryOn(current, s.canary.rule)
	s.canaryDetect = !slices.ContainsFunc(s.canaryAt, func(i string) bool {
		mode, _ := current.Get("ids@" + i)
		return mode == configxml.IDSInlineIPS
	})
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// measureCanary runs the probe, with the canary's triggers beside it
// where the firewall's config carries the canary rule. Triggers that
// passed an inline IPS make the sample fail-open, triggers a detect-only
// IDS logged no alert for make it "ids missed" (warnings; the throughput
// stands, and the report flags them); a canary that cannot run or count
// costs the sample only its canary, with a warning.
func (s *Sweep) measureCanary(ctx context.Context, pr ProbeRun) probe.Sample {
	if s.canary == nil || len(s.canaryAt) == 0 {
		return s.Measure(ctx, pr)
	}
	var sample probe.Sample
	r, why, _ := s.canaryRound(ctx, func() { sample = s.Measure(ctx, pr) })
	switch {
	case why != "":
		sample.Warnings = append(sample.Warnings, why)
	case r.Sent == 0:
		sample.Warnings = append(sample.Warnings, "canary: no trigger was sent during the probe")
	case !r.FailOpen() && !r.Conclusive() && r.Detect:
		sample.Warnings = append(sample.Warnings, fmt.Sprintf("canary inconclusive: %d of the %d control datagrams without the nonce passed beside %d triggers; the path dropped them, and the IDS's alerts say little", r.ControlPassed, r.ControlSent, r.Sent))
	case !r.FailOpen() && !r.Conclusive():
		sample.Warnings = append(sample.Warnings, fmt.Sprintf("canary inconclusive: none of its %d triggers passed, but none of the %d control datagrams without the nonce did either; the path dropped them, not necessarily the IPS", r.Sent, r.ControlSent))
	default:
		sample.Canary = &r
		if r.FailOpen() {
			sample.Warnings = append(sample.Warnings, fmt.Sprintf("fail-open: %d of %d canary triggers passed the inline IPS on %s, which its drop rule (sid %d) should have stopped", r.Passed, r.Sent, strings.Join(s.canaryAt, ", "), CanarySID))
		}
		if m := r.Missed(); m > 0 {
			sample.Warnings = append(sample.Warnings, fmt.Sprintf("ids missed: the IDS on %s logged no alert for %d of the %d canary triggers that passed (sid %d)", strings.Join(s.canaryAt, ", "), m, r.Passed, CanarySID))
		}
	}
	return sample
}

// canaryRound runs the canary's triggers while during runs and counts
// what the box did with them: how many passed, and at a detect-only point
// how many alerts it logged (by the round's own port, so that alerts of
// an earlier round written late are not this round's). why says what
// kept it from running or counting; again, that the count may succeed
// if tried again (no alert log yet, a log pruned meanwhile). during runs
// regardless.
func (s *Sweep) canaryRound(ctx context.Context, during func()) (r probe.CanaryResult, why string, again bool) {
	c := s.canary.probe
	var before probe.AlertLogs
	if s.canaryDetect {
		if s.Alerts == nil {
			during()
			return r, "canary not run: fwab cannot read this firewall's IDS alert logs, which a detect-only point's canary counts", false
		}
		c.Port = probe.CanaryPort()
		var err error
		if before, err = s.Alerts(ctx, CanarySID, c.Port); err != nil {
			during()
			return r, "canary not run: " + err.Error(), false
		}
	}
	stop, err := s.Canary(ctx, c)
	if err != nil {
		during()
		return r, "canary not run: " + err.Error(), false
	}
	during()
	if r, err = stop(context.WithoutCancel(ctx)); err != nil {
		return r, "canary not counted: " + err.Error(), false
	}
	if !s.canaryDetect {
		return r, "", false
	}
	r.Detect, r.Port = true, c.Port
	if r.Alerted, why, again = s.alertsSince(ctx, before, r); why != "" {
		return r, "canary's alerts not counted: " + why, again
	}
	return r, "", false
}

// alertsSince counts the alerts of r's triggers the box logged since
// before, waiting while they still come in: an IDS logs a trigger after
// it saw it, and the last ones may be written after the probe ended. It
// stops once every trigger that passed has its alert, or the count held
// still for a second after the first, or after 5 s. why says what made
// the count say nothing, again whether it may next time.
func (s *Sweep) alertsSince(ctx context.Context, before probe.AlertLogs, r probe.CanaryResult) (n uint64, why string, again bool) {
	if len(before) == 0 {
		return 0, "the IDS has no alert log (alerts.log) on the box yet; its instance may still be starting, or its fast log is off", true
	}
	deadline := time.Now().Add(5 * time.Second)
	still, last := 0, uint64(0)
	for {
		after, err := s.Alerts(context.WithoutCancel(ctx), CanarySID, r.Port)
		if err != nil {
			return 0, err.Error(), false
		}
		n, ok := after.Since(before)
		switch {
		case !ok:
			return 0, "the IDS's alert logs were pruned or emptied during the probe", true
		case n > r.Sent:
			return 0, fmt.Sprintf("%d alerts for %d triggers: something else sent datagrams with the nonce to port %d", n, r.Sent, r.Port), false
		case n > last:
			still, last = 0, n
		case n > 0:
			still++
		}
		if n >= r.Passed || still >= 4 || time.Now().After(deadline) || ctx.Err() != nil {
			return n, "", false
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// settleCanary waits, after an apply at a point that carries the canary,
// until the IPS drops the triggers (or the detect-only IDS alerts on all
// of them): Suricata's rc script starts the daemon and returns before it
// inspects anything (a real ruleset loads for seconds), so probes at once
// would measure a box that lets everything through. It gives up after
// the spec's settle timeout with a warning; the samples then say what
// they saw.
func (s *Sweep) settleCanary(ctx context.Context, point int) {
	if s.canary == nil || len(s.canaryAt) == 0 {
		return
	}
	deadline := time.Now().Add(s.Plan.Spec.Settle.Timeout.D())
	for {
		r, why, again := s.canaryRound(ctx, func() {
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		})
		switch {
		case ctx.Err() != nil:
			return
		case again && time.Now().Before(deadline):
			continue
		case why != "":
			s.event(ctx, "warning", point, "canary: not settled: "+why)
			return
		case r.Sent > 0 && r.Conclusive() && (r.Detect && r.Missed() == 0 || !r.Detect && r.Passed == 0):
			return
		case time.Now().After(deadline) && r.Detect:
			s.event(ctx, "warning", point, fmt.Sprintf("canary: the IDS on %s logged alerts for %d of the %d triggers that passed %s after the change (%d of %d control datagrams passed): it may not inspect yet, or not at all; the samples say what they see", strings.Join(s.canaryAt, ", "), r.Alerted, r.Passed, s.Plan.Spec.Settle.Timeout.D(), r.ControlPassed, r.ControlSent))
			return
		case time.Now().After(deadline):
			s.event(ctx, "warning", point, fmt.Sprintf("canary: the IPS on %s still let %d of %d triggers through %s after the change (%d of %d control datagrams passed): it may not inspect yet, or not at all; the samples say what they see", strings.Join(s.canaryAt, ", "), r.Passed, r.Sent, s.Plan.Spec.Settle.Timeout.D(), r.ControlPassed, r.ControlSent))
			return
		}
	}
}
