package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
	"github.com/fwab/fwab/store/pgtest"
)

// secrets are credentials a test hands fwab, by name. Each value is
// distinctive (a fixed marker and random hex) so that a hit is a leak and
// never a coincidence.
type secrets map[string]string

func newSecret(kind string) string {
	var b [8]byte
	rand.Read(b[:])
	return "Fwab" + kind + "Secret" + hex.EncodeToString(b[:])
}

// forms are the ways a secret could be written out: as is, hex-encoded,
// and base64-encoded at each of the three byte alignments, so that it is
// found inside a longer encoded text too (an HTTP basic auth header holds
// base64 of "key:secret").
func (s secrets) forms() map[string][]byte {
	out := map[string][]byte{}
	for name, v := range s {
		out[name] = []byte(v)
		out[name+" (hex)"] = []byte(hex.EncodeToString([]byte(v)))
		for k := range 3 {
			enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", k) + v))
			// Drop the quantum that mixes in the prefix and the last one,
			// which depends on what follows.
			out[fmt.Sprintf("%s (base64, offset %d)", name, k)] = []byte(enc[4 : len(enc)-4])
		}
	}
	return out
}

// secretScan records what was searched, for the test's log.
type secretScan struct {
	secrets secrets
	outputs []string
	bytes   int
}

// find names the secrets (and their forms) found in data, with context.
func (s secrets) find(data []byte) []string {
	forms := s.forms()
	names := make([]string, 0, len(forms))
	for name := range forms {
		names = append(names, name)
	}
	sort.Strings(names)
	var hits []string
	for _, name := range names {
		if i := bytes.Index(data, forms[name]); i >= 0 {
			lo, hi := max(0, i-60), min(len(data), i+len(forms[name])+60)
			hits = append(hits, fmt.Sprintf("the %s: …%q…", name, data[lo:hi]))
		}
	}
	return hits
}

// check fails the test once for every secret found in data.
func (sc *secretScan) check(t *testing.T, where string, data []byte) {
	t.Helper()
	sc.outputs = append(sc.outputs, where)
	sc.bytes += len(data)
	for _, hit := range sc.secrets.find(data) {
		t.Errorf("%s holds %s", where, hit)
	}
}

// checkTree checks every regular file under root except those skip names
// (paths relative to root), and returns how many it read.
func (sc *secretScan) checkTree(t *testing.T, root string, skip func(rel string) bool) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if skip != nil && skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sc.check(t, "file "+path, data)
		n++
		return nil
	})
	if err != nil {
		t.Errorf("scan %s: %v", root, err)
	}
	return n
}

// fwabScan runs one command line in-process and checks its stdout and stderr.
func (sc *secretScan) fwabScan(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code = fwabRun(t, args...)
	what := "fwab " + strings.Join(args, " ")
	sc.check(t, "stdout of "+what, []byte(stdout))
	sc.check(t, "stderr of "+what, []byte(stderr))
	return stdout, stderr, code
}

func writeSecretFile(t *testing.T, dir, name, value string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSecretsStayOutOfOutputs drives an emulated pfSense that takes an SSH
// password and an emulated OPNsense that takes an API key and secret through
// every command that reads them, at the most verbose log level, plus
// commands that fail on a wrong password or secret, and searches every
// output and every file fwab wrote for the credentials and the IPsec PSK a
// matrix names.
func TestSecretsStayOutOfOutputs(t *testing.T) {
	sec := secrets{
		"ssh password": newSecret("SSH"),
		"api key":      newSecret("Key"),
		"api secret":   newSecret("API"),
		"ipsec psk":    newSecret("PSK"),
	}
	sc := &secretScan{secrets: sec}
	keep := t.TempDir() // the secret files: fwab reads them, never writes them
	out := t.TempDir()  // everything fwab writes
	t.Setenv("XDG_STATE_HOME", filepath.Join(out, "state"))

	pf := labtest.Start(t, labtest.Options{Password: sec["ssh password"]})
	opn := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	opnTarget := opn.APITarget(t)
	// The emulator makes its own API key and secret.
	for name, file := range map[string]string{"api key": opnTarget.API.KeyFile, "api secret": opnTarget.API.SecretFile} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		sec[name] = strings.TrimSpace(string(data))
	}
	host, port := splitHostPort(t, pf.SSHAddr)
	pfTarget := func(pwFile string) *fwapi.Target {
		return &fwapi.Target{Flavor: "pfsense", Host: host, SSH: &fwapi.SSHSpec{
			Port: port, User: "admin", PasswordFile: pwFile, KnownHosts: pf.Target.SSH.KnownHosts,
		}, Endpoints: fwapi.Endpoints{Client: fwapi.Endpoint{Addr: "198.18.1.10"}, Server: fwapi.Endpoint{Addr: "198.19.1.10"}},
			OffloadManagement: true} // the emulated LAN is the management interface
	}
	badAPI := *opnTarget
	badSpec := *opnTarget.API
	badSpec.SecretFile = writeSecretFile(t, keep, "wrong-secret", "not-"+sec["api secret"][:8])
	badAPI.API = &badSpec
	fresh := pfTarget(writeSecretFile(t, keep, "ssh-password-2", sec["ssh password"]))
	fresh.SSH.KnownHosts = filepath.Join(out, "known_hosts") // fwab writes it on first contact
	tf := &fwapi.TargetsFile{Targets: map[string]*fwapi.Target{
		"fresh":   fresh,
		"fw1":     pfTarget(writeSecretFile(t, keep, "ssh-password", sec["ssh password"])),
		"bad-pw":  pfTarget(writeSecretFile(t, keep, "wrong-password", "not-"+sec["ssh password"][:8])),
		"opn":     opnTarget,
		"bad-api": &badAPI,
	}}
	targets := filepath.Join(out, "targets.yaml")
	if err := tf.Save(targets); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(out, "ipsec.yaml")
	os.WriteFile(spec, []byte(`target: fw1
axes:
  ipsec@sec: [none, aes128gcm16]
probes:
  - {direction: up, duration: 1s}
repeats: 1
tunnel:
  name: sec
  interface: wan
  remote_addr: 198.19.0.2
  local_net: 198.18.1.0/24
  remote_net: 198.19.1.0/24
  local_id: dut.sec
  remote_id: peer.sec
  psk_file: `+writeSecretFile(t, keep, "psk", sec["ipsec psk"])+"\n"), 0o644)

	dbg := []string{"--log-level", "debug", "--targets", targets}
	mustOK := func(args ...string) {
		t.Helper()
		if _, errOut, code := sc.fwabScan(t, append(args, dbg...)...); code != 0 {
			t.Errorf("fwab %s = %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	mustRun := func(args ...string) { // exit 1: findings, not a failure to run
		t.Helper()
		if _, errOut, code := sc.fwabScan(t, append(args, dbg...)...); code > 1 {
			t.Errorf("fwab %s = %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	mustFail := func(args ...string) {
		t.Helper()
		if _, _, code := sc.fwabScan(t, append(args, dbg...)...); code == 0 {
			t.Errorf("fwab %s succeeded; want it to fail", strings.Join(args, " "))
		}
	}
	for _, fw := range []string{"fw1", "opn"} {
		mustOK("fw", "info", "--target", fw)
		mustOK("fw", "info", "--json", "--target", fw)
		mustOK("fw", "pull", "--target", fw, "-o", filepath.Join(out, fw+"-config.xml"))
		mustRun("verify", "--target", fw)
		mustRun("verify", "--json", "--target", fw)
	}
	mustOK("fw", "metrics", "--json", "--target", "fw1")
	mustFail("fw", "metrics", "--json", "--target", "opn") // needs SSH: an error naming the fix
	mustOK("fw", "info", "--accept-new-host-key", "--target", "fresh")
	if _, err := os.Stat(fresh.SSH.KnownHosts); err != nil {
		t.Errorf("--accept-new-host-key wrote no known_hosts: %v", err)
	}
	mustOK("fw", "apply", "--target", "fw1", "offload.checksum=off")
	mustOK("matrix", "check", spec, "--target", "fw1")
	mustOK("matrix", "plan", spec, "--target", "fw1")
	mustOK("sweep", "--dry-run", spec, "--db", filepath.Join(out, "results.db"))
	mustFail("fw", "recover", "--target", "fw1") // nothing to recover
	mustFail("fw", "info", "--target", "bad-pw")
	mustFail("fw", "apply", "--target", "bad-pw", "offload.tso=off")
	mustFail("fw", "info", "--json", "--target", "bad-api")
	mustFail("verify", "--json", "--target", "bad-api")
	mustFail("fw", "apply", "--target", "fw1", "ipsec@sec=aes128gcm16") // no such tunnel, and no PSK given

	files := sc.checkTree(t, out, nil)
	if files < 3 {
		t.Errorf("only %d files under %s: the commands wrote less than expected", files, out)
	}
	t.Logf("searched %d outputs and files (%d bytes) for %d secrets in %d forms each", len(sc.outputs), sc.bytes, len(sec), len(sc.secrets.forms())/len(sec))
}

func splitHostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	i := strings.LastIndexByte(addr, ':')
	var port int
	for _, c := range addr[i+1:] {
		port = port*10 + int(c-'0')
	}
	if i < 0 || port == 0 {
		t.Fatalf("address %q has no port", addr)
	}
	return addr[:i], port
}

// TestSecretScanFindsEveryForm: the scan above finds a secret written as
// is, in hex or in base64 (also inside a basic auth header), so a clean
// scan means something.
func TestSecretScanFindsEveryForm(t *testing.T) {
	s := secrets{"api secret": newSecret("API")}
	v := s["api secret"]
	tests := []struct {
		data string
		want int
	}{
		{"nothing here", 0},
		{"error: login with " + v + " failed", 1},
		{"key=" + hex.EncodeToString([]byte(v)), 1},
		{"secret " + base64.StdEncoding.EncodeToString([]byte(v)), 1},
		{"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("key:"+v)), 1},
		{"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("k:"+v+"\n")), 1},
		{v[:len(v)-1], 0},
	}
	for _, tt := range tests {
		if got := s.find([]byte(tt.data)); len(got) != tt.want {
			t.Errorf("find(%q) = %q, want %d hits", tt.data, got, tt.want)
		}
	}
}

// TestDatabasePasswordStaysOut hands fwab a PostgreSQL URL with a password
// through FWAB_DB, where a password may be, and on the command line, where
// it is refused, and searches every output for it, the right password and a
// wrong one.
func TestDatabasePasswordStaysOut(t *testing.T) {
	srv := pgtest.Start(t)
	db := srv.NewDatabase(t)
	wrongPW := newSecret("DB")
	sec := secrets{"database password": srv.Password, "wrong database password": wrongPW}
	sc := &secretScan{secrets: sec}
	wrong := strings.Replace(db, srv.Password, wrongPW, 1)

	t.Setenv("FWAB_DB", db)
	for _, args := range [][]string{
		{"db", "migrate"},
		{"runs", "list"},
		{"runs", "list", "--json"},
		{"runs", "list", "--help"},
		{"compare", "--help"},
	} {
		if _, errOut, code := sc.fwabScan(t, args...); code != exitOK {
			t.Errorf("fwab %s = %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	for _, args := range [][]string{
		{"report", "1"},
		{"compare", "1", "2"},
		{"runs", "show", "1", "--json"},
	} {
		if _, _, code := sc.fwabScan(t, args...); code == exitOK {
			t.Errorf("fwab %s succeeded on an empty database", strings.Join(args, " "))
		}
	}
	// A password on the command line is refused before anything connects.
	for _, url := range []string{db, wrong} {
		_, errOut, code := sc.fwabScan(t, "runs", "list", "--db", url)
		if code != exitUsage || !strings.Contains(errOut, "password on the command line") {
			t.Errorf("fwab runs list --db URL-with-password = %d, %q; want a usage error", code, errOut)
		}
	}
	t.Setenv("FWAB_DB", wrong)
	if _, errOut, code := sc.fwabScan(t, "runs", "list"); code == exitOK || !strings.Contains(errOut, "refused the credentials") {
		t.Errorf("fwab runs list with a wrong password = %d, %q; want the credentials named", code, errOut)
	}
	t.Logf("searched %d outputs (%d bytes) for %d secrets", len(sc.outputs), sc.bytes, len(sec))
}
