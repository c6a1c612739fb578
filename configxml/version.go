package configxml

import (
	"fmt"
	"strconv"
	"strings"
)

// version is a dotted product version, compared numerically: 2.7.2, 26.1.
type version []int

// parseVersion reads the numbers of a dotted version. A development or
// pre-release build is read as the release it leads to: the numbers end at
// the first part that starts with a letter, and what follows is the
// build's ("26.1.r1" and "26.7.a" are 26.1 and 26.7; a pfSense snapshot
// package "2.8.0.a.20240115.0600" is 2.8.0).
//
// upstream: opnsense/core@d9ac167d3b2a603dd28500db089f94fc00fad74e src/opnsense/mvc/app/controllers/OPNsense/Core/Api/FirmwareController.php:934 — `/^\d+\.\d+\.[a-z]/`, how OPNsense itself tells a development version
func parseVersion(s string) (version, error) {
	s = normalizeProduct(s)
	if s == "" {
		return nil, fmt.Errorf("empty version")
	}
	var v version
	for _, part := range strings.Split(s, ".") {
		if len(v) >= 2 && part != "" && part[0] >= 'a' && part[0] <= 'z' {
			break // a pre-release or snapshot: the build's, not the release's
		}
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a dotted version such as 2.7.2 or 26.1", s)
		}
		v = append(v, n)
	}
	return v, nil
}

// CheckVersion refuses a product version outside f's version scheme, so
// that a version of the other product (or none) is named where it is
// given instead of read as some release: pfSense CE is 2.MINOR[.PATCH]
// and pfSense Plus YY.MM[.PATCH] (a two-digit month); OPNsense is
// YY.M[.PATCH] from 15.1 on. s may be what a firewall reports
// ("2.7.2-RELEASE", "OPNsense 26.1.2_1").
//
// upstream: not settled — neither product's source states its scheme; the release branches read are pfsense/pfsense RELENG_2_6_0 and RELENG_2_7_2 (2.x.y) and opnsense/core stable/24.7 to stable/26.7 (YY.M), Plus's YY.MM is from its release names; checked at run time through SetProduct on the version the firewall reports: sweep and fw print a note and use the release the config's layout shows, a boot environment's version is refused
func CheckVersion(f Flavor, s string) error {
	v, err := parseVersion(s)
	if err != nil {
		return err
	}
	n := normalizeProduct(s)
	parts := strings.Split(n, ".")
	twoDigitMinor := len(parts) > 1 && len(parts[1]) == 2
	ce := len(v) >= 2 && v[0] == 2
	plus := len(v) >= 2 && v[0] >= 21 && v[0] <= 99 && twoDigitMinor && v[1] >= 1 && v[1] <= 12
	opn := len(v) >= 2 && v[0] >= 15 && v[0] <= 99 && v[1] >= 1 && v[1] <= 12
	const (
		pfScheme  = "pfSense CE is 2.x.y (2.7.2), pfSense Plus YY.MM (24.11)"
		opnScheme = "OPNsense is YY.M[.patch] (26.1, 24.7.12)"
	)
	switch {
	case f == PfSense && !ce && !plus && opn:
		return fmt.Errorf("%s looks like an OPNsense version, not a pfSense one: %s; give the version the firewall runs", n, pfScheme)
	case f == PfSense && !ce && !plus:
		return fmt.Errorf("%s is not a pfSense version: %s", n, pfScheme)
	case f == OPNsense && ce:
		return fmt.Errorf("%s looks like a pfSense version, not an OPNsense one: %s; give the version the firewall runs", n, opnScheme)
	case f == OPNsense && !opn:
		return fmt.Errorf("%s is not an OPNsense version: %s", n, opnScheme)
	}
	return nil
}

// normalizeProduct turns what a firewall reports into a dotted version:
// "2.7.2-RELEASE" → "2.7.2", "OPNsense 26.1.2_1" → "26.1.2".
func normalizeProduct(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, ' '); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.IndexAny(s, "-_"); i >= 0 {
		s = s[:i]
	}
	return s
}

// atLeast reports whether v ≥ other. Missing parts count as zero.
func (v version) atLeast(other version) bool {
	for i := 0; i < max(len(v), len(other)); i++ {
		a, b := at(v, i), at(other, i)
		if a != b {
			return a > b
		}
	}
	return true
}

func at(v version, i int) int {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func mustVersion(s string) version {
	v, err := parseVersion(s)
	if err != nil {
		panic(err)
	}
	return v
}

// productAtLeast reports whether the config's product version is at least min.
func (c *Config) productAtLeast(min string) bool {
	v, err := parseVersion(c.product.Version)
	if err != nil {
		return true // unknown: assume current
	}
	return v.atLeast(mustVersion(min))
}

// pfSense config schema versions by release (firewall.md A-d: globals.inc
// latest_config): 2.6.0 = 22.2, 2.7.0 = 22.9, 2.7.2 = 23.3, 2.8 and later ≥ 24.
var pfSenseConfigVersions = []struct {
	config, product string
}{
	{"24.0", "2.8.0"},
	{"23.3", "2.7.2"},
	{"22.9", "2.7.0"},
	{"22.2", "2.6.0"},
	{"21.7", "2.5.2"},
	{"0", "2.4.5"},
}

// inferProduct guesses the product version from the config schema version.
// OPNsense's config carries none, so its version comes from the layout: the
// element trees that moved between releases (firewall.md gotcha 4).
func inferProduct(f Flavor, configVersion string) string {
	if f == PfSense {
		cv, err := parseVersion(configVersion)
		if err != nil {
			return "2.7.2"
		}
		for _, m := range pfSenseConfigVersions {
			if cv.atLeast(mustVersion(m.config)) {
				return m.product
			}
		}
	}
	return ""
}

// inferOPNsense guesses an OPNsense release from the config's layout.
//
// upstream: opnsense/core@d9ac167d3b2a603dd28500db089f94fc00fad74e src/etc/config.xml.sample:116 — 26.7's factory rules are in `<Filter>` below <OPNsense><Firewall>
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:2 — `<mount>//OPNsense/Interfaces/settings</mount>`, a model 24.7 and 25.7 do not have
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:137 — `<mode type="OptionField">`, new in 26.1
// upstream: not settled — releases between the four read (25.1, 25.4) and the layout of an upgraded box; fwab takes the version the firewall reports (SetProduct), checked at run time by the driver's version query
func (c *Config) inferOPNsense() string {
	switch {
	case c.find("OPNsense/Firewall/Filter/rules/rule") != nil && !c.has("filter", "rule"):
		return "26.7"
	case c.find("OPNsense/Interfaces/settings") != nil,
		c.find("OPNsense/IDS/general/mode") != nil,
		c.find("system/disablechecksumoffloading") == nil &&
			c.find("system/disablesegmentationoffloading") == nil &&
			c.find("system/disablelargereceiveoffloading") == nil:
		return "26.1"
	default:
		return "25.7"
	}
}

// layoutAllows refuses a product version the config's own layout
// contradicts: elements only a later (or only an earlier) release writes.
// Reading a file with the wrong version's layout would read another
// release's elements — inline IPS as plain ids, offloads as unset — and
// could call an unsafe config safe.
func (c *Config) layoutAllows(v version) error {
	if c.flavor != OPNsense || c.doc == nil {
		// pfSense migrates an older config at boot, and the schema
		// version of each release is not in the upstream copy: no check.
		return nil
	}
	// Only this direction is certain: a release before 26.1 has no such
	// models. Legacy elements are no proof of an old release: a 26.4
	// business factory config still has <system><disable…offloading>.
	// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/Interfaces/Settings.xml:2 — `<mount>//OPNsense/Interfaces/settings</mount>`, a model 24.7 and 25.7 do not have
	// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:137 — `<mode type="OptionField">`, new in 26.1
	if v.atLeast(mustVersion("26.1")) {
		return nil
	}
	for _, p := range []string{"OPNsense/Interfaces/settings", "OPNsense/IDS/general/mode"} {
		if c.find(p) != nil {
			return fmt.Errorf("the config has %s, which OPNsense writes from 26.1 on: give the version the firewall runs", p)
		}
	}
	return nil
}
