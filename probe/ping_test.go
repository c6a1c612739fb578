package probe

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParsePing(t *testing.T) {
	us := time.Microsecond
	tests := []struct {
		file string
		want PingStats
	}{
		{"ping/iputils-loopback.txt", PingStats{Transmitted: 5, Received: 5, LossPercent: 0, Min: 20 * us, Avg: 60 * us, Max: 137 * us, Mdev: 39 * us}},
		{"ping/iputils-loss.txt", PingStats{Transmitted: 20, Received: 17, LossPercent: 15, Min: 412 * us, Avg: 5871 * us, Max: 11903 * us, Mdev: 3220 * us}},
		{"ping/iputils-none.txt", PingStats{Transmitted: 5, Received: 0, LossPercent: 100}},
		{"ping/freebsd.txt", PingStats{Transmitted: 10, Received: 10, LossPercent: 0, Min: 214 * us, Avg: 367 * us, Max: 771 * us, Mdev: 150 * us}},
		{"ping/busybox.txt", PingStats{Transmitted: 4, Received: 4, LossPercent: 0, Min: 101 * us, Avg: 178 * us, Max: 290 * us}},
	}
	for _, tt := range tests {
		got, err := ParsePing(fixture(t, tt.file))
		if err != nil {
			t.Errorf("ParsePing(%s) error = %v", tt.file, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParsePing(%s) mismatch (-want +got):\n%s", tt.file, diff)
		}
	}
}

func TestParsePingErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "no ping summary"},
		{"ping: 198.18.1.99: Name or service not known\n", "no ping summary"},
		{"0 packets transmitted, 0 received, 100% packet loss\n", "sent no packets"},
		{"3 packets transmitted, 3 received, 0% packet loss\n", "no round-trip summary"},
	}
	for _, tt := range tests {
		_, err := ParsePing([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParsePing(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestPingArgv(t *testing.T) {
	got := pingArgv("198.19.1.10", 50, 200*time.Millisecond)
	want := []string{"ping", "-n", "-q", "-i", "0.2", "-c", "50", "-w", "12", "198.19.1.10"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pingArgv mismatch (-want +got):\n%s", diff)
	}
}
