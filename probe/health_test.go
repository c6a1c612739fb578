package probe

import (
	"slices"
	"testing"
)

func TestHealthChanges(t *testing.T) {
	before := Health{Boot: 1700000000, Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree"}}
	for _, tt := range []struct {
		name  string
		after Health
		want  []string
	}{
		{"unchanged", Health{Boot: 1700000000, Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree"}}, nil},
		{"rebooted", Health{Boot: 1700000400, Services: map[string][]int{"suricata": {812}, "charon": {640}}, Crashes: []string{"bounds", "minfree", "vmcore.0"}},
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
