package probe

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fixture reads a file under the repository's fixtures folder.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "fixtures", name))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return data
}

// summary is the part of a result the table checks.
type summary struct {
	Protocol             string
	Streams              int
	Reverse, Bidir       bool
	ReceivedBPS, SentBPS float64
	Retransmits          int64
	BidirReceivedBPS     float64
	HostCPU, RemoteCPU   float64 // -1 when unknown
	MeanRTT              time.Duration
	LostPercent          float64 // -1 when not UDP
	Intervals            int
	Omitted              int
}

func summarize(r Iperf3Result) summary {
	s := summary{
		Protocol: r.Protocol, Streams: r.Streams, Reverse: r.Reverse, Bidir: r.Bidir,
		ReceivedBPS: r.Flow.ReceivedBPS, SentBPS: r.Flow.SentBPS, Retransmits: r.Flow.Retransmits,
		HostCPU: -1, RemoteCPU: -1, LostPercent: -1, Intervals: len(r.Intervals),
	}
	if r.BidirFlow != nil {
		s.BidirReceivedBPS = r.BidirFlow.ReceivedBPS
	}
	if r.HostCPU != nil {
		s.HostCPU = r.HostCPU.Total
	}
	if r.RemoteCPU != nil {
		s.RemoteCPU = r.RemoteCPU.Total
	}
	if r.RTT != nil {
		s.MeanRTT = r.RTT.Mean
	}
	if r.UDP != nil {
		s.LostPercent = r.UDP.LostPercent
	}
	for _, iv := range r.Intervals {
		if iv.Omitted {
			s.Omitted++
		}
	}
	return s
}

func TestParseIperf3(t *testing.T) {
	tcpUp := summary{Protocol: "TCP", Streams: 1, ReceivedBPS: 19815461086.93048, SentBPS: 19854409326.2228, HostCPU: 35.09395475182663, RemoteCPU: 53.0792352399758, MeanRTT: 144 * time.Microsecond, LostPercent: -1, Intervals: 2}
	tests := []struct {
		file         string
		want         summary
		wantWarnings []string // substrings, each must appear in some warning
	}{
		{file: "iperf3/tcp-up.json", want: tcpUp},
		{file: "iperf3/tcp-down.json", want: summary{Protocol: "TCP", Streams: 1, Reverse: true, ReceivedBPS: 12144206851.599333, SentBPS: 12112155335.469057, Retransmits: 3, HostCPU: 32.8959551796791, RemoteCPU: 22.755591671506593, LostPercent: -1, Intervals: 2}},
		{file: "iperf3/tcp-p4.json", want: summary{Protocol: "TCP", Streams: 4, ReceivedBPS: 10252177838.590914, SentBPS: 10250995400.419891, Retransmits: 5, HostCPU: 24.314057206045067, RemoteCPU: 20.728536967688186, MeanRTT: 755250 * time.Nanosecond, LostPercent: -1, Intervals: 3, Omitted: 1}},
		{file: "iperf3/tcp-bidir.json", want: summary{Protocol: "TCP", Streams: 1, Bidir: true, ReceivedBPS: 4999455080.523556, SentBPS: 5033489656.053486, Retransmits: 7, BidirReceivedBPS: 4501018409.9916, HostCPU: 23.281121775430837, RemoteCPU: 23.4925190360934, MeanRTT: 1469 * time.Microsecond, LostPercent: -1, Intervals: 2}},
		{file: "iperf3/udp.json", want: summary{Protocol: "UDP", Streams: 1, ReceivedBPS: 99969106.08610104, SentBPS: 99983451.67965452, Retransmits: -1, HostCPU: 10.190613563960852, RemoteCPU: 5.63963692843899, LostPercent: 0.004800307219662059, Intervals: 2}},
		{file: "iperf3/udp-down.json", want: summary{Protocol: "UDP", Streams: 1, Reverse: true, ReceivedBPS: 39197126.422988616, SentBPS: 49288965.015903674, Retransmits: -1, HostCPU: 30.303619501944855, RemoteCPU: 52.04249832389498, LostPercent: 20.476133595774627, Intervals: 2}},
		{file: "iperf3/damaged-trailing-error.json", want: tcpUp, wantWarnings: []string{"text after the JSON report: iperf3: error - control socket has closed unexpectedly"}},
		{file: "iperf3/damaged-leading-text.json", want: tcpUp, wantWarnings: []string{"text before the JSON report: iperf3: warning"}},
		{file: "iperf3/damaged-nan.json", want: func() summary { s := tcpUp; s.HostCPU = -1; s.MeanRTT = 0; return s }(), wantWarnings: []string{"2 non-finite numbers", "no local CPU figure"}},
		{file: "iperf3/damaged-missing-cpu.json", want: func() summary { s := tcpUp; s.HostCPU, s.RemoteCPU, s.Streams = -1, -1, 0; return s }(), wantWarnings: []string{"protocol missing", "no local CPU", "no remote CPU"}},
		{file: "iperf3/damaged-wrong-type.json", want: func() summary { s := tcpUp; s.Intervals = 1; return s }(), wantWarnings: []string{"interval 0 has no throughput"}},
		{file: "iperf3/damaged-udp-nan-jitter.json", want: summary{Protocol: "UDP", Streams: 1, ReceivedBPS: 99969106.08610104, SentBPS: 99983451.67965452, Retransmits: -1, HostCPU: 10.190613563960852, RemoteCPU: 5.63963692843899, LostPercent: 0.004800307219662059, Intervals: 2}, wantWarnings: []string{"non-finite"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got, err := ParseIperf3(fixture(t, tt.file))
			if err != nil {
				t.Fatalf("ParseIperf3(%s) error = %v, want none", tt.file, err)
			}
			if diff := cmp.Diff(tt.want, summarize(got), cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("ParseIperf3(%s) mismatch (-want +got):\n%s", tt.file, diff)
			}
			for _, w := range tt.wantWarnings {
				if !containsSub(got.Warnings, w) {
					t.Errorf("ParseIperf3(%s) warnings = %q, want one containing %q", tt.file, got.Warnings, w)
				}
			}
			if len(tt.wantWarnings) == 0 && len(got.Warnings) > 0 && !strings.HasPrefix(tt.file, "iperf3/tcp-down") {
				t.Errorf("ParseIperf3(%s) warnings = %q, want none", tt.file, got.Warnings)
			}
		})
	}
}

func TestParseIperf3Failures(t *testing.T) {
	tests := []struct {
		name         string
		in           []byte
		wantReason   string
		wantReported bool
	}{
		{"refused", fixture(t, "iperf3/error-refused.json"), "unable to connect to server: Connection refused", true},
		{"port in use", fixture(t, "iperf3/server-port-in-use.json"), "Address already in use", true},
		{"cannot assign", fixture(t, "iperf3/server-cannot-assign.json"), "Cannot assign requested address", true},
		{"error mid-test", fixture(t, "iperf3/damaged-error-mid-test.json"), "the server has terminated", true},
		{"truncated", fixture(t, "iperf3/damaged-truncated.json"), "truncated", false},
		{"missing received", fixture(t, "iperf3/damaged-missing-received.json"), "no received throughput", false},
		{"infinite received", fixture(t, "iperf3/damaged-inf-received.json"), "no received throughput", false},
		{"empty", nil, "printed nothing", false},
		{"blank", []byte(" \n\t"), "printed nothing", false},
		{"plain text", []byte("iperf3: error - unable to connect to server: No route to host\n"), "not JSON: iperf3: error - unable to connect", false},
		{"garbage in JSON", []byte(`{"start": {]}`), "not valid JSON", false},
		{"just a brace", []byte("{"), "truncated", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseIperf3(tt.in)
			var ie *Iperf3Error
			if !errors.As(err, &ie) {
				t.Fatalf("ParseIperf3() error = %v, want an *Iperf3Error", err)
			}
			if !strings.Contains(ie.Reason, tt.wantReason) || ie.Reported != tt.wantReported {
				t.Errorf("ParseIperf3() error = %q (reported %v), want one containing %q (reported %v)", ie.Reason, ie.Reported, tt.wantReason, tt.wantReported)
			}
		})
	}
}

func TestParseIperf3Intervals(t *testing.T) {
	got, err := ParseIperf3(fixture(t, "iperf3/tcp-bidir.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Interval{
		{Start: 0, End: 1.001133, BitsPerSecond: 4502726791.744643, Retransmits: 6},
		{Start: 1.001133, End: 2.003829},
	}
	if len(got.Intervals) != len(want) {
		t.Fatalf("intervals = %d, want %d", len(got.Intervals), len(want))
	}
	first := got.Intervals[0]
	first.BidirBPS = 0
	if diff := cmp.Diff(want[0], first, cmpopts.EquateApprox(1e-9, 0)); diff != "" {
		t.Errorf("first interval mismatch (-want +got):\n%s", diff)
	}
	for i, iv := range got.Intervals {
		if iv.BidirBPS <= 0 {
			t.Errorf("interval %d BidirBPS = %v, want > 0", i, iv.BidirBPS)
		}
	}
}

func TestSanitizeNumbers(t *testing.T) {
	tests := []struct {
		in, want string
		n        int
	}{
		{`{"a": -nan, "b": nan}`, `{"a": null, "b": null}`, 2},
		{`{"a": inf, "b": -inf, "c": +Infinity}`, `{"a": null, "b": null, "c": null}`, 3},
		{`{"a": 1e-5, "b": -2.5E+3, "c": true, "d": null, "e": false}`, `{"a": 1e-5, "b": -2.5E+3, "c": true, "d": null, "e": false}`, 0},
		{`{"s": "nan inf -nan", "t": "say \"nan\" \\", "u": nan}`, `{"s": "nan inf -nan", "t": "say \"nan\" \\", "u": null}`, 1},
	}
	for _, tt := range tests {
		got, n := sanitizeNumbers([]byte(tt.in))
		if string(got) != tt.want || n != tt.n {
			t.Errorf("sanitizeNumbers(%s) = %s, %d; want %s, %d", tt.in, got, n, tt.want, tt.n)
		}
	}
}

func containsSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func FuzzParseIperf3(f *testing.F) {
	for _, name := range []string{"tcp-up.json", "udp.json", "tcp-bidir.json", "error-refused.json", "damaged-nan.json"} {
		data, err := os.ReadFile(filepath.Join("..", "fixtures", "iperf3", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseIperf3(data)
		if err != nil {
			var ie *Iperf3Error
			if !errors.As(err, &ie) || ie.Reason == "" {
				t.Fatalf("error %v is not an *Iperf3Error with a reason", err)
			}
			return
		}
		check := func(name string, v float64) {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%s = %v, want a finite non-negative number", name, v)
			}
		}
		check("ReceivedBPS", res.Flow.ReceivedBPS)
		check("SentBPS", res.Flow.SentBPS)
		if res.Flow.Retransmits < -1 {
			t.Fatalf("Retransmits = %d", res.Flow.Retransmits)
		}
		for _, iv := range res.Intervals {
			check("interval bits/s", iv.BitsPerSecond)
		}
		if res.HostCPU != nil && (math.IsNaN(res.HostCPU.Total) || math.IsInf(res.HostCPU.Total, 0)) {
			t.Fatalf("HostCPU = %v", res.HostCPU.Total)
		}
	})
}

// TestPacketsPerSecond: the datagrams the receiver got (sent minus lost)
// over the seconds it measured; nothing for TCP.
func TestPacketsPerSecond(t *testing.T) {
	udp, err := ParseIperf3(fixture(t, "iperf3/udp.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := udp.PacketsPerSecond(), (20832.0-1)/2.000394; math.Abs(got-want) > 1e-6 {
		t.Errorf("udp.json: PacketsPerSecond() = %v, want %v", got, want)
	}
	tcp, err := ParseIperf3(fixture(t, "iperf3/tcp-up.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := tcp.PacketsPerSecond(); got != 0 {
		t.Errorf("tcp-up.json: PacketsPerSecond() = %v, want 0", got)
	}
}
