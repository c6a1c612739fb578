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
	if _, err := LoadTargets(path); err == nil || !strings.Contains(err.Error(), "links: a is the first link's name") {
		t.Errorf("a further link named as the first: %v, want it refused", err)
	}
}
