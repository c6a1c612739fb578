// Package fwapitest holds what fwapi's tests share that is not a firewall:
// the corpus of hostile values (shell and XML injections) that must never
// run or break config.xml. Tests that need a firewall start the lab's
// emulator (lab/labtest).
package fwapitest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
)

// Hostile is a set of values that would run a command if any shell ever
// interpreted them: each writes the canary file /tmp/fwab-canary-TOKEN-N.
// They also carry XML metacharacters, so a value that is not escaped breaks
// the document.
type Hostile struct {
	Token  string
	Values []string
}

// NewHostile makes the set with a fresh token.
func NewHostile() Hostile {
	var b [6]byte
	rand.Read(b[:])
	h := Hostile{Token: hex.EncodeToString(b[:])}
	forms := []string{
		`$(echo pwned > %s)`,
		"`echo pwned > %s`",
		`x; echo pwned > %s`,
		`x' ; echo pwned > %s ; '`,
		`x" ; echo pwned > %s ; "`,
		"x\necho pwned > %s\ny",
		`x && echo pwned > %s || echo pwned > %[1]s`,
		`</descr><descr>&amp; <![CDATA[ ]]> <!-- $(echo pwned > %s) --> <?pi?>`,
		`'"<&>"' | echo pwned > %s ${IFS} $((1+1)) \`,
	}
	for i, f := range forms {
		h.Values = append(h.Values, fmt.Sprintf(f, h.Canary(i)))
	}
	return h
}

// Canary is the firewall path value i writes if it is ever run.
func (h Hostile) Canary(i int) string { return fmt.Sprintf("/tmp/fwab-canary-%s-%d", h.Token, i) }

// Assignments puts every value into config.xml: interface descriptions
// and elements of their own.
func (h Hostile) Assignments() []string {
	out := []string{"xml:interfaces/lan/descr=" + h.Values[0], "xml:interfaces/wan/descr=" + h.Values[1]}
	for i, v := range h.Values {
		out = append(out, fmt.Sprintf("xml:system/fwabinj/v%d=%s", i, v))
	}
	return out
}

// CheckConfig: the document is well-formed XML (for encoding/xml too) and
// every value reads back exactly as written.
func (h Hostile) CheckConfig(t testing.TB, what string, data []byte) {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", what, err)
		}
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, v := range h.Values {
		if got, err := c.Get(fmt.Sprintf("xml:system/fwabinj/v%d", i)); err != nil || got != v {
			t.Errorf("%s: value %d reads back as %q (%v), want %q", what, i, got, err, v)
		}
	}
	if got, _ := c.Get("xml:interfaces/lan/descr"); got != h.Values[0] {
		t.Errorf("%s: lan descr reads back as %q, want %q", what, got, h.Values[0])
	}
}

// CheckNoCanary fails for every canary file under the given roots (the
// firewall's folder, this machine's /tmp).
func (h Hostile) CheckNoCanary(t testing.TB, roots ...string) {
	t.Helper()
	prefix := "fwab-canary-" + h.Token
	for _, root := range roots {
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if strings.HasPrefix(d.Name(), prefix) {
				t.Errorf("canary %s exists: a value was run as a command", path)
			}
			if d.IsDir() && path != root && root == "/tmp" {
				return filepath.SkipDir // only /tmp itself on this machine
			}
			return nil
		})
	}
}
