package probe

import (
	"slices"
	"testing"
	"time"
)

func TestHealthChanges(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 18, 0, 0, 0, time.UTC)
	before := Health{Boot: 1700000000, Uptime: 3600, Read: t0, Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree"}}
	for _, tt := range []struct {
		name  string
		after Health
		want  []string
	}{
		{"unchanged", Health{Boot: 1700000000, Uptime: 3610, Read: t0.Add(10 * time.Second), Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree"}}, nil},
		{"clock stepped", Health{Boot: 1700000007, Uptime: 3610, Read: t0.Add(10 * time.Second), Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree"}}, nil},
		{"rebooted", Health{Boot: 1700003605, Uptime: 4, Read: t0.Add(10 * time.Second), Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree", "vmcore.0"}},
			[]string{"the firewall rebooted", "new crash dump /var/crash/vmcore.0"}},
		{"restarted and stopped", Health{Boot: 1700000000, Services: map[string][]int{"suricata": {1403}, "charon": nil}, Crashes: []string{"bounds", "minfree"}},
			[]string{"charon stopped (pid 640)", "suricata restarted (pid 812 → 1403)"}},
		{"started", Health{Boot: 1700000000, Services: map[string][]int{"suricata": {812}, "charon": {640, 641}}, Crashes: []string{"minfree"}},
			[]string{"charon restarted (pid 640 → 640,641)"}},
	} {
		if got := before.Changes(tt.after); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Changes = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := (Health{Services: map[string][]int{}}).Changes(Health{Services: map[string][]int{"suricata": {9}}}); !slices.Equal(got, []string{"suricata started (pid 9)"}) {
		t.Errorf("a service that started: %q", got)
	}
}

// TestHealthLinkErrors: interfaces that counted errors during a probe, or
// whose counters went back, are named with the counts; unchanged ones,
// and ones not read before, are not.
func TestHealthLinkErrors(t *testing.T) {
	before := Health{Links: map[string]LinkCounters{"igb0": {3, 0}, "igb1": {0, 0}, "igb2": {5, 5}}}
	after := Health{Links: map[string]LinkCounters{"igb0": {3, 0}, "igb1": {12, 1}, "igb2": {0, 0}, "igb3": {7, 0}}}
	want := []string{
		"igb1 counted 12 input and 1 output errors during the probe (damaged or unsent frames; some drivers count receive overruns here)",
		"igb2's error counters went back to 0 in, 0 out: the interface was made again during the probe",
	}
	if got := before.LinkErrors(after); !slices.Equal(got, want) {
		t.Errorf("LinkErrors = %q\nwant %q", got, want)
	}
	if got := before.LinkErrors(before); got != nil {
		t.Errorf("LinkErrors of the same readings = %q, want none", got)
	}
	if got := before.Changes(after); got != nil {
		t.Errorf("Changes = %q: link errors do not invalidate a sample", got)
	}
}

func TestHealthShort(t *testing.T) {
	before := Health{Services: map[string][]int{"suricata": {812, 813}, "charon": {640}}}
	for _, tt := range []struct {
		after map[string][]int
		want  []string
	}{
		{map[string][]int{"suricata": {812, 813}, "charon": {640}}, nil},
		{map[string][]int{"suricata": {812, 1400}, "charon": {700}}, nil}, // restarted: replaced
		{map[string][]int{"suricata": {812}, "charon": {640}}, []string{"suricata"}},
		{map[string][]int{"suricata": {812, 813}}, []string{"charon"}},
	} {
		if got := before.Short(Health{Services: tt.after}); !slices.Equal(got, tt.want) {
			t.Errorf("Short(%v) = %q, want %q", tt.after, got, tt.want)
		}
	}
}
