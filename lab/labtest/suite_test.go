package labtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

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
