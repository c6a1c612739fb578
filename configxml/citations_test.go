package configxml

// Citations stay true: every upstream citation in the repository's Go files
// names a file and line that exist in ../shared/upstream and that still say
// what the comment quotes. The forms (CONTRIBUTING.md, docs/upstream.md):
//
//	// upstream: PRODUCT VERSION PATH:LINE — text with a `token`
//	    PRODUCT opnsense-core or pfsense; VERSION 26.1, 2.7.2, master, or a
//	    folder name such as RELENG_2_7_2. Every `token` in backquotes must
//	    occur on the cited line or within two lines of it; at least one is
//	    required.
//	// upstream: OWNER/REPO@COMMIT PATH:LINE — text
//	    a file outside ../shared/upstream, read at that commit; checked for
//	    form only.
//	// upstream: not settled — what is open; checked at run time by …
//	    what upstream cannot answer, and what fwab checks instead.
//
// Each form is a line comment that starts with "upstream:" (after "//");
// its text may go on over the comment lines that follow.

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

type citation struct {
	at      string // file:line in this repository
	product string // opnsense-core, pfsense, or OWNER/REPO
	version string // 26.1, 2.7.2, master; the commit for OWNER/REPO
	path    string
	line    int
	text    string
	tokens  []string
	open    bool // "not settled"
}

var (
	citeStart  = regexp.MustCompile(`^\s*//\s*upstream:\s*(.*)$`)
	citeShared = regexp.MustCompile(`^(opnsense-core|pfsense) (\S+) (\S+):(\d+) — (\S.*)$`)
	citeRepo   = regexp.MustCompile(`^([A-Za-z0-9][\w.-]*/[\w.-]+)@([0-9a-f]{7,40}) (\S+):(\d+) — (\S.*)$`)
	citeOpen   = regexp.MustCompile(`^not settled — (\S.*)$`)
	citeToken  = regexp.MustCompile("`([^`]+)`")
)

// parseCitation reads one citation; rest is its first line after
// "upstream:", more the comment lines that continue it.
func parseCitation(at, rest string, more []string) (citation, error) {
	c := citation{at: at}
	full := strings.TrimSpace(strings.Join(append([]string{rest}, more...), " "))
	switch m := []string(nil); {
	case citeOpen.MatchString(rest):
		c.open, c.text = true, full
		if !strings.Contains(full, "run time") {
			return c, fmt.Errorf("%s: a citation that upstream does not settle must say what is checked at run time: %q", at, full)
		}
		return c, nil
	case citeShared.MatchString(rest):
		m = citeShared.FindStringSubmatch(rest)
		c.product, c.version, c.path = m[1], m[2], m[3]
		c.line, _ = strconv.Atoi(m[4])
	case citeRepo.MatchString(rest):
		m = citeRepo.FindStringSubmatch(rest)
		c.product, c.version, c.path = m[1], m[2], m[3]
		c.line, _ = strconv.Atoi(m[4])
	default:
		return c, fmt.Errorf("%s: malformed citation %q; write `upstream: PRODUCT VERSION PATH:LINE — text`, `upstream: OWNER/REPO@COMMIT PATH:LINE — text` or `upstream: not settled — …; checked at run time …`", at, rest)
	}
	c.text = full
	for _, t := range citeToken.FindAllStringSubmatch(full, -1) {
		c.tokens = append(c.tokens, t[1])
	}
	if c.line < 1 {
		return c, fmt.Errorf("%s: line %d", at, c.line)
	}
	return c, nil
}

// shared reports whether the citation names a file in ../shared/upstream.
func (c citation) shared() bool { return c.product == "opnsense-core" || c.product == "pfsense" }

// folder maps product and version to the folder below ../shared/upstream:
// "opnsense-core 26.1" → opnsense-core/26.1, "pfsense 2.7.2" →
// pfsense/RELENG_2_7_2, "pfsense master" → pfsense/master.
func (c citation) folder() string {
	v := c.version
	if c.product == "pfsense" && regexp.MustCompile(`^\d+(\.\d+)+$`).MatchString(v) {
		v = "RELENG_" + strings.ReplaceAll(v, ".", "_")
	}
	return filepath.Join(c.product, v)
}

// check holds a citation of ../shared/upstream against the file it names.
func (c citation) check(up string) error {
	if c.open || !c.shared() {
		return nil
	}
	if len(c.tokens) == 0 {
		return fmt.Errorf("%s: name in backquotes a `token` from %s:%d, so the citation can be checked", c.at, c.path, c.line)
	}
	dir := filepath.Join(up, c.folder())
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("%s: %s %s has no folder %s in the upstream copy", c.at, c.product, c.version, dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, c.path))
	if err != nil {
		return fmt.Errorf("%s: cited file: %v", c.at, err)
	}
	lines := strings.Split(string(data), "\n")
	if c.line > len(lines) {
		return fmt.Errorf("%s: %s has %d lines, the citation names line %d", c.at, c.path, len(lines), c.line)
	}
	lo, hi := max(c.line-3, 0), min(c.line+2, len(lines))
	window := strings.Join(lines[lo:hi], "\n")
	for _, tok := range c.tokens {
		if !strings.Contains(window, tok) {
			return fmt.Errorf("%s: stale citation: %s %s %s:%d (±2 lines) does not contain %q; it reads:\n%s",
				c.at, c.product, c.version, c.path, c.line, tok, window)
		}
	}
	return nil
}

// repoCitations scans every .go file below root.
func repoCitations(t *testing.T, root string) ([]citation, []error) {
	t.Helper()
	var cites []citation
	var errs []error
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "vendor" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		rel, _ := filepath.Rel(root, path)
		for i, l := range lines {
			m := citeStart.FindStringSubmatch(l)
			if m == nil {
				continue
			}
			var more []string
			for _, next := range lines[i+1:] {
				tx, ok := strings.CutPrefix(strings.TrimSpace(next), "//")
				if !ok || strings.TrimSpace(tx) == "" || citeStart.MatchString(next) {
					break
				}
				more = append(more, strings.TrimSpace(tx))
			}
			c, err := parseCitation(fmt.Sprintf("%s:%d", rel, i+1), strings.TrimSpace(m[1]), more)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cites = append(cites, c)
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return cites, errs
}

// TestUpstreamCitations checks every citation in the repository.
func TestUpstreamCitations(t *testing.T) {
	root := repoRoot(t)
	cites, errs := repoCitations(t, root)
	for _, err := range errs {
		t.Error(err)
	}
	if len(cites) == 0 {
		t.Fatal("no upstream citations found in the repository")
	}
	up := upstreamDir(t)
	for _, c := range cites {
		t.Run(c.at, func(t *testing.T) {
			if err := c.check(up); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCitationChecker: the checker accepts a true citation and refuses a
// stale, a malformed and an unchecked one, against a made-up upstream tree.
func TestCitationChecker(t *testing.T) {
	up := t.TempDir()
	file := filepath.Join(up, "pfsense/RELENG_2_7_2/src/etc/inc/interfaces.inc")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	body := "line 1\nline 2\nfunction hardware_offloading_applyflags($iface) {\nline 4\nline 5\nline 6\nline 7\n"
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		comment string
		want    string // "" when valid
	}{
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:3 — `hardware_offloading_applyflags` sets the flags", ""},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:5 — within two lines: `hardware_offloading_applyflags`", ""},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:6 — `hardware_offloading_applyflags` moved", "stale citation"},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:3 — `interface_configure`", "stale citation"},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:30 — `x`", "has 8 lines"},
		{"pfsense 2.7.2 src/etc/inc/missing.inc:3 — `x`", "cited file"},
		{"pfsense 2.8.0 src/etc/inc/interfaces.inc:3 — `x`", "no folder"},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:3 — no token", "name in backquotes"},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc — `x`", "malformed"},
		{"pfsense 2.7.2 src/etc/inc/interfaces.inc:3 - `x` with a hyphen", "malformed"},
		{"pfsense/FreeBSD-ports@a6e2e680346c5f3c94925a9e0cd47c9377c53bad net/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:100 — form only", ""},
		{"pfsense/FreeBSD-ports@main net/x:1 — not a commit", "malformed"},
		{"not settled — what pf counts per label; checked at run time by countRules", ""},
		{"not settled — and nothing checks it", "run time"},
	} {
		c, err := parseCitation("x.go:1", tt.comment, nil)
		if err == nil {
			err = c.check(up)
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v; want valid", tt.comment, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%q: %v; want an error with %q", tt.comment, err, tt.want)
		}
	}
	// A citation's text may go on over the next comment lines.
	c, err := parseCitation("x.go:1", "pfsense 2.7.2 src/etc/inc/interfaces.inc:3 — sets the flags,", []string{"see `hardware_offloading_applyflags`"})
	if err != nil || c.check(up) != nil || len(c.tokens) != 1 {
		t.Errorf("continued citation: %+v, %v", c, err)
	}
}
