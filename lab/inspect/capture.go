package inspect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// captureBuffer holds one captured packet. GSO/GRO packets on veths reach
// 64 KiB; anything longer is inspected truncated.
const captureBuffer = 256 << 10

// runCapture reads a passive copy of every packet in and out of ifc from an
// AF_PACKET socket until ctx is done. The kernel clones each packet onto the
// socket's queue; forwarding never waits for the engine, and when the engine
// falls behind the kernel drops the copies, not the traffic.
func (e *Engine) runCapture(ctx context.Context, ifc string, ready func()) error {
	var once sync.Once
	defer once.Do(ready)

	ifi, err := net.InterfaceByName(ifc)
	if err != nil {
		return err
	}
	proto := htons(unix.ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		return fmt.Errorf("bind to %s: %w", ifc, err)
	}
	if err := forceReadBuffer(fd, e.opts.ReadBuffer); err != nil {
		return err
	}
	// A receive timeout lets the loop notice ctx without closing the socket
	// under a blocked read.
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("receive timeout: %w", err)
	}
	once.Do(ready)

	defer func() {
		// Copies the kernel dropped because the engine fell behind.
		if st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
			e.c.missed.Add(uint64(st.Drops))
		}
	}()
	alerts := e.alertLogs[ifc]
	buf := make([]byte, captureBuffer)
	flows := newFlowTable(e.opts.StreamDepth)
	var lastErr time.Time
	lastStats := time.Now()
	for ctx.Err() == nil {
		n, err := unix.Read(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			e.countError(&lastErr, "capture", err)
			time.Sleep(10 * time.Millisecond) // an interface gone down: do not spin
			continue
		}
		info, drop := e.inspect(buf[:n], flows, alerts)
		if drop && e.opts.Mode == Legacy && info.src.IsValid() {
			e.offender(info.src)
		}
		if time.Since(lastStats) > time.Second {
			lastStats = time.Now()
			if st, err := unix.GetsockoptTpacketStats(fd, unix.SOL_PACKET, unix.PACKET_STATISTICS); err == nil {
				e.c.missed.Add(uint64(st.Drops)) // reading the statistics resets them
			}
		}
	}
	return nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
