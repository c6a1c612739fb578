package probe

import (
	"context"
	"sync"
	"time"
)

// DUTMetrics is one sample of the firewall's own load, as its driver reads
// it over SSH or its API.
type DUTMetrics struct {
	Time        time.Time
	CPUPercent  float64   // all cores
	PerCPU      []float64 // where available
	TempCelsius float64   // 0 when unknown
	MemUsedPct  float64
	MbufsInUse  int64
}

// Polling is a reader called at a fixed period in the background until
// Stop. It reads once at the start, and Stop waits for that read, so even
// a phase shorter than one read has one value.
type Polling[T any] struct {
	cancel context.CancelFunc
	done   chan struct{}
	first  chan struct{} // closed once the first read has ended
	mu     sync.Mutex
	series []T
	errs   []error
}

// Poll calls read every period until Stop or until ctx ends. Each read gets
// a context bounded by four periods, so a hung reader cannot stall the
// series, while a reader that itself measures over an interval (a
// firewall's CPU busy time between two counter reads) has room to finish;
// a read that overruns the period is followed by the next one at once.
func Poll[T any](ctx context.Context, period time.Duration, read func(context.Context) (T, error)) *Polling[T] {
	ctx, cancel := context.WithCancel(ctx)
	p := &Polling[T]{cancel: cancel, done: make(chan struct{}), first: make(chan struct{})}
	go func() {
		defer close(p.done)
		t := time.NewTicker(period)
		defer t.Stop()
		first := p.first
		for {
			rctx, rcancel := context.WithTimeout(ctx, 4*period)
			v, err := read(rctx)
			rcancel()
			if ctx.Err() != nil {
				return // stopped while reading: that value is not part of the probe
			}
			p.mu.Lock()
			if err != nil {
				p.errs = append(p.errs, err)
			} else {
				p.series = append(p.series, v)
			}
			p.mu.Unlock()
			if first != nil {
				close(first)
				first = nil
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return p
}

// Stop ends the polling and returns the values read and the errors met, in
// order. It lets the first read end first: a phase shorter than one read
// (a 2 s idle phase; a firewall whose CPU reading takes longer under load)
// keeps it, where cancelling it would leave the phase with nothing.
func (p *Polling[T]) Stop() ([]T, []error) {
	// The first read ends by itself (its four periods) or with the
	// caller's context.
	select {
	case <-p.first:
	case <-p.done:
	}
	p.cancel()
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.series, p.errs
}
