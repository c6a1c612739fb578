package probe

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestSampler(t *testing.T) {
	var n atomic.Int32
	p := Poll(t.Context(), 50*time.Millisecond, func(ctx context.Context) (DUTMetrics, error) {
		i := n.Add(1)
		if i == 3 {
			return DUTMetrics{}, errors.New("read failed")
		}
		return DUTMetrics{CPUPercent: float64(i)}, nil
	})
	time.Sleep(330 * time.Millisecond)
	series, errs := p.Stop()
	// About 7 reads in 330 ms at 50 ms; allow a loaded machine to lag.
	if len(series) < 2 || len(series) > 8 || len(errs) != 1 {
		t.Fatalf("series %d values, %d errors; want 2..8 values and 1 error", len(series), len(errs))
	}
	for i := 1; i < len(series); i++ {
		if series[i].CPUPercent <= series[i-1].CPUPercent {
			t.Errorf("series out of order: %v then %v", series[i-1].CPUPercent, series[i].CPUPercent)
		}
	}
	after := n.Load()
	time.Sleep(120 * time.Millisecond)
	if n.Load() != after {
		t.Errorf("reads went on after Stop")
	}
}

func TestSamplerReadsAtOnce(t *testing.T) {
	p := Poll(t.Context(), time.Hour, func(context.Context) (int, error) { return 7, nil })
	time.Sleep(50 * time.Millisecond)
	series, _ := p.Stop()
	if len(series) != 1 || series[0] != 7 {
		t.Errorf("series = %v, want [7] from the first read", series)
	}
}

func TestSamplerHungReader(t *testing.T) {
	p := Poll(t.Context(), 50*time.Millisecond, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	time.Sleep(480 * time.Millisecond) // two reads time out at four periods each
	start := time.Now()
	_, errs := p.Stop()
	if time.Since(start) > time.Second {
		t.Errorf("Stop took %v with a hung reader", time.Since(start))
	}
	if len(errs) < 2 {
		t.Errorf("errors = %d, want each hung read to time out after four periods", len(errs))
	}
}

// TestSamplerKeepsASlowFirstRead: a phase shorter than one read (a 2 s
// idle phase; a firewall whose CPU reading takes longer under load) still
// has that read: Stop waits for the first one, within its four periods,
// where it used to cancel it and leave the phase with nothing.
func TestSamplerKeepsASlowFirstRead(t *testing.T) {
	p := Poll(t.Context(), 100*time.Millisecond, func(ctx context.Context) (int, error) {
		select {
		case <-time.After(250 * time.Millisecond):
			return 7, nil
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	})
	time.Sleep(50 * time.Millisecond)
	series, errs := p.Stop()
	if len(series) != 1 || series[0] != 7 || len(errs) != 0 {
		t.Errorf("Stop during a slow first read = %v, %v; want [7] and no error", series, errs)
	}
	// A hung first read is still cut at four periods.
	p = Poll(t.Context(), 50*time.Millisecond, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	start := time.Now()
	_, errs = p.Stop()
	if took := time.Since(start); took > time.Second || len(errs) != 1 {
		t.Errorf("Stop during a hung first read took %v with %d errors; want it cut at four periods (200ms) with one error", took, len(errs))
	}
}
