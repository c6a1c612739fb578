package emu

import (
	"net"
	"net/http"
	"slices"
	"time"
)

// The management interface is the one fwab's SSH and REST sessions come
// in through (Emulator.SSHVia; the LAN by default, as on a factory box).
// What the products do to it is emulated here, the harsher reading where
// upstream does not settle it:
//
//   - A reconfigure of the interface (pfSense interface_configure through
//     rc.reload_interfaces or rc.reload_all; OPNsense's configctl
//     interface reconfigure KEY, rc.reload_all) removes and re-adds its
//     addresses and renews DHCP: the sessions over it are lost. The
//     command's effects all happen; its caller never hears the end.
//   - A capability change on its NIC (ifconfig DEV -tso, the GUI's
//     offload apply) may reset the link, depending on the driver: the
//     link drops packets for ManagementLinkReset, and TCP carries the
//     sessions over the gap.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:1070 — `interfaces_configure()` in reload_interfaces_sync: every interface, addresses removed and set again
// upstream: opnsense-core 24.7 src/opnsense/service/conf/actions.d/actions_interface.conf:2 — `rc.configure_interface`: interface_configure of that interface
// upstream: not settled — whether a capability change resets the link is each NIC driver's (FreeBSD, not in the upstream copy); the emulator takes the reset, and fwab copes at run time: its offload apply leaves the management NIC alone unless the target asks, and its sessions ride out a short silence

// NoManagement, as EmulatorOptions.SSHVia, names no management interface:
// the sessions arrive on 127.0.0.1 and no reconfigure reaches them.
const NoManagement = "none"

// ManagementLinkReset is how long a capability change on the management
// NIC keeps its link silent.
const ManagementLinkReset = 300 * time.Millisecond

// managementDevice is the device of the management interface in root's
// config, or "".
func (e *Emulator) managementDevice() string {
	if e.SSHVia == "" {
		return ""
	}
	root, err := parseConfigFile(e)
	if err != nil {
		return ""
	}
	for _, i := range root.Interfaces() {
		if i.Key == e.SSHVia {
			return i.Device
		}
	}
	return ""
}

// managementReconfigured drops every management session, as a reconfigure
// of the management interface (keys holds the interfaces reconfigured, or
// nil for all) does on the products.
func (e *Emulator) managementReconfigured(what string, keys ...string) {
	if e.SSHVia == "" {
		return
	}
	if keys != nil && !slices.Contains(keys, e.SSHVia) {
		return
	}
	e.logger().Warn("management interface reconfigured: its sessions are lost", "by", what, "interface", e.SSHVia)
	e.closeConns()
	e.closeAPIConns()
}

// capabilitiesChanged is a capability change on dev: the management NIC's
// link resets.
func (e *Emulator) capabilitiesChanged(dev string) {
	if dev == "" || dev != e.managementDevice() {
		return
	}
	e.fmu.Lock()
	e.resetUntil = time.Now().Add(ManagementLinkReset)
	e.fmu.Unlock()
	e.logger().Warn("management NIC's capabilities changed: its link resets", "device", dev, "for", ManagementLinkReset)
}

// trackAPIConn is the REST API server's ConnState hook: it keeps the open
// connections, for managementReconfigured to drop.
func (e *Emulator) trackAPIConn(c net.Conn, st http.ConnState) {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	switch st {
	case http.StateNew:
		if e.apiConns == nil {
			e.apiConns = map[net.Conn]bool{}
		}
		e.apiConns[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(e.apiConns, c)
	}
}

// closeAPIConns closes the REST API's open connections.
func (e *Emulator) closeAPIConns() {
	e.lmu.Lock()
	defer e.lmu.Unlock()
	for c := range e.apiConns {
		c.Close()
	}
}
