package matrix

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
	"github.com/fwab/fwab/probe/smartplug"
	"github.com/fwab/fwab/store"
	"golang.org/x/perf/benchmath"
)

// ProbeRun is one probe as the sweep runs it: a spec entry, and for a
// packet-size sweep one of its lengths.
type ProbeRun struct {
	Name   string // unique per spec: "up", "udp-64", "ndr-64"
	Spec   ProbeSpec
	Iperf3 probe.Iperf3
	// NDR is a kind: ndr probe's rate search at one frame size; nil for
	// an iperf3 probe. Iperf3 is then its trials at the highest rate, for
	// the checks before a sweep.
	NDR *probe.NDR
	// Connect is a kind: connect probe; nil for the other kinds.
	Connect *probe.Connect
	// HTTP is a kind: http probe at one object size; nil for the others.
	HTTP *probe.HTTP
	// Links are the target's endpoint pairs it runs on: none, the first;
	// one, that one; several, all at once (the spec's concurrent).
	Links []string
}

// Validate reports what the probe's tool would refuse.
func (pr ProbeRun) Validate() error {
	switch {
	case pr.Connect != nil:
		return pr.Connect.Validate()
	case pr.HTTP != nil:
		return pr.HTTP.Validate()
	}
	return pr.Iperf3.Validate()
}

// Measure runs the probe once from client to server.
func (pr ProbeRun) Measure(ctx context.Context, client, server probe.Endpoint, w probe.Watch) probe.Sample {
	switch {
	case pr.NDR != nil:
		return pr.NDR.Measure(ctx, client, server, w) // it leaves out ping
	case pr.Connect != nil:
		w.Ping = pr.Spec.Ping
		return pr.Connect.Measure(ctx, client, server, w)
	case pr.HTTP != nil:
		w.Ping = pr.Spec.Ping
		return pr.HTTP.Measure(ctx, client, server, w)
	}
	w.Ping = pr.Spec.Ping
	return pr.Iperf3.Measure(ctx, client, server, w)
}

// MeasureLinks runs the probe on its links (ProbeRun.Links), the
// target's endpoint pairs by name; with none, on the first.
func (pr ProbeRun) MeasureLinks(ctx context.Context, links map[string]probe.Link, first string, w probe.Watch) probe.Sample {
	names := pr.Links
	if len(names) == 0 {
		names = []string{first}
	}
	var ls []probe.Link
	for _, n := range names {
		l, ok := links[n]
		if !ok {
			return probe.Sample{Failed: true, Reason: fmt.Sprintf("link %s is not open", n)} // the sweep opened every link its probes name
		}
		ls = append(ls, l)
	}
	if len(ls) == 1 {
		return pr.Measure(ctx, ls[0].Client, ls[0].Server, w)
	}
	w.Ping = pr.Spec.Ping
	return pr.Iperf3.MeasureLinks(ctx, ls, w)
}

// ProbeRuns lists the probes every step runs, in spec order: a probe on
// several links one after another is one run per link ("up@b"), on
// several at once one run for them all ("up@a+b").
func (s *Spec) ProbeRuns() []ProbeRun {
	var out []ProbeRun
	for _, p := range s.Probes {
		runs := s.probeRuns(p)
		switch {
		case len(p.Links) == 0:
			out = append(out, runs...)
		case p.Concurrent:
			for _, r := range runs {
				r.Name, r.Links = r.Name+"@"+strings.Join(p.Links, "+"), p.Links
				out = append(out, r)
			}
		default:
			for _, r := range runs {
				for _, l := range p.Links {
					q := r
					q.Name, q.Links = r.Name+"@"+l, []string{l}
					q.Iperf3.ClientCPUs, q.Iperf3.ServerCPUs = q.Iperf3.CPUsFor(l)
					if q.NDR != nil {
						n := *q.NDR
						n.Iperf3.ClientCPUs, n.Iperf3.ServerCPUs = q.Iperf3.ClientCPUs, q.Iperf3.ServerCPUs
						q.NDR = &n
					}
					out = append(out, q)
				}
			}
		}
	}
	return out
}

// ThroughputProbe names the run of ProbeRuns whose throughput a blackout
// rate that is a share (BlackoutSpec.Share) is taken of; "" if none. It
// is an iperf3 run (not a rate search or a connection rate), best on the
// stream's own link (the first: a run that names none) and alone on it
// (not several links summed), TCP, of full-size packets: the load whose
// share of packets a stream of full-size datagrams is. The first best one.
func (s *Spec) ThroughputProbe() string {
	best, name := -1, ""
	for _, pr := range s.ProbeRuns() {
		if pr.NDR != nil || pr.Connect != nil || pr.HTTP != nil {
			continue
		}
		score := 0
		if len(pr.Links) == 0 {
			score += 4
		}
		if !pr.Iperf3.UDP {
			score += 2
		}
		if pr.Iperf3.Length == 0 || pr.Iperf3.Length >= 1200 {
			score++
		}
		if score > best {
			best, name = score, pr.Name
		}
	}
	return name
}

// probeRuns are one probe's runs on one link.
func (s *Spec) probeRuns(p ProbeSpec) []ProbeRun {
	base := probe.Iperf3{
		Direction:   probe.Direction(p.Direction),
		Parallel:    p.Parallel,
		Duration:    p.Duration.D(),
		Omit:        p.Omit.D(),
		UDP:         p.UDP,
		Bitrate:     p.Bitrate,
		CPUAffinity: p.Affinity,
		Window:      p.Window,
		ClientCPUs:  p.CPUSet.Client,
		ServerCPUs:  p.CPUSet.Server,
		LinkCPUs:    p.CPUSet.Links,
	}
	switch p.Kind {
	case "ndr":
		return ndrRuns(p, base)
	case "connect":
		c := &probe.Connect{Duration: p.Duration.D(), Parallel: p.Parallel}
		return []ProbeRun{{Name: p.Name, Spec: p, Iperf3: base, Connect: c}}
	case "http":
		var out []ProbeRun
		for _, o := range p.Objects {
			n, _ := probe.ParseBytes(o)
			h := &probe.HTTP{Object: n, TLS: p.HTTPS, Clients: p.Parallel, Rate: p.Rate, Duration: p.Duration.D()}
			out = append(out, ProbeRun{Name: p.Name + "-" + o, Spec: p, Iperf3: base, HTTP: h})
		}
		return out
	}
	if len(p.Lengths) == 0 {
		return []ProbeRun{{Name: p.Name, Spec: p, Iperf3: base}}
	}
	var out []ProbeRun
	for _, l := range p.Lengths {
		ip := base
		ip.Length = l
		out = append(out, ProbeRun{Name: p.Name + "-" + strconv.Itoa(l), Spec: p, Iperf3: ip})
	}
	return out
}

// ndrRuns are a kind: ndr probe's searches, one per frame size (or mix),
// trials from 1 s to the probe's duration with the final interval 0.5 %
// wide. The spec was checked: its sizes, rate and tolerance parse.
func ndrRuns(p ProbeSpec, base probe.Iperf3) []ProbeRun {
	top, _ := probe.ParseBitrate(p.Bitrate)
	tol, _ := p.tolerance()
	bidir := p.Direction == string(probe.Bidir)
	if bidir {
		base.Direction = probe.Up
	}
	var out []ProbeRun
	for _, f := range p.FrameSizes {
		frames, _ := probe.ParseFrames(f, ndrMTU)
		// The rates are UDP payload bits/s, as iperf3 -b takes them: the
		// link's speed in payload terms at these frames, each way.
		maxPayload := top * frames.MeanPayload() / (frames.MeanFrame() + 20)
		if bidir {
			maxPayload *= 2
		}
		trial := base
		trial.Parallel, trial.UDP, trial.Length, trial.Bitrate = 0, true, int(math.Round(frames.MeanPayload())), strconv.FormatFloat(maxPayload, 'f', 0, 64)
		n := &probe.NDR{Frames: frames, Bidir: bidir, Iperf3: base,
			Search: probe.RateSearch{Max: maxPayload, Tolerance: tol, Width: 0.005, InitialDuration: time.Second, FinalDuration: p.Duration.D()}}
		switch p.Generator {
		case "trafgen":
			n.Packets = probe.Trafgen{}
		case "pkt-gen":
			n.Packets = probe.PktGen{}
		}
		if p.Ping {
			n.LatencyAt = probe.LatencyFractions
		}
		out = append(out, ProbeRun{Name: p.Name + "-" + frames.Name, Spec: p, Iperf3: trial, NDR: n})
	}
	return out
}

// PowerMeter is the spec's power meter: a smart plug read over HTTP, or a
// figure measured by hand; nil when the spec has none.
func (s *Spec) PowerMeter() (probe.PowerMeter, error) {
	switch {
	case s.Power == nil:
		return nil, nil
	case s.Power.URL != "":
		m := smartplug.Meter{URL: s.Power.URL, Path: s.Power.JSONPath}
		if err := m.Validate(); err != nil {
			return nil, &SpecError{Msg: "power: " + err.Error()}
		}
		return m, nil
	default:
		return probe.ManualPower(s.Power.Watts), nil
	}
}

// StorePoints are the plan's points as the results database keeps them.
func (p *Plan) StorePoints() []store.Point {
	out := make([]store.Point, len(p.Points))
	for i, pt := range p.Points {
		knobs := map[string]string{}
		for _, kv := range pt.Values {
			knobs[kv.Knob] = kv.Value
		}
		out[i] = store.Point{Index: pt.Index, Knobs: knobs, Status: store.Pending}
	}
	return out
}

// Progress is reported before each step and each probe.
type Progress struct {
	Step, Steps int // 1-based step, total
	Point       *Point
	Round       int
	Phase       string // apply, settle, idle, probe, skip, failed
	Probe       string
	Detail      string
}

// Sweep runs a plan against a firewall, recording every sample as it comes.
// The firewall side is injected: Apply is commit-confirmed and verified
// (fwapi.Session.ApplyChecked), Settle checks that traffic passes, Measure runs a
// probe through the firewall.
type Sweep struct {
	Plan   *Plan
	Store  *store.Store
	Run    int64
	Config *configxml.Config // the firewall's config as the sweep starts
	// Firmware is the version the firewall runs as the sweep starts, as
	// it reports it (a firmware axis's values are compared with it);
	// empty means Config's product version.
	Firmware string

	Apply   func(ctx context.Context, config []byte, changes []configxml.Change) error
	Settle  func(ctx context.Context) error
	Measure func(ctx context.Context, p ProbeRun) probe.Sample
	// Health reads what a sample's validity rests on (fwapi.HealthReader),
	// before and after every probe; nil skips.
	Health func(ctx context.Context) (probe.Health, error)
	// ServiceComeback is how long a service that stopped during a probe
	// is given to start again; 0 is DefaultServiceComeback.
	ServiceComeback time.Duration
	// Blackout starts a stream through the firewall (probe.Blackout.Start)
	// that runs while a step's change is applied, from before the write
	// (or the firmware switch) until settling finds traffic passing
	// again; stop reports what the change dropped. bps is the stream's
	// bit rate where BlackoutShare sets it, else 0 (the spec's own
	// rate). Nil measures none.
	Blackout func(ctx context.Context, bps float64) (stop func(context.Context) (probe.BlackoutResult, error), err error)
	// BlackoutShare, above 0, runs each step's stream at that share of
	// the baseline's median throughput measured so far (the spec's
	// ThroughputProbe); before the baseline is measured, of the point
	// measured last. A change before any probe has no stream.
	BlackoutShare float64
	// Canary starts an IPS canary (probe.Canary.Start) beside a probe, at
	// the points where the spec's canary (Spec.Canary) placed its rule;
	// stop reports how many of its triggers passed. Nil runs none.
	Canary func(ctx context.Context, c probe.Canary) (stop func(context.Context) (probe.CanaryResult, error), err error)
	// Alerts counts the alerts of rule sid for traffic to port in the
	// box's IDS logs (fwapi.AlertReader): at points whose IDS only
	// detects, the canary counts the alerts its triggers raised. Nil
	// counts none, and such points run no canary.
	Alerts func(ctx context.Context, sid, port int) (probe.AlertLogs, error)
	// Idle samples the DUT for d with no traffic (probe.Idle): the idle
	// phase before each point's first probe, recorded as probe
	// probe.IdleProbe. Nil, or a spec with idle: 0s, skips it.
	Idle     func(ctx context.Context, d time.Duration) probe.Sample
	Progress func(Progress)
	Log      *slog.Logger
	PSK      string // the IPsec tunnel's pre-shared key, when the spec creates one
	// Wider lists, for adaptive repeats (Spec.Adaptive), the points whose
	// samples so far leave a median's interval wider than ±width percent;
	// the sweep asks after the planned rounds and after each extra one.
	// Nil measures no extra round.
	Wider func(ctx context.Context, run int64, width float64) ([]int, error)
	// SwitchFirmware, for a spec with a firmware axis, puts the firewall
	// on the boot environment that holds version (the session of the one
	// it leaves restored and closed, a reboot, the version checked, a
	// session of the new one begun) and returns that environment's own
	// config, on which the point's other knobs are applied. Nil refuses a
	// point whose firmware is not the running one.
	SwitchFirmware func(ctx context.Context, version string) (*configxml.Config, error)

	// Stats accounts for where Execute's time went.
	Stats Stats

	canary   *canary  // the run's IPS canary; nil without one
	canaryAt []string // the interfaces whose config carries the canary rule now
	// canaryDetect: none of them runs inline IPS; their IDS only detects,
	// so the triggers pass and the canary counts alerts.
	canaryDetect bool
	// unsettled: the firewall was touched (an apply, failed or not, a
	// firmware switch) since the canary last saw the IPS drop its triggers.
	unsettled bool
	set       string                       // the config set the firewall runs (config axis); "" the running one
	firmware  string                       // the firmware the firewall runs (firmware axis); "" the one it started on
	bases     map[string]*configxml.Config // each firmware's own config as its environment booted
	// throughput holds each point's ThroughputProbe bit rates so far, and
	// lastMeasured the point of the latest, for BlackoutShare.
	throughput   map[int][]float64
	lastMeasured int
	unsized      bool // a blackout had no throughput to take its share of
}

// runningFirmware is the version the firewall runs now.
func (s *Sweep) runningFirmware() string {
	switch {
	case s.firmware != "":
		return s.firmware
	case s.Firmware != "":
		return s.Firmware
	}
	return s.Config.Product().Version
}

// switchFirmware boots the environment that holds version and keeps its
// config as that firmware's base.
func (s *Sweep) switchFirmware(ctx context.Context, version string) (*configxml.Config, error) {
	if s.SwitchFirmware == nil {
		return nil, fmt.Errorf("this sweep cannot switch firmware (it runs %s)", s.runningFirmware())
	}
	base, err := s.SwitchFirmware(ctx, version)
	if err != nil {
		return nil, err
	}
	if s.bases == nil {
		s.bases = map[string]*configxml.Config{}
	}
	s.bases[version], s.firmware = base, version
	return base, nil
}

// FirmwareKnob is the axis that switches firmware through boot
// environments.
const FirmwareKnob = "firmware"

// Stats splits a sweep's wall time into the work it exists for and the
// rest, which is fwab's own overhead.
type Stats struct {
	Wall, Apply, Settle, Probe, Idle time.Duration
	Applies                          int                      // Apply calls that succeeded
	Actions                          map[configxml.Action]int // service actions those applies ran
	Samples                          int
}

// Overhead is the wall time not spent applying, settling or probing.
func (s Stats) Overhead() time.Duration { return s.Wall - s.Apply - s.Settle - s.Probe - s.Idle }

// Execute runs every step whose samples are not yet in the store, so a run
// that was interrupted continues where it stopped. It returns ctx's error
// when cancelled; every sample recorded until then stays.
func (s *Sweep) Execute(ctx context.Context) error {
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	defer func() { s.Stats.Wall += time.Since(start) }()
	if s.Stats.Actions == nil {
		s.Stats.Actions = map[configxml.Action]int{}
	}
	done, err := s.Store.Completed(ctx, s.Run)
	if err != nil {
		return err
	}
	probes := s.Plan.Spec.ProbeRuns()
	current := s.Config
	if err := s.loadThroughput(ctx); err != nil {
		return err
	}
	if err := s.startCanary(ctx); err != nil {
		return err
	}
	if s.canary != nil {
		s.noteCanary(current)
	}
	broken := map[int]string{}
	valid := map[int]bool{}
	idled := map[int]bool{} // points whose idle phase is recorded
	for k := range done {
		if k.Probe == probe.IdleProbe {
			idled[k.Point] = true
		}
	}
	steps := slices.Clone(s.Plan.Steps)
	nextRound := s.Plan.Spec.Repeats
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if i == len(steps) {
			more, err := s.extraRound(ctx, nextRound, broken)
			if err != nil {
				return err
			}
			if len(more) == 0 {
				break
			}
			steps = append(steps, more...)
			nextRound++
		}
		st := steps[i]
		report := func(phase, probe, detail string) {
			if s.Progress != nil {
				s.Progress(Progress{Step: i + 1, Steps: len(steps), Point: st.Point, Round: st.Round, Phase: phase, Probe: probe, Detail: detail})
			}
		}
		var todo []ProbeRun
		for _, pr := range probes {
			if !done[s.key(st, pr)] {
				todo = append(todo, pr)
			}
		}
		if len(todo) == 0 {
			report("skip", "", "already measured")
			continue
		}
		if reason, ok := broken[st.Point.Index]; ok {
			report("skip", "", reason)
			continue
		}

		// One blackout stream covers the step's changes, from before the
		// firmware switch or the write to the end of settling, when traffic
		// passes again (or the step fails).
		stream := &blackoutRun{s: s, point: st.Point.Index}
		if fw := st.Point.Value(FirmwareKnob); fw != "" && fw != s.runningFirmware() {
			report("apply", "", "firmware="+fw+" (the firewall boots that environment)")
			stream.start(ctx, configxml.ActionFirmware)
			t0 := time.Now()
			base, err := s.switchFirmware(ctx, fw)
			took := time.Since(t0)
			s.Stats.Apply += took
			if err != nil {
				stream.stop(ctx, err)
				// The box is in a state the sweep cannot build on: stop,
				// and let the session's close restore what it can.
				s.event(ctx, "error", st.Point.Index, "sweep stopped: "+err.Error())
				return fmt.Errorf("sweep stopped at point %d: switching to firmware %s: %w", st.Point.Index, fw, err)
			}
			s.recordApplyCost(ctx, st.Point.Index, []configxml.Action{configxml.ActionFirmware}, took)
			s.event(ctx, "firmware", st.Point.Index, "booted the environment holding "+fw)
			s.Stats.Actions[configxml.ActionFirmware]++
			current, s.set, s.unsettled = base, "", true
			if s.canary != nil {
				s.noteCanary(current)
			}
		}
		next, changes, err := s.target(ctx, current, st.Point)
		if err != nil {
			stream.stop(ctx, err)
			return err // the plan was checked: this is a bug, not the firewall
		}
		if len(changes) > 0 {
			report("apply", "", describe(changes))
			stream.start(ctx, actionsOf(changes)...)
			t0 := time.Now()
			s.unsettled = true // a failed apply's put-back restarts services too
			err := s.Apply(ctx, next.Bytes(), changes)
			if err != nil && ctx.Err() == nil && !stops(err) {
				log.Warn("apply failed; retrying once", "point", st.Point.Key(), "err", err)
				s.event(ctx, "retry", st.Point.Index, fmt.Sprintf("apply %s failed, retrying: %v", describe(changes), err))
				err = s.Apply(ctx, next.Bytes(), changes)
			}
			took := time.Since(t0)
			s.Stats.Apply += took
			if err == nil {
				s.recordApplyCost(ctx, st.Point.Index, actionsOf(changes), took)
			}
			if err != nil {
				stream.stop(ctx, err)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if stops(err) {
					// Not this point's fault: no point can be applied.
					s.event(ctx, "error", st.Point.Index, "sweep stopped: "+err.Error())
					return fmt.Errorf("sweep stopped at point %d (%s): %w", st.Point.Index, describe(changes), err)
				}
				reason := fmt.Sprintf("%s: %v", describe(changes), err)
				broken[st.Point.Index] = reason
				report("failed", "", reason)
				log.Error("point not measured", "point", st.Point.Key(), "err", err)
				s.event(ctx, "error", st.Point.Index, "point not measured: "+reason)
				if err := s.Store.SetPointStatus(ctx, s.Run, st.Point.Index, store.Broken, reason); err != nil {
					return err
				}
				continue
			}
			current = next
			if s.canary != nil {
				s.noteCanary(current)
			}
			if v := st.Point.Value("config"); v != "" {
				s.set = v
			}
			s.Stats.Applies++
			for _, a := range actionsOf(changes) {
				s.Stats.Actions[a]++
			}
		}

		report("settle", "", "")
		t0 := time.Now()
		err = s.settle(ctx)
		if err == nil && s.unsettled {
			s.settleCanary(ctx, st.Point.Index)
			s.unsettled = false
		}
		s.Stats.Settle += time.Since(t0)
		stream.stop(ctx, err)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			reason := fmt.Sprintf("traffic does not pass after the change: %v", err)
			broken[st.Point.Index] = reason
			report("failed", "", reason)
			s.event(ctx, "error", st.Point.Index, reason)
			if err := s.Store.SetPointStatus(ctx, s.Run, st.Point.Index, store.Broken, reason); err != nil {
				return err
			}
			continue
		}
		if !valid[st.Point.Index] {
			if err := s.Store.SetPointStatus(ctx, s.Run, st.Point.Index, store.Valid, ""); err != nil {
				return err
			}
			valid[st.Point.Index] = true
		}
		if !idled[st.Point.Index] {
			if err := s.idle(ctx, st, report); err != nil {
				return err
			}
			idled[st.Point.Index] = true
		}
		for _, pr := range todo {
			report("probe", pr.Name, "")
			t0 := time.Now()
			sample, gone := s.measure(ctx, pr)
			if len(gone) > 0 && ctx.Err() == nil {
				// A service the point runs is gone: what follows would
				// measure a box without it under the point's name.
				s.Stats.Probe += time.Since(t0)
				s.Stats.Samples++
				if err := s.Store.RecordSample(ctx, store.FromProbe(s.key(st, pr), sample)); err != nil {
					return fmt.Errorf("record sample: %w", err)
				}
				msg := fmt.Sprintf("%s stopped during probe %s and did not come back: the firewall no longer runs point %d's config", strings.Join(gone, " and "), pr.Name, st.Point.Index)
				s.event(ctx, "error", st.Point.Index, "sweep stopped: "+msg)
				return fmt.Errorf("sweep stopped at point %d (%s): %s; fix its cause, then resume the run", st.Point.Index, st.Point.Key(), msg)
			}
			if sample.Failed && ctx.Err() == nil {
				// An endpoint that went away or a firewall that rebooted
				// mid-probe: wait for traffic to pass again and measure once
				// more; a second failure is recorded as it is.
				log.Warn("probe failed; settling and retrying once", "point", st.Point.Key(), "probe", pr.Name, "reason", sample.Reason)
				s.event(ctx, "retry", st.Point.Index, fmt.Sprintf("probe %s failed, retrying: %s", pr.Name, sample.Reason))
				first := sample.Reason
				if err := s.settle(ctx); err == nil {
					sample, _ = s.measure(ctx, pr)
					sample.Warnings = append(sample.Warnings, "measured again: the first attempt failed: "+first)
				}
			}
			s.Stats.Probe += time.Since(t0)
			s.Stats.Samples++
			if ctx.Err() != nil {
				return ctx.Err() // a probe cut short is not a sample
			}
			if err := s.Store.RecordSample(ctx, store.FromProbe(s.key(st, pr), sample)); err != nil {
				return fmt.Errorf("record sample: %w", err)
			}
			s.noteThroughput(st.Point.Index, pr.Name, sample.BitsPerSecond())
			if sample.Failed {
				log.Warn("probe failed", "point", st.Point.Key(), "probe", pr.Name, "reason", sample.Reason)
			}
		}
	}
	return nil
}

// measure runs one probe between two readings of the firewall's health
// (Health): a sample the box changed under — a reboot, a service that
// restarted, a crash dump — measured two boxes, and is failed with what
// changed as its reason (probe.InvalidReason), so that it is kept, left out
// of the statistics and measured once more. Interface errors counted
// during the probe are the sample's warnings (probe.Health.LinkErrors). A
// box whose health cannot be read before the probe gives a warning; one
// that stops answering during it, an invalid sample.
//
// gone names the watched services that ran before the probe and still do
// not after a second look: the point's state is no longer in force.
func (s *Sweep) measure(ctx context.Context, pr ProbeRun) (sample probe.Sample, gone []string) {
	if s.Health == nil {
		return s.measureCanary(ctx, pr), nil
	}
	before, err := s.Health(ctx)
	sample = s.measureCanary(ctx, pr)
	if ctx.Err() != nil {
		return sample, nil
	}
	if err != nil {
		sample.Warnings = append(sample.Warnings, "the firewall's health was not read before the probe: "+err.Error())
		return sample, nil
	}
	var changes []string
	after, err := s.Health(ctx)
	if err != nil {
		changes = []string{"its health could not be read after the probe: " + err.Error()}
	} else {
		changes = before.Changes(after)
		sample.Warnings = append(sample.Warnings, before.LinkErrors(after)...)
	}
	if len(changes) == 0 {
		return sample, nil
	}
	reason := probe.InvalidReason + strings.Join(changes, "; ")
	if sample.Failed {
		reason += " (the probe failed too: " + sample.Reason + ")"
	}
	sample.Failed, sample.Reason = true, reason
	if err == nil && !before.Rebooted(after) {
		// After a reboot the services start again at boot. Else a service
		// with fewer processes than before (stopped, or one of pfSense's
		// per-interface Suricatas gone) is given ServiceComeback to start
		// again, as pfSense's rule update does after `sleep(5)`.
		gone = before.Short(after)
		for deadline := time.Now().Add(cmp.Or(s.ServiceComeback, DefaultServiceComeback)); len(gone) > 0 && ctx.Err() == nil && time.Now().Before(deadline); {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			if again, err := s.Health(ctx); err == nil {
				gone = before.Short(again)
			}
		}
	}
	return sample, gone
}

// DefaultServiceComeback is how long a watched service that stopped
// during a probe is given to run again before the sweep stops
// (Sweep.ServiceComeback): pfSense's Suricata rule update stops it, sleeps
// 5 s and starts it.
//
// upstream: not settled — pfSense's Suricata rule update runs suricata_stop, sleep(5), suricata_start unless live rule swap is on (pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_check_for_rule_updates.php, not in the upstream copy); checked at run time: a service not back within the wait stops the sweep, named
const DefaultServiceComeback = 15 * time.Second

// idle runs and records the point's idle phase, when the sweep has one.
func (s *Sweep) idle(ctx context.Context, st Step, report func(phase, probe, detail string)) error {
	d := s.Plan.Spec.IdleDuration()
	if s.Idle == nil || d <= 0 {
		return nil
	}
	report("idle", "", d.String()+" with no traffic")
	t0 := time.Now()
	sample := s.Idle(ctx, d)
	s.Stats.Idle += time.Since(t0)
	if ctx.Err() != nil {
		return ctx.Err() // an idle phase cut short is not a sample
	}
	key := store.Key{Run: s.Run, Point: st.Point.Index, Probe: probe.IdleProbe, Round: st.Round}
	if err := s.Store.RecordSample(ctx, store.FromProbe(key, sample)); err != nil {
		return fmt.Errorf("record idle phase: %w", err)
	}
	if sample.Failed {
		s.event(ctx, "warning", st.Point.Index, "idle phase not measured: "+sample.Reason)
	}
	return nil
}

// extraRound is the next round of adaptive repeats: none when the spec's
// repeats are fixed, the maximum is reached, or every point that can be
// measured meets the width.
func (s *Sweep) extraRound(ctx context.Context, round int, broken map[int]string) ([]Step, error) {
	spec := s.Plan.Spec
	if !spec.Adaptive() || s.Wider == nil || round >= spec.RepeatsSpec.Max {
		return nil, nil
	}
	wide, err := s.Wider(ctx, s.Run, spec.RepeatsSpec.Width)
	if err != nil {
		return nil, fmt.Errorf("adaptive repeats: %w", err)
	}
	wide = slices.DeleteFunc(wide, func(p int) bool { _, ok := broken[p]; return ok })
	if len(wide) == 0 {
		return nil, nil
	}
	names := make([]string, len(wide))
	for i, p := range wide {
		names[i] = strconv.Itoa(p)
	}
	s.event(ctx, EventAdaptive, -1, fmt.Sprintf("round %d of at most %d: points %s are wider than ±%s%%; measuring them again with the baseline",
		round+1, spec.RepeatsSpec.Max, strings.Join(names, ", "), strconv.FormatFloat(spec.RepeatsSpec.Width, 'f', -1, 64)))
	return s.Plan.ExtraRound(round, wide), nil
}

// FailedPoints lists, in order, the points of run that were not measured
// in full: those whose apply or settling failed (store.Broken), those
// with a probe's sample failed, and those with more than half of their
// samples invalid. A failed idle phase does not count (it is
// recorded as a warning). points is how many the run has.
func FailedPoints(ctx context.Context, st *store.Store, run int64) (failed []int, points int, err error) {
	pts, err := st.Points(ctx, run)
	if err != nil {
		return nil, 0, err
	}
	samples, err := st.Samples(ctx, run)
	if err != nil {
		return nil, 0, err
	}
	bad := map[int]bool{}
	for _, p := range pts {
		if p.Status == store.Broken {
			bad[p.Index] = true
		}
	}
	// A sample the firewall changed under (probe.InvalidReason) says
	// nothing of the point: the point fails when more than half of its
	// samples are such.
	invalid, total := map[int]int{}, map[int]int{}
	for _, x := range samples {
		if x.Probe == probe.IdleProbe {
			continue
		}
		total[x.Point]++
		switch {
		case x.Failed && strings.HasPrefix(x.Reason, probe.InvalidReason):
			invalid[x.Point]++
		case x.Failed:
			bad[x.Point] = true
		}
	}
	for p, n := range invalid {
		if 2*n > total[p] {
			bad[p] = true
		}
	}
	return slices.Sorted(maps.Keys(bad)), len(pts), nil
}

// DiskError is an apply error that can tell whether the firewall's disk
// refuses writes (full or read-only); fwapi's command errors are
// DiskErrors. No point can be applied until the disk is fixed, so the
// sweep stops there instead of marking the point broken.
type DiskError interface {
	error
	DiskFailed() bool
}

// DiskFailed reports whether the first DiskError in err's chain says that
// the firewall's disk refuses writes.
func DiskFailed(err error) bool {
	var d DiskError
	return errors.As(err, &d) && d.DiskFailed()
}

// Stopper is an apply error after which no point can be applied: someone
// else's edit on the box that fwab must not write over, a lease the box
// ended. The sweep stops there instead of marking the point broken.
type Stopper interface {
	error
	StopsSweep() bool
}

// stops reports whether err ends the sweep (DiskFailed, or a Stopper).
func stops(err error) bool {
	var s Stopper
	return DiskFailed(err) || errors.As(err, &s) && s.StopsSweep()
}

func (s *Sweep) key(st Step, pr ProbeRun) store.Key {
	return store.Key{Run: s.Run, Point: st.Point.Index, Probe: pr.Name, Round: st.Round}
}

// target is the config with the point's knob values, and the changes that
// take current there.
func (s *Sweep) target(ctx context.Context, current *configxml.Config, pt *Point) (*configxml.Config, []configxml.Change, error) {
	var changes []configxml.Change
	set := s.set
	if set == "" {
		set = configxml.ConfigRunning
	}
	switchTo := ""
	for _, kv := range pt.Values {
		if kv.Knob == FirmwareKnob {
			continue // Execute switched to it
		}
		if kv.Knob == "config" {
			if kv.Value != set {
				switchTo = kv.Value
			}
			continue
		}
		from, err := current.Get(kv.Knob)
		if err != nil {
			return nil, nil, err
		}
		if from != kv.Value {
			changes = append(changes, configxml.Change{Knob: kv.Knob, From: from, To: kv.Value, Action: s.Plan.Spec.ActionFor(kv.Knob)})
		}
	}
	if len(changes) == 0 && switchTo == "" {
		return s.placeCanary(ctx, current, current, nil)
	}
	base := current
	if switchTo != "" {
		// A set replaces the whole config; the running one is the one
		// this firmware's environment began with.
		base = s.Config
		if b := s.bases[s.firmware]; b != nil {
			base = b
		}
	}
	next, err := s.Plan.Spec.pointConfig(base, pt, s.PSK)
	if err != nil {
		return nil, nil, err
	}
	if switchTo != "" {
		// A whole config: every service it may touch runs.
		for _, a := range configxml.ReloadActions(current, next) {
			changes = append(changes, configxml.Change{Knob: "config", From: set, To: switchTo, Action: a})
		}
	}
	return s.placeCanary(ctx, current, next, changes)
}

func (s *Sweep) settle(ctx context.Context) error {
	if s.Settle != nil {
		sctx, cancel := context.WithTimeout(ctx, s.Plan.Spec.Settle.Timeout.D())
		err := s.Settle(sctx)
		cancel()
		if err != nil {
			return err
		}
	}
	if d := s.Plan.Spec.Settle.Pause.D(); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (s *Sweep) event(ctx context.Context, kind string, point int, msg string) {
	s.Store.RecordEvent(ctx, s.Run, store.Event{Time: time.Now(), Kind: kind, Point: point, Message: msg})
}

// EventApplyCost is the event a sweep records after each apply: its
// service actions and how long it took, so that later plans of the same
// target estimate with measured costs (MeasuredCosts).
const EventApplyCost = "apply-cost"

// EventAdaptive is the event a sweep with adaptive repeats records before
// each extra round: the points still wider than the target.
const EventAdaptive = "adaptive"

type applyCost struct {
	Actions []configxml.Action `json:"actions"`
	Seconds float64            `json:"seconds"`
}

// blackoutRun is a step's blackout stream (Sweep.Blackout): started
// before its first change, stopped once traffic passes again, and
// recorded as a store.EventBlackout with the service actions it spanned.
// A stream that cannot start or report is a warning, not the point's
// failure; without Sweep.Blackout it does nothing.
type blackoutRun struct {
	s       *Sweep
	point   int
	actions []configxml.Action
	stopFn  func(context.Context) (probe.BlackoutResult, error)
	started bool
}

// start starts the stream, unless it runs already, and adds the actions
// it spans.
func (b *blackoutRun) start(ctx context.Context, actions ...configxml.Action) {
	b.actions = append(b.actions, actions...)
	if b.s.Blackout == nil || b.started {
		return
	}
	b.started = true
	bps, ok := b.s.blackoutBPS(ctx, b.point)
	if !ok {
		return
	}
	stop, err := b.s.Blackout(ctx, bps)
	if err != nil {
		b.s.event(ctx, "warning", b.point, "blackout not measured: "+err.Error())
		return
	}
	b.stopFn = stop
}

// stop ends the stream and records it; failed is the step's error, if it
// failed. A second stop does nothing.
func (b *blackoutRun) stop(ctx context.Context, failed error) {
	if b.stopFn == nil {
		return
	}
	stop := b.stopFn
	b.stopFn = nil
	r, err := stop(ctx)
	if err != nil {
		if ctx.Err() == nil {
			b.s.event(ctx, "warning", b.point, "blackout not measured: "+err.Error())
		}
		return
	}
	names := make([]string, len(b.actions))
	for i, a := range b.actions {
		names[i] = string(a)
	}
	msg, _ := json.Marshal(store.BlackoutEvent{Actions: names, BlackoutResult: r, Failed: failed != nil})
	b.s.event(ctx, store.EventBlackout, b.point, string(msg))
}

// loadThroughput reads the bit rates a resumed run measured already, for
// BlackoutShare.
func (s *Sweep) loadThroughput(ctx context.Context) error {
	s.throughput, s.lastMeasured = map[int][]float64{}, -1
	if s.BlackoutShare <= 0 {
		return nil
	}
	samples, err := s.Store.Samples(ctx, s.Run)
	if err != nil {
		return err
	}
	for _, sm := range samples {
		if !sm.Failed {
			s.noteThroughput(sm.Point, sm.Probe, sm.BitsPerSecond)
		}
	}
	return nil
}

// noteThroughput keeps a sample's bit rate when it is the spec's
// ThroughputProbe's (a failed sample's is 0 or NaN, and is not kept).
func (s *Sweep) noteThroughput(point int, probeName string, bps float64) {
	if s.BlackoutShare <= 0 || !(bps > 0) || probeName != s.Plan.Spec.ThroughputProbe() {
		return
	}
	s.throughput[point] = append(s.throughput[point], bps)
	s.lastMeasured = point
}

// blackoutBPS is the bit rate of a step's blackout stream: 0 for the
// spec's own rate, or BlackoutShare of the baseline's median throughput
// (of the point measured last, before the baseline is). ok is false when
// nothing is measured yet to take a share of; the first time, a warning
// says why.
func (s *Sweep) blackoutBPS(ctx context.Context, point int) (bps float64, ok bool) {
	if s.BlackoutShare <= 0 {
		return 0, true
	}
	ref := s.throughput[s.Plan.Baseline.Index]
	if len(ref) == 0 && s.lastMeasured >= 0 {
		ref = s.throughput[s.lastMeasured]
	}
	if len(ref) == 0 {
		if !s.unsized {
			s.unsized = true
			s.event(ctx, "warning", point, fmt.Sprintf("blackout not measured for this change: its rate is %g%% of the baseline's throughput, and no throughput is measured yet (a change before the first probe); give datagrams a second (rate: 2000) to measure it too", s.BlackoutShare*100))
		}
		return 0, false
	}
	median := benchmath.AssumeNothing.Summary(benchmath.NewSample(ref, &benchmath.DefaultThresholds), 0.95).Center
	return s.BlackoutShare * median, true
}

func (s *Sweep) recordApplyCost(ctx context.Context, point int, actions []configxml.Action, d time.Duration) {
	b, _ := json.Marshal(applyCost{Actions: actions, Seconds: d.Seconds()})
	s.event(ctx, EventApplyCost, point, string(b))
}

// MeasuredCosts reads apply-cost events (Store.LatestEvents) into what
// each service action took: the median over the applies that ran that
// action alone. Actions never run alone are left to the defaults.
func MeasuredCosts(events []store.Event) map[configxml.Action]time.Duration {
	by := map[configxml.Action][]float64{}
	for _, e := range events {
		var c applyCost
		if e.Kind != EventApplyCost || json.Unmarshal([]byte(e.Message), &c) != nil || len(c.Actions) != 1 || c.Seconds < 0 {
			continue
		}
		a := c.Actions[0]
		if a == "firmware-upgrade" { // the firmware switch's name before it was firmware-switch
			a = configxml.ActionFirmware
		}
		by[a] = append(by[a], c.Seconds)
	}
	out := map[configxml.Action]time.Duration{}
	for a, xs := range by {
		slices.Sort(xs)
		out[a] = time.Duration(xs[len(xs)/2] * float64(time.Second))
	}
	return out
}

// actionsOf lists the service actions that changes run: a reboot alone
// when one of them needs it (configxml.Effective).
func actionsOf(changes []configxml.Change) []configxml.Action {
	var out []configxml.Action
	for _, c := range changes {
		if !slices.Contains(out, c.Action) {
			out = append(out, c.Action)
		}
	}
	return configxml.Effective(out)
}

func describe(changes []configxml.Change) string {
	var out []string
	for _, c := range changes {
		if a := c.Knob + "=" + c.To; !slices.Contains(out, a) {
			out = append(out, a) // a config switch is one change per action
		}
	}
	line := strings.Join(out, " ")
	if slices.ContainsFunc(changes, func(c configxml.Change) bool { return c.Action == configxml.ActionReboot }) {
		line += " (the firewall reboots)"
	}
	return line
}
