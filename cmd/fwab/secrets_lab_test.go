package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab"
	"github.com/fwab/fwab/store"
)

// TestSecretsLabSweep runs a real sweep on the lab, logged at debug level,
// with an SSH password (no key), an IPsec tunnel fwab creates from a PSK
// file and an API key and secret in the target, then searches every output
// for them: stdout and stderr of every command (the sweep, its dry run,
// plan, info, verify, metrics, runs, report in every format, compare, and
// commands that fail), the results database, the local journal and state
// folder, the targets file and everything else fwab wrote, and the lab
// daemon's own log. Only the firewall's own files are left out: its
// filesystem (config.xml and its backups must hold the PSK, as on a real
// pfSense), strongSwan's config and the lab's copy of the password.
func TestSecretsLabSweep(t *testing.T) {
	// Checks behaviour, not throughput: runs beside the other parallel
	// tests, once the package's comparisons are done.
	t.Parallel()
	l := newLab(t)
	sec := secrets{
		"ssh password": newSecret("SSH"),
		"api key":      newSecret("Key"),
		"api secret":   newSecret("API"),
		"ipsec psk":    newSecret("PSK"),
	}
	sc := &secretScan{secrets: sec}
	keep, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(l.dir, emu.PasswordFile), []byte(sec["ssh password"]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tf, err := fwapi.LoadTargets(l.targets)
	if err != nil {
		t.Fatal(err)
	}
	tgt := tf.Targets[lab.TargetName]
	tgt.SSH.KeyFile = "" // the password is the only way in
	tgt.SSH.PasswordFile = writeSecretFile(t, keep, "ssh-password", sec["ssh password"])
	tgt.API = &fwapi.APISpec{URL: "https://127.0.0.1:1", KeyFile: writeSecretFile(t, keep, "api.key", sec["api key"]), SecretFile: writeSecretFile(t, keep, "api.secret", sec["api secret"])}
	bad := *tgt
	badSSH := *tgt.SSH
	badSSH.PasswordFile = writeSecretFile(t, keep, "wrong-password", sec["ssh password"][:20])
	bad.SSH = &badSSH
	tf.Targets["bad-pw"] = &bad
	env := l
	env.targets, env.state = filepath.Join(out, "targets.yaml"), filepath.Join(out, "state")
	if err := tf.Save(env.targets); err != nil {
		t.Fatal(err)
	}

	tunnel := `tunnel:
  name: sec
  interface: %s
  remote_addr: 198.19.0.2
  local_net: 198.18.1.0/24
  remote_net: 198.19.1.0/24
  local_id: dut.sec
  remote_id: peer.sec
  psk_file: ` + writeSecretFile(t, keep, "psk", sec["ipsec psk"]) + "\n"
	spec := filepath.Join(out, "spec.yaml")
	os.WriteFile(spec, []byte(`target: lab
axes:
  ipsec@sec: [none, aes128gcm16]
  rules@lan: [0, 10]
probes:
  - {direction: up, duration: 1s}
repeats: 1
idle: 0s
`+strings.Replace(tunnel, "%s", "wan", 1)), 0o644)
	badSpec := filepath.Join(out, "bad-tunnel.yaml")
	os.WriteFile(badSpec, []byte(`target: lab
axes:
  ipsec@sec: [aes128gcm16]
probes:
  - {direction: up, duration: 1s}
repeats: 1
idle: 0s
`+strings.Replace(tunnel, "%s", "opt9", 1)), 0o644)
	db := filepath.Join(out, "results.db")

	// want is "ok", "fail" or "any" (a sweep whose points fail still ends well).
	fwab := func(want string, args ...string) string {
		t.Helper()
		args = append(args, "--log-level", "debug")
		var stdout, stderr bytes.Buffer
		cmd := env.fwabChild(t.Context(), args...)
		cmd.Dir = out // what fwab writes to its working folder is scanned too
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		what := "fwab " + strings.Join(args, " ")
		sc.check(t, "stdout of "+what, stdout.Bytes())
		sc.check(t, "stderr of "+what, stderr.Bytes())
		if (want == "ok" && err != nil) || (want == "fail" && err == nil) {
			t.Errorf("%s: %v, want %s\n%s", what, err, want, stderr.String())
		}
		return stdout.String() + stderr.String()
	}
	withTargets := []string{"--targets", env.targets}
	fwab("ok", append([]string{"sweep", spec, "--db", db, "--progress=false", "--seed", "1", "--rollback-after", "60s"}, withTargets...)...)
	fwab("ok", append([]string{"sweep", spec, "--dry-run", "--db", db}, withTargets...)...)
	fwab("ok", append([]string{"matrix", "plan", spec, "--target", "lab"}, withTargets...)...)
	fwab("ok", append([]string{"fw", "info", "--json", "--target", "lab"}, withTargets...)...)
	fwab("ok", append([]string{"fw", "metrics", "--json", "--target", "lab"}, withTargets...)...)
	fwab("ok", append([]string{"fw", "pull", "--target", "lab", "-o", filepath.Join(out, "pulled.xml")}, withTargets...)...)
	fwab("ok", append([]string{"verify", "--json", "--target", "lab"}, withTargets...)...)
	fwab("ok", "runs", "list", "--db", db)
	fwab("ok", "runs", "list", "--json", "--db", db)
	fwab("ok", "runs", "show", "1", "--json", "--db", db)
	for _, f := range []string{"md", "csv", "json", "html", "benchstat"} {
		fwab("ok", "report", "1", "--db", db, "--format", f)
		fwab("ok", "report", "1", "--db", db, "--format", f, "-o", filepath.Join(out, "report."+f))
	}
	fwab("ok", "compare", "1", "1", "--db", db, "--junit", filepath.Join(out, "junit.xml"))
	// Failures: a wrong password, a tunnel on an interface the firewall
	// lacks (after the PSK was read), nothing to recover.
	if msg := fwab("fail", append([]string{"fw", "info", "--target", "bad-pw"}, withTargets...)...); !strings.Contains(msg, "unable to authenticate") {
		t.Errorf("a wrong password gave: %s", msg)
	}
	fwab("any", append([]string{"sweep", badSpec, "--db", filepath.Join(out, "bad.db"), "--progress=false"}, withTargets...)...)
	fwab("fail", append([]string{"fw", "recover", "--target", "lab"}, withTargets...)...)

	// The sweep really carried the secrets: every sample measured, over a
	// password login, and the PSK reached the firewall's config (its
	// backups keep it, as on a real pfSense).
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	samples, err := st.Samples(t.Context(), 1)
	st.Close()
	if err != nil || len(samples) != 4+1 { // and the drift check
		t.Fatalf("%d samples (%v), want 5", len(samples), err)
	}
	for _, s := range samples {
		if s.Failed {
			t.Errorf("sample of point %d failed: %s", s.Point, s.Reason)
		}
	}
	backups, _ := filepath.Glob(filepath.Join(l.dir, "root", "conf", "backup", "*.xml"))
	var onFirewall bool
	for _, b := range backups {
		data, _ := os.ReadFile(b)
		onFirewall = onFirewall || bytes.Contains(data, []byte(sec["ipsec psk"]))
	}
	if !onFirewall {
		t.Errorf("the PSK is in none of the firewall's %d config backups: the sweep did not create the tunnel, so the scan proves little", len(backups))
	}

	files := sc.checkTree(t, out, nil)
	files += sc.checkTree(t, l.dir, func(rel string) bool {
		return rel == "root" || rel == "ipsec" || rel == emu.PasswordFile || rel == "ipsec-psk"
	})
	t.Logf("searched %d outputs and files (%d files, %d bytes) for %d secrets in %d forms each", len(sc.outputs), files, sc.bytes, len(sec), len(sec.forms())/len(sec))
}
