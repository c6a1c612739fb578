package probe

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RFC2544FrameSizes are RFC 2544's Ethernet frame sizes (section 9.1), in
// bytes with the header and FCS.
var RFC2544FrameSizes = []int{64, 128, 256, 512, 1024, 1280, 1518}

// Ethernet and IPv4/UDP overheads, in bytes.
const (
	ethernetOverhead = 14 + 4 // header and FCS: in the frame size
	ethernetGap      = 8 + 12 // preamble and inter-frame gap: on the wire, not in the frame size
	udpIPv4Headers   = 20 + 8 // what a UDP datagram's payload is short of an IPv4 packet
	frameHeaders     = ethernetOverhead + udpIPv4Headers
)

// ParseFrameSize reads an Ethernet frame size in bytes, 64 up to the
// largest frame an MTU of mtu bytes carries (1518 at 1500). IMIX, a mix of
// sizes sent as several streams at once, is refused: it is not built yet.
func ParseFrameSize(s string, mtu int) (int, error) {
	if strings.EqualFold(strings.TrimSpace(s), "imix") {
		return 0, fmt.Errorf("frame size imix: a mix of sizes needs several UDP streams at once, which fwab does not send yet; list the sizes (such as 64, 576, 1518)")
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("frame size %q: give a whole number of bytes, such as 64 or 1518", s)
	}
	if top := mtu + ethernetOverhead; n < 64 || n > top {
		return 0, fmt.Errorf("frame size %d: Ethernet frames are 64 to %d bytes at an MTU of %d", n, top, mtu)
	}
	return n, nil
}

// UDPPayload is the UDP payload (iperf3 -l) that makes an IPv4 datagram
// fill an Ethernet frame of frame bytes: 18 at 64, 1472 at 1518.
func UDPPayload(frame int) int { return frame - frameHeaders }

// FramesPerSecond is the frame rate that carries payloadBPS bits/s of UDP
// payload in frames of frame bytes.
func FramesPerSecond(payloadBPS float64, frame int) float64 {
	return payloadBPS / float64(8*UDPPayload(frame))
}

// WireBPS is the bits/s frames of frame bytes take on the wire at fps
// frames a second, preamble and gap included: what a link's speed counts.
func WireBPS(fps float64, frame int) float64 { return fps * float64(8*(frame+ethernetGap)) }

// Iperf3Trial is a rate search's trial with iperf3 UDP: datagrams that fill
// frames of frame bytes, sent at the asked rate of UDP payload bits/s for
// the trial's duration (whole seconds, at least one), with 64-bit packet
// counters. The sender's CPU at its limit makes the trial
// generator-bound; a probe that fails is an error.
func Iperf3Trial(p Iperf3, client, server Endpoint, frame int) Trial {
	return func(ctx context.Context, rate float64, d time.Duration) (TrialResult, error) {
		q := p
		q.UDP, q.Counters64 = true, true
		q.Length = UDPPayload(frame)
		q.Bitrate = strconv.FormatFloat(rate, 'f', 0, 64)
		q.Duration = max(time.Second, d.Round(time.Second))
		s := q.Run(ctx, client, server)
		if s.Failed {
			return TrialResult{}, fmt.Errorf("trial at %.4g bit/s of %d-byte frames: %s", rate, frame, s.Reason)
		}
		if s.Result.UDP == nil {
			return TrialResult{}, fmt.Errorf("trial at %.4g bit/s of %d-byte frames: the iperf3 report has no loss figures", rate, frame)
		}
		return TrialResult{Offered: s.Result.Flow.SentBPS, Loss: s.Result.UDP.LostPercent, GeneratorBound: s.EndpointCPUBound}, nil
	}
}
