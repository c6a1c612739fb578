package probe

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Link is a named client and server pair: traffic through its own ports
// of the firewall.
type Link struct {
	Name           string
	Client, Server Endpoint
}

// CPUSides are one link's cores per side, as cpuset lists.
type CPUSides struct {
	Client string `yaml:"client"`
	Server string `yaml:"server"`
}

// CPUsFor is the cores the probe pins each side's iperf3 to on the named
// link: the link's own (LinkCPUs), else, side by side, ClientCPUs and
// ServerCPUs.
func (p Iperf3) CPUsFor(link string) (client, server string) {
	c := p.LinkCPUs[link]
	return cmp.Or(c.Client, p.ClientCPUs), cmp.Or(c.Server, p.ServerCPUs)
}

// LinkSample is one link's figures in a sample that sums several.
type LinkSample struct {
	Name          string  `json:"name"`
	BitsPerSecond float64 `json:"bits_per_second"` // received
	Retransmits   int64   `json:"retransmits"`
	LostPercent   float64 `json:"lost_percent,omitempty"`
	// StartedMS is when its client was launched, after the first link's.
	StartedMS float64 `json:"started_ms"`
	Failed    bool    `json:"failed,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	// Client and Server are the link's own iperf3 reports (JSON), for the
	// record, as a single link's sample keeps its own.
	Client json.RawMessage `json:"client,omitempty"`
	Server json.RawMessage `json:"server,omitempty"`
}

// MaxStartSkew is how far apart the clients of links run together may be
// launched before the sample says their figures overlap less than the
// probe's duration.
const MaxStartSkew = 100 * time.Millisecond

// MeasureLinks runs the probe on every link at once: each link's server is
// started first (armed), then every client together (fired), and the links'
// figures are summed into one sample, each link's own kept in its Links
// with the clients' start skew. The DUT, the power meter and the ping (from
// the first link's client) are watched once, over the whole.
func (p Iperf3) MeasureLinks(ctx context.Context, links []Link, w Watch) Sample {
	s := Sample{Probe: "iperf3", Direction: p.Direction, UDP: p.UDP, Length: p.Length, Parallel: p.Parallel, ClientCPU: -1, ServerCPU: -1, Started: time.Now()}
	defer func() { s.Elapsed = time.Since(s.Started) }()
	if len(links) == 0 {
		s.Failed, s.Reason = true, "no links to measure"
		return s
	}
	if err := p.Validate(); err != nil {
		s.Failed, s.Reason = true, err.Error()
		return s
	}
	p = p.withDefaults()
	s.Direction, s.Parallel = p.Direction, p.Parallel
	arm := newBarrier(len(links))
	// The watch starts as the clients are fired, as a single link's does
	// once its server listens, so that ping and DUT figures cover the load.
	var stop func(*Sample)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		select {
		case <-arm.all:
		case <-ctx.Done():
		}
		stop = startWatch(ctx, links[0].Client, links[0].Server, p, w)
	}()
	each := make([]Sample, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		q := p
		q.ClientCPUs, q.ServerCPUs = p.CPUsFor(l.Name)
		q.arm = arm.seat()
		wg.Go(func() {
			defer q.arm.arrive(ctx) // a link that fails before its client lets the others go
			each[i] = q.Measure(ctx, l.Client, l.Server, Watch{})
		})
	}
	wg.Wait()
	<-watching
	stop(&s)
	s.sumLinks(links, each)
	return s
}

// sumLinks fills s with the sum of the links' samples.
func (s *Sample) sumLinks(links []Link, each []Sample) {
	var first, last time.Time
	sum := &Iperf3Result{Protocol: "TCP", Flow: Flow{}}
	if s.UDP {
		sum.Protocol, sum.UDP = "UDP", &UDPStats{}
	}
	var failed []string
	for i, x := range each {
		ls := LinkSample{Name: links[i].Name, Retransmits: x.Retransmits(), Failed: x.Failed, Reason: x.Reason}
		if json.Valid(x.ClientJSON) {
			ls.Client = x.ClientJSON
		}
		if json.Valid(x.ServerJSON) {
			ls.Server = x.ServerJSON
		}
		for _, w := range x.Warnings {
			s.Warnings = append(s.Warnings, "link "+links[i].Name+": "+w)
		}
		if x.Failed || x.Result == nil {
			failed = append(failed, fmt.Sprintf("link %s: %s", links[i].Name, x.Reason))
			s.Links = append(s.Links, ls)
			continue
		}
		if !x.ClientStarted.IsZero() {
			if first.IsZero() || x.ClientStarted.Before(first) {
				first = x.ClientStarted
			}
			if x.ClientStarted.After(last) {
				last = x.ClientStarted
			}
		}
		r := x.Result
		ls.BitsPerSecond = r.Flow.ReceivedBPS
		sum.Reverse, sum.Bidir, sum.Omit = r.Reverse, r.Bidir, r.Omit
		sum.Seconds = max(sum.Seconds, r.Seconds)
		sum.Streams += r.Streams
		addFlow(&sum.Flow, r.Flow)
		if r.BidirFlow != nil {
			if sum.BidirFlow == nil {
				sum.BidirFlow = &Flow{}
			}
			addFlow(sum.BidirFlow, *r.BidirFlow)
		}
		if u := x.Result.UDP; u != nil && sum.UDP != nil {
			ls.LostPercent = u.LostPercent
			sum.UDP.LostPackets += u.LostPackets
			sum.UDP.Packets += u.Packets
			sum.UDP.JitterMS = max(sum.UDP.JitterMS, u.JitterMS)
		}
		s.ClientCPU, s.ServerCPU = max(s.ClientCPU, x.ClientCPU), max(s.ServerCPU, x.ServerCPU)
		s.EndpointCPUBound = s.EndpointCPUBound || x.EndpointCPUBound
		s.Links = append(s.Links, ls)
	}
	for i := range s.Links {
		if c := each[i].ClientStarted; !c.IsZero() && !first.IsZero() {
			s.Links[i].StartedMS = float64(c.Sub(first)) / float64(time.Millisecond)
		}
	}
	if len(failed) > 0 {
		s.Failed, s.Reason = true, strings.Join(failed, "; ")
		return
	}
	if sum.UDP != nil && sum.UDP.Packets > 0 {
		sum.UDP.LostPercent = 100 * float64(sum.UDP.LostPackets) / float64(sum.UDP.Packets)
	}
	s.Result = sum
	s.StartSkew = last.Sub(first)
	if s.StartSkew > MaxStartSkew {
		s.Warnings = append(s.Warnings, fmt.Sprintf("the links' clients started %v apart (more than %v): they ran together for less than the probe's duration", s.StartSkew.Round(time.Millisecond), MaxStartSkew))
	}
}

// addFlow adds f's rates, bytes and retransmits to sum (-1: unknown in either).
func addFlow(sum *Flow, f Flow) {
	sum.ReceivedBPS += f.ReceivedBPS
	sum.SentBPS += f.SentBPS
	sum.SentBytes += f.SentBytes
	sum.ReceivedBytes += f.ReceivedBytes
	if f.Retransmits >= 0 && sum.Retransmits >= 0 {
		sum.Retransmits += f.Retransmits
	} else {
		sum.Retransmits = -1
	}
}

// barrier holds its seats' holders until every seat has arrived (or
// their context ends).
type barrier struct {
	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{waiting: n, all: make(chan struct{})} }

// seat is one holder's place at a barrier.
type seat struct {
	b    *barrier
	once sync.Once
}

func (b *barrier) seat() *seat { return &seat{b: b} }

// arrive counts the seat once, however often it is called, and waits for
// the others.
func (s *seat) arrive(ctx context.Context) {
	s.once.Do(func() {
		s.b.mu.Lock()
		defer s.b.mu.Unlock()
		if s.b.waiting--; s.b.waiting == 0 {
			close(s.b.all)
		}
	})
	select {
	case <-s.b.all:
	case <-ctx.Done():
	}
}
