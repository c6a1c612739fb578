package emu

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
)

func bectl(t *testing.T, e *Emulator, line string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := e.Exec(t.Context(), line, strings.NewReader(""), &out, &errOut)
	return out.String() + errOut.String(), code
}

// TestBectl: boot environments as bectl keeps them. A clone keeps the
// firmware and config.xml it was made from; activate -t boots it once, so
// the second reboot returns to the pool's bootfs; the shared folders stay
// the same across the switch.
func TestBectl(t *testing.T) {
	for _, flavor := range []configxml.Flavor{configxml.PfSense, configxml.OPNsense} {
		t.Run(string(flavor), func(t *testing.T) {
			e, err := NewEmulator(t.Context(), t.TempDir(), EmulatorOptions{Product: flavor})
			if err != nil {
				t.Fatal(err)
			}
			if out, code := bectl(t, e, "bectl check"); code != 0 {
				t.Fatalf("bectl check on the lab's ZFS root: exit %d %s", code, out)
			}
			out, _ := bectl(t, e, "bectl list -H")
			if f := strings.Split(strings.TrimSpace(out), "\t"); len(f) != 5 || f[0] != "default" || f[1] != "NR" || f[2] != "/" {
				t.Fatalf("bectl list -H = %q: want default, NR, / in five tab-separated columns", out)
			}
			oldVersion := e.Version()
			if err := e.WriteFile("/var/db/shared-marker", []byte("kept\n")); err != nil {
				t.Fatal(err)
			}
			if out, code := bectl(t, e, "bectl create -r "+oldVersion); code != 0 {
				t.Fatalf("bectl create: exit %d %s", code, out)
			}
			if _, code := bectl(t, e, "bectl create -r "+oldVersion); code == 0 {
				t.Error("a second environment of the same name was created")
			}
			// The booted environment moves on: another version, another config.
			newVersion := e.Profiles[len(e.Profiles)-1].Version
			if err := e.writeVersion(e.Profiles[len(e.Profiles)-1]); err != nil {
				t.Fatal(err)
			}
			cfgPath := "/conf/config.xml"
			before, err := e.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.WriteFile(cfgPath, bytes.Replace(before, []byte("<hostname>"), []byte("<hostname>new"), 1)); err != nil {
				t.Fatal(err)
			}
			if out, code := bectl(t, e, "bectl activate -t "+oldVersion); code != 0 || !strings.Contains(out, "for next boot") {
				t.Fatalf("bectl activate -t: exit %d %q", code, out)
			}
			out, _ = bectl(t, e, "bectl list -H")
			if !strings.Contains(out, oldVersion+"\tR\t") || !strings.Contains(out, "default\tN\t") {
				t.Errorf("after activate -t: %q, want the clone R (next boot) and default N", out)
			}

			e.Reboot(t.Context())
			if got := e.Version(); got != oldVersion {
				t.Errorf("booted the clone: version %s, want %s", got, oldVersion)
			}
			if cfg, _ := e.ReadFile(cfgPath); !bytes.Equal(cfg, before) {
				t.Error("the clone's config.xml is not the one it was made from")
			}
			if m, err := e.ReadFile("/var/db/shared-marker"); err != nil || string(m) != "kept\n" {
				t.Errorf("/var/db is shared between environments: %q, %v", m, err)
			}
			out, _ = bectl(t, e, "bectl list -H")
			if !strings.Contains(out, oldVersion+"\tN\t/") || !strings.Contains(out, "default\tR\t") {
				t.Errorf("booted once into the clone: %q, want it N and default R", out)
			}
			// A mounted environment shows its own files.
			out, code := bectl(t, e, "bectl mount default")
			at := strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
			if code != 0 || !strings.HasPrefix(at, "/tmp/") {
				t.Fatalf("bectl mount: exit %d %q", code, out)
			}
			if v, err := e.ReadFile(at + e.versionFile()); err != nil || !strings.Contains(string(v), newVersion) {
				t.Errorf("default's version file through its mount: %q, %v; want %s", v, err, newVersion)
			}
			// Its config: on pfSense /conf is an absolute link to
			// /cf/conf, so through a mount conf/ is the running system's
			// and cf/conf/ the environment's own.
			ownCfg := at + "/conf/config.xml"
			if flavor == configxml.PfSense {
				ownCfg = at + "/cf/conf/config.xml"
				if cfg, err := e.ReadFile(at + "/conf/config.xml"); err != nil || !bytes.Equal(cfg, before) {
					t.Errorf("pfSense: MOUNT/conf/config.xml is not the running system's config (the link /conf → /cf/conf is absolute): %v", err)
				}
			}
			if cfg, err := e.ReadFile(ownCfg); err != nil || !bytes.Contains(cfg, []byte("<hostname>new")) {
				t.Errorf("%s: not default's own config.xml: %v", ownCfg, err)
			}
			if _, code := bectl(t, e, "bectl umount default"); code != 0 {
				t.Error("bectl umount failed")
			}
			if _, err := e.ReadFile(at + e.versionFile()); err == nil {
				t.Errorf("%s still shows the environment after bectl umount", at)
			}
			if _, code := bectl(t, e, "bectl destroy default"); code == 0 {
				t.Error("the pool's bootfs was destroyed")
			}

			e.Reboot(t.Context())
			if got := e.Version(); got != newVersion {
				t.Errorf("the second reboot: version %s, want the bootfs's %s (activate -t is for one boot)", got, newVersion)
			}
			if cfg, _ := e.ReadFile(cfgPath); !bytes.Contains(cfg, []byte("<hostname>new")) {
				t.Error("back on default: its config.xml is not the changed one")
			}

			if err := e.SetUFS(true); err != nil {
				t.Fatal(err)
			}
			if out, code := bectl(t, e, "bectl list -H"); code == 0 || !strings.Contains(out, "libbe_init") {
				t.Errorf("bectl on UFS: exit %d %q, want libbe_init's failure", code, out)
			}
		})
	}
}

// TestZfsList: zfs list names a path's dataset, -r adds its children
// (pfSense's cf and var_db_pkg under each environment; none on OPNsense),
// and an unknown dataset or option is refused as zfs refuses it.
func TestZfsList(t *testing.T) {
	for flavor, want := range map[configxml.Flavor]string{
		configxml.PfSense:  "zroot/ROOT/default\t1299227607\nzroot/ROOT/default/cf\t3145728\nzroot/ROOT/default/var_db_pkg\t42991616\n",
		configxml.OPNsense: "zroot/ROOT/default\t1299227607\n",
	} {
		t.Run(string(flavor), func(t *testing.T) {
			e, err := NewEmulator(t.Context(), t.TempDir(), EmulatorOptions{Product: flavor})
			if err != nil {
				t.Fatal(err)
			}
			if out, code := bectl(t, e, "zfs list -Hp -r -t filesystem -o name,referenced /"); code != 0 || out != want {
				t.Errorf("zfs list -r -t filesystem / = %d %q, want %q", code, out, want)
			}
			if out, code := bectl(t, e, "zfs list -H -t snapshot -o name /"); code != 0 || out != "" {
				t.Errorf("zfs list -t snapshot / = %d %q, want no snapshots", code, out)
			}
			if out, code := bectl(t, e, "zfs list -t pool /"); code != 2 || !strings.Contains(out, "invalid type 'pool'") {
				t.Errorf("zfs list -t pool = %d %q, want the type refused", code, out)
			}
			if out, code := bectl(t, e, "zfs list -Hp -o name /"); code != 0 || out != "zroot/ROOT/default\n" {
				t.Errorf("zfs list / = %d %q, want the booted environment alone", code, out)
			}
			if out, code := bectl(t, e, "zfs list zroot/nothing"); code != 1 || !strings.Contains(out, "dataset does not exist") {
				t.Errorf("zfs list of an unknown dataset = %d %q", code, out)
			}
			if out, code := bectl(t, e, "zfs list -x"); code != 2 || !strings.Contains(out, "invalid option 'x'") {
				t.Errorf("zfs list -x = %d %q", code, out)
			}
		})
	}
}
