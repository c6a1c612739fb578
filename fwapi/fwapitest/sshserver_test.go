package fwapitest

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/fwapi"
)

// recordTB records Errorf calls instead of failing.
type recordTB struct {
	testing.TB
	mu   sync.Mutex
	errs []string
}

func (r *recordTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestUnexpectedCommandFailsTheTest(t *testing.T) {
	rec := &recordTB{TB: t}
	s := NewSSHServer(rec)
	s.NotFound("known-missing")
	c, err := fwapi.DialSSH(t.Context(), s.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, code, err := c.Run(t.Context(), "frobnicate --hard; known-missing", nil)
	if err != nil || code != 127 {
		t.Fatalf("Run = %d, %v; want exit 127", code, err)
	}
	want := []string{`fake firewall: unexpected command "frobnicate --hard"`}
	if diff := cmp.Diff(want, rec.errs); diff != "" {
		t.Errorf("recorded test errors mismatch (-want +got):\n%s", diff)
	}
}

func TestParseTranscripts(t *testing.T) {
	got := ParseTranscripts("$ hostname\nfw1\n$ pfctl -t x -T show\n$ false\n? exit 1\n$ two lines\na\n\nb\n")
	want := map[string]Reply{
		"hostname":           {Stdout: "fw1\n"},
		"pfctl -t x -T show": {},
		"false":              {Exit: 1},
		"two lines":          {Stdout: "a\n\nb\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseTranscripts mismatch (-want +got):\n%s", diff)
	}
}

func TestFakeIfconfigFlags(t *testing.T) {
	block := "igb1: flags=8843<UP> metric 0 mtu 1500\n\toptions=4e527bb<RXCSUM,TXCSUM,VLAN_MTU,VLAN_HWTAGGING,JUMBO_MTU,VLAN_HWCSUM,TSO4,TSO6,LRO,WOL_MAGIC,VLAN_HWFILTER,VLAN_HWTSO,RXCSUM_IPV6,TXCSUM_IPV6,HWSTATS,MEXTPG>\n"
	got := setOptions(block, []string{"TSO4", "TSO6", "LRO"}, false)
	if !strings.Contains(got, "\toptions=4e520bb<RXCSUM,TXCSUM,VLAN_MTU,VLAN_HWTAGGING,JUMBO_MTU,VLAN_HWCSUM,WOL_MAGIC,VLAN_HWFILTER,VLAN_HWTSO,RXCSUM_IPV6,TXCSUM_IPV6,HWSTATS,MEXTPG>\n") {
		t.Errorf("setOptions(-tso -lro) =\n%s", got)
	}
}
