package inspect

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/florianl/go-nfqueue/v2"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// runQueue consumes one NFQUEUE queue until ctx is done, calling ready once
// the queue is bound (or binding failed).
func (e *Engine) runQueue(ctx context.Context, queue uint16, ready func()) error {
	var once sync.Once
	defer once.Do(ready)

	flags := uint32(nfqueue.NfQaCfgFlagGSO)
	if e.opts.FailOpen {
		flags |= nfqueue.NfQaCfgFlagFailOpen
	}
	nf, err := nfqueue.Open(&nfqueue.Config{
		NfQueue:      queue,
		MaxPacketLen: 0xffff,
		MaxQueueLen:  e.opts.MaxQueueLen,
		Copymode:     nfqueue.NfQnlCopyPacket,
		Flags:        flags,
		AfFamily:     unix.AF_INET,
	})
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer nf.Close()
	if err := setReadBuffer(nf.Con, e.opts.ReadBuffer); err != nil {
		return err
	}
	// Report overruns as errors instead of failing the socket.
	if err := nf.Con.SetOption(netlink.NoENOBUFS, true); err != nil {
		return fmt.Errorf("set NETLINK_NO_ENOBUFS: %w", err)
	}

	var lastErr time.Time
	flows := newFlowTable(e.opts.StreamDepth)
	hook := func(a nfqueue.Attribute) int {
		if a.PacketID == nil {
			return 0
		}
		var p []byte
		if a.Payload != nil {
			p = *a.Payload
		}
		_, drop := e.inspect(p, flows, nil)
		verdict := nfqueue.NfAccept
		if drop {
			verdict = nfqueue.NfDrop
		}
		if err := nf.SetVerdict(*a.PacketID, verdict); err != nil {
			e.countError(&lastErr, "verdict", err)
			return 0
		}
		if drop {
			e.c.dropped.Add(1)
		} else {
			e.c.accepted.Add(1)
		}
		return 0
	}
	// Overruns and timeouts are counted and reading goes on; anything else
	// ends the engine, because a queue nobody reads blackholes the traffic.
	fatal := make(chan error, 1)
	onErr := func(err error) int {
		if ctx.Err() != nil {
			return 1
		}
		var op *netlink.OpError
		if errors.As(err, &op) && (op.Timeout() || errors.Is(op.Err, unix.ENOBUFS)) {
			e.countError(&lastErr, "receive", err)
			return 0
		}
		e.c.errors.Add(1)
		fatal <- err
		return 1
	}
	if err := nf.RegisterWithErrorFunc(ctx, hook, onErr); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	once.Do(ready)
	select {
	case <-ctx.Done():
		return nil
	case err := <-fatal:
		return fmt.Errorf("receive: %w", err)
	}
}

// setReadBuffer raises a netlink socket's receive buffer past
// net.core.rmem_max with SO_RCVBUFFORCE (root), falling back to SO_RCVBUF.
func setReadBuffer(c *netlink.Conn, size int) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return fmt.Errorf("receive buffer: %w", err)
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = forceReadBuffer(int(fd), size)
	}); err != nil {
		return fmt.Errorf("receive buffer: %w", err)
	}
	return serr
}

func forceReadBuffer(fd, size int) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size); err == nil {
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, size); err != nil {
		return fmt.Errorf("receive buffer of %d bytes: %w", size, err)
	}
	return nil
}
