package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/fwab/fwab/report/reporttest"
	"github.com/fwab/fwab/store"
)

// recipe is one CI recipe of docs/ci.md: its shell steps in order, each
// run by a shell of its own, and the JUnit file the CI reads.
type recipe struct {
	steps []string
	junit string
}

// recipeTestbed is the testbed the recipes are run for.
const recipeTestbed = "t730"

// fencedBlock returns the first fenced code block after the heading that
// starts with heading.
func fencedBlock(t *testing.T, doc, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "\n"+heading)
	if !ok {
		t.Fatalf("docs/ci.md has no heading %q", heading)
	}
	_, rest, ok = strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("docs/ci.md: no code block after %q", heading)
	}
	_, rest, _ = strings.Cut(rest, "\n") // the fence's language
	block, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("docs/ci.md: the code block after %q is not closed", heading)
	}
	return block
}

// gitlabRecipe reads the hidden job the GitLab jobs extend: its script
// lines, one shell session, split at the sweep.
func gitlabRecipe(t *testing.T, block string) recipe {
	t.Helper()
	var doc map[string]struct {
		Script    []string `yaml:"script"`
		Artifacts struct {
			Reports struct {
				JUnit string `yaml:"junit"`
			} `yaml:"reports"`
		} `yaml:"artifacts"`
	}
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("GitLab recipe: %v\n%s", err, block)
	}
	job := doc[".fwab-nightly"]
	var r recipe
	var session []string
	for _, line := range job.Script {
		if strings.HasPrefix(line, "fwab sweep ") {
			if len(session) > 0 {
				r.steps = append(r.steps, strings.Join(session, "\n"))
				session = nil
			}
			r.steps = append(r.steps, line)
			continue
		}
		session = append(session, line)
	}
	if len(session) > 0 {
		r.steps = append(r.steps, strings.Join(session, "\n"))
	}
	r.junit = job.Artifacts.Reports.JUnit
	return r
}

// githubRecipe reads the run steps of the nightly job, with the matrix's
// testbed put in, and the path of the artifact uploaded.
func githubRecipe(t *testing.T, block string) recipe {
	t.Helper()
	var doc struct {
		Jobs map[string]struct {
			Steps []struct {
				Run  string            `yaml:"run"`
				Uses string            `yaml:"uses"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("GitHub recipe: %v\n%s", err, block)
	}
	expr := regexp.MustCompile(`\$\{\{\s*matrix\.testbed\s*\}\}`)
	var r recipe
	for _, s := range doc.Jobs["nightly"].Steps {
		if s.Run != "" {
			r.steps = append(r.steps, expr.ReplaceAllString(s.Run, recipeTestbed))
		}
		if strings.HasPrefix(s.Uses, "actions/upload-artifact") {
			r.junit = s.With["path"]
		}
	}
	return r
}

// jenkinsRecipe reads the sh steps (single-quoted Groovy strings, which
// Groovy passes on as they are) and the junit step's file.
func jenkinsRecipe(t *testing.T, block string) recipe {
	t.Helper()
	var r recipe
	for _, m := range regexp.MustCompile(`(?s)\bsh\s+(?:'''(.*?)'''|'([^'\n]*)')`).FindAllStringSubmatch(block, -1) {
		r.steps = append(r.steps, m[1]+m[2])
	}
	// The junit step, not a --junit flag; Groovy puts the testbed in.
	if m := regexp.MustCompile(`(?:^|[\s{])junit\s[^"\n]*"([^"]+)"`).FindStringSubmatch(block); m != nil {
		r.junit = strings.NewReplacer("${TESTBED}", recipeTestbed, "$TESTBED", recipeTestbed).Replace(m[1])
	}
	return r
}

// TestCIRecipes runs the shell steps of each recipe in docs/ci.md for
// three nights against a results database of the test's own, with this
// build as fwab and the sweep replaced by recording a finished run: the
// first night has nothing to compare and passes, the second (the same
// figures) passes, the third (10 % slower) fails and writes JUnit.
func TestCIRecipes(t *testing.T) {
	b, err := os.ReadFile("../../docs/ci.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, tc := range []struct {
		name, heading string
		parse         func(*testing.T, string) recipe
	}{
		{"gitlab", "### GitLab CI", gitlabRecipe},
		{"github", "### GitHub Actions", githubRecipe},
		{"jenkins", "### Jenkins", jenkinsRecipe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.parse(t, fencedBlock(t, doc, tc.heading))
			sweeps := 0
			for _, s := range r.steps {
				if strings.HasPrefix(s, "fwab sweep ") {
					sweeps++
				}
			}
			if sweeps != 1 || len(r.steps) < 2 || !strings.HasPrefix(r.steps[0], "fwab sweep ") || r.junit == "" {
				t.Fatalf("%s recipe: want a sweep step first, a gate after it and a JUnit report; found steps %q and JUnit %q", tc.name, r.steps, r.junit)
			}
			for _, s := range r.steps {
				if _, err := exec.LookPath("jq"); err != nil && strings.Contains(s, "jq ") {
					t.Skipf("%s recipe uses jq, which is not installed here: install jq (and have scripts/setup.sh install it)", tc.name)
				}
			}
			runRecipe(t, r)
		})
	}
}

// runRecipe runs the recipe's steps for three nights in a folder of its
// own, with fwab on PATH and FWAB_DB and TESTBED set as the CI would.
func runRecipe(t *testing.T, r recipe) {
	ctx := t.Context()
	work, bin := t.TempDir(), t.TempDir()
	db := filepath.Join(t.TempDir(), "results.db")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(bin, "fwab")); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), asFwab+"=1", "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		dbEnv+"="+db, "TESTBED="+recipeTestbed, "HOME="+work, "XDG_STATE_HOME="+filepath.Join(work, "state"))
	junit := filepath.Join(work, r.junit)

	// sweep records tonight's run of the nightly spec in place of a sweep:
	// on the recipe's testbed, and on another testbed, finished later.
	night := 0
	sweep := func(seed uint64, slowdown float64) {
		night++
		st, err := store.Open(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		for i, tb := range []string{recipeTestbed + "@0000000000aa", "apu2@0000000000bb"} {
			run := reporttest.T730(seed+uint64(100*i), slowdown+0.3*float64(i))
			run.Uniform, run.Testbed, run.Target = true, tb, strings.Split(tb, "@")[0]
			run.Created = time.Date(2026, 11, night, 2, i, 0, 0, time.UTC)
			if _, err := reporttest.Create(ctx, st, run); err != nil {
				t.Fatal(err)
			}
		}
	}
	// tonight runs the steps as the CI would: each in its own shell with -e,
	// up to the first that fails; it returns that step's exit status.
	tonight := func(seed uint64, slowdown float64) (int, string) {
		os.Remove(junit)
		var out bytes.Buffer
		for _, step := range r.steps {
			if strings.HasPrefix(step, "fwab sweep ") {
				sweep(seed, slowdown)
				continue
			}
			cmd := exec.CommandContext(ctx, "/bin/sh", "-e", "-c", step)
			cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, env, &out, &out
			fmt.Fprintf(&out, "$ %s\n", step)
			err := cmd.Run()
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit):
				return exit.ExitCode(), out.String()
			case err != nil:
				t.Fatal(err)
			}
		}
		return 0, out.String()
	}

	code, out := tonight(31, 0)
	if code != 0 || !strings.Contains(out, "nothing to compare") || strings.Contains(out, "design:") {
		t.Errorf("night 1 (one finished run): exit %d; want exit 0 and nothing compared\n%s", code, out)
	}
	if _, err := os.Stat(junit); err == nil {
		t.Errorf("night 1 wrote %s with nothing compared", r.junit)
	}

	code, out = tonight(32, 0)
	x, err := os.ReadFile(junit)
	if code != 0 || !strings.Contains(out, "A: run 1 on t730") || !strings.Contains(out, "B: run 3 on t730") || err != nil || !strings.Contains(string(x), `failures="0"`) {
		t.Errorf("night 2 (the same figures): exit %d, JUnit %v %.200s; want exit 0 comparing runs 1 and 3 and a JUnit file without failures\n%s", code, err, x, out)
	}

	code, out = tonight(33, 0.10)
	x, err = os.ReadFile(junit)
	if code != exitFailure || !strings.Contains(out, "A: run 3 on t730") || !strings.Contains(out, "B: run 5 on t730") || err != nil || !strings.Contains(string(x), "<failure") {
		t.Errorf("night 3 (10 %% slower): exit %d, JUnit %v %.200s; want exit 1 and the regression in JUnit\n%s", code, err, x, out)
	}
}
