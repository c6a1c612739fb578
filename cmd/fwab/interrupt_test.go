package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/fixtures"
)

// bigConfig writes a config.xml of some tens of megabytes (many filter
// rules), which takes seconds to read, edit and write.
func bigConfig(t *testing.T) string {
	t.Helper()
	base := string(fixtures.Read("configs/pfsense-2.7.xml"))
	var rules strings.Builder
	for i := range 400_000 {
		fmt.Fprintf(&rules, "<rule><type>pass</type><interface>lan</interface><tracker>%d</tracker><descr>bulk %d</descr></rule>\n", 2_000_000+i, i)
	}
	cfg := strings.Replace(base, "<filter>", "<filter>\n"+rules.String(), 1)
	path := filepath.Join(t.TempDir(), "big.xml")
	if err := os.WriteFile(path, []byte(cfg), 0o640); err != nil {
		t.Fatal(err)
	}
	return path
}

// An interrupt stops the offline commands: exit 130, nothing written.
func TestOfflineCommandsStopOnInterrupt(t *testing.T) {
	big := bigConfig(t)
	orig, _ := os.ReadFile(big)
	out := filepath.Join(t.TempDir(), "new.xml")
	for _, args := range [][]string{
		{"config", "set", big, "rules@lan=5", "--in-place"},
		{"config", "set", big, "rules@lan=5", "-o", out},
		{"config", "lint", big},
		{"config", "diff", big, big},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
		cancel()
		if code != exitCancelled {
			t.Errorf("%s interrupted: exit %d, want %d; stderr %q", strings.Join(args, " "), code, exitCancelled, stderr.String())
		}
	}
	if now, _ := os.ReadFile(big); !bytes.Equal(now, orig) {
		t.Errorf("an interrupted in-place edit changed the file")
	}
	for _, p := range []string{out, big + ".bak"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("an interrupted edit wrote %s", p)
		}
	}
}
