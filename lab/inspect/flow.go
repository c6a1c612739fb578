package inspect

import "net/netip"

// maxFlows bounds a flow table; when it is full it starts over, which only
// means some flows get inspected again from their next byte.
const maxFlows = 1 << 16

type flowKey struct {
	src, dst     netip.Addr
	sport, dport uint16
}

// flowTable limits content inspection to the first depth bytes of each TCP
// flow direction, as Suricata's stream.reassembly.depth does (1 MiB by
// default there). Each consumer goroutine has its own table: a flow always
// reaches the same queue (--queue-balance hashes flows) or capture.
type flowTable struct {
	depth uint64
	seen  map[flowKey]uint64
}

func newFlowTable(depth uint64) *flowTable {
	if depth == 0 {
		return nil
	}
	return &flowTable{depth: depth, seen: map[flowKey]uint64{}}
}

// window returns the part of the packet's payload still within depth, and
// how many payload bytes lie beyond it. A nil table inspects everything.
func (f *flowTable) window(info packetInfo) (scan []byte, beyond int) {
	if f == nil || !info.tcp || len(info.payload) == 0 {
		return info.payload, 0
	}
	k := flowKey{info.src, info.dst, info.sport, info.dport}
	n, ok := f.seen[k]
	if !ok && len(f.seen) >= maxFlows {
		clear(f.seen)
	}
	f.seen[k] = n + uint64(len(info.payload))
	if n >= f.depth {
		return nil, len(info.payload)
	}
	if rest := f.depth - n; uint64(len(info.payload)) > rest {
		return info.payload[:rest], len(info.payload) - int(rest)
	}
	return info.payload, 0
}
