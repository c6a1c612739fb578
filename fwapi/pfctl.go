package fwapi

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// generatedRuleLabel marks the filter rules fwab generates (rules@IF).
const generatedRuleLabel = "fwab-generated"

// FilterRules is what `pfctl -sr` shows.
type FilterRules struct {
	Rules     int // pass, block and match rules (scrub and anchors excluded)
	Generated int // rules whose label carries fwab-generated
}

// ParsePfctlRules counts the loaded filter rules in `pfctl -sr` output.
func ParsePfctlRules(out string) (FilterRules, error) {
	var r FilterRules
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		word, _, _ := strings.Cut(text, " ")
		switch word {
		case "pass", "block", "match":
			r.Rules++
			if strings.Contains(text, generatedRuleLabel) {
				r.Generated++
			}
		case "scrub", "anchor", "antispoof", "load", "nat-anchor", "rdr-anchor", "binat-anchor", "ether":
		default:
			return FilterRules{}, fmt.Errorf("pfctl -sr line %d: %q is not a pf rule", line, text)
		}
	}
	return r, sc.Err()
}

// NATRules is what `pfctl -sn` shows.
type NATRules struct {
	Rules    int      // nat, binat and rdr rules (anchors and "no" rules excluded)
	Outbound []string // the "nat on ..." lines
}

// ParsePfctlNAT reads `pfctl -sn` output.
func ParsePfctlNAT(out string) (NATRules, error) {
	var r NATRules
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		word, _, _ := strings.Cut(text, " ")
		switch word {
		case "nat":
			r.Rules++
			if strings.HasPrefix(text, "nat on ") {
				r.Outbound = append(r.Outbound, text)
			}
		case "binat", "rdr":
			r.Rules++
		case "no", "nat-anchor", "rdr-anchor", "binat-anchor":
		default:
			return NATRules{}, fmt.Errorf("pfctl -sn line %d: %q is not a pf translation rule", line, text)
		}
	}
	return r, sc.Err()
}

// ParsePfctlTableCounts reads the output of the driver's table listing:
// one "NAME COUNT" line per table, as printed by
// `printf '%s ' NAME; pfctl -t NAME -T show | wc -l`.
func ParsePfctlTableCounts(out string) (map[string]int, error) {
	tables := map[string]int{}
	for i, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("table list line %d: %q: want \"NAME COUNT\"", i+1, l)
		}
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("table list line %d: count %q is not a number", i+1, f[1])
		}
		tables[f[0]] = n
	}
	return tables, nil
}

// ParsePfctlStatus reads pf's status word, Enabled or Disabled, from the
// first line of `pfctl -si` ("Status: Enabled for 0 days 01:02:03 ...").
//
// upstream: not settled — the `Status:` line is FreeBSD pfctl's (not in the upstream copy); checked at run time by ParsePfctlStatus itself, which refuses any first line but Status: Enabled or Status: Disabled, so a changed format fails loudly instead of verifying wrongly
func ParsePfctlStatus(out string) (string, error) {
	first, _, _ := strings.Cut(strings.TrimLeft(out, "\n"), "\n")
	f := strings.Fields(first)
	if len(f) < 2 || f[0] != "Status:" || (f[1] != PFEnabled && f[1] != PFDisabled) {
		return "", fmt.Errorf("pfctl -si: first line %q is not \"Status: Enabled\" or \"Status: Disabled\"", first)
	}
	return f[1], nil
}

// pf's status words, as pfctl -si prints them.
const (
	PFEnabled  = "Enabled"
	PFDisabled = "Disabled"
)
