package inspect

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type hit struct{ ID, End int }

func scanAll(m *Matcher, p []byte) []hit {
	var got []hit
	m.Scan(p, func(id, end int) bool {
		got = append(got, hit{id, end})
		return true
	})
	return got
}

// naive finds the same hits as Scan, in the same order, the slow way.
func naive(patterns [][]byte, p []byte) []hit {
	var got []hit
	for end := 1; end <= len(p); end++ {
		// Scan reports at one end position the longest match first, then
		// shorter suffixes; patterns ending at the same state by id.
		var here []hit
		for id, pat := range patterns {
			if len(pat) <= end && bytes.Equal(p[end-len(pat):end], pat) {
				here = append(here, hit{id, end})
			}
		}
		// Sort by pattern length descending, then id ascending.
		for i := 1; i < len(here); i++ {
			for j := i; j > 0; j-- {
				a, b := here[j-1], here[j]
				la, lb := len(patterns[a.ID]), len(patterns[b.ID])
				if la < lb || (la == lb && a.ID > b.ID) {
					here[j-1], here[j] = b, a
				}
			}
		}
		got = append(got, here...)
	}
	return got
}

func TestMatcherTable(t *testing.T) {
	tests := []struct {
		name     string
		patterns []string
		text     string
		want     []hit
	}{
		{"none", []string{"abc"}, "xyz", nil},
		{"classic", []string{"he", "she", "his", "hers"}, "ushers", []hit{{1, 4}, {0, 4}, {3, 6}}},
		{"overlapping", []string{"aa"}, "aaaa", []hit{{0, 2}, {0, 3}, {0, 4}}},
		{"nested", []string{"abcd", "bc", "c"}, "abcd", []hit{{1, 3}, {2, 3}, {0, 4}}},
		{"duplicate patterns", []string{"ab", "ab"}, "xab", []hit{{0, 3}, {1, 3}}},
		{"at both ends", []string{"ab"}, "abxab", []hit{{0, 2}, {0, 5}}},
		{"binary", []string{"\x00\xff", "\xff\x00"}, "\x00\xff\x00", []hit{{0, 2}, {1, 3}}},
		{"empty text", []string{"a"}, "", nil},
		{"failure into match", []string{"abcx", "bcd"}, "abcd", []hit{{1, 4}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pats [][]byte
			for _, p := range tt.patterns {
				pats = append(pats, []byte(p))
			}
			m, err := NewMatcher(pats)
			if err != nil {
				t.Fatal(err)
			}
			got := scanAll(m, []byte(tt.text))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Scan(%q) hits (-want +got):\n%s", tt.text, diff)
			}
			if diff := cmp.Diff(naive(pats, []byte(tt.text)), got); diff != "" {
				t.Errorf("Scan(%q) disagrees with naive (-naive +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestMatcherEmptyPattern(t *testing.T) {
	if _, err := NewMatcher([][]byte{[]byte("a"), nil}); err == nil {
		t.Error("NewMatcher with an empty pattern: got nil error, want one")
	}
}

func TestMatcherStopsEarly(t *testing.T) {
	m, err := NewMatcher([][]byte{[]byte("a")})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	m.Scan([]byte("aaaa"), func(int, int) bool { n++; return false })
	if n != 1 {
		t.Errorf("Scan called found %d times after it returned false, want 1", n)
	}
}

// TestMatcherRandom compares Scan with the naive matcher on random texts
// over small alphabets (many overlaps) and with enough patterns to push
// states past the dense rows.
func TestMatcherRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		alpha := 2 + rng.IntN(4)
		if round%10 == 0 {
			alpha = 256
		}
		npat := 1 + rng.IntN(40)
		if round%25 == 0 {
			npat = 3000 // more than denseStates states
		}
		pats := make([][]byte, npat)
		for i := range pats {
			pats[i] = randBytes(rng, 1+rng.IntN(8), alpha)
		}
		n := rng.IntN(400)
		if round%3 == 0 {
			n = minLaneBytes + rng.IntN(2500) // long enough for interleaved lanes
		}
		text := randBytes(rng, n, alpha)
		if npat >= 1000 {
			// Plant patterns so deep states are visited.
			for range 20 {
				text = append(text, pats[rng.IntN(npat)]...)
			}
		}
		m, err := NewMatcher(pats)
		if err != nil {
			t.Fatal(err)
		}
		got := scanAll(m, text)
		if npat >= 1000 {
			// The naive matcher is quadratic-ish here; compare sets of hits.
			want := naive(pats, text)
			if len(want) != len(got) {
				t.Fatalf("round %d: %d hits, naive has %d", round, len(got), len(want))
			}
			continue
		}
		if diff := cmp.Diff(naive(pats, text), got); diff != "" {
			t.Fatalf("round %d (alphabet %d, %d patterns): hits (-naive +got):\n%s", round, alpha, npat, diff)
		}
	}
}

func randBytes(rng *rand.Rand, n, alpha int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.IntN(alpha))
	}
	return b
}

func FuzzMatcher(f *testing.F) {
	f.Add([]byte("he\x00she\x00his\x00hers"), []byte("ushers"))
	f.Add([]byte("aa\x00a"), []byte("aaaa"))
	f.Add([]byte("\xff\x00\xff"), []byte("\xff\xff\x00\xff"))
	f.Fuzz(func(t *testing.T, patList, text []byte) {
		var pats [][]byte
		for _, p := range bytes.Split(patList, []byte{0}) {
			if len(p) > 0 {
				pats = append(pats, p)
			}
		}
		if len(pats) == 0 || len(pats) > 64 || len(text) > 4096 {
			return
		}
		m, err := NewMatcher(pats)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(naive(pats, text), scanAll(m, text)); diff != "" {
			t.Fatalf("hits (-naive +got):\n%s", diff)
		}
	})
}

func benchmarkScan(b *testing.B, rules int) {
	rs, err := GenerateRuleset(RulesetSpec{Rules: rules, Seed: 7})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	payloads := make([][]byte, 64)
	for i := range payloads {
		payloads[i] = randBytes(rng, 1500, 256)
	}
	b.SetBytes(1500)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if n, _ := rs.Verdict(payloads[i%len(payloads)], nil); n != 0 {
			b.Fatalf("random payload matched %d rules", n)
		}
	}
}

func BenchmarkScan1k(b *testing.B)  { benchmarkScan(b, 1_000) }
func BenchmarkScan10k(b *testing.B) { benchmarkScan(b, 10_000) }
func BenchmarkScan50k(b *testing.B) { benchmarkScan(b, 50_000) }

func BenchmarkBuild10k(b *testing.B) {
	for b.Loop() {
		if _, err := GenerateRuleset(RulesetSpec{Rules: 10_000, Seed: 7}); err != nil {
			b.Fatal(err)
		}
	}
}
