package probe

import (
	"bytes"
	"context"
	"io"
	"sync"
	"sync/atomic"
)

// StreamShell adapts a blocking "run this command line, stream its standard
// output to w" function to Shell. Its shape is that of an SSH client's
// streaming run (exit status, standard error, transport error), so an SSH
// endpoint is ShellRunner{Shell: StreamShell(client.Stream)}. Cancelling
// the context must end the command's session.
type StreamShell func(ctx context.Context, cmdline string, w io.Writer) (exit int, stderr []byte, err error)

// Start implements Shell.
func (f StreamShell) Start(ctx context.Context, cmdline string) (Process, error) {
	ctx, cancel := context.WithCancel(ctx)
	p := &streamProcess{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		exit, stderr, err := f(ctx, cmdline, &p.out)
		switch {
		case err != nil:
			p.err = err
		case exit != 0:
			p.err = &ExitError{Code: exit, Stderr: string(stderr)}
		}
	}()
	return p, nil
}

type streamProcess struct {
	cancel context.CancelFunc
	done   chan struct{}
	out    lockedBuffer
	err    error
	killed sync.Once
	kill   atomic.Bool
}

func (p *streamProcess) Done() <-chan struct{} { return p.done }

func (p *streamProcess) Wait() ([]byte, error) {
	<-p.done
	if p.kill.Load() {
		return p.out.Bytes(), nil
	}
	return p.out.Bytes(), p.err
}

// Kill ends the session. A command that ignores the hang-up keeps running on
// the remote host: the iperf3 server is started with -1 and an idle timeout
// so that it ends on its own.
func (p *streamProcess) Kill() error {
	p.killed.Do(func() {
		select {
		case <-p.done:
			return
		default:
		}
		p.kill.Store(true)
		p.cancel()
	})
	return nil
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 16<<20 {
		return len(p), nil // an iperf3 report is far smaller; drop runaway output
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}
