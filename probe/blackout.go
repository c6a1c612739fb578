package probe

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Blackout measures the traffic a change drops while it is applied, as
// FD.io CSIT measures a reconfiguration's "effective blocked time": a
// steady stream of numbered UDP datagrams runs from client to server
// through the firewall from just before the change is written until
// traffic passes again after it, and the time blocked is the datagrams
// lost divided by the rate. A few TCP connections are held open across
// the change, to tell whether established sessions survive it.
//
// Both ends run fwab's own agent (blackout-recv and blackout-send), not
// iperf3: iperf3's UDP mode counts lost and reordered datagrams but
// reports gaps no finer than its 0.1 s interval, and it stops only at the
// end of a fixed duration, where an apply takes as long as it takes.
type Blackout struct {
	Rate  float64 // datagrams a second; default 1000 (a 1 ms resolution)
	Size  int     // UDP payload bytes; default 64
	Conns int     // TCP connections held across the change; 0 is 4, -1 none
	// Port is the server port (UDP and TCP); zero picks one in
	// 30000..34999 (a canary's are 35000..39998).
	Port int
	// Binary runs fwab's agent on an endpoint, as Connect.Binary.
	Binary string
}

// BlackoutResult is what one stream saw.
type BlackoutResult struct {
	// Rate is the datagrams a second sent: the stream's, or what the
	// sender achieved where it fell more than 5 % behind.
	Rate      float64 `json:"rate_pps"`
	Seconds   float64 `json:"seconds"`   // how long the stream ran
	Sent      uint64  `json:"sent"`      // datagrams sent after the first that arrived
	Received  uint64  `json:"received"`  // of them, arrived (once each)
	Lost      uint64  `json:"lost"`      // Sent - Received
	Reordered uint64  `json:"reordered"` // arrived after a later one
	// BlockedMS is Lost / Rate: the time the firewall passed nothing,
	// had it dropped in one piece.
	BlockedMS float64 `json:"blackout_ms"`
	// MaxGapMS is the longest time between two datagrams arriving, the
	// tail after the last one included.
	MaxGapMS    float64 `json:"max_gap_ms"`
	TCPHeld     int     `json:"tcp_held"`     // connections open when the change began
	TCPSurvived int     `json:"tcp_survived"` // of them, still passing data at its end
}

// Summary is the result in a line: "blocked 230 ms (230 of 5,400
// datagrams lost), longest gap 231 ms, 4/4 TCP connections survived".
func (r BlackoutResult) Summary() string {
	s := fmt.Sprintf("blocked %.0f ms (%d of %d datagrams lost), longest gap %.0f ms", r.BlockedMS, r.Lost, r.Sent, r.MaxGapMS)
	if r.TCPHeld > 0 {
		s += fmt.Sprintf(", %d/%d TCP connections survived", r.TCPSurvived, r.TCPHeld)
	}
	return s
}

func (b Blackout) withDefaults() Blackout {
	if b.Rate == 0 {
		b.Rate = 1000
	}
	if b.Size == 0 {
		b.Size = 64
	}
	if b.Conns == 0 {
		b.Conns = 4
	}
	return b
}

// Validate reports a setting the agent would refuse.
func (b Blackout) Validate() error {
	switch {
	case b.Rate != 0 && (b.Rate < 1 || b.Rate > 1e6) || math.IsNaN(b.Rate):
		return fmt.Errorf("blackout rate %g datagrams/s: use 1 to 1,000,000", b.Rate)
	case b.Size != 0 && (b.Size < blackoutHeader || b.Size > 1472):
		return fmt.Errorf("blackout size %d bytes: use %d to 1472 (one frame)", b.Size, blackoutHeader)
	case b.Conns < -1 || b.Conns > 64:
		return fmt.Errorf("blackout conns %d: use 0 to 64, or -1 for none", b.Conns)
	case b.Port < 0 || b.Port > 65535:
		return fmt.Errorf("blackout port %d: use 1 to 65535, or 0 for a fresh port", b.Port)
	}
	return nil
}

// startDelay is how long the stream runs before Start returns and the
// change may begin.
const startDelay = 500 * time.Millisecond

// blackoutLife bounds how long the agents run if fwab never stops them
// (its session lost): longer than any apply fwab waits for.
const blackoutLife = 2 * time.Hour

// Start starts the stream from client to server and returns once it
// flows; stop ends it and reports what arrived. A stream that cannot
// start is an error and nothing is left running.
func (b Blackout) Start(ctx context.Context, client, server Endpoint) (stop func(context.Context) (BlackoutResult, error), err error) {
	b = b.withDefaults()
	if err := b.Validate(); err != nil {
		return nil, err
	}
	s, err := startStream(ctx, client, server, stream{what: "blackout", rate: b.Rate, size: b.Size, conns: b.Conns, port: b.Port, binary: b.Binary})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (BlackoutResult, error) {
		st, rt, err := s(ctx)
		if err != nil {
			return BlackoutResult{}, err
		}
		return blackoutResult(b.Rate, st, rt)
	}, nil
}

// stream is one run of the agents' numbered datagrams (blackout-send to
// blackout-recv): what names it in errors, its rate, datagram size, held
// connections and payload (hex, after the header).
type stream struct {
	what        string
	rate        float64
	size, conns int
	port        int
	binary      string
	payload     string
	fresh       bool // a new source port for each datagram
}

// startStream starts the stream and returns once it has run startDelay;
// stop ends both agents and returns their reports.
func startStream(ctx context.Context, client, server Endpoint, s stream) (stop func(context.Context) (blackoutSent, blackoutReceived, error), err error) {
	if client.Runner == nil || server.Runner == nil || server.Addr == "" {
		return nil, fmt.Errorf("%s: the client and server endpoints need a way to run commands, and the server an address", s.what)
	}
	var raw [6]byte
	rand.Read(raw[:])
	id := "fwab-blackout-" + hex.EncodeToString(raw[:])
	port := s.port
	if port == 0 {
		port = nextPort(30000, 34999)
	}
	addr := net.JoinHostPort(server.Addr, strconv.Itoa(port))
	c := Connect{Binary: s.binary}
	life := blackoutLife.String()
	recv, err := server.Runner.Start(ctx, c.agent(server, "blackout-recv", "--id", id, "--listen", addr, "--for", life))
	if err != nil {
		return nil, fmt.Errorf("%s receiver: %s", s.what, agentError(server, err))
	}
	select {
	case <-recv.Done():
		out, err := recv.Wait()
		if err != nil {
			return nil, fmt.Errorf("%s receiver: %s", s.what, agentError(server, err))
		}
		return nil, fmt.Errorf("%s receiver on %s ended at once: %s", s.what, server, excerpt(out))
	case <-time.After(300 * time.Millisecond):
	}
	args := []string{"--id", id, "--to", addr, "--for", life,
		"--rate", strconv.FormatFloat(s.rate, 'f', -1, 64), "--size", strconv.Itoa(s.size), "--conns", strconv.Itoa(s.conns)}
	if s.payload != "" {
		args = append(args, "--payload", s.payload)
	}
	if s.fresh {
		args = append(args, "--fresh-ports")
	}
	send, err := client.Runner.Start(ctx, c.agent(client, append([]string{"blackout-send"}, args...)...))
	if err != nil {
		recv.Kill()
		return nil, fmt.Errorf("%s sender: %s", s.what, agentError(client, err))
	}
	// The agents stop on SIGTERM and report; pkill finds them by their
	// id. The pattern's [x] keeps it from matching any process whose
	// command line holds the pattern itself (a shell running the pkill).
	// A stop whose context has ended (Ctrl-C) still stops them, within
	// a few seconds.
	term := func(ctx context.Context, e Endpoint, role string) {
		pattern := "blackout-" + role[:len(role)-1] + "[" + role[len(role)-1:] + "] --id " + id
		e.Runner.Run(ctx, []string{"pkill", "-TERM", "-f", pattern})
	}
	// Half a second of stream before the change (startDelay): the first
	// datagrams wait for ARP and the firewall's first state.
	select {
	case <-send.Done():
		out, err := send.Wait()
		recv.Kill()
		if err != nil {
			return nil, fmt.Errorf("%s sender: %s", s.what, agentError(client, err))
		}
		return nil, fmt.Errorf("%s sender on %s ended at once: %s", s.what, client, excerpt(out))
	case <-time.After(startDelay):
	}
	return func(ctx context.Context) (blackoutSent, blackoutReceived, error) {
		defer recv.Kill()
		defer send.Kill()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		term(ctx, client, "send")
		sout, serr := waitFor(ctx, send, 10*time.Second)
		// The datagrams still in flight arrive before the receiver stops.
		time.Sleep(200 * time.Millisecond)
		term(ctx, server, "recv")
		rout, rerr := waitFor(ctx, recv, 10*time.Second)
		var st blackoutSent
		var rt blackoutReceived
		if err := errors.Join(serr, rerr); err != nil {
			return st, rt, fmt.Errorf("%s stream: %w", s.what, err)
		}
		if err := json.Unmarshal(sout, &st); err != nil {
			return st, rt, fmt.Errorf("%s sender on %s wrote no report (%v): %s", s.what, client, err, excerpt(sout))
		}
		if err := json.Unmarshal(rout, &rt); err != nil {
			return st, rt, fmt.Errorf("%s receiver on %s wrote no report (%v): %s", s.what, server, err, excerpt(rout))
		}
		return st, rt, nil
	}, nil
}

// waitFor waits for p's report, killing it after d.
func waitFor(ctx context.Context, p Process, d time.Duration) ([]byte, error) {
	select {
	case <-p.Done():
	case <-time.After(d):
		p.Kill()
	case <-ctx.Done():
		p.Kill()
	}
	return p.Wait()
}

// blackoutResult puts the two agents' reports together.
func blackoutResult(rate float64, st blackoutSent, rt blackoutReceived) (BlackoutResult, error) {
	if rt.Received == 0 {
		return BlackoutResult{}, fmt.Errorf("none of the %d datagrams arrived: the stream never passed the firewall (check the route between the endpoints)", st.Sent)
	}
	// A sender that fell behind its rate (a busy endpoint, a high share
	// of the throughput) sent its datagrams further apart: each lost one
	// is that much longer a blackout.
	if st.Seconds > 0 {
		if achieved := float64(st.Sent) / st.Seconds; achieved < 0.95*rate {
			rate = achieved
		}
	}
	// Start gives the stream startDelay before the change begins. A first
	// arrival later than that came after the change had begun, and the
	// loss before it cannot be told from start-up: no figure.
	if late := float64(rt.First) / rate; late > startDelay.Seconds() {
		return BlackoutResult{}, fmt.Errorf("the first datagram to arrive was number %d, %.1f s into the stream: it did not pass the firewall before the change began, so the change's blackout is unknown", rt.First, late)
	}
	r := BlackoutResult{Rate: rate, Seconds: st.Seconds, Received: rt.Received, Reordered: rt.Reordered, TCPHeld: st.TCPHeld, TCPSurvived: st.TCPSurvived}
	if st.Sent > rt.First {
		r.Sent = st.Sent - rt.First
	}
	if r.Sent > r.Received {
		r.Lost = r.Sent - r.Received
	}
	r.BlockedMS = float64(r.Lost) / rate * 1000
	r.MaxGapMS = rt.MaxGapMS
	// The datagrams sent after the last that arrived are a gap too: the
	// firewall may not have come back before the stream ended.
	if st.Sent > rt.Last+1 {
		r.MaxGapMS = max(r.MaxGapMS, float64(st.Sent-rt.Last-1)/rate*1000)
	}
	return r, nil
}

// blackoutHeader is a datagram's fixed part: "FWBO", the stream's id and
// the sequence number.
const blackoutHeader = 4 + 8 + 8

type blackoutSent struct {
	Seconds     float64 `json:"seconds"`
	Sent        uint64  `json:"sent"`
	TCPHeld     int     `json:"tcp_held"`
	TCPSurvived int     `json:"tcp_survived"`
}

type blackoutReceived struct {
	Received  uint64  `json:"received"` // distinct sequence numbers from First on
	First     uint64  `json:"first"`    // the first sequence number that arrived
	Last      uint64  `json:"last"`     // the highest
	Reordered uint64  `json:"reordered"`
	MaxGapMS  float64 `json:"max_gap_ms"`
}

// streamID is the first 8 bytes of the agent's id after its prefix.
func streamID(id string) uint64 {
	var b [8]byte
	copy(b[:], strings.TrimPrefix(id, "fwab-blackout-"))
	return binary.BigEndian.Uint64(b[:])
}

// BlackoutSend is what the agent's blackout-send sends: numbered
// datagrams to Addr at Rate until its context ends, with Conns TCP
// connections to Addr held open meanwhile.
type BlackoutSend struct {
	ID    string // the stream's id, fwab-blackout-HEX
	Addr  string // the receiver's address:port
	Rate  float64
	Size  int // UDP payload bytes
	Conns int
	// Payload, when given, follows the header in every datagram (a
	// Canary's nonce), the datagram growing to hold it.
	Payload []byte
	// FreshPorts sends each datagram from a socket of its own, so from a
	// new source port: each is a flow of its own. Suricata drops the rest
	// of a flow once a drop rule matched in it, so in one flow only the
	// first trigger would test the rule.
	FreshPorts bool
}

// Run sends the stream and reports what it sent and how many connections
// still pass data at the end.
func (s BlackoutSend) Run(ctx context.Context, w io.Writer) error {
	udp, err := net.Dial("udp", s.Addr)
	if err != nil {
		return err
	}
	defer udp.Close()
	write := udp.Write
	if s.FreshPorts {
		write = func(b []byte) (int, error) {
			c, err := net.Dial("udp", s.Addr)
			if err != nil {
				return 0, err
			}
			defer c.Close()
			return c.Write(b)
		}
	}
	held := holdConns(ctx, s.Addr, s.Conns) // dialled beside the stream, not before it
	buf := make([]byte, max(s.Size, blackoutHeader+len(s.Payload)))
	copy(buf[blackoutHeader:], s.Payload)
	copy(buf, "FWBO")
	binary.BigEndian.PutUint64(buf[4:], streamID(s.ID))
	start := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var sent uint64
	for ctx.Err() == nil {
		due := uint64(time.Since(start).Seconds() * s.Rate)
		for ; sent < due; sent++ {
			binary.BigEndian.PutUint64(buf[12:], sent)
			write(buf) // a refused or unroutable datagram is a lost one
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
		}
	}
	out := blackoutSent{Seconds: time.Since(start).Seconds(), Sent: sent}
	out.TCPHeld, out.TCPSurvived = held.check()
	return json.NewEncoder(w).Encode(out)
}

// heldConns are TCP connections kept open across a change; each sends a
// byte every 100 ms.
type heldConns struct {
	wg    sync.WaitGroup // the dials
	mu    sync.Mutex
	conns []*heldConn
}

type heldConn struct {
	c    net.Conn
	ok   chan struct{} // the server's answer to the last '!'
	mu   sync.Mutex
	dead bool // reset or closed by the network
}

// holdConns dials n connections at once, each in the background; one
// that is not open within 2 s is not held.
func holdConns(ctx context.Context, addr string, n int) *heldConns {
	h := &heldConns{}
	for range n {
		h.wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return
			}
			hc := &heldConn{c: c, ok: make(chan struct{}, 1)}
			h.mu.Lock()
			h.conns = append(h.conns, hc)
			h.mu.Unlock()
			go hc.read()
			go hc.keep(ctx)
		})
	}
	return h
}

// read takes the server's answers; an error before the connection is
// closed by check marks it dead.
func (hc *heldConn) read() {
	b := make([]byte, 64)
	for {
		n, err := hc.c.Read(b)
		if strings.Contains(string(b[:n]), "ok") {
			select {
			case hc.ok <- struct{}{}:
			default:
			}
		}
		if err != nil {
			hc.mu.Lock()
			hc.dead = true
			hc.mu.Unlock()
			return
		}
	}
}

// keep writes a byte every 100 ms until ctx ends. A slow write is not a
// dead connection: TCP retransmits through a short blackout.
func (hc *heldConn) keep(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			hc.c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := hc.c.Write([]byte{'.'}); err != nil && !isTimeout(err) {
				return // read sees the reset too
			}
		}
	}
}

// survivalWait is how long a held connection has to answer at the end. A
// sender whose segments were lost in the blackout retransmits with
// backoff (200 ms, 400 ms, … after the last try), so a blackout of a few
// seconds can hold up the first segment after it by as long.
const survivalWait = 5 * time.Second

// check ends the connections: one that is not dead must answer a '!'
// within survivalWait to count as survived.
func (h *heldConns) check() (held, survived int) {
	h.wg.Wait()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, hc := range h.conns {
		wg.Go(func() {
			defer hc.c.Close()
			hc.mu.Lock()
			dead := hc.dead
			hc.mu.Unlock()
			if dead {
				return
			}
			hc.c.SetWriteDeadline(time.Now().Add(survivalWait))
			if _, err := hc.c.Write([]byte{'!'}); err != nil {
				return
			}
			select {
			case <-hc.ok:
				hc.mu.Lock()
				alive := !hc.dead
				hc.mu.Unlock()
				if alive {
					mu.Lock()
					survived++
					mu.Unlock()
				}
			case <-time.After(survivalWait):
			}
		})
	}
	wg.Wait()
	return len(h.conns), survived
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// ReceiveBlackout counts the datagrams of stream id arriving on addr, and
// echoes what its TCP connections send, until ctx ends; then it reports.
// It is the agent's blackout-recv.
func ReceiveBlackout(ctx context.Context, id, addr string, w io.Writer) error {
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	defer pc.Close()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	go echoConns(ctx, ln)
	go func() { <-ctx.Done(); pc.SetReadDeadline(time.Now()) }()

	want := streamID(id)
	var out blackoutReceived
	// seen has a bit for each of the last seenWindow sequence numbers up
	// to the highest (a ring): enough to count a duplicate once however
	// long the stream runs; a datagram later than that counts as lost.
	const seenWindow = 1 << 20
	seen := make([]uint64, seenWindow/64)
	bit := func(seq uint64) (*uint64, uint64) { i := seq % seenWindow; return &seen[i/64], 1 << (i % 64) }
	var last time.Time
	buf := make([]byte, 2048)
	for {
		n, _, err := pc.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
		if n < blackoutHeader || string(buf[:4]) != "FWBO" || binary.BigEndian.Uint64(buf[4:]) != want {
			continue // not this stream's
		}
		seq := binary.BigEndian.Uint64(buf[12:])
		if last.IsZero() {
			out.First, out.Last = seq, seq
		}
		if seq < out.First || seq+seenWindow <= out.Last {
			continue // before the stream's first arrival (start-up), or too late to tell from a duplicate
		}
		for s := out.Last + 1; s <= seq && s <= out.Last+seenWindow; s++ {
			w, m := bit(s) // the ring moves on: forget what it held there
			*w &^= m
		}
		w, m := bit(seq)
		if *w&m != 0 {
			continue // a duplicate
		}
		*w |= m
		out.Received++
		if seq < out.Last {
			out.Reordered++
		}
		out.Last = max(out.Last, seq)
		if !last.IsZero() {
			out.MaxGapMS = max(out.MaxGapMS, float64(now.Sub(last))/float64(time.Millisecond))
		}
		last = now
	}
	return json.NewEncoder(w).Encode(out)
}

// echoConns answers each connection's bytes: "ok" for '!', nothing for
// the keep-alive dots.
func echoConns(ctx context.Context, ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			go func() { <-ctx.Done(); c.Close() }()
			b := make([]byte, 64)
			for {
				n, err := c.Read(b)
				if err != nil {
					return
				}
				if strings.ContainsRune(string(b[:n]), '!') {
					c.Write([]byte("ok"))
				}
			}
		}()
	}
}
