package yamlerr_test

import (
	"bytes"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/fwab/fwab/internal/yamlerr"
)

type probe struct {
	Name     string `yaml:"name"`
	Duration string `yaml:"duration"`
	Parallel int    `yaml:"parallel"`
}

type spec struct {
	Target  string            `yaml:"target"`
	Repeats int               `yaml:"repeats"`
	UDP     bool              `yaml:"udp"`
	Ratio   float64           `yaml:"ratio"`
	Probes  []probe           `yaml:"probes"`
	Fixed   map[string]string `yaml:"fixed"`
	Tags    []string          `yaml:"tags"`
	Ignored string            `yaml:"-"`
}

func TestTranslate(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{"target: lab\nrepeat: 3\n", "line 2: unknown key `repeat` (did you mean `repeats`?)"},
		{"target: lab\nzebra: 3\n", "line 2: unknown key `zebra`; the keys here are target, repeats, udp, ratio, probes, fixed, tags"},
		{"probes:\n  - {name: a, paralel: 4}\n", "line 2: unknown key `paralel` (did you mean `parallel`?)"},
		{"repeats: five\n", "line 1: repeats must be a whole number, not `five`"},
		{"probes:\n  - {name: a, parallel: many}\n", "line 2: parallel must be a whole number, not `many`"},
		{"udp: maybe\n", "line 1: udp must be true or false, not `maybe`"},
		{"ratio: half\n", "line 1: ratio must be a number, not `half`"},
		{"target: [a, b]\n", "line 1: target must be a single value, not a list"},
		{"tags: one\n", "line 1: tags must be a list, such as [a, b], not `one`"},
		{"fixed: [a]\n", "line 1: fixed must be a mapping of keys to values, not a list"},
		{"target: lab\nprobes:\n\t- {name: a}\n", "line 3: tabs are not allowed in YAML: indent with spaces"},
		// yaml.v3 cuts a long value to 7 bytes and "...", here inside a
		// two-byte character: the message must still name the key and
		// stay valid UTF-8.
		{"repeats: 000000Жeleven\n", "line 1: repeats must be a whole number, not `000000...`"},
		{"repeats: five\nudp: maybe\n", "line 1: repeats must be a whole number, not `five`; line 2: udp must be true or false, not `maybe`"},
	} {
		var s spec
		dec := yaml.NewDecoder(bytes.NewReader([]byte(tt.src)))
		dec.KnownFields(true)
		err := dec.Decode(&s)
		if err == nil {
			t.Errorf("%q decoded without an error", tt.src)
			continue
		}
		if got := yamlerr.Translate(err, []byte(tt.src), &s); got.Error() != tt.want {
			t.Errorf("%q:\n got  %s\n want %s\n (yaml.v3 said: %v)", tt.src, got, tt.want, err)
		}
	}
	if yamlerr.Translate(nil, nil, nil) != nil {
		t.Errorf("Translate(nil) is not nil")
	}
}
