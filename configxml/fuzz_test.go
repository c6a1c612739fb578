package configxml

import (
	"bytes"
	"strings"
	"testing"

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
		c.Values()
		Lint(c)
	})
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
