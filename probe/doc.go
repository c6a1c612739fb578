// Package probe measures what passes through a firewall: iperf3 between two
// endpoint hosts (a LAN client and a WAN server, reached over SSH or as local
// network namespaces), latency under load, the firewall's own metrics and its
// power draw while a probe runs. It never talks to the firewall's
// configuration: DUT metrics come in through a function the caller supplies.
//
// A probe that cannot run is not an error but a failed Sample whose Reason
// says why, so that a sweep can record it and go on.
package probe
