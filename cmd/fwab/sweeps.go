package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
)

// runSweeps runs the same spec on several targets at once: one sweep per
// target, each with its own lock, session, journal and restore, into one
// results database. Each sweep's progress goes to stderr with its target's
// name before every line; a failure on one target does not stop the
// others. One summary table at the end says how each ended.
func runSweeps(ctx context.Context, io *streams, o *sweepOptions) error {
	switch {
	case o.resume != 0:
		return usageErrorf("--resume continues one run: give it one --target")
	case o.config != "":
		return usageErrorf("--config plans against one file: give it one --target")
	}
	names := slices.Clone(o.targetNames)
	if d := duplicated(names); d != "" {
		return usageErrorf("--target %s is given twice: one sweep per firewall", d)
	}
	type result struct {
		name string
		out  bytes.Buffer // the sweep's stdout: its report
		err  error
		code int
	}
	results := make([]*result, len(names))
	var mu sync.Mutex // one line at a time on stderr
	var wg sync.WaitGroup
	for i, name := range names {
		r := &result{name: name}
		results[i] = r
		so := *o
		so.target, so.targetNames, so.progress = name, nil, false
		sio := &streams{In: io.In, Out: &r.out, ErrOut: &prefixWriter{mu: &mu, w: io.ErrOut, prefix: "[" + name + "] "}}
		sio.LogLevel.Set(io.LogLevel.Level())
		wg.Go(func() {
			r.err = runSweep(ctx, sio, &so)
			r.code = exitCode(r.err, sio)
			sio.ErrOut.(*prefixWriter).flush()
		})
	}
	wg.Wait()

	failed := 0
	for _, r := range results {
		if r.out.Len() > 0 {
			fmt.Fprintf(io.Out, "## %s\n\n", r.name)
			io.Out.Write(r.out.Bytes())
			fmt.Fprintln(io.Out)
		}
	}
	tw := tabwriter.NewWriter(io.ErrOut, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tRESULT\tEXIT")
	for _, r := range results {
		res := "done"
		if r.err != nil {
			failed++
			res = r.err.Error()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.name, firstLine(res), strconv.Itoa(r.code))
	}
	tw.Flush()
	if failed > 0 {
		fmt.Fprintf(io.ErrOut, "%d of %d sweeps failed; the others' runs are complete\n", failed, len(results))
		return silentError{exitFailure}
	}
	return nil
}

func duplicated(names []string) string {
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return n
		}
		seen[n] = true
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// prefixWriter writes whole lines to w, each after prefix, one writer's
// line at a time.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		p.mu.Lock()
		_, err := fmt.Fprintf(p.w, "%s%s\n", p.prefix, p.buf[:i])
		p.mu.Unlock()
		p.buf = p.buf[i+1:]
		if err != nil {
			return len(b), err
		}
	}
}

// flush writes what is left without a newline.
func (p *prefixWriter) flush() {
	if len(p.buf) > 0 {
		p.Write([]byte("\n"))
	}
}
