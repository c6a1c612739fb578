package probe

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Iperf3Result is what one iperf3 JSON report (-J) says, read defensively:
// figures that are missing or not finite are left unknown and noted in
// Warnings rather than guessed.
type Iperf3Result struct {
	Version  string
	Cookie   string // shared by a client and its server; ties the two reports together
	Protocol string // "TCP" or "UDP"
	Streams  int
	Reverse  bool    // -R: the server sent
	Bidir    bool    // --bidir: both sent
	Omit     float64 // seconds excluded at the start (-O)
	Seconds  float64 // measured length of the test
	// Peer is the address the reporting side saw the other at: in a
	// server's report the client's own address, or the firewall's where
	// it translates the client's (outbound NAT).
	Peer string

	// Flow is the test's main flow: client to server, or server to client
	// with -R. BidirFlow is the opposite flow of a --bidir test.
	Flow      Flow
	BidirFlow *Flow

	// HostCPU is the CPU use of the iperf3 process that wrote the report;
	// RemoteCPU that of its peer. Nil when the report lacks them.
	HostCPU   *CPU
	RemoteCPU *CPU

	// RTT is the TCP sender's smoothed round-trip time, averaged over the
	// streams; only a Linux sender reports it, so it is nil otherwise.
	RTT *RTT
	// UDP holds jitter and loss of a UDP test.
	UDP *UDPStats

	// Intervals is the per-interval series (for charts); omitted intervals
	// are included and marked.
	Intervals []Interval

	Warnings []string
}

// Flow is one direction of traffic.
type Flow struct {
	SentBPS       float64 // bits/s put on the wire by the sender
	ReceivedBPS   float64 // bits/s the receiver got: the figure to compare
	SentBytes     int64
	ReceivedBytes int64
	Retransmits   int64 // TCP sender retransmits; -1 when not reported
}

// CPU is one iperf3 process's CPU use in percent of one core.
type CPU struct {
	Total, User, System float64
}

// RTT is a TCP round-trip summary.
type RTT struct {
	Min, Mean, Max time.Duration
}

// UDPStats is what the receiver of a UDP test saw.
type UDPStats struct {
	JitterMS    float64
	LostPackets int64
	Packets     int64
	LostPercent float64
}

// PacketsPerSecond is the rate of UDP datagrams the receiver got over the
// measured seconds; 0 when unknown (a TCP test, or no packet counts).
func (r Iperf3Result) PacketsPerSecond() float64 {
	if r.UDP == nil || r.Seconds <= 0 || r.UDP.Packets <= 0 {
		return 0
	}
	return float64(r.UDP.Packets-r.UDP.LostPackets) / r.Seconds
}

// Interval is one reporting interval (usually a second) of the main flow.
type Interval struct {
	Start, End    float64 // seconds from the start of the test
	BitsPerSecond float64
	Retransmits   int64   // -1 when not reported
	BidirBPS      float64 // the opposite flow of a --bidir test
	Omitted       bool
}

// Raw iperf3 JSON. Pointers tell "absent or null" from zero.
type iperfReport struct {
	Start struct {
		Version   string `json:"version"`
		Cookie    string `json:"cookie"`
		Connected []struct {
			RemoteHost string `json:"remote_host"`
		} `json:"connected"`
		TestStart struct {
			Protocol   string `json:"protocol"`
			NumStreams jnum   `json:"num_streams"`
			Omit       jnum   `json:"omit"`
			Reverse    jnum   `json:"reverse"`
			Bidir      jnum   `json:"bidirectional"`
		} `json:"test_start"`
	} `json:"start"`
	Intervals []struct {
		Sum      *iperfSum `json:"sum"`
		SumBidir *iperfSum `json:"sum_bidir_reverse"`
	} `json:"intervals"`
	End struct {
		Streams []struct {
			Sender *struct {
				Sender  *bool `json:"sender"`
				MinRTT  jnum  `json:"min_rtt"`
				MeanRTT jnum  `json:"mean_rtt"`
				MaxRTT  jnum  `json:"max_rtt"`
			} `json:"sender"`
		} `json:"streams"`
		Sum                     *iperfSum `json:"sum"`
		SumSent                 *iperfSum `json:"sum_sent"`
		SumReceived             *iperfSum `json:"sum_received"`
		SumSentBidirReverse     *iperfSum `json:"sum_sent_bidir_reverse"`
		SumReceivedBidirReverse *iperfSum `json:"sum_received_bidir_reverse"`
		CPU                     *struct {
			HostTotal    jnum `json:"host_total"`
			HostUser     jnum `json:"host_user"`
			HostSystem   jnum `json:"host_system"`
			RemoteTotal  jnum `json:"remote_total"`
			RemoteUser   jnum `json:"remote_user"`
			RemoteSystem jnum `json:"remote_system"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
	Error *string `json:"error"`
}

type iperfSum struct {
	Start         jnum  `json:"start"`
	End           jnum  `json:"end"`
	Seconds       jnum  `json:"seconds"`
	Bytes         jnum  `json:"bytes"`
	BitsPerSecond jnum  `json:"bits_per_second"`
	Retransmits   jnum  `json:"retransmits"`
	JitterMS      jnum  `json:"jitter_ms"`
	LostPackets   jnum  `json:"lost_packets"`
	Packets       jnum  `json:"packets"`
	LostPercent   jnum  `json:"lost_percent"`
	Omitted       *bool `json:"omitted"`
}

// Iperf3Error is a report that cannot give a result: iperf3 said why
// (Reported), or the output is empty, truncated or not JSON.
type Iperf3Error struct {
	Reason   string
	Reported bool // the text is iperf3's own "error" field
}

func (e *Iperf3Error) Error() string {
	if e.Reported {
		return "iperf3: " + e.Reason
	}
	return e.Reason
}

// ParseIperf3 reads one iperf3 -J report. It tolerates text before and after
// the JSON object (iperf3 prints some errors after it), bare nan/-nan/inf
// numbers (read as unknown), wrong types and missing fields (each noted in
// Warnings). It returns an *Iperf3Error when there is no usable result:
// iperf3 reported an error, the output is empty or truncated, or the
// received throughput is unknown.
func ParseIperf3(data []byte) (Iperf3Result, error) {
	var res Iperf3Result
	warn := func(format string, args ...any) { res.Warnings = append(res.Warnings, fmt.Sprintf(format, args...)) }
	fail := func(format string, args ...any) (Iperf3Result, error) {
		return res, &Iperf3Error{Reason: fmt.Sprintf(format, args...)}
	}

	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return fail("iperf3 printed nothing")
	}
	open := bytes.IndexByte(trimmed, '{')
	if open < 0 {
		return fail("iperf3 output is not JSON: %s", excerpt(trimmed))
	}
	if open > 0 {
		warn("text before the JSON report: %s", excerpt(trimmed[:open]))
	}
	body, nonFinite := sanitizeNumbers(trimmed[open:])
	if nonFinite > 0 {
		warn("%d non-finite numbers (nan, inf) read as unknown", nonFinite)
	}

	var rep iperfReport
	dec := json.NewDecoder(bytes.NewReader(body))
	err := dec.Decode(&rep)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
	case errors.As(err, &typeErr):
		// Decoding went on past the bad field; the rest is usable.
		warn("field %s has a %s where a %s was expected; ignored", typeErr.Field, typeErr.Value, typeErr.Type)
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF):
		return fail("iperf3 output is truncated: the JSON report ends early after %d bytes", len(body))
	default:
		var syn *json.SyntaxError
		if errors.As(err, &syn) && syn.Offset >= int64(len(body)) {
			return fail("iperf3 output is truncated: the JSON report ends early after %d bytes", len(body))
		}
		return fail("iperf3 output is not valid JSON: %v", err)
	}
	if after := bytes.TrimSpace(body[dec.InputOffset():]); len(after) > 0 {
		warn("text after the JSON report: %s", excerpt(after))
	}

	if rep.Error != nil && strings.TrimSpace(*rep.Error) != "" {
		res.Version = rep.Start.Version
		return res, &Iperf3Error{Reason: strings.TrimSpace(*rep.Error), Reported: true}
	}

	st := rep.Start.TestStart
	res.Version = rep.Start.Version
	res.Cookie = rep.Start.Cookie
	if len(rep.Start.Connected) > 0 {
		res.Peer = rep.Start.Connected[0].RemoteHost
	}
	res.Protocol = strings.ToUpper(st.Protocol)
	res.Streams = int(finiteOr(st.NumStreams, 0))
	res.Reverse = finiteOr(st.Reverse, 0) != 0
	res.Bidir = finiteOr(st.Bidir, 0) != 0 || rep.End.SumSentBidirReverse != nil
	res.Omit = finiteOr(st.Omit, 0)
	if res.Protocol == "" {
		warn("start.test_start.protocol missing; assuming TCP")
		res.Protocol = "TCP"
	}

	end := rep.End
	sent, received := end.SumSent, end.SumReceived
	if res.Protocol == "UDP" && received == nil && end.Sum != nil {
		// Older iperf3 versions give only "sum" for UDP, from the receiver's side.
		warn("end.sum_received missing; using end.sum")
		received = end.Sum
	}
	flow, ok := readFlow(sent, received, "end.sum_sent", "end.sum_received", warn)
	if !ok {
		return fail("iperf3 report has no received throughput (end.sum_received.bits_per_second is missing or not a number)")
	}
	res.Flow = flow
	if received != nil {
		res.Seconds = finiteOr(received.Seconds, 0)
	}
	if res.Bidir {
		back, ok := readFlow(end.SumSentBidirReverse, end.SumReceivedBidirReverse, "end.sum_sent_bidir_reverse", "end.sum_received_bidir_reverse", warn)
		if ok {
			res.BidirFlow = &back
		} else {
			warn("bidirectional test without a usable reverse flow")
		}
	}

	if c := end.CPU; c != nil && finite(c.HostTotal) {
		res.HostCPU = &CPU{Total: c.HostTotal.V, User: finiteOr(c.HostUser, 0), System: finiteOr(c.HostSystem, 0)}
	} else {
		warn("no local CPU figure (end.cpu_utilization_percent.host_total)")
	}
	if c := end.CPU; c != nil && finite(c.RemoteTotal) {
		res.RemoteCPU = &CPU{Total: c.RemoteTotal.V, User: finiteOr(c.RemoteUser, 0), System: finiteOr(c.RemoteSystem, 0)}
	} else {
		warn("no remote CPU figure (end.cpu_utilization_percent.remote_total)")
	}

	res.RTT = readRTT(rep)

	if res.Protocol == "UDP" {
		u := end.Sum
		if received != nil && finite(received.LostPercent) {
			u = received
		}
		if u != nil && finite(u.LostPercent) {
			res.UDP = &UDPStats{
				JitterMS:    finiteOr(u.JitterMS, 0),
				LostPackets: int64(finiteOr(u.LostPackets, 0)),
				Packets:     int64(finiteOr(u.Packets, 0)),
				LostPercent: u.LostPercent.V,
			}
		} else {
			warn("UDP report without loss figures")
		}
	}

	for i, iv := range rep.Intervals {
		if iv.Sum == nil || !finite(iv.Sum.BitsPerSecond) {
			warn("interval %d has no throughput; skipped", i)
			continue
		}
		in := Interval{
			Start:         finiteOr(iv.Sum.Start, 0),
			End:           finiteOr(iv.Sum.End, 0),
			BitsPerSecond: nonNegative(iv.Sum.BitsPerSecond.V),
			Retransmits:   int64(finiteOr(iv.Sum.Retransmits, -1)),
			Omitted:       iv.Sum.Omitted != nil && *iv.Sum.Omitted,
		}
		if iv.SumBidir != nil {
			in.BidirBPS = nonNegative(finiteOr(iv.SumBidir.BitsPerSecond, 0))
		}
		res.Intervals = append(res.Intervals, in)
	}
	return res, nil
}

func readFlow(sent, received *iperfSum, sentName, receivedName string, warn func(string, ...any)) (Flow, bool) {
	f := Flow{Retransmits: -1}
	if received == nil || !finite(received.BitsPerSecond) || received.BitsPerSecond.V < 0 {
		return f, false
	}
	f.ReceivedBPS = received.BitsPerSecond.V
	f.ReceivedBytes = int64(nonNegative(finiteOr(received.Bytes, 0)))
	if sent != nil && finite(sent.BitsPerSecond) {
		f.SentBPS = nonNegative(sent.BitsPerSecond.V)
		f.SentBytes = int64(nonNegative(finiteOr(sent.Bytes, 0)))
		if finite(sent.Retransmits) {
			f.Retransmits = int64(nonNegative(sent.Retransmits.V))
		}
	} else {
		warn("%s.bits_per_second missing; sent rate unknown", sentName)
		f.SentBPS = f.ReceivedBPS
	}
	return f, true
}

// readRTT averages the mean RTT (microseconds in the report) of the streams
// this host sent. A receiving host reports zeros or its peer's figures, so
// streams marked "sender": false are skipped.
func readRTT(rep iperfReport) *RTT {
	var n int
	var sum, lo, hi float64
	lo = math.Inf(1)
	for _, s := range rep.End.Streams {
		snd := s.Sender
		if snd == nil || (snd.Sender != nil && !*snd.Sender) || !finite(snd.MeanRTT) || snd.MeanRTT.V <= 0 {
			continue
		}
		n++
		sum += snd.MeanRTT.V
		if finite(snd.MinRTT) && snd.MinRTT.V > 0 {
			lo = math.Min(lo, snd.MinRTT.V)
		}
		if finite(snd.MaxRTT) {
			hi = math.Max(hi, snd.MaxRTT.V)
		}
	}
	if n == 0 {
		return nil
	}
	if math.IsInf(lo, 1) {
		lo = 0
	}
	us := func(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }
	return &RTT{Min: us(lo), Mean: us(sum / float64(n)), Max: us(hi)}
}

// jnum is a JSON number read leniently: a number, or a string holding one.
// Anything else (null, nan, another type) leaves it unknown, not zero.
type jnum struct {
	V  float64
	OK bool
}

func (n *jnum) UnmarshalJSON(b []byte) error {
	s := strings.TrimSpace(string(b))
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		*n = jnum{}
		return nil
	}
	*n = jnum{V: v, OK: true}
	return nil
}

func finite(n jnum) bool { return n.OK }

func finiteOr(n jnum, def float64) float64 {
	if n.OK {
		return n.V
	}
	return def
}

func nonNegative(v float64) float64 {
	if v < 0 || math.IsNaN(v) {
		return 0
	}
	return v
}

func excerpt(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// sanitizeNumbers replaces bare words other than true, false and null that
// appear outside strings (nan, -nan, inf, -inf, infinity, as C's printf
// writes them) with null, and returns how many it replaced. It works on the
// first JSON value only (in starts with it) and copies what follows as is.
func sanitizeNumbers(in []byte) ([]byte, int) {
	out := make([]byte, 0, len(in))
	n := 0
	inString, escaped := false, false
	depth := 0
	for i := 0; i < len(in); i++ {
		c := in[i]
		if depth == 0 && i > 0 {
			// The first value has ended: what follows is not ours to change.
			return append(out, in[i:]...), n
		}
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString = true
			out = append(out, c)
		case c == '{' || c == '[':
			depth++
			out = append(out, c)
		case c == '}' || c == ']':
			depth--
			out = append(out, c)
		case (c == '-' || c == '+') && i+1 < len(in) && isLetter(in[i+1]), isLetter(c):
			j := i
			if c == '-' || c == '+' {
				j++
			}
			for j < len(in) && isLetter(in[j]) {
				j++
			}
			word := string(in[i:j])
			switch word {
			case "true", "false", "null":
				out = append(out, word...)
			default:
				out = append(out, "null"...)
				n++
			}
			i = j - 1
		case c >= '0' && c <= '9':
			// A number, exponent included: copy it whole so that its
			// 'e' is not read as a word.
			j := i
			for j < len(in) && strings.IndexByte("0123456789.eE+-", in[j]) >= 0 {
				j++
			}
			out = append(out, in[i:j]...)
			i = j - 1
		default:
			out = append(out, c)
		}
	}
	return out, n
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
