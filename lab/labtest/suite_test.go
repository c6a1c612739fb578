package labtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/lab"
)

// TestDriverSuite runs the driver suite against every product version the
// knobs know.
func TestDriverSuite(t *testing.T) {
	for _, v := range Versions {
		t.Run(string(v.Product)+"-"+strings.TrimSuffix(v.Version, "-RELEASE"), func(t *testing.T) {
			t.Parallel()
			s := &Suite{Options: Options{Product: v.Product, Version: v.Version}}
			s.Run(t)
		})
	}
}

// TestDriverSuiteOnNamespaces runs the suite against an OPNsense whose
// data plane is the lab's real one (network namespaces, nftables,
// ethtool): it needs root and the lab tools.
func TestDriverSuiteOnNamespaces(t *testing.T) {
	if os.Geteuid() != 0 || lab.CheckTools() != nil {
		t.Skip("needs root and the lab tools for network namespaces")
	}
	s := &Suite{
		Options: Options{Product: configxml.OPNsense},
		Setup: func(t *testing.T, o *Options) {
			b := make([]byte, 3)
			if _, err := rand.Read(b); err != nil {
				t.Fatal(err)
			}
			topo := lab.Topology{Prefix: "fws" + hex.EncodeToString(b)}
			t.Cleanup(func() {
				if err := topo.Destroy(context.Background()); err != nil {
					t.Errorf("destroy %s: %v", topo.Prefix, err)
				}
			})
			if err := topo.Create(context.Background()); err != nil {
				t.Fatal(err)
			}
			o.DataPlane = &lab.LinuxDataPlane{Topo: topo, TmpDir: t.TempDir()}
			o.Ports = topo.Ports()
		},
	}
	s.Run(t)
}

// TestOPNsenseUpgradeFastReboot: an OPNsense that reboots into its upgrade
// between two of the driver's polls (the in-process emulator's reboot
// takes 300 ms, the poll comes every 5 s) comes back without the progress
// file; the upgrade must still end, on the new version, not wait until its
// timeout for a status that no longer comes.
func TestOPNsenseUpgradeFastReboot(t *testing.T) {
	f := Start(t, Options{Product: configxml.OPNsense, Version: "26.1.2"})
	fw := f.Open(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var lines []string
	if err := fw.Upgrade(ctx, "26.7.1", func(l string) { lines = append(lines, l) }); err != nil {
		t.Fatalf("Upgrade: %v (progress %q)", err, lines)
	}
	if info, err := fw.Info(t.Context()); err != nil || info.Version != "26.7.1" {
		t.Errorf("after the upgrade: %+v, %v; want 26.7.1", info, err)
	}
}
