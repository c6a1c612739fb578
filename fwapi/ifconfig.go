package fwapi

import (
	"bufio"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// pseudoIfPrefixes are FreeBSD/pfSense interfaces that are not NICs.
var pseudoIfPrefixes = []string{"lo", "enc", "pflog", "pfsync", "gif", "gre", "ovpn", "ipsec", "tun", "tap", "bridge", "lagg", "vlan", "carp", "stf", "wg"}

// ParseIfconfig reads `ifconfig -a` (or `ifconfig IF`) output as FreeBSD
// prints it and returns each interface's options=<...> words. Interfaces
// are in the order printed.
func ParseIfconfig(out string) ([]IfaceState, error) {
	var ifs []IfaceState
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		if text[0] != ' ' && text[0] != '\t' {
			name, _, ok := strings.Cut(text, ": ")
			if !ok {
				name, ok = strings.CutSuffix(text, ":")
			}
			if !ok || name == "" || strings.ContainsAny(name, " \t") {
				return nil, fmt.Errorf("ifconfig line %d: %q does not start an interface (want \"NAME: flags=...\")", line, text)
			}
			ifs = append(ifs, IfaceState{Name: name})
			continue
		}
		field := strings.TrimSpace(text)
		if media, ok := strings.CutPrefix(field, "media: "); ok && len(ifs) > 0 {
			ifs[len(ifs)-1].Media = ifconfigMedia(media)
			continue
		}
		// ifconfig -m: "supported media:", then "media SUBTYPE [mediaopt
		// OPTS]" a line.
		if sub, ok := strings.CutPrefix(field, "media "); ok && len(ifs) > 0 {
			if w := strings.Fields(sub); len(w) > 0 && w[0] != "autoselect" && !slices.Contains(ifs[len(ifs)-1].Supported, w[0]) {
				ifs[len(ifs)-1].Supported = append(ifs[len(ifs)-1].Supported, w[0])
			}
			continue
		}
		value, ok := strings.CutPrefix(field, "options=")
		if !ok {
			continue // nd6 options=, ether, inet, ...
		}
		if len(ifs) == 0 {
			return nil, fmt.Errorf("ifconfig line %d: options before any interface", line)
		}
		cur := &ifs[len(ifs)-1]
		cur.Options = []string{}
		open := strings.IndexByte(value, '<')
		if open < 0 {
			continue // options=0
		}
		closing := strings.IndexByte(value[open:], '>') + open
		if closing < open {
			return nil, fmt.Errorf("ifconfig line %d: unterminated options list %q", line, field)
		}
		inner := value[open+1 : closing]
		if strings.ContainsRune(inner, '<') {
			return nil, fmt.Errorf("ifconfig line %d: malformed options list %q", line, field)
		}
		for _, w := range strings.Split(inner, ",") {
			if w != "" {
				cur.Options = append(cur.Options, w)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ifconfig: %w", err)
	}
	return ifs, nil
}

// IsNIC reports whether an interface name is a physical NIC rather than a
// pseudo-interface (lo0, enc0, pflog0, vlan, bridge, ...).
func IsNIC(name string) bool {
	for _, p := range pseudoIfPrefixes {
		if strings.HasPrefix(name, p) {
			return false
		}
	}
	return !strings.Contains(name, ".")
}

// offloadOptions are the ifconfig options each offload knob controls.
var offloadOptions = map[string][]string{
	"offload.checksum": {"TXCSUM", "RXCSUM", "TXCSUM_IPV6", "RXCSUM_IPV6"},
	"offload.tso":      {"TSO4", "TSO6"},
	"offload.lro":      {"LRO"},
}

// offloadFlags are the ifconfig arguments that switch each offload knob.
var offloadFlags = map[string][]string{
	"offload.checksum": {"txcsum", "rxcsum", "txcsum6", "rxcsum6"},
	"offload.tso":      {"tso"},
	"offload.lro":      {"lro"},
}

// OffloadState is "on" when any of the knob's options shows on the
// interface, else "off".
func OffloadState(s IfaceState, knob string) string {
	for _, o := range offloadOptions[knob] {
		if s.Has(o) {
			return "on"
		}
	}
	return "off"
}

// ifconfigMedia is the negotiated part of a media line, as pfSense's own
// interface status reads it: in parentheses when there, otherwise what
// follows "Ethernet".
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1789 — `preg_match("/media: .*? \((.*?)\)/", $ici, $matches)`, else `media: Ethernet (.*)` (line 1791)
func ifconfigMedia(media string) string {
	if i := strings.IndexByte(media, '('); i >= 0 {
		if j := strings.IndexByte(media[i:], ')'); j > 0 {
			return media[i+1 : i+j]
		}
	}
	return strings.TrimSpace(strings.TrimPrefix(media, "Ethernet "))
}

// mediaSpeed reads the line rate of an Ethernet media subtype, in Mbit/s:
// 10baseT/UTP 10, 100baseTX 100, 1000baseT 1000, 2500Base-T 2500,
// 10Gbase-T and 10GBase-SR 10000; 0 when the subtype names none.
//
// upstream: not settled — the subtype names are FreeBSD's ifmedia table (sys/net/if_media.h, not in the upstream copy); checked at run time: a subtype without a leading rate is not compared
func mediaSpeed(subtype string) float64 {
	m := mediaRate.FindStringSubmatch(subtype)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0
	}
	if strings.EqualFold(m[2], "G") {
		v *= 1000
	}
	return v
}

var mediaRate = regexp.MustCompile(`^(\d+(?:\.\d+)?)([GgMm]?)[Bb]ase`)

// BestMedia is the fastest subtype of a supported media list; "" when none
// names a rate.
func BestMedia(supported []string) string {
	best := ""
	for _, s := range supported {
		if mediaSpeed(s) > mediaSpeed(best) {
			best = s
		}
	}
	return best
}
