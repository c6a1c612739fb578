package probe

import (
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

// TestCanaryNetns sends canary triggers between two namespaces: with
// nothing in the way all pass; with a drop rule on the nonce (nftables on
// the server side, matching the payload after the stream's header) none
// do, and the triggers sent are still counted.
func TestCanaryNetns(t *testing.T) {
	client, server, self := nftPair(t)
	c := Canary{Rate: 100, Nonce: NewNonce(), Binary: self}
	run := func() CanaryResult { t.Helper(); return runStream(t, c.Start, client, server, 500*time.Millisecond) }
	if r := run(); r.Sent < 50 || r.Passed != r.Sent || r.ControlSent < 50 || r.ControlPassed != r.ControlSent {
		t.Errorf("nothing in the way: %+v, want about 100 sent and all passed, the control stream too", r)
	}
	// The nonce starts 8 (UDP header) + 20 (the stream's header) bytes
	// into the transport header.
	rule := "table inet fwabcanary { chain in { type filter hook input priority 0; meta l4proto udp @th,224," +
		"96 0x" + hex.EncodeToString([]byte(CanaryPrefix)) + " drop; }; }"
	nftIn(t, server, rule)
	r := run()
	if r.Sent < 50 || r.Passed != 0 || r.FailOpen() || !r.Conclusive() {
		t.Errorf("behind a drop rule on the nonce: %+v, want about 100 sent and none passed, the control stream passing", r)
	}
	// Everything dropped: no trigger passes, but neither does the control
	// stream, so nothing shows that the rule on the nonce dropped them.
	nftIn(t, server, "table inet fwabcanaryall { chain in { type filter hook input priority 0; meta l4proto udp drop; }; }")
	if r := run(); r.Passed != 0 || r.ControlSent == 0 || r.ControlPassed != 0 || r.Conclusive() {
		t.Errorf("all UDP dropped: %+v, want an inconclusive canary", r)
	}
}

func TestCanaryRule(t *testing.T) {
	c := Canary{Nonce: []byte("fwab-canary-0011223344556677")}
	want := `drop udp any any -> any any (msg:"fwab canary"; content:"fwab-canary-0011223344556677"; sid:9999001; rev:1;)`
	if got := c.SuricataRule(9999001); got != want {
		t.Errorf("SuricataRule = %s\nwant %s", got, want)
	}
	for _, bad := range []Canary{{Nonce: []byte("short")}, {Nonce: NewNonce(), Rate: 5000}, {Nonce: []byte(`fwab-canary-"; sid:1; x`)}, {Nonce: NewNonce(), Port: 70000}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if a, b := NewNonce(), NewNonce(); string(a) == string(b) || !strings.HasPrefix(string(a), CanaryPrefix) {
		t.Errorf("NewNonce gave %q and %q", a, b)
	}
	// A nonce from a seed is the same for the same seed (a resumed run
	// keeps the rule it placed), another for another seed, and valid.
	a, b, c2 := NonceFrom("run 7 at 1"), NonceFrom("run 7 at 1"), NonceFrom("run 8 at 1")
	if string(a) != string(b) || string(a) == string(c2) {
		t.Errorf("NonceFrom: %q, %q (same seed), %q (another)", a, b, c2)
	}
	if err := (Canary{Nonce: a}).Validate(); err != nil || len(a) != len(NewNonce()) {
		t.Errorf("NonceFrom gave %q: %v", a, err)
	}
}

// TestAlertLogsSince: the busiest instance's gain counts; one whose count
// went back (pruned) or none read twice makes the count say nothing.
func TestAlertLogsSince(t *testing.T) {
	const lan, wan = "/var/log/suricata/suricata_igb150000", "/var/log/suricata/suricata_igb060000"
	before := AlertLogs{lan: 3, wan: 0}
	for _, tc := range []struct {
		name  string
		after AlertLogs
		n     uint64
		ok    bool
	}{
		{"both gained", AlertLogs{lan: 43, wan: 12}, 40, true},
		{"nothing new", before, 0, true},
		{"pruned", AlertLogs{lan: 1, wan: 12}, 0, false},
		{"only a new instance", AlertLogs{"/var/log/suricata/suricata_igb250000": 9}, 0, false},
	} {
		n, ok := tc.after.Since(before)
		if n != tc.n || ok != tc.ok {
			t.Errorf("%s: Since = %d, %v; want %d, %v", tc.name, n, ok, tc.n, tc.ok)
		}
	}
	// A miss is a trigger that passed the box without an alert; one lost
	// before the box is not the IDS's.
	detect := CanaryResult{Sent: 40, Passed: 38, ControlSent: 40, ControlPassed: 40, Detect: true, Alerted: 35}
	if detect.FailOpen() || detect.Missed() != 3 {
		t.Errorf("%+v: FailOpen %v, Missed %d; want false and 3", detect, detect.FailOpen(), detect.Missed())
	}
	if inline := (CanaryResult{Sent: 40, Passed: 2}); !inline.FailOpen() || inline.Missed() != 0 {
		t.Errorf("%+v: FailOpen %v, Missed %d; want true and 0", inline, inline.FailOpen(), inline.Missed())
	}
}
