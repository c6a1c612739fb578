package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
)

func TestTargetAddAndList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "targets.yaml")
	key := filepath.Join(dir, "id_fwab")
	os.WriteFile(key, []byte("not really a key\n"), 0o600)

	// Incomplete: nothing is written, and every problem is named.
	_, stderr, code := fwab(t, "", "target", "add", "edge1", "--targets", path, "--flavor", "pfsense", "--ssh-user", "admin")
	if code != exitUsage {
		t.Errorf("incomplete target add: exit %d, want 2: %s", code, stderr)
	}
	for _, want := range []string{"--host is required", "--ssh-key-file", "--client-addr is required", "--server-addr is required"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("incomplete target add does not say %q: %s", want, stderr)
		}
	}
	if _, err := os.Stat(path); err == nil {
		t.Errorf("a refused target add wrote %s", path)
	}
	_, stderr, _ = fwab(t, "", "target", "add", "opn1", "--targets", path, "--flavor", "opnsense", "--host", "198.18.0.9", "--no-ssh",
		"--api-url", "http://198.18.0.9", "--api-key-file", filepath.Join(dir, "missing.key"), "--client-addr", "198.18.1.10", "--client-netns", "lan", "--server-addr", "198.19.1.10", "--server-netns", "wan")
	for _, want := range []string{"give the https:// URL", "name the API key and secret", "--api-key-file " + filepath.Join(dir, "missing.key") + " does not exist"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("bad API target add does not say %q: %s", want, stderr)
		}
	}

	add := []string{"target", "add", "edge1", "--targets", path, "--flavor", "pfsense", "--host", "198.18.0.1", "--ssh-user", "admin", "--ssh-key-file", key,
		"--client-addr", "198.18.1.10", "--client-ssh-host", "198.18.1.10", "--client-ssh-user", "fwab", "--server-addr", "198.19.1.10", "--server-netns", "wan"}
	if out, stderr, code := fwab(t, "", add...); code != exitOK || !strings.Contains(out, "wrote "+path) {
		t.Fatalf("target add: exit %d, %q %q", code, out, stderr)
	}
	tf, err := fwapi.LoadTargets(path)
	if err != nil {
		t.Fatal(err)
	}
	got := tf.Targets["edge1"]
	if got == nil || got.SSH == nil || got.SSH.KeyFile != key || got.Endpoints.Client.SSH == nil || got.Endpoints.Client.SSH.User != "fwab" || got.Endpoints.Server.Netns != "wan" || got.API != nil {
		t.Errorf("the targets file holds %+v", got)
	}
	if _, stderr, code := fwab(t, "", add...); code != exitUsage || !strings.Contains(stderr, "--replace") {
		t.Errorf("adding edge1 twice: exit %d, %q; want exit 2 pointing to --replace", code, stderr)
	}
	if _, _, code := fwab(t, "", append(add, "--replace")...); code != exitOK {
		t.Errorf("target add --replace: exit %d", code)
	}

	out, _, code := fwab(t, "", "target", "list", "--targets", path)
	if code != exitOK || !strings.Contains(out, "edge1") || !strings.Contains(out, "admin@198.18.0.1") || !strings.Contains(out, "198.19.1.10 (netns wan)") {
		t.Errorf("target list: exit %d\n%s", code, out)
	}
	out, _, _ = fwab(t, "", "target", "list", "--targets", path, "--json")
	var rows []targetRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0].Name != "edge1" || rows[0].Flavor != "pfsense" {
		t.Errorf("target list --json = %s (%v)", out, err)
	}
}

// TestTargetTest: target test checks the firewall and each endpoint, one
// line each. Without endpoints the firewall alone is checked; an endpoint
// without iperf3 is a setup error (exit 2) that names the fix; a firewall
// that is not what the file says fails. The lab with namespaces:
// TestTargetTestEndpointsLab.
func TestTargetTest(t *testing.T) {
	_, targets := labTarget(t, nil, true)
	b, _ := os.ReadFile(targets)
	withEndpoints := string(b)
	firewallOnly, _, _ := strings.Cut(withEndpoints, "    endpoints:")
	os.WriteFile(targets, []byte(firewallOnly), 0o600)
	out, stderr, code := fwab(t, "", "target", "test", "fw1", "--targets", targets)
	if code != exitOK || !strings.Contains(out, "target fw1: pfsense 2.7") || !strings.Contains(out, "ok    firewall 127.0.0.1: pfsense 2.7") || !strings.Contains(out, "warn  endpoints: none") {
		t.Errorf("target test without endpoints: exit %d, %q %q", code, out, stderr)
	}

	// The endpoints are this machine, whose PATH has no iperf3.
	t.Setenv("PATH", t.TempDir())
	os.WriteFile(targets, []byte(withEndpoints), 0o600)
	out, stderr, code = fwab(t, "", "target", "test", "fw1", "--targets", targets)
	for _, side := range []string{"client 198.18.1.10 (this machine)", "server 198.19.1.10 (this machine)"} {
		if reportLine(out, "FAIL", side, "iperf3 is not installed", "install it there") == "" {
			t.Errorf("no FAIL line for %s's missing iperf3:\n%s", side, out)
		}
	}
	if code != exitUsage || reportLine(out, "skip", "link main:") == "" || !strings.Contains(stderr, "2 of 9 checks failed") {
		t.Errorf("target test without iperf3: exit %d, want 2, the probe skipped and the count said:\n%s%s", code, out, stderr)
	}

	// The file says OPNsense; the box is a pfSense (which has no API).
	os.WriteFile(targets, []byte(strings.Replace(firewallOnly, "flavor: pfsense", "flavor: opnsense", 1)), 0o600)
	if out, stderr, code := fwab(t, "", "target", "test", "fw1", "--targets", targets); code == exitOK || reportLine(out, "FAIL", "firewall 127.0.0.1") == "" {
		t.Errorf("target test of a pfSense written as opnsense: exit %d, want a FAIL line for the firewall: %q %q", code, out, stderr)
	}
}

// TestTargetAddLinks: --link adds a further endpoint pair with the first
// link's flag names as its keys, --link-name names the first; a bad link
// is refused with the key or the rule it breaks, and nothing is written.
func TestTargetAddLinks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "targets.yaml")
	key := filepath.Join(dir, "id_fwab")
	os.WriteFile(key, []byte("not really a key\n"), 0o600)
	base := []string{"target", "add", "edge1", "--targets", path, "--flavor", "pfsense", "--host", "198.18.0.1", "--ssh-user", "admin", "--ssh-key-file", key,
		"--client-addr", "198.18.1.10", "--client-netns", "lan", "--server-addr", "198.19.1.10", "--server-netns", "wan"}

	for _, tc := range []struct {
		link []string
		want []string
	}{
		{[]string{"--link", "client-addr=198.18.2.10,client-netns=lan2,server-addr=198.19.2.10,server-netns=wan2"}, []string{"--link", "name="}},
		{[]string{"--link", "name=link2,client-addr=198.18.2.10,client-netns=lan2,server-netns=wan2"}, []string{"--link link2", "server-addr is required"}},
		{[]string{"--link", "name=link2,client-adr=198.18.2.10"}, []string{"client-adr", "client-addr", "server-ssh-key-file"}},
		{[]string{"--link", "name=link2,client-addr=198.18.2.10,client-netns=lan2,client-ssh-host=b,server-addr=198.19.2.10,server-netns=wan2"}, []string{"--link link2", "namespace or an SSH host, not both: drop client-netns or client-ssh-host"}},
		{[]string{"--link", "name=link2,client-addr=198.18.2.10,client-ssh-host=b,client-ssh-key-file=" + filepath.Join(dir, "nokey") + ",server-addr=198.19.2.10,server-netns=wan2"}, []string{"client-ssh-key-file " + filepath.Join(dir, "nokey") + " does not exist"}},
		{[]string{"--link", "name=main,client-addr=198.18.2.10,client-netns=lan2,server-addr=198.19.2.10,server-netns=wan2"}, []string{"main", "first link"}},
		{[]string{"--link", "name=l2,client-addr=198.18.2.10,client-netns=lan2,server-addr=198.19.2.10,server-netns=wan2", "--link", "name=l2,client-addr=198.18.3.10,client-netns=lan3,server-addr=198.19.3.10,server-netns=wan3"}, []string{"l2", "twice"}},
		{[]string{"--link", "name=a b,client-addr=198.18.2.10,client-netns=lan2,server-addr=198.19.2.10,server-netns=wan2"}, []string{"\"a b\"", "letters"}},
		{[]string{"--link", "name=l2,client-addr"}, []string{"client-addr", "KEY=VALUE"}},
		{[]string{"--link", "name=l2,name=l3"}, []string{"name is given twice"}},
		{[]string{"--link", "name=-l2,client-addr=198.18.2.10,client-netns=lan2,server-addr=198.19.2.10,server-netns=wan2"}, []string{"\"-l2\"", "starting with a letter or digit"}},
		{[]string{"--link-name", "a/b"}, []string{"--link-name \"a/b\"", "letters"}},
	} {
		_, stderr, code := fwab(t, "", append(base, tc.link...)...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2: %s", tc.link, code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v: the error does not say %q: %s", tc.link, w, stderr)
			}
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatalf("%v: a refused target add wrote %s", tc.link, path)
		}
	}

	add := append(base, "--link-name", "link1",
		"--link", "name=link2,client-addr=198.18.2.10,client-netns=lan2,server-addr=198.19.2.10,server-ssh-host=wan2-box,server-ssh-user=fwab,server-ssh-key-file="+key)
	if _, stderr, code := fwab(t, "", add...); code != exitOK {
		t.Fatalf("target add with a link: exit %d: %s", code, stderr)
	}
	tf, err := fwapi.LoadTargets(path)
	if err != nil {
		t.Fatal(err)
	}
	e := tf.Targets["edge1"].Endpoints
	l2, ok := e.Links["link2"]
	if e.Name != "link1" || !ok || l2.Client.Addr != "198.18.2.10" || l2.Client.Netns != "lan2" || l2.Server.SSH == nil ||
		l2.Server.SSH.Host != "wan2-box" || l2.Server.SSH.User != "fwab" || l2.Server.SSH.KeyFile != key || l2.Server.Addr != "198.19.2.10" {
		t.Errorf("the targets file holds endpoints %+v", e)
	}
	out, _, _ := fwab(t, "", "target", "list", "--targets", path, "--json")
	var rows []targetRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || !slices.Equal(rows[0].Links, []string{"link1", "link2"}) {
		t.Errorf("target list --json = %s (%v): want links link1, link2", out, err)
	}
}
