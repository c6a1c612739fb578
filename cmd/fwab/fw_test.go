package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fixtures/transcripts"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// fwabRun runs the command line and returns its output and exit status.
func fwabRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

// labTarget starts an emulated pfSense with config (nil: the factory
// config) and writes a targets file naming it "fw1"; the local state goes
// to a temporary folder.
func labTarget(t *testing.T, config []byte, trustHost bool) (*labtest.Firewall, string) {
	t.Helper()
	return labTargetWith(t, labtest.Options{Config: config}, trustHost)
}

// labTargetWith is labTarget with the emulator's options.
func labTargetWith(t *testing.T, o labtest.Options, trustHost bool) (*labtest.Firewall, string) {
	t.Helper()
	em := labtest.Start(t, o)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	ssh := em.Target.SSH
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if trustHost {
		kh = ssh.KnownHosts
	}
	yaml := "targets:\n  fw1:\n    flavor: pfsense\n    host: " + em.Target.Host + "\n    ssh:\n      port: " + strconv.Itoa(ssh.Port) +
		"\n      user: admin\n      key_file: " + ssh.KeyFile + "\n      known_hosts: " + kh +
		"\n    offload_management: true" + // the emulated LAN is the management interface: see TestFwApplyOffloadLeavesManagementNIC
		"\n    endpoints:\n      client: {addr: 198.18.1.10}\n      server: {addr: 198.19.1.10}\n"
	path := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return em, path
}

func TestFwInfoAndPull(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	out, errOut, code := fwabRun(t, "fw", "info", "--target", "fw1", "--targets", targets)
	if code != 0 || !strings.Contains(out, "version\t2.7.2-RELEASE") || !strings.Contains(out, "nics\tigb0 igb1") {
		t.Errorf("fw info = %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = fwabRun(t, "fw", "pull", "--target", "fw1", "--targets", targets)
	if code != 0 || out != string(fake.File(t, "/conf/config.xml")) {
		t.Errorf("fw pull = %d, %d bytes (%s); want the config byte for byte", code, len(out), errOut)
	}
	file := filepath.Join(t.TempDir(), "c.xml")
	if _, errOut, code = fwabRun(t, "fw", "pull", "--target", "fw1", "--targets", targets, "-o", file); code != 0 {
		t.Fatalf("fw pull -o = %d: %s", code, errOut)
	}
	if got, _ := os.ReadFile(file); !bytes.Equal(got, fake.File(t, "/conf/config.xml")) {
		t.Errorf("fw pull -o wrote a different file")
	}
}

func TestFwUnknownHostKey(t *testing.T) {
	_, targets := labTarget(t, nil, false)
	_, errOut, code := fwabRun(t, "fw", "info", "--target", "fw1", "--targets", targets)
	if code != exitUsage || !strings.Contains(errOut, "--accept-new-host-key") || !strings.Contains(errOut, "SHA256:") {
		t.Fatalf("fw info with an unknown host = %d: %s; want exit 2 (a setup error) naming the fingerprint and the flag", code, errOut)
	}
	if _, errOut, code = fwabRun(t, "fw", "info", "--target", "fw1", "--targets", targets, "--accept-new-host-key"); code != 0 {
		t.Fatalf("fw info --accept-new-host-key = %d: %s", code, errOut)
	}
	if _, errOut, code = fwabRun(t, "fw", "info", "--target", "fw1", "--targets", targets); code != 0 {
		t.Errorf("fw info once the key is known = %d: %s", code, errOut)
	}
}

func TestFwUsageErrors(t *testing.T) {
	_, targets := labTarget(t, nil, true)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"fw", "info", "--targets", targets}, "--target is required"},
		{[]string{"fw", "info", "--target", "nope", "--targets", targets}, `no target "nope"; known targets: fw1`},
		{[]string{"fw", "apply", "--target", "fw1", "--targets", targets, "offload.tso"}, "offload.tso"},
		{[]string{"verify"}, "give --target NAME"},
		{[]string{"fw", "metrics", "--target", "fw1", "--targets", targets, "--count", "0"}, "--count must be at least 1"},
	} {
		_, errOut, code := fwabRun(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("fwab %q = %d, %q; want exit 2 with %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestFwApplyOffload(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	_, errOut, code := fwabRun(t, "fw", "apply", "--target", "fw1", "--targets", targets, "offload.checksum=off")
	if code != 0 {
		t.Fatalf("fw apply = %d: %s", code, errOut)
	}
	c, err := configxml.LoadBytes(fake.File(t, "/conf/config.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Get("offload.checksum"); v != "off" {
		t.Errorf("offload.checksum on the firewall = %q, want off", v)
	}
	cmds := strings.Join(fake.Commands(), "\n")
	for _, want := range []string{"enable_hardware_offloading($if)", "array())", "pkill -F /var/run/fwab-rollback.pid"} {
		if !strings.Contains(cmds, want) {
			t.Errorf("commands lack %q", want)
		}
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 || fake.Running(fwapi.RollbackPIDFile) {
		t.Errorf("fw apply left the lock or an armed rollback")
	}
}

// TestFwApplyOffloadLeavesManagementNIC: on a box managed over its LAN
// (a factory box) and a target without offload_management, an offload
// change leaves the LAN's NIC as it was; verify says so, naming the
// setting, and the box is restored.
func TestFwApplyOffloadLeavesManagementNIC(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	orig := fake.File(t, "/conf/config.xml")
	data, err := os.ReadFile(targets)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(targets, bytes.Replace(data, []byte("\n    offload_management: true"), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := fwabRun(t, "fw", "apply", "--target", "fw1", "--targets", targets, "offload.checksum=off")
	if code != 1 || !strings.Contains(errOut, "offload_management: true") || !strings.Contains(errOut, "igb1 (lan)") {
		t.Errorf("fw apply without offload_management = %d, %s; want exit 1 naming igb1 (lan) and offload_management: true", code, errOut)
	}
	if got := fake.File(t, "/conf/config.xml"); !bytes.Equal(got, orig) {
		t.Errorf("the refused change was not undone")
	}
}

func TestFwApplyRefusedWhileLocked(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	sh, err := fwapi.DialSSH(t.Context(), fake.SSHConfig())
	if err != nil {
		t.Fatal(err)
	}
	other := fwapi.NewPfSense(sh, fwapi.PfSenseOptions{})
	defer other.Close()
	if err := other.Lock(t.Context(), fwapi.LockOwner{Owner: "carol@bench", PID: 31337, Time: time.Now(), Token: "c"}); err != nil {
		t.Fatal(err)
	}
	before := fake.File(t, "/conf/config.xml")
	_, errOut, code := fwabRun(t, "fw", "apply", "--target", "fw1", "--targets", targets, "offload.checksum=off")
	if code != 1 || !strings.Contains(errOut, "owner=carol@bench pid=31337") {
		t.Errorf("fw apply on a locked firewall = %d: %s; want exit 1 naming carol@bench pid=31337", code, errOut)
	}
	if !bytes.Equal(before, fake.File(t, "/conf/config.xml")) {
		t.Errorf("a refused apply changed the config")
	}
}

// consistentConfig is the factory config with offloads on and two
// generated rules, which the emulator boots into: its runtime agrees.
func consistentConfig(t *testing.T, extra ...string) []byte {
	t.Helper()
	c, err := configxml.LoadBytes(emu.FactoryConfig(configxml.PfSense))
	if err != nil {
		t.Fatal(err)
	}
	assignments := extra
	for _, a := range []string{"offload.checksum=on", "offload.tso=on", "offload.lro=on", "rules@lan=2"} {
		knob, _, _ := strings.Cut(a, "=")
		if !slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, knob+"=") }) {
			assignments = append(assignments, a)
		}
	}
	if err := c.SetAll(assignments); err != nil {
		t.Fatal(err)
	}
	return c.Bytes()
}

func TestVerifyTarget(t *testing.T) {
	t.Run("consistent", func(t *testing.T) {
		_, targets := labTarget(t, consistentConfig(t), true)
		out, errOut, code := fwabRun(t, "verify", "--target", "fw1", "--targets", targets)
		if code != 0 || strings.Contains(out, "error") {
			t.Errorf("verify = %d\n%s%s; want exit 0", code, out, errOut)
		}
	})
	t.Run("runtime flags disagree with the config", func(t *testing.T) {
		fake, targets := labTarget(t, consistentConfig(t), true)
		sh, err := fwapi.DialSSH(t.Context(), fake.SSHConfig())
		if err != nil {
			t.Fatal(err)
		}
		defer sh.Close()
		if _, err := sh.Output(t.Context(), "ifconfig igb1 -tso"); err != nil {
			t.Fatal(err)
		}
		out, _, code := fwabRun(t, "verify", "--target", "fw1", "--targets", targets)
		if code != 1 || !strings.Contains(out, "FWAB101") || !strings.Contains(out, "offload.tso is on in the config but igb1 (lan) shows it off") {
			t.Errorf("verify = %d\n%s; want exit 1 with FWAB101 for igb1", code, out)
		}
	})
	t.Run("inline IPS with offloads really on", func(t *testing.T) {
		// The config claims offloads off and inline IPS on lan; the NIC
		// still has them on (no reboot or reconfigure happened), and
		// Suricata runs inline on igb1 (the recorded ps of a real box: the
		// emulator runs no engines without root).
		fake, targets := labTarget(t, consistentConfig(t), true)
		fake.PutFile(t, "/conf/config.xml", consistentConfig(t, "offload.checksum=off", "offload.tso=off", "offload.lro=off", "ids@lan=ips-inline"))
		ps, _ := transcripts.Lookup("ps ax -o pid,command")
		fake.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "ps ax -o pid,command", Stdout: ps.Stdout}}})
		out, _, code := fwabRun(t, "verify", "--target", "fw1", "--targets", targets, "--json")
		if code != 1 || !strings.Contains(out, `"rule": "FWAB103"`) || !strings.Contains(out, "inline IPS (netmap) runs on igb1 while its offloads are really on") {
			t.Errorf("verify --json = %d\n%s; want exit 1 with FWAB103", code, out)
		}
	})
}

func TestVerifyOffline(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.xml")
	os.WriteFile(bad, consistentConfig(t, "ids@lan=ips-inline"), 0o600)
	out, _, code := fwabRun(t, "verify", "--offline", bad)
	if code != 1 || !strings.Contains(out, "FWAB001") {
		t.Errorf("verify --offline (inline IPS, offloads on) = %d\n%s; want exit 1 with FWAB001", code, out)
	}
	good := filepath.Join(dir, "good.xml")
	os.WriteFile(good, consistentConfig(t), 0o600)
	if out, errOut, code := fwabRun(t, "verify", "--offline", good); code != 0 {
		t.Errorf("verify --offline (clean) = %d\n%s%s", code, out, errOut)
	}
}

func TestFwRecover(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	orig := fake.File(t, "/conf/config.xml")
	sh, err := fwapi.DialSSH(t.Context(), fake.SSHConfig())
	if err != nil {
		t.Fatal(err)
	}
	fw := fwapi.NewPfSense(sh, fwapi.PfSenseOptions{})
	defer fw.Close()
	dir, err := fwapi.StateDir("fw1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := fwapi.StartSession(t.Context(), fw, fw, fwapi.SessionOptions{Target: "fw1", Dir: dir, Owner: fwapi.LockOwner{Owner: "crashed@ws", PID: deadPID(t), Token: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(orig, []byte("pfSense</hostname>"), []byte("fw9</hostname>"), 1)
	if err := s.Apply(t.Context(), changed, []configxml.Change{{Knob: "rules@lan", To: "5", Action: configxml.ActionFilterReload}}, nil); err != nil {
		t.Fatal(err)
	}
	// fwab crashed: no Close.
	out, errOut, code := fwabRun(t, "fw", "recover", "--target", "fw1", "--targets", targets)
	if code != 0 || !strings.Contains(out, "restored the config") || !strings.Contains(out, fwapi.SHA256Hex(orig)) {
		t.Fatalf("fw recover = %d\n%s%s", code, out, errOut)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), orig) {
		t.Errorf("fw recover did not restore the original")
	}
	_, errOut, code = fwabRun(t, "fw", "recover", "--target", "fw1", "--targets", targets)
	if code != 1 || !strings.Contains(errOut, "nothing to recover") {
		t.Errorf("second fw recover = %d: %s", code, errOut)
	}
}

func TestFwMetrics(t *testing.T) {
	_, targets := labTarget(t, nil, true)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"fw", "metrics", "--target", "fw1", "--targets", targets}, strings.NewReader(""), &out, &errOut)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || !strings.Contains(lines[0], "CPU%") || !strings.Contains(lines[0], "MBUFS") || len(lines) < 2 || len(strings.Fields(lines[1])) != 6 {
		t.Errorf("fw metrics = %d\n%s%s", code, out.String(), errOut.String())
	}
}

func TestFwPush(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	c, err := configxml.LoadBytes(fake.File(t, "/conf/config.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set("nat.outbound", "hybrid"); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "next.xml")
	if err := os.WriteFile(file, c.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	fake.ResetActions()
	_, errOut, code := fwabRun(t, "fw", "push", file, "--target", "fw1", "--targets", targets)
	if code != 0 || !strings.Contains(errOut, "nat.outbound: automatic -> hybrid (filter-reload)") {
		t.Fatalf("fw push = %d: %s", code, errOut)
	}
	if !bytes.Equal(fake.File(t, "/conf/config.xml"), c.Bytes()) {
		t.Errorf("the firewall does not hold the pushed file byte for byte")
	}
	if got := fake.Actions(); len(got) != 1 || got[0] != configxml.ActionFilterReload {
		t.Errorf("fw push ran %v, want only a filter reload", got)
	}
	bad := filepath.Join(t.TempDir(), "bad.xml")
	os.WriteFile(bad, []byte("<pfsense><unclosed></pfsense>"), 0o600)
	if _, errOut, code := fwabRun(t, "fw", "push", bad, "--target", "fw1", "--targets", targets); code != exitUsage || !strings.Contains(errOut, "bad.xml") {
		t.Errorf("fw push of a broken file = %d: %s; want exit 2 naming the file", code, errOut)
	}
}

func TestFwUpgrade(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	_, errOut, code := fwabRun(t, "fw", "upgrade", "2.8.0-RELEASE", "--target", "fw1", "--targets", targets, "--timeout", "30s")
	if code != 0 || !strings.Contains(errOut, "Upgrading pfSense-kernel") || !strings.Contains(errOut, "version 2.8.0-RELEASE") {
		t.Fatalf("fw upgrade = %d: %s", code, errOut)
	}
	if got := string(fake.File(t, "/etc/version")); got != "2.8.0-RELEASE\n" {
		t.Errorf("/etc/version = %q", got)
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("fw upgrade left the lock")
	}
}

func TestFwApplyRefusesUnsafeChange(t *testing.T) {
	fake, targets := labTarget(t, consistentConfig(t), true)
	before := fake.File(t, "/conf/config.xml")
	fake.ResetActions()
	_, errOut, code := fwabRun(t, "fw", "apply", "--target", "fw1", "--targets", targets, "ids@lan=ips-inline")
	if code != 1 || !strings.Contains(errOut, "FWAB001") || !strings.Contains(errOut, "nothing was touched") {
		t.Fatalf("fw apply ids@lan=ips-inline with offloads on = %d: %s; want a refusal naming FWAB001", code, errOut)
	}
	if !bytes.Equal(before, fake.File(t, "/conf/config.xml")) || len(fake.Actions()) != 0 {
		t.Errorf("a refused change touched the firewall (actions %v)", fake.Actions())
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("a refused change left the lock")
	}
}

// TestFwUpgradeKeep: --keep leaves the old firmware in a boot environment
// named after it, which fw firmwares lists beside the running one; a box
// without boot environments refuses --keep before anything changes.
func TestFwUpgradeKeep(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	_, errOut, code := fwabRun(t, "fw", "upgrade", "2.8.0-RELEASE", "--keep", "--target", "fw1", "--targets", targets, "--timeout", "30s")
	if code != 0 || !strings.Contains(errOut, "kept 2.7.2-RELEASE in boot environment 2.7.2-RELEASE") {
		t.Fatalf("fw upgrade --keep = %d: %s", code, errOut)
	}
	out, errOut, code := fwabRun(t, "fw", "firmwares", "--target", "fw1", "--targets", targets)
	if code != 0 {
		t.Fatalf("fw firmwares = %d: %s", code, errOut)
	}
	var kept, running bool
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 4 && f[0] == "2.7.2-RELEASE":
			kept = f[1] == "2.7.2-RELEASE" && f[2] == "-" && f[3] == "-"
		case len(f) >= 4 && f[0] == "default":
			running = f[1] == "2.8.0-RELEASE" && f[2] == "yes" && f[3] == "yes"
		}
	}
	if !kept || !running {
		t.Errorf("fw firmwares:\n%s\nwant 2.7.2-RELEASE kept (not running, not next) and default running 2.8.0-RELEASE", out)
	}

	if err := fake.SetUFS(true); err != nil {
		t.Fatal(err)
	}
	before := fake.StoredConfig(t)
	version := string(fake.File(t, "/etc/version"))
	_, errOut, code = fwabRun(t, "fw", "upgrade", "2.8.1-RELEASE", "--keep", "--target", "fw1", "--targets", targets, "--timeout", "30s")
	if code == 0 || !strings.Contains(errOut, "no boot environments") || !strings.Contains(errOut, "sequential runs") {
		t.Errorf("fw upgrade --keep on UFS = %d: %s; want it refused, naming why and the way on", code, errOut)
	}
	if got := string(fake.File(t, "/etc/version")); got != version || !bytes.Equal(fake.StoredConfig(t), before) {
		t.Errorf("the refused upgrade changed the box: /etc/version %q (was %q)", got, version)
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("the refused upgrade left the lock")
	}
}

// TestFwUpgradeKeepPoolSpace: --keep on a pool without room for the
// running system beside its upgrade is refused before anything changes,
// naming both figures and the way out.
func TestFwUpgradeKeepPoolSpace(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	if err := fake.SetPoolFree(300 << 20); err != nil {
		t.Fatal(err)
	}
	before := fake.StoredConfig(t)
	version := string(fake.File(t, "/etc/version"))
	_, errOut, code := fwabRun(t, "fw", "upgrade", "2.8.0-RELEASE", "--keep", "--target", "fw1", "--targets", targets, "--timeout", "30s")
	if code == 0 || !strings.Contains(errOut, "300 MiB free") || !strings.Contains(errOut, "1.3 GiB") || !strings.Contains(errOut, "bectl destroy") || !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("fw upgrade --keep on a full pool = %d: %s; want it refused, naming the free space, the need and the way out", code, errOut)
	}
	if got := string(fake.File(t, "/etc/version")); got != version || !bytes.Equal(fake.StoredConfig(t), before) {
		t.Errorf("the refused upgrade changed the box: /etc/version %q (was %q)", got, version)
	}
	envs, err := fake.BootEnvs()
	if err != nil {
		t.Fatal(err)
	}
	if len(envs) != 1 {
		t.Errorf("the refused upgrade left boot environments %v; want only the one it had", envs)
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("the refused upgrade left the lock")
	}
}

// TestFwUpgradeKeepChildDatasets: the room --keep asks for counts the
// running environment's child datasets (pfSense keeps /cf and /var/db/pkg
// in datasets of their own under it, which bectl create -r copies too),
// not the root dataset alone.
func TestFwUpgradeKeepChildDatasets(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	if err := fake.SetPoolFree(1299227607 + 1<<20); err != nil { // the root dataset and a MiB
		t.Fatal(err)
	}
	_, errOut, code := fwabRun(t, "fw", "upgrade", "2.8.0-RELEASE", "--keep", "--target", "fw1", "--targets", targets, "--timeout", "30s")
	if code == 0 || !strings.Contains(errOut, "1.2 GiB free") || !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("fw upgrade --keep with room for / but not its children = %d: %s; want it refused", code, errOut)
	}
	if envs, err := fake.BootEnvs(); err != nil || len(envs) != 1 {
		t.Errorf("the refused upgrade left boot environments %v (%v); want only the one it had", envs, err)
	}
}

// TestFwRecoverWaitsForReboot: fwab killed across a reboot leaves a box
// that does not answer for a while; fw recover waits for it (--wait)
// instead of failing on the refused connection.
func TestFwRecoverWaitsForReboot(t *testing.T) {
	fake, targets := labTargetWith(t, labtest.Options{RebootDelay: 8 * time.Second}, true)
	go fake.Reboot(context.Background())
	deadline := time.Now().Add(2 * time.Second)
	for !fake.Rebooting() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	// No session crashed here: once the firewall answers, recover says
	// there is nothing to do (exit 1), not that the connection was refused.
	_, errOut, _ := fwabRun(t, "fw", "recover", "--target", "fw1", "--targets", targets, "--wait", "30s")
	if !strings.Contains(errOut, "waiting up to 30s") || !strings.Contains(errOut, "nothing to recover") {
		t.Fatalf("fw recover during a reboot: %s\nwant it to wait for the firewall, then find nothing to recover", errOut)
	}
	go fake.Reboot(context.Background())
	for deadline := time.Now().Add(2 * time.Second); !fake.Rebooting() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	_, errOut, _ = fwabRun(t, "fw", "recover", "--target", "fw1", "--targets", targets, "--wait", "0s")
	if !strings.Contains(errOut, "connection refused") {
		t.Errorf("fw recover --wait 0s during a reboot: %s\nwant the refused connection", errOut)
	}
}

// deadPID is the pid of a process that has exited: a crashed fwab's.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
