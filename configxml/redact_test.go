package configxml

// Diff's redaction held against real configs: the config.xml files at the
// top of ../shared/upstream (pfSense default configs, pfsensible fixtures
// with IPsec, OPNsense samples, the OPNsense docs' IPsec Site-A/B with their
// PSKs), read at run time and never copied into the repository. A marker is
// planted in every text, and in every field where the formats keep secrets;
// no marker may reach the diff's output, while knob changes read in clear.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/beevik/etree"
)

// secretFields are where the formats keep secrets (paths below the root
// element): the ones issue #28 names and those found in the upstream
// configs (grep -i 'psk\|key\|secret\|password\|prv\|tls\|community').
var secretFields = map[Flavor][]string{
	PfSense: {
		"system/user/bcrypt-hash",
		"system/user/sha512-hash",
		"system/user/password",
		"system/user/ipsecpsk",
		"system/user/authorizedkeys",
		"system/user/apikeys/item/key",
		"system/authserver/ldap_bindpw",
		"system/authserver/radius_secret",
		"system/authserver/radius_secret2",
		"cert/prv",
		"ca/prv",
		"crl/text",
		"ipsec/phase1/pre-shared-key",
		"ipsec/phase1/private-key",
		"ipsec/mobilekey/pre-shared-key",
		"openvpn/openvpn-server/tls",
		"openvpn/openvpn-server/shared_key",
		"openvpn/openvpn-client/tls",
		"openvpn/openvpn-client/shared_key",
		"openvpn/openvpn-client/auth_pass",
		"installedpackages/wireguard/tunnels/item/privatekey",
		"installedpackages/wireguard/peers/item/presharedkey",
		"installedpackages/pfblockerng/config/maxmind_key",
		"installedpackages/acme/accountkeys/item/accountkey",
		"dyndnses/dyndns/password",
		"dnsupdates/dnsupdate/keydata",
		"dhcpd/lan/ddnsdomainkey",
		"ppps/ppp/password",
		"snmpd/rocommunity",
		"snmpd/trapstring",
		"captiveportal/zone/radiuskey",
		"notifications/smtp/password",
		"notifications/pushover/apikey",
		"notifications/telegram/api",
		"hasync/password",
		"virtualip/vip/password",
		"interfaces/wan/wireless/wpa/passphrase",
		"interfaces/wan/wireless/wep/key/value",
		"filter/rule/source_hash_key",
	},
	OPNsense: {
		"system/user/password",
		"system/user/otp_seed",
		"system/user/authorizedkeys",
		"system/user/apikeys/item/key",
		"system/user/apikeys/item/secret",
		"system/authserver/ldap_bindpw",
		"system/authserver/radius_secret",
		"cert/prv",
		"ca/prv",
		"crl/text",
		"ipsec/phase1/pre-shared-key",
		"ipsec/mobilekey/pre-shared-key",
		"openvpn/openvpn-server/tls",
		"openvpn/openvpn-server/shared_key",
		"OPNsense/OpenVPN/StaticKeys/StaticKey/key",
		"OPNsense/IPsec/preSharedKeys/preSharedKey/Key",
		"OPNsense/IPsec/keyPairs/keyPair/privateKey",
		"OPNsense/wireguard/server/servers/server/privkey",
		"OPNsense/wireguard/client/clients/client/psk",
		"OPNsense/DynDNS/accounts/account/password",
		"dyndnses/dyndns/password",
		"ppps/ppp/password",
		"snmpd/rocommunity",
		"hasync/password",
		"virtualip/vip/password",
	},
}

// upstreamConfigs lists the config.xml files at the top of ../shared/upstream.
func upstreamConfigs(t *testing.T) []string {
	t.Helper()
	dir := upstreamDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skipf("no config.xml files at the top of %s", dir)
	}
	return files
}

func loadUpstreamConfig(t *testing.T, file string) *Config {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := LoadBytes(data)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(file), err)
	}
	return c
}

// planter hands out unique markers and remembers where each went.
type planter struct {
	style string            // text (SECRET-n-x9), word (a short lowercase word) or number
	where map[string]string // marker → the tag path it was planted at
}

func newPlanter(style string) *planter { return &planter{style: style, where: map[string]string{}} }

func (p *planter) next(where string) string {
	n := len(p.where) + 1
	var m string
	switch p.style {
	case "word":
		m = fmt.Sprintf("pw%dzq", n)
	case "number":
		m = fmt.Sprintf("97%08d", n)
	default:
		m = fmt.Sprintf("SECRET-%d-x9", n)
	}
	p.where[m] = where
	return m
}

// eachElement calls f for every element below e with its tag path.
func eachElement(e *etree.Element, path string, f func(*etree.Element, string)) {
	for _, c := range e.ChildElements() {
		p := joinPath(path, c.Tag)
		f(c, p)
		eachElement(c, p, f)
	}
}

// plantEverywhere puts a marker in every leaf element, and with attrs in
// every uuid attribute too.
func plantEverywhere(c *Config, p *planter, attrs bool) {
	eachElement(c.root(), "", func(e *etree.Element, path string) {
		if len(e.ChildElements()) == 0 {
			e.SetText(p.next(path))
		}
		if attrs && e.SelectAttr("uuid") != nil {
			e.CreateAttr("uuid", p.next(path+"@uuid"))
		}
	})
}

// plantSecrets puts a marker in every secret field of the config's flavor,
// creating the field (and what holds it) where the config has none, and in
// every other element of the same parent and tag the config has. An IPsec
// phase 1 is not created (it would be a tunnel, which the ipsec knob
// reads): its fields are planted where the config has one. It returns the
// fields planted.
func plantSecrets(c *Config, p *planter) []string {
	root := c.root()
	fields := secretFields[c.flavor]
	var planted []string
	for _, f := range fields {
		if strings.HasPrefix(f, "ipsec/phase1/") && root.FindElement("ipsec/phase1") == nil {
			continue
		}
		planted = append(planted, f)
		e := root
		for _, step := range strings.Split(f, "/") {
			next := e.SelectElement(step)
			if next == nil {
				next = e.CreateElement(step)
			}
			e = next
		}
		e.SetText(p.next(f))
	}
	eachElement(root, "", func(e *etree.Element, path string) {
		if len(e.ChildElements()) > 0 {
			return
		}
		for _, f := range fields {
			if strings.HasSuffix("/"+path, "/"+lastSteps(f, 2)) && !strings.HasPrefix(e.Text(), markerPrefix(p)) {
				e.SetText(p.next(path))
			}
		}
	})
	return planted
}

func markerPrefix(p *planter) string {
	switch p.style {
	case "word":
		return "pw"
	case "number":
		return "97"
	}
	return "SECRET-"
}

func lastSteps(path string, n int) string {
	s := strings.Split(path, "/")
	return strings.Join(s[max(0, len(s)-n):], "/")
}

// diffOutput is everything Diff shows: the path changes as `fwab config
// diff` prints them and as its --json does, and the knob changes' values.
func diffOutput(t *testing.T, knobs []Change, paths []PathChange) (pathText, knobValues string) {
	t.Helper()
	var b strings.Builder
	for _, pc := range paths {
		b.WriteString(pc.String() + "\n")
	}
	j, err := json.Marshal(paths)
	if err != nil {
		t.Fatal(err)
	}
	b.Write(j)
	var k strings.Builder
	for _, c := range knobs {
		fmt.Fprintf(&k, "%s → %s\n", c.From, c.To)
	}
	return b.String(), k.String()
}

// knobReads are the elements whose text a knob reports as (part of) its
// value: nat.outbound's mode, crypto.hardware's modules, the algorithms of
// an ipsec@ proposal. The knob table shows them, by design, as the knob's
// value.
var knobReads = []string{
	"nat/outbound/mode",
	"system/crypto_hardware",
	"ipsec/phase1/encryption/item/encryption-algorithm/name",
	"ipsec/phase1/encryption/item/hash-algorithm",
	"ipsec/phase1/encryption-algorithm/name",
	"ipsec/phase1/hash-algorithm",
	"ipsec/phase2/encryption-algorithm-option/name",
	"ipsec/phase2/hash-algorithm-option",
	"OPNsense/Swanctl/Connections/Connection/proposals",
	"OPNsense/Swanctl/children/child/esp_proposals",
}

// leaks lists where the markers found in the output were planted.
func leaks(p *planter, pathText, knobValues string) []string {
	seen := map[string]bool{}
	for m, where := range p.where {
		if strings.Contains(pathText, m) || strings.Contains(knobValues, m) && !slices.Contains(knobReads, where) {
			seen[where] = true
		}
	}
	var out []string
	for w := range seen {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// TestDiffRedactsPlantedText plants a marker in every text (and, in the
// second pass, every uuid) of each upstream config and diffs the original
// against it: no marker may show, and different values must still read
// differently.
func TestDiffRedactsPlantedText(t *testing.T) {
	for _, file := range upstreamConfigs(t) {
		for _, attrs := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/uuids=%v", filepath.Base(file), attrs), func(t *testing.T) {
				a := loadUpstreamConfig(t, file)
				b := loadUpstreamConfig(t, file)
				p := newPlanter("text")
				plantEverywhere(b, p, attrs)
				knobs, paths := Diff(a, b)
				if len(paths) == 0 {
					t.Fatal("no path changes after planting a marker in every text")
				}
				pathText, knobValues := diffOutput(t, knobs, paths)
				if l := leaks(p, pathText, knobValues); len(l) > 0 {
					t.Errorf("the diff shows the planted text of %d fields:\n  %s", len(l), strings.Join(l, "\n  "))
				}
				for _, pc := range paths {
					if pc.Kind == "changed" && pc.From != "" && pc.To != "" && pc.From == pc.To && pc.From != "(secret)" {
						t.Errorf("%s: two different texts both read %q", pc.Path, pc.From)
					}
				}
			})
		}
	}
}

// TestDiffRedactsSecretFields plants, on both sides, different secrets in
// every field where the formats keep them, in three shapes: free text, a
// short lowercase word and a number (which an allowlist of words and
// numbers would show if it did not know the field is secret).
func TestDiffRedactsSecretFields(t *testing.T) {
	for _, file := range upstreamConfigs(t) {
		for _, style := range []string{"text", "word", "number"} {
			t.Run(filepath.Base(file)+"/"+style, func(t *testing.T) {
				a := loadUpstreamConfig(t, file)
				b := loadUpstreamConfig(t, file)
				p := newPlanter(style)
				plantSecrets(a, p)
				fields := plantSecrets(b, p)
				knobs, paths := Diff(a, b)
				pathText, knobValues := diffOutput(t, knobs, paths)
				if l := leaks(p, pathText, knobValues); len(l) > 0 {
					t.Errorf("the diff shows %d secrets:\n  %s", len(l), strings.Join(l, "\n  "))
				}
				// Each field was compared (and hidden), not skipped.
				var changed []string
				for _, pc := range paths {
					changed = append(changed, indexes.ReplaceAllString(pc.Path, ""))
				}
				for _, f := range fields {
					if !slices.ContainsFunc(changed, func(s string) bool { return strings.HasSuffix("/"+s, "/"+lastSteps(f, 2)) }) {
						t.Errorf("no change at %s, where different secrets were planted", f)
					}
				}
			})
		}
	}
}

var indexes = regexp.MustCompile(`\[[^\]]*\]`)

// knobEdits picks, for every knob the config has, a valid value other
// than its own.
func knobEdits(t *testing.T, c *Config) []string {
	var out []string
	for _, kv := range c.Values() {
		ref, err := ParseRef(kv.Knob)
		if err != nil {
			t.Fatal(err)
		}
		var candidates []string
		switch ref.Name {
		case "offload.checksum", "offload.tso", "offload.lro", "blocklist":
			candidates = []string{"on", "off"}
		case "filter":
			candidates = []string{FilterDisabled, FilterEnabled}
		case "nat.outbound":
			candidates = []string{"advanced", "hybrid"}
		case "rules":
			n, _ := strconv.Atoi(kv.Value)
			candidates = []string{strconv.Itoa(n + 2)}
		case "ids":
			candidates = []string{IDSInlineIPS, IDSAlert, IDSOff}
		case "ipsec":
			candidates = []string{"aes256-sha256-modp2048/aes128gcm16", "aes128gcm16-modp2048", "aes256gcm16", "aes256-sha256"}
		case "crypto.hardware":
			candidates = []string{"aesni", "qat", CryptoNone}
		}
		for _, v := range candidates {
			if v != kv.Value && c.Check(kv.Knob, v) == nil {
				out = append(out, kv.Knob+"="+v)
				break
			}
		}
	}
	return out
}

// TestDiffShowsKnobChangesInClear changes every knob each upstream config
// has, with secrets planted on both sides: the knob changes read as before,
// and every element change they make shows its values in clear.
func TestDiffShowsKnobChangesInClear(t *testing.T) {
	for _, file := range upstreamConfigs(t) {
		t.Run(filepath.Base(file), func(t *testing.T) {
			a := loadUpstreamConfig(t, file)
			b := loadUpstreamConfig(t, file)
			p := newPlanter("text")
			plantSecrets(a, p)
			plantSecrets(b, p)
			var applied []string
			for _, e := range knobEdits(t, b) {
				if err := b.SetAll([]string{e}); err != nil {
					t.Logf("%s: %v", e, err)
					continue
				}
				applied = append(applied, e)
			}
			if len(applied) == 0 {
				t.Fatal("no knob could be changed")
			}
			knobs, paths := Diff(a, b)
			pathText, knobValues := diffOutput(t, knobs, paths)
			if l := leaks(p, pathText, knobValues); len(l) > 0 {
				t.Errorf("the diff shows %d secrets:\n  %s", len(l), strings.Join(l, "\n  "))
			}
			// The knob changes are as they always were: each knob's value
			// before and after, in clear.
			for _, e := range applied {
				knob, _, _ := strings.Cut(e, "=")
				from, _ := a.Get(knob)
				to, _ := b.Get(knob)
				if from != to && !slices.Contains(knobs, Change{Knob: knob, From: from, To: to, Action: ActionFor(knob)}) {
					t.Errorf("knob changes lack %s: %s → %s: %+v", knob, from, to, knobs)
				}
			}
			// Every element change the knobs made reads in clear; only
			// <revision> (free text from before) and the planted secrets
			// are hidden.
			for _, pc := range paths {
				bare := indexes.ReplaceAllString(pc.Path, "")
				if strings.HasPrefix(bare, "revision") || slices.ContainsFunc(secretFields[a.flavor], func(f string) bool {
					return strings.HasSuffix("/"+bare, "/"+lastSteps(f, 2))
				}) {
					continue
				}
				if s := pc.String(); strings.Contains(s, "(text ") || strings.Contains(s, "(secret)") {
					t.Errorf("a knob's change is hidden: %s", s)
				}
			}
			for _, e := range applied {
				knob, value, _ := strings.Cut(e, "=")
				switch {
				case knob == "nat.outbound" && !strings.Contains(pathText, `"`+value+`"`) && !strings.Contains(pathText, "mode "+value):
					t.Errorf("%s: the path changes do not show %q:\n%s", e, value, pathText)
				case strings.HasPrefix(knob, "rules@") && !strings.Contains(pathText, GeneratedPrefix+" 1"):
					t.Errorf("%s: the path changes do not show the generated rules' descriptions:\n%s", e, pathText)
				}
			}
		})
	}
}

// TestDiffShowRules holds the allowlist case by case, without the upstream
// configs: what reads in clear, what as a hash, what as "(secret)".
func TestDiffShowRules(t *testing.T) {
	a := load(t, "configs/pfsense-2.7.xml")
	d := &differ{a: a, b: a}
	tests := []struct {
		path, text, want string // want: clear, hash or secret
	}{
		{"system/disablechecksumoffloading", "1", "clear"},
		{"nat/outbound/mode", "advanced", "clear"},
		{"filter/rule/type", "block", "clear"},
		{"filter/rule/protocol", "tcp/udp", "clear"},
		{"filter/rule/source/address", "198.18.128.0", "clear"},
		{"filter/rule/destination/network", "2001:db8::/64", "clear"},
		{"filter/rule/descr", "fwab-generated 12", "clear"},
		{"OPNsense/Firewall/Filter/rules/rule/description", "fwab-generated 3", "clear"},
		{"OPNsense/Firewall/Filter/rules/rule/protocol", "TCP", "clear"},
		{"installedpackages/suricata/rule/ips_mode", "ips_mode_inline", "clear"},
		{"installedpackages/suricata/rule/descr", "LAN (fwab)", "clear"},
		{"OPNsense/IDS/general/interfaces", "lan,wan", "clear"},
		{"ipsec/phase1/encryption/item/hash-algorithm", "sha256", "clear"},
		{"ipsec/phase2/hash-algorithm-option", "hmac_sha256", "clear"},
		{"OPNsense/Swanctl/children/child/esp_proposals", "chacha20poly1305-sha256-x25519,aes256gcm16-modp2048", "clear"},
		{"system/crypto_hardware", "aesni_cryptodev", "clear"},
		{"revision/description", "fwab: offload.tso=on, rules@lan=2, ipsec@lab=aes256-sha256-modp2048/aes128gcm16", "clear"},
		{"revision/description", "fwab: xml:system/user/bcrypt-hash=(secret)", "clear"},
		{"revision/description", "fwab: xml:interfaces/wan/wireless/wep/key/value=hunter2", "hash"},
		{"revision/description", "fwab: xml:system/hostname=Hunter2-Secret", "hash"},
		{"revision/description", "Admin edited the user hunter", "hash"},
		{"filter/rule/descr", "Allow the office", "hash"},
		{"filter/rule/descr", "fwab-generated 1 and more", "hash"},
		{"system/hostname", "pfSense", "hash"},
		{"system/webgui/ssl-certref", "5f3a1b2c4d5e6", "hash"},
		{"system/somefield", "k3j4h5g6f7d8", "hash"},
		{"system/somefield", "SECRET-1-x9", "hash"},
		{"cert/crt", "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t", "hash"},
		{"system/user/bcrypt-hash", "$2y$10$abc", "secret"},
		{"ipsec/phase1/pre-shared-key", "hunter2", "secret"},
		{"ipsec/phase1/private-key", "1234", "secret"},
		{"system/user/ipsecpsk", "on", "secret"},
		{"openvpn/openvpn-server/tls", "abc", "secret"},
		{"openvpn/openvpn-server/shared_key", "abc", "secret"},
		{"OPNsense/wireguard/server/servers/server/privkey", "abc", "secret"},
		{"OPNsense/wireguard/client/clients/client/psk", "abc", "secret"},
		{"installedpackages/wireguard/peers/item/presharedkey", "abc", "secret"},
		{"OPNsense/IPsec/keyPairs/keyPair/privateKey", "abc", "secret"},
		{"OPNsense/IPsec/preSharedKeys/preSharedKey/Key", "abc", "secret"},
		{"system/authserver/ldap_bindpw", "abc", "secret"},
		{"system/authserver/radius_secret", "abc", "secret"},
		{"snmpd/rocommunity", "public", "secret"},
		{"dnsupdates/dnsupdate/keydata", "abc", "secret"},
		{"interfaces/wan/wireless/wep/key/value", "12345", "secret"},
		{"crl/text", "abc", "secret"},
	}
	show := func(path, text string) string {
		d.tags = strings.Split(path, "/")
		return d.show(text)
	}
	for _, tt := range tests {
		got := show(tt.path, tt.text)
		kind := "clear"
		switch {
		case got == "(secret)":
			kind = "secret"
		case strings.HasPrefix(got, "(text hmac:"):
			kind = "hash"
		case got != tt.text:
			kind = "other: " + got
		}
		if kind != tt.want {
			t.Errorf("%s %q reads %q, want it %s", tt.path, tt.text, got, tt.want)
		}
	}
	if show("system/hostname", "fw-One") != show("interfaces/lan/descr", "fw-One") {
		t.Error("one text reads as two hashes within a diff")
	}
	if show("system/hostname", "fw-One") == show("system/hostname", "fw-Two") {
		t.Error("two texts read as one hash")
	}
	b := load(t, "configs/pfsense-2.7.xml")
	b.Root().SelectElement("system").SelectElement("hostname").SetText("fw-Other")
	_, p1 := Diff(a, b)
	_, p2 := Diff(a, b)
	if len(p1) != 1 || !slices.Equal(p1, p2) || !strings.HasPrefix(p1[0].To, "(text hmac:") {
		t.Errorf("Diff of a changed hostname = %v, then %v; want one change, hashed, the same each time", p1, p2)
	}
}

// TestDiffHidesOddIdentities: a uuid that is not a UUID, or a tracker that
// is not a number, is hashed in the path it names.
func TestDiffHidesOddIdentities(t *testing.T) {
	a := loadFixture(t, "configs/opnsense-26.7.xml")
	b := loadFixture(t, "configs/opnsense-26.7.xml")
	r := b.Root().FindElement("OPNsense/Firewall/Filter/rules")
	if r == nil {
		t.Fatal("no MVC rules in the fixture")
	}
	r.CreateElement("rule").CreateAttr("uuid", "SECRET-uuid-x9")
	f := b.Root().SelectElement("filter")
	if f == nil {
		f = b.Root().CreateElement("filter")
	}
	f.CreateElement("rule").CreateElement("tracker").SetText("SECRET-tracker-x9")
	_, paths := Diff(a, b)
	out, _ := json.Marshal(paths)
	if strings.Contains(string(out), "SECRET-") || len(paths) != 2 {
		t.Errorf("paths = %s; want two additions without the planted identities", out)
	}
}
