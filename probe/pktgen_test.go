package probe

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The FreeBSD tools' answers below are written from their formats (no
// FreeBSD host or netmap kernel is at hand to record them): pkt-gen's from
// its printf at apps/pkt-gen/pkt-gen.c:2454, route(8)'s, ifconfig(8)'s and
// arp(8)'s as FreeBSD 14 prints them.
const (
	bsdRouteGet = `   route to: 198.19.1.10
destination: 198.19.1.0
       mask: 255.255.255.0
    gateway: 198.18.1.1
        fib: 0
  interface: vtnet1
      flags: <UP,GATEWAY,DONE,STATIC>
 recvpipe  sendpipe  ssthresh  rtt,msec    mtu        weight    expire
       0         0         0         0      1500         1         0
`
	bsdIfconfig = "vtnet1: flags=1008843<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST,LOWER_UP> metric 0 mtu 1500\n" +
		"\toptions=4c07bb<RXCSUM,TXCSUM,VLAN_MTU,VLAN_HWTAGGING,JUMBO_MTU,VLAN_HWCSUM,TSO4,TSO6,LRO,VLAN_HWTSO,LINKSTATE,TXCSUM_IPV6>\n" +
		"\tinet 198.18.1.10 netmask 0xffffff00 broadcast 198.18.1.255\n"
	bsdArp = "? (198.18.1.1) at 58:9C:FC:00:00:01 on vtnet1 expires in 1199 seconds [ethernet]\n"
)

func TestParsePktGen(t *testing.T) {
	rep, err := parsePktGen("Sending on netmap:vtnet1: 1 queues, 1 threads and 1 cpus.\n" +
		"Sent 300000 packets 18000000 bytes 1172 events 60 bytes each in 2.02 seconds.\n" +
		"Speed: 148.51 Kpps Bandwidth: 71.29 Mbps (raw 99.80 Mbps). Average batch: 255.97 pkts\n")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Packets != 300000 || rep.Elapsed != 2020*time.Millisecond {
		t.Errorf("parsePktGen = %+v, want 300000 packets in 2.02 s", rep)
	}
	if rep, err := parsePktGen("Sent nothing.\n"); err != nil || rep.Packets != 0 {
		t.Errorf("parsePktGen(Sent nothing.) = %+v, %v; want 0 packets", rep, err)
	}
	for _, bad := range []string{"", "pkt-gen: Unable to open netmap:vtnet1\n", "Received 12 packets 720 bytes 1 events 60 bytes each in 1.00 seconds.\n"} {
		if _, err := parsePktGen(bad); err == nil {
			t.Errorf("parsePktGen(%q) = nil error, want one", bad)
		}
	}
}

func TestFreeBSDPathParsers(t *testing.T) {
	if dev, gw := freebsdRoute(bsdRouteGet); dev != "vtnet1" || gw != "198.18.1.1" {
		t.Errorf("freebsdRoute = %q, %q; want vtnet1, 198.18.1.1", dev, gw)
	}
	if got := ifAddrs(bsdIfconfig + "\tinet 198.19.255.5 netmask 0xffffff00 broadcast 198.19.255.255\n"); !slices.Equal(got, []string{"198.18.1.10", "198.19.255.5"}) {
		t.Errorf("ifAddrs = %q", got)
	}
	if m := arpRE.FindStringSubmatch(bsdArp); m == nil || m[1] != "58:9C:FC:00:00:01" {
		t.Errorf("arpRE on %q = %q", bsdArp, m)
	}
	if m := arpRE.FindStringSubmatch("198.18.1.1 (198.18.1.1) -- no entry\n"); m != nil {
		t.Errorf("arpRE matched an absent entry: %q", m)
	}
}

func TestPktGenCommandLine(t *testing.T) {
	p := trafgenPath{Dev: "vtnet1", Src: "198.18.1.10", NextMAC: "58:9c:fc:00:00:01", RxDev: "eth2"}
	got := PktGen{}.pktgenArgs(p, "198.19.1.10", 64, 148809.5, 297619, 12*time.Second)
	want := []string{"timeout", "--preserve-status", "-s", "INT", "12", "pkt-gen", "-i", "vtnet1", "-f", "tx", "-l", "60",
		"-s", "198.18.1.10:49161", "-d", "198.19.1.10:9", "-D", "58:9c:fc:00:00:01", "-R", "148810", "-b", "148", "-n", "297619", "-w", "2"}
	if !slices.Equal(got, want) {
		t.Errorf("pktgenArgs =\n%q\nwant\n%q", got, want)
	}
	if _, err := (PktGen{}).frameOf(IMIX); err == nil || !strings.Contains(err.Error(), "one size") {
		t.Errorf("frameOf(IMIX) = %v, want a refusal naming one size", err)
	}
	// A slow rate still sends bursts of 8.
	if got := (PktGen{}).pktgenArgs(p, "198.19.1.10", 1518, 1000, 1000, 12*time.Second); got[slices.Index(got, "-b")+1] != "8" {
		t.Errorf("pktgenArgs at 1000 frames/s: -b %s, want 8", got[slices.Index(got, "-b")+1])
	}
}

// bsdWire is a FreeBSD sender with pkt-gen, a firewall that forwards at
// most capFPS frames a second, and a Linux receiver, as the commands see
// them. sshOn, when set, is the sender's address SSH_CONNECTION names.
type bsdWire struct {
	capFPS  float64
	sshOn   string
	sendNil bool // pkt-gen sends nothing

	mu    sync.Mutex
	rx    int64
	rates []int64
	nft   int
}

func (w *bsdWire) Run(_ context.Context, argv []string) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if argv[0] == "timeout" { // timeout --preserve-status -s INT N pkt-gen …
		argv = argv[5:]
	}
	line := strings.Join(argv, " ")
	switch {
	case line == "uname -s":
		return []byte("FreeBSD\n"), nil
	case strings.HasPrefix(line, "sh -c pkt-gen -h"), line == "sysctl -n dev.netmap.admode", line == "nft --version", line == "test -r /dev/netmap -a -w /dev/netmap":
		return []byte("0\n"), nil
	case line == `sh -c echo "$SSH_CONNECTION"`:
		if w.sshOn == "" {
			return []byte("\n"), nil
		}
		return []byte("198.18.0.7 50022 " + w.sshOn + " 22\n"), nil
	case line == "route -n get 198.19.1.10":
		return []byte(bsdRouteGet), nil
	case line == "ifconfig vtnet1 inet":
		return []byte(bsdIfconfig), nil
	case strings.HasPrefix(line, "ping -c 1 -t 1 "):
		return nil, nil
	case line == "arp -n 198.18.1.1":
		return []byte(bsdArp), nil
	case line == "ip -j route get 198.18.1.10":
		return []byte(`[{"dst":"198.18.1.10","gateway":"198.19.1.1","dev":"eth2","prefsrc":"198.19.1.10"}]`), nil
	case strings.HasPrefix(line, "cat /sys/class/net/eth2/"):
		return []byte("0\n0\n"), nil
	case argv[0] == "nft" && strings.HasPrefix(argv[1], "add table netdev "):
		w.nft++
		w.rx = 0
		return nil, nil
	case argv[0] == "nft" && argv[1] == "-j":
		return fmt.Appendf(nil, `{"nftables": [{"rule": {"expr": [{"counter": {"packets": %d, "bytes": 0}}]}}]}`, w.rx), nil
	case argv[0] == "nft" && argv[1] == "delete":
		w.nft--
		return nil, nil
	case argv[0] == "pkt-gen" && w.sendNil:
		return []byte("Sent nothing.\n"), nil
	case argv[0] == "pkt-gen":
		n, _ := strconv.ParseInt(argv[slices.Index(argv, "-n")+1], 10, 64)
		fps, _ := strconv.ParseInt(argv[slices.Index(argv, "-R")+1], 10, 64)
		w.rates = append(w.rates, fps)
		secs := float64(n) / float64(fps)
		w.rx += int64(math.Min(float64(n), w.capFPS*secs))
		l, _ := strconv.Atoi(argv[slices.Index(argv, "-l")+1])
		return fmt.Appendf(nil, "Sent %d packets %d bytes %d events %d bytes each in %.2f seconds.\n", n, n*int64(l), n/256+1, l, secs), nil
	}
	return nil, fmt.Errorf("bsdWire: unexpected command %q", line)
}

func (w *bsdWire) Start(context.Context, []string) (Process, error) {
	return nil, errors.New("bsdWire: nothing starts in the background")
}

func TestPktGenTrialFindsTheCap(t *testing.T) {
	const capFPS = 100e6 / (8 * 60) // a 100 Mbit/s tbf, 64-byte frames (60 without FCS)
	frames := OneFrameSize(64)
	search := RateSearch{Max: 1e9 * frames.MeanPayload() / (frames.MeanFrame() + 20), Width: 0.005, InitialDuration: time.Second, FinalDuration: 2 * time.Second}
	w := &bsdWire{capFPS: capFPS}
	sender := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
	receiver := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
	if _, err := (PktGen{}).Check(t.Context(), sender, receiver); err != nil {
		t.Fatalf("Check: %v", err)
	}
	s := NDR{Frames: frames, Search: search, Packets: PktGen{}}.Measure(t.Context(), sender, receiver, Watch{})
	if s.Failed {
		t.Fatalf("the search failed: %s", s.Reason)
	}
	r := s.NDR
	if r.Generator != "pkt-gen" || r.Limited {
		t.Errorf("generator %q, limited %v; want pkt-gen, not limited", r.Generator, r.Limited)
	}
	if ratio := r.FPS / capFPS; math.Abs(ratio-1) > 0.02 {
		t.Errorf("found %.0f frames/s, %.3f of the cap's %.0f; want within 2 %%", r.FPS, ratio, capFPS)
	}
	if w.nft != 0 {
		t.Errorf("%d nft tables left on the receiver", w.nft)
	}
}

func TestPktGenRefusesTheSSHInterface(t *testing.T) {
	w := &bsdWire{capFPS: 1e6, sshOn: "198.18.1.10"}
	sender := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
	receiver := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
	_, err := (PktGen{}).Check(t.Context(), sender, receiver)
	var fix *fixError
	if !errors.As(err, &fix) || !strings.Contains(err.Error(), "vtnet1") || !strings.Contains(err.Error(), "another interface") {
		t.Fatalf("Check with SSH over the sending interface = %v; want a refusal naming vtnet1 and the fix", err)
	}
	if len(w.rates) != 0 {
		t.Errorf("pkt-gen ran %d times before the refusal", len(w.rates))
	}
	// A session over another interface is no reason to refuse.
	w.sshOn = "198.19.255.5"
	if _, err := (PktGen{}).Check(t.Context(), sender, receiver); err != nil {
		t.Errorf("Check with SSH over another interface: %v", err)
	}
}

// TestPktGenRefusals: what pkt-gen cannot send is refused before a trial
// with the fix named: frames past the interface's MTU (pkt-gen exits on
// them), a receiver that is no IPv4 address, a first trial that sent
// nothing.
func TestPktGenRefusals(t *testing.T) {
	w := &bsdWire{capFPS: 1e6}
	sender := Endpoint{Name: "client", Addr: "198.18.1.10", Runner: w}
	receiver := Endpoint{Name: "server", Addr: "198.19.1.10", Runner: w}
	trial := PktGen{}.Trial(sender, receiver, OneFrameSize(1518))
	if _, err := trial(t.Context(), 1e6, time.Second); err == nil || !strings.Contains(err.Error(), "ifconfig vtnet1 mtu 1514") {
		t.Errorf("1518-byte frames from a 1500-byte MTU = %v; want a refusal naming ifconfig vtnet1 mtu 1514", err)
	}
	if len(w.rates) != 0 {
		t.Errorf("pkt-gen ran %d times for frames it refuses", len(w.rates))
	}
	if _, err := (PktGen{}).Trial(sender, receiver, OneFrameSize(1504))(t.Context(), 1e6, time.Second); err != nil {
		t.Errorf("1504-byte frames (1500 without the FCS) from a 1500-byte MTU: %v", err)
	}
	v6 := Endpoint{Name: "server", Addr: "2001:db8::10", Runner: w}
	if _, err := (PktGen{}).Check(t.Context(), sender, v6); err == nil || !strings.Contains(err.Error(), "IPv4") {
		t.Errorf("Check to an IPv6 receiver = %v; want a refusal naming IPv4", err)
	}
	w.sendNil = true
	if _, err := (PktGen{}).Check(t.Context(), sender, receiver); err == nil || !strings.Contains(err.Error(), "sent nothing") {
		t.Errorf("Check when pkt-gen sent nothing = %v; want it said", err)
	}
}
