package configxml

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"net/netip"
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
// element that was added, removed or whose text changed. The knobs' values
// are shown as they are; an element's text only when it is one a diff may
// show (numbers, addresses, short enumerated words, what fwab's knobs
// write; see show), else as a short hash, and secrets (keys, passwords,
// PSKs) never.
func Diff(a, b *Config) ([]Change, []PathChange) {
	return diffKnobs(a, b), diffPaths(a, b)
}

func diffKnobs(a, b *Config) []Change { return diffValues(a.Values(), b.Values()) }

// diffValues lists the knobs whose values differ from a to b, in a's order
// and then b's.
func diffValues(a, b []KnobValue) []Change {
	av, bv := map[string]string{}, map[string]string{}
	var order []string
	for _, kv := range a {
		av[kv.Knob] = kv.Value
		order = append(order, kv.Knob)
	}
	for _, kv := range b {
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

func redact(tag, text string) string {
	if text != "" && secretTag.MatchString(tag) {
		return "(secret)"
	}
	return text
}

// What a diff shows of a text is decided by an allowlist: the texts fwab's
// own knobs write (knobTexts), numbers, addresses and short enumerated
// words (plainValue); every other text is shown as a short keyed hash,
// "(text hmac:1a2b3c4d)", so that two different texts still read
// differently while neither is revealed. Element names are always shown.
// Fields where the products keep secrets (secretTag) read "(secret)"
// whatever their text looks like: a password may well be a short word.
//
// The hash is HMAC-SHA256 keyed by the two configs' own bytes: the same
// for equal texts within one diff, and not checkable against guessed
// values (a dictionary of likely passwords) by whoever sees only the diff.

// secretTag matches the names of the elements where pfSense, OPNsense and
// their packages keep passwords, keys, pre-shared keys, tokens and hashes:
// users' bcrypt-hash, sha512-hash, password, ipsecpsk, authorizedkeys,
// otp_seed and apikeys; <cert>/<ca> prv; IPsec pre-shared-key and
// private-key; OPNsense's preSharedKey Key and keyPair privateKey;
// WireGuard privatekey, privkey, presharedkey and psk; OpenVPN tls,
// shared_key, auth_pass and static keys; ldap_bindpw, radius_secret,
// radiuskey; SNMP rocommunity, rwcommunity and trapstring; DynDNS, PPP,
// CARP and HA sync passwords; RFC 2136 keydata and ddnsdomainkey; WPA
// passphrase; notification API keys and tokens.
var secretTag = regexp.MustCompile(`(?i)(password|passwd|passphrase|^pass$|_pass$|^pass_|pwd|pw$|secret|psk|pre-?shared|shared_?key|private[-_]?key|privkey|^prv$|key\d*$|keydata|^api$|token|hash$|seed|salt|community|trapstring|authorizedkeys|^tls$|tls_?key|^crl$|credential)`)

// secretHolder is a leaf whose parent names the secret: <wep><key><value>,
// <crl><text>.
var secretHolder = regexp.MustCompile(`^(value|text|data)$`)

func secretPath(tags []string) bool {
	n := len(tags)
	if n == 0 {
		return false
	}
	return secretTag.MatchString(tags[n-1]) || n > 1 && secretHolder.MatchString(tags[n-1]) && secretTag.MatchString(tags[n-2])
}

// knobTexts are texts that fwab's knobs write and plainValue would not
// show, by the element's path from the root: generated rules' and Suricata
// entries' descriptions, OPNsense's proposal lists, and the <revision>
// description fwab writes for a change (see knobRevision).
var knobTexts = map[string]*regexp.Regexp{
	"filter/rule/descr": generatedDescr,
	"OPNsense/Firewall/Filter/rules/rule/description":   generatedDescr,
	"installedpackages/suricata/rule/descr":             regexp.MustCompile(`^[A-Z0-9_.-]{1,32} \(fwab\)$`),
	"OPNsense/Swanctl/Connections/Connection/proposals": proposalList,
	"OPNsense/Swanctl/children/child/esp_proposals":     proposalList,
}

var (
	generatedDescr = regexp.MustCompile(`^` + GeneratedPrefix + ` [0-9]{1,9}$`)
	proposalList   = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*(,[a-z0-9]+(-[a-z0-9]+)*)*$`)
	knobRef        = regexp.MustCompile(`^[A-Za-z0-9_.:@/\[\]-]{1,200}$`)
)

// knobRevision reports whether s is a <revision> description as fwab
// writes one ("fwab: offload.tso=on, rules@lan=2", see bumpRevision) with
// every value one a diff shows: an xml: knob's value only where the
// element it sets is not secret (SetAll redacts by the element's name
// alone, so <wep><key><value> is caught here).
func knobRevision(s string) bool {
	rest, ok := strings.CutPrefix(s, "fwab: ")
	if !ok {
		return false
	}
	for _, a := range strings.Split(rest, ", ") {
		ref, value, ok := strings.Cut(a, "=")
		if !ok || !knobRef.MatchString(ref) {
			return false
		}
		if value == "(secret)" || value == "" {
			continue
		}
		if path, isXML := strings.CutPrefix(ref, "xml:"); isXML && secretPath(strings.Split(predicate.ReplaceAllString(path, ""), "/")) || !plainValue(value) {
			return false
		}
	}
	return true
}

// predicate is a step's [N] or [@attr="v"] in an xml: knob's path.
var predicate = regexp.MustCompile(`\[[^\]]*\]`)

var (
	number    = regexp.MustCompile(`^[-+]?[0-9]{1,20}(\.[0-9]{1,9})?$`)
	lowerWord = regexp.MustCompile(`^[a-z0-9]+([._:/-][a-z0-9]+)*$`)
	upperWord = regexp.MustCompile(`^[A-Z][A-Z0-9]*([_/-][A-Z0-9]+)*$`)
	hexDigits = regexp.MustCompile(`^[0-9a-f]+$`)
)

// plainValue reports whether s is a text a diff shows as it is: empty, or
// up to 32 comma-separated items each of which is a number, an IP address
// or prefix, or a short enumerated word (on, pass, inet, lan, opt1,
// ips_mode_inline, aes256gcm16, hmac_sha256, TCP).
func plainValue(s string) bool {
	if len(s) > 512 {
		return false
	}
	items := strings.Split(s, ",")
	if len(items) > 32 {
		return false
	}
	for _, it := range items {
		if !plainItem(it) {
			return false
		}
	}
	return true
}

func plainItem(s string) bool {
	switch {
	case s == "":
		return false
	case number.MatchString(s):
		return true
	case len(s) <= 64 && strings.ContainsAny(s, ".:") && validAddr(s):
		return true
	case len(s) <= 8 && upperWord.MatchString(s):
		return true
	}
	return len(s) <= 64 && lowerWord.MatchString(s) && enumerated(s)
}

func validAddr(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	_, err := netip.ParsePrefix(s)
	return err == nil
}

// enumerated tells a word from a token: it has a letter, it is not a long
// run of hex digits (a key, a hash), and no part of it switches between
// letters and digits more than three times (aes256gcm16 does three times,
// a random k3j4h5g6 seven).
func enumerated(s string) bool {
	if !strings.ContainsAny(s, "abcdefghijklmnopqrstuvwxyz") {
		return false
	}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune("._:/-", r) }) {
		if len(part) >= 12 && hexDigits.MatchString(part) {
			return false
		}
		switches := 0
		for i := 1; i < len(part); i++ {
			if isDigit(part[i]) != isDigit(part[i-1]) {
				switches++
			}
		}
		if switches > 3 {
			return false
		}
	}
	return true
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// uuidText is the form of OPNsense's uuid attributes, which paths show.
var uuidText = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// differ compares two documents and shows their texts as the allowlist
// says.
type differ struct {
	a, b *Config
	tags []string // the element names from below the root to the element compared
	key  []byte   // the hashes' key, made when first needed
	out  []PathChange
}

func diffPaths(a, b *Config) []PathChange {
	d := &differ{a: a, b: b}
	d.element("", a.top(), b.top())
	return d.out
}

// sections compares two sections, each unread in its config, without
// reading them: their children are matched by key as element matches
// them, each built on its own from the input (source.eachIn), and only a
// pair whose bytes differ is built again and compared, so two configs
// with the same 20,000 rules compare them as byte strings.
func (d *differ) sections(path string, a, b *etree.Element) {
	keys := func(src *source, sec *etree.Element) []keyed {
		ix := src.children(sec)
		out := make([]keyed, 0, len(ix))
		count := make(map[string]int, len(ix))
		for _, c := range ix {
			out = append(out, d.childKey(count, c))
		}
		return out
	}
	ak, bk := keys(d.a.src, a), keys(d.b.src, b)
	if len(ak) == 0 || len(bk) == 0 {
		// Text on one side at least: element compares it.
		d.a.src.read(a)
		d.b.src.read(b)
		d.element(path, a, b)
		return
	}
	bm := make(map[string]keyed, len(bk))
	for _, k := range bk {
		bm[k.key] = k
	}
	am := make(map[string]bool, len(ak))
	for _, k := range ak {
		am[k.key] = true
		p := joinPath(path, tidy(k.shown))
		d.tags = append(d.tags, k.tag)
		if other, ok := bm[k.key]; !ok {
			d.out = append(d.out, PathChange{Path: p, Kind: "removed", From: d.summary(d.a.src.view(k.sp))})
		} else if !bytes.Equal(d.a.src.bytes(k.sp), d.b.src.bytes(other.sp)) {
			d.element(p, d.a.src.view(k.sp), d.b.src.view(other.sp))
		}
		d.tags = d.tags[:len(d.tags)-1]
	}
	for _, k := range bk {
		if !am[k.key] {
			d.tags = append(d.tags, k.tag)
			d.out = append(d.out, PathChange{Path: joinPath(path, tidy(k.shown)), Kind: "added", To: d.summary(d.b.src.view(k.sp))})
			d.tags = d.tags[:len(d.tags)-1]
		}
	}
}

// show is how the diff shows the text of the element at d.tags.
func (d *differ) show(text string) string {
	switch {
	case text == "":
		return ""
	case secretPath(d.tags):
		return "(secret)"
	case plainValue(text):
		return text
	}
	path := strings.Join(d.tags, "/")
	if re := knobTexts[path]; re != nil && len(text) <= 512 && re.MatchString(text) || path == "revision/description" && knobRevision(text) {
		return text
	}
	return d.hash(text)
}

// hash is a text's short keyed hash.
func (d *differ) hash(text string) string {
	if d.key == nil {
		k := sha256.New()
		for _, c := range []*Config{d.a, d.b} {
			var data []byte
			if c.src != nil {
				data = c.src.data // the bytes it was loaded from
			}
			fmt.Fprintf(k, "%d:", len(data))
			k.Write(data)
		}
		d.key = k.Sum(nil)
	}
	m := hmac.New(sha256.New, d.key)
	m.Write([]byte(text))
	return fmt.Sprintf("(text hmac:%x)", m.Sum(nil)[:4])
}

type keyed struct {
	key   string // identifies the child among its siblings
	shown string // the key as the path shows it
	el    *etree.Element
	tag   string
	sp    span // where el is in the input, when it was built on its own (sections)
}

// childKeys names each child element: its tag, its stable identity when it
// has one (OPNsense's uuid attribute, pfSense's <tracker> on rules), else
// its position among its namesakes, so that a rule inserted before others
// reads as one rule added, not as every later rule changed. An identity
// that is not a UUID or a number is shown hashed.
//
// upstream: pfsense 2.7.2 src/etc/inc/filter.inc:3687 — `$rule['tracker']` identifies a rule
func (d *differ) childKeys(e *etree.Element) []keyed {
	children := e.ChildElements()
	count := make(map[string]int, len(children))
	out := make([]keyed, 0, len(children))
	for _, c := range children {
		k := d.childKey(count, childOf(c, span{}))
		k.el = c
		out = append(out, k)
	}
	return out
}

// childKey is childKeys' name for c, the next child, with count holding
// how many of each identity came before it.
func (d *differ) childKey(count map[string]int, c child) keyed {
	{
		id, odd := c.tag, ""
		stable := true
		uuid, tracker := c.uuid, ""
		if uuid == "" && c.tag == "rule" {
			tracker = c.tracker
		}
		switch {
		case uuid != "":
			id += `[@uuid="` + uuid + `"]`
			if !uuidText.MatchString(uuid) {
				odd = c.tag + `[@uuid="` + d.hash(uuid) + `"]`
			}
		case tracker != "":
			id += "[tracker=" + tracker + "]"
			if !number.MatchString(tracker) {
				odd = c.tag + "[tracker=" + d.hash(tracker) + "]"
			}
		default:
			stable = false
		}
		count[id]++
		key := id
		if !stable || count[id] > 1 {
			key = fmt.Sprintf("%s[%d]", id, count[id])
			if odd != "" {
				odd = fmt.Sprintf("%s[%d]", odd, count[id])
			}
		}
		shown := key
		if odd != "" {
			shown = odd
		}
		return keyed{key: key, shown: shown, tag: c.tag, sp: c.sp}
	}
}

func (d *differ) element(path string, a, b *etree.Element) {
	ac, bc := d.childKeys(a), d.childKeys(b)
	if len(ac) == 0 && len(bc) == 0 {
		at, bt := strings.TrimSpace(a.Text()), strings.TrimSpace(b.Text())
		if at != bt {
			d.out = append(d.out, PathChange{Path: path, Kind: "changed", From: d.show(at), To: d.show(bt)})
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
		p := joinPath(path, tidy(k.shown))
		d.tags = append(d.tags, k.el.Tag)
		if other, ok := bm[k.key]; ok {
			d.pair(p, k.el, other)
		} else {
			d.a.src.read(k.el)
			d.out = append(d.out, PathChange{Path: p, Kind: "removed", From: d.summary(k.el)})
		}
		d.tags = d.tags[:len(d.tags)-1]
	}
	for _, k := range bc {
		if !am[k.key] {
			d.b.src.read(k.el)
			d.tags = append(d.tags, k.el.Tag)
			d.out = append(d.out, PathChange{Path: joinPath(path, tidy(k.shown)), Kind: "added", To: d.summary(k.el)})
			d.tags = d.tags[:len(d.tags)-1]
		}
	}
}

// pair compares two matched elements: sections unread on both sides by
// their bytes first, then as sections does; anything else as element.
func (d *differ) pair(path string, a, b *etree.Element) {
	sa, ua := d.a.src.unread[a]
	sb, ub := d.b.src.unread[b]
	switch {
	case ua && ub && bytes.Equal(d.a.src.bytes(sa), d.b.src.bytes(sb)):
	case ua && ub:
		d.sections(path, a, b)
	default:
		d.a.src.read(a)
		d.b.src.read(b)
		d.element(path, a, b)
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

// summary describes an added or removed element, the one at d.tags, in
// one short line.
func (d *differ) summary(e *etree.Element) string {
	if len(e.ChildElements()) == 0 {
		return d.show(strings.TrimSpace(e.Text()))
	}
	for _, tag := range []string{"descr", "description", "name", "interface"} {
		if t := childText(e, tag); t != "" {
			d.tags = append(d.tags, tag)
			shown := d.show(t)
			d.tags = d.tags[:len(d.tags)-1]
			return fmt.Sprintf("(%s %q)", tag, shown)
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
