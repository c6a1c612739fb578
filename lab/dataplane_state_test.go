package lab

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
)

func TestExpectedDataPlane(t *testing.T) {
	withKnobs := func(assignments ...string) []byte {
		c, err := configxml.LoadBytes(emu.DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.SetAll(assignments); err != nil {
			t.Fatal(err)
		}
		return c.Bytes()
	}
	factory, err := ExpectedDataPlane(emu.DefaultConfig(), testPorts)
	if err != nil {
		t.Fatal(err)
	}
	// The factory config: checksum offload on, TSO and LRO off, no
	// blocklist, no inspection engine, the default rules and NAT loaded.
	on := emu.Offloads{TXCSUM: true, RXCSUM: true}
	if diff := cmp.Diff(map[string]emu.Offloads{"tstd0": on, "tstd1": on}, factory.Offloads); diff != "" {
		t.Errorf("factory offloads (-want +got):\n%s", diff)
	}
	if len(factory.Rules) == 0 || len(factory.IDS) != 0 {
		t.Errorf("factory data plane: %d rules, IDS %v; want rules and no IDS", len(factory.Rules), factory.IDS)
	}

	tests := []struct {
		name  string
		knobs []string
		check func(t *testing.T, got DataPlaneState)
	}{
		{"more rules", []string{"rules@lan=50"}, func(t *testing.T, got DataPlaneState) {
			if len(got.Rules) != len(factory.Rules)+50 {
				t.Errorf("%d rules, want %d", len(got.Rules), len(factory.Rules)+50)
			}
		}},
		{"offloads", []string{"offload.checksum=off", "offload.tso=on"}, func(t *testing.T, got DataPlaneState) {
			// TSO needs tx checksumming: the kernel keeps it off.
			if diff := cmp.Diff(emu.Offloads{}, got.Offloads["tstd0"]); diff != "" {
				t.Errorf("offloads (-want +got):\n%s", diff)
			}
		}},
		{"blocklist", []string{"blocklist=on"}, func(t *testing.T, got DataPlaneState) {
			if len(got.Sets) == 0 || len(got.Rules) <= len(factory.Rules) {
				t.Errorf("blocklist on: sets %v, %d rules; want its set and lookup rules", got.Sets, len(got.Rules))
			}
		}},
		{"inline IPS", []string{"offload.checksum=off", "ids@lan=ips-inline"}, func(t *testing.T, got DataPlaneState) {
			if diff := cmp.Diff(map[string][]string{"ips-inline": {"tstd0"}}, got.IDS); diff != "" {
				t.Errorf("IDS (-want +got):\n%s", diff)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpectedDataPlane(withKnobs(tt.knobs...), testPorts)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
	// The OPNsense factory config renders too: offloads off as OPNsense
	// ships, its default rules loaded.
	opn, err := ExpectedDataPlane(emu.FactoryConfig(configxml.OPNsense), testPorts)
	if err != nil {
		t.Fatalf("ExpectedDataPlane(OPNsense factory config): %v", err)
	}
	if diff := cmp.Diff(map[string]emu.Offloads{"tstd0": {}, "tstd1": {}}, opn.Offloads); diff != "" || len(opn.Rules) == 0 {
		t.Errorf("OPNsense factory data plane: %d rules, offloads (-want +got):\n%s", len(opn.Rules), diff)
	}
	if _, err := ExpectedDataPlane([]byte("<pfsense>"), testPorts); err == nil {
		t.Errorf("ExpectedDataPlane accepted a truncated config")
	}
}
