// Package labtest starts the emulator of pfSense and OPNsense (package
// emu) for tests, on 127.0.0.1 and a recording data plane (no root needed),
// and holds the driver suite every fwapi driver passes against it. It
// stands on the product model alone: it imports no lab code, so emu's own
// external tests use it too. Only tests import it.
package labtest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
)

// Options choose the emulated firewall: product, version, NIC drivers,
// config, faults (see emu.EmulatorOptions). The zero value is the lab's
// pfSense 2.7.2.
type Options = emu.EmulatorOptions

// Firewall is a running emulator and the target that reaches it.
type Firewall struct {
	*emu.Local
}

// Start starts an emulator for the test; it stops when the test ends.
func Start(t testing.TB, o Options) *Firewall {
	t.Helper()
	l, err := emu.StartLocal(t.TempDir(), o)
	if err != nil {
		t.Fatalf("start the emulator: %v", err)
	}
	t.Cleanup(func() {
		if u := l.UnknownEntries(); len(u) > 0 {
			t.Errorf("the emulator ran entry points the call-graph table lacks (add each to docs/callgraph.md and emu.EntryPoints, with every effect the product has): %q", u)
		}
		if err := l.Close(); err != nil {
			t.Errorf("emulator: %v", err)
		}
	})
	return &Firewall{Local: l}
}

// Product is the flavor emulated.
func (f *Firewall) Product() configxml.Flavor { return configxml.Flavor(f.Target.Flavor) }

// Open opens fwapi's driver for the emulator from its target, as `fwab fw`
// does; it is closed when the test ends.
func (f *Firewall) Open(t testing.TB) fwapi.Firewall {
	t.Helper()
	fw, err := fwapi.Open(context.Background(), f.Target, fwapi.OpenOptions{PfSense: fwapi.PfSenseOptions{RebootGrace: 10 * time.Second}})
	if err != nil {
		t.Fatalf("fwapi.Open(emulator): %v", err)
	}
	t.Cleanup(func() { fw.Close() })
	return fw
}

// SSHConfig reaches the emulator's SSH server with key auth and its pinned
// host key; keepalives are off and reconnects quick.
func (f *Firewall) SSHConfig() fwapi.SSHConfig {
	c := fwapi.SSHSpecConfig(f.Target.Host, f.Target.SSH)
	c.KeepAlive = -1
	c.Retries = 2
	c.Backoff = 20 * time.Millisecond
	return c
}

// File reads a file of the firewall, failing the test when it is absent.
func (f *Firewall) File(t testing.TB, p string) []byte {
	t.Helper()
	data, err := f.ReadFile(p)
	if err != nil {
		t.Fatalf("firewall file: %v", err)
	}
	return data
}

// PutFile writes a file of the firewall.
func (f *Firewall) PutFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := f.WriteFile(p, data); err != nil {
		t.Fatalf("firewall file: %v", err)
	}
}

// StoredConfig is config.xml as the firewall holds it.
func (f *Firewall) StoredConfig(t testing.TB) []byte {
	t.Helper()
	return f.File(t, "/conf/config.xml")
}

// Run runs one command line over a fresh SSH connection, as a person at
// the firewall's shell would.
func (f *Firewall) Run(t testing.TB, cmd, stdin string) (stdout, stderr string, code int) {
	t.Helper()
	c, err := fwapi.DialSSH(context.Background(), f.SSHConfig())
	if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	defer c.Close()
	out, errOut, code, err := c.Run(context.Background(), cmd, strings.NewReader(stdin))
	if err != nil {
		t.Fatalf("ssh %q: %v", cmd, err)
	}
	return string(out), string(errOut), code
}

// APITarget is a target that reaches the emulated OPNsense through its
// REST API only (no ssh section), with copies of the API key, secret and CA
// files the test may change.
func (f *Firewall) APITarget(t testing.TB) *fwapi.Target {
	t.Helper()
	if f.Target.API == nil {
		t.Fatalf("the emulated %s has no REST API", f.Product())
	}
	api := *f.Target.API
	dir := t.TempDir()
	for _, p := range []*string{&api.KeyFile, &api.SecretFile, &api.CAFile} {
		data, err := os.ReadFile(*p)
		if err != nil {
			t.Fatal(err)
		}
		*p = filepath.Join(dir, filepath.Base(*p))
		if err := os.WriteFile(*p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &fwapi.Target{Name: f.Target.Name, Flavor: f.Target.Flavor, Host: f.Target.Host, API: &api}
}

// ApplyKnobs changes knobs the way a sweep does: read the config, set the
// knobs with configxml, write it, apply the diff.
func ApplyKnobs(t testing.TB, fw fwapi.Firewall, assignments ...string) {
	t.Helper()
	ApplyKnobsAt(t, fw, "", assignments...)
}

// ApplyKnobsAt is ApplyKnobs for a firewall running product version
// product, as `fwab fw apply` does with the version it reads (configxml
// otherwise infers the version from the config).
func ApplyKnobsAt(t testing.TB, fw fwapi.Firewall, product string, assignments ...string) {
	t.Helper()
	if err := EditAndApply(t, fw, product, func(c *configxml.Config) error { return c.SetAll(assignments) }); err != nil {
		t.Fatalf("%q: %v", assignments, err)
	}
}

// EditAndApply edits the firewall's config with configxml.Edit (for the
// product version given, "" to infer it), writes it and applies the
// changes; it returns Apply's error.
func EditAndApply(t testing.TB, fw fwapi.Firewall, product string, edit func(*configxml.Config) error) error {
	t.Helper()
	ctx := context.Background()
	data, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next, changes, err := configxml.Edit(data, product, edit)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, next, "lab test"); err != nil {
		t.Fatalf("WriteConfig: %v", err)
	}
	return fw.Apply(ctx, changes)
}
