package emu

import (
	"context"
	"net/netip"
	"time"
)

// DataPlane is the Linux side the emulated firewall drives. LinuxDataPlane is
// the real one; tests of the emulator that do not need root use a recording
// one.
type DataPlane interface {
	// LoadRuleset loads an nft script as one transaction.
	LoadRuleset(ctx context.Context, script string) error
	// Listing returns the lab's tables as nft lists them, without set
	// elements (terse).
	Listing(ctx context.Context) (string, error)
	// SetElements lists one set's elements.
	SetElements(ctx context.Context, set string) ([]string, error)
	SetOffloads(ctx context.Context, veth string, o Offloads) error
	Offloads(ctx context.Context, veth string) (Offloads, error)
	Link(ctx context.Context, veth string) (VethState, error)
	// Shape caps a veth's egress at rateMbit; 0 removes the cap.
	Shape(ctx context.Context, veth string, rateMbit float64) error
	// Reset removes everything the emulator applied (tables, caps) and
	// the connection-tracking states, as a reboot does, and leaves the
	// DUT forwarding nothing (DownRuleset, in the same transaction) until
	// the next ruleset load.
	Reset(ctx context.Context) error
	// StateCount is the number of connection-tracking entries.
	StateCount(ctx context.Context) (int, error)
	// MeasureMbit measures TCP goodput through the DUT from the client to
	// the server (reverse: the other way), for a tracking slowdown.
	MeasureMbit(ctx context.Context, reverse bool) (float64, error)
}

// VethState is a veth's state: what ifconfig shows of its port.
type VethState struct {
	MTU   int
	MAC   string
	Up    bool
	Addrs []netip.Prefix
	Stats LinkStats
}

// LinkStats are a veth's counters, as netstat -i shows a NIC's.
type LinkStats struct {
	InPackets, InErrors, InDrops, InBytes     uint64
	OutPackets, OutErrors, OutDrops, OutBytes uint64
}

// Since is s counted from base (each counter less base's, never below 0).
func (s LinkStats) Since(base LinkStats) LinkStats {
	d := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return LinkStats{d(s.InPackets, base.InPackets), d(s.InErrors, base.InErrors), d(s.InDrops, base.InDrops), d(s.InBytes, base.InBytes),
		d(s.OutPackets, base.OutPackets), d(s.OutErrors, base.OutErrors), d(s.OutDrops, base.OutDrops), d(s.OutBytes, base.OutBytes)}
}

// IPsecPlane (ipsec.go) runs the IPsec daemons; IDSPlane and CPUBudget are
// the other two things of the machine the emulated firewall drives.

// IDSPlane runs the inspection engines where the products run Suricata
// (the lab's IDSEngines).
type IDSPlane interface {
	// Restart stops every engine and starts those the plan asks for,
	// waiting until each is ready, as Suricata's rc script restart does.
	// instances are what each device's Suricata reads and writes beside
	// its rulesets, by FreeBSD device.
	Restart(ctx context.Context, plan IDSPlan, ports Ports, instances map[string]IDSInstance) error
	// StopAll stops every engine.
	StopAll()
	// Kill ends every engine at once, as a Suricata that crashes: nothing
	// is cleaned up, and none starts again until the next restart.
	Kill()
	// SuricataProcesses lists the running engines as ps shows Suricata
	// processes: pid and command line.
	SuricataProcesses() [][2]string
}

// IDSInstance is what one device's Suricata reads and writes beside its
// rulesets, as files of this machine.
type IDSInstance struct {
	Rules    []string // rules files it loads (pfSense's custom.rules)
	AlertLog string   // its fast log (pfSense's alerts.log), appended to; "" for none
}

// CPUBudget is the CPU budget of the firewall's userspace services (the
// lab's cgroup): the CPUs it stands for and its usage as FreeBSD's
// kern.cp_times prints it.
type CPUBudget interface {
	CPUs() int
	CPTimes(now time.Time) (string, error)
}
