package emu

// The lab's fixed addressing (all in 198.18.0.0/15).
const (
	ClientAddr = "198.18.1.10" // LAN client, in <prefix>-lan
	DUTLanAddr = "198.18.1.1"  // DUT, LAN side
	DUTWanAddr = "198.19.0.1"  // DUT, WAN side
	PeerAddr   = "198.19.0.2"  // upstream router, DUT side
	PeerWanGW  = "198.19.1.1"  // upstream router, server side
	ServerAddr = "198.19.1.10" // WAN server, in <prefix>-wan

	LanNet    = "198.18.1.0/24"
	WanNet    = "198.19.0.0/24"
	ServerNet = "198.19.1.0/24"

	// The second link (Topology.Pairs 2): its own client and server on
	// two more DUT ports, opt1 and opt2, routed by the DUT alone.
	Client2Addr = "198.18.2.10" // in <prefix>-lan2
	DUTLan2Addr = "198.18.2.1"  // DUT, opt1
	DUTWan2Addr = "198.19.2.1"  // DUT, opt2
	Server2Addr = "198.19.2.10" // in <prefix>-wan2
	Lan2Net     = "198.18.2.0/24"
	Server2Net  = "198.19.2.0/24"
)
