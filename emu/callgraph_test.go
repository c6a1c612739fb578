package emu

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// callGraphRow is a row of docs/callgraph.md: its key and the effect
// words of its Effects column.
type callGraphRow struct {
	key     string
	effects []Effect
}

// readCallGraph parses docs/callgraph.md's table: rows whose first cell
// starts with a backquoted key; effects are the backquoted words of the
// fourth column that are in the vocabulary (Effects).
func readCallGraph(t *testing.T) []callGraphRow {
	t.Helper()
	data, err := os.ReadFile("../docs/callgraph.md")
	if err != nil {
		t.Fatalf("the call-graph table: %v", err)
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	var rows []callGraphRow
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 5 {
			t.Fatalf("docs/callgraph.md: row %q has %d columns, want 5 (Entry | Products | Runs | Effects | Emulated)", line, len(cells))
		}
		key := quoted.FindStringSubmatch(cells[0])[1]
		var effects []Effect
		for _, m := range quoted.FindAllStringSubmatch(cells[3], -1) {
			if e := Effect(m[1]); slices.Contains(Effects, e) && !slices.Contains(effects, e) {
				effects = append(effects, e)
			}
		}
		rows = append(rows, callGraphRow{key: key, effects: effects})
	}
	if len(rows) == 0 {
		t.Fatal("docs/callgraph.md has no rows")
	}
	return rows
}

// TestCallGraphTable holds the emulator to the call-graph table: every
// entry point the emulator knows has a row and every row an entry point;
// the effects a row lists are exactly those the emulator reproduces plus
// those it names as missing, each missing one with its reason.
func TestCallGraphTable(t *testing.T) {
	rows := readCallGraph(t)
	byKey := map[string]EntryPoint{}
	for _, ep := range EntryPoints {
		if _, dup := byKey[ep.Key]; dup {
			t.Errorf("entry %q twice in EntryPoints", ep.Key)
		}
		byKey[ep.Key] = ep
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.key] {
			t.Errorf("docs/callgraph.md: %q has two rows", r.key)
		}
		seen[r.key] = true
		ep, ok := byKey[r.key]
		if !ok {
			t.Errorf("docs/callgraph.md: %q is no entry point of the emulator (emu.EntryPoints)", r.key)
			continue
		}
		if len(r.effects) == 0 {
			t.Errorf("docs/callgraph.md: %q lists no effect (read-only is one)", r.key)
		}
		for _, e := range r.effects {
			_, missing := ep.Missing[e]
			if !slices.Contains(ep.Effects, e) && !missing {
				t.Errorf("%q: the product has effect %s (docs/callgraph.md) and the emulator neither reproduces it nor says why not", r.key, e)
			}
		}
		for _, e := range ep.Effects {
			if !slices.Contains(r.effects, e) {
				t.Errorf("%q: the emulator reproduces %s, which the row does not list", r.key, e)
			}
		}
		for e, why := range ep.Missing {
			if strings.TrimSpace(why) == "" {
				t.Errorf("%q: missing effect %s has no reason", r.key, e)
			}
			if !slices.Contains(r.effects, e) {
				t.Errorf("%q: missing effect %s is not in the row", r.key, e)
			}
		}
	}
	for _, ep := range EntryPoints {
		if !seen[ep.Key] {
			t.Errorf("entry point %q has no row in docs/callgraph.md", ep.Key)
		}
	}
}

// TestUnknownEntryRecorded: a command no row covers is recorded, one the
// table has is not.
func TestUnknownEntryRecorded(t *testing.T) {
	e := &Emulator{}
	e.sawCommand([]string{"/sbin/pfctl", "-sr"})
	e.sawCommand([]string{"/usr/local/bin/php", "-r", "write_config();"})
	e.sawRoute("POST /api/firewall/filter/apply")
	e.sawRoute("POST /api/core/system/halt")
	want := []string{"sh: /usr/local/bin/php -r write_config();", "api: POST /api/core/system/halt"}
	if got := e.UnknownEntries(); !slices.Equal(got, want) {
		t.Errorf("UnknownEntries() = %q, want %q", got, want)
	}
}
