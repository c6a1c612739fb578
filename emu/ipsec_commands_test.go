package emu_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// fakeIPsec records what the emulator asks of the IPsec plane.
type fakeIPsec struct {
	mu      sync.Mutex
	applied []string // "conn esp", "reload conn esp", "stop" or "swanctl ARGS"
	sas     string
	code    int
	fail    error // returned by Apply and Reload
}

func (f *fakeIPsec) Reload(ctx context.Context, conn string, t *configxml.Tunnel, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, "reload "+conn+" "+t.Proposal.IKE.String()+"/"+t.Proposal.ESP.String())
	return f.fail
}

// Swanctl answers --list-sas with the sample and records anything else.
func (f *fakeIPsec) Swanctl(ctx context.Context, args ...string) ([]byte, int, error) {
	if len(args) == 1 && args[0] == "--list-sas" {
		return f.ListSAs(ctx)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, "swanctl "+strings.Join(args, " "))
	return nil, 0, nil
}

func (f *fakeIPsec) Apply(ctx context.Context, conn string, t *configxml.Tunnel, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, conn+" "+t.Proposal.IKE.String()+"/"+t.Proposal.ESP.String())
	return f.fail
}

func (f *fakeIPsec) ListSAs(ctx context.Context) ([]byte, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []byte(f.sas), f.code, nil
}

func (f *fakeIPsec) Stop(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, "stop")
	return nil
}

func (f *fakeIPsec) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.applied...)
}

// TestEmulatorIPsecCommands: the driver applies an IPsec change as the GUI
// does (ipsec_configure(), a reload in the background) and re-establishes
// the tunnel under test with swanctl; restartipsec restarts strongSwan in
// the background; switching the tunnel off stops it in the foreground; the
// swanctl forms fwab uses pass through with strongSwan's output and exit
// status, others are refused. No root needed.
func TestEmulatorIPsecCommands(t *testing.T) {
	ip := &fakeIPsec{sas: listSAsSample}
	f := labtest.Start(t, labtest.Options{SSHVia: emu.NoManagement, Configure: func(e *emu.Emulator) { e.IPsec = ip }})
	fw := f.Open(t)
	ctx := context.Background()
	booted := len(ip.calls()) // the boot stops IPsec: the factory config has no tunnel

	labtest.ApplyKnobs(t, fw, "ipsec@fwab=aes256gcm16")
	waitBackground(t, f.Emulator)
	if _, errOut, code := f.Run(t, "/usr/local/sbin/pfSsh.php playback restartipsec", ""); code != 0 {
		t.Fatalf("restartipsec: exit %d, %s", code, errOut)
	}
	if got := ip.calls()[booted:]; slices.Contains(got, "con1 aes256gcm16-sha256-modp2048/aes256gcm16") {
		t.Errorf("restartipsec restarted strongSwan before it returned: %q; the box restarts it in the background", got)
	}
	waitBackground(t, f.Emulator)
	labtest.ApplyKnobs(t, fw, "ipsec@fwab=none")
	want := []string{
		// The GUI's apply: a reload in the background, which the driver
		// waits out (pgrep strongswanrc); the sample SA already shows the
		// proposal, so the tunnel is left as it is.
		"reload con1 aes256gcm16-sha256-modp2048/aes256gcm16",
		// restartipsec: a restart, in the background.
		"con1 aes256gcm16-sha256-modp2048/aes256gcm16",
		// none: stopped in the foreground.
		"stop",
	}
	if diff := cmp.Diff(want, ip.calls()[booted:]); diff != "" {
		t.Errorf("IPsec plane calls (-want +got):\n%s", diff)
	}
	conf, err := os.ReadFile(f.Path(emu.SwanctlConf))
	if err == nil {
		t.Errorf("%s still exists after ipsec@fwab=none: %q", emu.SwanctlConf, conf)
	}

	st, err := fw.RuntimeState(ctx)
	if err != nil {
		t.Fatalf("RuntimeState: %v", err)
	}
	wantSAs := []fwapi.IPsecSA{{IKE: "con1", Name: "con1", State: "INSTALLED", Encr: "AES_GCM_16-256", BytesIn: 12345, BytesOut: 67890, Proposals: "AES_GCM_16-256"}}
	if diff := cmp.Diff(wantSAs, st.IPsec); diff != "" {
		t.Errorf("RuntimeState.IPsec from the passed-through swanctl output (-want +got):\n%s", diff)
	}

	ip.mu.Lock()
	ip.sas, ip.code = "connecting to 'unix:///var/run/charon.vici' failed: No such file or directory\nError: connecting to 'default' URI failed: No such file or directory\n", 1
	ip.mu.Unlock()
	out, _, code := f.Run(t, "swanctl --list-sas", "")
	if code != 1 || !strings.Contains(out, "charon.vici") {
		t.Errorf("swanctl --list-sas with charon stopped: exit %d, %q; want exit 1 and the vici error", code, out)
	}
	if st, err := fw.RuntimeState(ctx); err != nil || len(st.IPsec) != 0 {
		t.Errorf("RuntimeState with charon stopped: %v, %d SAs; want no error and no SA", err, len(st.IPsec))
	}
	for _, cmd := range []string{"swanctl --load-all", "swanctl --initiate --child", "swanctl --terminate --ike con1 --bogus"} {
		if _, _, code := f.Run(t, cmd, ""); code != 1 {
			t.Errorf("%s: exit %d, want 1 (not emulated)", cmd, code)
		}
	}

	// A tunnel that does not come up on the new proposal makes the apply
	// fail, saying what the SAs show.
	ip.mu.Lock()
	ip.sas, ip.code = listSAsSample, 0
	ip.mu.Unlock()
	fw2, err := fwapi.Open(ctx, f.Target, fwapi.OpenOptions{PfSense: fwapi.PfSenseOptions{IPsecTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fw2.Close() })
	before := len(ip.calls())
	err = labtest.EditAndApply(t, fw2, "", func(c *configxml.Config) error { return c.Set("ipsec@fwab", "aes128gcm16") })
	if err == nil || !strings.Contains(err.Error(), "did not come up with ESP AES_GCM_16-128") || !strings.Contains(err.Error(), "con1 INSTALLED AES_GCM_16-256") {
		t.Errorf("apply with the tunnel stuck on the old proposal: %v; want the proposals named", err)
	}
	// Taken down and up, only that tunnel, and more than once.
	var downs, ups int
	for _, c := range ip.calls()[before:] {
		switch c {
		case "swanctl --terminate --ike con1 --force --timeout 10":
			downs++
		case "swanctl --initiate --child con1 --timeout 20":
			ups++
		case "reload con1 aes128gcm16-sha256-modp2048/aes128gcm16":
		default:
			t.Errorf("unexpected IPsec plane call %q", c)
		}
	}
	if downs < 2 || ups != downs {
		t.Errorf("%d terminates and %d initiates of con1, want the same number, at least 2", downs, ups)
	}
}

// waitBackground waits for the emulator's background processes (the
// products' mwexec_bg) to end.
func waitBackground(t *testing.T, e *emu.Emulator) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.BackgroundProcesses() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("background processes still running after 10 s: %d", e.BackgroundProcesses())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const listSAsSample = `con1: #1, ESTABLISHED, IKEv2, 0b5f5c2a1f6c2f3e_i* 6a7c1d9e0b2f4a51_r
  local  'dut.fwab.lab' @ 198.19.0.1[4500]
  remote 'peer.fwab.lab' @ 198.19.0.2[4500]
  AES_GCM_16-256/PRF_HMAC_SHA2_256/MODP_2048
  established 3s ago
  con1: #1, reqid 1, INSTALLED, TUNNEL-in-UDP, ESP:AES_GCM_16-256
    installed 3s ago
    in  c8a1b2c3,  12345 bytes,    10 packets,     1s ago
    out c1d2e3f4,  67890 bytes,    20 packets,     1s ago
    local  198.18.1.0/24
    remote 198.19.1.0/24
`

// TestEmulatorCharonPID: ps shows the DUT's charon while strongSwan runs,
// under daemon(8) as pfSense's strongswanrc starts it; a reload (the GUI's
// apply) keeps its pid, a restart gives a new one, and it is gone once
// IPsec is off.
func TestEmulatorCharonPID(t *testing.T) {
	ip := &fakeIPsec{sas: listSAsSample}
	f := labtest.Start(t, labtest.Options{SSHVia: emu.NoManagement, Configure: func(e *emu.Emulator) { e.IPsec = ip }})
	fw := f.Open(t)
	charon := func() []int {
		t.Helper()
		out, errOut, code := f.Run(t, "ps ax -o pid,command", "")
		if code != 0 {
			t.Fatalf("ps: exit %d, %s", code, errOut)
		}
		return fwapi.ParseServicePIDs(out, []string{"charon"})["charon"]
	}
	if got := charon(); len(got) != 0 {
		t.Fatalf("charon %v with no tunnel, want none", got)
	}
	labtest.ApplyKnobs(t, fw, "ipsec@fwab=aes256gcm16")
	waitBackground(t, f.Emulator)
	started := charon()
	if len(started) != 1 {
		t.Fatalf("charon %v after the tunnel's apply, want one", started)
	}
	ip.mu.Lock()
	ip.sas = strings.ReplaceAll(listSAsSample, "AES_GCM_16-256", "AES_GCM_16-128") // what the new proposal negotiates
	ip.mu.Unlock()
	labtest.ApplyKnobs(t, fw, "ipsec@fwab=aes128gcm16")
	waitBackground(t, f.Emulator)
	if got := charon(); !slices.Equal(got, started) {
		t.Errorf("charon %v after a reload, want it still %v", got, started)
	}
	if _, errOut, code := f.Run(t, "/usr/local/sbin/pfSsh.php playback restartipsec", ""); code != 0 {
		t.Fatalf("restartipsec: exit %d, %s", code, errOut)
	}
	waitBackground(t, f.Emulator)
	if got := charon(); len(got) != 1 || got[0] == started[0] {
		t.Errorf("charon %v after a restart, want a new pid (was %v)", got, started)
	}
	labtest.ApplyKnobs(t, fw, "ipsec@fwab=none")
	if got := charon(); len(got) != 0 {
		t.Errorf("charon %v with IPsec off, want none", got)
	}
}
