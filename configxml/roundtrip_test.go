package configxml

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// upstreamFiles lists the real config.xml files from pfSense and OPNsense
// in the upstream folder (see upstreamDir), which may be absent.
func upstreamFiles(t *testing.T) []string {
	t.Helper()
	dir := upstreamDir(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.xml"))
	if len(files) == 0 {
		t.Skipf("no upstream configs in %s; skipping", dir)
	}
	return files
}

func TestRoundTripUpstream(t *testing.T) {
	for _, f := range upstreamFiles(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			c, err := LoadBytes(data)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got := c.Bytes(); !bytes.Equal(got, data) {
				t.Errorf("round trip changed the file:\n%s", lineDiff(string(data), string(got)))
			}
		})
	}
}
