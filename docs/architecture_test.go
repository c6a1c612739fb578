package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestImportRules holds every package of the module to the "must not"
// column of architecture.md's package table, in the manner of tailscale's
// tstest/deptest: the dependency graph comes from go list, the rules from
// the document, so neither can change without the other.
func TestImportRules(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parseTable(doc)
	if err != nil {
		t.Fatalf("architecture.md: %v", err)
	}
	g := loadGraph(t)
	rules := resolve(t, g, rows)
	for _, v := range check(g, rules) {
		t.Error(v)
	}
}

// A row is one line of the package table: a package pattern and the
// clauses of its "must not" cell.
type row struct {
	pattern string // module-relative: "fwapi/..."
	clauses []clause
}

type clauseKind int

const (
	dependOn     clauseKind = iota // no direct or indirect dependency on any of paths
	importDirect                   // no direct import of any of paths
	importedBy                     // only paths (and test-support packages) depend on the row
)

type clause struct {
	kind        clauseKind
	paths       []string // as written: "net/http/...", "fwapi/..."
	testSupport bool     // importedBy: test-support packages may too
	text        string
}

var (
	backquoted = regexp.MustCompile("`([^`]+)`")
	verbs      = map[string]clauseKind{
		"depend on":                   dependOn,
		"import":                      importDirect,
		"be imported by anything but": importedBy,
	}
)

// parseTable reads the table whose header is "| package | owns | must not |".
// A clause of a "must not" cell (cells are split at ";") is checked when it
// has backquoted paths; the text just before the first of them must then
// end in one of the verbs, so that nothing reads as enforced that is not.
func parseTable(doc []byte) ([]row, error) {
	var rows []row
	in := false
	for line := range strings.Lines(string(doc)) {
		line = strings.TrimSpace(line)
		if !in {
			in = line == "| package | owns | must not |"
			continue
		}
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			return nil, fmt.Errorf("table row %q: want 3 cells, have %d", line, len(cells))
		}
		if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
			continue
		}
		m := backquoted.FindStringSubmatch(cells[0])
		if m == nil {
			return nil, fmt.Errorf("table row %q: the package cell names no `package`", line)
		}
		r := row{pattern: m[1]}
		for text := range strings.SplitSeq(cells[2], ";") {
			text = strings.TrimSpace(text)
			c, checked, err := parseClause(text)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", r.pattern, err)
			}
			if checked {
				r.clauses = append(r.clauses, c)
			}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		return nil, errors.New("no package table (header | package | owns | must not |)")
	}
	return rows, nil
}

func parseClause(text string) (clause, bool, error) {
	ms := backquoted.FindAllStringSubmatchIndex(text, -1)
	if ms == nil {
		return clause{}, false, nil // prose only
	}
	lead := strings.TrimSpace(text[:ms[0][0]])
	c := clause{text: text}
	found := false
	for verb, kind := range verbs {
		if lead == verb || strings.HasSuffix(lead, " "+verb) {
			c.kind, found = kind, true
			break
		}
	}
	if !found {
		return clause{}, false, fmt.Errorf("clause %q names paths but does not say \"depend on\", \"import\" or \"be imported by anything but\" right before them", text)
	}
	for _, m := range ms {
		c.paths = append(c.paths, text[m[2]:m[3]])
	}
	if c.kind == importedBy {
		c.testSupport = strings.Contains(text, "test-support packages")
	}
	return c, true, nil
}

// pkg is what go list says about one package.
type pkg struct {
	ImportPath string
	Name       string
	Module     *struct{ Path string }
	Standard   bool
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	Deps       []string
}

type graph struct {
	module string
	own    []*pkg          // the module's packages, from go list ./...
	all    map[string]*pkg // every package in the graph, by import path
	known  map[string]bool // paths outside the module that go list finds
}

// loadGraph lists the module's packages and all their dependencies.
func loadGraph(t *testing.T) *graph {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Name,Module,Standard,GoFiles,CgoFiles,Imports,Deps,DepOnly", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := &graph{all: map[string]*pkg{}, known: map[string]bool{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			pkg
			DepOnly bool
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		q := p.pkg
		g.all[q.ImportPath] = &q
		if !p.DepOnly && len(q.GoFiles)+len(q.CgoFiles) > 0 {
			g.own = append(g.own, &q)
			if q.Module != nil {
				g.module = q.Module.Path
			}
		}
	}
	if g.module == "" || len(g.own) == 0 {
		t.Fatal("go list found no package of this module")
	}
	return g
}

// resolved is a row with its paths turned into full import path patterns.
type resolved struct {
	row
	members []*pkg
	clauses []resolvedClause
}

type resolvedClause struct {
	clause
	patterns []string // full: "github.com/fwab/fwab/fwapi/...", "net/http/..."
}

// resolve maps rows to packages and fails the test when the table and the
// module have drifted apart: a package under no row or under two, a row or
// a path that matches nothing.
func resolve(t *testing.T, g *graph, rows []row) []resolved {
	t.Helper()
	var out []resolved
	for _, r := range rows {
		res := resolved{row: r}
		full := g.module + "/" + r.pattern
		for _, p := range g.own {
			if match(full, p.ImportPath) {
				res.members = append(res.members, p)
			}
		}
		if len(res.members) == 0 {
			t.Errorf("architecture.md names %s, which matches no package of the module: remove or fix the row", r.pattern)
		}
		for _, c := range r.clauses {
			rc := resolvedClause{clause: c}
			for _, path := range c.paths {
				rc.patterns = append(rc.patterns, g.fullPath(t, r.pattern, path))
			}
			res.clauses = append(res.clauses, rc)
		}
		out = append(out, res)
	}
	for _, p := range g.own {
		var under []string
		for _, r := range out {
			if slices.Contains(r.members, p) {
				under = append(under, r.pattern)
			}
		}
		switch len(under) {
		case 0:
			t.Errorf("package %s is in no row of architecture.md's package table: add it, with what it owns and must not do", p.ImportPath)
		case 1:
		default:
			t.Errorf("package %s is under %d rows of architecture.md (%s): keep one", p.ImportPath, len(under), strings.Join(under, ", "))
		}
	}
	return out
}

// fullPath turns a path as the table writes it into an import path
// pattern: this module's when a package of the module is there, else as it
// stands, which must then name a package go list knows.
func (g *graph) fullPath(t *testing.T, rowPattern, path string) string {
	t.Helper()
	first, _, _ := strings.Cut(path, "/")
	if !strings.Contains(first, ".") {
		full := g.module + "/" + path
		for _, p := range g.own {
			if match(full, p.ImportPath) {
				return full
			}
		}
	}
	if _, ok := g.known[path]; !ok {
		g.known[path] = known(path)
	}
	if !g.known[path] {
		t.Errorf("architecture.md, row %s: %s names no package", rowPattern, path)
	}
	return path
}

// known reports whether go list finds a package for path (a pattern with
// "/..." must match at least one).
func known(path string) bool {
	cmd := exec.Command("go", "list", "-e", "-f", "{{if .Error}}error{{end}}", path)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	return err == nil && len(bytes.TrimSpace(out)) == 0 && !bytes.Contains(stderr.Bytes(), []byte("matched no packages"))
}

// match reports whether path is pattern or, for "P/...", P or below it.
func match(pattern, path string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == base || strings.HasPrefix(path, base+"/")
	}
	return path == pattern
}

func matchAny(patterns []string, path string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return match(p, path) })
}

// testSupport reports whether p exists for tests: its name ends in "test".
func testSupport(p *pkg) bool { return strings.HasSuffix(p.Name, "test") }

// check returns one message per broken rule.
func check(g *graph, rules []resolved) []string {
	var out []string
	for _, r := range rules {
		for _, c := range r.clauses {
			switch c.kind {
			case dependOn:
				for _, p := range r.members {
					for _, d := range p.Deps {
						if !matchAny(c.patterns, d) {
							continue
						}
						chain := g.chain(p.ImportPath, d)
						if slices.ContainsFunc(chain[1:len(chain)-1], func(n string) bool { return matchAny(c.patterns, n) }) {
							continue // reported as the dependency it comes through
						}
						out = append(out, fmt.Sprintf("%s depends on %s (%s)\n\tarchitecture.md: %s must not %s",
							p.ImportPath, d, g.short(chain), r.pattern, c.text))
					}
				}
			case importDirect:
				for _, p := range r.members {
					for _, d := range p.Imports {
						if matchAny(c.patterns, d) {
							out = append(out, fmt.Sprintf("%s imports %s\n\tarchitecture.md: %s must not %s", p.ImportPath, d, r.pattern, c.text))
						}
					}
				}
			case importedBy:
				for _, q := range g.own {
					if slices.Contains(r.members, q) || matchAny(c.patterns, q.ImportPath) || c.testSupport && testSupport(q) {
						continue
					}
					for _, p := range r.members {
						if !slices.Contains(q.Deps, p.ImportPath) {
							continue
						}
						chain := g.chain(q.ImportPath, p.ImportPath)
						if slices.ContainsFunc(chain[1:len(chain)-1], func(n string) bool { return matchAny([]string{g.module + "/" + r.pattern}, n) }) {
							continue // reported as the package it comes through
						}
						out = append(out, fmt.Sprintf("%s depends on %s (%s)\n\tarchitecture.md: %s must not %s",
							q.ImportPath, p.ImportPath, g.short(chain), r.pattern, c.text))
					}
				}
			}
		}
	}
	// Test-support packages are for tests only.
	for _, q := range g.own {
		if testSupport(q) {
			continue
		}
		for _, p := range g.own {
			if testSupport(p) && slices.Contains(q.Deps, p.ImportPath) {
				out = append(out, fmt.Sprintf("%s depends on the test-support package %s (%s): only tests may",
					q.ImportPath, p.ImportPath, g.short(g.chain(q.ImportPath, p.ImportPath))))
			}
		}
	}
	return out
}

// chain is the shortest import path from one package to another.
func (g *graph) chain(from, to string) []string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			var path []string
			for n := to; n != ""; n = prev[n] {
				path = append(path, n)
			}
			slices.Reverse(path)
			return path
		}
		if p := g.all[cur]; p != nil {
			for _, next := range p.Imports {
				if _, seen := prev[next]; !seen {
					prev[next] = cur
					queue = append(queue, next)
				}
			}
		}
	}
	return []string{from, "?", to}
}

// short writes a chain as "report → fwapi → net/http", this module's
// packages without the module path.
func (g *graph) short(chain []string) string {
	out := make([]string, len(chain))
	for i, n := range chain {
		out[i] = strings.TrimPrefix(n, g.module+"/")
	}
	return strings.Join(out, " → ")
}
