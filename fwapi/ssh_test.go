package fwapi_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

func dial(t *testing.T, cfg fwapi.SSHConfig) *fwapi.SSHClient {
	t.Helper()
	c, err := fwapi.DialSSH(t.Context(), cfg)
	if err != nil {
		t.Fatalf("DialSSH: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestSSHHostKeyMismatchRefused(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	otherSigner, _ := ssh.NewSignerFromKey(other)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(srv.SSHAddr)}, otherSigner.PublicKey())
	if err := os.WriteFile(kh, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := srv.SSHConfig()
	cfg.KnownHosts = kh
	cfg.AcceptNewHostKey = true // must not override a changed key
	_, err := fwapi.DialSSH(t.Context(), cfg)
	var mismatch *fwapi.HostKeyMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("DialSSH with a changed host key = %v, want *HostKeyMismatchError", err)
	}
	for _, fp := range []string{ssh.FingerprintSHA256(srv.HostKey.PublicKey()), ssh.FingerprintSHA256(otherSigner.PublicKey())} {
		if !strings.Contains(err.Error(), fp) {
			t.Errorf("error %q does not show fingerprint %s", err, fp)
		}
	}
	if data, _ := os.ReadFile(kh); string(data) != line+"\n" {
		t.Errorf("known_hosts changed after a mismatch:\n%s", data)
	}
}

func TestSSHUnknownHostKey(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	cfg := srv.SSHConfig()
	cfg.KnownHosts = filepath.Join(t.TempDir(), "sub", "known_hosts")
	_, err := fwapi.DialSSH(t.Context(), cfg)
	var unknown *fwapi.UnknownHostKeyError
	if !errors.As(err, &unknown) {
		t.Fatalf("DialSSH with an unknown host = %v, want *UnknownHostKeyError", err)
	}
	if !strings.Contains(err.Error(), "--accept-new-host-key") || !strings.Contains(err.Error(), ssh.FingerprintSHA256(srv.HostKey.PublicKey())) {
		t.Errorf("error %q should show the fingerprint and the flag", err)
	}
	cfg.AcceptNewHostKey = true
	c := dial(t, cfg)
	c.Close()
	cfg.AcceptNewHostKey = false
	c = dial(t, cfg) // now known
	if out, err := c.Output(t.Context(), "echo hi"); err != nil || string(out) != "hi\n" {
		t.Errorf("Output(echo hi) = %q, %v", out, err)
	}
}

func TestSSHAuth(t *testing.T) {
	const password = "s3cret'$(x)"
	srv := labtest.Start(t, labtest.Options{Password: password})
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	os.WriteFile(pwFile, []byte(password+"\n"), 0o600)
	badFile := filepath.Join(dir, "bad")
	os.WriteFile(badFile, []byte("wrong\n"), 0o600)

	cfg := srv.SSHConfig()
	cfg.KeyFile = ""
	cfg.PasswordFile = pwFile
	dial(t, cfg)

	cfg.PasswordFile = badFile
	start := time.Now()
	_, err := fwapi.DialSSH(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("DialSSH with a wrong password = %v, want an authentication error", err)
	}
	if strings.Contains(err.Error(), "wrong") {
		t.Errorf("error %q leaks the password", err)
	}
	if time.Since(start) > 2*time.Second {
		t.Errorf("a bad password was retried (took %v)", time.Since(start))
	}

	cfg.PasswordFile = ""
	if _, err := fwapi.DialSSH(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "no authentication method") {
		t.Errorf("DialSSH with no auth = %v, want a clear error", err)
	}
	t.Setenv("SSH_AUTH_SOCK", "")
	cfg.Agent = true
	if _, err := fwapi.DialSSH(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "SSH_AUTH_SOCK") {
		t.Errorf("DialSSH with agent and no socket = %v, want an error naming SSH_AUTH_SOCK", err)
	}
}

func TestSSHRun(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	c := dial(t, srv.SSHConfig())
	ctx := t.Context()

	out, _, code, err := c.Run(ctx, "cat | wc -l", strings.NewReader("a\nb\nc\n"))
	if err != nil || code != 0 || strings.TrimSpace(string(out)) != "3" {
		t.Errorf("Run(cat | wc -l) = %q, %d, %v; want 3", out, code, err)
	}
	_, _, code, err = c.Run(ctx, "test -d /nonexistent", nil)
	if err != nil || code != 1 {
		t.Errorf("Run(test -d /nonexistent) = %d, %v; want exit 1", code, err)
	}
	_, errOut, code, err := c.Run(ctx, "frobnicate --now", nil)
	if err != nil || code != 127 || !strings.Contains(string(errOut), "not found") {
		t.Errorf("Run(frobnicate) = %q, %d, %v; want exit 127", errOut, code, err)
	}
	_, err = c.Output(ctx, "frobnicate --now")
	var ce *fwapi.CommandError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "command not found on the firewall") {
		t.Errorf("Output(frobnicate) = %v, want a *CommandError saying the command is missing", err)
	}
}

func TestSSHRunCancel(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	c := dial(t, srv.SSHConfig())
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, _, err := c.Run(ctx, "sleep 30", nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run(sleep 30) with a 200ms deadline = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancel took %v", d)
	}
	if out, err := c.Output(t.Context(), "echo still here"); err != nil || string(out) != "still here\n" {
		t.Errorf("after a cancelled command, Output = %q, %v", out, err)
	}
}

func TestSSHReconnect(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	c := dial(t, srv.SSHConfig())
	srv.SetFault(emu.Fault{LinkDown: true})
	time.Sleep(50 * time.Millisecond)
	if _, err := c.Output(t.Context(), "echo a"); err == nil {
		t.Fatalf("Output while unreachable = nil error")
	}
	srv.SetFault(emu.Fault{})
	if out, err := c.Output(t.Context(), "echo back"); err != nil || string(out) != "back\n" {
		t.Errorf("Output after the firewall came back = %q, %v; want a reconnect", out, err)
	}
}

func TestSSHUnreachableHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := labtest.Start(t, labtest.Options{})
	cfg := srv.SSHConfig()
	cfg.Addr = addr
	_, err = fwapi.DialSSH(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("DialSSH(closed port) = %v, want connection refused naming %s", err, addr)
	}
}

func TestSSHWriteFileAtomic(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	c := dial(t, srv.SSHConfig())
	ctx := t.Context()
	data := bytes.Repeat([]byte("<x>it's $(reboot) `reboot`; \"q\"\n</x>\r\n"), 2000)
	if err := c.WriteFileAtomic(ctx, "/conf/config.xml", data); err != nil {
		t.Fatal(err)
	}
	if got := srv.File(t, "/conf/config.xml"); !bytes.Equal(got, data) {
		t.Errorf("stored file differs from what was written")
	}
	got, err := c.ReadFile(ctx, "/conf/config.xml")
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("ReadFile = %d bytes, %v; want the %d bytes written", len(got), err, len(data))
	}
	if _, err := c.ReadFile(ctx, "/conf/missing.xml"); err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Errorf("ReadFile(missing) = %v, want the firewall's message", err)
	}
	if left := srv.Glob("/conf/.config.xml.fwab-tmp-*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestSSHWriteFileAtomicConnectionLost(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	old := []byte("<pfsense>old</pfsense>\n")
	srv.PutFile(t, "/conf/config.xml", old)
	c := dial(t, srv.SSHConfig())
	srv.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "cat > ", Drop: true, DropAfter: 1000}}})
	err := c.WriteFileAtomic(t.Context(), "/conf/config.xml", bytes.Repeat([]byte("new "), 10000))
	if !errors.Is(err, fwapi.ErrConnectionLost) {
		t.Fatalf("WriteFileAtomic with the link cut = %v, want ErrConnectionLost", err)
	}
	if got := srv.File(t, "/conf/config.xml"); !bytes.Equal(got, old) {
		t.Errorf("config.xml changed after a failed write: %.60q", got)
	}
	if left := srv.Glob("/conf/.config.xml.fwab-tmp-*"); len(left) != 0 {
		t.Errorf("partial temporary files left on the firewall: %v", left)
	}
}

func TestSSHQuotedPathsAreNotExecuted(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	c := dial(t, srv.SSHConfig())
	ctx := t.Context()
	// An injection would touch a file or reboot the firewall.
	boots := srv.Boots()
	for _, name := range []string{
		"/tmp/it's",
		"/tmp/$(touch pwned)",
		"/tmp/`reboot`",
		"/tmp/a; reboot",
		"/tmp/line\nreboot",
		"/tmp/\"dq\" && reboot",
	} {
		data := []byte("content of " + name)
		if err := c.WriteFileAtomic(ctx, name, data); err != nil {
			t.Errorf("WriteFileAtomic(%q): %v", name, err)
			continue
		}
		if got := srv.File(t, name); !bytes.Equal(got, data) {
			t.Errorf("file %q holds %q", name, got)
		}
		if got, err := c.ReadFile(ctx, name); err != nil || !bytes.Equal(got, data) {
			t.Errorf("ReadFile(%q) = %q, %v", name, got, err)
		}
	}
	if len(srv.Glob("/pwned")) != 0 || len(srv.Glob("/tmp/pwned")) != 0 || len(srv.Glob("/tmp/reboot")) != 0 {
		t.Errorf("an injected command ran")
	}
	time.Sleep(100 * time.Millisecond) // a reboot starts after its command returns
	if srv.Boots() != boots {
		t.Errorf("the firewall rebooted: an injected reboot ran")
	}
}

func TestSSHKeepAliveDropsDeadConnection(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	cfg := srv.SSHConfig()
	cfg.KeepAlive = 100 * time.Millisecond
	var logs syncBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := dial(t, cfg)
	srv.SetFault(emu.Fault{LinkDown: true})
	// No command runs: only the keepalive can notice the dead link.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "ssh keepalive") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "ssh keepalive") {
		t.Fatalf("no keepalive failure logged within 5s; logs:\n%s", logs.String())
	}
	srv.SetFault(emu.Fault{})
	if out, err := c.Output(t.Context(), "echo ok"); err != nil || string(out) != "ok\n" {
		t.Errorf("Output after a keepalive failure = %q, %v; want a fresh connection", out, err)
	}
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSSHAgentAuth(t *testing.T) {
	srv := labtest.Start(t, labtest.Options{})
	pem, err := os.ReadFile(srv.Target.SSH.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ssh.ParseRawPrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	keyring := agent.NewKeyring()
	if err := keyring.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { agent.ServeAgent(keyring, c); c.Close() }()
		}
	}()
	t.Setenv("SSH_AUTH_SOCK", sock)
	cfg := srv.SSHConfig()
	cfg.KeyFile = ""
	cfg.Agent = true
	c := dial(t, cfg)
	if out, err := c.Output(t.Context(), "echo agent"); err != nil || string(out) != "agent\n" {
		t.Errorf("Output over agent auth = %q, %v", out, err)
	}
}

func TestOpenAndDialSSHHost(t *testing.T) {
	em := labtest.Start(t, labtest.Options{})
	target := *em.Target
	target.Name = "fw1"
	spec := *target.SSH
	fw, err := fwapi.Open(t.Context(), &target, fwapi.OpenOptions{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer fw.Close()
	if info, err := fw.Info(t.Context()); err != nil || info.Version != "2.7.2-RELEASE" {
		t.Errorf("Info over Open = %+v, %v", info, err)
	}
	sh, err := fwapi.DialSSHHost(t.Context(), &fwapi.SSHHost{Host: target.Host, SSHSpec: spec}, fwapi.OpenOptions{})
	if err != nil {
		t.Fatalf("DialSSHHost: %v", err)
	}
	defer sh.Close()
	var out bytes.Buffer
	if code, _, err := sh.Stream(t.Context(), "echo streamed", &out); err != nil || code != 0 || out.String() != "streamed\n" {
		t.Errorf("Stream = %d, %v, %q", code, err, out.String())
	}
	target.Flavor = "sophos"
	if _, err := fwapi.Open(t.Context(), &target, fwapi.OpenOptions{}); err == nil || !strings.Contains(err.Error(), `no driver for flavor "sophos"`) {
		t.Errorf("Open(sophos) = %v, want no driver", err)
	}
	target.Flavor, target.SSH = "pfsense", nil
	if _, err := fwapi.Open(t.Context(), &target, fwapi.OpenOptions{}); err == nil || !strings.Contains(err.Error(), "no ssh section") {
		t.Errorf("Open without ssh = %v, want a clear error", err)
	}
}

// TestSSHCommandsSurviveTheLoginShell: every command reaches POSIX sh
// unchanged on both products, OPNsense's csh login shell included, with
// newlines, `!`, both quotes, `$` and a backslash-newline in it; and the
// emulated OPNsense refuses the same script sent as a plain command string,
// as its tcsh does.
func TestSSHCommandsSurviveTheLoginShell(t *testing.T) {
	script := "x=\"it's\" y=\"a!b\"\nif [ -n \"$x\" ]; then\n  echo \"$x $y\" \\\n    '$HOME !1' \"$(echo sub)\" 'q'\\''t'\nfi"
	want := "it's a!b $HOME !1 sub q't\n"
	for _, p := range []configxml.Flavor{configxml.PfSense, configxml.OPNsense} {
		t.Run(string(p), func(t *testing.T) {
			if p == configxml.OPNsense && emu.TcshPath() == "" {
				t.Skip("tcsh is not installed (make setup): the emulated OPNsense cannot run its csh login shell")
			}
			srv := labtest.Start(t, labtest.Options{Product: p})
			c := dial(t, srv.SSHConfig())
			out, errOut, code, err := c.Run(t.Context(), script, nil)
			if err != nil || code != 0 || string(out) != want {
				t.Errorf("Run = %q, stderr %q, exit %d, %v; want %q", out, errOut, code, err, want)
			}
			out, _, code, err = c.Run(t.Context(), "cat", strings.NewReader("it's!\n$x\n"))
			if err != nil || code != 0 || string(out) != "it's!\n$x\n" {
				t.Errorf("Run(cat) with stdin = %q, exit %d, %v", out, code, err)
			}
			if p != configxml.OPNsense {
				return
			}
			raw := rawExec(t, srv.SSHConfig(), script)
			if raw == 0 {
				t.Errorf("the unwrapped script ran under the emulated OPNsense's csh; a real box refuses it")
			}
		})
	}
}

// rawExec sends cmd as the SSH command string itself, bypassing fwapi.
func rawExec(t *testing.T, cfg fwapi.SSHConfig, cmd string) int {
	t.Helper()
	pem, err := os.ReadFile(cfg.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ssh.Dial("tcp", cfg.Addr, &ssh.ClientConfig{User: cfg.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)}, HostKeyCallback: ssh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	sess, err := client.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var exitErr *ssh.ExitError
	if err := sess.Run(cmd); errors.As(err, &exitErr) {
		return exitErr.ExitStatus()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}
