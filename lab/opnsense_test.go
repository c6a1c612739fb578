package lab

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// TestOPNsenseAPIOnTheDataPlane changes knobs through fwapi's OPNsense
// driver (config.xml over SSH, service actions over the REST API) and
// checks the real data plane: ethtool offload flags and the nftables
// filter. Then it upgrades 26.1 -> 26.7 through the firmware API; the
// generated rules move to the MVC model and still reach nftables.
func TestOPNsenseAPIOnTheDataPlane(t *testing.T) {
	// Checks behaviour, not throughput: runs beside the other parallel
	// tests, once the package's comparisons are done.
	t.Parallel()
	requireRoot(t)
	topo := testTopology(t)
	if err := topo.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := startOPNsense(t, topo)
	fw := openDriver[*fwapi.GuardedOPNsense](t, f)
	ctx := context.Background()

	ethtool := func(feature string) string {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", topo.Namespace("dut"), "ethtool", "-k", topo.DUTLanIf()).CombinedOutput()
		if err != nil {
			t.Fatalf("ethtool: %v\n%s", err, out)
		}
		for _, l := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, feature+": "); ok {
				return strings.Fields(v)[0]
			}
		}
		t.Fatalf("ethtool -k has no %s:\n%s", feature, out)
		return ""
	}
	// OPNsense ships with the offloads disabled.
	if got := ethtool("tx-checksumming"); got != "off" {
		t.Errorf("factory tx-checksumming = %s, want off", got)
	}
	labtest.ApplyKnobs(t, fw, "offload.checksum=on", "offload.tso=on")
	if got := ethtool("tx-checksumming"); got != "on" {
		t.Errorf("after offload.checksum=on, tx-checksumming = %s", got)
	}
	if got := ethtool("tcp-segmentation-offload"); got != "on" {
		t.Errorf("after offload.tso=on, tcp-segmentation-offload = %s", got)
	}

	nftRules := func() int {
		t.Helper()
		out, err := exec.Command("ip", "netns", "exec", topo.Namespace("dut"), "nft", "list", "table", "ip", emu.FilterTable).CombinedOutput()
		if err != nil {
			t.Fatalf("nft: %v\n%s", err, out)
		}
		return strings.Count(string(out), "tcp dport")
	}
	labtest.ApplyKnobs(t, fw, "rules@lan=12")
	if got := nftRules(); got != 12 {
		t.Errorf("after rules@lan=12, nft has %d generated rules", got)
	}
	st, err := fw.RuntimeState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.GeneratedRules != 12 || fwapi.OffloadState(st.Interfaces["igb1"], "offload.checksum") != "on" {
		t.Errorf("RuntimeState: generated %d, igb1 options %v; want 12 and checksum on", st.GeneratedRules, st.Interfaces["igb1"].Options)
	}

	if err := fw.Upgrade(ctx, "26.7", nil); err != nil {
		t.Fatalf("Upgrade(26.7): %v", err)
	}
	fw = openDriver[*fwapi.GuardedOPNsense](t, f) // a fresh connection after the reboot
	info, err := fw.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Version != "26.7.1" {
		t.Errorf("version after the upgrade = %s, want 26.7.1", info.Version)
	}
	// 26.7 keeps the legacy rules from before, and the knob now writes MVC
	// rules: 5 of them replace nothing legacy, so nft holds 12 + 5.
	labtest.ApplyKnobsAt(t, fw, info.Version, "rules@lan=5")
	if got := nftRules(); got != 17 {
		t.Errorf("after rules@lan=5 on 26.7, nft has %d generated rules, want 12 legacy + 5 MVC", got)
	}
}

// TestUpDownOPNsense brings the OPNsense lab up as `fwab lab up --flavor
// opnsense` does, opens the driver from the target alone, and takes it down.
func TestUpDownOPNsense(t *testing.T) {
	ctx := context.Background()
	o, st, tg := upLab(t, Options{Flavor: "opnsense"})
	dir, targets, topo := o.Dir, o.TargetsPath, Topology{Prefix: o.Prefix}
	if st.Flavor != "opnsense" || st.APIAddr == "" {
		t.Fatalf("Up() state = %+v, want flavor opnsense with an API address", st)
	}
	secret, err := os.ReadFile(filepath.Join(dir, emu.APISecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, emu.APISecretFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, want 0600", fi.Mode().Perm())
	}
	raw, err := os.ReadFile(targets)
	if err != nil {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(filepath.Join(dir, serveLog))
	state, _ := os.ReadFile(filepath.Join(dir, stateFile))
	for name, b := range map[string][]byte{"targets file": raw, "serve.log": log, "lab.json": state} {
		if bytes.Contains(b, bytes.TrimSpace(secret)) {
			t.Errorf("the API secret is in the %s", name)
		}
	}
	if tg.API == nil || tg.API.CAFile == "" || tg.API.Insecure || tg.API.SecretFile == "" {
		t.Fatalf("target api = %+v, want the lab CA pinned and a secret file", tg.API)
	}
	fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{})
	if err != nil {
		t.Fatalf("fwapi.Open(lab target): %v", err)
	}
	info, err := fw.Info(ctx)
	fw.Close()
	if err != nil || info.Version != "26.1.2" || info.Flavor != configxml.OPNsense {
		t.Errorf("Info() = %+v, %v; want OPNsense 26.1.2", info, err)
	}
	s, err := GetStatus(ctx, o)
	if err != nil || !s.SSHUp || !s.APIUp || s.Version != "26.1.2" {
		t.Errorf("GetStatus() = %+v, %v; want SSH and API up, version 26.1.2", s, err)
	}
	if err := Down(ctx, o); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := leftovers(t, topo.Prefix); len(left) > 0 {
		t.Errorf("left behind after Down: %v", left)
	}
	if tf, _ := fwapi.LoadTargets(targets); tf.Targets[TargetName] != nil {
		t.Errorf("target %q still in the targets file after Down", TargetName)
	}
}

// TestOPNsenseIPsecThroughTheAPI creates an IPsec connection in the
// OPNsense config (<OPNsense><Swanctl>), applies it with the IPsec service
// reconfigure call, and reads the negotiated algorithms back through the
// sessions API: real strongSwan on both ends.
func TestOPNsenseIPsecThroughTheAPI(t *testing.T) {
	// Checks behaviour, not throughput: runs beside the other parallel
	// tests, once the package's comparisons are done.
	t.Parallel()
	requireRoot(t)
	topo := testTopology(t)
	if err := topo.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	ss := &StrongSwan{Topo: topo, Dir: t.TempDir()}
	f := startOPNsense(t, topo, func(e *emu.Emulator) {
		ss.FirewallRoot = e.Root
		e.IPsec = ss
	})
	t.Cleanup(func() { _ = ss.Stop(context.Background()) }) // before the namespaces go
	fw := openDriver[*fwapi.GuardedOPNsense](t, f)
	ctx := context.Background()

	apply := func(value string, edit ...func(*configxml.Config)) error {
		t.Helper()
		return labtest.EditAndApply(t, fw, "", func(c *configxml.Config) error {
			c.DefineTunnel(configxml.TunnelSpec{
				Name: "site", Interface: "wan", LocalAddr: emu.DUTWanAddr, RemoteAddr: emu.PeerAddr,
				LocalNet: emu.LanNet, RemoteNet: emu.ServerNet, LocalID: "dut.fwab.lab", RemoteID: "peer.fwab.lab", PSK: "fwab-lab-test-psk",
			})
			if err := c.Set("ipsec@site", value); err != nil {
				return err
			}
			for _, e := range edit {
				e(c)
			}
			return nil
		})
	}
	for _, v := range []string{"aes256gcm16", "aes128-sha1-modp2048"} {
		if err := apply(v); err != nil {
			t.Fatalf("Apply(ipsec@site=%s): %v", v, err)
		}
		st, err := fw.RuntimeState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := negotiated[v]
		if len(st.IPsec) != 1 || st.IPsec[0].State != "INSTALLED" || st.IPsec[0].Encr != want.encr || st.IPsec[0].Integ != want.integ {
			t.Errorf("ipsec@site=%s: SAs %+v, want one INSTALLED %s/%s", v, st.IPsec, want.encr, want.integ)
		}
	}
	// The service switch off, the connection still enabled: the reconfigure
	// stops strongSwan (as upstream's does) and the driver says why.
	err := apply("aes256gcm16", func(c *configxml.Config) {
		sw := c.Root().FindElement("ipsec/enable")
		sw.Parent().RemoveChild(sw)
	})
	if err == nil || !strings.Contains(err.Error(), "<ipsec><enable> is not set") {
		t.Errorf("Apply with the IPsec switch off: %v, want the switch named", err)
	}
	if st, err := fw.RuntimeState(ctx); err != nil || len(st.IPsec) != 0 {
		t.Errorf("with the IPsec switch off: %v, SAs %+v; want strongSwan stopped", err, st.IPsec)
	}
	if err := apply("none"); err != nil {
		t.Fatalf("Apply(ipsec@site=none): %v", err)
	}
	if st, err := fw.RuntimeState(ctx); err != nil || len(st.IPsec) != 0 {
		t.Errorf("after ipsec@site=none: %v, SAs %+v; want none", err, st.IPsec)
	}
}

// TestOPNsenseIDSThroughTheAPI sets ids@lan through fwapi's OPNsense driver
// (config.xml, then the IDS service reconfigure call) and checks the
// inspection engine the lab runs and what the settings and service status
// API report to the driver.
func TestOPNsenseIDSThroughTheAPI(t *testing.T) {
	// Checks behaviour, not throughput: runs beside the other parallel
	// tests, once the package's comparisons are done.
	t.Parallel()
	requireRoot(t)
	bin := buildFwab(t)
	topo := testTopology(t)
	if err := topo.Create(context.Background()); err != nil {
		t.Fatal(err)
	}
	engines := &IDSEngines{Netns: topo.Namespace("dut"), Executable: bin, Dir: t.TempDir(), Rules: 1000}
	f := startOPNsense(t, topo, func(e *emu.Emulator) { e.IDS = engines })
	t.Cleanup(engines.StopAll)
	fw := openDriver[*fwapi.GuardedOPNsense](t, f)
	ctx := context.Background()

	for _, mode := range []string{"ids", "ips-inline", "off"} {
		labtest.ApplyKnobs(t, fw, "ids@lan="+mode) // the factory offloads are off, as inline IPS needs
		st, err := fw.RuntimeState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sts := engines.Statuses()
		if mode == "off" {
			if len(st.IDS) != 0 || len(sts) != 0 {
				t.Errorf("ids@lan=off: RuntimeState.IDS %+v, engines %+v; want none", st.IDS, sts)
			}
			continue
		}
		if len(st.IDS) != 1 || st.IDS[0].Interface != "igb1" || st.IDS[0].Mode != mode {
			t.Errorf("ids@lan=%s: RuntimeState.IDS = %+v, want igb1 in mode %s", mode, st.IDS, mode)
		}
		if len(sts) != 1 || sts[0].Mode != mode || !sts[0].Running {
			t.Errorf("ids@lan=%s: engine statuses %+v, want one running in mode %s", mode, sts, mode)
		}
	}
}

// startOPNsense starts the emulated OPNsense, with its API, on the lab
// topology's data plane.
func startOPNsense(t *testing.T, topo Topology, configure ...func(*emu.Emulator)) *testFirewall {
	t.Helper()
	return startEmulator(t, configxml.OPNsense, &LinuxDataPlane{Topo: topo, TmpDir: t.TempDir()}, topo.Ports(), nil, configure...)
}
