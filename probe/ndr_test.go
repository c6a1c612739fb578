package probe

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// policer is a synthetic firewall: a token-bucket policer at capacity
// bits/s drops what is offered above it, plus a loss floor of floor
// percent at any rate (0 for a clean link), and a generator that cannot
// send faster than genMax.
type policer struct {
	capacity, floor, genMax float64
	noise                   float64 // relative jitter of the capacity per trial
	rng                     *rand.Rand
}

func (p *policer) trial(_ context.Context, rate float64, d time.Duration) (TrialResult, error) {
	offered := rate
	if p.genMax > 0 && offered > p.genMax {
		offered = p.genMax
	}
	c := p.capacity
	if p.noise > 0 {
		c *= 1 + p.noise*p.rng.NormFloat64()
	}
	loss := p.floor
	if offered > c {
		loss += 100 * (offered - c) / offered
	}
	return TrialResult{Offered: offered, Loss: loss}, nil
}

// TestRateSearchPolicer: against a policer at 500 Mbit/s the NDR is found
// within the final width below the policer's rate, the PDR at 0.5 % is
// no lower, the final interval is no wider than asked and was measured at
// the final trial duration, and every trial is recorded, the short ones
// first.
func TestRateSearchPolicer(t *testing.T) {
	p := &policer{capacity: 500e6}
	ndr, err := RateSearch{Max: 1e9, Width: 0.005, InitialDuration: time.Second, FinalDuration: 10 * time.Second}.Run(t.Context(), p.trial)
	if err != nil {
		t.Fatal(err)
	}
	if ndr.Rate > 500e6 || ndr.Rate < 500e6*(1-0.005) || ndr.Width > 0.005 || ndr.Upper < 500e6 || ndr.AtMax || ndr.Limited || ndr.Incomplete != "" {
		t.Errorf("NDR = %+v; want within 0.5 %% below 500 Mbit/s, interval ≤ 0.5 %%", ndr)
	}
	last := ndr.Trials[len(ndr.Trials)-1]
	if last.Duration != 10*time.Second || ndr.Trials[0].Duration != time.Second || ndr.Trials[0].Rate != 1e9 {
		t.Errorf("trials from %+v to %+v; want the first at the maximum for 1s, the last for 10s", ndr.Trials[0], last)
	}
	for i := 1; i < len(ndr.Trials); i++ {
		if ndr.Trials[i].Duration < ndr.Trials[i-1].Duration {
			t.Errorf("trial %d is shorter (%v) than the one before (%v): short trials come first", i, ndr.Trials[i].Duration, ndr.Trials[i-1].Duration)
		}
	}
	var long int
	for _, tr := range ndr.Trials {
		if tr.Duration == 10*time.Second {
			long++
		}
	}
	if long > 6 || len(ndr.Trials) > 30 {
		t.Errorf("%d trials, %d of them of 10s (%v in all): the short phases should leave few long ones", len(ndr.Trials), long, ndr.Elapsed)
	}

	pdr, err := RateSearch{Max: 1e9, Tolerance: 0.5, Width: 0.005}.Run(t.Context(), p.trial)
	if err != nil {
		t.Fatal(err)
	}
	// 0.5 % loss is offered = capacity/0.995.
	if pdr.Rate < ndr.Rate || pdr.Rate > 500e6/0.995 || pdr.Rate < 500e6/0.995*(1-0.005) {
		t.Errorf("PDR(0.5%%) = %.4g, NDR %.4g; want PDR ≥ NDR, within 0.5 %% below %.4g", pdr.Rate, ndr.Rate, 500e6/0.995)
	}
	t.Logf("NDR %.4g bit/s in %d trials (%v of trials), PDR %.4g in %d", ndr.Rate, len(ndr.Trials), ndr.Elapsed, pdr.Rate, len(pdr.Trials))
}

// TestRateSearchCases: a firewall that passes the maximum, a generator
// that cannot reach the policer's rate, a noisy capacity, a loss floor
// above the tolerance, and a trial budget too small.
func TestRateSearchCases(t *testing.T) {
	t.Run("passes the maximum", func(t *testing.T) {
		r, err := RateSearch{Max: 1e9}.Run(t.Context(), (&policer{capacity: 2e9}).trial)
		if err != nil || !r.AtMax || r.Rate != 1e9 || len(r.Trials) != 4 {
			t.Errorf("Run = %+v, %v; want the maximum, confirmed once per phase (1s, 2s, 5s, 10s)", r, err)
		}
	})
	t.Run("generator-limited", func(t *testing.T) {
		r, err := RateSearch{Max: 1e9}.Run(t.Context(), (&policer{capacity: 800e6, genMax: 300e6}).trial)
		// A trial counts when the generator offers 99 % of the rate asked.
		if err != nil || !r.Limited || r.Rate > 300e6/0.99 {
			t.Errorf("Run = %+v, %v; want a result at most the generator's 300 Mbit/s (and 1 %%), flagged generator-limited", r, err)
		}
	})
	t.Run("noisy capacity", func(t *testing.T) {
		var rates []float64
		for seed := range uint64(5) {
			p := &policer{capacity: 500e6, noise: 0.002, rng: rand.New(rand.NewPCG(seed, 1))}
			r, err := RateSearch{Max: 1e9}.Run(t.Context(), p.trial)
			if err != nil || r.Incomplete != "" {
				t.Fatalf("seed %d: Run = %+v, %v", seed, r, err)
			}
			rates = append(rates, r.Rate)
		}
		var mean, sd float64
		for _, v := range rates {
			mean += v / float64(len(rates))
		}
		for _, v := range rates {
			sd += (v - mean) * (v - mean) / float64(len(rates)-1)
		}
		if cv := math.Sqrt(sd) / mean; cv > 0.02 || math.Abs(mean/500e6-1) > 0.02 {
			t.Errorf("NDRs %v: mean %.4g, CV %.3f; want within 2 %% of 500 Mbit/s, CV ≤ 2 %%", rates, mean, cv)
		}
	})
	t.Run("loss floor", func(t *testing.T) {
		r, err := RateSearch{Max: 1e9, Tolerance: 0.1}.Run(t.Context(), (&policer{capacity: 500e6, floor: 1}).trial)
		if err == nil || !strings.Contains(err.Error(), "even the minimum rate") || r.Rate != 0 || len(r.Trials) == 0 {
			t.Errorf("Run = %+v, %v; want an error that even the minimum loses too much, the trials kept", r, err)
		}
	})
	t.Run("trial budget", func(t *testing.T) {
		r, err := RateSearch{Max: 1e9, MaxTrials: 4}.Run(t.Context(), (&policer{capacity: 500e6}).trial)
		if err != nil || len(r.Trials) != 4 || !strings.Contains(r.Incomplete, "stopped after 4 trials") {
			t.Errorf("Run = %+v, %v; want 4 trials and the reason it stopped", r, err)
		}
	})
}

func TestRateSearchValidate(t *testing.T) {
	for _, tc := range []struct {
		s    RateSearch
		want string
	}{
		{RateSearch{}, "maximum rate"},
		{RateSearch{Max: 1e9, Tolerance: 100}, "loss tolerance 100%"},
		{RateSearch{Max: 1e9, Tolerance: -1}, "loss tolerance -1%"},
		{RateSearch{Max: 1e9, Min: 2e9}, "minimum rate"},
		{RateSearch{Max: 1e9, InitialDuration: 20 * time.Second, FinalDuration: 10 * time.Second}, "the first must not be longer"},
	} {
		if err := tc.s.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Validate() = %v, want %q", tc.s, err, tc.want)
		}
	}
}

func TestPhaseDurations(t *testing.T) {
	got := phaseDurations(time.Second, 10*time.Second, 2)
	want := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second}
	if len(got) != len(want) {
		t.Fatalf("phaseDurations = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("phaseDurations = %v, want %v", got, want)
		}
	}
}
