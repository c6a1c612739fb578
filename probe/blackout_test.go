package probe

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// freeUDP returns a loopback address whose UDP and TCP ports were free.
func freeUDP(t *testing.T) string {
	t.Helper()
	for range 20 {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := pc.LocalAddr().String()
		pc.Close()
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free loopback port")
	return ""
}

// TestReceiveBlackoutCounts: the receiver counts each sequence number
// once from the first that arrives, sees reordering, ignores other
// streams, and measures the longest gap between arrivals.
func TestReceiveBlackoutCounts(t *testing.T) {
	id := "fwab-blackout-0123456789ab"
	addr := freeUDP(t)
	ctx, cancel := context.WithCancel(t.Context())
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() { done <- ReceiveBlackout(ctx, id, addr, &out) }()
	time.Sleep(100 * time.Millisecond)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(stream string, seq uint64) {
		b := make([]byte, 64)
		copy(b, "FWBO")
		binary.BigEndian.PutUint64(b[4:], streamID(stream))
		binary.BigEndian.PutUint64(b[12:], seq)
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Microsecond)
	}
	for seq := uint64(5); seq < 40; seq++ { // 0..4 lost before the first arrival: start-up
		send(id, seq)
	}
	time.Sleep(80 * time.Millisecond) // the blackout: 40..59 never arrive
	for seq := uint64(60); seq < 100; seq++ {
		if seq == 70 {
			continue // arrives late, below
		}
		send(id, seq)
		if seq == 75 {
			send(id, 70)
		}
	}
	send(id, 80)                           // a duplicate
	send("fwab-blackout-ffffffffffff", 41) // another stream's
	send(id, 3)                            // from before the first arrival
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var rt blackoutReceived
	if err := json.Unmarshal(out.Bytes(), &rt); err != nil {
		t.Fatalf("report %q: %v", out.String(), err)
	}
	if rt.Received != 75 || rt.First != 5 || rt.Last != 99 || rt.Reordered != 1 {
		t.Errorf("received %d from %d to %d, %d reordered; want 75 from 5 to 99, 1 reordered", rt.Received, rt.First, rt.Last, rt.Reordered)
	}
	if rt.MaxGapMS < 80 || rt.MaxGapMS > 1000 {
		t.Errorf("longest gap %.1f ms, want the 80 ms blackout", rt.MaxGapMS)
	}

	// The sender sent 0..109: 5..109 count, 20 lost in the blackout and
	// 10 after the last arrival, which is a gap of 10 ms at 1000/s.
	r, err := blackoutResult(1000, blackoutSent{Sent: 110, TCPHeld: 4, TCPSurvived: 3}, rt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sent != 105 || r.Lost != 30 || r.BlockedMS != 30 || r.TCPHeld != 4 || r.TCPSurvived != 3 {
		t.Errorf("result %+v: want 105 sent, 30 lost, 30 ms blocked, 3/4 TCP", r)
	}
	if r.MaxGapMS < 80 {
		t.Errorf("max gap %.1f ms, want at least the 80 ms blackout", r.MaxGapMS)
	}
	// A sender that fell behind, 500 datagrams in a second of the 1000 a
	// second asked: the 100 lost are 200 ms at the rate it achieved.
	r, err = blackoutResult(1000, blackoutSent{Seconds: 1, Sent: 500}, blackoutReceived{Received: 400, Last: 499, MaxGapMS: 200})
	if err != nil || r.Rate != 500 || r.Lost != 100 || r.BlockedMS != 200 {
		t.Errorf("a sender at half its rate: %+v, %v; want rate 500/s, 100 lost, 200 ms blocked", r, err)
	}
	// At the rate it achieved, datagram 400 left 0.8 s into the stream:
	// after the change began, though 0.4 s at the rate asked.
	if _, err := blackoutResult(1000, blackoutSent{Seconds: 4, Sent: 2000}, blackoutReceived{Received: 1500, First: 400, Last: 1999}); err == nil || !strings.Contains(err.Error(), "before the change began") {
		t.Errorf("a late first arrival from a sender at half its rate: error %v, want one saying the blackout is unknown", err)
	}
	if _, err := blackoutResult(1000, blackoutSent{Sent: 50}, blackoutReceived{}); err == nil {
		t.Error("a stream of which nothing arrived: no error, want one naming the route")
	}
	// The first arrival came 0.9 s into the stream, after the change had
	// begun: what was lost before it is not start-up.
	if _, err := blackoutResult(1000, blackoutSent{Sent: 2000}, blackoutReceived{Received: 1000, First: 900, Last: 1999}); err == nil || !strings.Contains(err.Error(), "before the change began") {
		t.Errorf("a stream that passed only after the change began: error %v, want one saying the blackout is unknown", err)
	}
}

// TestBlackoutStream runs both agents (this test binary) through their
// runners on loopback: nothing is lost, the held connections survive,
// and stop ends both agents.
func TestBlackoutStream(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := Endpoint{Name: "client", Addr: "127.0.0.1", Runner: Local{}}
	server := Endpoint{Name: "server", Addr: "127.0.0.1", Runner: Local{}}
	r := runStream(t, Blackout{Rate: 2000, Conns: 3, Binary: self}.Start, client, server, 500*time.Millisecond)
	if r.Sent < 1000 || r.Sent > 5000 || r.Lost != 0 || r.BlockedMS != 0 {
		t.Errorf("%s; want about 2,000 sent in 1 s and none lost on loopback", r.Summary())
	}
	if r.TCPHeld != 3 || r.TCPSurvived != 3 {
		t.Errorf("%d/%d TCP connections survived, want 3/3", r.TCPSurvived, r.TCPHeld)
	}
}

func TestBlackoutValidate(t *testing.T) {
	for _, b := range []Blackout{{Rate: -1}, {Rate: 2e6}, {Size: 8}, {Size: 9000}, {Conns: 100}, {Port: 70000}} {
		if err := b.Validate(); err == nil {
			t.Errorf("%+v: no error", b)
		}
	}
	if err := (Blackout{}).Validate(); err != nil {
		t.Errorf("the defaults: %v", err)
	}
}

// runStream starts a stream, lets it run for d and stops it.
func runStream[R any](t *testing.T, start func(context.Context, Endpoint, Endpoint) (func(context.Context) (R, error), error), client, server Endpoint, d time.Duration) R {
	t.Helper()
	stop, err := start(t.Context(), client, server)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	r, err := stop(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// nftPair is netnsPair for a test that filters with nftables, and this
// test binary, which runs the agents.
func nftPair(t *testing.T) (client, server Endpoint, self string) {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("skipping: nft (nftables) is not installed")
	}
	client, server, _ = netnsPair(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return client, server, self
}

// nftIn loads an nftables script in e's namespace.
func nftIn(t *testing.T, e Endpoint, script string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", e.Runner.(Local).Netns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s", err, out)
	}
}

// TestBlackoutNetns drops everything the server's namespace receives for
// 300 ms in the middle of a stream: the blocked time is the window's, the
// longest gap too, and the held TCP connections survive (TCP retransmits
// through it).
func TestBlackoutNetns(t *testing.T) {
	client, server, self := nftPair(t)
	nft := func(script string) { t.Helper(); nftIn(t, server, script) }
	// A firewall that forgot its states resets the connections instead.
	t.Run("connections reset", func(t *testing.T) {
		stop, err := Blackout{Rate: 500, Conns: 2, Binary: self}.Start(t.Context(), client, server)
		if err != nil {
			t.Fatal(err)
		}
		nft("table inet fwabblackout { chain in { type filter hook input priority 0; meta l4proto tcp reject with tcp reset; }; }")
		time.Sleep(300 * time.Millisecond)
		nft("delete table inet fwabblackout")
		r, err := stop(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if r.TCPHeld != 2 || r.TCPSurvived != 0 || r.Lost != 0 {
			t.Errorf("%s; want 0/2 TCP connections survived and no datagram lost", r.Summary())
		}
	})
	stop, err := Blackout{Rate: 2000, Binary: self}.Start(t.Context(), client, server)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	nft("table inet fwabblackout { chain in { type filter hook input priority 0; policy drop; }; }")
	dropped := time.Now()
	time.Sleep(300 * time.Millisecond)
	nft("delete table inet fwabblackout")
	window := time.Since(dropped)
	time.Sleep(700 * time.Millisecond)
	r, err := stop(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("drop window %v: %s", window, r.Summary())
	ms := float64(window) / float64(time.Millisecond)
	if r.BlockedMS < ms-50 || r.BlockedMS > ms+50 {
		t.Errorf("blocked %.0f ms, want the %.0f ms window ± 50 ms", r.BlockedMS, ms)
	}
	if r.MaxGapMS < ms-50 || r.MaxGapMS > ms+100 {
		t.Errorf("longest gap %.0f ms, want about the %.0f ms window", r.MaxGapMS, ms)
	}
	if r.TCPHeld != 4 || r.TCPSurvived != 4 {
		t.Errorf("%d/%d TCP connections survived a 300 ms drop, want 4/4", r.TCPSurvived, r.TCPHeld)
	}
}

// TestBlackoutSendFreshPorts: with FreshPorts every datagram leaves from
// a source port of its own (a flow of its own for an IPS); without, the
// stream is one flow.
func TestBlackoutSendFreshPorts(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		s := BlackoutSend{ID: "fwab-blackout-00112233", Addr: pc.LocalAddr().String(), Rate: 100, Size: 64, FreshPorts: fresh}
		var out bytes.Buffer
		err = s.Run(ctx, &out)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		ports := map[int]bool{}
		buf := make([]byte, 2048)
		n := 0
		for {
			pc.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				break
			}
			n++
			ports[from.(*net.UDPAddr).Port] = true
		}
		switch {
		case n < 10:
			t.Errorf("fresh %v: %d datagrams arrived in 300 ms at 100/s, want about 30", fresh, n)
		case fresh && len(ports) < n*3/4:
			// The kernel picks each port at random, so a few repeat.
			t.Errorf("fresh ports: %d datagrams from %d source ports, want about one port each", n, len(ports))
		case !fresh && len(ports) != 1:
			t.Errorf("one flow: %d datagrams from %d source ports, want one", n, len(ports))
		}
	}
}
