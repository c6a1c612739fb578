package emu

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

//go:embed assets/firmware.yaml
var defaultProfiles []byte

// Profile is one firmware version the emulated pfSense can run.
type Profile struct {
	Version  string    `yaml:"version"`
	FreeBSD  string    `yaml:"freebsd,omitempty"` // kernel release uname prints
	Slowdown *Slowdown `yaml:"slowdown,omitempty"`
}

// Slowdown is an injected, documented forwarding slowdown: tc tbf caps on
// the DUT's two interfaces, so the probes measure real traffic behaviour.
// percent alone is a proportional slowdown: after every boot and every
// change of the data plane the lab measures the running configuration's
// goodput per direction (caps removed) and caps each direction at
// (100-percent) % of it. rate_mbit is a fixed wire-rate cap; percent with
// baseline_mbit a fixed cap at (100-percent) % of that goodput. See Caps.
type Slowdown struct {
	RateMbit     float64 `yaml:"rate_mbit,omitempty"`
	Percent      float64 `yaml:"percent,omitempty"`
	BaselineMbit float64 `yaml:"baseline_mbit,omitempty"`
}

// DefaultProfiles returns the embedded profiles: 2.7.2, 2.8.0, and 2.8.1
// with a 10 % slowdown.
func DefaultProfiles() []Profile {
	p, err := ParseProfiles(bytes.NewReader(defaultProfiles))
	if err != nil {
		panic("lab: embedded firmware profiles: " + err.Error())
	}
	return p
}

// DefaultProfilesYAML is the embedded profiles file, a starting point for
// --firmware-profiles.
func DefaultProfilesYAML() []byte { return append([]byte(nil), defaultProfiles...) }

// ParseProfiles reads a profiles file: a top-level "profiles" list, oldest
// first. Unknown fields are errors.
func ParseProfiles(r io.Reader) ([]Profile, error) {
	var f struct {
		Profiles []Profile `yaml:"profiles"`
	}
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("firmware profiles: the file is empty; it needs a 'profiles:' list of {version: ...}")
		}
		return nil, fmt.Errorf("firmware profiles: %w", err)
	}
	if len(f.Profiles) == 0 {
		return nil, fmt.Errorf("firmware profiles: no profiles; add a 'profiles:' list of {version: ...}")
	}
	seen := map[string]bool{}
	for i, p := range f.Profiles {
		where := fmt.Sprintf("firmware profiles: profile %d", i+1)
		if p.Version == "" {
			return nil, fmt.Errorf("%s: version is empty", where)
		}
		if strings.ContainsAny(p.Version, " \t\n'\"`$;&|<>\\") {
			return nil, fmt.Errorf("%s: version %q has spaces or shell characters", where, p.Version)
		}
		if seen[p.Version] {
			return nil, fmt.Errorf("%s: version %s is listed twice", where, p.Version)
		}
		seen[p.Version] = true
		if s := p.Slowdown; s != nil {
			switch {
			case s.RateMbit < 0 || s.Percent < 0 || s.BaselineMbit < 0:
				return nil, fmt.Errorf("%s (%s): slowdown values must not be negative", where, p.Version)
			case s.RateMbit > 0 && s.Percent > 0:
				return nil, fmt.Errorf("%s (%s): slowdown has both rate_mbit and percent; give one", where, p.Version)
			case s.RateMbit == 0 && s.Percent == 0:
				return nil, fmt.Errorf("%s (%s): slowdown needs rate_mbit or percent", where, p.Version)
			case s.Percent >= 100:
				return nil, fmt.Errorf("%s (%s): slowdown percent %v must be below 100", where, p.Version, s.Percent)
			}
		}
		if f.Profiles[i].FreeBSD == "" {
			f.Profiles[i].FreeBSD = "14.0-CURRENT"
		}
	}
	return f.Profiles, nil
}

// LoadProfiles reads a profiles file; an empty path means the embedded one.
func LoadProfiles(path string) ([]Profile, error) {
	if path == "" {
		return DefaultProfiles(), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := ParseProfiles(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// profile returns the running profile and its index (-1 when /etc/version
// names none).
func (e *Emulator) profile() (Profile, int) {
	v := e.Version()
	for i, p := range e.Profiles {
		if p.Version == v {
			return p, i
		}
	}
	return Profile{Version: v, FreeBSD: "14.0-CURRENT"}, -1
}

// SlowdownState is what the lab last did for the running profile's
// slowdown, kept in /var/db/fwab-slowdown.json so tests and people can see
// the measured rates and the caps that came out of them.
type SlowdownState struct {
	Version     string    `json:"version"`
	Percent     float64   `json:"percent,omitempty"`
	Tracking    bool      `json:"tracking"`
	UpMbit      float64   `json:"up_mbit,omitempty"`   // goodput client to server, caps removed: median of UpSamples
	DownMbit    float64   `json:"down_mbit,omitempty"` // goodput server to client: median of DownSamples
	UpSamples   []float64 `json:"up_samples,omitempty"`
	DownSamples []float64 `json:"down_samples,omitempty"`
	MTU         int       `json:"mtu"`
	WanCapMbit  float64   `json:"wan_cap_mbit"` // slowdown's wire rate on the DUT's WAN port (upload egress); 0: none
	LanCapMbit  float64   `json:"lan_cap_mbit"` // slowdown's wire rate on the DUT's LAN port (download egress)
	// WanRateMbit and LanRateMbit are the tbf rates set: the lower of the
	// cap and the port's link (portRate); 0: unshaped.
	WanRateMbit float64 `json:"wan_rate_mbit"`
	LanRateMbit float64 `json:"lan_rate_mbit"`
	Measurement string  `json:"measurement,omitempty"`
}

// SlowdownStateFile is where the emulator records SlowdownState.
const SlowdownStateFile = "/var/db/fwab-slowdown.json"

// Tracking reports whether the slowdown follows the running configuration:
// percent alone, re-measured after every change.
func (s Slowdown) Tracking() bool { return s.RateMbit == 0 && s.BaselineMbit == 0 }

// WireFactor converts TCP goodput to the frame rate tbf counts for a path
// of the given MTU: each full segment carries MTU-52 bytes of payload (IPv4
// 20, TCP 20, timestamps 12) in an MTU+14 byte Ethernet frame.
func WireFactor(mtu int) float64 {
	mtu = pathMTUOrDefault(mtu)
	return float64(mtu+14) / float64(mtu-52)
}

// ethernetWireOverhead is what a real Ethernet NIC puts on the wire per
// frame beyond the bytes tbf counts (MAC header and payload): preamble and
// start delimiter 8, FCS 4, inter-frame gap 12.
const ethernetWireOverhead = 8 + 4 + 12

// LinkGoodputMbit is the TCP goodput a line rate carries at the MTU: each
// full segment's MTU-52 payload bytes take MTU+14+24 bytes of wire time
// (941.5 Mbit/s at 1 GbE and MTU 1500).
func LinkGoodputMbit(lineMbit float64, mtu int) float64 {
	mtu = pathMTUOrDefault(mtu)
	return lineMbit * float64(mtu-52) / float64(mtu+14+ethernetWireOverhead)
}

// ShapeMbit is the tbf rate that holds TCP at the link's line-rate goodput:
// LinkGoodputMbit times WireFactor, so the link uses the slowdown's shaper
// and its frame accounting (0 for unlimited). It is exact for full-size
// frames, the probes' TCP streams; smaller frames pass at a higher packet
// rate than a real NIC's (tbf cannot add a per-frame overhead to the
// segments of a GSO packet, which it counts as one).
func (l LinkSpec) ShapeMbit(mtu int) float64 {
	if l.Unlimited() {
		return 0
	}
	return LinkGoodputMbit(l.Speed.Mbit, mtu) * WireFactor(mtu)
}

// portRate is the tbf rate of a DUT port whose link allows linkMbit and
// whose firmware slowdown caps it at capMbit (0: none): one tbf per port,
// at the lower of the two, since a port can only go as fast as its
// tightest limit. So a 10 % tracking slowdown on a 1 GbE link caps at 90 %
// of what the configuration does at line rate, and a fixed 2000 Mbit/s
// slowdown leaves a 1 GbE port at its line rate.
func portRate(linkMbit, capMbit float64) float64 {
	switch {
	case linkMbit == 0:
		return capMbit
	case capMbit == 0:
		return linkMbit
	}
	return math.Min(linkMbit, capMbit)
}

// shapePorts sets the DUT's ports: WAN and LAN at portRate of their link
// and the slowdown caps given (0: no slowdown cap), every other port the
// lab defines at its link's rate. It returns the WAN and LAN rates set.
func (e *Emulator) shapePorts(ctx context.Context, wanCap, lanCap float64, mtu int) (wan, lan float64, err error) {
	wan = portRate(e.Links[e.Ports.WanVeth].ShapeMbit(mtu), wanCap)
	lan = portRate(e.Links[e.Ports.LanVeth].ShapeMbit(mtu), lanCap)
	if err := e.DataPlane.Shape(ctx, e.Ports.LanVeth, lan); err != nil {
		return 0, 0, err
	}
	if err := e.DataPlane.Shape(ctx, e.Ports.WanVeth, wan); err != nil {
		return 0, 0, err
	}
	for _, v := range slices.Sorted(maps.Keys(e.Links)) {
		if v != e.Ports.WanVeth && v != e.Ports.LanVeth {
			if err := e.DataPlane.Shape(ctx, v, e.Links[v].ShapeMbit(mtu)); err != nil {
				return 0, 0, err
			}
		}
	}
	return wan, lan, nil
}

// pathMTUOrDefault is 1500 for an MTU too small to be a real path's.
func pathMTUOrDefault(mtu int) int {
	if mtu < 576 {
		return 1500
	}
	return mtu
}

// Caps returns the tbf wire rates for the DUT's WAN port (upload egress)
// and LAN port (download egress). upMbit and downMbit are the goodputs the
// running configuration reaches without caps (used when Tracking); a
// direction whose rate is unknown (0) gets no cap.
//   - rate_mbit: both ports at that wire rate, whatever the configuration;
//   - percent with baseline_mbit: both at the wire rate that carries
//     (100-percent) % of baseline_mbit as goodput;
//   - percent alone: each port at the wire rate that carries (100-percent) %
//     of its direction's measured goodput, so every configuration loses
//     percent % in both directions.
func (s Slowdown) Caps(upMbit, downMbit float64, mtu int) (wan, lan float64) {
	keep := (100 - s.Percent) / 100
	switch {
	case s.RateMbit > 0:
		return s.RateMbit, s.RateMbit
	case s.BaselineMbit > 0:
		c := s.BaselineMbit * keep * WireFactor(mtu)
		return c, c
	}
	return upMbit * keep * WireFactor(mtu), downMbit * keep * WireFactor(mtu)
}
