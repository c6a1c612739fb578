package docs

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
)

// TestKeysDocumented holds the references of the two files every user
// writes to the decoders that read them: each key the decoder takes is a
// row of the document's table, and each row is a key the decoder takes.
func TestKeysDocumented(t *testing.T) {
	for _, tt := range []struct {
		doc string
		typ reflect.Type
	}{
		{"matrix.md", reflect.TypeFor[matrix.Spec]()},
		{"targets.md", reflect.TypeFor[fwapi.TargetsFile]()},
	} {
		t.Run(tt.doc, func(t *testing.T) {
			doc, err := os.ReadFile(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			documented := map[string]bool{}
			for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z_.\\[\\]]+)` \\|").FindAllSubmatch(doc, -1) {
				documented[string(m[1])] = true
			}
			keys := yamlKeys(tt.typ, "")
			if len(keys) < 10 {
				t.Fatalf("found only %d keys in %v: %v", len(keys), tt.typ, keys)
			}
			for _, k := range keys {
				if !documented[k] {
					t.Errorf("%s does not document the key %s", tt.doc, k)
				}
			}
			for k := range documented {
				if !slices.Contains(keys, k) {
					t.Errorf("%s documents %s, which the decoder does not take", tt.doc, k)
				}
			}
		})
	}
}

// yamlKeys lists the keys a decoded type takes as dotted paths:
// "probes[].duration" for a list of records, "targets.NAME.host" for a
// map of them. A type that decodes itself (axes, durations, knob values)
// is one key; a record is documented key by key.
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" || (name == "" && !strings.Contains(opts, "inline")) {
			continue
		}
		ft, sub := f.Type, ""
		if strings.Contains(opts, "inline") {
			out = append(out, yamlKeys(deref(ft), prefix)...)
			continue
		}
		key := prefix + name
		out = append(out, key)
		for {
			switch ft.Kind() {
			case reflect.Pointer:
				ft = ft.Elem()
				continue
			case reflect.Slice:
				ft, sub = ft.Elem(), sub+"[]"
				continue
			case reflect.Map:
				ft, sub = ft.Elem(), sub+".NAME"
				continue
			}
			break
		}
		if ft.Kind() == reflect.Struct && !decodesItself(ft) {
			out = append(out, yamlKeys(ft, key+sub+".")...)
		}
	}
	return out
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// decodesItself: a type with its own UnmarshalYAML that is not a plain
// record of keys (a constraint checks its keys itself, and the canary
// takes true or false for its record, but both are records).
func decodesItself(t reflect.Type) bool {
	_, ok := reflect.PointerTo(t).MethodByName("UnmarshalYAML")
	return ok && t != reflect.TypeFor[matrix.Constraint]() && t != reflect.TypeFor[matrix.CanarySpec]()
}
