package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOptionsLinks(t *testing.T) {
	topo := Topology{Prefix: "fwt"}
	got, err := Options{Link: "1g", InterfaceLinks: map[string]string{"lan": "1g/half"}}.links(topo)
	if err != nil {
		t.Fatal(err)
	}
	if got["wan"].String() != "1g" || got["lan"].String() != "1g/half" {
		t.Errorf("links = %v, want wan 1g, lan 1g/half", got)
	}
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Link: "40g"}, `link speed "40g": want one of 100m, 1g, 2.5g, 10g, unlimited`},
		{Options{InterfaceLinks: map[string]string{"opt1": "1g"}}, `link of interface "opt1": the lab's DUT interfaces are lan, wan`},
		{Options{InterfaceLinks: map[string]string{"lan": "fast"}}, `interface lan: link speed "fast"`},
	} {
		if _, err := tt.o.links(topo); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("links(%+v) error = %v, want %q", tt.o, err, tt.want)
		}
	}
}

func TestApplianceProfiles(t *testing.T) {
	topo := Topology{Prefix: "fwt"}
	name, links, cpu, err := Options{}.resolveAppliance(topo)
	if err != nil || name != "unlimited" || cpu != 0 || links["lan"].String() != "unlimited" || links["wan"].String() != "unlimited" {
		t.Errorf("default profile = %s %v %v, %v; want unlimited links, no budget", name, links, cpu, err)
	}
	name, links, cpu, err = Options{Appliance: "1g-small"}.resolveAppliance(topo)
	if err != nil || name != "1g-small" || cpu != 1 || links["lan"].String() != "1g" || links["wan"].String() != "1g" {
		t.Errorf("1g-small = %s %v %v, %v; want 1g on lan and wan and a one-core budget", name, links, cpu, err)
	}
	_, links, cpu, err = Options{Appliance: "1g-small", DUTCPU: 0.5, InterfaceLinks: map[string]string{"wan": "1g/half"}}.resolveAppliance(topo)
	if err != nil || cpu != 0.5 || links["wan"].String() != "1g/half" || links["lan"].String() != "1g" {
		t.Errorf("1g-small with overrides = %v %v, %v; want 0.5 cores, wan 1g/half, lan 1g", links, cpu, err)
	}
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{Appliance: "10g-big"}, `lab profile "10g-big": want one of unlimited, 1g-small`},
		{Options{Link: "40m"}, `link speed "40m": want one of 100m, 1g, 2.5g, 10g, unlimited`},
		{Options{DUTCPU: 0.05}, "dut cpu budget 0.05 cores: want 0.1 to"},
		{Options{Appliance: "1g-small", DUTCPU: 1000}, "dut cpu budget 1000 cores: want 0.1 to"},
	} {
		if err := tt.o.CheckAppliance(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("CheckAppliance(%+v) = %v, want %q", tt.o, err, tt.want)
		}
	}
}

// TestApplianceWithoutCgroups: on a machine with no cpu controller a budget
// is refused, naming what is missing, and unlimited (or a link alone) works.
func TestApplianceWithoutCgroups(t *testing.T) {
	mi, _ := fakeCgroups(t, "memory pids")
	path := filepath.Join(t.TempDir(), "mountinfo")
	if err := os.WriteFile(path, mi, 0o644); err != nil {
		t.Fatal(err)
	}
	old := mountinfoPath
	mountinfoPath = path
	t.Cleanup(func() { mountinfoPath = old })
	topo := Topology{Prefix: "fwt"}
	_, _, _, err := Options{Appliance: "1g-small"}.appliance(topo)
	if want := "lab profile 1g-small: dut cpu budget: this machine has no cgroup cpu controller: neither cgroup v2's cpu.max"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("1g-small without cgroups: %v, want %q", err, want)
	}
	for _, o := range []Options{{}, {Appliance: "unlimited"}, {Link: "1g"}} {
		if _, _, _, err := o.appliance(topo); err != nil {
			t.Errorf("%+v without cgroups: %v, want it to work (no budget asked)", o, err)
		}
	}
	if err := RemoveCPUGroup("fwt-dut"); err != nil {
		t.Errorf("RemoveCPUGroup without cgroups = %v, want nil", err)
	}
}
