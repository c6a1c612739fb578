package probe

import (
	"context"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets this test binary stand in for fwab on an endpoint: a
// Connect probe with Binary set to it runs "BINARY agent ...".
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		// As fwab's main does: SIGTERM ends the agent's context, and
		// the blackout agents report then.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := Agent(ctx, os.Args[2:], os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestRunConnectLoopback(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- ServeConnect(ctx, addr) }()
	r, err := RunConnect(t.Context(), addr, Connect{Duration: time.Second, Parallel: 2})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("server: %v", err)
	}
	if r.Connects < 100 || r.Failures != 0 || r.Parallel != 2 {
		t.Errorf("report %+v: want hundreds of connects on loopback and no failure", r)
	}
	if r.Seconds < 0.9 || r.Seconds > 3 || r.PerSecond < float64(r.Connects)/r.Seconds*0.99 || r.PerSecond > float64(r.Connects)/r.Seconds*1.01 {
		t.Errorf("rate %.0f/s over %.2f s for %d connects: not their quotient", r.PerSecond, r.Seconds, r.Connects)
	}
	m := r.ConnectMS
	if !(m.Min > 0 && m.Min <= m.Median && m.Median <= m.P99 && m.P99 <= m.Max) {
		t.Errorf("connect times %+v are not ordered min ≤ median ≤ p99 ≤ max", m)
	}
}

func TestRunConnectRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	r, err := RunConnect(t.Context(), addr, Connect{Duration: time.Second, Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Connects != 0 || !strings.Contains(r.FirstError, "refused") {
		t.Errorf("report %+v: want no connect and the refusal as first error", r)
	}
}

// The probe through its runners: both ends are this test binary's agent.
func TestConnectMeasure(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	client := Endpoint{Name: "client", Addr: "127.0.0.1", Runner: Local{}}
	server := Endpoint{Name: "server", Addr: "127.0.0.1", Runner: Local{}}
	c := Connect{Duration: time.Second, Parallel: 2, Binary: self}
	s := c.Measure(t.Context(), client, server, Watch{})
	if s.Failed {
		t.Fatalf("failed: %s", s.Reason)
	}
	if s.Probe != ConnectProbe || s.Connect == nil || s.Connect.Connects == 0 || s.Connect.PerSecond <= 0 {
		t.Fatalf("sample %+v: want a connect report with a rate", s)
	}

	t.Run("a taken fixed port fails and names it", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		c := c
		c.Port = ln.Addr().(*net.TCPAddr).Port
		s := c.Measure(t.Context(), client, server, Watch{})
		if !s.Failed || !strings.Contains(s.Reason, "address already in use") {
			t.Errorf("failed %v, reason %q: want the port in use named", s.Failed, s.Reason)
		}
	})
	t.Run("an endpoint without the agent says how to fix it", func(t *testing.T) {
		c := c
		c.Binary = "fwab-not-installed"
		s := c.Measure(t.Context(), client, server, Watch{})
		if !s.Failed || !strings.Contains(s.Reason, "PATH") {
			t.Errorf("failed %v, reason %q: want the missing agent and the fix", s.Failed, s.Reason)
		}
	})
	t.Run("nobody answering is a failed sample, not a zero rate", func(t *testing.T) {
		c := c
		c.Duration = time.Second
		s := c.Measure(t.Context(), client, Endpoint{Name: "server", Addr: "127.0.0.1", Runner: noListen{Local{}}}, Watch{})
		if !s.Failed || !strings.Contains(s.Reason, "could not open one connection") {
			t.Errorf("failed %v, reason %q: want no connection named", s.Failed, s.Reason)
		}
	})
}

// noListen runs a server that does not listen: a sleep in place of the
// agent.
type noListen struct{ Local }

func (n noListen) Start(ctx context.Context, _ []string) (Process, error) {
	return n.Local.Start(ctx, []string{"sleep", "30"})
}
