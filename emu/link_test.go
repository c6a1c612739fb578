package emu

import (
	"math"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/google/go-cmp/cmp"
)

func TestParseLinkSpec(t *testing.T) {
	for _, tt := range []struct {
		in, want, media string
		mbit            float64
	}{
		{"", "unlimited", "10Gbase-T <full-duplex>", 0},
		{"unlimited", "unlimited", "10Gbase-T <full-duplex>", 0},
		{"1g", "1g", "1000baseT <full-duplex>", 1000},
		{"1G/full", "1g", "1000baseT <full-duplex>", 1000},
		{"1g/half", "1g/half", "1000baseT <half-duplex>", 1000},
		{"2.5g", "2.5g", "2500Base-T <full-duplex>", 2500},
		{"10g", "10g", "10Gbase-T <full-duplex>", 10000},
		{"100m", "100m", "100baseTX <full-duplex>", 100},
		{"100m@1g", "100m@1g", "100baseTX <full-duplex>", 100},
		{"1g@1g", "1g", "1000baseT <full-duplex>", 1000},
	} {
		l, err := ParseLinkSpec(tt.in)
		if err != nil {
			t.Errorf("ParseLinkSpec(%q): %v", tt.in, err)
			continue
		}
		if l.String() != tt.want || l.Media() != tt.media || l.Speed.Mbit != tt.mbit {
			t.Errorf("ParseLinkSpec(%q) = %s, media %q, %v Mbit/s; want %s, %q, %v", tt.in, l, l.Media(), l.Speed.Mbit, tt.want, tt.media, tt.mbit)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"1gbit", `link speed "1gbit": want one of 100m, 1g, 2.5g, 10g, unlimited (optionally @NIC-SPEED and /half)`},
		{"10m", `link speed "10m": want one of 100m, 1g, 2.5g, 10g, unlimited`},
		{"10g@1g", "a link cannot negotiate more than its NIC lists"},
		{"1g@unlimited", `NIC speed "unlimited"`},
		{"1g/simplex", `duplex "simplex", want half or full`},
		{"unlimited/half", "an unlimited link has no duplex to force"},
	} {
		if _, err := ParseLinkSpec(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseLinkSpec(%q) error = %v, want it to say %q", tt.in, err, tt.want)
		}
	}
}

// TestLinkGoodput: 1 GbE with 1500-byte frames carries 1448 payload bytes
// per 1538 bytes of wire time (frame 1514, FCS, preamble, inter-frame gap).
func TestLinkGoodput(t *testing.T) {
	if got := LinkGoodputMbit(1000, 1500); math.Abs(got-941.48) > 0.01 {
		t.Errorf("LinkGoodputMbit(1000, 1500) = %.2f, want 941.48", got)
	}
	l, _ := ParseLinkSpec("1g")
	// tbf counts the 1514-byte frame, so it runs at 1514/1538 of the line.
	if got, want := l.ShapeMbit(1500), 1000*1514.0/1538; math.Abs(got-want) > 1e-9 {
		t.Errorf("1g ShapeMbit(1500) = %.3f, want %.3f", got, want)
	}
	if got := (LinkSpec{}).ShapeMbit(1500); got != 0 {
		t.Errorf("unlimited ShapeMbit = %v, want 0 (no tbf)", got)
	}
}

func TestPortRateLowerWins(t *testing.T) {
	for _, tt := range []struct{ link, slow, want float64 }{
		{0, 0, 0}, {984, 0, 984}, {0, 500, 500}, {984, 500, 500}, {984, 2000, 984},
	} {
		if got := portRate(tt.link, tt.slow); got != tt.want {
			t.Errorf("portRate(%v, %v) = %v, want %v", tt.link, tt.slow, got, tt.want)
		}
	}
}

// TestEmulatorLinkShapingWithSlowdown: the DUT's ports carry their link's
// rate after boot, a slowdown below it wins, one above it leaves the line
// rate, and a tracking slowdown measures with the link on and caps below it.
func TestEmulatorLinkShapingWithSlowdown(t *testing.T) {
	g, _ := ParseLinkSpec("1g")
	half, _ := ParseLinkSpec("1g/half")
	line := g.ShapeMbit(1500)
	links := func(e *Emulator) {
		e.Links = map[string]LinkSpec{testPorts.WanVeth: g, testPorts.LanVeth: half}
	}
	k := WireFactor(1500)
	goodput := LinkGoodputMbit(1000, 1500)
	for _, tt := range []struct {
		name     string
		slowdown *Slowdown
		wan, lan float64
	}{
		{"no slowdown", nil, line, line},
		{"fixed slowdown below the link", &Slowdown{RateMbit: 500}, 500, 500},
		{"fixed slowdown above the link", &Slowdown{RateMbit: 2000}, line, line},
		// The recording plane's configuration does 1000 up and 800 down:
		// up is held to the link's goodput, down is below it.
		{"tracking slowdown", &Slowdown{Percent: 10}, 0.9 * goodput * k, 0.9 * 800 * k},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dp := newRecordingDataPlane()
			startEmulator(t, dp, testPorts, []Profile{{Version: "2.8.1-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: tt.slowdown}}, links)
			got := dp.Shapes()
			want := map[string]float64{testPorts.WanVeth: tt.wan, testPorts.LanVeth: tt.lan}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) < 1e-6 })); diff != "" {
				t.Errorf("tbf rates after boot (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmulatorMediaLine(t *testing.T) {
	g, _ := ParseLinkSpec("1g")
	half, _ := ParseLinkSpec("2.5g/half")
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles(), func(e *Emulator) {
		e.Links = map[string]LinkSpec{testPorts.WanVeth: g, testPorts.LanVeth: half}
	})
	for dev, want := range map[string]string{
		"igb0": "\tmedia: Ethernet autoselect (1000baseT <full-duplex>)\n",
		"igb1": "\tmedia: Ethernet autoselect (2500Base-T <half-duplex>)\n",
	} {
		if out := f.mustRun(t, "ifconfig "+dev, ""); !strings.Contains(out, want) {
			t.Errorf("ifconfig %s:\n%s\nwant the line %q", dev, out, want)
		}
	}
}

// TestEmulatorSupportedMedia: ifconfig -m lists the NIC's media, best
// first; a 100m@1g link prints 100baseTX on its media line and lists
// 1000baseT, so fwapi's inventory warns that it negotiated below its best.
func TestEmulatorSupportedMedia(t *testing.T) {
	g, _ := ParseLinkSpec("1g")
	slow, _ := ParseLinkSpec("100m@1g")
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles(), func(e *Emulator) {
		e.Links = map[string]LinkSpec{testPorts.WanVeth: g, testPorts.LanVeth: slow}
	})
	out := f.mustRun(t, "ifconfig -a -m", "")
	ifs, err := fwapi.ParseIfconfig(out)
	if err != nil {
		t.Fatal(err)
	}
	var inv fwapi.Inventory
	for _, i := range ifs {
		if fwapi.IsNIC(i.Name) {
			inv.NICs = append(inv.NICs, fwapi.NICInventory{Name: i.Name, Media: i.Media, Best: fwapi.BestMedia(i.Supported)})
		}
	}
	w := inv.LinkWarnings()
	if len(w) != 1 || !strings.Contains(w[0], "igb1") || !strings.Contains(w[0], "below the 1000baseT") {
		t.Errorf("LinkWarnings = %q; want igb1 (100m@1g) below its 1000baseT\n%s", w, out)
	}
	if plain := f.mustRun(t, "ifconfig -a", ""); strings.Contains(plain, "supported media") {
		t.Errorf("ifconfig -a without -m lists supported media:\n%s", plain)
	}
}
