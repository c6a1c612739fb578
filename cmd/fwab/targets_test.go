package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A --targets path given on the command line must exist: a typo is not an
// empty targets file.
func TestTargetsPathMustExist(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "targtes.yaml")
	for _, args := range [][]string{
		{"fw", "info", "--target", "lab", "--targets", missing},
		{"fw", "recover", "--target", "lab", "--targets", missing},
	} {
		_, stderr, code := fwab(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, missing) || !strings.Contains(stderr, "does not exist") {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 naming the missing file", strings.Join(args, " "), code, stderr)
		}
		if _, err := os.Stat(missing); err == nil {
			t.Errorf("%s created the missing targets file", strings.Join(args, " "))
		}
	}
}

// The known targets are listed as words, not as a Go slice.
func TestUnknownTargetListsTheKnownOnes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "targets.yaml")
	yaml := "targets:\n  fw-a: {flavor: pfsense, host: 127.0.0.1, ssh: {user: admin, agent: true}}\n  fw-b: {flavor: pfsense, host: 127.0.0.1, ssh: {user: admin, agent: true}}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := fwab(t, "", "fw", "info", "--target", "fw-c", "--targets", path)
	if code != exitUsage || !strings.Contains(stderr, "known targets: fw-a, fw-b") {
		t.Errorf("exit %d, stderr %q; want exit 2 listing fw-a, fw-b", code, stderr)
	}
}

// A typo in the targets file is named as a key, with the nearest one.
func TestTargetsFileTypo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(path, []byte("targets:\n  fw-a:\n    flavour: pfsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := fwab(t, "", "fw", "info", "--target", "fw-a", "--targets", path)
	if code != exitUsage || !strings.Contains(stderr, "line 3: unknown key `flavour` (did you mean `flavor`?)") {
		t.Errorf("exit %d, stderr %q; want exit 2 naming `flavour` and `flavor`", code, stderr)
	}
}

// A hand-written targets file is checked by every command that reads it,
// every problem at once with its line; a --targets path that does not
// exist is an error for target list too.
func TestTargetsFileChecked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "targets.yaml")
	yaml := "targets:\n  fw1:\n    flavor: pfsense\n    host: \"\"\n    ssh: {user: admin, port: 70000, agent: true}\n" +
		"  opn:\n    flavor: opnsense\n    host: 198.18.0.2\n    api: {url: \"http://198.18.0.2\", key_env: K, secret_env: S}\n"
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"target", "list", "--targets", path},
		{"target", "test", "fw1", "--targets", path},
		{"fw", "info", "--target", "opn", "--targets", path},
	} {
		_, stderr, code := fwab(t, "", args...)
		for _, want := range []string{"3 problems", "line 4: target fw1: host is required", "line 5: target fw1: ssh.port 70000 is not a port", `line 9: target opn: api.url "http://198.18.0.2"`} {
			if code != exitUsage || !strings.Contains(stderr, want) {
				t.Errorf("fwab %s: exit %d, %q; want exit 2 saying %q", strings.Join(args[:2], " "), code, stderr, want)
			}
		}
	}
	missing := filepath.Join(dir, "nosuch.yaml")
	if _, stderr, code := fwab(t, "", "target", "list", "--targets", missing); code != exitUsage || !strings.Contains(stderr, "does not exist") {
		t.Errorf("target list --targets %s: exit %d, %q; want exit 2", missing, code, stderr)
	}
}

// A secret file that others may read is refused by the command that would
// read it, before anything is contacted, with the chmod to run.
func TestSecretFilesMustBePrivate(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id_fwab")
	psk := filepath.Join(dir, "psk")
	for _, f := range []string{key, psk} {
		if err := os.WriteFile(f, []byte("secret\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	targets := filepath.Join(dir, "targets.yaml")
	yaml := "targets:\n  fw1:\n    flavor: pfsense\n    host: 127.0.0.1\n    ssh: {port: 1, user: admin, key_file: " + key + "}\n"
	if err := os.WriteFile(targets, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := fwab(t, "", "fw", "info", "--target", "fw1", "--targets", targets); code != exitUsage || !strings.Contains(stderr, "chmod 600 '"+key+"'") {
		t.Errorf("a readable SSH key: exit %d, %q; want exit 2 with the chmod", code, stderr)
	}
	spec := filepath.Join(dir, "spec.yaml")
	os.WriteFile(spec, []byte("target: lab\naxes:\n  ipsec@fwab: [none, aes128gcm16]\ntunnel:\n  remote_addr: 198.19.0.2\n  local_net: 198.18.1.0/24\n  remote_net: 198.19.1.0/24\n  psk_file: "+psk+"\n"), 0o600)
	if _, stderr, code := fwab(t, "", "matrix", "check", spec, "--config", fixtureFile(t, "configs/pfsense-2.7.xml")); code != exitUsage || !strings.Contains(stderr, "chmod 600 '"+psk+"'") {
		t.Errorf("a readable PSK file: exit %d, %q; want exit 2 with the chmod", code, stderr)
	}
}

// target add --replace repairs a broken target: the commands that write
// the targets file read it without the checks that refuse it elsewhere.
// An empty links: is no endpoint.
func TestTargetAddRepairsABrokenTarget(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	os.WriteFile(key, []byte("key\n"), 0o600)
	path := filepath.Join(dir, "targets.yaml")
	os.WriteFile(path, []byte("targets:\n  fw1:\n    flavor: pfsense\n    host: \"\"\n    ssh: {user: admin, agent: true}\n    endpoints: {links: {}}\n"), 0o600)
	if _, stderr, code := fwab(t, "", "target", "list", "--targets", path); code != exitUsage || strings.Contains(stderr, "endpoints") || !strings.Contains(stderr, "host is required") {
		t.Errorf("target list of a broken file: exit %d, %q; want only the host named", code, stderr)
	}
	if _, stderr, code := fwab(t, "", "target", "add", "fw1", "--replace", "--targets", path, "--flavor", "pfsense", "--host", "198.18.0.1", "--ssh-user", "admin", "--ssh-key-file", key,
		"--client-addr", "198.18.1.10", "--client-netns", "lan", "--server-addr", "198.19.1.10", "--server-netns", "wan"); code != exitOK {
		t.Fatalf("target add --replace over a broken target: exit %d, %q", code, stderr)
	}
	if _, stderr, code := fwab(t, "", "target", "list", "--targets", path); code != exitOK {
		t.Errorf("target list after the repair: exit %d, %q", code, stderr)
	}
}

// TestOfflineConfigOfTheOtherProduct: planning an OPNsense target against a
// pfSense --config (a plan of changes the target cannot take) is refused,
// by matrix check, matrix plan and sweep --dry-run alike.
func TestOfflineConfigOfTheOtherProduct(t *testing.T) {
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.yaml")
	yaml := "targets:\n  opn:\n    flavor: opnsense\n    host: 198.18.0.2\n    api: {url: \"https://198.18.0.2\", key_env: K, secret_env: S}\n"
	if err := os.WriteFile(targets, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("target: opn\naxes:\n  offload.tso: [on, off]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	for _, args := range [][]string{
		{"matrix", "check", spec, "--config", pf},
		{"matrix", "plan", spec, "--config", pf},
		{"sweep", spec, "--dry-run", "--config", pf},
	} {
		_, stderr, code := fwab(t, "", append(args, "--targets", targets)...)
		if want := "target opn is opnsense but " + pf + " is a pfsense config"; code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 saying %q", strings.Join(args[:2], " "), code, stderr, want)
		}
	}
	// An upgrade to the other product's version is refused before any
	// connection (the target's address is not dialled).
	if _, stderr, code := fwab(t, "", "fw", "upgrade", "2.8.0", "--target", "opn", "--targets", targets); code != exitUsage || !strings.Contains(stderr, "2.8.0 looks like a pfSense version") {
		t.Errorf("fw upgrade 2.8.0 on an OPNsense target: exit %d, %q; want exit 2 naming the scheme", code, stderr)
	}
	// The same spec with the target's own product plans.
	opn := fixtureFile(t, "configs/opnsense-26.1.xml")
	if _, stderr, code := fwab(t, "", "matrix", "check", spec, "--config", opn, "--targets", targets); code != 0 {
		t.Errorf("matrix check with an OPNsense config: exit %d, %s", code, stderr)
	}
}

// TestPlanWarningsShown: what the points' configs warn of is printed by
// matrix check, matrix plan and sweep --dry-run, with the points named, and
// is in the JSON; it does not fail the check.
func TestPlanWarningsShown(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(spec, []byte("axes:\n  nat.outbound: [automatic, hybrid]\norder: as-written\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opn := fixtureFile(t, "configs/opnsense-26.1.xml")
	want := spec + ": warning: point 1: FWAB006 hybrid-nat-no-rules"
	for _, args := range [][]string{
		{"matrix", "check", spec, "--config", opn},
		{"matrix", "plan", spec, "--config", opn},
		{"sweep", spec, "--dry-run", "--config", opn},
	} {
		_, stderr, code := fwab(t, "", args...)
		if code != 0 || !strings.Contains(stderr, want) {
			t.Errorf("fwab %s: exit %d, stderr %q; want exit 0 and %q", strings.Join(args[:2], " "), code, stderr, want)
		}
	}
	out, _, code := fwab(t, "", "matrix", "check", spec, "--config", opn, "--json")
	if code != 0 || !strings.Contains(out, `"point 1: FWAB006 hybrid-nat-no-rules`) {
		t.Errorf("matrix check --json: exit %d, %s; want the warning in warnings", code, out)
	}
}
