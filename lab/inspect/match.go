package inspect

import (
	"fmt"
	"slices"
)

// denseStates caps how many states (in breadth-first order, so the root and
// the shallowest states first) get a full 256-entry transition row. Random
// traffic spends nearly all its time in these states; deeper states keep a
// sorted edge list and fall back through their failure link. More rows than
// this fall out of the L2 cache and make the scan slower, not faster
// (measured with BenchmarkScan10k: 1024 rows 124 MB/s, 4096 rows 52 MB/s).
const denseStates = 1024

// Matcher is an Aho-Corasick automaton over byte patterns. It finds every
// occurrence of every pattern in one left-to-right pass over the input.
// A Matcher is immutable once built and safe for concurrent use.
type Matcher struct {
	dense     []int32 // dense[s*256+b]: next state for the first nDense states
	nDense    int32
	edgeStart []int32 // per state: its edges are edgeByte/edgeNext[edgeStart[s]:edgeStart[s+1]]
	edgeByte  []byte
	edgeNext  []int32
	fail      []int32
	term      []bool    // the state or a suffix of it ends a pattern
	out       [][]int32 // patterns ending exactly at the state
	dict      []int32   // nearest proper suffix state with output, or -1
	patterns  int
	maxLen    int
}

// NewMatcher builds an automaton for patterns; a pattern's index is its id
// in Scan. Empty patterns are refused: they would match everywhere.
func NewMatcher(patterns [][]byte) (*Matcher, error) {
	type node struct {
		next  map[byte]int32
		depth int
	}
	nodes := []node{{next: map[byte]int32{}}}
	own := [][]int32{nil}
	maxLen := 0
	for id, p := range patterns {
		if len(p) == 0 {
			return nil, fmt.Errorf("pattern %d is empty", id)
		}
		s := int32(0)
		for _, b := range p {
			t, ok := nodes[s].next[b]
			if !ok {
				t = int32(len(nodes))
				nodes = append(nodes, node{next: map[byte]int32{}, depth: nodes[s].depth + 1})
				own = append(own, nil)
				nodes[s].next[b] = t
			}
			s = t
		}
		own[s] = append(own[s], int32(id))
		maxLen = max(maxLen, len(p))
	}

	// Renumber states in breadth-first order so that dense rows go to the
	// shallowest states and failure links always point to a smaller number.
	n := len(nodes)
	order := make([]int32, 0, n)
	order = append(order, 0)
	for i := 0; i < len(order); i++ {
		nx := nodes[order[i]].next
		keys := make([]byte, 0, len(nx))
		for b := range nx {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		for _, b := range keys {
			order = append(order, nx[b])
		}
	}
	newID := make([]int32, n)
	for i, old := range order {
		newID[old] = int32(i)
	}

	m := &Matcher{
		nDense:    int32(min(n, denseStates)),
		edgeStart: make([]int32, n+1),
		fail:      make([]int32, n),
		term:      make([]bool, n),
		out:       make([][]int32, n),
		dict:      make([]int32, n),
		patterns:  len(patterns),
		maxLen:    maxLen,
	}
	for i, old := range order {
		m.out[i] = own[old]
		nx := nodes[old].next
		keys := make([]byte, 0, len(nx))
		for b := range nx {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		m.edgeStart[i] = int32(len(m.edgeByte))
		for _, b := range keys {
			m.edgeByte = append(m.edgeByte, b)
			m.edgeNext = append(m.edgeNext, newID[nx[b]])
		}
	}
	m.edgeStart[n] = int32(len(m.edgeByte))

	// Failure and dictionary links, breadth first (state order is BFS order).
	m.dict[0] = -1
	for s := int32(0); s < int32(n); s++ {
		for e := m.edgeStart[s]; e < m.edgeStart[s+1]; e++ {
			b, t := m.edgeByte[e], m.edgeNext[e]
			if s == 0 {
				m.fail[t] = 0
			} else {
				m.fail[t] = m.gotoSparse(m.fail[s], b)
			}
			f := m.fail[t]
			if len(m.out[f]) > 0 {
				m.dict[t] = f
			} else {
				m.dict[t] = m.dict[f]
			}
			m.term[t] = len(m.out[t]) > 0 || m.dict[t] >= 0
		}
	}

	m.dense = make([]int32, int(m.nDense)*256)
	for s := int32(0); s < m.nDense; s++ {
		for b := 0; b < 256; b++ {
			if s == 0 {
				m.dense[b] = m.edge(0, byte(b))
				if m.dense[b] < 0 {
					m.dense[b] = 0
				}
				continue
			}
			if t := m.edge(s, byte(b)); t >= 0 {
				m.dense[int(s)*256+b] = t
			} else {
				// fail[s] < s, so its row is already complete.
				m.dense[int(s)*256+b] = m.dense[int(m.fail[s])*256+b]
			}
		}
	}
	return m, nil
}

// edge is the goto function: the child of s on b, or -1.
func (m *Matcher) edge(s int32, b byte) int32 {
	lo, hi := m.edgeStart[s], m.edgeStart[s+1]
	for lo < hi {
		mid := int32(uint32(lo+hi) >> 1)
		switch c := m.edgeByte[mid]; {
		case c == b:
			return m.edgeNext[mid]
		case c < b:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return -1
}

// gotoSparse follows failure links from s until a state has an edge on b,
// using only the trie (it runs before the dense rows exist).
func (m *Matcher) gotoSparse(s int32, b byte) int32 {
	for {
		if t := m.edge(s, b); t >= 0 {
			return t
		}
		if s == 0 {
			return 0
		}
		s = m.fail[s]
	}
}

// step is the automaton's transition function.
func (m *Matcher) step(s int32, b byte) int32 {
	for s >= m.nDense {
		if t := m.edge(s, b); t >= 0 {
			return t
		}
		s = m.fail[s]
	}
	return m.dense[int(s)*256+int(b)]
}

// lanes is how many independent automaton walks one Scan interleaves. A
// single walk is a chain of dependent table loads; interleaving several
// over separate parts of the payload lets the CPU overlap their cache
// misses.
const lanes = 4

// minLaneBytes is the payload size below which Scan walks in one lane.
const minLaneBytes = 512

// Scan reports every occurrence of every pattern in p, in order of the
// position where the occurrence ends (longer patterns first at one end
// position), by calling found with the pattern id and the end offset
// (exclusive). Scan stops early when found returns false.
//
// Long payloads are cut into lanes walked in one interleaved pass; each lane
// starts maxLen-1 bytes before its part so that no occurrence across a cut
// is missed, and reports only occurrences ending inside its part.
func (m *Matcher) Scan(p []byte, found func(id, end int) bool) {
	if len(p) < minLaneBytes || len(p) < lanes*4*m.maxLen {
		m.scanLane(p, 0, len(p), 0, found)
		return
	}
	overlap := m.maxLen - 1
	part := len(p) / lanes
	var lo, hi, from [lanes]int
	for k := range lanes {
		from[k] = k * part
		lo[k] = max(0, from[k]-overlap)
		hi[k] = (k + 1) * part
	}
	hi[lanes-1] = len(p)

	var hits [lanes][]hitAt
	var st [lanes]int32
	dense, nDense, term := m.dense, m.nDense, m.term
	common := part // lane 0 is the shortest
	for j := range common {
		for k := range lanes {
			b := p[lo[k]+j]
			s := st[k]
			if s < nDense {
				s = dense[int(s)<<8|int(b)]
			} else {
				s = m.step(s, b)
			}
			st[k] = s
			if term[s] {
				hits[k] = m.collect(hits[k], s, lo[k]+j+1, from[k])
			}
		}
	}
	for k := range lanes {
		s := st[k]
		for i := lo[k] + common; i < hi[k]; i++ {
			b := p[i]
			if s < nDense {
				s = dense[int(s)<<8|int(b)]
			} else {
				s = m.step(s, b)
			}
			if term[s] {
				hits[k] = m.collect(hits[k], s, i+1, from[k])
			}
		}
	}
	for k := range lanes {
		for _, h := range hits[k] {
			if !found(int(h.id), h.end) {
				return
			}
		}
	}
}

type hitAt struct {
	id  int32
	end int
}

// collect appends the occurrences ending in state s at end, if end lies
// past from (the start of the lane's own part).
func (m *Matcher) collect(dst []hitAt, s int32, end, from int) []hitAt {
	if end <= from {
		return dst
	}
	for t := s; t >= 0; t = m.dict[t] {
		for _, id := range m.out[t] {
			dst = append(dst, hitAt{id, end})
		}
	}
	return dst
}

// scanLane walks p[lo:hi] in one lane, reporting occurrences ending after from.
func (m *Matcher) scanLane(p []byte, lo, hi, from int, found func(id, end int) bool) {
	s := int32(0)
	dense, nDense := m.dense, m.nDense
	for i := lo; i < hi; i++ {
		b := p[i]
		if s < nDense {
			s = dense[int(s)<<8|int(b)]
		} else {
			s = m.step(s, b)
		}
		if !m.term[s] || i+1 <= from {
			continue
		}
		for t := s; t >= 0; t = m.dict[t] {
			for _, id := range m.out[t] {
				if !found(int(id), i+1) {
					return
				}
			}
		}
	}
}
