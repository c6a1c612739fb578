package inspect

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Action is what a rule asks for when its content matches.
type Action uint8

const (
	Alert Action = iota // count and log only
	Drop                // inline: drop the packet; legacy: block the source
)

func (a Action) String() string {
	if a == Drop {
		return "drop"
	}
	return "alert"
}

// Rule is one content rule, in the spirit of a Suricata signature with a
// single content match: `drop ip any any -> any any (content:"..."; sid:N;)`.
type Rule struct {
	SID     int
	Content []byte
	Action  Action
}

// FirstSID is the sid of a ruleset's first rule; the rest follow in order.
// Suricata reserves sids from 9000000 for local use.
const FirstSID = 9000000

// Pattern lengths. Eight random bytes or more make a chance match in random
// payload negligible: at 10 Gbit/s for a minute with 50k rules the expected
// number of chance matches is below 1e-3.
const (
	minContent = 8
	maxContent = 16
)

// RulesetSpec describes a generated ruleset. The same spec always yields the
// same rules.
type RulesetSpec struct {
	Rules int    // number of rules, at least 1
	Seed  uint64 // PRNG seed
	// DropEvery makes every DropEvery-th rule (sid offset 0, DropEvery, ...)
	// a drop rule, the rest alert rules. Zero means 10; 1 makes all rules drop.
	DropEvery int
	// Exclude holds samples of real traffic (iperf3 payload, its control
	// messages). A candidate content that occurs in any of them, or that is
	// printable ASCII only, is rejected and another one drawn.
	Exclude [][]byte
	// Extra are rules loaded from rules files (ParseRules), matched after
	// the generated ones.
	Extra []Rule
}

// Ruleset is a generated set of content rules with the automaton that
// matches them; pattern id i of the automaton is Rules[i].
type Ruleset struct {
	Rules   []Rule
	Matcher *Matcher
	Seed    uint64
}

// MaxRules bounds a generated ruleset.
const MaxRules = 1_000_000

// GenerateRuleset builds the ruleset described by spec.
func GenerateRuleset(spec RulesetSpec) (*Ruleset, error) {
	if spec.Rules < 1 || spec.Rules > MaxRules {
		return nil, fmt.Errorf("rule count %d out of range: use 1 to %d", spec.Rules, MaxRules)
	}
	every := spec.DropEvery
	if every <= 0 {
		every = 10
	}
	rng := rand.New(rand.NewPCG(spec.Seed, spec.Seed^0x9e3779b97f4a7c15))
	seen := make(map[string]bool, spec.Rules)
	rules := make([]Rule, 0, spec.Rules)
	for len(rules) < spec.Rules {
		c := make([]byte, minContent+rng.IntN(maxContent-minContent+1))
		for i := range c {
			c[i] = byte(rng.Uint32())
		}
		if seen[string(c)] || !acceptable(c, spec.Exclude) {
			continue
		}
		seen[string(c)] = true
		i := len(rules)
		a := Alert
		if i%every == 0 {
			a = Drop
		}
		rules = append(rules, Rule{SID: FirstSID + i, Content: c, Action: a})
	}
	rules = append(rules, spec.Extra...)
	patterns := make([][]byte, len(rules))
	for i, r := range rules {
		patterns[i] = r.Content
	}
	m, err := NewMatcher(patterns)
	if err != nil {
		return nil, err
	}
	return &Ruleset{Rules: rules, Matcher: m, Seed: spec.Seed}, nil
}

// acceptable rejects contents that real lab traffic could carry: ones found
// in a traffic sample, and ones made only of printable ASCII or digits
// (iperf3's --repeating-payload is "0123456789" over and over, its control
// channel is JSON text).
func acceptable(c []byte, exclude [][]byte) bool {
	printable := true
	for _, b := range c {
		if b < 0x20 || b > 0x7e {
			printable = false
			break
		}
	}
	if printable {
		return false
	}
	for _, s := range exclude {
		if bytes.Contains(s, c) {
			return false
		}
	}
	return true
}

// Drops is the number of drop rules.
func (rs *Ruleset) Drops() int {
	n := 0
	for _, r := range rs.Rules {
		if r.Action == Drop {
			n++
		}
	}
	return n
}

// FirstWith returns the first rule with action a.
func (rs *Ruleset) FirstWith(a Action) (Rule, bool) {
	for _, r := range rs.Rules {
		if r.Action == a {
			return r, true
		}
	}
	return Rule{}, false
}

// Verdict scans one payload and returns the number of rules that matched and
// whether any of them is a drop rule. matched, if not nil, gets each rule
// that matched.
func (rs *Ruleset) Verdict(payload []byte, matched func(Rule)) (matches int, drop bool) {
	rs.Matcher.Scan(payload, func(id, _ int) bool {
		matches++
		if rs.Rules[id].Action == Drop {
			drop = true
		}
		if matched != nil {
			matched(rs.Rules[id])
		}
		return true
	})
	return matches, drop
}

// WriteRules writes the ruleset in Suricata rule syntax, for people who
// want to see what the lab matches.
func (rs *Ruleset) WriteRules(w io.Writer) error {
	for _, r := range rs.Rules {
		_, err := fmt.Fprintf(w, "%s ip any any -> any any (msg:\"fwab-generated %d\"; content:\"|% X|\"; sid:%d; rev:1;)\n",
			r.Action, r.SID-FirstSID, r.Content, r.SID)
		if err != nil {
			return err
		}
	}
	return nil
}

// ParseRules reads rules in Suricata's syntax, as a rules file holds them
// (custom.rules): one per line, `#` comments and blank lines skipped. The
// lab matches a rule by its action (alert, or drop and reject, which drop)
// and its one content, and keeps its sid; it does not match the header
// (protocol, addresses, ports). A rule without a content matches nothing
// here and is skipped. A rule the lab would match otherwise than Suricata
// — two contents, a content modifier such as nocase or depth, any option
// beyond msg, sid, rev, gid, classtype, priority, reference and metadata —
// is refused with its file and line, as is one Suricata itself refuses
// (an option list not ended by ";", an escape other than \: \; \\ \").
//
// Options end at a ";" not after a backslash, quoted or not, as
// Suricata's SigParseOptions splits them.
func ParseRules(r io.Reader, name string) ([]Rule, error) {
	var out []Rule
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rule, ok, err := parseRule(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
		if ok {
			out = append(out, rule)
		}
	}
	return out, sc.Err()
}

// ignoredOptions change nothing the lab matches.
var ignoredOptions = []string{"msg", "rev", "gid", "classtype", "priority", "reference", "metadata"}

// parseRule reads one rule; ok is false for a rule without a content.
func parseRule(line string) (rule Rule, ok bool, err error) {
	action, rest, _ := strings.Cut(line, " ")
	switch action {
	case "alert":
		rule.Action = Alert
	case "drop", "reject":
		rule.Action = Drop
	default:
		return rule, false, fmt.Errorf("action %q: the lab matches alert, drop and reject rules", action)
	}
	open := strings.IndexByte(rest, '(')
	if open < 0 || !strings.HasSuffix(rest, ")") {
		return rule, false, fmt.Errorf("no (options) after the header")
	}
	opts := strings.TrimSpace(rest[open+1 : len(rest)-1])
	if !strings.HasSuffix(opts, ";") || strings.HasSuffix(opts, "\\;") {
		return rule, false, fmt.Errorf("the options do not end with \";\"")
	}
	contents := 0
	for _, opt := range splitOptions(opts) {
		key, value, _ := strings.Cut(opt, ":")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case key == "content":
			if contents++; contents > 1 {
				return rule, false, fmt.Errorf("two contents: the lab matches one content per rule")
			}
			if rule.Content, err = parseContent(value); err != nil {
				return rule, false, err
			}
		case key == "sid":
			if rule.SID, err = strconv.Atoi(value); err != nil || rule.SID <= 0 {
				return rule, false, fmt.Errorf("sid %q is not a positive number", value)
			}
		case slices.Contains(ignoredOptions, key):
		default:
			return rule, false, fmt.Errorf("option %s: the lab matches one plain content, and %s would change what matches", key, key)
		}
	}
	if rule.SID == 0 {
		return rule, false, fmt.Errorf("no sid")
	}
	return rule, contents == 1, nil
}

// splitOptions splits a rule's options at each ";" not after a backslash.
func splitOptions(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case ';':
			if o := strings.TrimSpace(s[start:i]); o != "" {
				out = append(out, o)
			}
			start = i + 1
		}
	}
	if o := strings.TrimSpace(s[start:]); o != "" {
		out = append(out, o)
	}
	return out
}

// parseContent reads a quoted content: text, |hex bytes| runs, and the
// escapes Suricata's DetectContentDataParse takes: \: \; \\ \".
func parseContent(v string) ([]byte, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, fmt.Errorf("content %s: want a quoted string", v)
	}
	v = v[1 : len(v)-1]
	var out []byte
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			if i+1 == len(v) || !strings.ContainsRune(`:;\"`, rune(v[i+1])) {
				return nil, fmt.Errorf("content %q: Suricata escapes only \\: \\; \\\\ and \\\"", v)
			}
			i++
			out = append(out, v[i])
		case ';', '"':
			return nil, fmt.Errorf("content %q: an unescaped %c", v, c)
		case '|':
			end := strings.IndexByte(v[i+1:], '|')
			if end < 0 {
				return nil, fmt.Errorf("content %q: a |hex| run is not closed", v)
			}
			b, err := hex.DecodeString(strings.ReplaceAll(v[i+1:i+1+end], " ", ""))
			if err != nil {
				return nil, fmt.Errorf("content %q: %v", v, err)
			}
			out = append(out, b...)
			i += end + 1
		default:
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty content")
	}
	return out, nil
}
