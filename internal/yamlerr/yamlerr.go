// Package yamlerr turns the errors of gopkg.in/yaml.v3 into messages a
// person can act on: "unknown key `repeat` (did you mean `repeats`?)"
// instead of "field repeat not found in type matrix.Spec", "repeats must be
// a whole number, not `five`" instead of "cannot unmarshal !!str `five`
// into int", and a plain word about tabs.
package yamlerr

import (
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Translate rewrites err, returned by decoding src into into (a pointer to
// the value decoded), message by message. Each message keeps its
// "line N: " prefix; several are joined with "; ". An error that is not
// yaml.v3's is returned unchanged.
func Translate(err error, src []byte, into any) error {
	if err == nil {
		return nil
	}
	var msgs []string
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msg := err.Error()
		if !strings.HasPrefix(msg, "yaml: ") {
			return err
		}
		msgs = []string{strings.TrimPrefix(msg, "yaml: ")}
	}
	lines := strings.Split(string(src), "\n")
	types := structTypes(reflect.TypeOf(into))
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = translate(m, lines, types)
	}
	return errors.New(strings.Join(out, "; "))
}

var (
	lineRE    = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownRE = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)
	typeRE    = regexp.MustCompile("^cannot unmarshal !!(\\w+) (?:`(.*)` )?into (\\S+)$") // a raw string cannot hold the backquotes
)

func translate(msg string, lines []string, types map[string]reflect.Type) string {
	m := lineRE.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	n, _ := strconv.Atoi(m[1])
	text := ""
	if n >= 1 && n <= len(lines) {
		text = lines[n-1]
	}
	body := m[2]
	switch {
	case strings.Contains(text, "\t") && (strings.Contains(body, "tab character") || strings.Contains(body, "cannot start any token")):
		body = "tabs are not allowed in YAML: indent with spaces"
	case unknownRE.MatchString(body):
		u := unknownRE.FindStringSubmatch(body)
		body = unknownKey(u[1], types[u[2]])
	case typeRE.MatchString(body):
		t := typeRE.FindStringSubmatch(body)
		body = wrongType(t[1], t[2], t[3], text)
	}
	return "line " + m[1] + ": " + body
}

func unknownKey(key string, t reflect.Type) string {
	msg := "unknown key `" + key + "`"
	known := keys(t)
	if len(known) == 0 {
		return msg
	}
	if s := nearest(key, known); s != "" {
		return msg + " (did you mean `" + s + "`?)"
	}
	return msg + "; the keys here are " + strings.Join(known, ", ")
}

// wrongType explains a value of YAML kind tag (str, seq, map, int, …)
// where a Go type goType was wanted; text is the source line, from which
// the key is read.
func wrongType(tag, value, goType, text string) string {
	want := "a " + strings.TrimPrefix(goType, "*")
	switch strings.TrimLeft(goType, "*") {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number"
	case "float32", "float64":
		want = "a number"
	case "bool":
		want = "true or false"
	case "string":
		want = "a single value"
	default:
		switch {
		case strings.HasPrefix(goType, "[]"):
			want = "a list, such as [a, b]"
		case strings.HasPrefix(goType, "map["):
			want = "a mapping of keys to values"
		}
	}
	what := "`" + strings.ToValidUTF8(value, "") + "`"
	switch tag {
	case "seq":
		what = "a list"
	case "map":
		what = "a mapping"
	}
	if key := keyOf(text, value); key != "" {
		return key + " must be " + want + ", not " + what
	}
	return "expected " + want + ", found " + what
}

// keyOf finds the key a value stands under on one source line, in block
// ("repeats: five") or flow ("{duration: 5s, bitrate: x}") style. yaml.v3
// shortens a long value to its first 7 bytes and "...", so the value is
// matched as a prefix of what follows the key. Nothing from the input is
// compiled: a value cut inside a character is not valid UTF-8.
func keyOf(line, value string) string {
	if v := strings.TrimSuffix(value, "..."); v != "" {
		for off := 0; off < len(line); {
			i := strings.Index(line[off:], v)
			if i < 0 {
				break
			}
			if k := keyBefore(line[:off+i]); k != "" {
				return k
			}
			off += i + 1
		}
	}
	k, _, ok := strings.Cut(strings.TrimLeft(strings.TrimSpace(line), "- "), ":")
	if ok && k != "" && !strings.ContainsAny(k, " {[") {
		return k
	}
	return ""
}

// keyBefore reads "key: " or "key: '" backwards from the end of s and
// returns the key: a letter or underscore, then letters, digits and _.@-.
func keyBefore(s string) string {
	s = strings.TrimRight(s, "\"'")
	s = strings.TrimRight(s, " \t")
	s, ok := strings.CutSuffix(s, ":")
	if !ok {
		return ""
	}
	s = strings.TrimRight(s, " \t")
	i := len(s)
	for i > 0 && isKeyByte(s[i-1]) {
		i--
	}
	k := s[i:]
	for k != "" && !(k[0] == '_' || 'A' <= k[0]&^0x20 && k[0]&^0x20 <= 'Z') {
		k = k[1:]
	}
	return k
}

func isKeyByte(c byte) bool {
	return c == '_' || c == '.' || c == '@' || c == '-' || '0' <= c && c <= '9' || 'A' <= c&^0x20 && c&^0x20 <= 'Z'
}

// structTypes maps each struct type reachable from t by its name as yaml.v3
// prints it ("matrix.Spec").
func structTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map) {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			return
		}
		if _, seen := out[t.String()]; seen {
			return
		}
		out[t.String()] = t
		for i := range t.NumField() {
			walk(t.Field(i).Type)
		}
	}
	walk(t)
	return out
}

// keys are the YAML keys a struct takes, in declaration order.
func keys(t reflect.Type) []string {
	if t == nil {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			out = append(out, keys(indirect(f.Type))...)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, name)
	}
	return out
}

func indirect(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	return t
}

// nearest is the known key closest to key, if one is close enough to be
// a likely typo: at most two edits, or a third of the letters of a long key.
func nearest(key string, known []string) string {
	best, bestD := "", max(2, len(key)/3)+1
	for _, k := range known {
		if d := distance(strings.ToLower(key), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein edit distance between a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
