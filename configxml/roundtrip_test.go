package configxml

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// upstreamDir holds real config.xml files from pfSense and OPNsense; it sits
// beside the repository and may be absent.
const upstreamDir = "../../shared/upstream"

func upstreamFiles(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(upstreamDir, "*.xml"))
	if len(files) == 0 {
		t.Skipf("no upstream configs in %s (the shared folder is absent); skipping", upstreamDir)
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
