package probe

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFrameSizes(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		payload int
		err     string
	}{
		{"64", 64, 18, ""},
		{"1518", 1518, 1472, ""},
		{"63", 0, 0, "frame size 63: Ethernet frames are 64 to 1518 bytes at an MTU of 1500"},
		{"1519", 0, 0, "64 to 1518 bytes"},
		{"imix", 0, 0, "several UDP streams at once"},
		{"big", 0, 0, `frame size "big": give a whole number`},
	} {
		got, err := ParseFrameSize(tc.in, 1500)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseFrameSize(%q) = %d, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || UDPPayload(got) != tc.payload {
			t.Errorf("ParseFrameSize(%q) = %d (payload %d), %v; want %d (payload %d)", tc.in, got, UDPPayload(got), err, tc.want, tc.payload)
		}
	}
	// 64-byte frames at 1 Gbit/s line rate: 1,488,095 frames a second.
	fps := 1e9 / float64(8*(64+20))
	if got := WireBPS(fps, 64); math.Abs(got-1e9) > 1 {
		t.Errorf("WireBPS(%v, 64) = %v, want 1e9", fps, got)
	}
	if got := FramesPerSecond(fps*18*8, 64); math.Abs(got-fps) > 1e-6 {
		t.Errorf("FramesPerSecond = %v, want %v", got, fps)
	}
}

// TestIperf3Trial: a trial runs iperf3 UDP with the frame's payload, the
// asked rate, whole seconds and 64-bit counters, and reads the loss and the
// rate really sent from the report.
func TestIperf3Trial(t *testing.T) {
	r := newScripted(t, "iperf3/server-udp.json", "iperf3/udp.json")
	client, server := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	trial := Iperf3Trial(Iperf3{StartGrace: time.Millisecond}, client, server, 1246)
	got, err := trial(t.Context(), 100e6, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got.Loss != 0.004800307219662059 || got.Offered != 99983451.67965452 {
		t.Errorf("trial = %+v; want the fixture's loss and sent rate", got)
	}
	var argv []string
	for _, c := range r.calls {
		if slices.Contains(c, "-c") {
			argv = c
		}
	}
	for _, want := range [][]string{{"-u"}, {"-l", "1200"}, {"-b", "100000000"}, {"-t", "2"}, {"--udp-counters-64bit"}} {
		if i := slices.Index(argv, want[0]); i < 0 || (len(want) == 2 && (i+1 >= len(argv) || argv[i+1] != want[1])) {
			t.Errorf("client argv %q lacks %q", argv, want)
		}
	}
}
