package matrix

import (
	"errors"
	"strings"
	"testing"

	"github.com/fwab/fwab/store"
)

// TestRunResumeOtherFirewall: a run is resumed only on the target, testbed
// and original config it was measured on; the refusal names each
// difference and changes nothing. A run that did not record its testbed
// or config (older fwab) is not refused for them.
func TestRunResumeOtherFirewall(t *testing.T) {
	first := newRun(t, nil, twoPoints, 9)
	first.run.New.Testbed = "fake@0a0a0a0a0a0a"
	first.beginErr = errors.New("stop after recording")
	out, _ := first.run.Execute(t.Context())

	for _, tt := range []struct {
		name                    string
		target, testbed, config string
		want                    []string
	}{
		{"other target", "other", "other@0b0b0b0b0b0b", "c0ffee", []string{
			"target: the run has fake, this sweep other",
			"testbed: the run has fake@0a0a0a0a0a0a, this sweep other@0b0b0b0b0b0b",
			"--target fake", "start a new run"}},
		{"other testbed", "fake", "fake@0b0b0b0b0b0b", "c0ffee", []string{
			"testbed: the run has fake@0a0a0a0a0a0a, this sweep fake@0b0b0b0b0b0b", "start a new run"}},
		{"other config", "fake", "fake@0a0a0a0a0a0a", "beef", []string{
			"original config: the run started from sha256 c0ffee, the firewall now has beef", "put back the config", "start a new run"}},
	} {
		r := newRun(t, first.st, twoPoints, 9)
		r.run.Resume = out.Run
		r.run.New.Target, r.run.New.Testbed, r.run.New.ConfigHash = tt.target, tt.testbed, tt.config
		_, err := r.run.Execute(t.Context())
		if !errors.Is(err, ErrOtherFirewall) {
			t.Errorf("%s: Execute = %v; want ErrOtherFirewall", tt.name, err)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error has no %q:\n%v", tt.name, w, err)
			}
		}
		if len(r.log) != 0 || r.calls != 0 {
			t.Errorf("%s: steps %v, %d probes; want none", tt.name, r.log, r.calls)
		}
	}
	if got := first.status(t, out.Run); got != store.Failed {
		t.Errorf("status after refused resumes %q; want it left failed", got)
	}

	// A run from before testbeds and config hashes were recorded.
	old, err := first.st.CreateRun(t.Context(), store.Run{Spec: string(first.spec.Raw()), Seed: 9, Target: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	r := newRun(t, first.st, twoPoints, 9)
	r.run.Resume = old
	r.run.New.Testbed = "fake@0b0b0b0b0b0b"
	if out, err := r.run.Execute(t.Context()); err != nil || out.Status != store.Done {
		t.Errorf("resume of a run without testbed or config hash = %+v, %v; want done", out, err)
	}
}
