package configxml

import (
	"slices"
	"testing"

	"github.com/beevik/etree"
	"github.com/fwab/fwab/fixtures"
)

// partsSamples are values of each knob to set in TestKnobParts.
func partsSamples(k *KnobSpec, f Flavor) []string {
	switch k.Name {
	case "rules":
		return []string{"0", "3"}
	case "ipsec":
		return []string{"aes128gcm16", "aes256-sha256", "none"}
	case "crypto.hardware":
		if f == PfSense {
			return []string{"none", "aesni"}
		}
		return []string{"none", "qat"}
	}
	return k.Values
}

// TestKnobParts holds each knob's parts to the code: its value is read
// only from where it says, and Apply, which reads again only the knobs
// that read what a change writes, reports exactly the changes a
// comparison of every knob's value before and after reports.
func TestKnobParts(t *testing.T) {
	for _, name := range fixtures.Configs() {
		t.Run(name, func(t *testing.T) {
			base := loadFixture(t, name)
			var assignments [][]string
			for _, kv := range base.Values() {
				ref, _ := ParseRef(kv.Knob)
				k := lookupKnob(ref.Name)

				c := loadFixture(t, name)
				c.touched = map[string]bool{}
				if _, err := k.get(c, ref.Qualifier); err != nil {
					t.Fatal(err)
				}
				for tag := range c.touched {
					if !overlaps([]string{tag}, k.readsFrom(c)) {
						t.Errorf("%s is read from <%s>, which its parts %v do not name", kv.Knob, tag, k.readsFrom(c))
					}
				}
				for _, v := range partsSamples(k, base.flavor) {
					assignments = append(assignments, []string{kv.Knob + "=" + v})
				}
			}
			assignments = append(assignments,
				[]string{"xml:system/disablefilter="},
				[]string{"xml:interfaces/lan/hw_settings_overwrite=1", "offload.tso=on"},
				[]string{"xml:interfaces/opt9/if=igb9"},
				[]string{"xml:interfaces/lan=!absent"},
				[]string{"offload.lro=off", "rules@lan=2", "nat.outbound=hybrid"},
			)
			for _, as := range assignments {
				c := loadFixture(t, name)
				got, err := c.Apply(as)
				if err != nil {
					continue // refused: nothing to compare
				}
				all := loadFixture(t, name)
				before := all.Values()
				if err := all.SetAll(as); err != nil {
					t.Fatalf("%v: Apply took it, SetAll refuses: %v", as, err)
				}
				want := diffValues(before, all.Values())
				got = slices.DeleteFunc(got, func(ch Change) bool { return ch.Knob[:4] == "xml:" })
				if !slices.Equal(got, want) {
					t.Errorf("%v: Apply reports %v, a comparison of every knob %v", as, got, want)
				}
			}
		})
	}
}

// TestApplyLeavesFilterUnread: setting an offload does not build the
// filter rules, and the unread <filter> is written back as it was.
func TestApplyLeavesFilterUnread(t *testing.T) {
	c := loadFixture(t, "configs/pfsense-2.7.xml")
	if _, err := c.Apply([]string{"rules@lan=50"}); err != nil {
		t.Fatal(err)
	}
	c, err := LoadBytes(c.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply([]string{"offload.tso=off"}); err != nil {
		t.Fatal(err)
	}
	LintChanged(c, []string{"offload.tso=off"})
	filter := c.top().SelectElement("filter")
	if _, unread := c.src.unread[filter]; !unread {
		t.Fatal("<filter> was read to set an offload")
	}
	again, err := LoadBytes(c.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := getRules(again, "lan"); n != "50" {
		t.Errorf("rules@lan = %s after the write, want 50", n)
	}
	if v, _ := again.Get("offload.tso"); v != "off" {
		t.Errorf("offload.tso = %s after the write, want off", v)
	}
}

// TestDiffUnreadAsRead: Diff of configs whose sections are unread (each
// compared by its bytes, then child by child from the input) finds what
// it finds when every section has been read and compared as a tree.
func TestDiffUnreadAsRead(t *testing.T) {
	edits := [][]string{
		{"rules@lan=3"},
		{"offload.tso=on", "rules@lan=2", "xml:system/hostname=other"},
		{"xml:filter/rule[1]/descr=changed", "xml:filter/rule[2]=!absent"},
		{"xml:nat/outbound/mode=advanced"},
		{"xml:interfaces/opt9/if=igb9", "xml:filter/rule[1]/tracker=42"},
		{"xml:unheard/of=1"},
	}
	for _, name := range fixtures.Configs() {
		for _, edit := range edits {
			orig := loadFixture(t, name)
			changed := loadFixture(t, name)
			if err := changed.SetAll(edit); err != nil {
				continue
			}
			data := changed.Bytes()
			lazy := func(b []byte) *Config {
				c, err := LoadBytes(b)
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			read := func(b []byte) *Config { c := lazy(b); c.Root(); return c }
			ga := diffPaths(lazy(orig.Bytes()), lazy(data))
			want := diffPaths(read(orig.Bytes()), read(data))
			if !slices.Equal(ga, want) {
				t.Errorf("%s %v: unread sections diff to\n%v\nread ones to\n%v", name, edit, ga, want)
			}
			if ga, want := diffPaths(lazy(data), lazy(orig.Bytes())), diffPaths(read(data), read(orig.Bytes())); !slices.Equal(ga, want) {
				t.Errorf("%s %v, reversed: unread sections diff to\n%v\nread ones to\n%v", name, edit, ga, want)
			}
		}
	}
}

// TestXMLKnobOnWholeSection: an xml: path that names a section reads it
// first, unread or not: it has child elements, so it is refused, and a
// section holding only text reports its change.
func TestXMLKnobOnWholeSection(t *testing.T) {
	c := loadFixture(t, "configs/pfsense-2.7.xml")
	if v, err := c.Get("xml:filter"); err == nil {
		t.Errorf("Get(xml:filter) = %q, nil; want the error for an element with child elements", v)
	}
	c = loadFixture(t, "configs/pfsense-2.7.xml")
	if err := c.SetAll([]string{"xml:filter=!absent"}); err == nil {
		if v, _ := c.Get("rules@lan"); c.find("filter") == nil {
			t.Errorf("xml:filter=!absent removed the whole <filter> (rules@lan now %s)", v)
		}
	}
	for _, name := range fixtures.Configs() {
		c := loadFixture(t, name)
		c.Root() // every section read: the value as the tree has it
		theme, err := c.Get("xml:theme")
		if err != nil || theme == xmlAbsent {
			continue
		}
		c = loadFixture(t, name)
		changes, err := c.Apply([]string{"xml:theme=other"})
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) != 1 || changes[0].From != theme {
			t.Errorf("%s: Apply(xml:theme=other) = %v, want one change from %q", name, changes, theme)
		}
	}
}

// TestViewKeepsSpaceBetweenTexts: a child read from the input on its own
// drops the white space between elements, not that between two texts,
// which etree's Text joins: "a b" is not "ab".
func TestViewKeepsSpaceBetweenTexts(t *testing.T) {
	doc := func(descr string) []byte {
		return []byte("<pfsense>\n\t<filter>\n\t\t<rule>\n\t\t\t<tracker>7</tracker>\n\t\t\t<descr>" + descr + "</descr>\n\t\t</rule>\n\t</filter>\n</pfsense>\n")
	}
	for _, descr := range []string{"<![CDATA[a]]> <![CDATA[b]]>", "a<!--c--> <!--d-->b", "a<!--c-->\n<![CDATA[b]]>"} {
		a, err := LoadBytes(doc(descr))
		if err != nil {
			t.Fatal(err)
		}
		b, err := LoadBytes(doc("ab"))
		if err != nil {
			t.Fatal(err)
		}
		got := diffPaths(a, b)
		a.Root()
		b.Root()
		if want := diffPaths(a, b); !slices.Equal(got, want) || len(want) != 1 {
			t.Errorf("%s against ab: unread %v, read %v; want the descr changed", descr, got, want)
		}
	}
}

// viewIndex is the index of an unread section made from its children
// built on their own: what Load's indexer must give.
func viewIndex(src *source, sec *etree.Element) []child {
	var ix []child
	src.eachIn(src.unread[sec], func(e *etree.Element, sp span) bool {
		ix = append(ix, childOf(e, sp))
		return true
	})
	return ix
}

// checkIndex compares Load's index of every unread section with the one
// built from the children.
func checkIndex(t *testing.T, c *Config) {
	t.Helper()
	for _, sec := range c.top().ChildElements() {
		if _, unread := c.src.unread[sec]; !unread {
			continue
		}
		if got, want := c.src.children(sec), viewIndex(c.src, sec); !slices.Equal(got, want) {
			t.Fatalf("index of <%s>:\n got %+v\nwant %+v", sec.Tag, got, want)
		}
	}
}

func TestLoadIndex(t *testing.T) {
	for _, name := range fixtures.Configs() {
		checkIndex(t, load(t, name))
	}
	c, err := LoadBytes([]byte(`<pfsense><filter>
	<rule uuid="u1" x:uuid="u2"><x:tracker> 7 </x:tracker><tracker>8</tracker><descr>a<!--c--> <![CDATA[b]]><i/>c</descr><interface/></rule>
	<rule/><separator><descr><?pi?>x</descr></separator>
	<rule><source><descr>deep</descr></source><interface>
	  lan </interface></rule></filter></pfsense>`))
	if err != nil {
		t.Fatal(err)
	}
	checkIndex(t, c)
	if ix := c.src.children(c.top().SelectElement("filter")); len(ix) != 4 || ix[0].tracker != "7" || ix[0].descr != "a b" || ix[3].iface != "lan" {
		t.Errorf("index %+v", ix)
	}
}
