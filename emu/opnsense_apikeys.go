package emu

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fwab/fwab/internal/atomicfile"
)

// Files of the OPNsense lab's API, in the lab folder.
const (
	APICAFile     = "keys/api-ca.pem"   // the lab's CA certificate: the targets file's ca_file
	apiCertFile   = "keys/api-cert.pem" // the server certificate, signed by the lab CA
	apiKeyPEM     = "keys/api-cert.key" // its private key (0600)
	APIKeyFile    = "keys/api-key"      // the API key (0600)
	APISecretFile = "keys/api-secret"   // the API secret (0600)
)

// EnsureAPICert creates the lab's own CA and a server certificate for
// 127.0.0.1 signed by it, unless they exist, and returns the server
// certificate. The CA's private key is not kept: nothing else is ever
// signed with it, so a client that trusts the lab CA trusts this server
// only.
func EnsureAPICert(dir string) (tls.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, apiCertFile), filepath.Join(dir, apiKeyPEM)
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil {
		return c, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return tls.Certificate{}, fmt.Errorf("lab api certificate: %w", err)
	}
	caPEM, certPEM, keyPEM, err := newAPICertificates(time.Now())
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "keys"), 0o700); err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, APICAFile), caPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := atomicfile.WriteFile(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// newAPICertificates makes a CA and a 127.0.0.1 server certificate it
// signs, both valid for ten years from now, as PEM.
func newAPICertificates(now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	serial := func() (*big.Int, error) { return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127)) }
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, nil, err
	}
	ca := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: "fwab lab CA", Organization: []string{"fwab lab"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	if sn, err = serial(); err != nil {
		return nil, nil, nil, err
	}
	leaf := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: "OPNsense.lab.fwab.test", Organization: []string{"fwab lab"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "OPNsense.lab.fwab.test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	return caPEM, certPEM, keyPEM, nil
}

// EnsureAPICredentials creates the API key and secret (80 base64
// characters each, as OPNsense makes them) in 0600 files, unless they
// exist, and returns them.
func EnsureAPICredentials(dir string) (APICredentials, error) {
	var c APICredentials
	for _, f := range []struct {
		path string
		dst  *string
	}{{filepath.Join(dir, APIKeyFile), &c.Key}, {filepath.Join(dir, APISecretFile), &c.Secret}} {
		data, err := os.ReadFile(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			b := make([]byte, 60)
			if _, err := rand.Read(b); err != nil {
				return APICredentials{}, err
			}
			data = []byte(base64.StdEncoding.EncodeToString(b) + "\n")
			if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
				return APICredentials{}, err
			}
			if err := atomicfile.WriteFile(f.path, data, 0o600); err != nil {
				return APICredentials{}, err
			}
		} else if err != nil {
			return APICredentials{}, err
		}
		*f.dst = strings.TrimSpace(string(data))
		if *f.dst == "" {
			return APICredentials{}, fmt.Errorf("%s is empty: run 'fwab lab down' and 'fwab lab up' again", f.path)
		}
	}
	return c, nil
}
