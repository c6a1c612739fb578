package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"
)

// PingStats is latency measured with ping while a probe loads the path.
type PingStats struct {
	Transmitted, Received int
	LossPercent           float64
	Min, Avg, Max, Mdev   time.Duration // zero when nothing came back
}

var (
	// iputils: "10 packets transmitted, 9 received, +1 errors, 10% packet loss, time 1800ms"
	// FreeBSD: "10 packets transmitted, 10 packets received, 0.0% packet loss"
	pingCountRE = regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received,(?: \+\d+ (?:errors|duplicates),)*(?: ([\d.]+)% packet loss)?`)
	// iputils: "rtt min/avg/max/mdev = 0.021/0.041/0.062/0.011 ms"
	// FreeBSD: "round-trip min/avg/max/stddev = ..."; BusyBox: "round-trip min/avg/max = ..."
	pingRTTRE = regexp.MustCompile(`(?:rtt|round-trip) min/avg/max(?:/(?:mdev|stddev))? = ([\d.]+)/([\d.]+)/([\d.]+)(?:/([\d.]+))? ms`)
)

// ParsePing reads the summary of ping -q (iputils, FreeBSD or BusyBox).
func ParsePing(out []byte) (PingStats, error) {
	var st PingStats
	m := pingCountRE.FindSubmatch(out)
	if m == nil {
		return st, fmt.Errorf("no ping summary in the output: %s", excerpt(out))
	}
	st.Transmitted, _ = strconv.Atoi(string(m[1]))
	st.Received, _ = strconv.Atoi(string(m[2]))
	if st.Transmitted == 0 {
		return st, errors.New("ping sent no packets")
	}
	if len(m[3]) > 0 {
		st.LossPercent, _ = strconv.ParseFloat(string(m[3]), 64)
	} else {
		st.LossPercent = 100 * float64(st.Transmitted-st.Received) / float64(st.Transmitted)
	}
	r := pingRTTRE.FindSubmatch(out)
	if r == nil {
		if st.Received > 0 {
			return st, fmt.Errorf("ping received %d replies but printed no round-trip summary", st.Received)
		}
		return st, nil
	}
	ms := func(b []byte) time.Duration {
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil || math.IsNaN(f) || f < 0 {
			return 0
		}
		return time.Duration(f * float64(time.Millisecond))
	}
	st.Min, st.Avg, st.Max = ms(r[1]), ms(r[2]), ms(r[3])
	if len(r[4]) > 0 {
		st.Mdev = ms(r[4])
	}
	return st, nil
}

// runningPing is a ping started alongside a probe.
type runningPing struct {
	proc     Process
	err      error
	deadline time.Duration
}

func pingArgv(addr string, count int, interval time.Duration) []string {
	secs := strconv.FormatFloat(interval.Seconds(), 'f', -1, 64)
	deadline := int(math.Ceil(float64(count)*interval.Seconds())) + 2
	return []string{"ping", "-n", "-q", "-i", secs, "-c", strconv.Itoa(count), "-w", strconv.Itoa(deadline), addr}
}

func startPing(ctx context.Context, from Endpoint, addr string, count int, interval time.Duration) *runningPing {
	if count < 1 {
		count = 1
	}
	p, err := from.Runner.Start(ctx, pingArgv(addr, count, interval))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("ping is not installed on %s: %w", from, err)
		}
		return &runningPing{err: err}
	}
	return &runningPing{proc: p, deadline: 3*time.Second + interval}
}

// finish waits briefly for ping to print its summary (it was sized to the
// probe), then stops it and parses what it printed.
func (r *runningPing) finish() (PingStats, error) {
	if r.err != nil {
		return PingStats{}, r.err
	}
	select {
	case <-r.proc.Done():
	case <-time.After(r.deadline):
		r.proc.Kill()
		r.proc.Wait()
		return PingStats{}, errors.New("ping did not finish with the probe; stopped")
	}
	out, err := r.proc.Wait()
	st, perr := ParsePing(out)
	if perr != nil {
		if err != nil {
			return st, fmt.Errorf("%w (%v)", err, perr)
		}
		return st, perr
	}
	return st, nil
}
