package matrix

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures"
)

// FuzzParse: a spec is user input. Whatever the bytes, Parse gives a spec
// or a *SpecError, never a panic; a spec it accepts expands (or is refused
// with a *SpecError) into at most MaxPoints distinct points, and planning it
// against a real config neither panics nor loses a point.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/*.yaml", "../examples/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	cfg, err := configxml.LoadBytes(fixtures.Read("configs/pfsense-2.7.xml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := Parse(bytes.NewReader(raw))
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Parse error %T (%v), want *SpecError", err, err)
			}
			if se.Error() == "" {
				t.Fatal("empty error text")
			}
			if !utf8.ValidString(se.Error()) {
				t.Fatalf("error text is not valid UTF-8: %q", se.Error())
			}
			return
		}
		again, err := Parse(bytes.NewReader(raw))
		if err != nil || again.Hash() != s.Hash() {
			t.Fatalf("a second Parse of the same bytes gave %v, hash %q vs %q", err, again.Hash(), s.Hash())
		}
		points, err := s.Expand(context.Background())
		if err != nil {
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("Expand error %T (%v), want *SpecError", err, err)
			}
			return
		}
		if len(points) > MaxPoints {
			t.Fatalf("%d points, more than MaxPoints %d", len(points), MaxPoints)
		}
		seen := map[string]bool{}
		for _, p := range points {
			if seen[p.Key()] {
				t.Fatalf("point %s listed twice", p.Key())
			}
			seen[p.Key()] = true
		}
		plan, err := NewPlan(context.Background(), s, cfg, 1)
		if err != nil {
			return // knob values the fixture's version refuses
		}
		steps := map[int]bool{}
		for _, st := range plan.Steps {
			steps[st.Point.Index] = true
		}
		if len(steps) != len(points) {
			t.Fatalf("the plan visits %d of %d points", len(steps), len(points))
		}
	})
}
