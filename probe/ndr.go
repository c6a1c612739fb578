package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// RateSearch finds the highest offered rate whose loss is at most
// Tolerance percent, as FD.io CSIT's MLRsearch does: a first trial at the
// maximum rate, then trials between the highest rate known to pass (the
// lower bound) and the lowest known to fail (the upper bound), short ones
// first and longer ones as the interval narrows, each phase's bounds
// measured again at its own trial duration, until the final phase's
// interval is no wider than Width at FinalDuration. Tolerance 0 is the
// non-drop rate (NDR), 0.5 a partial-drop rate (PDR).
type RateSearch struct {
	Max       float64 // bits/s: the highest rate offered (the link's, or what the generator can send)
	Min       float64 // bits/s: the lowest rate tried; default Max/1000
	Tolerance float64 // percent of the offered packets that may be lost
	Width     float64 // the final interval's width relative to its lower bound; default 0.005 (0.5 %)

	InitialDuration time.Duration // default 1 s
	FinalDuration   time.Duration // default 10 s
	Phases          int           // intermediate phases between them; default 2
	// MaxTrials bounds the search; default 60.
	MaxTrials int
	// Reached is the share of the asked rate a trial must offer for its
	// result to count as the firewall's; default 0.99. Below it the trial
	// is generator-limited.
	Reached float64
}

// Trial offers a rate for a duration and says what came of it.
type Trial func(ctx context.Context, rate float64, d time.Duration) (TrialResult, error)

// TrialResult is one trial of a rate search.
type TrialResult struct {
	Rate     float64       // bits/s asked for
	Offered  float64       // bits/s the generator really sent
	Loss     float64       // percent of the sent packets lost
	Duration time.Duration // as asked
	// GeneratorBound says an endpoint, not the firewall, bounded the
	// trial (the sender's CPU was saturated, or the receiver dropped
	// datagrams for a full socket buffer), whatever the rates say.
	GeneratorBound bool
	ReceiverDrops  int64         // datagrams the receiving host dropped for a full socket buffer
	StartSkew      time.Duration // how far apart a trial of several streams launched them
	Pass           bool          // loss within the tolerance and the rate reached
	Limited        bool          // the generator did not offer the rate asked (or was CPU-bound)
}

// RateResult is a finished search.
type RateResult struct {
	Rate       float64 // bits/s: the lower bound, the highest rate that passed at FinalDuration; 0 when none did
	Upper      float64 // bits/s: the lowest rate that failed at FinalDuration; Max when none did
	Tolerance  float64
	Width      float64 // (Upper-Rate)/Rate of the final interval; 0 when the maximum passed
	AtMax      bool    // the maximum rate passed: the firewall lost nothing beyond tolerance at the highest rate offered
	Limited    bool    // a trial near the result was generator-limited: the figure may measure the generator
	Trials     []TrialResult
	Elapsed    time.Duration // the trials' durations summed
	Incomplete string        // why the search stopped short of its width, "" when it did not
}

func (s RateSearch) withDefaults() RateSearch {
	if s.Min == 0 {
		s.Min = s.Max / 1000
	}
	if s.Width == 0 {
		s.Width = 0.005
	}
	if s.InitialDuration == 0 {
		s.InitialDuration = time.Second
	}
	if s.FinalDuration == 0 {
		s.FinalDuration = 10 * time.Second
	}
	if s.Phases == 0 {
		s.Phases = 2
	}
	if s.MaxTrials == 0 {
		s.MaxTrials = 60
	}
	if s.Reached == 0 {
		s.Reached = 0.99
	}
	return s
}

// Validate reports the first setting that makes the search meaningless.
func (s RateSearch) Validate() error {
	switch {
	case !(s.Max > 0) || math.IsInf(s.Max, 0):
		return fmt.Errorf("rate search: maximum rate %v bit/s: give a positive rate", s.Max)
	case s.Min < 0 || s.Min >= s.Max:
		return fmt.Errorf("rate search: minimum rate %v bit/s must be below the maximum %v", s.Min, s.Max)
	case !(s.Tolerance >= 0 && s.Tolerance < 100):
		return fmt.Errorf("rate search: loss tolerance %v%%: give a percentage from 0 to below 100", s.Tolerance)
	case s.Width < 0 || s.Width >= 1:
		return fmt.Errorf("rate search: width %v: give a fraction above 0 and below 1, such as 0.005", s.Width)
	case s.InitialDuration < 0 || s.FinalDuration < 0 || (s.FinalDuration > 0 && s.InitialDuration > s.FinalDuration):
		return fmt.Errorf("rate search: trial durations %v then %v: the first must not be longer than the final", s.InitialDuration, s.FinalDuration)
	case s.Phases < 0 || s.MaxTrials < 0 || s.Reached < 0 || s.Reached > 1:
		return errors.New("rate search: phases, trials and the reached share must not be negative (reached at most 1)")
	}
	return nil
}

// bound is a rate known to pass (a lower bound) or to fail (an upper
// bound) at trial duration d; d 0 is a candidate not measured yet.
type bound struct {
	rate float64
	d    time.Duration
}

// Run searches with trial. Every trial is in the result, also when the
// search stops early (ctx, MaxTrials, an error).
func (s RateSearch) Run(ctx context.Context, trial Trial) (RateResult, error) {
	if err := s.Validate(); err != nil {
		return RateResult{}, err
	}
	s = s.withDefaults()
	res := RateResult{Tolerance: s.Tolerance, Upper: s.Max}
	measure := func(rate float64, d time.Duration) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if len(res.Trials) >= s.MaxTrials {
			return false, errMaxTrials
		}
		r, err := trial(ctx, rate, d)
		if err != nil {
			return false, err
		}
		r.Rate, r.Duration = rate, d
		r.Limited = r.GeneratorBound || r.Offered < s.Reached*rate
		r.Pass = !r.Limited && r.Loss <= s.Tolerance
		res.Trials = append(res.Trials, r)
		res.Elapsed += d
		return r.Pass, nil
	}
	var lo, hi bound // hi.rate 0: no upper bound (the maximum passed)
	finish := func(err error) (RateResult, error) {
		res.Rate = lo.rate
		if hi.rate > 0 && hi.d > 0 {
			res.Upper = hi.rate
		}
		if lo.rate > 0 && hi.rate > 0 {
			res.Width = (res.Upper - lo.rate) / lo.rate
		}
		// A limited trial in the final interval, or just above it, may
		// have hidden what the firewall does there.
		for _, t := range res.Trials {
			if t.Limited && t.Rate >= lo.rate && t.Rate <= res.Upper*(1+s.Width) {
				res.Limited = true
			}
		}
		switch {
		case errors.Is(err, errMaxTrials):
			res.Incomplete = fmt.Sprintf("stopped after %d trials with the interval %.4g–%.4g bit/s wider than %.2g", len(res.Trials), res.Rate, res.Upper, s.Width)
			return res, nil
		case err != nil:
			res.Incomplete = err.Error()
		}
		return res, err
	}

	durations := phaseDurations(s.InitialDuration, s.FinalDuration, s.Phases)
	final := durations[len(durations)-1]
	// The first trial is at the maximum. When it fails, MLRsearch's first
	// guess is what got through: about what the firewall forwards.
	pass, err := measure(s.Max, durations[0])
	if err != nil {
		return finish(err)
	}
	first := res.Trials[0]
	if pass {
		lo = bound{s.Max, durations[0]}
	} else {
		hi = bound{s.Max, durations[0]}
		guess := first.Offered * (1 - first.Loss/100)
		if first.Limited || !(guess < s.Max) {
			guess = s.Max / 2
		}
		lo = bound{math.Max(s.Min, guess), 0}
	}
	for i, d := range durations {
		// Intermediate phases stop at a wider interval: twice the next
		// phase's width, as MLRsearch's do.
		width := s.Width * math.Pow(2, float64(len(durations)-1-i))
		down, up := width, width // expansion steps, doubled at each step the same way
	phase:
		for {
			switch {
			case lo.d < d:
				pass, err := measure(lo.rate, d)
				if err != nil {
					return finish(err)
				}
				if pass {
					lo.d, down = d, width
					continue
				}
				if lo.rate <= s.Min {
					hi, lo = bound{lo.rate, d}, bound{}
					return finish(fmt.Errorf("rate search: even the minimum rate, %.4g bit/s, loses more than %v%%", s.Min, s.Tolerance))
				}
				// Not a lower bound after all: it bounds from above, and the
				// search goes down by ever larger steps.
				hi = bound{lo.rate, d}
				lo = bound{math.Max(s.Min, lo.rate/(1+down)), 0}
				down *= 2
			case hi.rate == 0 || lo.rate >= s.Max:
				if d == final {
					res.AtMax = true
					return finish(nil)
				}
				break phase // measured again at the next phase's duration
			case hi.d < d:
				pass, err := measure(hi.rate, d)
				if err != nil {
					return finish(err)
				}
				if !pass {
					hi.d, up = d, width
					continue
				}
				// It passes at this duration: a new lower bound, and the
				// search goes up by ever larger steps.
				lo = bound{hi.rate, d}
				if lo.rate >= s.Max {
					hi = bound{}
					continue
				}
				hi = bound{math.Min(s.Max, lo.rate*(1+up)), 0}
				up *= 2
			case (hi.rate-lo.rate)/lo.rate <= width:
				break phase
			default:
				mid := (lo.rate + hi.rate) / 2
				pass, err := measure(mid, d)
				if err != nil {
					return finish(err)
				}
				if pass {
					lo = bound{mid, d}
				} else {
					hi = bound{mid, d}
				}
			}
		}
	}
	return finish(nil)
}

var errMaxTrials = errors.New("rate search: too many trials")

// phaseDurations are the trial durations of the search's phases: from
// initial to final, growing geometrically over phases intermediate steps.
func phaseDurations(initial, final time.Duration, phases int) []time.Duration {
	out := []time.Duration{initial}
	ratio := float64(final) / float64(initial)
	for i := 1; i <= phases; i++ {
		d := time.Duration(float64(initial) * math.Pow(ratio, float64(i)/float64(phases+1)))
		d = d.Round(time.Second)
		if d > out[len(out)-1] && d < final {
			out = append(out, d)
		}
	}
	if final > out[len(out)-1] {
		out = append(out, final)
	}
	return out
}
