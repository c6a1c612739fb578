package configxml

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/beevik/etree"
)

// PathChange is one element that differs between two configs.
type PathChange struct {
	Path string `json:"path"` // from the root, with [N] among same-named siblings
	Kind string `json:"kind"` // added, removed, changed
	From string `json:"from,omitempty"`
	To   string `json:"to,omitempty"`
}

func (p PathChange) String() string {
	switch p.Kind {
	case "added":
		return strings.TrimSpace("+ " + p.Path + " " + p.To)
	case "removed":
		return strings.TrimSpace("- " + p.Path + " " + p.From)
	}
	return fmt.Sprintf("~ %s: %q → %q", p.Path, p.From, p.To)
}

// Diff compares two configs: first the knobs whose values differ, then every
// element that was added, removed or whose text changed. Secret values
// (keys, passwords, PSKs) are never shown.
func Diff(a, b *Config) ([]Change, []PathChange) {
	return diffKnobs(a, b), diffPaths(a.doc.Root(), b.doc.Root())
}

func diffKnobs(a, b *Config) []Change {
	av, bv := map[string]string{}, map[string]string{}
	var order []string
	for _, kv := range a.Values() {
		av[kv.Knob] = kv.Value
		order = append(order, kv.Knob)
	}
	for _, kv := range b.Values() {
		if _, ok := av[kv.Knob]; !ok {
			order = append(order, kv.Knob)
		}
		bv[kv.Knob] = kv.Value
	}
	var out []Change
	for _, k := range order {
		if av[k] != bv[k] {
			out = append(out, Change{Knob: k, From: av[k], To: bv[k], Action: ActionFor(k)})
		}
	}
	return out
}

var secretTag = regexp.MustCompile(`(?i)(pre-shared-key|password|passwd|secret|bcrypt-hash|sha512-hash|prv|privatekey|private_key|^key$|apikey|authorizedkeys)`)

func redact(tag, text string) string {
	if text != "" && secretTag.MatchString(tag) {
		return "(secret)"
	}
	return text
}

func diffPaths(a, b *etree.Element) []PathChange {
	var out []PathChange
	diffElement(&out, "", a, b)
	return out
}

type keyed struct {
	key string
	el  *etree.Element
}

// childKeys names each child element: its tag, its stable identity when it
// has one (OPNsense's uuid attribute, pfSense's <tracker> on rules), else
// its position among its namesakes, so that a rule inserted before others
// reads as one rule added, not as every later rule changed.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3687 — `$rule['tracker']` identifies a rule
func childKeys(e *etree.Element) []keyed {
	count := map[string]int{}
	var out []keyed
	for _, c := range e.ChildElements() {
		id := c.Tag
		stable := true
		switch {
		case c.SelectAttrValue("uuid", "") != "":
			id += `[@uuid="` + c.SelectAttrValue("uuid", "") + `"]`
		case c.Tag == "rule" && childText(c, "tracker") != "":
			id += "[tracker=" + childText(c, "tracker") + "]"
		default:
			stable = false
		}
		count[id]++
		key := id
		if !stable || count[id] > 1 {
			key = fmt.Sprintf("%s[%d]", id, count[id])
		}
		out = append(out, keyed{key, c})
	}
	return out
}

func diffElement(out *[]PathChange, path string, a, b *etree.Element) {
	ac, bc := childKeys(a), childKeys(b)
	if len(ac) == 0 && len(bc) == 0 {
		at, bt := strings.TrimSpace(a.Text()), strings.TrimSpace(b.Text())
		if at != bt {
			*out = append(*out, PathChange{Path: path, Kind: "changed", From: redact(a.Tag, at), To: redact(b.Tag, bt)})
		}
		return
	}
	bm := map[string]*etree.Element{}
	for _, k := range bc {
		bm[k.key] = k.el
	}
	am := map[string]bool{}
	for _, k := range ac {
		am[k.key] = true
		p := joinPath(path, tidy(k.key))
		if other, ok := bm[k.key]; ok {
			diffElement(out, p, k.el, other)
		} else {
			*out = append(*out, PathChange{Path: p, Kind: "removed", From: summary(k.el)})
		}
	}
	for _, k := range bc {
		if !am[k.key] {
			*out = append(*out, PathChange{Path: joinPath(path, tidy(k.key)), Kind: "added", To: summary(k.el)})
		}
	}
}

func joinPath(parent, step string) string {
	if parent == "" {
		return step
	}
	return parent + "/" + step
}

// tidy drops the [1] of an only child, so paths read system/hostname.
func tidy(key string) string { return strings.TrimSuffix(key, "[1]") }

// summary describes an added or removed element in one short line.
func summary(e *etree.Element) string {
	if len(e.ChildElements()) == 0 {
		return redact(e.Tag, strings.TrimSpace(e.Text()))
	}
	for _, tag := range []string{"descr", "description", "name", "interface"} {
		if t := childText(e, tag); t != "" {
			return fmt.Sprintf("(%s %q)", tag, t)
		}
	}
	return fmt.Sprintf("(%d elements)", len(e.FindElements(".//*")))
}

// Edit applies edit to a copy of the config in data and returns the edited
// file and the knob changes it makes, as a sweep step does before it writes
// and applies. product, when set, is the version the firewall reports
// (SetProduct); edit's error is returned as it is.
func Edit(data []byte, product string, edit func(*Config) error) ([]byte, []Change, error) {
	before, err := LoadBytes(data)
	if err != nil {
		return nil, nil, err
	}
	after, err := LoadBytes(bytes.Clone(data))
	if err != nil {
		return nil, nil, err
	}
	if product != "" {
		if err := before.SetProduct(product); err != nil {
			return nil, nil, err
		}
		if err := after.SetProduct(product); err != nil {
			return nil, nil, err
		}
	}
	if err := edit(after); err != nil {
		return nil, nil, err
	}
	changes, _ := Diff(before, after)
	return after.Bytes(), changes, nil
}
