package fwapi_test

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// lanFirst is the factory config with <lan> before <wan> in <interfaces>.
func lanFirst(t *testing.T, nics emu.NICs) []byte {
	t.Helper()
	cfg := emu.FactoryConfigAt(configxml.PfSense, "", nics)
	wan := regexp.MustCompile(`(?s)\t\t<wan>.*?</wan>\n`).Find(cfg)
	if wan == nil {
		t.Fatal("factory config has no <wan>")
	}
	cfg = bytes.Replace(cfg, wan, nil, 1)
	return bytes.Replace(cfg, []byte("\t</interfaces>"), append(wan, []byte("\t</interfaces>")...), 1)
}

func ifconfigSets(cmds []string) []string {
	var out []string
	for _, c := range cmds {
		if strings.HasPrefix(c, "ifconfig ") && c != "ifconfig -a" {
			out = append(out, c)
		}
	}
	return out
}

var csumOff = []configxml.Change{{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces}}

// TestPfSenseOffloadOnlyAssignedInConfigOrder: offload flags go to the
// interfaces config.xml assigns, in its <interfaces> order, through the
// GUI's own setup_microcode walk, never to an unassigned NIC of
// ifconfig -a, and fwab sets no flag with ifconfig itself.
func TestPfSenseOffloadOnlyAssignedInConfigOrder(t *testing.T) {
	nics := emu.NICs{Spare: "ixl"}
	em, fw := newPfSense(t, labtest.Options{NICs: nics, Config: lanFirst(t, nics), SSHVia: emu.NoManagement})
	if out, _, _ := em.Run(t, "ifconfig -a", ""); !strings.Contains(out, "ixl0: flags") {
		t.Fatalf("the spare NIC is not in ifconfig -a:\n%s", out)
	}
	em.ResetCommands()
	em.ResetOffloadLog()
	if err := fw.Apply(t.Context(), csumOff); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if sets := ifconfigSets(em.Commands()); len(sets) != 0 {
		t.Errorf("fwab set flags itself: %v", sets)
	}
	if diff := cmp.Diff([]string{"igb1", "igb0"}, em.OffloadLog()); diff != "" {
		t.Errorf("the emulator's offload order (-want +got):\n%s", diff)
	}
}

// TestPfSenseOffloadSparesSSHInterface: the interfaces over the NIC the
// SSH session comes in through are left out of the apply unless asked.
func TestPfSenseOffloadSparesSSHInterface(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{SSHVia: "lan"})
	em.ResetOffloadLog()
	if err := fw.Apply(t.Context(), csumOff); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if diff := cmp.Diff([]string{"igb0"}, em.OffloadLog()); diff != "" {
		t.Errorf("devices the apply changed (-want +got):\n%s", diff)
	}
}

// TestPfSenseChecksumForcedOffOnVirtio: pfSense keeps checksum offload off
// on vtnet whatever config.xml says; fwab does not turn it on there, and
// verify expects it off.
func TestPfSenseChecksumForcedOffOnVirtio(t *testing.T) {
	em, fw := newPfSense(t, labtest.Options{NICs: emu.NICs{WAN: "igb", LAN: "vtnet"}})
	em.ResetCommands()
	on := []configxml.Change{{Knob: "offload.checksum", From: "off", To: "on", Action: configxml.ActionInterfaces}}
	if err := fw.Apply(t.Context(), on); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	for _, c := range ifconfigSets(em.Commands()) {
		if strings.HasPrefix(c, "ifconfig vtnet0") {
			t.Errorf("fwab pushed %q to a vtnet NIC", c)
		}
	}
	st, err := fw.RuntimeState(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Interfaces["vtnet0"]; s.Has("TXCSUM") || s.Has("RXCSUM") {
		t.Errorf("vtnet0 shows checksum offload on: %v", s.Options)
	}
	if s := st.Interfaces["igb0"]; !s.Has("TXCSUM") {
		t.Errorf("igb0 shows checksum offload off with the config's flag absent: %v", s.Options)
	}
	c, err := configxml.LoadBytes(em.StoredConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fwapi.VerifyRuntime(c, st) {
		if f.Rule == fwapi.RuleOffloadMismatch && !slices.Contains([]string{"offload.tso", "offload.lro"}, strings.Fields(f.Message)[0]) {
			t.Errorf("verify: %s", f.Message)
		}
	}
}
