package fwapi

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTargetLinks: a target's first link is its endpoints' client and
// server (named main unless endpoints: name says otherwise), further ones
// are under endpoints: links:, and an unknown name lists the known ones.
func TestTargetLinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "targets.yaml")
	os.WriteFile(path, []byte(`targets:
  e302:
    flavor: opnsense
    host: 198.18.0.1
    api: {url: "https://198.18.0.1", key_env: K, secret_env: S}
    endpoints:
      client: {addr: 198.18.1.10, netns: l1}
      server: {addr: 198.19.1.10, netns: w1}
      links:
        sfp2: {client: {addr: 198.18.2.10, netns: l2}, server: {addr: 198.19.2.10, netns: w2}}
`), 0o600)
	tf, err := LoadTargets(path)
	if err != nil {
		t.Fatal(err)
	}
	e := tf.Targets["e302"].Endpoints
	if got := e.LinkNames(); !slices.Equal(got, []string{"main", "sfp2"}) {
		t.Errorf("LinkNames = %q, want main, sfp2", got)
	}
	if p, err := e.Pair("sfp2"); err != nil || p.Client.Netns != "l2" || p.Server.Addr != "198.19.2.10" {
		t.Errorf("Pair(sfp2) = %+v, %v", p, err)
	}
	if p, err := e.Pair("main"); err != nil || p.Client.Netns != "l1" {
		t.Errorf("Pair(main) = %+v, %v; want the endpoints' own client and server", p, err)
	}
	if _, err := e.Pair("sfp3"); err == nil || !strings.Contains(err.Error(), "it has main, sfp2") {
		t.Errorf("Pair(sfp3) = %v, want the known links listed", err)
	}
	links, closeAll, err := tf.Targets["e302"].OpenLinks(t.Context(), OpenOptions{}, []string{"main", "sfp2"})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if l := links["sfp2"]; l.Client.Addr != "198.18.2.10" || l.Client.Name != "client@sfp2" || l.Server.Name != "server@sfp2" {
		t.Errorf("link sfp2 opened as %+v", l)
	}

	os.WriteFile(path, []byte("targets:\n  x:\n    flavor: pfsense\n    host: h\n    endpoints:\n      name: a\n      client: {addr: 1}\n      server: {addr: 2}\n      links:\n        a: {client: {addr: 3}, server: {addr: 4}}\n"), 0o600)
	if _, err := LoadTargets(path); err == nil || !strings.Contains(err.Error(), "endpoints.links.a: a is the first link's name") {
		t.Errorf("a further link named as the first: %v, want it refused", err)
	}
}

// A hand-written targets file gets the checks target add makes: every
// problem of every target at once, each with its line, and nothing loads.
func TestLoadTargetsNamesEveryProblem(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "id")
	if err := os.WriteFile(key, []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "targets.yaml")
	os.WriteFile(path, []byte(`targets:
  good:
    flavor: pfsense
    host: 198.18.0.1
    ssh: {user: admin, key_file: `+key+`}
    endpoints:
      client: {addr: 198.18.1.10, netns: lan}
      server: {addr: 198.19.1.10, netns: wan}
  portless:
    flavor: pfsense
    host: 198.18.0.2
    ssh:
      user: admin
      port: 70000
      key_file: `+key+`
    endpoints:
      client: {addr: 198.18.1.10, netns: lan}
      server: {addr: 198.19.1.10, netns: wan}
  hostless:
    flavor: opnsense
    host: ""
    api:
      url: http://198.18.0.3
      key_env: K
      secret_env: S
    endpoints:
      client: {addr: 198.18.1.10, netns: lan}
      server: {addr: 198.19.1.10, netns: wan, ssh: {host: b}}
  shell-less:
    flavor: pfsense
    host: 198.18.0.4
    endpoints:
      client: {addr: 198.18.1.10, netns: lan}
      server: {addr: 198.19.1.10, netns: wan}
`), 0o600)
	_, err := LoadTargets(path)
	if err == nil {
		t.Fatal("LoadTargets accepted the broken targets")
	}
	for _, want := range []string{
		"line 14: target portless: ssh.port 70000 is not a port",
		"line 21: target hostless: host is required",
		"line 23: target hostless: api.url \"http://198.18.0.3\"",
		"line 28: target hostless: the server is a namespace or an SSH host, not both",
		"line 29: target shell-less: pfSense is driven over SSH",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("LoadTargets does not say %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "target good") {
		t.Errorf("LoadTargets finds fault with the good target:\n%v", err)
	}
}
