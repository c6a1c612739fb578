package configxml

import (
	"bytes"
	"encoding/xml"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/fixtures"
)

// FuzzLoad: Load never panics, and whatever it accepts it writes back byte
// for byte.
func FuzzLoad(f *testing.F) {
	for _, name := range fixtures.Configs() {
		f.Add(fixtures.Read(name))
	}
	f.Add([]byte("<pfsense><a/><b></b><![CDATA[x]]></pfsense>"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := LoadBytes(data)
		if err != nil {
			return
		}
		if got := c.Bytes(); !bytes.Equal(got, data) {
			t.Fatalf("round trip changed an accepted document:\n%s", lineDiff(string(data), string(got)))
		}
		checkIndex(t, c)
		c.Values()
		Lint(c)
		// What fwab's scanner accepts, encoding/xml accepts too, with the
		// same elements and the same text.
		if want, got := stdTokens(t, data), docTokens(c); !slices.Equal(want, got) {
			t.Fatalf("scanner and encoding/xml disagree:\n std %q\nfwab %q", want, got)
		}
		// Every section is read now: written from the tree, the
		// document is still the same bytes.
		if got := c.Bytes(); !bytes.Equal(got, data) {
			t.Fatalf("round trip of the read document changed it:\n%s", lineDiff(string(data), string(got)))
		}
	})
}

// stdTokens lists elements and non-space text as encoding/xml sees them.
func stdTokens(t *testing.T, data []byte) []string {
	d := xml.NewDecoder(bytes.NewReader(bytes.TrimPrefix(data, []byte("\ufeff"))))
	d.Strict = true
	var out []string
	text := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("fwab accepted a document encoding/xml refuses: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if strings.TrimSpace(text) != "" {
				out = append(out, text)
			}
			out = append(out, "<"+tok.Name.Local)
			text = ""
		case xml.EndElement:
			if strings.TrimSpace(text) != "" {
				out = append(out, text)
			}
			out = append(out, ">")
			text = ""
		case xml.CharData:
			text += string(tok)
		}
	}
}

func docTokens(c *Config) []string {
	var out []string
	var walk func(e *etree.Element)
	walk = func(e *etree.Element) {
		out = append(out, "<"+e.Tag)
		text := ""
		for _, ch := range e.Child {
			switch ch := ch.(type) {
			case *etree.Element:
				if strings.TrimSpace(text) != "" {
					out = append(out, text)
				}
				text = ""
				walk(ch)
			case *etree.CharData:
				text += ch.Data
			}
		}
		if strings.TrimSpace(text) != "" {
			out = append(out, text)
		}
		out = append(out, ">")
	}
	walk(c.Root())
	return out
}

// FuzzSet: any knob=value either is refused with the config untouched, or
// is applied, reads back, and leaves a config that loads again.
func FuzzSet(f *testing.F) {
	for _, s := range []string{
		"offload.tso=on", "rules@lan=12", "ids@wan=ips-inline", "ipsec@site-b=aes256-sha256-modp2048/aes128gcm16",
		"nat.outbound=disabled", "xml:system/hostname=a<b&c", "xml:filter/rule[2]/descr=]]>", "blocklist=on",
		"rules@opt1=0", "ipsec@site-b=none", "xml:system/x-y.z=\"'",
	} {
		f.Add("configs/pfsense-2.7.xml", s)
		f.Add("configs/opnsense-26.7.xml", s)
	}
	f.Fuzz(func(t *testing.T, fixture, assignment string) {
		data, ok := fixtureOrNil(fixture)
		if !ok {
			return
		}
		c, err := LoadBytes(data)
		if err != nil {
			t.Fatal(err)
		}
		before := c.Bytes()
		ref, value, perr := ParseAssignment(assignment)
		if err := c.SetAll([]string{assignment}); err != nil {
			if !bytes.Equal(before, c.Bytes()) {
				t.Fatalf("refused %q (%v) but changed the config", assignment, err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("SetAll accepted %q that ParseAssignment refuses: %v", assignment, perr)
		}
		back, err := LoadBytes(c.Bytes())
		if err != nil {
			t.Fatalf("after %q the config no longer loads: %v", assignment, err)
		}
		back.SetProduct(c.Product().Version)
		got, err := back.Get(ref.String())
		if err != nil {
			t.Fatalf("Get(%s) after reload: %v", ref, err)
		}
		value = Canonical(ref.String(), value)
		if ref.Name == "xml" {
			value = strings.TrimSpace(value)
			got = strings.TrimSpace(got)
		}
		if got != value {
			t.Fatalf("after %q and a reload Get = %q; want %q", assignment, got, value)
		}
	})
}

func fixtureOrNil(name string) ([]byte, bool) {
	for _, n := range fixtures.Configs() {
		if n == name {
			return fixtures.Read(n), true
		}
	}
	return nil, false
}
