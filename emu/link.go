package emu

import (
	"fmt"
	"strings"
)

// A LinkSpeed is a line rate an emulated NIC of the DUT can have, and the
// subtype FreeBSD's ifconfig prints for it on the media line.
type LinkSpeed struct {
	Name  string  // as --link takes it: 100m, 1g, 2.5g, 10g, unlimited
	Mbit  float64 // line rate; 0: unlimited (the veth's own speed)
	Media string  // ifconfig media subtype
}

// LinkSpeeds are the speeds a lab interface can have. unlimited leaves the
// veth unshaped; its media line stays what the lab always printed.
var LinkSpeeds = []LinkSpeed{
	{Name: "100m", Mbit: 100, Media: "100baseTX"},
	{Name: "1g", Mbit: 1000, Media: "1000baseT"},
	{Name: "2.5g", Mbit: 2500, Media: "2500Base-T"},
	{Name: "10g", Mbit: 10000, Media: "10Gbase-T"},
	{Name: "unlimited", Media: "10Gbase-T"},
}

// LinkSpec is one DUT interface's emulated NIC: its speed and duplex, and
// the best speed the NIC lists when the link negotiated less. The zero
// value is unlimited, full duplex. Its text form is the speed's name, with
// @NIC for a faster NIC and /half for half duplex (100m@1g/half).
type LinkSpec struct {
	Speed      LinkSpeed
	NIC        LinkSpeed // the best the NIC lists; zero: Speed
	HalfDuplex bool
}

// linkSpeedNames lists the valid speeds for error messages.
func linkSpeedNames() string {
	names := make([]string, len(LinkSpeeds))
	for i, s := range LinkSpeeds {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}

// ParseLinkSpec reads a link: a speed (100m, 1g, 2.5g, 10g, unlimited),
// optionally followed by /half or /full. Empty is unlimited.
func ParseLinkSpec(s string) (LinkSpec, error) {
	if s == "" {
		return LinkSpec{Speed: LinkSpeeds[len(LinkSpeeds)-1]}, nil
	}
	speed, duplex, hasDuplex := strings.Cut(strings.ToLower(s), "/")
	speed, nic, hasNIC := strings.Cut(speed, "@")
	var l LinkSpec
	lookup := func(name string) (LinkSpeed, bool) {
		for _, v := range LinkSpeeds {
			if v.Name == name {
				return v, true
			}
		}
		return LinkSpeed{}, false
	}
	var found bool
	if l.Speed, found = lookup(speed); !found {
		return LinkSpec{}, fmt.Errorf("link speed %q: want one of %s (optionally @NIC-SPEED and /half)", s, linkSpeedNames())
	}
	if hasNIC {
		if l.NIC, found = lookup(nic); !found || l.NIC.Mbit == 0 {
			return LinkSpec{}, fmt.Errorf("link %q: NIC speed %q, want one of %s but unlimited", s, nic, linkSpeedNames())
		}
		if l.Speed.Mbit == 0 || l.NIC.Mbit < l.Speed.Mbit {
			return LinkSpec{}, fmt.Errorf("link %q: a link cannot negotiate more than its NIC lists; write LINK@NIC with LINK at most NIC (100m@1g)", s)
		}
		if l.NIC == l.Speed {
			l.NIC = LinkSpeed{}
		}
	}
	if hasDuplex {
		switch duplex {
		case "half":
			l.HalfDuplex = true
		case "full":
		default:
			return LinkSpec{}, fmt.Errorf("link %q: duplex %q, want half or full", s, duplex)
		}
	}
	if l.HalfDuplex && l.Speed.Mbit == 0 {
		return LinkSpec{}, fmt.Errorf("link %q: an unlimited link has no duplex to force; give a speed (1g/half)", s)
	}
	return l, nil
}

func (l LinkSpec) String() string {
	name := l.Speed.Name
	if name == "" {
		name = "unlimited"
	}
	if l.NIC.Name != "" {
		name += "@" + l.NIC.Name
	}
	if l.HalfDuplex {
		return name + "/half"
	}
	return name
}

// MarshalText writes the text form (lab.json).
func (l LinkSpec) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// UnmarshalText reads the text form.
func (l *LinkSpec) UnmarshalText(b []byte) error {
	v, err := ParseLinkSpec(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Unlimited reports whether the link is left unshaped.
func (l LinkSpec) Unlimited() bool { return l.Speed.Mbit == 0 }

// Media is what ifconfig prints in the media line's parentheses, as
// pfSense's get_interface_info reads it back
// (`media: Ethernet autoselect (1000baseT <full-duplex>)`).
func (l LinkSpec) Media() string {
	sub := l.Speed.Media
	if sub == "" {
		sub = LinkSpeeds[len(LinkSpeeds)-1].Media
	}
	if l.HalfDuplex {
		return sub + " <half-duplex>"
	}
	return sub + " <full-duplex>"
}

// SupportedMedia is what `ifconfig -m` lists under "supported media:" for
// the NIC, best first: every lab speed up to the NIC's, each in both
// duplexes (unlimited lists 10 GbE, the media line it prints).
func (l LinkSpec) SupportedMedia() []string {
	best := l.NIC
	if best.Name == "" {
		best = l.Speed
	}
	if best.Mbit == 0 {
		best = LinkSpeeds[len(LinkSpeeds)-2]
	}
	var out []string
	for i := len(LinkSpeeds) - 1; i >= 0; i-- {
		v := LinkSpeeds[i]
		if v.Mbit == 0 || v.Mbit > best.Mbit {
			continue
		}
		out = append(out, v.Media+" mediaopt full-duplex", v.Media+" mediaopt half-duplex")
	}
	return out
}
