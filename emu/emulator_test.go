package emu

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
)

// recordingDataPlane is the data plane most emulator tests run on.
type recordingDataPlane = RecordingDataPlane

func newRecordingDataPlane() *recordingDataPlane { return NewRecordingDataPlane() }

func testSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testFirewall is an emulator serving SSH on loopback and a client config
// that verifies its host key through a known_hosts file.
type testFirewall struct {
	em     *Emulator
	dp     DataPlane
	addr   string
	client *ssh.ClientConfig
	target *fwapi.Target // for fwapi.Open
}

func startEmulator(t *testing.T, dp DataPlane, ports Ports, profiles []Profile, configure ...func(*Emulator)) *testFirewall {
	t.Helper()
	dir := t.TempDir()
	host, err := EnsureKey(filepath.Join(dir, "keys", "host"))
	if err != nil {
		t.Fatal(err)
	}
	user, err := EnsureKey(filepath.Join(dir, "keys", "id_ed25519"))
	if err != nil {
		t.Fatal(err)
	}
	em := &Emulator{
		Root:           filepath.Join(dir, "root"),
		DataPlane:      dp,
		Ports:          ports,
		Profiles:       profiles,
		HostKey:        host,
		AuthorizedKeys: []ssh.PublicKey{user.PublicKey()},
		RebootDelay:    time.Second,
		BlocklistSize:  1000,
	}
	for _, c := range configure {
		c(em)
	}
	if err := em.Init(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := em.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { done <- em.Serve(ctx, "127.0.0.1:0", func(a net.Addr) { ready <- a.String() }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, host.PublicKey())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cb, err := knownhosts.New(kh)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(addr[strings.LastIndexByte(addr, ':')+1:])
	return &testFirewall{em: em, dp: dp, addr: addr, target: &fwapi.Target{
		Name: "lab", Flavor: string(em.flavor()), Host: "127.0.0.1",
		SSH: &fwapi.SSHSpec{Port: port, User: "root", KeyFile: filepath.Join(dir, "keys", "id_ed25519"), KnownHosts: kh},
	}, client: &ssh.ClientConfig{
		User:            "root",
		Auth:            []ssh.AuthMethod{ssh.PublicKeys(user)},
		HostKeyCallback: cb,
		Timeout:         5 * time.Second,
	}}
}

// run executes one command over a fresh SSH connection.
func (f *testFirewall) run(t *testing.T, cmd, stdin string) (stdout, stderr string, code int) {
	t.Helper()
	c, err := ssh.Dial("tcp", f.addr, f.client)
	if err != nil {
		t.Fatalf("ssh dial: %v", err)
	}
	defer c.Close()
	return sshRun(t, c, cmd, stdin)
}

func sshRun(t *testing.T, c *ssh.Client, cmd, stdin string) (string, string, int) {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatalf("ssh session: %v", err)
	}
	defer s.Close()
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	// As fwab sends every command (a raw command string would meet the
	// emulated OPNsense's csh).
	s.Stdin = bytes.NewReader(fwapi.RemoteScript(cmd, []byte(stdin), stdin != ""))
	err = s.Run(fwapi.RemoteShell)
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitStatus()
	}
	t.Fatalf("ssh run %q: %v", cmd, err)
	return "", "", -1
}

func (f *testFirewall) mustRun(t *testing.T, cmd, stdin string) string {
	t.Helper()
	out, errOut, code := f.run(t, cmd, stdin)
	if code != 0 {
		t.Fatalf("%q: exit %d, stderr %q", cmd, code, errOut)
	}
	return out
}

// setKnobs reads config.xml over SSH, makes knob assignments with configxml
// and writes it back.
func (f *testFirewall) setKnobs(t *testing.T, assignments ...string) {
	t.Helper()
	c, err := parseConfig([]byte(f.mustRun(t, "cat /conf/config.xml", "")), configxml.PfSense)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAll(assignments); err != nil {
		t.Fatalf("SetAll(%q): %v", assignments, err)
	}
	f.mustRun(t, "cat > /conf/config.xml.fwab && mv /conf/config.xml.fwab /conf/config.xml", string(c.Bytes()))
}

var testPorts = Ports{WanDev: "igb0", LanDev: "igb1", WanVeth: "tstd1", LanVeth: "tstd0"}

func TestEmulatorCommands(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	tests := []struct {
		cmd, stdin       string
		wantOut, wantErr string // wantErr: substring of stderr
		wantCode         int
	}{
		{cmd: "cat /etc/version", wantOut: "2.7.2-RELEASE\n"},
		{cmd: "head -n 1 /cf/conf/config.xml", wantOut: "<?xml version=\"1.0\"?>\n"},
		{cmd: "cat /conf/config.xml | grep -c '<rule>'", wantOut: "2\n"},
		{cmd: "grep -c -E 'disable(segmentation|largereceive)offloading' /conf/config.xml", wantOut: "2\n"},
		{cmd: "nosuchtool -x", wantErr: "nosuchtool: command not found", wantCode: 127},
		{cmd: "/usr/bin/python3 -c 1", wantErr: "command not found", wantCode: 127},
		{cmd: "cat /etc/passwd", wantErr: "cat: /etc/passwd: No such file or directory", wantCode: 1},
		{cmd: "hostname", wantOut: "pfSense.lab.fwab.test\n"},
		// timeout(1): 124 when the limit cuts the command short.
		{cmd: "[ -x /usr/bin/timeout ] && timeout -s KILL 0.2 sleep 5; echo $?", wantOut: "124\n"},
		{cmd: "timeout 5 cat /etc/version; echo $?", wantOut: "2.7.2-RELEASE\n0\n"},
		// A package's rc script is there only as a file (the lab's config
		// sets up no Suricata).
		{cmd: "[ -x /usr/local/etc/rc.d/suricata.sh ] || echo absent", wantOut: "absent\n"},
		{cmd: "uname -r", wantOut: "14.0-CURRENT\n"},
		{cmd: "printf '%s\\n' 'a'\"'\"'b $(x) `y`; z'", wantOut: "a'b $(x) `y`; z\n"},
		{cmd: "echo $(cat /etc/version) && false || echo fell-through", wantOut: "2.7.2-RELEASE\nfell-through\n"},
		{cmd: "mkdir /var/run/fwab.lock && printf 'owner=t\\npid=1\\n' > /var/run/fwab.lock/owner && cat /var/run/fwab.lock/owner", wantOut: "owner=t\npid=1\n"},
		{cmd: "mkdir /var/run/fwab.lock", wantErr: "mkdir: /var/run/fwab.lock: File exists", wantCode: 1},
		{cmd: "rm -r /var/run/fwab.lock && test ! -e /var/run/fwab.lock && echo gone", wantOut: "gone\n"},
		{cmd: "rm /nonexistent", wantErr: "No such file", wantCode: 1},
		{cmd: "rm -f /nonexistent"},
		{cmd: "cp /conf/config.xml /conf/backup/config-1.xml && ls /conf/backup", wantOut: "config-1.xml\n"},
		{cmd: "wc -l < /etc/version", wantOut: "       1\n"},
		{cmd: "sysctl -n hw.ncpu no.such.oid", wantOut: fmt.Sprintf("%d\n", runtime.NumCPU()), wantErr: "unknown oid 'no.such.oid'", wantCode: 1},
		{cmd: "ifconfig igb9", wantErr: "interface igb9 does not exist", wantCode: 1},
		{cmd: "pfctl -sr | wc -l", wantOut: "       3\n"},
		{cmd: "pfctl -sn | grep -c '^nat on igb0'", wantOut: "2\n"},
		{cmd: "pfctl -s Tables"},
		{cmd: "pfctl -si | grep 'current entries'", wantOut: "  current entries                        7               \n"},
		{cmd: "swanctl --list-sas"},
		{cmd: "/usr/local/sbin/pfSsh.php playback svc restart ipsec"},
		{cmd: "/usr/local/sbin/pfSsh.php playback svc restart nosuch", wantErr: "Could not find service", wantCode: 1},
		{cmd: "sha256 -q /etc/version", wantOut: sha256hex("2.7.2-RELEASE\n") + "\n"},
		{cmd: "ps ax -o pid,command | head -n 2", wantOut: "  PID COMMAND\n    1 /sbin/init\n"},
		{cmd: "pfSense-upgrade", wantOut: ">>> Updating repositories metadata... done.\n", wantErr: "use -y", wantCode: 1},
		{cmd: "pfSense-upgrade -c 2.7.2-RELEASE", wantOut: ">>> Updating repositories metadata... done.\n2.8.0 version of pfSense is available\n", wantCode: 2},
		{cmd: "pfSense-upgrade -x", wantErr: "illegal option -- x", wantCode: 1},
		{cmd: "pfSense-upgrade -l", wantErr: "option requires an argument -- l", wantCode: 1},
		{cmd: "if then", wantErr: "sh:", wantCode: 2},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			out, errOut, code := f.run(t, tt.cmd, tt.stdin)
			if code != tt.wantCode {
				t.Errorf("exit = %d, want %d (stderr %q)", code, tt.wantCode, errOut)
			}
			if out != tt.wantOut {
				t.Errorf("stdout = %q, want %q", out, tt.wantOut)
			}
			if tt.wantErr != "" && !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", errOut, tt.wantErr)
			}
			if tt.wantErr == "" && errOut != "" {
				t.Errorf("stderr = %q, want none", errOut)
			}
		})
	}
}

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestEmulatorRejectsUnknownKeysAndHosts(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	other := *f.client
	other.Auth = []ssh.AuthMethod{ssh.PublicKeys(testSigner(t))}
	if c, err := ssh.Dial("tcp", f.addr, &other); err == nil {
		c.Close()
		t.Errorf("ssh with an unknown user key succeeded, want it refused")
	}
	wrongHost := *f.client
	wrongHost.HostKeyCallback = ssh.FixedHostKey(testSigner(t).PublicKey())
	if c, err := ssh.Dial("tcp", f.addr, &wrongHost); err == nil {
		c.Close()
		t.Errorf("ssh accepted a host key that is not the lab's")
	}
}

func TestEmulatorWriteConfigAndHash(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	cfg := strings.Replace(string(DefaultConfig()), "<hostname>pfSense</hostname>", "<hostname>fw1</hostname>", 1)
	f.mustRun(t, "cat > /tmp/config.xml.new && mv /tmp/config.xml.new /cf/conf/config.xml", cfg)
	if got, want := strings.TrimSpace(f.mustRun(t, "sha256 -q /conf/config.xml", "")), sha256hex(cfg); got != want {
		t.Errorf("sha256 of the written config = %s, want %s", got, want)
	}
	if got := f.mustRun(t, "hostname", ""); got != "fw1.lab.fwab.test\n" {
		t.Errorf("hostname = %q, want fw1.lab.fwab.test", got)
	}
}

func TestEmulatorConfigCacheAndFilterReload(t *testing.T) {
	dp := newRecordingDataPlane()
	f := startEmulator(t, dp, testPorts, DefaultProfiles())
	f.setKnobs(t, "rules@lan=5")
	// pfSense 2.7 reads /tmp/config.cache when it exists: the new rules are
	// not loaded until the cache is removed.
	f.mustRun(t, "/etc/rc.filter_configure_sync", "")
	if got := f.mustRun(t, "pfctl -sr | wc -l", ""); got != "       3\n" {
		t.Errorf("with a stale config.cache, pfctl -sr | wc -l = %q, want 3 rules", got)
	}
	f.mustRun(t, "rm -f /tmp/config.cache && /etc/rc.filter_configure_sync", "")
	if got := f.mustRun(t, "pfctl -sr | wc -l", ""); got != "       8\n" {
		t.Errorf("after removing config.cache, pfctl -sr | wc -l = %q, want 8 rules", got)
	}
	if got := f.mustRun(t, "pfctl -sr | grep -c 'fwab-generated'", ""); got != "5\n" {
		t.Errorf("generated rules loaded = %q, want 5", got)
	}
	if n := strings.Count(dp.script, "198.19.200.1"); n != 5 {
		t.Errorf("data plane got %d generated rules, want 5", n)
	}
}

func TestEmulatorOffloads(t *testing.T) {
	dp := newRecordingDataPlane()
	f := startEmulator(t, dp, testPorts, DefaultProfiles())
	options := func(dev string) string {
		for _, l := range strings.Split(f.mustRun(t, "ifconfig "+dev, ""), "\n") {
			if strings.HasPrefix(l, "\toptions=") {
				return l
			}
		}
		t.Fatalf("ifconfig %s: no options line", dev)
		return ""
	}
	// Factory config: checksum on, TSO and LRO off.
	if o := options("igb1"); !strings.Contains(o, "TXCSUM") || strings.Contains(o, "TSO4") || strings.Contains(o, ",LRO") {
		t.Errorf("factory igb1 %s, want TXCSUM without TSO4 and LRO", o)
	}
	f.setKnobs(t, "offload.checksum=off")
	f.mustRun(t, "rm -f /tmp/config.cache && /etc/rc.filter_configure_sync", "")
	if o := options("igb1"); !strings.Contains(o, "TXCSUM") {
		t.Errorf("after a filter reload igb1 %s: offloads must change only when interfaces are reconfigured", o)
	}
	f.mustRun(t, "/etc/rc.reload_interfaces", "")
	for _, dev := range []string{"igb0", "igb1"} {
		if o := options(dev); strings.Contains(o, "CSUM") {
			t.Errorf("after rc.reload_interfaces %s %s, want no checksum offload", dev, o)
		}
	}
	if got := dp.offloads[testPorts.LanVeth]; got.TXCSUM || got.RXCSUM {
		t.Errorf("data plane offloads on %s = %+v, want checksum off", testPorts.LanVeth, got)
	}
	// ifconfig changes the running state only.
	f.mustRun(t, "ifconfig igb0 txcsum rxcsum tso lro", "")
	if o := options("igb0"); !strings.Contains(o, "TXCSUM") || !strings.Contains(o, "TSO4") || !strings.Contains(o, "LRO") {
		t.Errorf("after ifconfig igb0 txcsum rxcsum tso lro: %s", o)
	}
	if _, errOut, code := f.run(t, "ifconfig igb0 -polling", ""); code != 1 || !strings.Contains(errOut, "bad value") {
		t.Errorf("ifconfig igb0 -polling: exit %d stderr %q, want 1 and 'bad value'", code, errOut)
	}
}

func TestEmulatorNATAndBlocklist(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	f.setKnobs(t, "nat.outbound=disabled")
	f.mustRun(t, "rm -f /tmp/config.cache && /etc/rc.filter_configure_sync", "")
	if got := f.mustRun(t, "pfctl -sn", ""); got != "" {
		t.Errorf("pfctl -sn with NAT disabled = %q, want nothing", got)
	}
	f.setKnobs(t, "blocklist=on")
	f.mustRun(t, "rm -f /tmp/config.cache && /etc/rc.filter_configure_sync", "")
	if got := f.mustRun(t, "pfctl -s Tables", ""); got != "" {
		t.Errorf("blocklist loaded by a filter reload alone (%q): it needs pfBlockerNG's update", got)
	}
	out := f.mustRun(t, "/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php update", "")
	if !strings.Contains(out, "UPDATE PROCESS ENDED") {
		t.Errorf("pfblockerng.php update output %q", out)
	}
	if got := f.mustRun(t, "pfctl -s Tables", ""); got != BlocklistSet+"\n" {
		t.Errorf("pfctl -s Tables = %q, want %s", got, BlocklistSet)
	}
	if got := f.mustRun(t, "pfctl -t "+BlocklistSet+" -T show | wc -l", ""); got != "    1000\n" {
		t.Errorf("blocklist entries = %q, want 1000", got)
	}
	if got := f.mustRun(t, "pfctl -sr | grep -c pfB_", ""); got != "2\n" {
		t.Errorf("pfBlockerNG rules = %q, want 2", got)
	}
	if _, errOut, code := f.run(t, "pfctl -t nosuch -T show", ""); code != 1 || !strings.Contains(errOut, "Table does not exist") {
		t.Errorf("pfctl on a missing table: exit %d, stderr %q", code, errOut)
	}
}

// TestEmulatorRouterMode: with <system><disablefilter> a filter reload
// disables pf; pfctl -si reports it from the data plane, and nothing is
// left loaded that filters or translates.
func TestEmulatorRouterMode(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	if got := f.mustRun(t, "pfctl -si | head -n 1", ""); !strings.HasPrefix(got, "Status: Enabled for ") {
		t.Fatalf("pfctl -si after boot = %q, want Status: Enabled", got)
	}
	f.setKnobs(t, "filter=disabled")
	if got := f.mustRun(t, "pfctl -si | head -n 1", ""); !strings.HasPrefix(got, "Status: Enabled for ") {
		t.Errorf("pfctl -si before the filter reload = %q: writing config.xml must not change pf", got)
	}
	f.mustRun(t, "rm -f /tmp/config.cache && /etc/rc.filter_configure_sync", "")
	if got := f.mustRun(t, "pfctl -si | head -n 1", ""); !strings.HasPrefix(got, "Status: Disabled for ") {
		t.Errorf("pfctl -si in router mode = %q, want Status: Disabled", got)
	}
	for _, cmd := range []string{"pfctl -sr", "pfctl -sn"} {
		if got := f.mustRun(t, cmd, ""); got != "" {
			t.Errorf("%s in router mode = %q, want nothing", cmd, got)
		}
	}
	f.setKnobs(t, "filter=enabled")
	f.mustRun(t, "rm -f /tmp/config.cache && /etc/rc.filter_configure_sync", "")
	if got := f.mustRun(t, "pfctl -si | head -n 1", ""); !strings.HasPrefix(got, "Status: Enabled for ") {
		t.Errorf("pfctl -si after filter=enabled = %q, want Status: Enabled", got)
	}
}

func TestEmulatorDaemonRollback(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	script := "sleep 0.5\ncp /conf/backup/good.xml /conf/config.xml\nrm -f /tmp/config.cache\n/etc/rc.filter_configure_sync\n"
	f.mustRun(t, "cp /conf/config.xml /conf/backup/good.xml && cat > /var/run/fwab-rollback.sh", script)
	// Disarmed in time: nothing happens.
	f.mustRun(t, "daemon -f -p /var/run/fwab-rollback.pid /bin/sh /var/run/fwab-rollback.sh", "")
	pid := strings.TrimSpace(f.mustRun(t, "cat /var/run/fwab-rollback.pid", ""))
	if got := f.mustRun(t, "pgrep -lf fwab-rollback", ""); got != pid+" /bin/sh /var/run/fwab-rollback.sh\n" {
		t.Errorf("pgrep -lf fwab-rollback = %q, want pid %s", got, pid)
	}
	f.mustRun(t, "pkill -F /var/run/fwab-rollback.pid", "")
	if _, _, code := f.run(t, "pgrep -lf fwab-rollback", ""); code != 1 {
		t.Errorf("rollback still running after pkill -F")
	}
	if _, errOut, code := f.run(t, "kill "+pid, ""); code != 1 {
		t.Logf("stderr %q", errOut)
		t.Errorf("kill of an ended pid: exit %d, want 1", code)
	}
	// Armed and not disarmed: it restores the good config after the SSH
	// session that started it has ended.
	f.mustRun(t, "echo '<broken' > /conf/config.xml && daemon -f -p /var/run/fwab-rollback.pid /bin/sh /var/run/fwab-rollback.sh", "")
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _, _ := f.run(t, "head -n 1 /conf/config.xml", "")
		if out == "<?xml version=\"1.0\"?>\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rollback did not restore config.xml: first line %q", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for {
		if _, _, code := f.run(t, "test -e /var/run/fwab-rollback.pid", ""); code == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid file left after the rollback ended")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEmulatorUpgradeReboots(t *testing.T) {
	dp := newRecordingDataPlane()
	profiles := []Profile{
		{Version: "2.7.2-RELEASE", FreeBSD: "14.0-CURRENT"},
		{Version: "2.8.0-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: &Slowdown{Percent: 10}},
	}
	f := startEmulator(t, dp, testPorts, profiles)
	c, err := ssh.Dial("tcp", f.addr, f.client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	out, errOut, code := sshRun(t, c, "/usr/local/sbin/pfSense-upgrade -y", "")
	if code != 0 || !strings.Contains(out, "from 2.7.2-RELEASE to 2.8.0-RELEASE") {
		t.Fatalf("pfSense-upgrade -y: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The connection drops and SSH is refused for a while.
	deadline := time.Now().Add(3 * time.Second)
	for {
		if _, err := c.NewSession(); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the SSH connection survived the reboot")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if nc, err := net.DialTimeout("tcp", f.addr, time.Second); err == nil {
		nc.Close()
		t.Errorf("SSH port answered during the reboot")
	}
	// A major upgrade reboots twice: wait for the second boot.
	for start := time.Now(); f.em.Boots() < 3 || f.em.rebooting(); time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 15*time.Second {
			t.Fatalf("boots = %d, want 3 (two reboots for a major upgrade)", f.em.Boots())
		}
	}
	// The last stage runs with SSH up, for a while: the annotation is
	// there after the boot, and gone once the stage is done.
	if b, err := os.ReadFile(f.em.path(upgradeStageFile)); err != nil || !strings.HasPrefix(string(b), "3 ") {
		t.Errorf("next_stage annotation right after the last boot: %q (%v), want stage 3 still to run", b, err)
	}
	for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(f.em.path(upgradeStageFile))
		if err != nil {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("next_stage annotation left 5 s after the last boot: %q", b)
		}
	}
	start := time.Now()
	var c2 *ssh.Client
	for {
		if c2, err = ssh.Dial("tcp", f.addr, f.client); err == nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("SSH did not come back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer c2.Close()
	if out, _, _ := sshRun(t, c2, "cat /etc/version; uname -r", ""); out != "2.8.0-RELEASE\n15.0-CURRENT\n" {
		t.Errorf("after the upgrade: %q", out)
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.resets < 2 {
		t.Errorf("data plane resets = %d, want the reboot to reset and rebuild it", dp.resets)
	}
	// 90 % of the measured goodput (1000 up, 800 down), as wire rates.
	wantWan, wantLan := 900*WireFactor(1500), 720*WireFactor(1500)
	if !near(dp.shapes[testPorts.WanVeth], wantWan) || !near(dp.shapes[testPorts.LanVeth], wantLan) {
		t.Errorf("slowdown caps = %v, want WAN %.1f and LAN %.1f Mbit/s", dp.shapes, wantWan, wantLan)
	}
	if !strings.Contains(dp.script, "fwab:deny") {
		t.Errorf("the filter was not rebuilt after the reboot")
	}
	if out, _, _ := sshRun(t, c2, "pfSense-upgrade -y", ""); !strings.Contains(out, "up to date") {
		t.Errorf("upgrade at the last profile: %q, want 'up to date'", out)
	}
	if _, err := os.Stat(filepath.Join(f.em.Root, SlowdownStateFile)); err != nil {
		t.Errorf("slowdown state not recorded: %v", err)
	}
}

func near(got, want float64) bool { return math.Abs(got-want) < 1e-6*math.Max(1, math.Abs(want)) }

func TestEmulatorBootRestoresBackupWhenConfigIsBroken(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	good := strings.Replace(string(DefaultConfig()), "<hostname>pfSense</hostname>", "<hostname>fromBackup</hostname>", 1)
	f.mustRun(t, "cat > /conf/backup/config-1700000000.xml", good)
	f.mustRun(t, "echo '<pfsense><unclosed>' > /conf/config.xml && reboot", "")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := ssh.Dial("tcp", f.addr, f.client); err == nil {
			out, _, _ := sshRun(t, c, "hostname", "")
			c.Close()
			if out == "fromBackup.lab.fwab.test\n" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("after a reboot with a broken config.xml, the newest backup was not restored")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEmulatorPasswordFile(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	pwFile := filepath.Join(t.TempDir(), "ssh-password")
	f.em.PasswordFile = pwFile
	login := func(user, pw string) error {
		cfg := *f.client
		cfg.User = user
		cfg.Auth = []ssh.AuthMethod{ssh.Password(pw)}
		c, err := ssh.Dial("tcp", f.addr, &cfg)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := login("root", "s3cret"); err == nil {
		t.Errorf("password login with no password file succeeded")
	}
	if err := os.WriteFile(pwFile, []byte("s3cret\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		user, pw string
		ok       bool
	}{
		{"root", "s3cret", true},
		{"admin", "s3cret", true},
		{"root", "s3cre", false},
		{"root", "s3cret\nsecond line", false},
		{"nobody", "s3cret", false},
	}
	for _, tt := range tests {
		if err := login(tt.user, tt.pw); (err == nil) != tt.ok {
			t.Errorf("login %s with %q: err %v, want ok %v", tt.user, tt.pw, err, tt.ok)
		}
	}
}

// TestEmulatorSlowdownFollowsConfig: a tracking slowdown measures the
// running configuration again after every data-plane change (filter,
// interfaces, pfBlockerNG, Suricata, IPsec) and caps each direction from
// the median of its configuration's recent measurements; fixed caps never
// measure.
func TestEmulatorSlowdownFollowsConfig(t *testing.T) {
	dp := newRecordingDataPlane()
	f := startEmulator(t, dp, testPorts, []Profile{{Version: "2.8.1-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: &Slowdown{Percent: 10}}})
	k := WireFactor(1500)
	steps := []struct {
		name      string
		knobs     []string // config change before cmd (none: the same config again)
		cmd       string
		up, down  float64 // what the next measurement gives
		wantUp    float64 // the median the caps come from
		wantDown  float64
		wantState string
	}{
		{name: "1000 rules", knobs: []string{"rules@lan=1000"}, cmd: "/etc/rc.filter_configure_sync",
			up: 500, down: 300, wantUp: 500, wantDown: 300},
		{name: "same config again", cmd: "/etc/rc.reload_interfaces",
			up: 700, down: 500, wantUp: 600, wantDown: 400},
		{name: "and again", cmd: "/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php update",
			up: 650, down: 100, wantUp: 650, wantDown: 300},
		// Back to the boot configuration (a new <revision>): its pool has
		// the boot measurement (1000/800).
		{name: "rules removed", knobs: []string{"rules@lan=0"}, cmd: "/usr/local/sbin/pfSsh.php playback svc restart suricata",
			up: 1200, down: 1000, wantUp: 1100, wantDown: 900},
		{name: "ipsec restart", cmd: "/usr/local/sbin/pfSsh.php playback restartipsec",
			up: 900, down: 950, wantUp: 1000, wantDown: 950},
	}
	caps := func() (wan, lan float64, measured int) {
		dp.mu.Lock()
		defer dp.mu.Unlock()
		return dp.shapes[testPorts.WanVeth], dp.shapes[testPorts.LanVeth], dp.measured
	}
	wan, lan, n := caps()
	if !near(wan, 900*k) || !near(lan, 720*k) || n != 2*slowdownRuns {
		t.Fatalf("at boot: caps WAN %.1f LAN %.1f after %d measurements, want %.1f/%.1f after %d", wan, lan, n, 900*k, 720*k, 2*slowdownRuns)
	}
	for _, st := range steps {
		if len(st.knobs) > 0 {
			f.setKnobs(t, st.knobs...)
			f.mustRun(t, "rm -f /tmp/config.cache", "")
		}
		dp.mu.Lock()
		dp.up, dp.down = st.up, st.down
		dp.mu.Unlock()
		f.mustRun(t, st.cmd, "")
		wan, lan, m := caps()
		if !near(wan, 0.9*st.wantUp*k) || !near(lan, 0.9*st.wantDown*k) {
			t.Errorf("%s (%s): caps WAN %.1f LAN %.1f, want %.1f/%.1f (90 %% of %v up, %v down as wire rates)",
				st.name, st.cmd, wan, lan, 0.9*st.wantUp*k, 0.9*st.wantDown*k, st.wantUp, st.wantDown)
		}
		if m != n+2*slowdownRuns {
			t.Errorf("%s (%s): %d measurements, want %d (both directions again)", st.name, st.cmd, m, n+2*slowdownRuns)
		}
		n = m
	}
	b, err := os.ReadFile(filepath.Join(f.em.Root, SlowdownStateFile))
	if err != nil {
		t.Fatal(err)
	}
	var got SlowdownState
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := SlowdownState{Version: "2.8.1-RELEASE", Percent: 10, Tracking: true, UpMbit: 1000, DownMbit: 950,
		UpSamples: []float64{1000, 1000, 1200, 1200, 900, 900}, DownSamples: []float64{800, 800, 1000, 1000, 950, 950}, MTU: 1500,
		WanCapMbit: 900 * k, LanCapMbit: 855 * k, WanRateMbit: 900 * k, LanRateMbit: 855 * k}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(SlowdownState{}, "Measurement"), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", SlowdownStateFile, diff)
	}
}

func TestSlowdownWindowKeepsRecent(t *testing.T) {
	dp := newRecordingDataPlane()
	f := startEmulator(t, dp, testPorts, []Profile{{Version: "2.8.1-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: &Slowdown{Percent: 10}}})
	// Boot measured 1000 twice; then six more applies of the same config
	// (two runs each): only the last slowdownWindow (8) count.
	for _, v := range []float64{10, 20, 30, 40, 50, 60} {
		dp.mu.Lock()
		dp.up = v
		dp.mu.Unlock()
		f.mustRun(t, "/etc/rc.filter_configure_sync", "")
	}
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if want := 0.9 * 45 * WireFactor(1500); !near(dp.shapes[testPorts.WanVeth], want) {
		t.Errorf("WAN cap %.2f, want %.2f (90 %% of the median of the last 8 runs: 30 30 40 40 50 50 60 60)", dp.shapes[testPorts.WanVeth], want)
	}
}

func TestEmulatorFixedSlowdownDoesNotMeasure(t *testing.T) {
	dp := newRecordingDataPlane()
	f := startEmulator(t, dp, testPorts, []Profile{{Version: "2.8.1-RELEASE", FreeBSD: "15.0-CURRENT", Slowdown: &Slowdown{RateMbit: 500}}})
	f.mustRun(t, "/etc/rc.filter_configure_sync", "")
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.measured != 0 || dp.shapes[testPorts.WanVeth] != 500 || dp.shapes[testPorts.LanVeth] != 500 {
		t.Errorf("rate_mbit 500: caps %v after %d measurements, want 500 on both ports and no measurement", dp.shapes, dp.measured)
	}
}

// TestPfSenseBackupCleanup: cleanup_backupcache keeps the newest backups
// as <system><backupcount> says and lists each in backup.cache with its
// revision description and config version, newest first.
func TestPfSenseBackupCleanup(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	for i, at := range []string{"100", "300", "200"} {
		body := fmt.Sprintf("<?xml version=\"1.0\"?>\n<pfsense><version>23.3</version><revision><time>%s</time><description><![CDATA[edit %d]]></description></revision></pfsense>\n", at, i)
		f.mustRun(t, "cat > /conf/backup/config-"+at+".xml", body)
	}
	f.setKnobs(t, "xml:system/backupcount=2")
	f.em.mu.Lock()
	f.em.pfBackups = nil
	err := f.em.pfCleanupBackupsLocked()
	f.em.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, code := f.run(t, "test -e /conf/backup/config-100.xml", ""); code == 0 {
		t.Error("the oldest backup is still there with backupcount 2")
	}
	cache := f.mustRun(t, "cat /conf/backup/backup.cache", "")
	want := `a:2:{i:300;a:3:{s:11:"description";s:6:"edit 1";s:7:"version";s:4:"23.3";s:8:"filesize";`
	if !strings.HasPrefix(cache, want) || !strings.Contains(cache, `i:200;a:3:{s:11:"description";s:6:"edit 2";`) {
		t.Errorf("backup.cache = %q, want it to start %q and list 200 next", cache, want)
	}
}

// TestRebootEndsTheBootsScripts: a reboot ends every process, the rc.d
// scripts the boot before started among them: one still running (here,
// sleeping) when the box goes down again must not go on into the next
// boot.
func TestRebootEndsTheBootsScripts(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles(), func(e *Emulator) { e.RebootDelay = 200 * time.Millisecond })
	const hook, log = "/usr/local/etc/rc.d/zz_slow.sh", "/var/log/slow-hook.log"
	if err := os.WriteFile(f.em.path(hook), []byte("#!/bin/sh\n[ \"$1\" = start ] || exit 0\nsleep 1\necho ran >> "+log+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	boots := f.em.Boots()
	go f.em.Reboot(context.Background())
	// The first boot is up and its hook sleeps: reboot again.
	for f.em.Boots() == boots || f.em.Rebooting() {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(f.em.PackageStartDelay + 300*time.Millisecond)
	f.em.Reboot(context.Background())
	time.Sleep(1500 * time.Millisecond) // either hook would have written by now
	data, _ := os.ReadFile(f.em.path(log))
	if got := strings.Count(string(data), "ran"); got != 1 {
		t.Errorf("the hook finished %d times over two boots, the first cut short by the second's reboot; want once (the second boot's)", got)
	}
}
