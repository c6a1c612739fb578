package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/internal/golden"
	"github.com/fwab/fwab/lab/labtest"
)

// TestSwanctlConfGolden pins the swanctl.conf of both sides for each
// proposal kind: go test ./lab -run TestSwanctlConfGolden -update rewrites.
func TestSwanctlConfGolden(t *testing.T) {
	for _, tt := range []struct{ product, value string }{
		{"2.7.2", "aes128gcm16"},
		{"2.7.2", "aes256-sha256"},
		{"2.7.2", "chacha20poly1305"},
		{"2.6.0", "3des-sha1"},
	} {
		t.Run(tt.value, func(t *testing.T) {
			c, err := configxml.LoadBytes(emu.FactoryConfigAt(configxml.PfSense, tt.product+"-RELEASE", emu.NICs{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.SetProduct(tt.product); err != nil {
				t.Fatal(err)
			}
			if err := c.Set("ipsec@fwab", tt.value); err != nil {
				t.Fatal(err)
			}
			tun, _ := emu.LabTunnel(c)
			if tun == nil {
				t.Fatalf("emu.LabTunnel: no tunnel after ipsec@fwab=%s", tt.value)
			}
			conn := emu.ConnName(tun)
			got := "# dut\n" + string(swanctlConf(dutSide(conn, tun))) + "# peer\n" + string(swanctlConf(peerSide(conn, tun)))
			if strings.Contains(got, tun.PSK) {
				t.Errorf("swanctl.conf carries the PSK in clear; want it base64 (0s…)")
			}
			golden.File(t, "swanctl-"+tt.value+".conf", []byte(got))
		})
	}
}

// negotiated is what swanctl --list-sas shows for each ESP proposal.
var negotiated = map[string]struct{ encr, integ string }{
	"aes128gcm16": {"AES_GCM_16-128", ""},
	"aes256gcm16": {"AES_GCM_16-256", ""},
	"aes128-sha1": {"AES_CBC-128", "HMAC_SHA1_96"},
	// OPNsense offers SHA-1 with AES-CBC only with a DH group (PFS).
	"aes128-sha1-modp2048": {"AES_CBC-128", "HMAC_SHA1_96"},
	"aes256-sha256":        {"AES_CBC-256", "HMAC_SHA2_256_128"},
	"3des-sha1":            {"3DES_CBC", "HMAC_SHA1_96"},
	"chacha20poly1305":     {"CHACHA20_POLY1305", ""},
}

func dutRoutes(t *testing.T, topo Topology) string {
	t.Helper()
	out, err := run(context.Background(), nil, "ip", "-n", topo.Namespace("dut"), "route", "show", emu.ServerNet)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// TestIPsecCiphersThroughTheLab applies every cipher through fwapi's
// pfSense driver to a lab with real strongSwan charons and checks the
// negotiated algorithms, that traffic can only pass through the tunnel,
// that none restores plain routing, that a reboot (upgrade 2.6.0 → 2.7.2)
// brings the tunnel back, and that 3DES is clearly slower than AES-GCM.
func TestIPsecCiphersThroughTheLab(t *testing.T) {
	requireRoot(t)
	profiles := []emu.Profile{{Version: "2.6.0-RELEASE", FreeBSD: "12.3-STABLE"}, {Version: "2.7.2-RELEASE", FreeBSD: "14.0-CURRENT"}}
	ss := &StrongSwan{Dir: t.TempDir()}
	f, topo := linuxLab(t, profiles, func(e *emu.Emulator, topo Topology) {
		ss.Topo, ss.FirewallRoot = topo, e.Root
		e.IPsec = ss
	})
	t.Cleanup(func() { _ = ss.Stop(context.Background()) }) // before the namespaces go
	plain := dutRoutes(t, topo)
	if !strings.Contains(plain, "via "+emu.PeerAddr) {
		t.Fatalf("plain route before any tunnel: %q, want via %s", plain, emu.PeerAddr)
	}

	// With AES-NI (crypto.hardware=aesni, applied by a reboot), 3DES
	// against AES-GCM, interleaved, median of 3 runs of 2 s.
	setCrypto(t, f, "aesni")
	var gcm, des []float64
	for range 3 {
		for _, arm := range []struct {
			value string
			into  *[]float64
		}{{"aes128gcm16", &gcm}, {"3des-sha1", &des}} {
			applyIPsecKnob(t, f.fw, arm.value)
			checkSA(t, f.fw, arm.value)
			v, err := IperfMbit(context.Background(), topo, 2, false)
			if err != nil {
				t.Fatalf("iperf3 through ipsec@fwab=%s: %v", arm.value, err)
			}
			*arm.into = append(*arm.into, v)
		}
	}
	if r := dutRoutes(t, topo); strings.Contains(r, "via "+emu.PeerAddr) {
		t.Errorf("with the tunnel up the DUT still routes %s in plaintext: %q", emu.ServerNet, r)
	}
	sa := checkSA(t, f.fw, "3des-sha1")
	if sa.BytesOut == 0 {
		t.Errorf("3des-sha1 SA carried no bytes after iperf3: traffic did not pass through the tunnel")
	}
	mg, md := median(gcm), median(des)
	t.Logf("median Mbit/s: aes128gcm16 %.0f %v, 3des-sha1 %.0f %v", mg, gcm, md, des)
	if md > 0.75*mg {
		t.Errorf("3des-sha1 median %.0f Mbit/s is not clearly below aes128gcm16's %.0f (want under 75 %%)", md, mg)
	}

	for _, v := range []string{"aes256gcm16", "aes128-sha1", "aes256-sha256"} {
		applyIPsecKnob(t, f.fw, v)
		checkSA(t, f.fw, v)
	}

	// A restore (as a session's, or a switch of the whole config) names
	// no ipsec@ knob: the tunnel whose SA runs another proposal than the
	// config is re-established all the same.
	ctx := context.Background()
	data, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	older, _, err := configxml.Edit(data, "", func(c *configxml.Config) error { return c.Set("ipsec@fwab", "aes128gcm16") })
	if err != nil {
		t.Fatal(err)
	}
	if err := f.fw.WriteConfig(ctx, older, "restore"); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "restore:ipsec-restart", Action: configxml.ActionIPsecRestart}}); err != nil {
		t.Fatalf("restore apply: %v", err)
	}
	checkSA(t, f.fw, "aes128gcm16")

	applyIPsecKnob(t, f.fw, "none")
	if st, err := f.fw.RuntimeState(context.Background()); err != nil || len(st.IPsec) != 0 {
		t.Errorf("after ipsec@fwab=none: RuntimeState %v, SAs %+v; want none", err, st.IPsec)
	}
	if r := dutRoutes(t, topo); r != plain {
		t.Errorf("after ipsec@fwab=none the DUT routes %q, want the plain %q", r, plain)
	}
	if _, err := IperfMbit(context.Background(), topo, 1, false); err != nil {
		t.Errorf("plain routing after none: %v", err)
	}

	// A tunnel enabled at reboot comes back up; 2.7.2 has ChaCha20.
	applyIPsecKnob(t, f.fw, "aes256gcm16")
	upgradeAndWait(t, f)
	checkSA(t, f.fw, "aes256gcm16")
	applyIPsecKnob(t, f.fw, "chacha20poly1305")
	checkSA(t, f.fw, "chacha20poly1305")
	if _, err := IperfMbit(context.Background(), topo, 1, false); err != nil {
		t.Errorf("iperf3 through chacha20poly1305: %v", err)
	}

	// The accelerator: with it the DUT's AES is strongSwan's aesni plugin;
	// without, the software aes plugin (and GCM built on it), slower; 3DES
	// stays openssl's either way.
	applyIPsecKnob(t, f.fw, "aes128gcm16")
	for _, to := range []string{"aesni", "none"} {
		if to == "none" {
			setCrypto(t, f, "none")
			checkSA(t, f.fw, "aes128gcm16")
		}
		a, err := ss.Algorithms(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"aesni": {"AES_CBC[aesni]", "AES_GCM_16[aesni]", "3DES_CBC[openssl]"}, "none": {"AES_CBC[aes]", "AES_GCM_16[gcm]", "3DES_CBC[openssl]"}}[to]
		for _, w := range want {
			if !strings.Contains(a, w) {
				t.Errorf("crypto.hardware=%s: the DUT's charon lists no %s:\n%s", to, w, a)
			}
		}
	}
	soft, _ := medianMbit(t, topo, 3, 2)
	t.Logf("aes128gcm16 median Mbit/s: with aesni %.0f, without %.0f", mg, soft)
	if soft > 0.75*mg {
		t.Errorf("aes128gcm16 without the accelerator %.0f Mbit/s is not clearly below %.0f with it (want under 75 %%)", soft, mg)
	}
	applyIPsecKnob(t, f.fw, "none")
}

func TestMissingPlugins(t *testing.T) {
	dir := t.TempDir()
	for _, p := range strings.Fields(charonLoad(true)) {
		if p == "gcm" || p == "openssl" || p == "chapoly" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, "libstrongswan-"+p+".so"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := missingPlugins(dir)
	want := "ipsec: strongSwan plugins missing: openssl, gcm, chapoly; install with: apt-get install -y libstrongswan-standard-plugins libstrongswan-extra-plugins (or run scripts/setup.sh)"
	if err == nil || err.Error() != want {
		t.Errorf("missingPlugins = %v\nwant %s", err, want)
	}
	if err := os.WriteFile(filepath.Join(dir, "libstrongswan-gcm.so"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"openssl", "chapoly"} {
		if err := os.WriteFile(filepath.Join(dir, "libstrongswan-"+p+".so"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := missingPlugins(dir); err != nil {
		t.Errorf("missingPlugins with every plugin present = %v, want nil", err)
	}
}

// TestDownStopsCharons: a lab brought down with a tunnel up leaves no
// charon, namespace or folder behind.
func TestDownStopsCharons(t *testing.T) {
	ctx := context.Background()
	o, _, tg := upLab(t, Options{})
	dir, topo := o.Dir, Topology{Prefix: o.Prefix}
	if psk, err := os.ReadFile(filepath.Join(dir, emu.TunnelPSKFile)); err != nil || len(strings.TrimSpace(string(psk))) == 0 {
		t.Errorf("Up wrote no tunnel PSK file for matrices: %v", err)
	}
	fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	p, ok := fw.(*fwapi.PfSense)
	if !ok {
		t.Fatalf("fwapi.Open(lab) = %T, want the pfSense driver", fw)
	}
	applyIPsecKnob(t, p, "aes128gcm16")
	checkSA(t, p, "aes128gcm16")
	var pids []int
	for _, side := range []string{"dut", "peer"} {
		b, err := os.ReadFile(filepath.Join(dir, "ipsec", side, "charon.pid"))
		if err != nil {
			t.Fatalf("%s charon: %v", side, err)
		}
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err != nil || !isCharon(pid) {
			t.Fatalf("%s charon pid file %q: not a running charon (%v)", side, b, err)
		}
		pids = append(pids, pid)
	}
	fw.Close()
	if err := Down(ctx, o); err != nil {
		t.Fatalf("Down: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("charon pid %d still running after Down", pid)
		}
	}
	if left := leftovers(t, topo.Prefix); len(left) > 0 {
		t.Errorf("left behind after Down: %v", left)
	}
}

// applyIPsecKnob sets ipsec@fwab through fwapi's pfSense driver, with the
// product version the firewall reports (so 3DES is allowed on 2.6 only).
// setCrypto sets crypto.hardware and applies it, which reboots the DUT.
func setCrypto(t *testing.T, f *testFirewall, value string) {
	t.Helper()
	info, err := f.fw.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	boots := f.em.Boots()
	if err := labtest.EditAndApply(t, f.fw, info.Version, func(c *configxml.Config) error { return c.Set("crypto.hardware", value) }); err != nil {
		t.Fatalf("crypto.hardware=%s: %v", value, err)
	}
	if f.em.Boots() != boots+1 {
		t.Errorf("crypto.hardware=%s: %d boots, want one reboot", value, f.em.Boots()-boots)
	}
}

func applyIPsecKnob(t *testing.T, fw *fwapi.PfSense, value string) {
	t.Helper()
	info, err := fw.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := labtest.EditAndApply(t, fw, info.Version, func(c *configxml.Config) error { return c.Set("ipsec@fwab", value) }); err != nil {
		t.Fatalf("ipsec@fwab=%s on %s: %v", value, info.Version, err)
	}
	t.Logf("ipsec@fwab=%s applied in %v", value, time.Since(start).Round(10*time.Millisecond))
}

// checkSA checks through fwapi's RuntimeState that the tunnel negotiated
// exactly the proposal asked for.
func checkSA(t *testing.T, fw *fwapi.PfSense, value string) fwapi.IPsecSA {
	t.Helper()
	st, err := fw.RuntimeState(context.Background())
	if err != nil {
		t.Fatalf("RuntimeState: %v", err)
	}
	if len(st.IPsec) != 1 {
		t.Fatalf("ipsec@fwab=%s: %d child SAs (%+v), want 1", value, len(st.IPsec), st.IPsec)
	}
	sa, want := st.IPsec[0], negotiated[value]
	if sa.State != "INSTALLED" || sa.Encr != want.encr || sa.Integ != want.integ {
		t.Errorf("ipsec@fwab=%s: SA %s %s %q/%q, want INSTALLED %q/%q", value, sa.Name, sa.State, sa.Encr, sa.Integ, want.encr, want.integ)
	}
	return sa
}
