package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepLinks: a probe that names a link the target lacks is refused
// before anything touches the firewall, the target's links listed; one
// the target has plans a run per link.
func TestSweepLinks(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	spec := filepath.Join(t.TempDir(), "links.yaml")
	os.WriteFile(spec, []byte("target: fw1\naxes:\n  rules@lan: [0, 10]\nprobes:\n  - {name: up, duration: 1s, links: [main, b]}\n  - {name: both, duration: 1s, links: [main, b], concurrent: true}\nrepeats: 2\nidle: 0s\n"), 0o644)
	before := fake.StoredConfig(t)
	_, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db"), "--progress=false")
	if code != 2 || !strings.Contains(errOut, `no link "b"`) || !strings.Contains(errOut, "it has main") {
		t.Errorf("sweep naming an unknown link = %d: %s; want exit 2 naming it and the known ones", code, errOut)
	}
	if string(fake.StoredConfig(t)) != string(before) || len(fake.Actions()) != 0 {
		t.Errorf("the refused sweep touched the firewall: actions %v", fake.Actions())
	}

	data, _ := os.ReadFile(targets)
	withB := strings.Replace(string(data), "      server: {addr: 198.19.1.10}\n", "      server: {addr: 198.19.1.10}\n      links:\n        b: {client: {addr: 198.18.2.10}, server: {addr: 198.19.2.10}}\n", 1)
	if withB == string(data) {
		t.Fatalf("could not add link b to %s", data)
	}
	os.WriteFile(targets, []byte(withB), 0o600)
	if out, errOut, code := fwabRun(t, "target", "list", "--targets", targets); code != 0 || !strings.Contains(out, "main,b") {
		t.Errorf("target list = %d:\n%s%s\nwant the links main,b", code, out, errOut)
	}
	out, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--dry-run")
	if code != 0 || !strings.Contains(out+errOut, "up@b") || !strings.Contains(out+errOut, "both@main+b") {
		t.Errorf("dry run with link b = %d:\n%s%s\nwant runs up@main, up@b and both@main+b", code, out, errOut)
	}
}
