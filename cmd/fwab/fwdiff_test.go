package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
)

// fw apply --diff and fw push --diff show what would change on the
// firewall, from its current config, and change nothing: no write, no lock.
func TestFwDiffWritesNothing(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	before := fake.File(t, "/conf/config.xml")
	out, stderr, code := fwabRun(t, "fw", "apply", "--target", "fw1", "--targets", targets, "offload.checksum=off", "--diff")
	if code != exitOK || !strings.Contains(out, "offload.checksum") || !strings.Contains(out, "interfaces") {
		t.Errorf("fw apply --diff: exit %d\n%s%s", code, out, stderr)
	}
	c, err := configxml.LoadBytes(before)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetAll([]string{"rules@lan=3"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "next.xml")
	if err := os.WriteFile(file, c.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code = fwabRun(t, "fw", "push", file, "--target", "fw1", "--targets", targets, "--diff")
	if code != exitOK || !strings.Contains(out, "rules@lan") {
		t.Errorf("fw push --diff: exit %d\n%s%s", code, out, stderr)
	}
	if after := fake.File(t, "/conf/config.xml"); !bytes.Equal(after, before) {
		t.Errorf("--diff changed the firewall's config")
	}
	if len(fake.Glob(fwapi.LockDir)) != 0 {
		t.Errorf("--diff left a lock")
	}
	for _, cmd := range fake.Commands() {
		if strings.Contains(cmd, "mkdir") || strings.Contains(cmd, "rc.reload") || strings.Contains(cmd, "daemon") {
			t.Errorf("--diff ran %q on the firewall", cmd)
		}
	}
}
