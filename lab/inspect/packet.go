package inspect

import (
	"encoding/binary"
	"net/netip"
)

// packetInfo is what the engine needs from an IP packet: where it comes from
// and the bytes the rules are matched against.
type packetInfo struct {
	src, dst     netip.Addr
	tcp          bool   // payload is TCP data
	sport, dport uint16 // TCP or UDP ports
	payload      []byte // transport payload (TCP/UDP data), or what follows the IP header
}

// parsePacket reads an IPv4 or IPv6 packet as queued by NFQUEUE or captured
// by a cooked AF_PACKET socket (no link-layer header). ok is false for
// anything too short or not IP.
func parsePacket(p []byte) (info packetInfo, ok bool) {
	if len(p) < 1 {
		return info, false
	}
	var proto byte
	var rest []byte
	switch p[0] >> 4 {
	case 4:
		if len(p) < 20 {
			return info, false
		}
		ihl := int(p[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(p[2:4]))
		if ihl < 20 || len(p) < ihl {
			return info, false
		}
		// A GSO packet may carry a zero total length; trust the buffer then.
		if total >= ihl && total < len(p) {
			p = p[:total]
		}
		info.src = netip.AddrFrom4([4]byte(p[12:16]))
		info.dst = netip.AddrFrom4([4]byte(p[16:20]))
		proto = p[9]
		// Later fragments carry no transport header.
		if binary.BigEndian.Uint16(p[6:8])&0x1fff != 0 {
			info.payload = p[ihl:]
			return info, true
		}
		rest = p[ihl:]
	case 6:
		if len(p) < 40 {
			return info, false
		}
		info.src = netip.AddrFrom16([16]byte(p[8:24]))
		info.dst = netip.AddrFrom16([16]byte(p[24:40]))
		proto = p[6]
		rest = p[40:]
	default:
		return info, false
	}
	switch proto {
	case 6: // TCP
		if len(rest) >= 20 {
			off := int(rest[12]>>4) * 4
			if off >= 20 && off <= len(rest) {
				info.tcp = true
				info.sport = binary.BigEndian.Uint16(rest[0:2])
				info.dport = binary.BigEndian.Uint16(rest[2:4])
				info.payload = rest[off:]
				return info, true
			}
		}
	case 17: // UDP
		if len(rest) >= 8 {
			info.sport = binary.BigEndian.Uint16(rest[0:2])
			info.dport = binary.BigEndian.Uint16(rest[2:4])
			info.payload = rest[8:]
			return info, true
		}
	}
	info.payload = rest
	return info, true
}
