package fwapitest

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures/transcripts"
)

// PfSenseVersion is what the fake pfSense's /etc/version holds.
const PfSenseVersion = "2.7.2-RELEASE"

// MinimalPfSenseConfig is a small, valid pfSense config.xml.
const MinimalPfSenseConfig = `<?xml version="1.0"?>
<pfsense>
	<version>23.3</version>
	<lastchange></lastchange>
	<system>
		<hostname>fw1</hostname>
		<domain>lab.example</domain>
		<disablesegmentationoffloading></disablesegmentationoffloading>
		<disablelargereceiveoffloading></disablelargereceiveoffloading>
	</system>
	<interfaces>
		<wan>
			<enable></enable>
			<if>igb0</if>
			<ipaddr>198.19.0.1</ipaddr>
			<subnet>24</subnet>
		</wan>
		<lan>
			<enable></enable>
			<if>igb1</if>
			<ipaddr>198.18.1.1</ipaddr>
			<subnet>24</subnet>
		</lan>
	</interfaces>
	<filter>
		<rule>
			<type>pass</type>
			<interface>lan</interface>
			<ipprotocol>inet</ipprotocol>
			<source><network>lan</network></source>
			<destination><any></any></destination>
			<descr><![CDATA[Default allow LAN to any rule]]></descr>
		</rule>
	</filter>
	<nat><outbound><mode>automatic</mode></outbound></nat>
</pfsense>
`

// pfSenseActions maps the pfSense service commands to the action each is.
var pfSenseActions = map[string]configxml.Action{
	"/etc/rc.filter_configure_sync":                                        configxml.ActionFilterReload,
	"/etc/rc.reload_interfaces":                                            configxml.ActionInterfaces,
	"/usr/local/etc/rc.d/suricata.sh restart":                              configxml.ActionIDSRestart,
	"/usr/local/sbin/pfSsh.php playback restartipsec":                      configxml.ActionIPsecRestart,
	"/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php update": configxml.ActionBlocklistUpdate,
	"/etc/rc.reload_all":                                                   "reload-all",
}

// PfSense is a fake pfSense box: an SSHServer with pfSense's files, the
// recorded transcripts, service commands that record the action they stand
// for, an ifconfig whose offload flags can be changed, and kern.cp_times
// counters that advance.
type PfSense struct {
	*SSHServer

	mu      sync.Mutex
	actions []configxml.Action
	ticks   uint64
}

// NewPfSense starts a fake pfSense holding config as /conf/config.xml.
func NewPfSense(t testing.TB, config string) *PfSense {
	t.Helper()
	s := NewSSHServer(t)
	s.LoadTranscripts(t, transcripts.PfSense, "pfsense/*.txt")
	s.WriteFile(t, "/conf/config.xml", []byte(config))
	s.WriteFile(t, "/etc/version", []byte(PfSenseVersion+"\n"))
	p := &PfSense{SSHServer: s}
	for cmd, a := range pfSenseActions {
		name := strings.Fields(cmd)[0]
		s.Handle(name, p.service)
		_ = a
	}
	s.Handle("ifconfig", p.ifconfig)
	s.Handle("sysctl", p.sysctl)
	s.Handle("shutdown", func(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
		if strings.Join(args, " ") != "shutdown -r now" {
			s.t.Errorf("fake pfSense: unexpected command %q", strings.Join(args, " "))
			return 1
		}
		p.reboot("reboot")
		return 0
	})
	s.Handle("/usr/local/sbin/pfSense-upgrade", func(_ context.Context, s *SSHServer, args []string, _ io.Reader, stdout, stderr io.Writer) int {
		if len(args) < 2 || args[1] != "-y" || len(args) > 3 {
			s.t.Errorf("fake pfSense: unexpected command %q", strings.Join(args, " "))
			return 1
		}
		version := "2.8.0-RELEASE"
		if len(args) == 3 {
			version = args[2]
		}
		fmt.Fprintln(stdout, ">>> Updating repositories metadata... done.")
		fmt.Fprintln(stdout, ">>> Upgrading pfSense-base... done.")
		fmt.Fprintln(stdout, "Upgrade is complete. Rebooting in 10 seconds.")
		s.WriteFile(s.t, "/etc/version", []byte(version+"\n"))
		p.reboot("firmware-upgrade")
		return 0
	})
	return p
}

func (p *PfSense) record(a configxml.Action) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actions = append(p.actions, a)
}

// Actions returns the service actions run so far, in order.
func (p *PfSense) Actions() []configxml.Action {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]configxml.Action(nil), p.actions...)
}

// ResetActions forgets the actions run so far.
func (p *PfSense) ResetActions() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actions = nil
}

func (p *PfSense) service(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	line := strings.Join(args, " ")
	a, ok := pfSenseActions[line]
	if !ok {
		s.t.Errorf("fake pfSense: unexpected command %q", line)
		fmt.Fprintf(stderr, "%s: bad arguments\n", args[0])
		return 1
	}
	p.record(a)
	return 0
}

// ifconfigFlags maps ifconfig arguments to the options they switch.
var ifconfigFlags = map[string][]string{
	"txcsum":    {"TXCSUM"},
	"rxcsum":    {"RXCSUM"},
	"txcsum6":   {"TXCSUM_IPV6"},
	"rxcsum6":   {"RXCSUM_IPV6"},
	"tso":       {"TSO4", "TSO6"},
	"tso4":      {"TSO4"},
	"tso6":      {"TSO6"},
	"lro":       {"LRO"},
	"vlanhwtso": {"VLAN_HWTSO"},
}

// ifconfig answers `ifconfig -a`, `ifconfig IF` and `ifconfig IF [-]flag...`
// from the recorded `ifconfig -a`, which flag changes edit.
func (p *PfSense) ifconfig(_ context.Context, s *SSHServer, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	all, _ := s.TranscriptOutput("ifconfig -a")
	blocks := splitIfconfig(all)
	if len(args) < 2 {
		fmt.Fprintln(stderr, "usage: ifconfig [-a | interface [parameters]]")
		return 1
	}
	name := args[1]
	idx := -1
	for i, b := range blocks {
		if strings.HasPrefix(b, name+": ") {
			idx = i
		}
	}
	if idx < 0 {
		fmt.Fprintf(stderr, "ifconfig: interface %s does not exist\n", name)
		return 1
	}
	if len(args) == 2 {
		io.WriteString(stdout, blocks[idx])
		return 0
	}
	for _, a := range args[2:] {
		word := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "+")
		opts, ok := ifconfigFlags[word]
		if !ok {
			fmt.Fprintf(stderr, "ifconfig: %s: bad value\n", a)
			return 1
		}
		blocks[idx] = setOptions(blocks[idx], opts, !strings.HasPrefix(a, "-"))
	}
	s.Transcript("ifconfig -a", Reply{Stdout: strings.Join(blocks, "")})
	return 0
}

func splitIfconfig(out string) []string {
	var blocks []string
	for _, l := range strings.SplitAfter(out, "\n") {
		if l == "" {
			continue
		}
		if l[0] != '\t' && l[0] != ' ' || len(blocks) == 0 {
			blocks = append(blocks, l)
			continue
		}
		blocks[len(blocks)-1] += l
	}
	return blocks
}

// ifcapBits are FreeBSD's IFCAP_* values, for the options=HEX field.
var ifcapBits = map[string]uint64{
	"RXCSUM": 0x1, "TXCSUM": 0x2, "NETCONS": 0x4, "VLAN_MTU": 0x8, "VLAN_HWTAGGING": 0x10,
	"JUMBO_MTU": 0x20, "POLLING": 0x40, "VLAN_HWCSUM": 0x80, "TSO4": 0x100, "TSO6": 0x200,
	"LRO": 0x400, "WOL_UCAST": 0x800, "WOL_MCAST": 0x1000, "WOL_MAGIC": 0x2000, "TOE4": 0x4000,
	"TOE6": 0x8000, "VLAN_HWFILTER": 0x10000, "VLAN_HWTSO": 0x40000, "LINKSTATE": 0x80000,
	"NETMAP": 0x100000, "RXCSUM_IPV6": 0x200000, "TXCSUM_IPV6": 0x400000, "HWSTATS": 0x800000,
	"TXRTLMT": 0x1000000, "HWRXTSTMP": 0x2000000, "MEXTPG": 0x4000000,
}

// ifcapOrder is the order ifconfig prints the options in.
var ifcapOrder = []string{"RXCSUM", "TXCSUM", "NETCONS", "VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "POLLING", "VLAN_HWCSUM", "TSO4", "TSO6", "LRO", "WOL_UCAST", "WOL_MCAST", "WOL_MAGIC", "TOE4", "TOE6", "VLAN_HWFILTER", "VLAN_HWTSO", "LINKSTATE", "NETMAP", "RXCSUM_IPV6", "TXCSUM_IPV6", "HWSTATS", "TXRTLMT", "HWRXTSTMP", "MEXTPG"}

func setOptions(block string, opts []string, on bool) string {
	lines := strings.SplitAfter(block, "\n")
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "options=") {
			continue
		}
		have := map[string]bool{}
		if open := strings.IndexByte(t, '<'); open >= 0 {
			for _, w := range strings.Split(strings.TrimSuffix(t[open+1:], ">"), ",") {
				if w != "" {
					have[w] = true
				}
			}
		}
		for _, o := range opts {
			have[o] = on
		}
		var words []string
		var bits uint64
		for _, o := range ifcapOrder {
			if have[o] {
				words = append(words, o)
				bits |= ifcapBits[o]
			}
		}
		lines[i] = "\toptions=" + strconv.FormatUint(bits, 16) + "<" + strings.Join(words, ",") + ">\n"
		if len(words) == 0 {
			lines[i] = "\toptions=0\n"
		}
	}
	return strings.Join(lines, "")
}

// sysctl answers kern.cp_times with counters that advance (4 CPUs, about
// 25 % busy) and everything else from transcripts.
func (p *PfSense) sysctl(_ context.Context, s *SSHServer, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if strings.Join(args, " ") != "sysctl -n kern.cp_times" {
		s.t.Errorf("fake pfSense: unexpected command %q", strings.Join(args, " "))
		fmt.Fprintf(stderr, "sysctl: unknown oid '%s'\n", args[len(args)-1])
		return 1
	}
	p.mu.Lock()
	p.ticks += 100
	n := p.ticks
	p.mu.Unlock()
	var f []string
	for cpu := uint64(0); cpu < 4; cpu++ {
		busy := n * (cpu + 1) / 10 // 10 %, 20 %, 30 %, 40 %
		f = append(f, strconv.FormatUint(busy, 10), "0", "0", "0", strconv.FormatUint(n-busy, 10))
	}
	fmt.Fprintln(stdout, strings.Join(f, " "))
	return 0
}

// reboot records the action, stops every daemon and empties /var/run, as
// a reboot does (/var/run is a memory file system on pfSense).
func (p *PfSense) reboot(a configxml.Action) {
	p.record(a)
	p.SSHServer.mu.Lock()
	var pids []int
	for pid := range p.SSHServer.daemons {
		pids = append(pids, pid)
	}
	p.SSHServer.mu.Unlock()
	for _, pid := range pids {
		p.SSHServer.killPID(pid)
	}
	entries, _ := os.ReadDir(p.SSHServer.Path("/var/run"))
	for _, e := range entries {
		os.RemoveAll(filepath.Join(p.SSHServer.Path("/var/run"), e.Name()))
	}
}
