package configxml

import (
	"io"
	"sync"
	"testing"
)

var (
	bigOnce sync.Once
	big     []byte
)

func bigConfig() []byte {
	bigOnce.Do(func() { big = GenerateConfig(GenerateOptions{Rules: 20000, RRDBytes: 37 << 20}) })
	return big
}

// BenchmarkLoadSetSave is the goal case: a 50 MB config with 20k
// rules and a large RRD blob, loaded, changed by one knob and saved.
func BenchmarkLoadSetSave(b *testing.B) {
	data := bigConfig()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := LoadBytes(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Set("offload.tso", "on"); err != nil {
			b.Fatal(err)
		}
		if _, err := c.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
