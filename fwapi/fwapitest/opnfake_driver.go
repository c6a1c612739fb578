package fwapitest

import (
	"context"
	"testing"

	"github.com/fwab/fwab/fwapi"
)

// NewOPNsenseFirewall starts an OPNsense fake and connects the real driver to
// it, SSH side included, for tests that exercise fwapi.Firewall generically.
// The driver is closed when the test ends.
func NewOPNsenseFirewall(t testing.TB, opts OPNsenseOptions, driver fwapi.OPNsenseOptions) (*fwapi.OPNsense, *OPNsense) {
	t.Helper()
	fake := NewOPNsense(t, opts)
	fw, err := fwapi.NewOPNsense(context.Background(), fake.Target(), fake.Shell(), driver)
	if err != nil {
		t.Fatalf("fwapi.NewOPNsense: %v", err)
	}
	t.Cleanup(func() { fw.Close() })
	return fw, fake
}
