package lab

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// testFirewall is an emulated firewall of the lab's tests: labtest's, on
// the data plane and ports the test gives it.
type testFirewall struct {
	*labtest.Firewall
	em *emu.Emulator
	fw *fwapi.PfSense // fwapi's driver, opened by linuxLab
}

// startEmulator starts the emulated product on dp; configure runs before
// it boots (it gives the emulator the lab's IPsec, IDS or CPU).
func startEmulator(t *testing.T, product configxml.Flavor, dp emu.DataPlane, ports emu.Ports, profiles []emu.Profile, configure ...func(*emu.Emulator)) *testFirewall {
	t.Helper()
	f := labtest.Start(t, labtest.Options{
		Product: product, DataPlane: dp, Ports: ports, Profiles: profiles,
		RebootDelay: time.Second, SSHVia: emu.NoManagement,
		Configure: func(e *emu.Emulator) {
			for _, c := range configure {
				c(e)
			}
		},
	})
	return &testFirewall{Firewall: f, em: f.Emulator}
}

func (f *testFirewall) mustRun(t *testing.T, cmd, stdin string) string {
	t.Helper()
	out, errOut, code := f.Run(t, cmd, stdin)
	if code != 0 {
		t.Fatalf("%q: exit %d, stderr %q", cmd, code, errOut)
	}
	return out
}

// openDriver opens fwapi's driver of the product, D, from the target; it
// is closed when the test ends.
func openDriver[D fwapi.Firewall](t *testing.T, f *testFirewall) D {
	t.Helper()
	d, ok := f.Open(t).(D)
	if !ok {
		var want D
		t.Fatalf("fwapi.Open(lab) is not the %T driver", want)
	}
	return d
}

// testPorts are the ports of a lab with the prefix tst.
var testPorts = Topology{Prefix: "tst"}.Ports()

// median of a non-empty slice: of an even count, the mean of the middle two.
func median(v []float64) float64 {
	s, n := slices.Sorted(slices.Values(v)), len(v)
	return (s[(n-1)/2] + s[n/2]) / 2
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-6*math.Max(1, math.Abs(want)) }
