// Package emu is the product model: the one emulator of pfSense and
// OPNsense as fwab meets them. It keeps a real config.xml and a firewall's
// filesystem, answers over SSH the commands the products answer (their
// shells, FreeBSD's tools, the products' PHP and configctl entry points),
// serves OPNsense's REST API, and reproduces what each of those commands
// does on the real product, hazards first (docs/callgraph.md, whose rows
// EntryPoints holds).
//
// What it drives on the machine it reaches through four interfaces:
// DataPlane (rules, offloads, links), IPsecPlane (strongSwan), IDSPlane
// (the inspection engines that stand in for Suricata) and CPUBudget.
// Package lab implements them on Linux; without it the emulator runs on a
// RecordingDataPlane and needs no root.
//
// Files are named by product and package: pfsense_suricata.go,
// pfsense_pfblockerng.go, opnsense_ids.go, opnsense_api.go; freebsd.go holds
// what both products share from FreeBSD, ruleset.go renders config.xml into
// the data plane's rules, link.go is the emulated NICs' speeds. The lab
// folder's keys (keys.go), the lab's addresses (addresses.go) and the tunnel
// PSK file are emu's because StartLocal, which needs no lab, uses them too.
package emu
