package configxml

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
	"strings"

	"github.com/beevik/etree"
)

// TunnelSpec describes an IPsec site-to-site tunnel that ipsec@NAME creates
// when the config has none of that name. The PSK goes into config.xml, as
// the product stores it; it is never part of a knob value or an error.
type TunnelSpec struct {
	Name       string
	Interface  string // local interface key, default wan
	LocalAddr  string // this end's address (OPNsense needs it; pfSense takes it from Interface)
	RemoteAddr string
	LocalNet   string // CIDR
	RemoteNet  string // CIDR
	LocalID    string
	RemoteID   string
	PSK        string
}

// DefineTunnel registers the tunnel that ipsec@NAME creates if absent.
func (c *Config) DefineTunnel(t TunnelSpec) {
	if c.tunnels == nil {
		c.tunnels = map[string]TunnelSpec{}
	}
	c.tunnels[t.Name] = t
}

// Tunnel is an IPsec tunnel as configured.
type Tunnel struct {
	Name       string
	Enabled    bool
	Interface  string
	LocalAddr  string
	RemoteAddr string
	LocalNet   string
	RemoteNet  string
	LocalID    string
	RemoteID   string
	PSK        string
	Proposal   Proposal
	// Conn and Children are the names the product gives the connection
	// and its child SAs in swanctl.conf, which swanctl and the products'
	// session APIs take.
	Conn     string
	Children []string
}

const ipsecNone = "none"

func validateIPsec(c *Config, name, value string) error {
	if err := c.opnLegacyTunnel(name); err != nil {
		return err
	}
	if value == ipsecNone {
		return nil
	}
	p, err := ParseProposal(value)
	if err != nil {
		return err
	}
	if err := c.checkProposal(p); err != nil {
		return err
	}
	if c.flavor == OPNsense {
		if conn := c.swanctlConnection(name); conn != nil && c.swanctlLinked("children/child", conn.SelectAttrValue("uuid", "")) == nil {
			return fmt.Errorf("IPsec connection %q has no child (phase 2) to carry the ESP proposal; add one on the firewall", name)
		}
	}
	// A tunnel the set creates is checked as new on the copy too.
	if !c.hasTunnel(name) || c.before != nil && !c.before.hasTunnel(name) {
		spec, ok := c.tunnels[name]
		for _, f := range []string{spec.Name, spec.Interface, spec.LocalAddr, spec.RemoteAddr, spec.LocalNet, spec.RemoteNet, spec.LocalID, spec.RemoteID, spec.PSK} {
			if err := xmlText(f); err != nil {
				return fmt.Errorf("tunnel %q: %w", name, err)
			}
		}
		if !ok {
			return fmt.Errorf("no IPsec tunnel %q in this config; create it on the firewall, or describe it in the spec's tunnel: section (remote_addr, local_net, remote_net, psk_file) so fwab can create it", name)
		}
		if c.flavor == OPNsense {
			if _, err := c.tunnelLocalAddr(spec); err != nil {
				return err
			}
		}
	}
	return nil
}

// tunnelLocalAddr is the address an OPNsense connection binds to: the
// spec's local_addr, else the static address of the spec's interface.
// OPNsense connections name local addresses, not interfaces.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:7 — `<Connection type=".\ConnnectionField">` carries local_addrs, no interface
func (c *Config) tunnelLocalAddr(t TunnelSpec) (string, error) {
	if t.LocalAddr != "" {
		return t.LocalAddr, nil
	}
	for _, i := range c.Interfaces() {
		if i.Key != t.Interface {
			continue
		}
		if _, err := netip.ParseAddr(i.IPAddr); err != nil {
			return "", fmt.Errorf("tunnel %q: interface %s has no static address (ipaddr %q), and an OPNsense connection needs one: set local_addr in the tunnel spec", t.Name, t.Interface, i.IPAddr)
		}
		return i.IPAddr, nil
	}
	return "", fmt.Errorf("tunnel %q: no interface %q in this config to take the local address from: set local_addr or a valid interface in the tunnel spec", t.Name, t.Interface)
}

func (c *Config) hasTunnel(name string) bool {
	for _, n := range c.tunnelNames() {
		if n == name {
			return true
		}
	}
	return false
}

func (c *Config) tunnelNames() []string {
	var names []string
	for _, t := range c.Tunnels() {
		names = append(names, t.Name)
	}
	return names
}

func getIPsec(c *Config, name string) (string, error) {
	if err := c.opnLegacyTunnel(name); err != nil {
		return "", err
	}
	for _, t := range c.Tunnels() {
		if t.Name == name {
			if !t.Enabled {
				return ipsecNone, nil
			}
			return t.Proposal.String(), nil
		}
	}
	return ipsecNone, nil
}

func setIPsec(c *Config, name, value string) error {
	if c.flavor == OPNsense {
		return c.setSwanctl(name, value)
	}
	p1 := c.pfPhase1(name)
	if value == ipsecNone {
		if p1 != nil && p1.SelectElement("disabled") == nil {
			c.insertChild(p1, leaf("disabled", ""), "")
		}
		return nil
	}
	p, _ := ParseProposal(value) // validated
	if p1 == nil {
		p1 = c.createPfTunnel(c.tunnels[name])
	}
	c.removeElements(p1, func(e *etree.Element) bool { return e.Tag == "disabled" })
	c.setPfPhase1(p1, p.IKE)
	ikeid := childText(p1, "ikeid")
	for _, p2 := range c.findAll("ipsec/phase2", false) {
		if childText(p2, "ikeid") == ikeid {
			c.setPfPhase2(p2, p.ESP)
		}
	}
	return nil
}

// pfSense's phase 1 proposals are <encryption><item> entries, its phase 2
// offers <encryption-algorithm-option> and <hash-algorithm-option> lists
// with one <pfsgroup>; <disabled/> by presence switches either off.
//
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2517 — `foreach(array_get_path($ph1ent, 'encryption/item', []) as $p1enc)` (2.6.0: line 2543; master: line 2486)
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2526 — `$p1enc['encryption-algorithm']['name']`, then keylen, hash-algorithm, prf-algorithm, dhgroup
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2739 — `$ph2ent['encryption-algorithm-option']`
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2325 — `$ph2ent['hash-algorithm-option']`, skipped for GCM and chacha20poly1305
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2328 — `$ph2ent['pfsgroup']`
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:1493 — `isset($ph1ent['disabled'])`
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:1555 — `isset($ph2ent['disabled'])`
func pfHash(h string, phase2 bool) string {
	if phase2 && h != "aesxcbc" {
		return "hmac_" + h
	}
	return h
}

// setPfPhase1 makes the phase 1's proposal list exactly one item with a,
// editing the existing item in place so that its layout is kept.
func (c *Config) setPfPhase1(p1 *etree.Element, a Algos) {
	encryption := p1.SelectElement("encryption")
	if encryption == nil {
		encryption = etree.NewElement("encryption")
		c.insertChild(p1, encryption, "iketype")
	}
	items := encryption.SelectElements("item")
	if len(items) == 0 {
		items = []*etree.Element{etree.NewElement("item")}
		c.insertChild(encryption, items[0], "")
	}
	item := items[0]
	c.removeElements(encryption, func(e *etree.Element) bool { return e.Tag == "item" && e != item })
	c.setCipher(c.ensure(item, "encryption-algorithm"), a.Enc)
	c.setLeaf(item, "hash-algorithm", a.Integ, false)
	c.setLeaf(item, "prf-algorithm", a.Integ, false)
	c.setLeaf(item, "dhgroup", dhNumber(a.DH), false)
}

// setPfPhase2 makes the phase 2 offer exactly a: one encryption option, one
// hash option unless the cipher is AEAD, and the PFS group.
func (c *Config) setPfPhase2(p2 *etree.Element, a Algos) {
	c.removeElements(p2, func(e *etree.Element) bool { return e.Tag == "disabled" })
	opts := p2.SelectElements("encryption-algorithm-option")
	if len(opts) == 0 {
		opts = []*etree.Element{etree.NewElement("encryption-algorithm-option")}
		c.insertChild(p2, opts[0], "protocol")
	}
	opt := opts[0]
	c.removeElements(p2, func(e *etree.Element) bool { return e.Tag == "encryption-algorithm-option" && e != opt })
	c.setCipher(opt, a.Enc)
	hashes := p2.SelectElements("hash-algorithm-option")
	switch {
	case a.Integ == "":
		c.removeElements(p2, func(e *etree.Element) bool { return e.Tag == "hash-algorithm-option" })
	case len(hashes) == 0:
		c.insertChild(p2, leaf("hash-algorithm-option", pfHash(a.Integ, true)), "encryption-algorithm-option")
	default:
		c.setText(hashes[0], pfHash(a.Integ, true), false)
		c.removeElements(p2, func(e *etree.Element) bool { return e.Tag == "hash-algorithm-option" && e != hashes[0] })
	}
	c.setLeaf(p2, "pfsgroup", dhNumber(a.DH), false)
}

// setCipher sets <name> and <keylen> below e; ciphers without a key length
// lose the element.
func (c *Config) setCipher(e *etree.Element, enc string) {
	name, keylen := pfEncryption(enc)
	c.setLeaf(e, "name", name, false)
	if keylen == "" {
		c.removeElements(e, func(x *etree.Element) bool { return x.Tag == "keylen" })
		return
	}
	c.setLeaf(e, "keylen", keylen, false)
}

func (c *Config) pfPhase1(name string) *etree.Element {
	for _, p1 := range c.findAll("ipsec/phase1", false) {
		if childText(p1, "descr") == name {
			return p1
		}
	}
	return nil
}

// createPfTunnel adds a phase 1 and its phase 2 as pfSense's GUI writes them
// (firewall.md A-d), with the proposal filled in by the caller.
func (c *Config) createPfTunnel(t TunnelSpec) *etree.Element {
	ipsec := c.ensure(c.top(), "ipsec")
	ikeid := 1
	for _, p1 := range ipsec.SelectElements("phase1") {
		if n, err := strconv.Atoi(childText(p1, "ikeid")); err == nil && n >= ikeid {
			ikeid = n + 1
		}
	}
	iface := t.Interface
	if iface == "" {
		iface = "wan"
	}
	id := strconv.Itoa(ikeid)
	p1 := elem("phase1",
		leaf("ikeid", id),
		leaf("iketype", "ikev2"),
		leaf("interface", iface),
		leaf("remote-gateway", t.RemoteAddr),
		leaf("protocol", "inet"),
		leaf("myid_type", "fqdn"),
		leaf("myid_data", t.LocalID),
		leaf("peerid_type", "fqdn"),
		leaf("peerid_data", t.RemoteID),
		leaf("authentication_method", "pre_shared_key"),
		leaf("pre-shared-key", t.PSK),
		leaf("lifetime", "28800"),
		leaf("rekey_time", "0"),
		leaf("nat_traversal", "on"),
		leaf("mobike", "off"),
		leaf("startaction", "start"),
		leaf("closeaction", "none"),
		cdataLeaf("descr", t.Name),
	)
	localNet, localBits := splitCIDR(t.LocalNet)
	remoteNet, remoteBits := splitCIDR(t.RemoteNet)
	p2 := elem("phase2",
		leaf("ikeid", id),
		leaf("uniqid", uniqID(t.Name)),
		leaf("reqid", c.newReqid()),
		leaf("mode", "tunnel"),
		elem("localid", leaf("type", "network"), leaf("address", localNet), leaf("netbits", localBits)),
		elem("remoteid", leaf("type", "network"), leaf("address", remoteNet), leaf("netbits", remoteBits)),
		leaf("protocol", "esp"),
		leaf("pfsgroup", "0"),
		leaf("lifetime", "3600"),
		cdataLeaf("descr", t.Name),
	)
	c.insertChild(ipsec, p1, "phase1")
	c.insertChild(ipsec, p2, "phase2")
	return p1
}

// newReqid is the lowest reqid no phase 2 uses, as the GUI gives a new
// phase 2.
//
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:330 — `for ($i = 1; $i < 16000; $i++) {`, the first unused (ipsec_new_reqid)
func (c *Config) newReqid() string {
	used := map[string]bool{}
	for _, p2 := range c.findAll("ipsec/phase2", false) {
		used[childText(p2, "reqid")] = true
	}
	for i := 1; ; i++ {
		if r := strconv.Itoa(i); !used[r] {
			return r
		}
	}
}

func splitCIDR(s string) (addr, bits string) {
	a, b, ok := strings.Cut(s, "/")
	if !ok {
		return a, "32"
	}
	return a, b
}

func uniqID(name string) string {
	h := fnv.New64a()
	h.Write([]byte(name))
	return fmt.Sprintf("%013x", h.Sum64()&0xfffffffffffff)
}

// pfSwanctlNames names a phase 1's connection and child SAs as pfSense's
// swanctl.conf does: con<ikeid> (a mobile phase 1 is con-mobile), and for
// IKEv2 or auto without split connections one child of the same name
// carrying every phase 2; for IKEv1 or split connections a child
// con<ikeid>_<reqid> per enabled phase 2.
//
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:433 — `$conid = "{$ipsec_conid_prefix}{$p1['ikeid']}";` (prefix `con`, :33)
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:430 — `return "{$ipsec_conid_prefix}-mobile";`
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2779 — `if (!isset($ph1ent['mobile']) && (($ikeversion == 1) || isset($ph1ent['splitconn']))) {`: a child per phase 2, named with its reqid (:438, separator `_` :36)
// upstream: pfsense 2.7.2 src/etc/inc/ipsec.inc:2486 — `case 'auto':` is IKE version 0, not 1; an empty iketype is IKEv1 (:2484)
func pfSwanctlNames(ipsec, p1 *etree.Element) (conn string, children []string) {
	id := childText(p1, "ikeid")
	conn = "con" + id
	if p1.SelectElement("mobile") != nil {
		return "con-mobile", []string{"con-mobile"}
	}
	ike := childText(p1, "iketype")
	split := (ike != "ikev2" && ike != "auto") || p1.SelectElement("splitconn") != nil
	for _, p2 := range ipsec.SelectElements("phase2") {
		if childText(p2, "ikeid") != id || p2.SelectElement("disabled") != nil {
			continue
		}
		if !split {
			return conn, []string{conn}
		}
		children = append(children, conn+"_"+childText(p2, "reqid"))
	}
	return conn, children
}

// Tunnels lists the config's IPsec tunnels: pfSense phase 1 entries with
// their first phase 2, and OPNsense connections with their first child.
func (c *Config) Tunnels() []Tunnel {
	if c.flavor == OPNsense {
		return c.swanctlTunnels()
	}
	var out []Tunnel
	for _, p1 := range c.findAll("ipsec/phase1", false) {
		t := Tunnel{
			Name:       childText(p1, "descr"),
			Enabled:    p1.SelectElement("disabled") == nil,
			Interface:  childText(p1, "interface"),
			RemoteAddr: childText(p1, "remote-gateway"),
			LocalID:    childText(p1, "myid_data"),
			RemoteID:   childText(p1, "peerid_data"),
			PSK:        childText(p1, "pre-shared-key"),
		}
		if t.Name == "" {
			t.Name = "ikeid" + childText(p1, "ikeid")
		}
		for _, i := range c.Interfaces() {
			if i.Key == t.Interface {
				t.LocalAddr = i.IPAddr
			}
		}
		if item := p1.FindElement("encryption/item"); item != nil {
			t.Proposal.IKE = Algos{
				Enc:   pfDecryption(childText(item, "encryption-algorithm/name"), childText(item, "encryption-algorithm/keylen")),
				Integ: childText(item, "hash-algorithm"),
				DH:    dhName(childText(item, "dhgroup")),
			}
		} else if enc := p1.SelectElement("encryption-algorithm"); enc != nil {
			t.Proposal.IKE = Algos{
				Enc:   pfDecryption(childText(enc, "name"), childText(enc, "keylen")),
				Integ: strings.Split(childText(p1, "hash-algorithm"), ",")[0],
				DH:    dhName(strings.Split(childText(p1, "dhgroup"), ",")[0]),
			}
		}
		t.Conn, t.Children = pfSwanctlNames(c.section("ipsec"), p1)
		for _, p2 := range c.findAll("ipsec/phase2", false) {
			if childText(p2, "ikeid") != childText(p1, "ikeid") || p2.SelectElement("disabled") != nil {
				continue
			}
			t.LocalNet = childText(p2, "localid/address") + "/" + childText(p2, "localid/netbits")
			t.RemoteNet = childText(p2, "remoteid/address") + "/" + childText(p2, "remoteid/netbits")
			if opt := p2.SelectElement("encryption-algorithm-option"); opt != nil {
				t.Proposal.ESP.Enc = pfDecryption(childText(opt, "name"), childText(opt, "keylen"))
			}
			if !isAEAD(t.Proposal.ESP.Enc) {
				t.Proposal.ESP.Integ = strings.TrimPrefix(childText(p2, "hash-algorithm-option"), "hmac_")
			}
			if g := childText(p2, "pfsgroup"); g != "" && g != "0" {
				t.Proposal.ESP.DH = dhName(g)
			}
			break
		}
		out = append(out, t)
	}
	return out
}

// ipsecParts: a tunnel is read from pfSense's <ipsec> or OPNsense's
// Swanctl and IPsec models (legacy <ipsec> too, for the switch), with its
// local address from <interfaces>; a change writes the former.
func ipsecParts(*Config, string) ([]string, []string) {
	return []string{"ipsec", "OPNsense/IPsec", swanctl, "interfaces"}, []string{"ipsec", "OPNsense/IPsec", swanctl}
}
