package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fwab/fwab/internal/freeport"
	"github.com/fwab/fwab/probe/smartplug"
)

// scripted is a Runner that answers from fixtures: "iperf3 -s" starts a
// server that prints serverOut once a client has run (or at once when
// exitNow), "iperf3 -c" prints clientOut.
type scripted struct {
	t         *testing.T
	serverOut []byte
	clientOut []byte
	exitNow   bool

	mu         sync.Mutex
	calls      [][]string
	clients    chan struct{}
	clientOnce sync.Once
}

func newScripted(t *testing.T, serverFixture, clientFixture string) *scripted {
	s := &scripted{t: t, clients: make(chan struct{})}
	if serverFixture != "" {
		s.serverOut = fixture(t, serverFixture)
	}
	if clientFixture != "" {
		s.clientOut = fixture(t, clientFixture)
	}
	return s
}

func (s *scripted) record(argv []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, slices.Clone(argv))
}

func (s *scripted) Run(_ context.Context, argv []string) ([]byte, error) {
	s.record(argv)
	if slices.Contains(argv, "-c") {
		s.clientOnce.Do(func() { close(s.clients) })
		return s.clientOut, nil
	}
	return []byte("iperf 3.12\n"), nil
}

func (s *scripted) Start(_ context.Context, argv []string) (Process, error) {
	s.record(argv)
	p := &fakeProcess{done: make(chan struct{}), out: s.serverOut}
	go func() {
		if !s.exitNow {
			select {
			case <-s.clients:
			case <-p.killed():
			}
		}
		close(p.done)
	}()
	return p, nil
}

type fakeProcess struct {
	done     chan struct{}
	out      []byte
	killOnce sync.Once
	kill     chan struct{}
	mu       sync.Mutex
}

func (p *fakeProcess) killed() chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kill == nil {
		p.kill = make(chan struct{})
	}
	return p.kill
}
func (p *fakeProcess) Done() <-chan struct{} { return p.done }
func (p *fakeProcess) Wait() ([]byte, error) { <-p.done; return p.out, nil }
func (p *fakeProcess) Kill() error {
	k := p.killed()
	p.killOnce.Do(func() { close(k) })
	return nil
}

func TestIperf3FromFixtures(t *testing.T) {
	tests := []struct {
		name           string
		probe          Iperf3
		server, client string
		wantFailed     string // substring of Reason; empty: must succeed
		wantBound      bool
		wantBPS        float64
		wantClientArgs []string
	}{
		{
			name:   "upload, server CPU over threshold",
			probe:  Iperf3{Duration: 2 * time.Second, CPUBoundPercent: 50},
			server: "iperf3/server-tcp-up.json", client: "iperf3/tcp-up.json",
			wantBound: true, wantBPS: 19815461086.93048,
			wantClientArgs: []string{"-c", "198.19.1.10", "-J", "-t", "2"},
		},
		{
			name:   "upload under threshold",
			probe:  Iperf3{Duration: 2 * time.Second},
			server: "iperf3/server-tcp-up.json", client: "iperf3/tcp-up.json",
			wantBPS: 19815461086.93048,
		},
		{
			name:   "download with omit and streams",
			probe:  Iperf3{Direction: Down, Duration: 2 * time.Second, Omit: time.Second, Parallel: 4, CPUAffinity: "0,1"},
			server: "iperf3/server-tcp-down.json", client: "iperf3/tcp-down.json",
			wantBPS:        12144206851.599333,
			wantClientArgs: []string{"-R", "-O", "1", "-P", "4", "-A", "0,1"},
		},
		{
			name:   "udp",
			probe:  Iperf3{UDP: true, Bitrate: "100M", Length: 1200, Duration: 2 * time.Second, Window: "4M"},
			server: "iperf3/server-udp.json", client: "iperf3/udp.json",
			wantBPS:        99969106.08610104,
			wantClientArgs: []string{"-u", "-b", "100M", "-l", "1200", "-w", "4M"},
		},
		{
			name:   "client report truncated",
			probe:  Iperf3{Duration: 2 * time.Second},
			server: "iperf3/server-tcp-up.json", client: "iperf3/damaged-truncated.json",
			wantFailed: "truncated",
		},
		{
			name:   "server from another test answered",
			probe:  Iperf3{Duration: 2 * time.Second},
			server: "iperf3/server-tcp-down.json", client: "iperf3/tcp-up.json",
			wantFailed: "not the one this probe started",
		},
		{
			name:   "client cannot connect",
			probe:  Iperf3{Duration: 2 * time.Second, ConnectTimeout: time.Millisecond},
			server: "iperf3/server-tcp-up.json", client: "iperf3/error-refused.json",
			wantFailed: "cannot reach 198.19.1.10 port",
		},
		{
			name:       "invalid setting",
			probe:      Iperf3{UDP: true},
			wantFailed: "without a bitrate",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newScripted(t, tt.server, tt.client)
			client := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}
			server := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
			tt.probe.StartGrace = 10 * time.Millisecond
			s := tt.probe.Run(t.Context(), client, server)
			if tt.wantFailed != "" {
				if !s.Failed || !strings.Contains(s.Reason, tt.wantFailed) {
					t.Fatalf("Run() failed=%v reason %q, want failed with %q", s.Failed, s.Reason, tt.wantFailed)
				}
				return
			}
			if s.Failed {
				t.Fatalf("Run() failed: %s", s.Reason)
			}
			if s.Elapsed <= 0 || s.Started.IsZero() {
				t.Errorf("Started %v, Elapsed %v: want the probe's start and wall time", s.Started, s.Elapsed)
			}
			if got := s.BitsPerSecond(); got != tt.wantBPS {
				t.Errorf("BitsPerSecond() = %v, want %v", got, tt.wantBPS)
			}
			if s.EndpointCPUBound != tt.wantBound {
				t.Errorf("EndpointCPUBound = %v, want %v (client CPU %.1f, server CPU %.1f, warnings %q)", s.EndpointCPUBound, tt.wantBound, s.ClientCPU, s.ServerCPU, s.Warnings)
			}
			if s.ServerResult == nil || s.ServerResult.Cookie != s.Result.Cookie {
				t.Errorf("server report not read or not matched: %+v", s.ServerResult)
			}
			var clientArgv, serverArgv []string
			for _, c := range r.calls {
				if slices.Contains(c, "-c") {
					clientArgv = c
				}
				if slices.Contains(c, "-s") {
					serverArgv = c
				}
			}
			joined := " " + strings.Join(clientArgv, " ") + " "
			for i := 0; i+1 < len(tt.wantClientArgs); i += 2 {
				pair := " " + tt.wantClientArgs[i] + " " + tt.wantClientArgs[i+1] + " "
				if !strings.Contains(joined, pair) && !strings.Contains(joined, " "+tt.wantClientArgs[i]+" ") {
					t.Errorf("client argv %q lacks %q", clientArgv, pair)
				}
			}
			wantServer := fmt.Sprintf("iperf3 -s -1 -J -p %d", s.Port)
			if !strings.HasPrefix(strings.Join(serverArgv, " "), wantServer) || !slices.Contains(serverArgv, "198.19.1.10") {
				t.Errorf("server argv %q, want it to start with %q and bind 198.19.1.10", serverArgv, wantServer)
			}
		})
	}
}

func TestIperf3ServerFailsAtOnce(t *testing.T) {
	tests := []struct {
		name       string
		server     string
		port       int
		wantReason string
	}{
		{"address not on the host", "iperf3/server-cannot-assign.json", 0, "that address is not on the host"},
		{"fixed port taken", "iperf3/server-port-in-use.json", 5201, "port 5201 is in use on server"},
		{"every fresh port taken", "iperf3/server-port-in-use.json", 0, "no free port on server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newScripted(t, tt.server, "iperf3/tcp-up.json")
			r.exitNow = true
			client := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: r}
			server := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
			s := Iperf3{Duration: time.Second, Port: tt.port, StartGrace: time.Second}.Run(t.Context(), client, server)
			if !s.Failed || !strings.Contains(s.Reason, tt.wantReason) {
				t.Fatalf("Run() failed=%v reason %q, want failed with %q", s.Failed, s.Reason, tt.wantReason)
			}
			for _, c := range r.calls {
				if slices.Contains(c, "-c") {
					t.Errorf("client ran (%q) although the server never listened", c)
				}
			}
		})
	}
}

func TestIperf3Validate(t *testing.T) {
	tests := []struct {
		p    Iperf3
		want string // empty: valid
	}{
		{Iperf3{}, ""},
		{Iperf3{Direction: Bidir, Parallel: 4, Duration: 30 * time.Second, Omit: 5 * time.Second, CPUAffinity: "1,3"}, ""},
		{Iperf3{UDP: true, Bitrate: "1G", Length: 64}, ""},
		{Iperf3{Direction: "sideways"}, `direction "sideways"`},
		{Iperf3{Parallel: 500}, "parallel 500"},
		{Iperf3{Duration: 1500 * time.Millisecond}, "whole seconds"},
		{Iperf3{Duration: 100 * time.Millisecond}, "whole seconds from 1s"},
		{Iperf3{UDP: true, Bitrate: "1G", Length: 70000}, "length 70000"},
		{Iperf3{UDP: true, Bitrate: "1G", Length: 8}, "at least 16 bytes"},
		{Iperf3{Bitrate: "fast"}, `bitrate "fast"`},
		{Iperf3{Bitrate: "1G; reboot"}, `bitrate "1G; reboot"`},
		{Iperf3{CPUAffinity: "0-3"}, `affinity "0-3"`},
		{Iperf3{UDP: true, Bitrate: "1G", Window: "4M"}, ""},
		{Iperf3{Window: "4 MB"}, `window "4 MB"`},
		{Iperf3{Window: "600M"}, `window "600M"`},
		{Iperf3{Window: "512"}, `window "512"`},
		{Iperf3{Port: 70000}, "port 70000"},
		{Iperf3{PortRange: [2]int{30000, 20000}}, "port range"},
	}
	for _, tt := range tests {
		err := tt.p.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Validate(%+v) = %v, want nil", tt.p, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Validate(%+v) = %v, want an error containing %q", tt.p, err, tt.want)
		}
	}
}

// loopback endpoints: real iperf3 on 127.0.0.1, no namespaces.
func loopback(t *testing.T) (client, server Endpoint) {
	t.Helper()
	if _, err := (Local{}).Run(t.Context(), []string{"iperf3", "--version"}); err != nil {
		t.Skipf("iperf3 is not installed here (%v): apt-get install iperf3", err)
	}
	return Endpoint{Name: "client", Addr: "127.0.0.1", Runner: Local{}}, Endpoint{Name: "server", Addr: "127.0.0.1", Runner: Local{}}
}

// A window above what the kernel grants fails the probe with the limit to
// raise named, on a real iperf3.
func TestIperf3WindowRefused(t *testing.T) {
	client, server := loopback(t)
	raw, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Skipf("no net.core.rmem_max to exceed here: %v", err)
	}
	max, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || 4*max > maxWindow {
		t.Skipf("net.core.rmem_max is %q: no window iperf3 takes exceeds it", raw)
	}
	p := Iperf3{UDP: true, Bitrate: "10M", Duration: time.Second, Window: strconv.FormatInt(4*max/1024, 10) + "K"}
	s := p.Run(t.Context(), client, server)
	if !s.Failed || !strings.Contains(s.Reason, "net.core.rmem_max") {
		t.Fatalf("window %s over rmem_max %d: failed=%v reason %q, want a failure naming net.core.rmem_max", p.Window, max, s.Failed, s.Reason)
	}
}

func TestIperf3Loopback(t *testing.T) {
	client, server := loopback(t)
	tests := []struct {
		name  string
		probe Iperf3
		check func(t *testing.T, s Sample)
	}{
		{"tcp up", Iperf3{Duration: time.Second}, func(t *testing.T, s Sample) {
			if s.Result.Reverse || s.Result.Protocol != "TCP" {
				t.Errorf("reverse %v protocol %s, want false TCP", s.Result.Reverse, s.Result.Protocol)
			}
			if s.Result.RTT == nil {
				t.Errorf("no RTT from a Linux TCP sender")
			}
		}},
		{"tcp down", Iperf3{Direction: Down, Duration: time.Second}, func(t *testing.T, s Sample) {
			if !s.Result.Reverse {
				t.Errorf("reverse = false for a download")
			}
		}},
		{"tcp bidir, 2 streams, omit 1", Iperf3{Direction: Bidir, Parallel: 2, Omit: time.Second, Duration: time.Second}, func(t *testing.T, s Sample) {
			if s.Result.BidirFlow == nil || s.Result.BidirFlow.ReceivedBPS <= 0 {
				t.Errorf("bidir flow = %+v, want traffic", s.Result.BidirFlow)
			}
			if s.Result.Streams != 2 {
				t.Errorf("streams = %d, want 2", s.Result.Streams)
			}
		}},
		{"udp 50M, 1000-byte datagrams", Iperf3{UDP: true, Bitrate: "50M", Length: 1000, Duration: time.Second}, func(t *testing.T, s Sample) {
			if bps := s.BitsPerSecond(); bps < 10e6 || bps > 60e6 {
				t.Errorf("UDP at 50M received %v bit/s, want 10M..60M", bps)
			}
			if s.Result.UDP == nil {
				t.Errorf("no UDP loss figures")
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.probe.Run(t.Context(), client, server)
			if s.Failed {
				t.Fatalf("Run() failed: %s (warnings %q)", s.Reason, s.Warnings)
			}
			if s.BitsPerSecond() <= 0 || s.ClientCPU < 0 || s.ServerCPU < 0 {
				t.Errorf("bits/s %v client CPU %v server CPU %v, want all known", s.BitsPerSecond(), s.ClientCPU, s.ServerCPU)
			}
			if s.ServerResult == nil {
				t.Errorf("server report missing (warnings %q)", s.Warnings)
			}
			if s.Port < 20000 || s.Port > 29999 {
				t.Errorf("port %d outside the default range", s.Port)
			}
			if len(s.Result.Intervals) == 0 {
				t.Errorf("no intervals")
			}
			tt.check(t, s)
		})
	}
}

func TestIperf3CPUBoundFlag(t *testing.T) {
	client, server := loopback(t)
	for _, tc := range []struct {
		threshold float64
		want      bool
	}{{0.0001, true}, {1e6, false}} {
		s := Iperf3{Duration: time.Second, CPUBoundPercent: tc.threshold}.Run(t.Context(), client, server)
		if s.Failed {
			t.Fatalf("Run() failed: %s", s.Reason)
		}
		if s.EndpointCPUBound != tc.want {
			t.Errorf("threshold %v%%: EndpointCPUBound = %v, want %v (client %.1f%%, server %.1f%%)", tc.threshold, s.EndpointCPUBound, tc.want, s.ClientCPU, s.ServerCPU)
		}
	}
}

// busyPort holds a TCP port on 127.0.0.1 until the test ends.
func busyPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

func TestIperf3PortInUse(t *testing.T) {
	client, server := loopback(t)
	busy := busyPort(t)

	t.Run("fixed port", func(t *testing.T) {
		s := Iperf3{Duration: time.Second, Port: busy}.Run(t.Context(), client, server)
		want := fmt.Sprintf("port %d is in use on server", busy)
		if !s.Failed || !strings.Contains(s.Reason, want) {
			t.Fatalf("Run() failed=%v reason %q, want %q", s.Failed, s.Reason, want)
		}
	})
	t.Run("fresh port moves on", func(t *testing.T) {
		free := freeport.TCP(t)
		ports := []int{busy, free}
		var n atomic.Int32
		orig := nextPort
		nextPort = func(lo, hi int) int { return ports[min(int(n.Add(1))-1, 1)] }
		t.Cleanup(func() { nextPort = orig })
		s := Iperf3{Duration: time.Second}.Run(t.Context(), client, server)
		if s.Failed {
			t.Fatalf("Run() failed: %s", s.Reason)
		}
		if s.Port != free || !containsSub(s.Warnings, fmt.Sprintf("port %d in use", busy)) {
			t.Errorf("port %d warnings %q, want port %d after a warning about %d", s.Port, s.Warnings, free, busy)
		}
	})
}

func TestIperf3EndpointFailures(t *testing.T) {
	client, server := loopback(t)
	noIperf := Local{Path: t.TempDir()}
	tests := []struct {
		name           string
		client, server Endpoint
		probe          Iperf3
		want           string
	}{
		{"iperf3 missing on client", Endpoint{Name: "client", Addr: "127.0.0.1", Runner: noIperf}, server, Iperf3{Duration: time.Second}, "iperf3 is not installed on client"},
		{"iperf3 missing on server", client, Endpoint{Name: "server", Addr: "127.0.0.1", Runner: noIperf}, Iperf3{Duration: time.Second}, "iperf3 is not installed on server"},
		{"iperf3 missing behind a shell", client, Endpoint{Name: "server", Addr: "127.0.0.1", Runner: ShellRunner{Shell: shShell{path: t.TempDir()}}}, Iperf3{Duration: time.Second}, "apt-get install iperf3"},
		{"nothing listens", client, Endpoint{Name: "server", Addr: "127.0.0.1", Runner: sleeper{}}, Iperf3{Duration: time.Second, ConnectTimeout: time.Second}, "cannot reach 127.0.0.1 port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			s := tt.probe.Run(t.Context(), tt.client, tt.server)
			if !s.Failed || !strings.Contains(s.Reason, tt.want) {
				t.Fatalf("Run() failed=%v reason %q, want %q", s.Failed, s.Reason, tt.want)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("failure took %v, want it quick", d)
			}
		})
	}
	t.Run("check refuses before anything runs", func(t *testing.T) {
		err := Iperf3{}.Check(t.Context(), Endpoint{Name: "client", Addr: "127.0.0.1", Runner: noIperf}, server)
		if err == nil || !strings.Contains(err.Error(), "iperf3 is not installed on client") {
			t.Errorf("Check() = %v, want iperf3 missing on client", err)
		}
		if err := (Iperf3{}).Check(t.Context(), client, server); err != nil {
			t.Errorf("Check() on loopback = %v, want nil", err)
		}
	})
}

// sleeper starts a process that never listens in place of an iperf3 server.
type sleeper struct{}

func (sleeper) Run(ctx context.Context, argv []string) ([]byte, error) {
	return Local{}.Run(ctx, argv)
}
func (sleeper) Start(ctx context.Context, argv []string) (Process, error) {
	return Local{}.Start(ctx, []string{"sleep", "30"})
}

func TestIperf3Watch(t *testing.T) {
	client, server := loopback(t)
	plug := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"StatusSNS":{"ENERGY":{"Power":23.5,"Voltage":231}}}`)
	}))
	t.Cleanup(plug.Close)
	var reads atomic.Int32
	w := Watch{
		DUT: func(ctx context.Context) (DUTMetrics, error) {
			n := reads.Add(1)
			if n == 2 {
				return DUTMetrics{}, errors.New("ssh: timeout")
			}
			return DUTMetrics{Time: time.Now(), CPUPercent: float64(n)}, nil
		},
		DUTEvery:   200 * time.Millisecond,
		Power:      smartplug.Meter{URL: plug.URL + "/cm?cmnd=Status%208", Path: "StatusSNS.ENERGY.Power"},
		PowerEvery: 300 * time.Millisecond,
		Ping:       true,
	}
	s := Iperf3{Duration: 2 * time.Second}.Measure(t.Context(), client, server, w)
	if s.Failed {
		t.Fatalf("Measure() failed: %s", s.Reason)
	}
	if len(s.DUT) < 3 || !containsSub(s.Warnings, "DUT metrics: 1 of") {
		t.Errorf("DUT series %d values, warnings %q; want >= 3 values and one failed read noted", len(s.DUT), s.Warnings)
	}
	for i := 1; i < len(s.DUT); i++ {
		if !s.DUT[i].Time.After(s.DUT[i-1].Time) {
			t.Errorf("DUT series out of order at %d", i)
		}
	}
	if len(s.Power) < 2 || s.Power[0].Watts != 23.5 {
		t.Errorf("power series = %+v, want >= 2 readings of 23.5 W", s.Power)
	}
	if s.Ping == nil {
		t.Fatalf("no ping under load (warnings %q)", s.Warnings)
	}
	if s.Ping.Transmitted < 5 || s.Ping.Received == 0 || s.Ping.Avg <= 0 {
		t.Errorf("ping under load = %+v, want >= 5 sent, replies, a positive average", *s.Ping)
	}
}

func TestCPULimit(t *testing.T) {
	tests := []struct {
		version  string
		parallel int
		want     float64
	}{
		{"iperf 3.12", 4, 90},
		{"iperf 3.16", 1, 90},
		{"iperf 3.16", 4, 360},
		{"iperf 3.17.1", 2, 180},
		{"iperf 4.0", 2, 180},
		{"", 4, 90},
		{"iperf 3.x", 4, 90},
	}
	for _, tt := range tests {
		if got := cpuLimit(tt.version, tt.parallel, 90); got != tt.want {
			t.Errorf("cpuLimit(%q, %d, 90) = %v, want %v", tt.version, tt.parallel, got, tt.want)
		}
	}
}

// hangingClient is a scripted runner whose client never finishes.
type hangingClient struct{ *scripted }

func (h hangingClient) Run(ctx context.Context, argv []string) ([]byte, error) {
	if slices.Contains(argv, "-c") {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.scripted.Run(ctx, argv)
}

func TestIperf3ClientStalls(t *testing.T) {
	orig := clientGrace
	clientGrace = 100 * time.Millisecond
	t.Cleanup(func() { clientGrace = orig })
	r := newScripted(t, "iperf3/server-tcp-up.json", "")
	client := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: hangingClient{r}}
	server := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: r}
	start := time.Now()
	s := Iperf3{Duration: time.Second, ConnectTimeout: 100 * time.Millisecond, StartGrace: 10 * time.Millisecond}.Run(t.Context(), client, server)
	if !s.Failed || !strings.Contains(s.Reason, "did not finish within") {
		t.Fatalf("Run() failed=%v reason %q, want a stall", s.Failed, s.Reason)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stalled probe took %v to give up", d)
	}
}

func TestSenderReceiverCPU(t *testing.T) {
	for _, tt := range []struct {
		d                Direction
		sender, receiver float64
	}{{Up, 10, 20}, {Bidir, 10, 20}, {Down, 20, 10}} {
		s := Sample{Direction: tt.d, ClientCPU: 10, ServerCPU: 20}
		if s.SenderCPU() != tt.sender || s.ReceiverCPU() != tt.receiver {
			t.Errorf("%s: sender %v receiver %v, want %v %v", tt.d, s.SenderCPU(), s.ReceiverCPU(), tt.sender, tt.receiver)
		}
	}
}

// versioned answers iperf3 --version with its version and runs the rest
// like scripted.
type versioned struct {
	*scripted
	version string
}

func (v versioned) Run(ctx context.Context, argv []string) ([]byte, error) {
	if slices.Contains(argv, "--version") {
		return []byte(v.version + " (cJSON 1.7.15)\nLinux lab 6.1.0 #1 SMP x86_64\n"), nil
	}
	return v.scripted.Run(ctx, argv)
}

// TestIperf3VersionChecks: an iperf3 too old for an option the probe
// passes is refused before the sweep, naming the version found and the one
// needed; several streams on an iperf3 before 3.16 are flagged on the
// sample.
func TestIperf3VersionChecks(t *testing.T) {
	for _, tc := range []struct {
		probe          Iperf3
		client, server string
		want           string // "" for accepted
	}{
		{Iperf3{}, "iperf 3.12", "iperf 3.12", ""},
		{Iperf3{}, "iperf 3.12", "iperf 3.9", "iperf 3.9, too old for --idle-timeout"},
		{Iperf3{Direction: Bidir}, "iperf 3.6", "iperf 3.12", "iperf 3.6, too old for --bidir"},
		{Iperf3{Direction: Bidir}, "iperf 3.7", "iperf 3.12", ""},
		{Iperf3{Direction: Down}, "iperf 3.6", "iperf 3.10", ""},
		{Iperf3{UDP: true, Bitrate: "1G", Counters64: true}, "iperf 3.0.11", "iperf 3.12", "iperf 3.0.11, too old for --connect-timeout"},
	} {
		sc := newScripted(t, "iperf3/server-tcp-up.json", "iperf3/tcp-up.json")
		client := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: versioned{sc, tc.client}}
		server := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: versioned{sc, tc.server}}
		err := tc.probe.Check(t.Context(), client, server)
		switch {
		case tc.want == "" && err != nil && strings.Contains(err.Error(), "too old"):
			t.Errorf("%+v with client %s, server %s: %v, want accepted", tc.probe, tc.client, tc.server, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "or later")):
			t.Errorf("%+v with client %s, server %s: %v, want refused with %q and the version needed", tc.probe, tc.client, tc.server, err, tc.want)
		}
	}

	sc := newScripted(t, "iperf3/server-tcp-up.json", "iperf3/tcp-up.json")
	s := Iperf3{Parallel: 4, Duration: 2 * time.Second}.Run(t.Context(), Endpoint{Name: "client", Addr: "198.18.1.10", Runner: sc}, Endpoint{Name: "server", Addr: "198.19.1.10", Runner: sc})
	if s.Failed {
		t.Fatal(s.Reason)
	}
	if s.Result.Version == "" || iperfAtLeast(s.Result.Version, 3, 16) {
		t.Fatalf("fixture iperf3 %q: want one before 3.16", s.Result.Version)
	}
	if !slices.ContainsFunc(s.Warnings, func(w string) bool { return strings.Contains(w, "one thread") }) {
		t.Errorf("4 streams on %s: warnings %q, want the single thread flagged", s.Result.Version, s.Warnings)
	}
}
