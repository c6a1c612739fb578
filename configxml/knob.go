package configxml

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/beevik/etree"
)

// Flavor is the firewall product a config.xml belongs to.
type Flavor string

const (
	PfSense  Flavor = "pfsense"
	OPNsense Flavor = "opnsense"
)

// Action is the narrowest service action that makes a knob's change take
// effect. fwapi maps each action to the product's own command or API call.
type Action string

const (
	ActionFilterReload    Action = "filter-reload"          // filter, rules, nat.outbound
	ActionInterfaces      Action = "interfaces-reconfigure" // offload.*
	ActionIDSRestart      Action = "ids-restart"            // ids@IF
	ActionIPsecRestart    Action = "ipsec-restart"          // ipsec@TUNNEL
	ActionBlocklistUpdate Action = "blocklist-update"       // blocklist
	ActionReboot          Action = "reboot"                 // crypto.hardware: what only a boot applies
	ActionFirmware        Action = "firmware-switch"        // firmware: boot the environment that holds the version
	ActionNone            Action = "none"                   // xml escape hatch: the caller names the action
)

// XMLActions are the actions an xml: knob may name (matrix spec actions:):
// every service action Apply runs, and none for a change left to whatever
// applies it next.
var XMLActions = []Action{ActionFilterReload, ActionInterfaces, ActionIDSRestart, ActionIPsecRestart, ActionBlocklistUpdate, ActionReboot, ActionNone}

// Effective is the actions that really run for a set of needed ones: a
// reboot when one is needed, since the boot applies the whole config, and
// after it the IDS restart where one is needed. pfSense's boot syncs
// Suricata without rebuilding its rule files (a reboot alone would leave
// the rules of the config before); whether OPNsense's installs the rules
// is not settled, and fwapi reconfigures its IDS after the boot too.
// Otherwise all of them, unchanged.
//
// upstream: pfsense/pfsense@ec956d343e6cd2db69caa23ba647a19d18fdbc3a src/etc/rc.start_packages:66 — `sync_package($package['name']);`, the boot's sync, which sets no $rebuild_rules
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:3262 — `if (!$rebuild_rules)`, the return before any rule file is written
func Effective(actions []Action) []Action {
	if slices.Contains(actions, ActionReboot) {
		if slices.Contains(actions, ActionIDSRestart) {
			return []Action{ActionReboot, ActionIDSRestart}
		}
		return []Action{ActionReboot}
	}
	return actions
}

// Change is one knob whose value differs between two configs.
type Change struct {
	Knob   string // full knob reference, e.g. "offload.tso", "ids@lan", "rules@lan"
	From   string
	To     string
	Action Action
}

// KnobSpec describes one knob: its name, the values it takes and what must
// run for a change to take effect.
type KnobSpec struct {
	Name      string   // offload.tso, rules, ids, ipsec, xml, ...
	Qualifier string   // what follows "@": "interface", "tunnel"; "path" after "xml:"; empty if none
	Default   string   // qualifier used when none is given
	Values    []string // the valid values; nil when free-form
	Syntax    string   // the form of a free-form value
	Action    Action
	InConfig  bool // false for knobs changed by other means (firmware)
	Doc       string
	flavors   []Flavor
	get       func(c *Config, qual string) (string, error)
	set       func(c *Config, qual, value string) error
	validate  func(c *Config, qual, value string) error
	canon     func(value string) string // the form Get returns; nil: as given
	// parts says where the knob lives in a config: the paths (from the
	// root element; "*" is anywhere) its value is read from, and those
	// setting it may write. Apply reads again only the knobs that read
	// what a change writes; TestKnobParts holds them to the code.
	parts func(c *Config, qual string) (reads, writes []string)
	// together: whether a value is valid depends on the values given
	// with it for the knob's other qualifiers (validate reads c.pending):
	// OPNsense's one IDS mode for all interfaces.
	together bool
}

// CheckedTogether reports whether a knob's values are valid only together
// with those of the same knob on its other qualifiers (ids on OPNsense):
// a plan checks each combination its points give them (CheckAll).
func CheckedTogether(knob string) bool {
	ref, err := ParseRef(knob)
	if err != nil {
		return false
	}
	k := lookupKnob(ref.Name)
	return k != nil && k.together
}

// Canonical returns value in the form Get reports it ("007" → "7" for rules,
// "AES128GCM16" → "aes128gcm16" for ipsec). Invalid values come back as given.
func Canonical(knob, value string) string {
	ref, err := ParseRef(knob)
	if err != nil {
		return value
	}
	if k := lookupKnob(ref.Name); k != nil && k.canon != nil {
		return k.canon(value)
	}
	return value
}

// Ref is a parsed knob reference: "ids@wan" is {ids, wan}.
type Ref struct {
	Name, Qualifier string
}

func (r Ref) String() string {
	switch {
	case r.Name == "xml":
		return "xml:" + r.Qualifier
	case r.Qualifier != "":
		return r.Name + "@" + r.Qualifier
	}
	return r.Name
}

var onOff = []string{"on", "off"}

// knobs is the registry, in the order `fwab config knobs` lists them.
var knobs = []*KnobSpec{
	offloadKnob("offload.checksum", "disablechecksumoffloading", "TX/RX checksum offload (TXCSUM, RXCSUM, TXCSUM6, RXCSUM6)"),
	offloadKnob("offload.tso", "disablesegmentationoffloading", "TCP segmentation offload (TSO4, TSO6)"),
	offloadKnob("offload.lro", "disablelargereceiveoffloading", "large receive offload (LRO)"),
	{
		Name: "filter", Values: []string{FilterEnabled, FilterDisabled},
		Action: ActionFilterReload, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "pf itself, <system><disablefilter>; disabled is router mode: no rules, no NAT, no tables",
		get: getFilter, set: setFilter, validate: validateFilter,
		parts: in("system"),
	},
	{
		Name: "nat.outbound", Values: []string{"automatic", "hybrid", "advanced", "disabled"},
		Action: ActionFilterReload, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "outbound NAT mode, <nat><outbound><mode>; advanced uses only the manual rules",
		get: getNATMode, set: setNATMode, validate: validateNATMode,
		// outboundRules counts OPNsense's MVC source NAT rules too.
		parts: func(*Config, string) ([]string, []string) {
			return []string{"nat", "OPNsense/Firewall/Filter/snatrules"}, []string{"nat"}
		},
	},
	{
		Name: "rules", Qualifier: "interface", Default: "lan", Syntax: "a count N ≥ 0",
		Action: ActionFilterReload, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "N generated filter rules on the interface that match no real traffic; 0 removes them, user rules untouched",
		get: getRules, set: setRules, validate: validateRules,
		parts: in("filter", "OPNsense/Firewall"),
		canon: func(v string) string {
			if n, err := strconv.Atoi(v); err == nil {
				return strconv.Itoa(n)
			}
			return v
		},
	},
	{
		Name: "ids", Qualifier: "interface", Default: "lan", Values: []string{"off", "ids", "ips-legacy", "ips-inline"},
		Action: ActionIDSRestart, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "Suricata on the interface: off, alerts only, legacy blocking, or inline IPS (netmap)",
		get: getIDS, set: setIDS, validate: validateIDS, together: true,
		parts: in("installedpackages/suricata", "OPNsense/IDS"),
	},
	{
		Name: "blocklist", Values: onOff,
		Action: ActionBlocklistUpdate, InConfig: true, flavors: []Flavor{PfSense},
		Doc: "pfBlockerNG IP blocklists (pfSense package)",
		get: getBlocklist, set: setBlocklist,
		parts: in("installedpackages/pfblockerng"),
	},
	{
		Name: "ipsec", Qualifier: "tunnel", Default: "fwab", Syntax: "an ESP proposal (aes128gcm16, aes256-sha256, 3des-sha1, chacha20poly1305), optionally IKE/ESP (aes256-sha256-modp2048/aes128gcm16), or none",
		Action: ActionIPsecRestart, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "the named tunnel's phase 1 and phase 2 proposal; none disables the tunnel",
		get: getIPsec, set: setIPsec, validate: validateIPsec,
		parts: ipsecParts,
		canon: func(v string) string {
			if p, err := ParseProposal(v); err == nil {
				return p.String()
			}
			return v
		},
	},
	{
		Name: "crypto.hardware", Syntax: "pfsense: none | aesni | cryptodev | aesni_cryptodev; opnsense: none, or hifn, padlock, qat, safe joined with ,",
		Action: ActionReboot, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "the crypto accelerator modules the boot loads, <system><crypto_hardware>; applied by a reboot",
		get: getCrypto, set: setCrypto, validate: validateCrypto,
		parts: in("system"),
	},
	{
		Name: "config", Syntax: "a whole config.xml file (a path, relative to the spec)",
		Action: ActionReloadAll, flavors: []Flavor{PfSense, OPNsense},
		Doc: "whole configs to switch between (bench-lab's configuration sets); other knobs apply on top; fwab refuses one that changes how it reaches the box",
		get: getConfigKnob, set: setConfigKnob, validate: validateConfigKnob,
		parts: in("*"),
	},
	{
		Name: "firmware", Syntax: "a product version", Action: ActionFirmware, flavors: []Flavor{PfSense, OPNsense},
		Doc: "the firewall's software version; changed by upgrading (fwab fw upgrade), not in config.xml",
		get: func(c *Config, _ string) (string, error) { return c.product.Version, nil },
		validate: func(*Config, string, string) error {
			return fmt.Errorf("firmware is changed by upgrading the firewall (fwab fw upgrade), not by editing config.xml")
		},
		set: func(*Config, string, string) error { return fmt.Errorf("firmware is not in config.xml") },
	},
	{
		Name: "xml", Qualifier: "path", Syntax: "element text, or !absent to remove the element",
		Action: ActionNone, InConfig: true, flavors: []Flavor{PfSense, OPNsense},
		Doc: "escape hatch: xml:system/hostname=fw1 sets any element's text (paths from the root element)",
		get: getXML, set: setXML, validate: validateXML,
		parts: xmlParts,
	},
}

// in is the parts of a knob that is read from and written to the same
// places whatever the config holds.
func in(paths ...string) func(*Config, string) ([]string, []string) {
	return func(*Config, string) ([]string, []string) { return paths, paths }
}

// overlaps reports whether one of the paths a is, holds or lies in one of
// the paths b.
func overlaps(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == "*" || y == "*" || x == y || strings.HasPrefix(x, y+"/") || strings.HasPrefix(y, x+"/") {
				return true
			}
		}
	}
	return false
}

// readsFrom are the paths a knob's values are read from: its parts' and,
// for a qualified knob, where its qualifiers are listed.
func (k *KnobSpec) readsFrom(c *Config) []string {
	if k.parts == nil {
		return nil // firmware: not in config.xml
	}
	reads, _ := k.parts(c, "")
	switch k.Qualifier {
	case "interface":
		reads = append(slices.Clip(reads), "interfaces")
	case "tunnel":
		r, _ := ipsecParts(c, "")
		reads = append(slices.Clip(reads), r...)
	}
	return reads
}

// Knobs lists the knobs a flavor offers. An empty flavor lists them all.
func Knobs(f Flavor) []KnobSpec {
	var out []KnobSpec
	for _, k := range knobs {
		if f == "" || slices.Contains(k.flavors, f) {
			out = append(out, *k)
		}
	}
	return out
}

// ActionFor returns the service action a change of the knob needs.
func ActionFor(knob string) Action {
	ref, err := ParseRef(knob)
	if err != nil {
		return ActionNone
	}
	if k := lookupKnob(ref.Name); k != nil {
		return k.Action
	}
	return ActionNone
}

func lookupKnob(name string) *KnobSpec {
	for _, k := range knobs {
		if k.Name == name {
			return k
		}
	}
	return nil
}

func knobNames() []string {
	var names []string
	for _, k := range knobs {
		names = append(names, k.Name)
	}
	return names
}

// ParseRef parses a knob reference: "offload.tso", "rules@wan", "xml:system/hostname".
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if path, ok := strings.CutPrefix(s, "xml:"); ok {
		if path == "" {
			return Ref{}, fmt.Errorf("knob %q: give an element path after xml:, e.g. xml:system/hostname", s)
		}
		return Ref{Name: "xml", Qualifier: path}, nil
	}
	name, qual, hasQual := strings.Cut(s, "@")
	k := lookupKnob(name)
	if k == nil {
		return Ref{}, fmt.Errorf("unknown knob %q; knobs are: %s", name, strings.Join(knobNames(), ", "))
	}
	if k.Name == "xml" {
		return Ref{}, fmt.Errorf("knob %q: write the escape hatch as xml:PATH=value", s)
	}
	if hasQual && k.Qualifier == "" {
		return Ref{}, fmt.Errorf("knob %s takes no @qualifier", name)
	}
	if hasQual && qual == "" {
		return Ref{}, fmt.Errorf("knob %q: name the %s after @", s, k.Qualifier)
	}
	if !hasQual {
		qual = k.Default
	}
	return Ref{Name: name, Qualifier: qual}, nil
}

// ParseAssignment splits "knob=value".
func ParseAssignment(s string) (Ref, string, error) {
	knob, value, ok := strings.Cut(s, "=")
	if !ok {
		return Ref{}, "", fmt.Errorf("%q is not knob=value (e.g. offload.tso=off)", s)
	}
	ref, err := ParseRef(knob)
	return ref, strings.TrimSpace(value), err
}

func (c *Config) knob(ref Ref) (*KnobSpec, error) {
	k := lookupKnob(ref.Name)
	if k == nil {
		return nil, fmt.Errorf("unknown knob %q; knobs are: %s", ref.Name, strings.Join(knobNames(), ", "))
	}
	if !slices.Contains(k.flavors, c.flavor) {
		return nil, fmt.Errorf("knob %s does not exist on %s", ref.Name, c.flavor)
	}
	if k.Qualifier == "interface" && !c.hasInterface(ref.Qualifier) {
		return nil, fmt.Errorf("knob %s: no interface %q in this config; it has: %s", ref, ref.Qualifier, strings.Join(c.interfaceKeys(), ", "))
	}
	return k, nil
}

// Get returns a knob's current value.
func (c *Config) Get(knob string) (string, error) {
	ref, err := ParseRef(knob)
	if err != nil {
		return "", err
	}
	k, err := c.knob(ref)
	if err != nil {
		return "", err
	}
	return k.get(c, ref.Qualifier)
}

// Check reports whether value is valid for the knob on this config's flavor
// and product version, without changing anything.
func (c *Config) Check(knob, value string) error {
	ref, err := ParseRef(knob)
	if err != nil {
		return err
	}
	_, err = c.check(ref, value)
	return err
}

// CheckValues is Check for several values of one knob; what does not
// depend on the value (that the knob reads on this config, which may
// scan every filter rule) is checked once.
func (c *Config) CheckValues(knob string, values []string) error {
	ref, err := ParseRef(knob)
	if err != nil {
		return err
	}
	if len(values) == 0 {
		return nil
	}
	if _, err := c.check(ref, values[0]); err != nil {
		return err
	}
	k, _ := c.knob(ref)
	for _, v := range values[1:] {
		if err := c.checkValue(k, ref, v); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) check(ref Ref, value string) (*KnobSpec, error) {
	k, err := c.knob(ref)
	if err != nil {
		return nil, err
	}
	if err := c.checkValue(k, ref, value); err != nil {
		return nil, err
	}
	if _, err := k.get(c, ref.Qualifier); err != nil {
		return nil, fmt.Errorf("knob %s: %w", ref, err)
	}
	return k, nil
}

// checkValue is check without reading the knob.
func (c *Config) checkValue(k *KnobSpec, ref Ref, value string) error {
	if err := xmlText(value); err != nil {
		return fmt.Errorf("knob %s: %w", ref, err)
	}
	if k.Values != nil && !slices.Contains(k.Values, value) {
		return fmt.Errorf("knob %s: invalid value %q; valid values: %s", ref, value, strings.Join(k.Values, ", "))
	}
	if k.validate != nil {
		if err := k.validate(c, ref.Qualifier, value); err != nil {
			return fmt.Errorf("knob %s: %w", ref, err)
		}
	}
	return nil
}

// Set changes a knob and records the change in <revision>. A value the
// flavor or product version cannot take is refused and nothing changes.
func (c *Config) Set(knob, value string) error {
	return c.SetAll([]string{knob + "=" + value})
}

// SetAll applies several knob=value assignments as one change. All are
// checked first; if any is invalid, nothing changes. Knobs check everything
// that could make them fail before they edit, so that an edit never stops
// half-way. A knob that reads what an xml: assignment among them writes is
// checked again on the config the whole set makes (on a copy, first).
func (c *Config) SetAll(assignments []string) error {
	steps, err := c.checkAll(assignments)
	if err != nil {
		return err
	}
	if err := c.checkOnCopy(steps); err != nil {
		return err
	}
	return c.apply(steps, nil)
}

// checkOnCopy applies the steps to a copy of c and checks the
// checkedAfter ones again there (a check that allows the box's own state
// reads that in c, Config.before), and that each still reads the value
// it was given; nil when no step needs it.
func (c *Config) checkOnCopy(steps []setStep) error {
	after := c.checkedAfter(steps)
	if len(after) == 0 {
		return nil
	}
	cp, err := c.copy()
	if err != nil {
		return err
	}
	cp.before = c
	return cp.apply(steps, after)
}

// apply makes the checked steps' edits, records them in <revision>, and
// then checks the steps after (by index) again.
func (c *Config) apply(steps []setStep, after []int) error {
	var done []string
	for _, s := range steps {
		before, err := s.k.get(c, s.ref.Qualifier)
		if err != nil {
			return err
		}
		if before == s.value {
			continue
		}
		if err := s.k.set(c, s.ref.Qualifier, s.value); err != nil {
			if c.before != nil {
				return fmt.Errorf("knob %s: %w", s.ref, err) // a copy's: nothing changed
			}
			return fmt.Errorf("knob %s: %w (the config in memory is partly changed; do not save it)", s.ref, err)
		}
		done = append(done, s.shown())
	}
	if len(done) > 0 {
		c.bumpRevision("fwab: " + strings.Join(done, ", "))
	}
	if len(after) == 0 {
		return nil
	}
	c.pending = map[string]string{}
	defer func() { c.pending = nil }()
	var xml []string
	for _, s := range steps {
		c.pending[s.ref.String()] = s.value
		if s.ref.Name == "xml" {
			xml = append(xml, s.shown())
		}
	}
	for _, i := range after {
		s := steps[i]
		if err := c.checkValue(s.k, s.ref, s.value); err != nil {
			return fmt.Errorf("%w (with %s)", err, strings.Join(xml, ", "))
		}
	}
	// Each assignment reads back what it was given, or another of the
	// set wrote over it.
	for _, s := range steps {
		if got, err := s.k.get(c, s.ref.Qualifier); err != nil || got != s.value {
			if err != nil {
				got = err.Error()
			}
			return fmt.Errorf("%s: after the whole set it reads %s: the assignments set one thing two ways (with %s); give one of them", s.shown(), redactStep(s, got), strings.Join(xml, ", "))
		}
	}
	return nil
}

// checkedAfter returns the steps (by index) whose knobs read what an xml:
// step among them writes, so that checking them on the config before the
// change proves nothing: an xml: path can give a filter rule the tracker a
// rules count would generate. Typed knobs check one another through
// c.pending where they must (KnobSpec.together).
func (c *Config) checkedAfter(steps []setStep) []int {
	after, _ := c.entangled(steps)
	return after
}

// entangled returns checkedAfter's steps and the xml: steps they read.
func (c *Config) entangled(steps []setStep) (after, writers []int) {
	writes := make([][]string, len(steps))
	for j, s := range steps {
		if s.ref.Name == "xml" {
			_, writes[j] = s.k.parts(c, s.ref.Qualifier)
		}
	}
	used := map[int]bool{}
	for i, s := range steps {
		if s.ref.Name == "xml" || s.k.parts == nil {
			continue
		}
		reads := s.k.readsFrom(c)
		for j, w := range writes {
			if len(w) > 0 && overlaps(reads, w) {
				used[j] = true
				if len(after) == 0 || after[len(after)-1] != i {
					after = append(after, i)
				}
			}
		}
	}
	for j := range steps {
		if used[j] {
			writers = append(writers, j)
		}
	}
	return after, writers
}

// Entangled returns the assignments SetAll checks on the config the set
// makes (knobs that read what an xml: assignment writes) and the xml:
// assignments they read, in the order given; nil if there are none. A
// plan checks each combination of them its points give (CheckAll).
func (c *Config) Entangled(assignments []string) []string {
	var steps []setStep
	for _, a := range assignments {
		ref, value, err := ParseAssignment(a)
		if err != nil {
			continue
		}
		if k, err := c.knob(ref); err == nil {
			steps = append(steps, setStep{ref, k, value})
		}
	}
	after, writers := c.entangled(steps)
	if len(after) == 0 {
		return nil
	}
	var out []string
	for i, s := range steps {
		if slices.Contains(after, i) || slices.Contains(writers, i) {
			out = append(out, s.ref.String()+"="+s.value)
		}
	}
	return out
}

// copy is an independent copy of c with what it holds beside the
// document: the product version, the tunnels defined, Now and User.
func (c *Config) copy() (*Config, error) {
	cp, err := LoadBytes(c.Bytes())
	if err != nil {
		return nil, err
	}
	cp.product, cp.tunnels, cp.Now, cp.User = c.product, maps.Clone(c.tunnels), c.Now, c.User
	return cp, nil
}

// Apply is SetAll that also says what changed, without a second copy of
// the config to compare with: every knob whose value differs afterwards
// (a change of one knob may move another's value), then each xml: path
// given whose text changed, with secrets redacted as diffs show them.
func (c *Config) Apply(assignments []string) ([]Change, error) {
	// Only the knobs that read what the assignments write can change:
	// the others are not read at all, so a config's <filter> of 20,000
	// rules stays unread when an offload changes.
	var writes []string
	for _, a := range assignments {
		ref, _, err := ParseAssignment(a)
		k := lookupKnob(ref.Name)
		if err != nil || k == nil || k.parts == nil {
			writes = []string{"*"} // SetAll names the error, if any
			break
		}
		_, w := k.parts(c, ref.Qualifier)
		writes = append(writes, w...)
	}
	affected := func(k *KnobSpec) bool { return overlaps(k.readsFrom(c), writes) }
	before := c.values(affected)
	type xmlPath struct{ ref, path, from string }
	var paths []xmlPath
	for _, a := range assignments {
		ref, _, err := ParseAssignment(a)
		if err != nil || ref.Name != "xml" || slices.ContainsFunc(paths, func(p xmlPath) bool { return p.path == ref.Qualifier }) {
			continue // SetAll names the error
		}
		from, _ := getXML(c, ref.Qualifier) // an error is SetAll's too
		paths = append(paths, xmlPath{ref.String(), ref.Qualifier, from})
	}
	if err := c.SetAll(assignments); err != nil {
		return nil, err
	}
	changes := diffValues(before, c.values(affected))
	for _, p := range paths {
		to, _ := getXML(c, p.path)
		if to == p.from {
			continue
		}
		steps := strings.Split(p.path, "/")
		tag := strings.SplitN(steps[len(steps)-1], "[", 2)[0]
		changes = append(changes, Change{Knob: p.ref, From: redact(tag, p.from), To: redact(tag, to), Action: ActionFor(p.ref)})
	}
	return changes, nil
}

// CheckAll is SetAll's checking alone: whether the assignments are valid
// together (OPNsense's one IDS mode for every interface), changing nothing.
func (c *Config) CheckAll(assignments []string) error {
	steps, err := c.checkAll(assignments)
	if err != nil {
		return err
	}
	return c.checkOnCopy(steps)
}

// A checked assignment.
type setStep struct {
	ref   Ref
	k     *KnobSpec
	value string
}

// shown is the assignment as <revision> and errors show it: an xml:
// path's secret redacted.
func (s setStep) shown() string { return s.ref.String() + "=" + redactStep(s, s.value) }

// redactStep is value as errors show it for s: redacted when s's xml:
// path names a secret.
func redactStep(s setStep, value string) string {
	if s.ref.Name != "xml" {
		return value
	}
	steps := strings.Split(s.ref.Qualifier, "/")
	return redact(strings.SplitN(steps[len(steps)-1], "[", 2)[0], value)
}

func (c *Config) checkAll(assignments []string) ([]setStep, error) {
	var steps []setStep
	c.pending = map[string]string{}
	defer func() { c.pending = nil }()
	for _, a := range assignments {
		ref, value, err := ParseAssignment(a)
		if err != nil {
			return nil, err
		}
		value = Canonical(ref.String(), value)
		if prev, ok := c.pending[ref.String()]; ok && prev != value {
			return nil, fmt.Errorf("%s is given twice (%s, then %s): give each knob once", ref, prev, value)
		}
		c.pending[ref.String()] = value
	}
	for _, a := range assignments {
		ref, value, _ := ParseAssignment(a)
		k, err := c.check(ref, value)
		value = Canonical(ref.String(), value)
		if err != nil {
			return nil, err
		}
		steps = append(steps, setStep{ref, k, value})
	}
	return steps, nil
}

// KnobValue is one knob's current value.
type KnobValue struct {
	Knob  string `json:"knob"`
	Value string `json:"value"`
}

// Values lists every knob that has a meaning in this config, with its value:
// the global knobs, rules and ids for each interface, and each IPsec tunnel.
func (c *Config) Values() []KnobValue { return c.values(nil) }

// values is Values for the knobs want accepts (all when nil).
func (c *Config) values(want func(*KnobSpec) bool) []KnobValue {
	var out []KnobValue
	add := func(ref Ref) {
		k := lookupKnob(ref.Name)
		if v, err := k.get(c, ref.Qualifier); err == nil {
			out = append(out, KnobValue{ref.String(), v})
		}
	}
	for _, k := range knobs {
		if !slices.Contains(k.flavors, c.flavor) || k.Name == "xml" || k.Name == "firmware" || want != nil && !want(k) {
			continue
		}
		switch k.Qualifier {
		case "":
			add(Ref{Name: k.Name})
		case "interface":
			for _, key := range c.interfaceKeys() {
				add(Ref{Name: k.Name, Qualifier: key})
			}
		case "tunnel":
			for _, name := range c.tunnelNames() {
				add(Ref{Name: k.Name, Qualifier: name})
			}
		}
	}
	return out
}

// bumpRevision records a change in <revision> the way the product's own
// write_config does: time, description and user.
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:1129 — `$revision['time'] = time();`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:489 — `$revision['time'] = sprintf('%0.2f', microtime(true));`
func (c *Config) bumpRevision(desc string) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	user := c.User
	if user == "" {
		user = "fwab"
	}
	t := now()
	stamp := strconv.FormatInt(t.Unix(), 10)
	if c.flavor == OPNsense {
		stamp = fmt.Sprintf("%d.%02d", t.Unix(), t.Nanosecond()/10_000_000)
	}
	rev := c.section("revision")
	if rev == nil {
		rev = etree.NewElement("revision")
		c.insertChild(c.top(), rev, "")
	}
	c.setLeaf(rev, "time", stamp, false)
	c.setLeaf(rev, "description", desc, c.flavor == PfSense)
	c.setLeaf(rev, "username", user, c.flavor == PfSense)
}

// xmlText checks that s can be stored as XML text: valid UTF-8 without the
// control characters XML 1.0 forbids.
func xmlText(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("the value is not valid UTF-8")
	}
	for i, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return fmt.Errorf("the value has control character %U at byte %d, which XML cannot hold", r, i)
		}
	}
	return nil
}
