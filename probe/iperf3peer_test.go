package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A report's Peer is the address its side saw the other at (the server's
// report: the client's address as it arrived, NAT'd or not).
func TestIperf3Peer(t *testing.T) {
	res, err := ParseIperf3(fixture(t, "iperf3/server-tcp-up.json"))
	if err != nil || res.Peer != "127.0.0.1" {
		t.Errorf("server report: Peer %q (%v), want 127.0.0.1", res.Peer, err)
	}
	res, _ = ParseIperf3([]byte(`{"start": {"test_start": {"protocol": "TCP"}}, "end": {"sum_received": {"bits_per_second": 1}}}`))
	if res.Peer != "" {
		t.Errorf("a report without start.connected: Peer %q, want none", res.Peer)
	}
}

// versionRunner answers iperf3 --version with its line.
type versionRunner struct{ line string }

func (r versionRunner) Run(_ context.Context, argv []string) ([]byte, error) {
	return []byte(r.line + "\n"), nil
}

func (r versionRunner) Start(context.Context, []string) (Process, error) { return nil, nil }

// CheckEndpoint refuses an iperf3 too old for what the probe passes on
// that side: the server always gets --idle-timeout (3.10), the client
// --bidir (3.7) only for a bidir probe.
func TestIperf3CheckEndpoint(t *testing.T) {
	for _, tc := range []struct {
		line   string
		p      Iperf3
		client bool
		want   string // in the error; "" for none
	}{
		{"iperf 3.12 (cJSON 1.7.15)", Iperf3{}, false, ""},
		{"iperf 3.9 (cJSON 1.7.13)", Iperf3{}, false, "too old for --idle-timeout"},
		{"iperf 3.9 (cJSON 1.7.13)", Iperf3{}, true, ""},
		{"iperf 3.6", Iperf3{Direction: Bidir}, true, "iperf3 3.7 or later"},
	} {
		v, err := tc.p.CheckEndpoint(t.Context(), Endpoint{Name: "server", Addr: "198.19.1.10", Runner: versionRunner{tc.line}}, tc.client)
		if v != tc.line || (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s, client %v: %q, %v; want the version and an error with %q", tc.line, tc.client, v, err, tc.want)
		}
	}
}

// A missing iperf3 is said with the fix and matches ErrNotFound.
func TestIperf3CheckEndpointNotInstalled(t *testing.T) {
	_, err := Iperf3{}.CheckEndpoint(t.Context(), Endpoint{Name: "client", Addr: "198.18.1.10", Runner: Local{Path: t.TempDir()}}, true)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "install it there") {
		t.Errorf("no iperf3 on the PATH: %v; want ErrNotFound, said with the fix", err)
	}
}
