// Package fwapi talks to pfSense and OPNsense firewalls: over SSH and over
// their REST APIs. It reads and writes config.xml, applies changes with the
// narrowest service action, reads the runtime state that proves a change took
// effect, samples metrics, and upgrades firmware. Every write is guarded by a
// rollback armed on the firewall itself.
package fwapi

import (
	"context"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
)

// Firewall is what a driver offers. The pfSense driver (SSH) and the OPNsense
// driver (REST, SSH for what the API lacks) both implement it and pass the
// same test suite.
type Firewall interface {
	Info(ctx context.Context) (Info, error)
	// ReadConfig returns the running config.xml, byte for byte.
	ReadConfig(ctx context.Context) ([]byte, error)
	// WriteConfig replaces config.xml atomically and keeps a copy in the
	// product's own backup area. It does not apply anything.
	WriteConfig(ctx context.Context, config []byte, description string) error
	// Apply runs the narrowest service action for each change, once per action.
	Apply(ctx context.Context, changes []configxml.Change) error
	RuntimeState(ctx context.Context) (RuntimeState, error)
	Metrics(ctx context.Context) (probe.DUTMetrics, error)
	Reboot(ctx context.Context) error
	WaitReady(ctx context.Context, timeout time.Duration) error
	Upgrade(ctx context.Context, version string, progress func(string)) error
	Close() error
}

// Info identifies a firewall.
type Info struct {
	Flavor   configxml.Flavor
	Version  string // product version as the firewall reports it, e.g. "2.7.2-RELEASE", "26.1.2"
	Hostname string
	NICs     []string // physical interface names, e.g. igb0, vtnet1
}

// RuntimeState is what the firewall is really doing, read from the running
// system (ifconfig, pfctl, swanctl, ps), not from the config.
type RuntimeState struct {
	Interfaces  map[string]IfaceState // by device name (igb0)
	PF          string                // pf's status, PFEnabled or PFDisabled (pfctl -si); "" when not read
	FilterRules int                   // loaded filter rules (pfctl -sr)
	NATRules    int                   // loaded NAT rules (pfctl -sn)
	NATOutbound []string              // the outbound NAT lines themselves
	IPsec       []IPsecSA
	IDS         []IDSInstance
	Tables      map[string]int // pf tables and their entry counts (pfBlockerNG's pfB_*)
	Version     string
	// GeneratedRules counts loaded rules labelled fwab-generated (rules@IF).
	GeneratedRules int
	// CryptoModules holds, for every accelerator module crypto.hardware
	// knows on the flavor, whether the kernel has it (kldstat); nil when
	// not read.
	CryptoModules map[string]bool
	// Management are the devices fwab's SSH session runs over, which its
	// offload apply leaves as they are (the target's offload_management
	// is off); nil when none is known or the apply includes them.
	Management []string
}

// IfaceState is one interface's offload flags as ifconfig reports them.
type IfaceState struct {
	Name    string
	Options []string // the options=<...> words: TXCSUM, RXCSUM, TSO4, TSO6, LRO, ...
	Media   string   // the media line's negotiated part, "10Gbase-T <full-duplex>"; "" when not shown
	// Supported are the subtypes `ifconfig -m` lists under "supported
	// media:" ("1000baseT", "100baseTX"), autoselect left out; nil
	// without -m.
	Supported []string
}

// Has reports whether the interface shows the given ifconfig option.
func (s IfaceState) Has(option string) bool {
	for _, o := range s.Options {
		if o == option {
			return true
		}
	}
	return false
}

// IPsecSA is one established child SA with its negotiated algorithms.
type IPsecSA struct {
	IKE       string // the connection (IKE SA) the child belongs to
	Name      string // child name
	State     string // INSTALLED, ...
	Encr      string // e.g. AES_GCM_16-128, 3DES_CBC
	Integ     string // e.g. HMAC_SHA2_256_128; empty for AEAD
	BytesIn   uint64
	BytesOut  uint64
	Proposals string // the whole ESP line as swanctl prints it
}

// IDSInstance is one running Suricata (or lab inspection) process.
type IDSInstance struct {
	Interface string // device name
	Mode      string // ids | ips-legacy | ips-inline
	PID       int
	Config    string // the configuration it runs (-c), where ps shows one
	// Rules is how many rules the instance's rule files hold (what the
	// package built for it to load; commented-out rules not counted), or
	// RulesUnknown where fwab could not read them. Every constructor sets
	// it: 0 means an engine that inspects nothing (FWAB112).
	Rules int
}

// RulesUnknown is IDSInstance.Rules when the count was not read.
const RulesUnknown = -1
