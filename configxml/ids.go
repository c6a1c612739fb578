package configxml

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// IDS modes, the values of ids@IF.
const (
	IDSOff       = "off"
	IDSAlert     = "ids"
	IDSLegacyIPS = "ips-legacy"
	IDSInlineIPS = "ips-inline"
)

// pfSense: the Suricata package keeps one <installedpackages><suricata><rule>
// per interface (firewall.md A-e):
//
//	off        enable=off (or no rule)
//	ids        enable=on, blockoffenders=off
//	ips-legacy enable=on, blockoffenders=on, ips_mode=ips_mode_legacy (or empty)
//	ips-inline enable=on, blockoffenders=on, ips_mode=ips_mode_inline
//
// OPNsense: the built-in IDS is one <OPNsense><IDS><general> for all its
// interfaces: enabled 0/1, interfaces (comma list) and the IPS switch, <ips>
// 0/1 up to 25.7 and <mode> pcap/netmap/divert from 26.1 (B-e).
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:133 — general `<enabled type="BooleanField">` (25.7: line 133; 24.7: line 131)
// upstream: opnsense-core 24.7 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:135 — `<ips type="BooleanField">` (25.7: line 137)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:137 — `<mode type="OptionField">` replaces ips in 26.1 (26.7 the same)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:142 — `<netmap>Netmap (IPS)</netmap>`, with pcap and divert
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IDS/Api/ServiceController.php:44 — `$internalServiceEnabled = 'general.enabled'` (24.7: line 45)
//
// The pfSense Suricata package's fields (enable, blockoffenders, ips_mode)
// are read in pfsense/FreeBSD-ports@26ab0a82663f603096e11c391222c81e6d9db06c
// security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php
// ("ips_mode_inline" together with blockoffenders "on"); that repository is
// not in the upstream copy, and the line is not given here.

func (c *Config) suricataRule(iface string) *etree.Element {
	for _, r := range c.findAll("installedpackages/suricata/rule", false) {
		if childText(r, "interface") == iface {
			return r
		}
	}
	return nil
}

// SuricataConfigured reports whether a pfSense config has any Suricata
// interface entry (installedpackages/suricata/rule), enabled or not: the
// package's sync builds nothing, not even its rc script, without one.
//
// upstream: not settled — sync_suricata_package_config() begins `if (count(config_get_path('installedpackages/suricata/rule', [])) < 1) { return; }`, before `suricata_create_rc()`, in pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc (read in the file index, about character 33,700; no line numbers); the emulator takes this reading, the harsher one (the old rc script stays), and at run time fwapi.VerifyRuntime finds a Suricata the config does not name (FWAB102)
func (c *Config) SuricataConfigured() bool {
	return len(c.findAll("installedpackages/suricata/rule", false)) > 0
}

// SuricataRulesets are the rulesets enabled for a pfSense Suricata
// interface (its rulesets field, names joined with ||); none for an
// interface without a Suricata entry.
func (c *Config) SuricataRulesets(iface string) []string {
	r := c.suricataRule(iface)
	if r == nil {
		return nil
	}
	var out []string
	for _, n := range strings.Split(childText(r, "rulesets"), "||") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func getIDS(c *Config, iface string) (string, error) {
	if c.flavor == OPNsense {
		return c.opnIDS(iface), nil
	}
	r := c.suricataRule(iface)
	switch {
	case r == nil || childText(r, "enable") != "on":
		return IDSOff, nil
	case childText(r, "blockoffenders") != "on":
		return IDSAlert, nil
	case childText(r, "ips_mode") == "ips_mode_inline":
		return IDSInlineIPS, nil
	default:
		return IDSLegacyIPS, nil
	}
}

func validateIDS(c *Config, iface, value string) error {
	if c.flavor != OPNsense {
		return nil
	}
	if value == IDSLegacyIPS {
		return fmt.Errorf("ips-legacy is the pfSense Suricata package's blocking mode; OPNsense offers ids or ips-inline")
	}
	if value == IDSOff {
		return nil
	}
	// One mode for every interface on OPNsense (general/mode, ips before
	// 26.1; upstream lines at opnIDS): the other interfaces' modes are those given
	// with this one, else what the config runs.
	others := map[string]string{}
	if g := c.find("OPNsense/IDS/general"); g != nil && childText(g, "enabled") == "1" {
		for _, other := range splitList(childText(g, "interfaces")) {
			others[other] = c.opnIDS(other)
		}
	}
	for knob, v := range c.pending {
		if other, ok := strings.CutPrefix(knob, "ids@"); ok {
			others[other] = v
		}
	}
	field := "ips"
	if c.productAtLeast("26.1") {
		field = "mode"
	}
	for _, other := range slices.Sorted(maps.Keys(others)) {
		if m := others[other]; other != iface && m != value && m != IDSOff {
			return fmt.Errorf("OPNsense runs one IDS mode for all its interfaces, and ids@%s is %s; set both to %s (the mode is one field, OPNsense/IDS/general/%s)", other, m, value, field)
		}
	}
	return nil
}

func setIDS(c *Config, iface, value string) error {
	if c.flavor == OPNsense {
		return c.setOPNIDS(iface, value)
	}
	r := c.suricataRule(iface)
	if r == nil {
		if value == IDSOff {
			return nil
		}
		r = newSuricataRule(iface)
		c.insertChild(c.ensure(c.top(), "installedpackages/suricata"), r, "rule")
	}
	// ids also resets ips_mode: the package's rc script writer picks
	// --netmap on ips_mode alone, so an old inline mode would start
	// netmap with a pcap yaml.
	// upstream: not settled — suricata_create_rc() bakes `$run_mode = $value['ips_mode'] == 'ips_mode_inline' ? '--netmap' : '-i ' . $if_real;` (pfsense/FreeBSD-ports@e2173cf2 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc, an older copy, line not verified); checked at run time by fwapi.VerifyRuntime, which reads the running mode from ps
	enable, block, mode := "on", "off", "ips_mode_legacy"
	switch value {
	case IDSOff:
		enable = "off"
	case IDSLegacyIPS:
		block, mode = "on", "ips_mode_legacy"
	case IDSInlineIPS:
		block, mode = "on", "ips_mode_inline"
	}
	c.setLeaf(r, "enable", enable, false)
	if value != IDSOff {
		c.setLeaf(r, "blockoffenders", block, false)
		if mode != "" {
			c.setLeaf(r, "ips_mode", mode, false)
		}
	}
	return nil
}

// suricataDefaultRules are the package's default events rulesets, which
// its GUI enables on every interface it creates. The list follows the
// Suricata binary's own rules directory, so it changes between package
// versions; a name the box's Suricata lacks is skipped when the rules are
// built, and verify reads the count the running Suricata loaded.
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_defs.inc:89 — `define("SURICATA_DEFAULT_RULES", array( "app-layer-events.rules", "decoder-events.rules", …`
var suricataDefaultRules = []string{
	"app-layer-events.rules", "decoder-events.rules", "dhcp-events.rules", "dnp3-events.rules",
	"dns-events.rules", "files.rules", "ftp-events.rules", "http-events.rules", "http2-events.rules", "ipsec-events.rules",
	"kerberos-events.rules", "modbus-events.rules", "mqtt-events.rules", "nfs-events.rules", "ntp-events.rules",
	"quic-events.rules", "rfb-events.rules", "smb-events.rules", "smtp-events.rules", "ssh-events.rules",
	"stream-events.rules", "tls-events.rules",
}

// newSuricataRule is a minimal Suricata interface entry as the package's
// GUI creates it: a stable uuid derived from the interface, alerts on the
// default rulesets.
func newSuricataRule(iface string) *etree.Element {
	h := fnv.New32a()
	h.Write([]byte(iface))
	uuid := strconv.Itoa(int(h.Sum32()%65535) + 1)
	return elem("rule",
		leaf("interface", iface),
		leaf("enable", "off"),
		leaf("uuid", uuid),
		cdataLeaf("descr", strings.ToUpper(iface)+" (fwab)"),
		leaf("blockoffenders", "off"),
		leaf("ips_mode", "ips_mode_legacy"),
		leaf("blockoffenderskill", "on"),
		leaf("blockoffendersip", "both"),
		leaf("runmode", "autofp"),
		leaf("mpm_algo", "auto"),
		leaf("detect_eng_profile", "medium"),
		// upstream: pfsense/FreeBSD-ports@5e57bff010c8cfb8ada2cb38b08eb95936aade20 security/pfSense-pkg-suricata/files/usr/local/www/suricata/suricata_interfaces_edit.php:752 — `$natent['rulesets'] = implode("||", SURICATA_DEFAULT_RULES);`
		leaf("rulesets", strings.Join(suricataDefaultRules, "||")),
	)
}

func (c *Config) opnIDS(iface string) string {
	g := c.find("OPNsense/IDS/general")
	if g == nil || childText(g, "enabled") != "1" || !slices.Contains(splitList(childText(g, "interfaces")), iface) {
		return IDSOff
	}
	if c.productAtLeast("26.1") {
		if m := childText(g, "mode"); m == "netmap" || m == "divert" {
			return IDSInlineIPS
		}
		return IDSAlert
	}
	if childText(g, "ips") == "1" {
		return IDSInlineIPS
	}
	return IDSAlert
}

func (c *Config) setOPNIDS(iface, value string) error {
	g := c.ensure(c.top(), "OPNsense/IDS/general")
	var ifs []string
	// While the IDS is disabled its interface list means nothing (every
	// ids@IF reads off): enabling it for one interface must not switch on
	// the others still listed, as OPNsense's own default lists wan.
	if childText(g, "enabled") == "1" {
		ifs = splitList(childText(g, "interfaces"))
	}
	ifs = slices.DeleteFunc(ifs, func(s string) bool { return s == iface })
	if value != IDSOff {
		ifs = append(ifs, iface)
	}
	// The list is Required: with no interface left the IDS is switched
	// off and the list kept as it was, which is what "disabled" means.
	// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IDS/IDS.xml:157 — `<interfaces type="InterfaceField">`, Required, Default wan (24.7: line 143)
	enabled := "0"
	if len(ifs) > 0 {
		enabled = "1"
		c.setLeaf(g, "interfaces", strings.Join(ifs, ","), false)
	}
	c.setLeaf(g, "enabled", enabled, false)
	if value == IDSOff {
		return nil
	}
	if c.productAtLeast("26.1") {
		mode := "pcap"
		if value == IDSInlineIPS {
			mode = "netmap"
		}
		c.setLeaf(g, "mode", mode, false)
		return nil
	}
	ips := "0"
	if value == IDSInlineIPS {
		ips = "1"
	}
	c.setLeaf(g, "ips", ips, false)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// SuricataCustomRules are a pfSense Suricata interface's custom rules, as
// the package keeps them (base64 in its customrules field) decoded; ""
// for an interface without any, or without a Suricata entry.
//
// upstream: pfsense/FreeBSD-ports@87356efba71155b0c3620b9dc58805c379c1ce59 security/pfSense-pkg-suricata/files/usr/local/www/suricata/suricata_rules.php:803 — `$a_rule['customrules'] = base64_encode(str_replace("\r\n", "\n", $_POST['customrules']));`
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:3442 — `@file_put_contents("{$suricatacfgdir}/rules/custom.rules", base64_decode($suricatacfg['customrules']));`
func (c *Config) SuricataCustomRules(iface string) (string, error) {
	r := c.suricataRule(iface)
	if r == nil {
		return "", nil
	}
	text := strings.TrimSpace(childText(r, "customrules"))
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return "", fmt.Errorf("suricata on %s: customrules is not base64: %w", iface, err)
	}
	return string(b), nil
}

// SuricataUUID is the uuid of a pfSense Suricata interface entry, which
// names its folders (suricata_UUID_IF for its config, suricata_IFUUID for
// its logs); "" without an entry.
func (c *Config) SuricataUUID(iface string) string {
	if r := c.suricataRule(iface); r != nil {
		return strings.TrimSpace(childText(r, "uuid"))
	}
	return ""
}

// SuricataSuppressList is the suppress (threshold) list a pfSense Suricata
// interface uses, by name; "" for none (the GUI's default disables
// suppression and filtering).
//
// upstream: pfsense/FreeBSD-ports@294dab5b1b65a242d178c5a6180a37d7327a8c75 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata_generate_yaml.php:137 — `$suppress = suricata_find_list($suricatacfg['suppresslistname'], 'suppress');`, written to threshold.config
func (c *Config) SuricataSuppressList(iface string) string {
	r := c.suricataRule(iface)
	if r == nil {
		return ""
	}
	if name := strings.TrimSpace(childText(r, "suppresslistname")); name != "default" {
		return name
	}
	return ""
}

// SetSuricataCustomRules replaces a pfSense Suricata interface's custom
// rules with rules (base64 in customrules, as the package's rules page
// saves them); "" removes the field. The interface needs a Suricata
// entry (ids@IF set to something else than off first).
func (c *Config) SetSuricataCustomRules(iface, rules string) error {
	if c.flavor != PfSense {
		return fmt.Errorf("custom Suricata rules: only pfSense's package keeps them in config.xml")
	}
	r := c.suricataRule(iface)
	if r == nil {
		return fmt.Errorf("custom Suricata rules: %s has no Suricata entry", iface)
	}
	if rules == "" {
		c.removeElements(r, func(e *etree.Element) bool { return e.Tag == "customrules" })
		return nil
	}
	c.setLeaf(r, "customrules", base64.StdEncoding.EncodeToString([]byte(rules)), false)
	return nil
}
