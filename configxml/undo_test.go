package configxml

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/beevik/etree"
)

// The tests below play issue #28's "someone else's change is silently
// reverted": fwab takes a box from orig to written during a sweep, someone
// else (an admin in the GUI, ACME renewing a certificate, a package) saves
// the box's config meanwhile, giving current, and fwab's final restore must
// undo only its own changes.

const (
	undoPfDefault    = "pfsense-RELENG_2_7_0-conf.default-config.xml"
	undoPfRules      = "pfsensible-core-fixtures-pfsense_rule_config.xml"
	undoOPNSample    = "opnsense-core-stable-26.7-config-sample.xml"
	undoOPNLegacy    = "opnsense-core-stable-24.7-config-sample.xml"
	undoAdminUser    = "admin@192.0.2.10 (Local Database)"
	undoAdminRule    = "admin: allow ssh"
	undoAdminHost    = "gw-admin"
	undoAdminUUID    = "11111111-2222-4333-8444-555555555555"
	undoAdminTracker = "1700000001"
)

// undoUpstream reads a real config from ../shared/upstream; the test skips
// when the folder or the file is absent (never copy them into the repo).
func undoUpstream(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(upstreamDir(t), name))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("%s is not in the upstream folder (%v); skipping", name, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// undoLoad loads data as a sweep step does, for the product version given
// (none: inferred).
func undoLoad(t *testing.T, data []byte, product string) *Config {
	t.Helper()
	c, err := LoadBytes(bytes.Clone(data))
	if err != nil {
		t.Fatal(err)
	}
	c.Now = func() time.Time { return time.Unix(1800000000, 0) }
	c.User = "fwab@test"
	if product != "" {
		if err := c.SetProduct(product); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// undoFwabWrites is what fwab writes after the assignments, one save each.
func undoFwabWrites(t *testing.T, data []byte, product string, saves ...[]string) []byte {
	t.Helper()
	for _, a := range saves {
		c := undoLoad(t, data, product)
		if err := c.SetAll(a); err != nil {
			t.Fatalf("SetAll(%v): %v", a, err)
		}
		data = c.Bytes()
	}
	return data
}

// undoBoxSaves is what the box holds after someone else's edit, saved the way
// the product saves: <revision> names the admin and a later time.
func undoBoxSaves(t *testing.T, data []byte, edit func(c *Config)) []byte {
	t.Helper()
	c := undoLoad(t, data, "")
	if edit != nil {
		edit(c)
	}
	c.Now = func() time.Time { return time.Unix(1800000600, 0) }
	c.User = undoAdminUser
	c.bumpRevision("admin: edited in the GUI")
	return c.Bytes()
}

// undoAdminHostname changes <system><hostname>.
func undoAdminHostname(c *Config) {
	c.setLeaf(c.root().SelectElement("system"), "hostname", undoAdminHost, false)
}

// undoAdminRuleOnTop adds a rule of the admin's before every other rule, as the
// GUI's "add rule to the top of the list" does.
func undoAdminRuleOnTop(c *Config) {
	parent := c.ruleParent()
	var r *etree.Element
	if c.rulesMVC() {
		r = elem("rule", leaf("enabled", "1"), leaf("sequence", "1"), leaf("action", "pass"),
			leaf("interface", "lan"), leaf("protocol", "TCP"), leaf("destination_port", "22"), leaf("description", undoAdminRule))
		r.CreateAttr("uuid", undoAdminUUID)
	} else {
		r = elem("rule", leaf("type", "pass"), leaf("interface", "lan"), leaf("protocol", "tcp"),
			elem("destination", leaf("port", "22")), textLeaf("descr", undoAdminRule, c.flavor == PfSense))
		if c.flavor == PfSense {
			r.InsertChildAt(0, leaf("tracker", undoAdminTracker))
		} else {
			r.CreateAttr("uuid", undoAdminUUID)
		}
	}
	if first := parent.SelectElement("rule"); first != nil {
		c.insertChildrenBefore(parent, []*etree.Element{r}, first)
		return
	}
	c.insertChildren(parent, []*etree.Element{r}, "")
}

// undoTopRevision is the config's top-level <revision>, or nil.
func undoTopRevision(t *testing.T, data []byte) *etree.Element {
	t.Helper()
	c, err := LoadBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	return c.root().SelectElement("revision")
}

// undoWithoutRevision is the file's bytes with its top-level <revision> (and
// the line it stands on) taken out.
func undoWithoutRevision(t *testing.T, data []byte) string {
	t.Helper()
	c, err := LoadBytes(bytes.Clone(data))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.root().SelectElement("revision"); r != nil {
		c.removeElement(r)
	}
	return string(c.Bytes())
}

func undoCanon(e *etree.Element) string {
	if e == nil {
		return "(none)"
	}
	d := etree.NewDocument()
	d.SetRoot(e.Copy())
	d.Indent(1)
	s, _ := d.WriteToString()
	return s
}

func undoKnobValue(t *testing.T, data []byte, product, knob string) string {
	t.Helper()
	v, err := undoLoad(t, data, product).Get(knob)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUndoKeepsForeignEdits: fwab turned an offload on (a flag removed on
// pfSense, an MVC setting added on OPNsense 26.7), added generated rules
// and changed the outbound NAT mode (a leaf's text); meanwhile an admin
// added a rule at the top of the list (so every rule fwab generated moved
// down one place) and renamed the box. Undo gives the admin's rule and
// hostname, fwab's knobs as orig has them and no generated rule, and
// leaves every line the admin's save wrote as it was.
func TestUndoKeepsForeignEdits(t *testing.T) {
	tests := []struct {
		file, product string
		fwab          []string
		rulePath      string
	}{
		{undoPfDefault, "2.7.0", []string{"offload.tso=on", "rules@lan=5", "nat.outbound=hybrid"}, "filter/rule[1]"},
		{undoPfRules, "", []string{"offload.lro=on", "rules@lan=7"}, "filter/rule[1]"},
		{undoOPNSample, "26.7", []string{"offload.tso=on", "rules@lan=5"}, "OPNsense/Firewall/Filter/rules/rule[1]"},
		{undoOPNLegacy, "24.7", []string{"offload.checksum=on", "rules@lan=4", "nat.outbound=disabled"}, "filter/rule[1]"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			orig := undoUpstream(t, tt.file)
			written := undoFwabWrites(t, orig, tt.product, tt.fwab)
			admin := func(c *Config) { undoAdminRuleOnTop(c); undoAdminHostname(c) }
			current := undoBoxSaves(t, written, admin)
			want := undoBoxSaves(t, orig, admin)

			res, err := Undo(orig, written, current)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Conflicts) > 0 || res.Config == nil {
				t.Fatalf("Conflicts = %q, Config nil: %v; want none", res.Conflicts, res.Config == nil)
			}
			if wantForeign := []string{tt.rulePath, "system/hostname"}; !slices.Equal(res.Foreign, wantForeign) {
				t.Errorf("Foreign = %q, want %q", res.Foreign, wantForeign)
			}
			got := undoLoad(t, res.Config, tt.product)
			if h := childText(got.root(), "system/hostname"); h != undoAdminHost {
				t.Errorf("hostname = %q, want the admin's %q", h, undoAdminHost)
			}
			if !bytes.Contains(res.Config, []byte(undoAdminRule)) {
				t.Errorf("the admin's rule is gone")
			}
			if bytes.Contains(res.Config, []byte(GeneratedPrefix)) {
				t.Errorf("generated rules are left")
			}
			for _, a := range tt.fwab {
				knob, _, _ := strings.Cut(a, "=")
				if g, w := undoKnobValue(t, res.Config, tt.product, knob), undoKnobValue(t, orig, tt.product, knob); g != w {
					t.Errorf("%s = %s, want orig's %s", knob, g, w)
				}
			}
			if !SameIgnoringRevision(res.Config, want) {
				t.Errorf("result is not orig plus the admin's edit:\n%s", lineDiff(string(want), string(res.Config)))
			}
			if g, w := undoCanon(undoTopRevision(t, res.Config)), undoCanon(undoTopRevision(t, current)); g != w {
				t.Errorf("revision = %s, want current's %s", g, w)
			}
			// current's formatting is kept: the file is what the admin's
			// edit of orig would have written, byte for byte.
			if !bytes.Equal(res.Config, want) {
				t.Errorf("result differs in form from orig plus the admin's edit:\n%s", lineDiff(string(want), string(res.Config)))
			}
		})
	}
}

// TestUndoConflictSameLeaf: the admin changed the very setting fwab
// changed, to a third value: neither can win, nothing may be written.
func TestUndoConflictSameLeaf(t *testing.T) {
	tests := []struct {
		file, product string
		fwab          []string
		admin         func(c *Config)
		want          string
	}{
		{undoPfDefault, "2.7.0", []string{"nat.outbound=hybrid", "rules@lan=3"}, func(c *Config) {
			c.root().FindElement("nat/outbound/mode").SetText("advanced")
		}, "nat/outbound/mode"},
		{undoOPNSample, "26.7", []string{"offload.tso=on"}, func(c *Config) {
			c.root().FindElement("OPNsense/Interfaces/settings/disablesegmentationoffloading").SetText("1")
		}, "OPNsense/Interfaces/settings/disablesegmentationoffloading"},
		{undoOPNLegacy, "24.7", []string{"nat.outbound=disabled"}, func(c *Config) {
			c.root().FindElement("nat/outbound/mode").SetText("hybrid")
		}, "nat/outbound/mode"},
	}
	for _, tt := range tests {
		t.Run(tt.file+"/"+tt.want, func(t *testing.T) {
			orig := undoUpstream(t, tt.file)
			written := undoFwabWrites(t, orig, tt.product, tt.fwab)
			current := undoBoxSaves(t, written, func(c *Config) { tt.admin(c); undoAdminHostname(c) })
			res, err := Undo(orig, written, current)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Conflicts, []string{tt.want}) {
				t.Errorf("Conflicts = %q, want [%s]", res.Conflicts, tt.want)
			}
			if res.Config != nil {
				t.Errorf("Config is set despite the conflict")
			}
			if !slices.Contains(res.Foreign, tt.want) || !slices.Contains(res.Foreign, "system/hostname") {
				t.Errorf("Foreign = %q, want it to name %s and system/hostname", res.Foreign, tt.want)
			}
		})
	}
}

// TestUndoRevisionOnly: the box saved without changing anything but
// <revision> (or did not save at all): the result is orig, byte for byte,
// but for <revision>, which is current's — the box's newest save is the
// honest record of the last save, and the caller records its own restore
// on top of it.
func TestUndoRevisionOnly(t *testing.T) {
	tests := []struct {
		file, product string
		saves         [][]string
	}{
		{undoPfDefault, "2.7.0", [][]string{{"offload.tso=on", "rules@lan=5"}, {"nat.outbound=hybrid", "ids@lan=ids"}}},
		{undoPfRules, "", [][]string{{"offload.lro=on", "rules@lan=9", "filter=disabled"}}},
		{undoOPNSample, "26.7", [][]string{{"offload.tso=on", "rules@lan=5"}, {"ids@lan=ips-inline"}}},
		{undoOPNLegacy, "24.7", [][]string{{"offload.checksum=on", "rules@lan=4", "nat.outbound=hybrid"}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			orig := undoUpstream(t, tt.file)
			written := undoFwabWrites(t, orig, tt.product, tt.saves...)
			for name, current := range map[string][]byte{
				"box saved":   undoBoxSaves(t, written, nil),
				"box unsaved": written,
			} {
				res, err := Undo(orig, written, current)
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Conflicts)+len(res.Foreign) > 0 || res.Config == nil {
					t.Fatalf("%s: Conflicts = %q, Foreign = %q; want none and a config", name, res.Conflicts, res.Foreign)
				}
				if g, w := undoWithoutRevision(t, res.Config), undoWithoutRevision(t, orig); g != w {
					t.Errorf("%s: result is not orig:\n%s", name, lineDiff(w, g))
				}
				if g, w := undoCanon(undoTopRevision(t, res.Config)), undoCanon(undoTopRevision(t, current)); g != w {
					t.Errorf("%s: revision = %s, want current's %s", name, g, w)
				}
			}
		})
	}
}

// TestUndoRemovedOrGone: fwab removed or changed an element whose place
// the other edit changed too.
func TestUndoRemovedOrGone(t *testing.T) {
	tests := []struct {
		name     string
		fwab     []string
		admin    func(c *Config)
		conflict []string
		foreign  []string
		same     bool // the result is orig with the admin's edit, order included
	}{
		{
			"removed element re-added with another value",
			[]string{"xml:system/timeservers=!absent"},
			func(c *Config) {
				c.setLeaf(c.root().SelectElement("system"), "timeservers", "time.example.org", false)
			},
			[]string{"system/timeservers"}, []string{"system/timeservers"}, false,
		},
		{
			"changed leaf whose parent the admin deleted",
			[]string{"xml:interfaces/lan/ipaddr=198.18.1.1"},
			func(c *Config) { c.removeElement(c.root().FindElement("interfaces/lan")) },
			[]string{"interfaces/lan"}, []string{"interfaces/lan"}, false,
		},
		{
			"removed leaf whose parent the admin deleted",
			[]string{"xml:interfaces/lan/ipaddrv6=!absent"},
			func(c *Config) { c.removeElement(c.root().FindElement("interfaces/lan")) },
			[]string{"interfaces/lan"}, []string{"interfaces/lan"}, false,
		},
		{
			"removed flag the admin set again the same way",
			[]string{"offload.tso=on"},
			func(c *Config) {
				c.insertChild(c.root().SelectElement("system"), leaf("disablesegmentationoffloading", ""), "")
			},
			// The GUI appends the flag to <system>: it stays where the
			// admin put it, once.
			nil, []string{"system/disablesegmentationoffloading"}, false,
		},
		{
			"removed leaf put back where it was",
			[]string{"offload.tso=on", "xml:system/timeservers=!absent"},
			undoAdminHostname,
			nil, []string{"system/hostname"}, true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := undoUpstream(t, undoPfDefault)
			written := undoFwabWrites(t, orig, "2.7.0", tt.fwab)
			current := undoBoxSaves(t, written, tt.admin)
			res, err := Undo(orig, written, current)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Conflicts, tt.conflict) {
				t.Errorf("Conflicts = %q, want %q", res.Conflicts, tt.conflict)
			}
			if !slices.Equal(res.Foreign, tt.foreign) {
				t.Errorf("Foreign = %q, want %q", res.Foreign, tt.foreign)
			}
			if (res.Config == nil) != (len(tt.conflict) > 0) {
				t.Fatalf("Config nil = %v with conflicts %q", res.Config == nil, res.Conflicts)
			}
			if res.Config != nil {
				if n := bytes.Count(res.Config, []byte("<disablesegmentationoffloading>")); n != 1 {
					t.Errorf("%d disablesegmentationoffloading elements, want 1", n)
				}
				if want := undoBoxSaves(t, orig, tt.admin); tt.same && !bytes.Equal(res.Config, want) {
					t.Errorf("result is not orig with the admin's edit:\n%s", lineDiff(string(want), string(res.Config)))
				}
			}
		})
	}
}

// TestUndoPutsMovedBack: a sweep that turns TSO on and off again removes
// pfSense's flag from the middle of <system> and appends it at the end;
// the undo puts it back where orig has it, while the admin's edit stays —
// unless the admin moved it too.
func TestUndoPutsMovedBack(t *testing.T) {
	orig := undoUpstream(t, undoPfDefault)
	written := undoFwabWrites(t, orig, "2.7.0", []string{"offload.tso=on"}, []string{"offload.tso=off", "rules@lan=2"})
	for name, data := range map[string][]byte{"orig": orig, "written": written} {
		last := lastChildElement(undoLoad(t, data, "").root().SelectElement("system"))
		if (last.Tag == "disablesegmentationoffloading") != (name == "written") {
			t.Fatalf("<system> of %s ends with <%s>; the test needs the flag moved to the end", name, last.Tag)
		}
	}
	current := undoBoxSaves(t, written, undoAdminHostname)
	res, err := Undo(orig, written, current)
	if err != nil || res.Config == nil {
		t.Fatalf("Undo = %v, conflicts %q", err, res.Conflicts)
	}
	if want := undoBoxSaves(t, orig, undoAdminHostname); !bytes.Equal(res.Config, want) {
		t.Errorf("result is not orig with the admin's hostname:\n%s", lineDiff(string(want), string(res.Config)))
	}

	// The admin moved the flag to the top of <system>: it stays there.
	moved := func(c *Config) {
		system := c.root().SelectElement("system")
		flag := system.SelectElement("disablesegmentationoffloading")
		c.removeElement(flag)
		c.insertChildrenBefore(system, []*etree.Element{flag}, system.ChildElements()[0])
	}
	res, err = Undo(orig, written, undoBoxSaves(t, written, moved))
	if err != nil || res.Config == nil {
		t.Fatalf("Undo = %v, conflicts %q", err, res.Conflicts)
	}
	if want := []string{"system/disablesegmentationoffloading"}; !slices.Equal(res.Foreign, want) {
		t.Errorf("Foreign = %q, want %q", res.Foreign, want)
	}
	if want := undoBoxSaves(t, orig, moved); !bytes.Equal(res.Config, want) {
		t.Errorf("result is not orig with the admin's move:\n%s", lineDiff(string(want), string(res.Config)))
	}
}

// TestUndoBoxReformatted: pfSense and OPNsense write the whole file anew on
// every save, in their own layout. A box that saved what fwab wrote in
// another layout still holds what fwab wrote; one that also changed the
// domain keeps that change.
func TestUndoBoxReformatted(t *testing.T) {
	orig := undoUpstream(t, undoPfRules)
	written := undoFwabWrites(t, orig, "", []string{"offload.tso=on", "rules@lan=6", "nat.outbound=hybrid"})
	reformat := func(data []byte, edit func(root *etree.Element)) []byte {
		d := etree.NewDocument()
		if err := d.ReadFromBytes(data); err != nil {
			t.Fatal(err)
		}
		for _, cd := range d.FindElements("//descr") {
			if len(cd.ChildElements()) == 0 {
				cd.SetText(cd.Text()) // CDATA becomes escaped text
			}
		}
		if edit != nil {
			edit(d.Root())
		}
		d.Root().FindElement("revision/time").SetText("1800000900")
		d.Indent(4)
		out, err := d.WriteToBytes()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if !SameIgnoringRevision(written, reformat(written, nil)) {
		t.Fatal("SameIgnoringRevision: a reformatted copy reads as changed")
	}

	res, err := Undo(orig, written, reformat(written, nil))
	if err != nil || res.Config == nil || len(res.Foreign) > 0 {
		t.Fatalf("Undo = %v, foreign %q, conflicts %q", err, res.Foreign, res.Conflicts)
	}
	if g, w := undoWithoutRevision(t, res.Config), undoWithoutRevision(t, orig); g != w {
		t.Errorf("result is not orig:\n%s", lineDiff(w, g))
	}

	domain := func(root *etree.Element) { root.FindElement("system/domain").SetText("admin.example") }
	res, err = Undo(orig, written, reformat(written, domain))
	if err != nil || res.Config == nil || len(res.Conflicts) > 0 {
		t.Fatalf("Undo = %v, conflicts %q", err, res.Conflicts)
	}
	if !slices.Equal(res.Foreign, []string{"system/domain"}) {
		t.Errorf("Foreign = %q, want [system/domain]", res.Foreign)
	}
	if want := reformat(orig, domain); !SameIgnoringRevision(res.Config, want) {
		t.Errorf("result is not orig with the new domain:\n%s", lineDiff(string(want), string(res.Config)))
	}
}

// TestUndoSameIgnoringRevision: only the top-level <revision> is ignored,
// and layout (indentation, CDATA or escaped text, attribute order) does not
// count; anything else does.
func TestUndoSameIgnoringRevision(t *testing.T) {
	base := "<?xml version=\"1.0\"?>\n<pfsense>\n\t<system>\n\t\t<hostname>fw</hostname>\n\t\t<descr><![CDATA[a & b]]></descr>\n\t</system>\n" +
		"\t<installedpackages>\n\t\t<revision>7</revision>\n\t</installedpackages>\n" +
		"\t<rule uuid=\"u1\" x=\"1\"><descr>r</descr></rule>\n" +
		"\t<revision>\n\t\t<time>1</time>\n\t\t<description><![CDATA[<revision> x]]></description>\n\t</revision>\n</pfsense>\n"
	tests := []struct {
		name string
		b    string
		same bool
	}{
		{"identical", base, true},
		{"revision changed", strings.Replace(base, "<time>1</time>", "<time>2</time>", 1), true},
		{"revision gone", strings.Replace(base, "\t<revision>\n\t\t<time>1</time>\n\t\t<description><![CDATA[<revision> x]]></description>\n\t</revision>\n", "", 1), true},
		{"reindented, escaped, attributes reordered", "<?xml version=\"1.0\"?>\n<pfsense>\n  <system>\n    <hostname>fw</hostname>\n    <descr>a &amp; b</descr>\n  </system>\n" +
			"  <installedpackages><revision>7</revision></installedpackages>\n  <rule x=\"1\" uuid=\"u1\">\n    <descr>r</descr>\n  </rule>\n</pfsense>", true},
		{"hostname changed", strings.Replace(base, ">fw<", ">gw<", 1), false},
		{"nested revision changed", strings.Replace(base, "<revision>7</revision>", "<revision>8</revision>", 1), false},
		{"attribute changed", strings.Replace(base, `x="1"`, `x="2"`, 1), false},
		{"element added", strings.Replace(base, "</system>", "\t<domain>d</domain>\n\t</system>", 1), false},
		{"not XML", "<pfsense><system>", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameIgnoringRevision([]byte(base), []byte(tt.b)); got != tt.same {
				t.Errorf("SameIgnoringRevision = %v, want %v", got, tt.same)
			}
			if got := SameIgnoringRevision([]byte(tt.b), []byte(base)); got != tt.same {
				t.Errorf("SameIgnoringRevision (swapped) = %v, want %v", got, tt.same)
			}
		})
	}
	if !SameIgnoringRevision([]byte("not xml"), []byte("not xml")) {
		t.Error("two identical unparsable inputs read as different")
	}
}

// TestUndoRefusesBadInput: a file that is not a config, or configs of
// different products, are errors, not conflicts.
func TestUndoRefusesBadInput(t *testing.T) {
	pf := []byte("<pfsense><system><hostname>a</hostname></system></pfsense>")
	opn := []byte("<opnsense><system><hostname>a</hostname></system></opnsense>")
	for name, in := range map[string][3][]byte{
		"truncated current":  {pf, pf, []byte("<pfsense><system>")},
		"orig not a config":  {[]byte("<html/>"), pf, pf},
		"product changed":    {pf, pf, opn},
		"written is garbage": {pf, []byte("x"), pf},
	} {
		if _, err := Undo(in[0], in[1], in[2]); err == nil {
			t.Errorf("%s: Undo accepted it", name)
		}
	}
}

// undoCandidates are knob assignments a sweep might make on c.
func undoCandidates(c *Config, rng *rand.Rand) []string {
	var out []string
	for _, k := range []string{"offload.checksum", "offload.tso", "offload.lro", "blocklist"} {
		out = append(out, k+"=on", k+"=off")
	}
	for _, v := range []string{"automatic", "hybrid", "advanced", "disabled"} {
		out = append(out, "nat.outbound="+v)
	}
	out = append(out, "filter=enabled", "filter=disabled", "xml:system/timeservers=!absent", "xml:system/timezone=Etc/UTC")
	for _, iface := range c.interfaceKeys() {
		out = append(out, fmt.Sprintf("rules@%s=%d", iface, rng.IntN(12)))
		for _, v := range []string{"off", "ids", "ips-legacy", "ips-inline"} {
			out = append(out, "ids@"+iface+"="+v)
		}
	}
	return slices.DeleteFunc(out, func(a string) bool {
		k, v, _ := strings.Cut(a, "=")
		return c.Check(k, v) != nil
	})
}

// undoForeignEdits are edits someone else makes where fwab never writes.
var undoForeignEdits = map[string]func(c *Config){
	"domain": func(c *Config) { c.setLeaf(c.root().SelectElement("system"), "domain", "admin.example", false) },
	"rule on top": func(c *Config) {
		if c.ruleParent() != nil {
			undoAdminRuleOnTop(c)
		}
	},
	"new section": func(c *Config) {
		c.insertChild(c.root(), elem("widgets", leaf("sequence", "system_information:col1:show")), "")
	},
	"cert renewed": func(c *Config) {
		if crt := c.root().FindElement("cert/crt"); crt != nil {
			crt.SetText("UmVuZXdlZCBieSBBQ01F")
		}
	},
	"revision only": func(*Config) {},
}

// undoSeeds is how many random sweeps TestUndoProperty makes per config.
const undoSeeds = 4

// TestUndoProperty: over random sweeps on every real config, undoing a
// sweep nobody else touched gives orig back (with and without the shortcut
// for an untouched box), and a foreign edit made where fwab never writes
// survives the undo: the result is orig with that edit.
func TestUndoProperty(t *testing.T) {
	files := upstreamFiles(t)
	edits := make([]string, 0, len(undoForeignEdits))
	for name := range undoForeignEdits {
		edits = append(edits, name)
	}
	slices.Sort(edits)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			orig, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for seed := range uint64(undoSeeds) {
				rng := rand.New(rand.NewPCG(seed, uint64(len(orig))))
				var saves [][]string
				data := orig
				for range 1 + rng.IntN(3) {
					c := undoLoad(t, data, "")
					cands := undoCandidates(c, rng)
					rng.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
					var pick []string
					seen := map[string]bool{}
					for _, a := range cands {
						k, _, _ := strings.Cut(a, "=")
						if !seen[k] && len(pick) < 1+rng.IntN(4) {
							seen[k] = true
							pick = append(pick, a)
						}
					}
					if err := c.SetAll(pick); err != nil {
						continue // a combination the knobs refuse together
					}
					saves = append(saves, pick)
					data = c.Bytes()
				}
				written := data
				t.Logf("seed %d: fwab saves %v", seed, saves)
				for _, shortcut := range []bool{true, false} {
					res, err := undo(orig, written, written, shortcut)
					if err != nil {
						t.Fatalf("seed %d %v: %v", seed, saves, err)
					}
					if res.Config == nil || len(res.Foreign)+len(res.Conflicts) > 0 {
						t.Fatalf("seed %d %v shortcut %v: Foreign %q, Conflicts %q", seed, saves, shortcut, res.Foreign, res.Conflicts)
					}
					if !SameIgnoringRevision(res.Config, orig) {
						t.Errorf("seed %d %v shortcut %v: Undo(orig, written, written) is not orig:\n%s", seed, saves, shortcut, lineDiff(string(orig), string(res.Config)))
					}
				}
				name := edits[rng.IntN(len(edits))]
				edit := undoForeignEdits[name]
				t.Logf("seed %d: foreign edit %s", seed, name)
				current, want := undoBoxSaves(t, written, edit), undoBoxSaves(t, orig, edit)
				res, err := Undo(orig, written, current)
				if err != nil {
					t.Fatal(err)
				}
				if res.Config == nil {
					t.Fatalf("seed %d %v, %s: conflicts %q", seed, saves, name, res.Conflicts)
				}
				if !SameIgnoringRevision(res.Config, want) {
					t.Errorf("seed %d %v, %s: result is not orig with the edit:\n%s", seed, saves, name, lineDiff(string(want), string(res.Config)))
				}
				if name == "revision only" && len(res.Foreign) > 0 {
					t.Errorf("seed %d %v: a save that changed nothing reads as foreign edits %q", seed, saves, res.Foreign)
				}
			}
		})
	}
}

// TestUndoManyGeneratedRules: removing tens of thousands of generated rules
// stays fast (one pass per parent, not one per rule).
func TestUndoManyGeneratedRules(t *testing.T) {
	orig := GenerateConfig(GenerateOptions{Rules: 1000})
	written := undoFwabWrites(t, orig, "2.7.2", []string{"rules@lan=12000", "rules@wan=4000", "offload.tso=on"})
	current := undoBoxSaves(t, written, undoAdminRuleOnTop)
	start := time.Now()
	res, err := Undo(orig, written, current)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("Undo took %v", d)
	}
	if res.Config == nil {
		t.Fatalf("conflicts %q", res.Conflicts)
	}
	if n := bytes.Count(res.Config, []byte("<rule>")); n != 1001 {
		t.Errorf("%d rules, want 1000 and the admin's", n)
	}
	if !slices.Equal(res.Foreign, []string{"filter/rule[1]"}) {
		t.Errorf("Foreign = %q", res.Foreign)
	}
}
