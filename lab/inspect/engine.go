package inspect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is how the engine sees traffic, after Suricata's modes on pfSense.
type Mode string

const (
	// Inline sits in the forwarding path through NFQUEUE: every packet
	// waits for the engine's verdict, and a drop rule drops it.
	Inline Mode = "inline"
	// IDS reads a passive copy of the traffic (AF_PACKET) and only counts
	// alerts; forwarding never waits for it.
	IDS Mode = "ids"
	// Legacy reads a passive copy like IDS and, after a drop rule matched,
	// adds the packet's source address to the block sets, so that later
	// packets from it are dropped by nftables (pfSense's snort2c table).
	Legacy Mode = "legacy"
)

// ParseMode accepts the engine's names and the knob values of `ids@IF`.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "inline", "ips-inline":
		return Inline, nil
	case "ids":
		return IDS, nil
	case "legacy", "ips-legacy":
		return Legacy, nil
	}
	return "", fmt.Errorf("unknown inspection mode %q: use inline, ids or legacy", s)
}

// Knob is the mode as the `ids@IF` knob and the runtime state name it
// (ips-inline, ids, ips-legacy).
func (m Mode) Knob() string {
	switch m {
	case Inline:
		return "ips-inline"
	case Legacy:
		return "ips-legacy"
	}
	return string(m)
}

// DefaultReadBuffer is the socket receive buffer the engine asks for. With
// less, bursts overflow the queue (NFQUEUE) or the capture (AF_PACKET).
const DefaultReadBuffer = 32 << 20

// Options configure an Engine.
type Options struct {
	Mode    Mode
	Ruleset *Ruleset

	// Inline: the first queue number and how many queues (one consumer
	// goroutine each; match the iptables --queue-balance range).
	Queue  uint16
	Queues int
	// FailOpen sets NFQA_CFG_F_FAIL_OPEN: when the queue is full the kernel
	// accepts packets instead of dropping them. Off unless asked for.
	FailOpen bool
	// MaxQueueLen is the kernel queue length per queue; zero means 4096.
	MaxQueueLen uint32

	// Interfaces: IDS and Legacy capture on these; Inline checks their
	// offload flags for the status.
	Interfaces []string

	// StreamDepth, if not zero, limits content inspection to the first
	// StreamDepth bytes of each TCP flow direction, like Suricata's
	// stream.reassembly.depth (1 MiB by default there); later packets of
	// the flow are counted and, inline, accepted without a scan. Zero
	// inspects every byte of every packet.
	StreamDepth uint64

	// ReadBuffer is the receive buffer in bytes; zero means DefaultReadBuffer.
	ReadBuffer int

	// Blocker adds offenders in Legacy mode; nil means NftBlocker in the
	// current network namespace.
	Blocker Blocker

	// AlertLogs are the fast logs (Suricata's alerts.log) by interface:
	// IDS and Legacy append a line to an interface's log for each rule
	// that matched a packet captured on it. Inline writes none.
	AlertLogs map[string]string

	// StatusFile, if set, is rewritten (atomically) every StatusEvery
	// (default 1 s) and at exit.
	StatusFile  string
	StatusEvery time.Duration

	// Ready, if set, is called once the engine is bound to its queues or
	// capture sockets: the moment traffic can be steered to it.
	Ready func()

	Logger *slog.Logger
}

// Blocker puts an address on the block list.
type Blocker interface {
	Block(ctx context.Context, addr netip.Addr) error
}

// Stats are the engine's counters.
type Stats struct {
	Packets  uint64 `json:"packets"`  // packets inspected
	Bytes    uint64 `json:"bytes"`    // bytes of those packets
	Matches  uint64 `json:"matches"`  // rule matches (alerts and drops)
	Accepted uint64 `json:"accepted"` // inline verdicts: accept
	Dropped  uint64 `json:"dropped"`  // inline verdicts: drop
	Blocked  uint64 `json:"blocked"`  // legacy: addresses added to the block sets
	Errors   uint64 `json:"errors"`   // receive, verdict and block errors
	// BeyondDepth counts TCP payload bytes not inspected because their flow
	// passed StreamDepth.
	BeyondDepth uint64 `json:"beyond_depth"`
	// Missed counts passive copies the kernel dropped because the engine
	// fell behind (IDS and Legacy; the traffic itself was forwarded).
	Missed uint64 `json:"missed"`
}

type counters struct {
	packets, bytes, matches, accepted, dropped, blocked, errors, missed, beyond atomic.Uint64
}

// Engine is the inspection process.
type Engine struct {
	opts Options
	log  *slog.Logger
	c    counters

	mu      sync.Mutex // guards started and offload, set by Run, read by Status
	started time.Time
	offload map[string][]string

	alertLogs map[string]*alertLog // by interface, opened by New

	blockOnce sync.Map // netip.Addr -> struct{}: addresses already sent to the blocker
	blockCh   chan netip.Addr
}

// New checks opts and returns an engine ready to Run.
func New(opts Options) (*Engine, error) {
	if opts.Ruleset == nil {
		return nil, errors.New("no ruleset")
	}
	switch opts.Mode {
	case Inline:
		if opts.Queues == 0 {
			opts.Queues = 1
		}
		if opts.Queues < 0 || int(opts.Queue)+opts.Queues > 65536 {
			return nil, fmt.Errorf("queues %d..%d out of range 0..65535", opts.Queue, int(opts.Queue)+opts.Queues-1)
		}
	case IDS, Legacy:
		if len(opts.Interfaces) == 0 {
			return nil, fmt.Errorf("%s mode needs at least one interface to capture on", opts.Mode)
		}
		if opts.FailOpen {
			return nil, fmt.Errorf("fail-open applies to inline mode only; %s mode never holds packets", opts.Mode)
		}
	default:
		return nil, fmt.Errorf("unknown inspection mode %q: use inline, ids or legacy", opts.Mode)
	}
	if opts.ReadBuffer == 0 {
		opts.ReadBuffer = DefaultReadBuffer
	}
	if opts.MaxQueueLen == 0 {
		opts.MaxQueueLen = 4096
	}
	if opts.StatusEvery == 0 {
		opts.StatusEvery = time.Second
	}
	if opts.Mode == Legacy && opts.Blocker == nil {
		opts.Blocker = NftBlocker{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: opts, log: log, alertLogs: map[string]*alertLog{}}
	for ifc, path := range opts.AlertLogs {
		if opts.Mode == Inline {
			break
		}
		l, err := openAlertLog(path)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.alertLogs[ifc] = l
	}
	return e, nil
}

// Close closes the engine's alert logs.
func (e *Engine) Close() error {
	var errs []error
	for _, l := range e.alertLogs {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Packets:  e.c.packets.Load(),
		Bytes:    e.c.bytes.Load(),
		Matches:  e.c.matches.Load(),
		Accepted: e.c.accepted.Load(),
		Dropped:  e.c.dropped.Load(),
		Blocked:  e.c.blocked.Load(),
		Errors:   e.c.errors.Load(),
		Missed:   e.c.missed.Load(),

		BeyondDepth: e.c.beyond.Load(),
	}
}

// String is the one-line status: mode and counters.
func (s Stats) String() string {
	return fmt.Sprintf("packets=%d bytes=%d matches=%d accepted=%d dropped=%d blocked=%d errors=%d missed=%d beyond_depth=%d",
		s.Packets, s.Bytes, s.Matches, s.Accepted, s.Dropped, s.Blocked, s.Errors, s.Missed, s.BeyondDepth)
}

// Run inspects traffic until ctx is done. It returns nil after a clean stop
// and an error if the engine could not start.
func (e *Engine) Run(ctx context.Context) error {
	offload := map[string][]string{}
	for _, ifc := range e.opts.Interfaces {
		on, err := OffloadsOn(ctx, ifc)
		if err != nil {
			e.log.Warn("offload flags unknown", "iface", ifc, "err", err)
			continue
		}
		offload[ifc] = on
		if e.opts.Mode == Inline && len(on) > 0 {
			e.log.Warn("inline IPS with offloads on", "iface", ifc, "offloads", on)
		}
	}
	e.mu.Lock()
	e.started, e.offload = time.Now(), offload
	e.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	fail := func(err error) {
		select {
		case errc <- err:
		default:
		}
		cancel()
	}

	if e.opts.Mode == Legacy {
		e.blockCh = make(chan netip.Addr, 1024)
		wg.Go(func() { e.blockLoop(ctx) })
	}

	var started sync.WaitGroup
	switch e.opts.Mode {
	case Inline:
		for q := range e.opts.Queues {
			queue := e.opts.Queue + uint16(q)
			started.Add(1)
			wg.Go(func() {
				if err := e.runQueue(ctx, queue, started.Done); err != nil {
					fail(fmt.Errorf("queue %d: %w", queue, err))
				}
			})
		}
	default:
		for _, ifc := range e.opts.Interfaces {
			started.Add(1)
			wg.Go(func() {
				if err := e.runCapture(ctx, ifc, started.Done); err != nil {
					fail(fmt.Errorf("capture on %s: %w", ifc, err))
				}
			})
		}
	}
	started.Wait()
	// The status file appears once the engine is bound: its existence tells
	// whoever started the engine that traffic can be steered to it.
	if ctx.Err() == nil {
		if e.opts.StatusFile != "" {
			wg.Go(func() { e.statusLoop(ctx) })
		}
		if e.opts.Ready != nil {
			e.opts.Ready()
		}
		e.log.Info("inspecting", "mode", e.opts.Mode, "rules", len(e.opts.Ruleset.Rules), "interfaces", e.opts.Interfaces)
	}

	<-ctx.Done()
	wg.Wait()
	if e.opts.StatusFile != "" {
		if err := e.writeStatus(false); err != nil {
			e.log.Warn("status file", "err", err)
		}
	}
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// inspect scans one packet and returns whether a drop rule matched. flows
// is the calling consumer's flow table (nil without a stream depth);
// alerts, if not nil, gets a line for each rule that matched.
func (e *Engine) inspect(p []byte, flows *flowTable, alerts *alertLog) (info packetInfo, drop bool) {
	e.c.packets.Add(1)
	e.c.bytes.Add(uint64(len(p)))
	info, ok := parsePacket(p)
	if !ok {
		return info, false
	}
	scan, beyond := flows.window(info)
	if beyond > 0 {
		e.c.beyond.Add(uint64(beyond))
	}
	var matched func(Rule)
	if alerts != nil {
		matched = func(r Rule) {
			if err := alerts.write(time.Now(), e.opts.Mode == Inline, r, info); err != nil {
				e.c.errors.Add(1)
			}
		}
	}
	n, drop := e.opts.Ruleset.Verdict(scan, matched)
	if n > 0 {
		e.c.matches.Add(uint64(n))
	}
	return info, drop
}

// offender queues a legacy block of addr, once per address.
func (e *Engine) offender(addr netip.Addr) {
	if _, dup := e.blockOnce.LoadOrStore(addr, struct{}{}); dup {
		return
	}
	select {
	case e.blockCh <- addr:
	default:
		e.blockOnce.Delete(addr) // try again on its next packet
		e.c.errors.Add(1)
	}
}

func (e *Engine) blockLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-e.blockCh:
			if err := e.opts.Blocker.Block(ctx, a); err != nil {
				e.c.errors.Add(1)
				e.blockOnce.Delete(a)
				e.log.Warn("block failed", "addr", a, "err", err)
				continue
			}
			e.c.blocked.Add(1)
			e.log.Info("blocked offender", "addr", a)
		}
	}
}

// countError counts an error and logs it at most once a second.
func (e *Engine) countError(last *time.Time, msg string, err error) {
	e.c.errors.Add(1)
	if now := time.Now(); now.Sub(*last) > time.Second {
		*last = now
		e.log.Warn(msg, "err", err)
	}
}
