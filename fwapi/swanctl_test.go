package fwapi_test

import (
	"testing"

	"github.com/fwab/fwab/fwapi"
)

// Every child SA state strongSwan can print is read, not refused: a tunnel
// that is retrying or just deleted is a state to report, not a parse error.
func TestParseSwanctlSAsEveryChildState(t *testing.T) {
	// upstream: strongswan/strongswan@6e07e3f0bdfe722f47687aac257b142844c33653 src/libcharon/sa/child_sa.c:53 — `child_sa_state_names`
	states := []string{"CREATED", "ROUTED", "INSTALLING", "INSTALLED", "UPDATING", "REKEYING", "REKEYED", "RETRYING", "DELETING", "DELETED", "DESTROYING"}
	for _, st := range states {
		out := "con1: #3, ESTABLISHED, IKEv2, 0123456789abcdef_i* fedcba9876543210_r\n" +
			"  local  '198.19.0.1' @ 198.19.0.1[4500]\n" +
			"  con1_1: #7, reqid 1, " + st + ", TUNNEL-in-UDP, ESP:AES_GCM_16-128\n" +
			"    in  c4f1a2b3,      0 bytes,     0 packets\n" +
			"    out c8e2d1f0,    840 bytes,    10 packets\n"
		sas, err := fwapi.ParseSwanctlSAs(out)
		if err != nil {
			t.Errorf("state %s: %v", st, err)
			continue
		}
		if len(sas) != 1 || sas[0].State != st || sas[0].BytesOut != 840 {
			t.Errorf("state %s: got %+v, want one SA in state %s with 840 bytes out", st, sas, st)
		}
	}
}
