package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/fwab/fwab/fwapi"
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

// EndpointFor builds the Endpoint for an endpoint of the targets file: a
// local network namespace, an SSH host (opened with dial), or, with
// neither, this machine.
func EndpointFor(name string, e fwapi.Endpoint, dial func(*fwapi.SSHHost) (Shell, error)) (Endpoint, error) {
	if e.Addr == "" {
		return Endpoint{}, fmt.Errorf("%s endpoint has no addr: set the address traffic goes to or from", name)
	}
	switch {
	case e.Netns != "" && e.SSH != nil:
		return Endpoint{}, fmt.Errorf("%s endpoint sets both netns and ssh: keep one", name)
	case e.Netns != "":
		return Endpoint{Name: name, Addr: e.Addr, Runner: Local{Netns: e.Netns}}, nil
	case e.SSH != nil:
		if dial == nil {
			return Endpoint{}, errors.New(name + " endpoint is an SSH host, but no SSH dialer was given")
		}
		sh, err := dial(e.SSH)
		if err != nil {
			return Endpoint{}, fmt.Errorf("%s endpoint %s: %w", name, e.SSH.Host, err)
		}
		return Endpoint{Name: name, Addr: e.Addr, Runner: ShellRunner{Shell: sh}}, nil
	default:
		return Endpoint{Name: name, Addr: e.Addr, Runner: Local{}}, nil
	}
}
