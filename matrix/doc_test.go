package matrix

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// specKeys lists every key a spec can hold, as dotted paths ("probes[].duration"),
// read from the decoder's own types.
func specKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		key := prefix + name
		out = append(out, key)
		ft := f.Type
		list := ""
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			if ft.Kind() == reflect.Slice {
				list = "[]"
			}
			ft = ft.Elem()
		}
		// Structs with their own YAML form (axes, knob values, durations)
		// are one key; other structs are documented key by key.
		if ft.Kind() == reflect.Struct && !hasOwnYAML(ft) {
			out = append(out, specKeys(ft, key+list+".")...)
		}
	}
	return out
}

// hasOwnYAML: a type that unmarshals itself and is not a plain record of keys.
func hasOwnYAML(t reflect.Type) bool {
	_, ok := reflect.PointerTo(t).MethodByName("UnmarshalYAML")
	return ok && t != reflect.TypeFor[Constraint]()
}

// TestDocsListEverySpecKey: docs/matrix.md documents every key the decoder
// takes, and no key it does not.
func TestDocsListEverySpecKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/matrix.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_.\\[\\]]+)` \\|").FindAllSubmatch(doc, -1) {
		documented[string(m[1])] = true
	}
	keys := specKeys(reflect.TypeFor[Spec](), "")
	if len(keys) < 20 {
		t.Fatalf("found only %d spec keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !documented[k] {
			t.Errorf("docs/matrix.md does not document the spec key %s", k)
		}
	}
	for k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/matrix.md documents %s, which the spec has not", k)
		}
	}
}
