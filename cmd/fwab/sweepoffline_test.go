package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A dry run plans with no firewall at all, and prints the plan the sweep
// (and matrix plan) would run: the default seed comes from the spec.
func TestSweepDryRunOffline(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	spec := "../../examples/t730-packages.yaml"
	missingTargets := filepath.Join(t.TempDir(), "none.yaml")
	dry, stderr, code := fwab(t, "", "sweep", spec, "--dry-run", "--config", cfg, "--targets", missingTargets)
	if code != exitOK {
		t.Fatalf("sweep --dry-run --config: exit %d, %s", code, stderr)
	}
	plan, _, code := fwab(t, "", "matrix", "plan", spec, "--config", cfg)
	if code != exitOK || plan != dry {
		t.Errorf("matrix plan and sweep --dry-run differ:\n%s\n---\n%s", plan, dry)
	}
	again, _, _ := fwab(t, "", "sweep", spec, "--dry-run", "--config", cfg)
	if again != dry {
		t.Errorf("two dry runs of one spec planned differently")
	}
	seeded, _, _ := fwab(t, "", "sweep", spec, "--dry-run", "--config", cfg, "--seed", "12345")
	if !strings.Contains(seeded, "seed 12345") || seeded == dry {
		t.Errorf("--seed 12345 is not used:\n%s", seeded)
	}
	if _, stderr, code := fwab(t, "", "sweep", spec, "--config", cfg); code != exitUsage || !strings.Contains(stderr, "--dry-run") {
		t.Errorf("--config without --dry-run: exit %d, %q", code, stderr)
	}
}

// A dry run writes nothing: a resumed run's database must exist, and is
// only read. A bad --db fails before any firewall is contacted.
func TestSweepDatabaseFirst(t *testing.T) {
	dir := t.TempDir()
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	missing := filepath.Join(dir, "results.db")
	_, stderr, code := fwab(t, "", "sweep", "../../examples/t730-packages.yaml", "--dry-run", "--resume", "5", "--db", missing, "--config", cfg)
	if code != exitUsage || !strings.Contains(stderr, missing) {
		t.Errorf("dry run resuming from a missing database: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("a dry run created %s", missing)
	}
	notes := filepath.Join(dir, "notes.txt")
	os.WriteFile(notes, []byte("not a database\n"), 0o644)
	// The target does not exist: had fwab connected first, that would be the error.
	_, stderr, code = fwab(t, "", "sweep", "../../examples/t730-packages.yaml", "--db", notes, "--target", "nowhere", "--targets", filepath.Join(dir, "t.yaml"))
	if code != exitUsage || !strings.Contains(stderr, notes) || strings.Contains(stderr, "nowhere") {
		t.Errorf("sweep with a bad --db: exit %d, %q; want exit 2 about %s, before the target", code, stderr, notes)
	}
}

// matrix check, matrix plan and a dry run judge a spec's tunnel: section
// alike, its PSK file included, with one message.
func TestTunnelCheckedOffline(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	dir := t.TempDir()
	psk := filepath.Join(dir, "psk")
	tunnel := "tunnel:\n  interface: wan\n  remote_addr: 198.19.0.2\n  local_net: 198.18.1.0/24\n  remote_net: 198.19.1.0/24\n"
	for _, tt := range []struct{ name, tunnel, want string }{
		{"missing PSK file", tunnel + "  psk_file: " + psk + "\n", "tunnel psk_file: " + psk + " does not exist"},
		{"no psk_file", tunnel, "tunnel: psk_file is missing"},
		{"bad interface", strings.Replace(tunnel, "wan", "wan2", 1) + "  psk_file: " + psk + "\n", `tunnel: interface "wan2"`},
	} {
		spec := filepath.Join(dir, "spec.yaml")
		if err := os.WriteFile(spec, []byte("target: lab\naxes:\n  ipsec@fwab: [none, aes128gcm16]\n"+tt.tunnel), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"matrix", "check", spec, "--config", cfg},
			{"matrix", "plan", spec, "--config", cfg},
			{"sweep", spec, "--dry-run", "--config", cfg},
		} {
			if _, stderr, code := fwab(t, "", args...); code != exitUsage || !strings.Contains(stderr, tt.want) {
				t.Errorf("%s: fwab %s: exit %d, %q; want exit 2 with %q", tt.name, strings.Join(args[:2], " "), code, stderr, tt.want)
			}
		}
	}
	if err := os.WriteFile(psk, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("target: lab\naxes:\n  ipsec@fwab: [none, aes128gcm16]\n"+tunnel+"  psk_file: "+psk+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := fwab(t, "", "matrix", "check", spec, "--config", cfg); code != exitOK {
		t.Errorf("a good tunnel: exit %d, %q", code, stderr)
	}
}
