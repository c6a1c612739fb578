package emu

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/fwab/fwab/internal/atomicfile"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Layout of the keys in a lab folder, which the emulator and the lab share.
const (
	HostKeyFile   = "keys/ssh_host_ed25519_key"
	UserKeyFile   = "keys/id_ed25519"
	KnownHostFile = "keys/known_hosts"
	// PasswordFile (in the lab folder), when written, holds a password the
	// emulated firewall accepts for root and admin besides the user key.
	PasswordFile = "keys/ssh-password"
)

// EnsureKey loads or creates an ed25519 private key in OpenSSH format.
func EnsureKey(path string) (ssh.Signer, error) {
	if data, err := os.ReadFile(path); err == nil {
		return ssh.ParsePrivateKey(data)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "fwab lab")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	return signer, atomicfile.WriteFile(path+".pub", ssh.MarshalAuthorizedKey(signer.PublicKey()), 0o644)
}

// WriteKnownHosts writes the known_hosts line of the host key in dir for
// addr.
func WriteKnownHosts(dir, addr string) error {
	host, err := EnsureKey(filepath.Join(dir, HostKeyFile))
	if err != nil {
		return err
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, host.PublicKey())
	return atomicfile.WriteFile(filepath.Join(dir, KnownHostFile), []byte(line+"\n"), 0o644)
}
