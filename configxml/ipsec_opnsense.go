package configxml

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/beevik/etree"
)

// OPNsense's IPsec "Connections" (MVC, 23.1 on, the only kind in core from
// 25.7): <OPNsense><Swanctl> with Connections/Connection, locals/local,
// remotes/remote and children/child linked by the connection's uuid;
// proposals are whole strongSwan strings (firewall.md B-d). Pre-shared keys
// live in <OPNsense><IPsec><preSharedKeys>.
//
// The IPsec service as a whole has one switch, the legacy <ipsec><enable>:
// the model's general.enabled only links to it and cannot be written, and
// the service controller starts strongSwan only while it is set (else its
// reconfigure stops it). The GUI's toggle sets it and removes it; "set"
// means present, whatever its text.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/IPsec.xml:7 — `<enabled type="LegacyLinkField">` (the same in 24.7, 25.7, 26.7)
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/IPsec.xml:8 — `<Source>ipsec.enable</Source>`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/ServiceController.php:39 — `$internalServiceEnabled = 'general.enabled'`
// upstream: opnsense/core@3a7cd418681c6bae8955b1937fa87293421da093 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/ConnectionsController.php:304 — `$config->ipsec->enable = true`, and isEnabledAction tests `isset(...->ipsec->enable)`

const swanctl = "OPNsense/Swanctl"

// ipsecSwitch is the legacy element that turns OPNsense's IPsec on.
const ipsecSwitch = "ipsec/enable"

func (c *Config) opnIPsecOn() bool { return c.find(ipsecSwitch) != nil }

// IPsecSwitch reports whether an OPNsense config turns the IPsec service
// on (<ipsec><enable> present), and names the Swanctl connections it
// enables (enabled=1) whatever the switch says: connections enabled under
// a switch that is off never start, and reconfigure stops strongSwan.
func (c *Config) IPsecSwitch() (on bool, enabled []string) {
	for _, conn := range c.findAll(swanctl+"/Connections/Connection", false) {
		if childText(conn, "enabled") == "1" {
			enabled = append(enabled, childText(conn, "description"))
		}
	}
	return c.opnIPsecOn(), enabled
}

func (c *Config) swanctlConnection(name string) *etree.Element {
	for _, conn := range c.findAll(swanctl+"/Connections/Connection", false) {
		if childText(conn, "description") == name {
			return conn
		}
	}
	return nil
}

func (c *Config) swanctlLinked(kind, connUUID string) *etree.Element {
	for _, e := range c.findAll(swanctl+"/"+kind, false) {
		if childText(e, "connection") == connUUID {
			return e
		}
	}
	return nil
}

func (c *Config) swanctlTunnels() []Tunnel {
	var out []Tunnel
	on := c.opnIPsecOn()
	for _, conn := range c.findAll(swanctl+"/Connections/Connection", false) {
		id := conn.SelectAttrValue("uuid", "")
		t := Tunnel{
			Name:       childText(conn, "description"),
			Enabled:    on && childText(conn, "enabled") == "1",
			LocalAddr:  childText(conn, "local_addrs"),
			RemoteAddr: childText(conn, "remote_addrs"),
		}
		if ike, err := parseAlgos(strings.Split(childText(conn, "proposals"), ",")[0], true); err == nil {
			t.Proposal.IKE = ike
		}
		if l := c.swanctlLinked("locals/local", id); l != nil {
			t.LocalID = childText(l, "id")
		}
		if r := c.swanctlLinked("remotes/remote", id); r != nil {
			t.RemoteID = childText(r, "id")
		}
		t.Conn = id
		for _, ch := range c.findAll(swanctl+"/children/child", false) {
			// upstream: opnsense/core@0a4ccc54a83af0b8cab919011011d80299d9bfba src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.php:249 — only children whose `enabled` is set are written (an empty one is skipped, as `empty()` is)
			if childText(ch, "connection") == id && childText(ch, "enabled") == "1" {
				t.Children = append(t.Children, ch.SelectAttrValue("uuid", ""))
			}
		}
		if ch := c.swanctlLinked("children/child", id); ch != nil {
			t.LocalNet = childText(ch, "local_ts")
			t.RemoteNet = childText(ch, "remote_ts")
			if esp, err := parseAlgos(strings.Split(childText(ch, "esp_proposals"), ",")[0], false); err == nil {
				t.Proposal.ESP = esp
			}
			t.Enabled = t.Enabled && childText(ch, "enabled") != "0"
		}
		for _, k := range c.findAll("OPNsense/IPsec/preSharedKeys/preSharedKey", false) {
			if childText(k, "ident") == t.LocalID && childText(k, "remote_ident") == t.RemoteID {
				t.PSK = childText(k, "Key")
			}
		}
		out = append(out, t)
	}
	return out
}

func (c *Config) setSwanctl(name, value string) error {
	conn := c.swanctlConnection(name)
	if value == ipsecNone {
		if conn != nil {
			c.setLeaf(conn, "enabled", "0", false)
		}
		return nil
	}
	p, _ := ParseProposal(value) // validated
	if conn == nil {
		spec, ok := c.tunnels[name]
		if !ok {
			return fmt.Errorf("no IPsec connection %q", name)
		}
		local, err := c.tunnelLocalAddr(spec)
		if err != nil {
			return err
		}
		spec.LocalAddr = local
		conn = c.createSwanctl(spec)
	}
	c.setLeaf(conn, "enabled", "1", false)
	c.setLeaf(conn, "proposals", p.IKE.String(), false)
	child := c.swanctlLinked("children/child", conn.SelectAttrValue("uuid", ""))
	if child == nil {
		return fmt.Errorf("IPsec connection %q has no child (phase 2) to carry the ESP proposal", name)
	}
	c.setLeaf(child, "esp_proposals", p.ESP.String(), false)
	c.setLeaf(child, "enabled", "1", false)
	c.setLeaf(c.ensure(c.top(), "ipsec"), "enable", "1", false)
	return nil
}

// createSwanctl writes a connection, its local and remote, its child and the
// pre-shared key, as the model defines them: array items keyed by uuid, the
// children linked to the connection's uuid.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:7 — `<Connection type=".\ConnnectionField">` below Connections, mount //OPNsense/Swanctl
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:110 — `<local type="ArrayField">` below locals
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:166 — `<remote type="ArrayField">` below remotes
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:229 — `<child type="ArrayField">` below children
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/Swanctl.xml:234 — `<connection type="ModelRelationField">` on local, remote and child
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/models/OPNsense/IPsec/IPsec.xml:198 — `<preSharedKey type="ArrayField">` below preSharedKeys, mount //OPNsense/IPsec
func (c *Config) createSwanctl(t TunnelSpec) *etree.Element {
	root := c.top() // ensure reads the sections it goes into
	connUUID := stableUUID("conn:" + t.Name)
	conn := elem("Connection",
		leaf("enabled", "1"),
		leaf("proposals", "default"),
		leaf("unique", "no"),
		leaf("aggressive", "0"),
		leaf("version", "2"),
		leaf("mobike", "0"),
		leaf("local_addrs", t.LocalAddr),
		leaf("remote_addrs", t.RemoteAddr),
		leaf("encap", "0"),
		leaf("rekey_time", "0"),
		leaf("dpd_delay", "0"),
		leaf("description", t.Name),
	)
	conn.CreateAttr("uuid", connUUID)
	side := func(tag, id, key string) *etree.Element {
		e := elem(tag,
			leaf("enabled", "1"),
			leaf("connection", connUUID),
			leaf("round", "0"),
			leaf("auth", "psk"),
			leaf("id", id),
			leaf("description", t.Name),
		)
		e.CreateAttr("uuid", stableUUID(key+t.Name))
		return e
	}
	child := elem("child",
		leaf("enabled", "1"),
		leaf("connection", connUUID),
		leaf("esp_proposals", "default"),
		leaf("start_action", "start"),
		leaf("close_action", "none"),
		leaf("dpd_action", "clear"),
		leaf("mode", "tunnel"),
		leaf("policies", "1"),
		leaf("local_ts", t.LocalNet),
		leaf("remote_ts", t.RemoteNet),
		leaf("rekey_time", "0"),
		leaf("description", t.Name),
	)
	child.CreateAttr("uuid", stableUUID("child:"+t.Name))
	c.insertChild(c.ensure(root, swanctl+"/Connections"), conn, "Connection")
	c.insertChild(c.ensure(root, swanctl+"/locals"), side("local", t.LocalID, "local:"), "local")
	c.insertChild(c.ensure(root, swanctl+"/remotes"), side("remote", t.RemoteID, "remote:"), "remote")
	c.insertChild(c.ensure(root, swanctl+"/children"), child, "child")
	psk := elem("preSharedKey",
		leaf("ident", t.LocalID),
		leaf("remote_ident", t.RemoteID),
		leaf("keyType", "PSK"),
		leaf("Key", t.PSK),
		leaf("description", t.Name),
	)
	psk.CreateAttr("uuid", stableUUID("psk:"+t.Name))
	c.insertChild(c.ensure(root, "OPNsense/IPsec/preSharedKeys"), psk, "preSharedKey")
	return conn
}

// stableUUID derives a version-4-shaped UUID from a key, so that the same
// tunnel gets the same identifiers in every run.
func stableUUID(key string) string {
	h1, h2 := fnvSum(key, 0), fnvSum(key, 1)
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(h1), uint16(h1>>32), uint16(h1>>48)&0xfff, uint16(h2)&0xfff, h2>>16&0xffffffffffff)
}

func fnvSum(key string, salt byte) uint64 {
	h := fnv.New64a()
	h.Write([]byte{salt})
	h.Write([]byte(key))
	return h.Sum64()
}

// opnLegacyTunnel refuses an OPNsense tunnel that exists only as a legacy
// tunnel (<ipsec><phase1>, VPN → IPsec → Tunnel Settings): 24.7's core
// runs them, and from 25.7 the legacy plugin, under connection names and
// with proposal fields of their own. fwab edits the Connections model
// only, so it neither reads such a tunnel (it would read "none") nor
// creates a connection of the same name beside it (a second tunnel to the
// same peer). A legacy tunnel is named by its descr, else ikeid<N>.
//
// upstream: opnsense-core 24.7 src/etc/inc/plugins.inc.d/ipsec.inc:1561 — legacy tunnels become `$swanctl['connections']["con{$ph1ent['ikeid']}"]`
// upstream: opnsense-core 25.7 src/etc/inc/plugins.inc.d/ipsec.inc:143 — `return file_exists('/usr/local/www/vpn_ipsec_phase1.php') && !empty($config['ipsec']['phase1']);` (the legacy plugin's page)
func (c *Config) opnLegacyTunnel(name string) error {
	if c.flavor != OPNsense || c.swanctlConnection(name) != nil {
		return nil
	}
	for _, p1 := range c.findAll("ipsec/phase1", false) {
		n := childText(p1, "descr")
		if n == "" {
			n = "ikeid" + childText(p1, "ikeid")
		}
		if n == name {
			return fmt.Errorf("IPsec tunnel %q is a legacy tunnel (<ipsec><phase1>, VPN → IPsec → Tunnel Settings), which fwab does not change: it edits OPNsense's Connections (swanctl) model, and a connection of that name beside the legacy one would be a second tunnel to the same peer; migrate the tunnel to VPN → IPsec → Connections (OPNsense's migration guide), or sweep a tunnel defined there (from 25.7 a legacy tunnel runs only with the legacy IPsec plugin installed; note too that turning IPsec on for any connection turns on every legacy tunnel that is not disabled)", name)
		}
	}
	return nil
}
