// Command fwab automates pfSense and OPNsense configuration and A/B-tests it.
package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	os.Exit(runProcess(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// runProcess is run with the process's signals wired to it (tests run
// their fwab children through it too).
func runProcess(args []string, stdin io.Reader, stdout, stderr *os.File) int {
	// SIGHUP (the terminal closed, the SSH session lost) stops fwab as
	// Ctrl-C does: a sweep restores the firewall before it exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// A write to a closed stdout or stderr pipe fails with EPIPE instead
	// of killing fwab mid-change. Notify, not Ignore: an ignored signal
	// stays ignored in the commands fwab runs, a handled one does not.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	var out io.Writer = stdout
	if st, err := stdout.Stat(); err == nil && st.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0 {
		out = &pipeWriter{f: stdout}
	}
	return run(ctx, args, stdin, out, stderr)
}

// pipeWriter is stdout when it is a pipe: once its reader is gone
// (fwab ... | head), the rest is dropped, so that the command ends as it
// would have (a sweep restores the firewall first) rather than failing
// on output nobody reads.
type pipeWriter struct {
	f    *os.File
	gone atomic.Bool
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	if w.gone.Load() {
		return len(b), nil
	}
	n, err := w.f.Write(b)
	if errors.Is(err, syscall.EPIPE) {
		w.gone.Store(true)
		return len(b), nil
	}
	return n, err
}
