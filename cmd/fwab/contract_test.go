package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The command-line contract every command keeps, so that scripts and CI can
// rely on the exit status (README, "Exit codes"): 2 for a bad flag, an
// unknown subcommand, a missing input file or an output that cannot be
// written; 130 for an interrupt; and in none of these cases is anything
// written.

// leaves lists every runnable command by its path below the root.
func leaves(c *cobra.Command) [][]string {
	var out [][]string
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		if sub.HasSubCommands() {
			for _, l := range leaves(sub) {
				out = append(out, append([]string{sub.Name()}, l...))
			}
			continue
		}
		out = append(out, []string{sub.Name()})
	}
	return out
}

func TestContractBadFlag(t *testing.T) {
	root := newRootCmd(&streams{})
	all := leaves(root)
	if len(all) < 25 {
		t.Fatalf("found only %d commands: %v", len(all), all)
	}
	for _, path := range all {
		args := append(append([]string{}, path...), "--no-such-flag")
		dir := t.TempDir()
		t.Chdir(dir)
		_, stderr, code := fwab(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, "no-such-flag") {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 naming the flag", strings.Join(args, " "), code, stderr)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("fwab %s wrote %v", strings.Join(args, " "), left)
		}
	}
}

func TestContractUnknownSubcommand(t *testing.T) {
	for _, c := range newRootCmd(&streams{}).Commands() {
		if !c.HasSubCommands() || c.Hidden {
			continue
		}
		_, stderr, code := fwab(t, "", c.Name(), "no-such-command")
		if code != exitUsage || !strings.Contains(stderr, "unknown command") {
			t.Errorf("fwab %s no-such-command: exit %d, %q", c.Name(), code, stderr)
		}
	}
}

// contractCase is a command that reads a file or writes one.
type contractCase struct {
	args []string // MISSING is a path that does not exist, OUT an output path, CFG a config, SPEC a spec
}

var fileCommands = []contractCase{
	{[]string{"config", "show", "MISSING"}},
	{[]string{"config", "set", "MISSING", "offload.tso=off", "-o", "OUT"}},
	{[]string{"config", "diff", "MISSING", "CFG"}},
	{[]string{"config", "lint", "MISSING"}},
	{[]string{"verify", "--offline", "MISSING"}},
	{[]string{"matrix", "check", "MISSING", "--config", "CFG"}},
	{[]string{"matrix", "plan", "SPEC", "--config", "MISSING"}},
	{[]string{"sweep", "MISSING", "--dry-run", "--config", "CFG"}},
	{[]string{"runs", "list", "--db", "MISSING"}},
	{[]string{"report", "1", "--db", "MISSING"}},
	{[]string{"compare", "1", "2", "--db", "MISSING"}},
	{[]string{"trend", "MISSING", "--testbed", "lab"}},
	{[]string{"trend", "SPEC", "--testbed", "lab", "--db", "MISSING"}},
	{[]string{"fw", "info", "--target", "x", "--targets", "MISSING"}},
	{[]string{"target", "test", "x", "--targets", "MISSING"}},
	{[]string{"db", "migrate", "--db", "MISSING"}},
}

func expand(t *testing.T, c contractCase, missing, out string) []string {
	var args []string
	for _, a := range c.args {
		switch a {
		case "MISSING":
			a = missing
		case "OUT":
			a = out
		case "CFG":
			a = fixtureFile(t, "configs/pfsense-2.7.xml")
		case "SPEC":
			a = "../../examples/e302-modes.yaml"
		}
		args = append(args, a)
	}
	return args
}

func TestContractMissingFile(t *testing.T) {
	for _, c := range fileCommands {
		dir := t.TempDir()
		missing := filepath.Join(dir, "missing")
		args := expand(t, c, missing, filepath.Join(dir, "out.xml"))
		_, stderr, code := fwab(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, missing) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 naming the missing file", strings.Join(args, " "), code, stderr)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 {
			t.Errorf("fwab %s wrote %v", strings.Join(args, " "), left)
		}
	}
}

func TestContractUnwritableOutput(t *testing.T) {
	nowhere := filepath.Join(t.TempDir(), "no", "such", "dir", "out")
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	for _, args := range [][]string{
		{"config", "set", cfg, "offload.tso=off", "-o", nowhere},
		{"report", "1", "--db", resultsDB(t), "-o", nowhere},
		{"compare", "1", "1", "--db", resultsDB(t), "--junit", nowhere},
		{"gen-man", "/proc/version/man"},
	} {
		_, stderr, code := fwab(t, "", args...)
		if code != exitUsage {
			t.Errorf("fwab %s: exit %d, %q; want exit 2", strings.Join(args, " "), code, stderr)
		}
	}
}

func TestContractInterrupt(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // interrupted before it starts: the command must notice
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	orig, _ := os.ReadFile(cfg)
	for _, args := range [][]string{
		{"config", "set", cfg, "offload.tso=off", "--in-place"},
		{"config", "lint", cfg},
		{"config", "show", cfg},
		{"verify", "--offline", cfg},
		{"matrix", "check", "../../examples/e302-modes.yaml", "--config", cfg},
		{"matrix", "plan", "../../examples/e302-modes.yaml", "--config", cfg},
		{"sweep", "../../examples/e302-modes.yaml", "--dry-run", "--config", cfg},
	} {
		var out, errOut strings.Builder
		code := run(ctx, args, strings.NewReader(""), &out, &errOut)
		if code != exitCancelled {
			t.Errorf("fwab %s interrupted: exit %d, %q", strings.Join(args, " "), code, errOut.String())
		}
	}
	if now, _ := os.ReadFile(cfg); string(now) != string(orig) {
		t.Errorf("an interrupted command changed %s", cfg)
	}
}

// A key file the target names but that is not there is bad input, named
// before any connection is tried.
func TestContractMissingKeyFile(t *testing.T) {
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.yaml")
	missing := filepath.Join(dir, "id_gone")
	yaml := "targets:\n  fw1:\n    flavor: pfsense\n    host: 127.0.0.1\n    ssh: {port: 1, user: admin, key_file: " + missing + "}\n" +
		"    endpoints: {client: {addr: 198.18.1.10, netns: a}, server: {addr: 198.19.1.10, netns: b}}\n"
	if err := os.WriteFile(targets, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fw", "info"}, {"fw", "pull", "-o", filepath.Join(dir, "x.xml")}, {"verify"}} {
		args = append(args, "--target", "fw1", "--targets", targets)
		_, stderr, code := fwab(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, missing) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 naming %s", strings.Join(args, " "), code, stderr, missing)
		}
	}
}

// Setup errors are the user's to fix and exit 2, never 1, which CI reads
// as a regression: a run that is not in the database, an API key variable
// that is unset, a secret file others may read, a certificate that does
// not match its pin.
func TestContractSetupErrors(t *testing.T) {
	db := resultsDB(t)
	dir := t.TempDir()
	key := filepath.Join(dir, "api.key")
	os.WriteFile(key, []byte("k\n"), 0o644)
	// A TLS server whose certificate is not the pinned one.
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	targets := filepath.Join(dir, "targets.yaml")
	os.WriteFile(targets, []byte("targets:\n"+
		"  env:\n    flavor: opnsense\n    host: 127.0.0.1\n    api: {url: \"https://127.0.0.1:1\", key_env: FWAB_TEST_UNSET_KEY, secret_env: FWAB_TEST_UNSET_SECRET}\n"+
		"  open:\n    flavor: opnsense\n    host: 127.0.0.1\n    api: {url: \"https://127.0.0.1:1\", key_file: "+key+", secret_file: "+key+"}\n"+
		"  pin:\n    flavor: opnsense\n    host: 127.0.0.1\n    api: {url: \""+srv.URL+"\", key_env: FWAB_TEST_KEY, secret_env: FWAB_TEST_KEY, fingerprint: \""+strings.Repeat("ab", 32)+"\"}\n"), 0o600)
	t.Setenv("FWAB_TEST_KEY", "k")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"report", "999", "--db", db}, "no run 999"},
		{[]string{"runs", "show", "999", "--db", db}, "no run 999"},
		{[]string{"fw", "info", "--target", "env", "--targets", targets}, "FWAB_TEST_UNSET_KEY"},
		{[]string{"fw", "info", "--target", "open", "--targets", targets}, "chmod 600"},
		{[]string{"fw", "info", "--target", "pin", "--targets", targets}, "does not match the pinned fingerprint"},
	} {
		if _, stderr, code := fwab(t, "", tt.args...); code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("fwab %s: exit %d, %q; want exit 2 saying %q", strings.Join(tt.args, " "), code, stderr, tt.want)
		}
	}
}
