package fwapi_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/fwab/fwab/fwapi"
)

// hostKeys are the host keys a multi-key test server can offer.
type hostKeys struct {
	ed25519, ecdsa, rsa ssh.Signer
}

func newHostKeys(t *testing.T) hostKeys {
	t.Helper()
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var k hostKeys
	for dst, key := range map[*ssh.Signer]any{&k.ed25519: edKey, &k.ecdsa: ecKey, &k.rsa: rsaKey} {
		if *dst, err = ssh.NewSignerFromKey(key); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// startMultiKeyServer is an SSH server on loopback that offers every host
// key given, as sshd does with several HostKey lines, and accepts any
// password. It only handshakes: DialSSH needs no more.
func startMultiKeyServer(t *testing.T, keys ...ssh.Signer) string {
	t.Helper()
	cfg := &ssh.ServerConfig{
		PasswordCallback: func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) { return &ssh.Permissions{}, nil },
		ServerVersion:    "SSH-2.0-OpenSSH_9.6 FreeBSD-20240104",
	}
	for _, k := range keys {
		cfg.AddHostKey(k)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					return
				}
				defer sc.Close()
				go ssh.DiscardRequests(reqs)
				for ch := range chans {
					ch.Reject(ssh.Prohibited, "handshake only")
				}
			})
		}
	})
	return ln.Addr().String()
}

// multiKeyConfig dials addr with a password and the known_hosts file kh.
func multiKeyConfig(t *testing.T, addr, kh string) fwapi.SSHConfig {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return fwapi.SSHConfig{Addr: addr, User: "root", PasswordFile: pw, KnownHosts: kh,
		ConnectTimeout: 5 * time.Second, KeepAlive: -1, Retries: 1, Backoff: time.Millisecond}
}

func writeKnownHosts(t *testing.T, lines ...string) string {
	t.Helper()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return kh
}

// TestSSHHostKeyAlgorithmsFollowKnownHosts: a firewall offers ed25519,
// ECDSA and RSA host keys (sshd's default) and known_hosts holds only one
// of them; fwab must ask for that type, not Go's first choice (ECDSA),
// and connect, as ssh(1) does.
func TestSSHHostKeyAlgorithmsFollowKnownHosts(t *testing.T) {
	keys := newHostKeys(t)
	addr := startMultiKeyServer(t, keys.ecdsa, keys.rsa, keys.ed25519)
	host := knownhosts.Normalize(addr)
	for _, tc := range []struct {
		name  string
		known ssh.Signer
	}{{"ed25519", keys.ed25519}, {"rsa", keys.rsa}, {"ecdsa", keys.ecdsa}} {
		t.Run(tc.name, func(t *testing.T) {
			kh := writeKnownHosts(t, "# fwab test", knownhosts.Line([]string{host}, tc.known.PublicKey()))
			before, _ := os.ReadFile(kh)
			c, err := fwapi.DialSSH(t.Context(), multiKeyConfig(t, addr, kh))
			if err != nil {
				t.Fatalf("DialSSH with only the %s host key in known_hosts = %v, want a connection", tc.name, err)
			}
			c.Close()
			if after, _ := os.ReadFile(kh); string(after) != string(before) {
				t.Errorf("known_hosts changed:\n%s", after)
			}
		})
	}
	t.Run("unknown host keeps the default order", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		cfg := multiKeyConfig(t, addr, kh)
		cfg.AcceptNewHostKey = true
		c, err := fwapi.DialSSH(t.Context(), cfg)
		if err != nil {
			t.Fatalf("DialSSH(accept new) = %v", err)
		}
		c.Close()
		data, _ := os.ReadFile(kh)
		// Go's default prefers ECDSA; nothing in known_hosts says otherwise.
		if want := knownhosts.Line([]string{host}, keys.ecdsa.PublicKey()); strings.TrimSpace(string(data)) != want {
			t.Errorf("known_hosts = %q, want the ECDSA key %q", data, want)
		}
		cfg.AcceptNewHostKey = false
		c, err = fwapi.DialSSH(t.Context(), cfg)
		if err != nil {
			t.Fatalf("DialSSH once the host is known = %v", err)
		}
		c.Close()
	})
}

// TestSSHHostKeyAlgorithmsCertAuthority: known_hosts holds only a
// @cert-authority line (an ed25519 CA); the firewall offers a plain
// ed25519 key and an RSA host certificate signed by that CA. fwab must ask
// for certificates first, not for the CA's key type.
func TestSSHHostKeyAlgorithmsCertAuthority(t *testing.T) {
	keys := newHostKeys(t)
	_, caKey, _ := ed25519.GenerateKey(rand.Reader)
	ca, err := ssh.NewSignerFromKey(caKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := &ssh.Certificate{Key: keys.rsa.PublicKey(), CertType: ssh.HostCert, ValidPrincipals: []string{"127.0.0.1"}, ValidBefore: ssh.CertTimeInfinity}
	if err := cert.SignCert(rand.Reader, ca); err != nil {
		t.Fatal(err)
	}
	certSigner, err := ssh.NewCertSigner(cert, keys.rsa)
	if err != nil {
		t.Fatal(err)
	}
	addr := startMultiKeyServer(t, keys.ed25519, certSigner)
	kh := writeKnownHosts(t, "@cert-authority "+knownhosts.Line([]string{knownhosts.Normalize(addr)}, ca.PublicKey()))
	c, err := fwapi.DialSSH(t.Context(), multiKeyConfig(t, addr, kh))
	if err != nil {
		t.Fatalf("DialSSH with a known host CA = %v, want a connection", err)
	}
	c.Close()
}

// TestSSHHostKeyChangedMessage: a real change (known_hosts holds another
// ed25519 key than the firewall's) is refused with a message that shows
// both fingerprints and the known_hosts line, calls it a possible attack,
// and says to confirm the new key on the console before removing the old
// line, never simply to delete it and trust again.
func TestSSHHostKeyChangedMessage(t *testing.T) {
	keys := newHostKeys(t)
	addr := startMultiKeyServer(t, keys.ecdsa, keys.ed25519)
	_, oldKey, _ := ed25519.GenerateKey(rand.Reader)
	old, _ := ssh.NewSignerFromKey(oldKey)
	kh := writeKnownHosts(t, "# fwab test", knownhosts.Line([]string{knownhosts.Normalize(addr)}, old.PublicKey()))
	before, _ := os.ReadFile(kh)
	cfg := multiKeyConfig(t, addr, kh)
	cfg.AcceptNewHostKey = true // must not override a changed key
	_, err := fwapi.DialSSH(t.Context(), cfg)
	var mismatch *fwapi.HostKeyMismatchError
	if !errors.As(err, &mismatch) {
		t.Fatalf("DialSSH with a changed host key = %v, want *HostKeyMismatchError", err)
	}
	msg := err.Error()
	for _, want := range []string{
		ssh.FingerprintSHA256(keys.ed25519.PublicKey()), // offered: the same type as the recorded key
		ssh.FingerprintSHA256(old.PublicKey()),
		kh + ":2",
		"attack",
		"ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "if the firewall was reinstalled") {
		t.Errorf("message %q suggests re-trusting on a guess", msg)
	}
	confirm, remove := strings.Index(msg, "ssh-keygen"), strings.Index(msg, "remove")
	if confirm < 0 || remove < 0 || remove < confirm {
		t.Errorf("message %q must say to confirm the fingerprint before removing the old line", msg)
	}
	if after, _ := os.ReadFile(kh); string(after) != string(before) {
		t.Errorf("known_hosts changed after a mismatch:\n%s", after)
	}
}
