package configxml

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/internal/golden"
)

func load(t testing.TB, name string) *Config {
	t.Helper()
	c, err := LoadBytes(fixtures.Read(name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	c.Now = func() time.Time { return time.Unix(1800000000, 250000000) }
	c.User = "fwab@test"
	return c
}

// productOf gives each fixture the product version its name says.
func productOf(name string) string {
	base := strings.TrimSuffix(filepath.Base(name), ".xml")
	_, v, _ := strings.Cut(base, "-")
	return v
}

func loadFixture(t testing.TB, name string) *Config {
	t.Helper()
	c := load(t, name)
	if err := c.SetProduct(productOf(name)); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTripFixtures(t *testing.T) {
	for _, name := range fixtures.Configs() {
		t.Run(name, func(t *testing.T) {
			data := fixtures.Read(name)
			c, err := LoadBytes(data)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			n, err := c.WriteTo(&b)
			if err != nil || n != int64(len(data)) {
				t.Fatalf("WriteTo = %d, %v; want %d, nil", n, err, len(data))
			}
			if !bytes.Equal(b.Bytes(), data) {
				t.Errorf("round trip changed the file:\n%s", lineDiff(string(data), b.String()))
			}
		})
	}
}

// TestRoundTripForms covers the forms a config may take that a DOM writer
// normally rewrites: both empty-element forms, attribute quoting, entities,
// CDATA, comments, CRLF and odd whitespace inside tags.
func TestRoundTripForms(t *testing.T) {
	docs := []string{
		"<?xml version='1.0' encoding='UTF-8' ?>\n<pfsense>\n\t<a/>\n\t<b></b>\n\t<c />\n</pfsense>\n",
		"<pfsense><x a='1' b=\"2\"   c = '3'>t</x></pfsense>",
		"<pfsense>\r\n  <d>&lt;&gt;&amp;&quot;&apos;&#65;&#x42;</d>\r\n</pfsense>\r\n",
		"<pfsense><d><![CDATA[<raw> & ]]]><![CDATA[]>]]>tail</d></pfsense>",
		"<!-- before -->\n<pfsense><!-- inside --><e\n   attr=\"v\"\n/></pfsense >\n<!-- after -->\n",
		"<opnsense><OPNsense><IDS version=\"1.0.9\"><general/></IDS></OPNsense></opnsense>",
		"\ufeff<pfsense><u>ünïcödé ✓</u></pfsense>",
	}
	for i, d := range docs {
		c, err := LoadBytes([]byte(d))
		if err != nil {
			t.Errorf("doc %d: Load: %v", i, err)
			continue
		}
		if got := string(c.Bytes()); got != d {
			t.Errorf("doc %d: round trip\n got %q\nwant %q", i, got, d)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	deep := "<pfsense>" + strings.Repeat("<a>", 300) + strings.Repeat("</a>", 300) + "</pfsense>"
	tests := []struct {
		name, doc string
		want      string // substring of the error
	}{
		{"empty", "", "empty"},
		{"not xml", string(fixtures.Read("broken/not-xml.xml")), "config.xml:"},
		{"truncated", string(fixtures.Read("broken/truncated.xml")), "truncated"},
		{"wrong root", string(fixtures.Read("broken/wrong-root.xml")), "root element is <sophos>"},
		{"two roots", string(fixtures.Read("broken/two-roots.xml")), "config.xml:5:1: a second root element <pfsense>"},
		{"doctype", string(fixtures.Read("broken/doctype-entities.xml")), "does not expand entities"},
		{"mismatched", string(fixtures.Read("broken/mismatched.xml")), "config.xml:5:15: </system> does not close <hostname> opened at 5:3"},
		{"deep", deep, "nested more than 256 deep"},
		{"unknown entity", "<pfsense><a>&nope;</a></pfsense>", "invalid character entity &nope;"},
		{"text outside", "<pfsense/>junk", "text outside the root"},
		{"latin1", "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><pfsense/>", "encoding \"ISO-8859-1\" is not supported"},
		{"control character in long text", "<pfsense><a>aaaaaaaaaaaaaaaaaaaaaaaaaaaa\x01bbbbbbbbbbbbbbbbbbbbbb</a></pfsense>", "config.xml:1:41: illegal character code U+0001"},
		{"invalid UTF-8", "<pfsense><a>aaaaaaaaaaaaaaaaaaaa\xff</a></pfsense>", "invalid UTF-8"},
		{"xml version", "<?xml version=\"1.1\"?><pfsense/>", "only 1.0 is supported"},
		{"dash dash in comment", "<pfsense><!-- a -- b --></pfsense>", "-- is not allowed inside a comment"},
		{"non-ASCII name", "<pfsense><ä/></pfsense>", "must be followed by an element name"},
		{"late declaration", "\n<?xml version=\"1.0\"?><pfsense/>", "must be the very first"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LoadBytes([]byte(tt.doc))
			if err == nil {
				t.Fatalf("Load succeeded; want an error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load error = %q; want it to contain %q", err, tt.want)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *ParseError", err)
			}
		})
	}
}

// TestLoadLargeRRD loads a 100 MB config whose bulk is an RRD blob, as real
// boxes carry, and checks that it round-trips.
func TestLoadLargeRRD(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB config: skipped in -short mode")
	}
	data := GenerateConfig(GenerateOptions{Rules: 2000, RRDBytes: 100 << 20})
	c, err := LoadBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("offload.tso", "on"); err != nil {
		t.Fatal(err)
	}
	out := c.Bytes()
	if d := len(out) - len(data); d < -200 || d > 200 {
		t.Errorf("one knob changed the size by %d bytes", d)
	}
	if _, err := LoadBytes(out); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

func TestFlavorAndVersion(t *testing.T) {
	tests := []struct {
		name          string
		flavor        Flavor
		configVersion string
		product       string
	}{
		{"configs/pfsense-2.6.xml", PfSense, "22.2", "2.6.0"},
		{"configs/pfsense-2.7.xml", PfSense, "23.3", "2.7.2"},
		{"configs/pfsense-2.8.xml", PfSense, "24.0", "2.8.0"},
		{"configs/opnsense-25.7.xml", OPNsense, "", "25.7"},
		{"configs/opnsense-26.1.xml", OPNsense, "", "26.1"},
		{"configs/opnsense-26.7.xml", OPNsense, "", "26.7"},
	}
	for _, tt := range tests {
		c := load(t, tt.name)
		if c.Flavor() != tt.flavor || c.ConfigVersion() != tt.configVersion {
			t.Errorf("%s: flavor, config version = %s, %q; want %s, %q", tt.name, c.Flavor(), c.ConfigVersion(), tt.flavor, tt.configVersion)
		}
		if p := c.Product(); p.Version != tt.product || !p.Inferred {
			t.Errorf("%s: Product() = %+v; want %s, inferred", tt.name, p, tt.product)
		}
		reported, want := "2.7.2-RELEASE", "2.7.2"
		if tt.flavor == OPNsense {
			reported, want = "OPNsense 26.7.1_2", "26.7.1"
		}
		if err := c.SetProduct(reported); err != nil || c.Product() != (Product{Version: want}) {
			t.Errorf("SetProduct(%s) = %v, Product %+v", reported, err, c.Product())
		}
	}
	c := load(t, "configs/pfsense-2.7.xml")
	if err := c.SetProduct("latest"); err == nil {
		t.Error("SetProduct(latest) succeeded; want an error")
	}
	// A file with 26.1's layout is not read as an older release: its
	// offloads and IDS mode live where 25.7 would not look.
	for _, tt := range []struct{ fixture, product, want string }{
		{"configs/opnsense-26.1.xml", "25.7", "the config has OPNsense/Interfaces/settings, which OPNsense writes from 26.1 on"},
		{"configs/opnsense-26.7.xml", "24.7.3", "writes from 26.1 on"},
		{"configs/opnsense-25.7.xml", "25.7", ""},
		{"configs/opnsense-25.7.xml", "26.1", ""}, // an upgrade migrates it
	} {
		c := load(t, tt.fixture)
		err := c.SetProduct(tt.product)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.product)) {
			t.Errorf("%s at %s: SetProduct = %v; want %q", tt.fixture, tt.product, err, tt.want)
		}
	}
}

func TestGolden(t *testing.T) {
	tests := []struct {
		fixture string
		set     []string
	}{
		{"configs/pfsense-2.7.xml", []string{"offload.checksum=off", "offload.tso=on", "nat.outbound=advanced", "rules@lan=3", "ids@lan=ips-inline", "blocklist=on", "ipsec@site-b=aes256-sha256"}},
		{"configs/pfsense-2.6.xml", []string{"ipsec@site-b=aes128-sha1", "ids@wan=ips-legacy", "xml:system/hostname=fw-26"}},
		{"configs/opnsense-25.7.xml", []string{"offload.checksum=on", "ids@lan=ips-inline", "ids@wan=ips-inline", "rules@lan=2", "ipsec@site-b=aes256gcm16"}},
		{"configs/opnsense-26.1.xml", []string{"offload.checksum=off", "offload.lro=on", "ids@wan=ips-inline", "nat.outbound=hybrid"}},
		{"configs/opnsense-26.7.xml", []string{"rules@lan=2", "ids@wan=off", "ipsec@site-b=aes256gcm16"}},
	}
	for _, tt := range tests {
		name := strings.TrimSuffix(filepath.Base(tt.fixture), ".xml")
		t.Run(name, func(t *testing.T) {
			c := loadFixture(t, tt.fixture)
			if err := c.SetAll(tt.set); err != nil {
				t.Fatal(err)
			}
			got := c.Bytes()
			golden.File(t, name+".golden.xml", got)
			// The result loads, and every knob reads back as set.
			back, err := LoadBytes(got)
			if err != nil {
				t.Fatal(err)
			}
			back.SetProduct(productOf(tt.fixture))
			for _, a := range tt.set {
				knob, value, _ := strings.Cut(a, "=")
				if v, err := back.Get(knob); err != nil || v != value {
					t.Errorf("after reload Get(%s) = %q, %v; want %q", knob, v, err, value)
				}
			}
		})
	}
}

// TestSetEveryKnob sets every knob to every value on every fixture and checks
// that it reads back, survives a reload, and that setting it again changes
// nothing.
func TestSetEveryKnob(t *testing.T) {
	values := map[string][]string{
		"offload.checksum":    {"off", "on"},
		"offload.tso":         {"on", "off"},
		"offload.lro":         {"on", "off"},
		"filter":              {"disabled", "enabled"},
		"nat.outbound":        {"advanced", "disabled", "hybrid", "automatic"},
		"rules@lan":           {"5", "1", "0"},
		"ids@lan":             {"ids", "ips-inline", "off"},
		"blocklist":           {"on", "off"},
		"ipsec@site-b":        {"aes256gcm16", "aes128-sha256", "none"},
		"xml:system/hostname": {"renamed", "!absent"},
	}
	// OPNsense's Swanctl model offers ESP proposals without PFS only from a
	// short list (see swanctl_proposals.go); 24.7 lacks aes256gcm16.
	opnValues := map[string][]string{"ipsec@site-b": {"aes256-sha256", "aes128gcm16-modp2048", "none"}}
	for _, name := range fixtures.Configs() {
		for knob, vals := range values {
			t.Run(name+"/"+knob, func(t *testing.T) {
				c := loadFixture(t, name)
				if c.Flavor() == OPNsense && knob == "ids@lan" {
					// OPNsense runs one mode on all IDS interfaces.
					if err := c.Set("ids@wan", "off"); err != nil {
						t.Fatal(err)
					}
				}
				if c.Flavor() == OPNsense && knob == "blocklist" {
					if err := c.Set(knob, "on"); err == nil || !strings.Contains(err.Error(), "does not exist on opnsense") {
						t.Errorf("Set(blocklist) on OPNsense = %v; want a refusal", err)
					}
					return
				}
				if ov, ok := opnValues[knob]; ok && c.Flavor() == OPNsense {
					vals = ov
				}
				for _, v := range vals {
					if knob == "nat.outbound" && v == "advanced" && c.manualOutboundRules() == 0 {
						if err := c.Set(knob, v); err == nil {
							t.Errorf("Set(nat.outbound, advanced) with no manual rules = nil error, want a refusal")
						}
						continue
					}
					if err := c.Set(knob, v); err != nil {
						t.Fatalf("Set(%s, %s): %v", knob, v, err)
					}
					if got, err := c.Get(knob); err != nil || got != v {
						t.Fatalf("Get(%s) = %q, %v; want %q", knob, got, err, v)
					}
					before := c.Bytes()
					if err := c.Set(knob, v); err != nil || !bytes.Equal(before, c.Bytes()) {
						t.Fatalf("setting %s=%s twice changed the config (err %v)", knob, v, err)
					}
					back, err := LoadBytes(before)
					if err != nil {
						t.Fatalf("reload after %s=%s: %v", knob, v, err)
					}
					back.SetProduct(productOf(name))
					if got, _ := back.Get(knob); got != v {
						t.Fatalf("after reload Get(%s) = %q; want %q", knob, got, v)
					}
				}
			})
		}
	}
}

// TestMinimalChange checks that a change touches only the changed lines and
// <revision>.
func TestMinimalChange(t *testing.T) {
	tests := []struct {
		fixture, set string
		changed      int // lines outside <revision> that may differ (- and +)
	}{
		{"configs/pfsense-2.7.xml", "nat.outbound=advanced", 2},
		{"configs/pfsense-2.7.xml", "offload.tso=on", 1},
		{"configs/pfsense-2.7.xml", "offload.checksum=off", 1},
		{"configs/pfsense-2.7.xml", "blocklist=on", 2},
		{"configs/pfsense-2.7.xml", "xml:system/hostname=fw-b", 2},
		{"configs/opnsense-26.1.xml", "offload.lro=on", 2},
		{"configs/opnsense-25.7.xml", "offload.lro=on", 1},
	}
	for _, tt := range tests {
		t.Run(tt.fixture+"/"+tt.set, func(t *testing.T) {
			c := loadFixture(t, tt.fixture)
			orig := string(c.Bytes())
			knob, value, _ := strings.Cut(tt.set, "=")
			if err := c.Set(knob, value); err != nil {
				t.Fatal(err)
			}
			if n := changedLines(orig, string(c.Bytes())); n != tt.changed {
				t.Errorf("%d lines outside <revision> changed; want %d:\n%s", n, tt.changed, lineDiff(orig, string(c.Bytes())))
			}
		})
	}
}

// changedLines counts lines, outside the revision block, that are only in
// a or only in b.
func changedLines(a, b string) int {
	count := map[string]int{}
	for _, l := range strings.Split(stripRevision(a), "\n") {
		count[l]++
	}
	for _, l := range strings.Split(stripRevision(b), "\n") {
		count[l]--
	}
	n := 0
	for _, v := range count {
		n += max(v, -v)
	}
	return n
}

func stripRevision(s string) string {
	i := strings.Index(s, "<revision>")
	j := strings.Index(s, "</revision>")
	if i < 0 || j < 0 {
		return s
	}
	return s[:i] + s[j:]
}

func TestSetRefused(t *testing.T) {
	tests := []struct {
		fixture, product, assignment, want string
	}{
		{"configs/pfsense-2.7.xml", "", "offload.gro=off", `unknown knob "offload.gro"; knobs are: offload.checksum, offload.tso`},
		{"configs/pfsense-2.7.xml", "", "offload.tso=disabled", `invalid value "disabled"; valid values: on, off`},
		{"configs/pfsense-2.7.xml", "", "ids@dmz=ids", `no interface "dmz" in this config; it has: wan, lan, opt1`},
		{"configs/pfsense-2.7.xml", "", "ids@lan=inline", "valid values: off, ids, ips-legacy, ips-inline"},
		{"configs/pfsense-2.7.xml", "", "rules@lan=-1", "give a rule count N ≥ 0"},
		{"configs/pfsense-2.7.xml", "", "rules@lan=lots", "give a rule count N ≥ 0"},
		{"configs/pfsense-2.7.xml", "", "ipsec@site-b=3des-sha1", "3des is not valid on pfsense 2.7.2: pfSense 2.7 and later removed"},
		{"configs/pfsense-2.7.xml", "", "ipsec@site-b=aes256-md5", "md5 is not valid on pfsense 2.7.2"},
		{"configs/pfsense-2.6.xml", "", "ipsec@site-b=chacha20poly1305", "ChaCha20-Poly1305 arrived in pfSense 2.7"},
		{"configs/pfsense-2.7.xml", "", "ipsec@site-b=aes256", "aes256 needs an integrity algorithm"},
		{"configs/pfsense-2.7.xml", "", "ipsec@site-b=aes128gcm16-sha1", "AEAD cipher and takes no integrity"},
		{"configs/pfsense-2.7.xml", "", "ipsec@site-b=rot13", `unknown cipher "rot13"`},
		{"configs/pfsense-2.7.xml", "", "ipsec@site-c=aes128gcm16", `no IPsec tunnel "site-c" in this config`},
		{"configs/pfsense-2.7.xml", "", "firmware=2.8.0", "changed by upgrading the firewall"},
		{"configs/pfsense-2.7.xml", "", "xml:system/../etc=x", "is not an element name"},
		{"configs/pfsense-2.7.xml", "", "xml:system=x", "has child elements"},
		{"configs/pfsense-2.7.xml", "", "offload.tso", "is not knob=value"},
		{"configs/pfsense-2.7.xml", "", "nat.outbound@wan=hybrid", "takes no @qualifier"},
		{"configs/pfsense-2.7.xml", "", "offload.lro=off", "offload.lro is given twice (on, then off)"},
		{"configs/pfsense-2.7.xml", "", "offload.lro=on", ""}, // the same value twice is no conflict
		{"configs/opnsense-26.1.xml", "", "blocklist=on", "does not exist on opnsense"},
		{"configs/opnsense-26.1.xml", "", "ids@lan=ips-legacy", "OPNsense offers ids or ips-inline"},
		{"configs/opnsense-26.1.xml", "", "ids@lan=ips-inline", "one IDS mode for all its interfaces, and ids@wan is ids"},
		{"configs/opnsense-26.1.xml", "", "ipsec@site-b=3des-sha1", "OPNsense's IPsec connections offer no 3des"},
	}
	for _, tt := range tests {
		t.Run(tt.assignment, func(t *testing.T) {
			c := load(t, tt.fixture)
			orig := c.Bytes()
			err := c.SetAll([]string{"offload.lro=on", tt.assignment})
			if tt.want == "" {
				if err != nil {
					t.Errorf("SetAll(%q) = %v, want it accepted", tt.assignment, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SetAll(%q) = %v; want an error containing %q", tt.assignment, err, tt.want)
			}
			if !bytes.Equal(orig, c.Bytes()) {
				t.Errorf("a refused SetAll changed the config:\n%s", lineDiff(string(orig), string(c.Bytes())))
			}
		})
	}
}

func TestGeneratedRules(t *testing.T) {
	c := loadFixture(t, "configs/pfsense-2.7.xml")
	userRules := func() []string {
		var descrs []string
		for _, r := range c.Root().FindElements("filter/rule") {
			if d := childText(r, "descr"); !strings.HasPrefix(d, GeneratedPrefix) {
				descrs = append(descrs, d)
			}
		}
		return descrs
	}
	users := userRules()
	steps := []struct {
		knob, value string
		lan, wan    int
	}{
		{"rules@lan", "100", 100, 0},
		{"rules@wan", "7", 100, 7},
		{"rules@lan", "10", 10, 7},
		{"rules@lan", "0", 0, 7},
		{"rules@wan", "0", 0, 0},
	}
	for _, s := range steps {
		if err := c.Set(s.knob, s.value); err != nil {
			t.Fatal(err)
		}
		lan, _ := c.Get("rules@lan")
		wan, _ := c.Get("rules@wan")
		if lan != fmt.Sprint(s.lan) || wan != fmt.Sprint(s.wan) {
			t.Fatalf("after %s=%s: rules@lan=%s rules@wan=%s; want %d, %d", s.knob, s.value, lan, wan, s.lan, s.wan)
		}
		if got := userRules(); strings.Join(got, "|") != strings.Join(users, "|") {
			t.Fatalf("user rules changed: %q; want %q", got, users)
		}
		if fs := Lint(c); len(fs) > 0 {
			t.Fatalf("lint after %s=%s: %+v", s.knob, s.value, fs)
		}
	}
	// Back to zero everywhere: the same bytes as the original, but for <revision>.
	orig := string(fixtures.Read("configs/pfsense-2.7.xml"))
	if n := changedLines(orig, string(c.Bytes())); n != 0 {
		t.Errorf("after removing all generated rules %d lines differ:\n%s", n, lineDiff(orig, string(c.Bytes())))
	}
}

// labTunnelSpec is the tunnel the IPsec tests define.
var labTunnelSpec = TunnelSpec{
	Name: "lab", RemoteAddr: "198.19.0.2", LocalAddr: "198.19.0.1",
	LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24",
	LocalID: "dut.lab", RemoteID: "peer.lab", PSK: "s3cret-psk",
}

func TestIPsecCreateTunnel(t *testing.T) {
	spec := labTunnelSpec
	for _, name := range []string{"configs/pfsense-2.7.xml", "configs/opnsense-26.1.xml"} {
		t.Run(name, func(t *testing.T) {
			c := loadFixture(t, name)
			if err := c.Set("ipsec@lab", "aes128gcm16"); err == nil {
				t.Fatal("creating an undescribed tunnel succeeded")
			}
			c.DefineTunnel(spec)
			if err := c.Set("ipsec@lab", "aes256-sha256"); err != nil {
				t.Fatal(err)
			}
			back, err := LoadBytes(c.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			back.SetProduct(productOf(name))
			var got *Tunnel
			for _, tn := range back.Tunnels() {
				if tn.Name == "lab" {
					got = &tn
				}
			}
			if got == nil {
				t.Fatalf("tunnel lab missing after reload; tunnels %+v", back.Tunnels())
			}
			want := Proposal{IKE: Algos{"aes256", "sha256", "modp2048"}, ESP: Algos{"aes256", "sha256", ""}}
			if got.Proposal != want || got.RemoteAddr != spec.RemoteAddr || got.LocalNet != spec.LocalNet || got.RemoteNet != spec.RemoteNet || got.PSK != spec.PSK || !got.Enabled {
				t.Errorf("tunnel = %+v; want proposal %+v and the spec's addresses", *got, want)
			}
			if err := back.Set("ipsec@lab", "none"); err != nil {
				t.Fatal(err)
			}
			if v, _ := back.Get("ipsec@lab"); v != "none" {
				t.Errorf("after none Get = %q", v)
			}
			if err := back.Set("ipsec@lab", "aes128gcm16-modp2048"); err != nil {
				t.Fatal(err)
			}
			if v, _ := back.Get("ipsec@lab"); v != "aes128gcm16-modp2048" {
				t.Errorf("re-enabled Get = %q; want aes128gcm16-modp2048", v)
			}
		})
	}
}

// TestOPNsenseIDSDisabledList: OPNsense ships its IDS disabled with wan
// still listed; turning it on for lan must not turn it on for wan too.
func TestOPNsenseIDSDisabledList(t *testing.T) {
	for _, name := range []string{"configs/opnsense-25.7.xml", "configs/opnsense-26.7.xml"} {
		t.Run(name, func(t *testing.T) {
			c := loadFixture(t, name)
			for _, kv := range [][2]string{
				{"xml:OPNsense/IDS/general/enabled", "0"},
				{"xml:OPNsense/IDS/general/interfaces", "wan"},
				{"ids@lan", "ids"},
			} {
				if err := c.Set(kv[0], kv[1]); err != nil {
					t.Fatalf("Set(%s, %s): %v", kv[0], kv[1], err)
				}
			}
			for iface, want := range map[string]string{"lan": "ids", "wan": "off"} {
				if got, err := c.Get("ids@" + iface); err != nil || got != want {
					t.Errorf("ids@%s = %q, %v; want %q", iface, got, err, want)
				}
			}
			if got := c.Root().FindElement("OPNsense/IDS/general/interfaces").Text(); got != "lan" {
				t.Errorf("IDS interfaces = %q, want %q", got, "lan")
			}
		})
	}
}

// TestOPNsenseIPsecSwitch: OPNsense's IPsec runs only while the legacy
// <ipsec><enable> is set (the model's general.enabled is a read-only link to
// it), so ipsec@T sets that switch, and a connection reads as none without it.
func TestOPNsenseIPsecSwitch(t *testing.T) {
	c := loadFixture(t, "configs/opnsense-26.1.xml")
	if v, _ := c.Get("ipsec@site-b"); v == "none" {
		t.Fatalf("fixture's site-b reads none; want its proposal")
	}
	c.removeElement(c.root().FindElement("ipsec/enable"))
	if v, _ := c.Get("ipsec@site-b"); v != "none" {
		t.Errorf("without <ipsec><enable> ipsec@site-b = %q; want none", v)
	}
	general := c.root().FindElement("OPNsense/IPsec/general/enabled").Text()
	if err := c.Set("ipsec@site-b", "aes256-sha256"); err != nil {
		t.Fatal(err)
	}
	if e := c.root().FindElement("ipsec/enable"); e == nil || e.Text() != "1" {
		t.Errorf("after ipsec@site-b=aes256-sha256 <ipsec><enable> = %v; want 1", e)
	}
	if got := c.root().FindElement("OPNsense/IPsec/general/enabled").Text(); got != general {
		t.Errorf("the read-only OPNsense/IPsec/general/enabled changed: %q → %q", general, got)
	}
	if v, _ := c.Get("ipsec@site-b"); v != "aes256-sha256" {
		t.Errorf("ipsec@site-b = %q; want aes256-sha256", v)
	}
}

// TestOPNsenseProposalRefused: a proposal the version's Swanctl model does
// not offer is refused with the version and the nearest offers.
func TestOPNsenseProposalRefused(t *testing.T) {
	for _, tt := range []struct {
		version, value string
		want           []string // in the error; none: accepted
	}{
		{"26.1", "aes128gcm16", []string{"ESP (phase 2) proposal aes128gcm16", "OPNsense 26.1", "aes128gcm16-modp2048", "without PFS only: aes256-sha1, aes256-sha256, aes256gcm16, chacha20poly1305"}},
		{"24.7", "aes256gcm16", []string{"OPNsense 24.7", "aes256gcm16-x25519", "without PFS only: aes256-sha256"}},
		{"25.7", "chacha20poly1305", []string{"OPNsense 25.7", "its ciphers are:"}},
		{"26.1", "chacha20poly1305", []string{"IKE (phase 1) proposal chacha20poly1305-sha256-modp2048", "chacha20poly1305-sha256-x25519", "name the IKE proposal as IKE/ESP"}},
		{"26.1", "chacha20poly1305-sha256-x25519/chacha20poly1305", nil},
		{"25.7", "aes256gcm16", nil},
		{"24.7", "aes128gcm16-modp2048", nil},
	} {
		c := loadFixture(t, "configs/opnsense-"+tt.version+".xml")
		if err := c.SetProduct(tt.version); err != nil {
			t.Fatal(err)
		}
		err := c.Check("ipsec@site-b", tt.value)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s on %s: %v; want accepted", tt.value, tt.version, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s on %s accepted; want refused", tt.value, tt.version)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s on %s: error %q lacks %q", tt.value, tt.version, err, w)
			}
		}
	}
	got, err := Ciphers(OPNsense, "26.1")
	if err != nil || !slices.Contains(got, "aes128gcm16-modp2048") || slices.Contains(got, "aes128gcm16") {
		t.Errorf("Ciphers(opnsense, 26.1) = %v, %v; want aes128gcm16-modp2048 and not aes128gcm16", got, err)
	}
}

// TestOPNsenseTunnelLocalAddrFromInterface: OPNsense connections name
// local addresses, not interfaces, so a tunnel spec that names only an
// interface gets that interface's address; one whose interface has no
// static address is refused, naming it.
func TestOPNsenseTunnelLocalAddrFromInterface(t *testing.T) {
	c := load(t, "configs/opnsense-26.1.xml")
	c.DefineTunnel(TunnelSpec{Name: "t1", Interface: "wan", RemoteAddr: "198.19.0.2", LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24", LocalID: "a", RemoteID: "b", PSK: "k"})
	if err := c.Set("ipsec@t1", "aes256gcm16"); err != nil {
		t.Fatal(err)
	}
	if got := childText(c.swanctlConnection("t1"), "local_addrs"); got != "198.19.0.1" {
		t.Errorf("local_addrs = %q, want wan's address 198.19.0.1", got)
	}
	c = load(t, "configs/opnsense-26.1.xml")
	c.root().FindElement("interfaces/wan/ipaddr").SetText("dhcp")
	orig := c.Bytes()
	c.DefineTunnel(TunnelSpec{Name: "t1", Interface: "wan", RemoteAddr: "198.19.0.2", LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24", LocalID: "a", RemoteID: "b", PSK: "k"})
	if err := c.Set("ipsec@t1", "aes256gcm16"); err == nil || !strings.Contains(err.Error(), "local_addr") {
		t.Errorf("Set on a dhcp wan = %v, want a refusal asking for local_addr", err)
	}
	if !bytes.Equal(orig, c.Bytes()) {
		t.Error("a refused Set changed the config")
	}
}

// TestFilterKnob: router mode is <system><disablefilter>, present or absent,
// on both products; anything else in <system> is left alone.
func TestFilterKnob(t *testing.T) {
	for _, name := range []string{"configs/pfsense-2.7.xml", "configs/opnsense-26.1.xml"} {
		t.Run(name, func(t *testing.T) {
			c := loadFixture(t, name)
			if v, err := c.Get("filter"); err != nil || v != "enabled" {
				t.Fatalf("Get(filter) = %q, %v; want enabled", v, err)
			}
			if err := c.Set("filter", "off"); err == nil || !strings.Contains(err.Error(), "valid values: enabled, disabled") {
				t.Errorf("Set(filter, off) = %v; want the valid values listed", err)
			}
			if err := c.Set("filter", "disabled"); err != nil {
				t.Fatal(err)
			}
			if n := len(c.Root().FindElements("system/disablefilter")); n != 1 {
				t.Fatalf("%d <system><disablefilter> after filter=disabled; want 1", n)
			}
			if err := c.Set("filter", "enabled"); err != nil {
				t.Fatal(err)
			}
			if c.Root().FindElement("system/disablefilter") != nil {
				t.Fatal("<system><disablefilter> left after filter=enabled")
			}
		})
	}
}

func TestNeedsFilter(t *testing.T) {
	for _, tc := range []struct {
		knob, value string
		needs       bool
	}{
		{"nat.outbound", "automatic", true},
		{"nat.outbound", "hybrid", true},
		{"nat.outbound", "disabled", false},
		{"rules@lan", "10", true},
		{"rules@lan", "000", false},
		{"blocklist", "on", true},
		{"blocklist", "off", false},
		{"offload.tso", "on", false},
	} {
		if got := NeedsFilter(tc.knob, tc.value) != ""; got != tc.needs {
			t.Errorf("NeedsFilter(%s, %s) = %v; want %v", tc.knob, tc.value, got, tc.needs)
		}
	}
}

// TestCryptoKnob: <system><crypto_hardware> takes what each product's own
// code knows (pfSense's GUI keys, OPNsense's card drivers joined with ","),
// none removes it, and anything else is refused with the valid values.
func TestCryptoKnob(t *testing.T) {
	for _, tc := range []struct {
		name, set, text, refused, want string
	}{
		{"configs/pfsense-2.7.xml", "aesni_cryptodev", "aesni_cryptodev", "qat", "aesni, cryptodev, aesni_cryptodev"},
		{"configs/pfsense-2.6.xml", "aesni", "aesni", "aesni,cryptodev", "aesni, cryptodev, aesni_cryptodev"},
		{"configs/opnsense-26.1.xml", "qat,safe", "qat,safe", "aesni", "AES-NI in its kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := loadFixture(t, tc.name)
			if v, err := c.Get("crypto.hardware"); err != nil || v != "none" {
				t.Fatalf("Get(crypto.hardware) = %q, %v; want none", v, err)
			}
			if err := c.Set("crypto.hardware", tc.refused); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Set(crypto.hardware, %s) = %v; want it refused naming %q", tc.refused, err, tc.want)
			}
			if err := c.Set("crypto.hardware", tc.set); err != nil {
				t.Fatal(err)
			}
			if e := c.Root().FindElements("system/crypto_hardware"); len(e) != 1 || e[0].Text() != tc.text {
				t.Fatalf("after crypto.hardware=%s: %d elements %v; want one with %q", tc.set, len(e), e, tc.text)
			}
			if v, _ := c.Get("crypto.hardware"); v != tc.set {
				t.Errorf("Get after Set = %q; want %q", v, tc.set)
			}
			if got := ActionFor("crypto.hardware"); got != ActionReboot {
				t.Errorf("ActionFor(crypto.hardware) = %s; want reboot: modules load at boot and never unload", got)
			}
			if err := c.Set("crypto.hardware", "none"); err != nil {
				t.Fatal(err)
			}
			if c.Root().FindElement("system/crypto_hardware") != nil {
				t.Fatal("<system><crypto_hardware> left after crypto.hardware=none")
			}
		})
	}
	if got := CryptoLoads(PfSense, "aesni_cryptodev"); !slices.Equal(got, []string{"aesni", "cryptodev"}) {
		t.Errorf("CryptoLoads(pfsense, aesni_cryptodev) = %v", got)
	}
	if got := CryptoLoads(OPNsense, "qat,bogus"); !slices.Equal(got, []string{"qat"}) {
		t.Errorf("CryptoLoads(opnsense, qat,bogus) = %v; the boot loads only what it knows", got)
	}
}

// TestTunnelSwanctlNames: each tunnel carries the names the product gives
// its connection and children in swanctl.conf, which fwab terminates and
// initiates by: pfSense con<ikeid>, one child of the same name for IKEv2
// without split connections, con<ikeid>_<reqid> per phase 2 otherwise;
// OPNsense the connection's and the children's uuids.
func TestTunnelSwanctlNames(t *testing.T) {
	spec := labTunnelSpec
	for _, name := range []string{"configs/pfsense-2.7.xml", "configs/opnsense-26.1.xml"} {
		t.Run(name, func(t *testing.T) {
			c := loadFixture(t, name)
			c.DefineTunnel(spec)
			if err := c.Set("ipsec@lab", "aes256-sha256"); err != nil {
				t.Fatal(err)
			}
			var got *Tunnel
			for _, tn := range c.Tunnels() {
				if tn.Name == "lab" {
					got = &tn
				}
			}
			if got == nil {
				t.Fatal("no tunnel lab")
			}
			var wantConn string
			var wantChildren []string
			if c.Flavor() == PfSense {
				p1 := c.Root().FindElement("ipsec/phase1[descr='lab']")
				wantConn = "con" + childText(p1, "ikeid")
				wantChildren = []string{wantConn}
			} else {
				conn := c.swanctlConnection("lab")
				wantConn = conn.SelectAttrValue("uuid", "")
				wantChildren = []string{c.swanctlLinked("children/child", wantConn).SelectAttrValue("uuid", "")}
			}
			if wantConn == "con" || wantConn == "" || got.Conn != wantConn || !slices.Equal(got.Children, wantChildren) {
				t.Errorf("Conn %q, Children %q; want %q, %q", got.Conn, got.Children, wantConn, wantChildren)
			}
		})
	}

	// IKEv1 and split connections: a child per phase 2, named by reqid.
	c := loadFixture(t, "configs/pfsense-2.7.xml")
	c.DefineTunnel(spec)
	if err := c.Set("ipsec@lab", "aes256-sha256"); err != nil {
		t.Fatal(err)
	}
	p1 := c.Root().FindElement("ipsec/phase1[descr='lab']")
	p2 := c.Root().FindElement("ipsec/phase2[ikeid='" + childText(p1, "ikeid") + "']")
	p2.SelectElement("reqid").SetText("7")
	second := p2.Copy()
	second.SelectElement("reqid").SetText("9")
	p2.Parent().AddChild(second)
	p1.SelectElement("iketype").SetText("auto")
	for _, tn := range c.Tunnels() {
		if id := childText(p1, "ikeid"); tn.Name == "lab" && !slices.Equal(tn.Children, []string{"con" + id}) {
			t.Errorf("iketype auto: children %q, want one named con%s (auto is not IKEv1)", tn.Children, id)
		}
	}
	for _, edit := range []func(){
		func() { p1.SelectElement("iketype").SetText("ikev1") },
		func() { p1.SelectElement("iketype").SetText("ikev2"); p1.CreateElement("splitconn") },
	} {
		edit()
		for _, tn := range c.Tunnels() {
			if tn.Name != "lab" {
				continue
			}
			id := childText(p1, "ikeid")
			if want := []string{"con" + id + "_7", "con" + id + "_9"}; !slices.Equal(tn.Children, want) {
				t.Errorf("iketype %s split %v: children %q, want %q", childText(p1, "iketype"), p1.SelectElement("splitconn") != nil, tn.Children, want)
			}
		}
	}
}

func TestOPNsenseBackupCount(t *testing.T) {
	for _, tt := range []struct {
		system string
		want   int
	}{
		{"", 100},
		{"<backupcount>7</backupcount>", 7},
		{"<backupcount> 12abc</backupcount>", 12},
		{"<backupcount></backupcount>", 0},
		{"<backupcount>none</backupcount>", 0},
		{"<backupcount>-3</backupcount>", 100},
		{"<backupcount>1e3</backupcount>", 1000},
		{"<backupcount>99999999999999999999999</backupcount>", math.MaxInt64},
		{"<backupcount>2.9</backupcount>", 2},
	} {
		c, err := LoadBytes([]byte("<?xml version=\"1.0\"?>\n<opnsense><system>" + tt.system + "</system></opnsense>\n"))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.OPNsenseBackupCount(); got != tt.want {
			t.Errorf("<system>%s</system>: OPNsenseBackupCount = %d, want %d", tt.system, got, tt.want)
		}
	}
}

func TestOPNsenseBackups(t *testing.T) {
	names := []string{"config-100.5.xml", "config-300.1.xml", "config-200.xml", "config.xml.bak", "configX.xml", "fwab-rollback.xml", "config-abc.xml"}
	if got, want := OPNsenseBackups(names, 250, true), []string{"config-abc.xml", "config-200.xml", "config-100.5.xml"}; !slices.Equal(got, want) {
		t.Errorf("26.1+: OPNsenseBackups = %q, want %q (none after now, newest first by name)", got, want)
	}
	if got, want := OPNsenseBackups(names, 250, false), []string{"configX.xml", "config-abc.xml", "config-300.1.xml", "config-200.xml", "config-100.5.xml"}; !slices.Equal(got, want) {
		t.Errorf("before 26.1: OPNsenseBackups = %q, want %q (every config*.xml)", got, want)
	}
}
