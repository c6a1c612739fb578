package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/fixtures"
	"github.com/fwab/fwab/internal/golden"
)

// fwab runs the command line in-process and returns its outputs.
func fwab(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// fixtureFile copies a fixture into a temporary folder and returns its path.
func fixtureFile(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), filepath.Base(name))
	if err := os.WriteFile(p, fixtures.Read(name), 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigGolden(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	opn := fixtureFile(t, "configs/opnsense-26.1.xml")
	changed := filepath.Join(t.TempDir(), "changed.xml")
	if _, stderr, code := fwab(t, "", "config", "set", pf, "rules@lan=2", "offload.tso=on", "ids@lan=ips-inline", "-o", changed, "--allow", "FWAB001"); code != 0 {
		t.Fatalf("config set: exit %d: %s", code, stderr)
	}
	tests := []struct {
		golden string
		args   []string
		code   int
	}{
		{"show-pfsense.txt", []string{"config", "show", pf}, 0},
		{"show-opnsense.json", []string{"config", "show", "--json", opn}, 0},
		{"knobs.txt", []string{"config", "knobs"}, 0},
		{"knobs-pfsense-2.6.txt", []string{"config", "knobs", "--flavor", "pfsense", "--version", "2.6.0"}, 0},
		{"lint-clean.txt", []string{"config", "lint", pf}, 0},
		{"lint-errors.txt", []string{"config", "lint", changed}, 1},
		{"lint-errors.json", []string{"config", "lint", "--json", changed}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			stdout, stderr, code := fwab(t, "", tt.args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr)
			}
			golden.Output(t, tt.golden, stdout, stderr)
		})
	}
}

func TestConfigDiff(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	changed := filepath.Join(t.TempDir(), "changed.xml")
	if _, stderr, code := fwab(t, "", "config", "set", pf, "nat.outbound=advanced", "blocklist=on", "-o", changed); code != 0 {
		t.Fatalf("config set: %s", stderr)
	}
	stdout, _, code := fwab(t, "", "config", "diff", pf, changed)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	squeezed := strings.Join(strings.Fields(stdout), " ")
	for _, want := range []string{"nat.outbound hybrid advanced filter-reload", "blocklist off on blocklist-update", `~ nat/outbound/mode: "hybrid" → "advanced"`} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("diff output lacks %q:\n%s", want, stdout)
		}
	}
	if stdout, _, _ := fwab(t, "", "config", "diff", pf, pf); stdout != "no differences\n" {
		t.Errorf("diff of a file with itself = %q", stdout)
	}
}

func TestConfigSetInPlace(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	orig, _ := os.ReadFile(pf)
	if _, stderr, code := fwab(t, "", "config", "set", pf, "offload.lro=on", "--in-place"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	bak, err := os.ReadFile(pf + ".bak")
	if err != nil || !bytes.Equal(bak, orig) {
		t.Fatalf("FILE.bak is not the original (err %v)", err)
	}
	now, _ := os.ReadFile(pf)
	if bytes.Contains(now, []byte("<disablelargereceiveoffloading>")) {
		t.Error("offload.lro=on left the disable flag in place")
	}
	if st, _ := os.Stat(pf); st.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v; the original's 0640 must be kept", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(pf))
	if len(entries) != 2 {
		t.Errorf("folder holds %d files, want FILE and FILE.bak (temporary files left behind?)", len(entries))
	}
}

// TestConfigSetInPlaceSymlink: --in-place through a link replaces the file
// it points to, keeps its mode, and leaves the link a link.
func TestConfigSetInPlaceSymlink(t *testing.T) {
	target := fixtureFile(t, "configs/pfsense-2.7.xml")
	link := filepath.Join(t.TempDir(), "config.xml")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := fwab(t, "", "config", "set", link, "offload.lro=on", "--in-place"); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is no longer a link (err %v)", link, err)
	}
	now, _ := os.ReadFile(target)
	if bytes.Contains(now, []byte("<disablelargereceiveoffloading>")) {
		t.Error("the link's target was not changed")
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o640 {
		t.Errorf("target mode = %v; the original's 0640 must be kept", st.Mode().Perm())
	}
}

// TestConfigSetFailsCleanly: a refused change writes nothing anywhere.
func TestConfigSetFailsCleanly(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"bad value", []string{"offload.tso=maybe"}, `invalid value "maybe"; valid values: on, off`},
		{"unknown interface", []string{"ids@dmz=ids"}, `no interface "dmz"`},
		{"3des on 2.7", []string{"offload.tso=on", "ipsec@site-b=3des-sha1"}, "3des is not valid on pfsense 2.7.2"},
		{"not an assignment", []string{"offload.tso"}, "is not knob=value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pf := fixtureFile(t, "configs/pfsense-2.7.xml")
			orig, _ := os.ReadFile(pf)
			out := filepath.Join(filepath.Dir(pf), "out.xml")
			for _, mode := range [][]string{{"-o", out}, {"--in-place"}} {
				args := append(append([]string{"config", "set", pf}, tt.args...), mode...)
				_, stderr, code := fwab(t, "", args...)
				if code != exitUsage || !strings.Contains(stderr, tt.want) {
					t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", mode, code, stderr, exitUsage, tt.want)
				}
			}
			now, _ := os.ReadFile(pf)
			entries, _ := os.ReadDir(filepath.Dir(pf))
			if !bytes.Equal(now, orig) || len(entries) != 1 {
				t.Errorf("a refused set changed the folder: %d entries, file changed: %v", len(entries), !bytes.Equal(now, orig))
			}
		})
	}
}

func TestConfigUsageErrors(t *testing.T) {
	pf := fixtureFile(t, "configs/pfsense-2.7.xml")
	broken := filepath.Join(t.TempDir(), "broken.xml")
	os.WriteFile(broken, fixtures.Read("broken/truncated.xml"), 0o600)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"config", "set", pf, "offload.tso=on"}, "give exactly one of -o OUT, --in-place or --diff"},
		{[]string{"config", "set", pf, "offload.tso=on", "-o", "x", "--in-place"}, "give exactly one of -o OUT, --in-place or --diff"},
		{[]string{"config", "show", broken}, "broken.xml: config.xml:"},
		{[]string{"config", "show", "/nonexistent/config.xml"}, "no such file or directory"},
		{[]string{"config", "knobs", "--flavor", "sophos"}, `--flavor "sophos": use pfsense or opnsense`},
		{[]string{"config", "show", pf, "--product", "two"}, `product version "two"`},
		{[]string{"config", "show", pf, "--product", "26.1"}, "26.1 looks like an OPNsense version"},
		{[]string{"config", "knobs", "--flavor", "pfsense", "--version", "9.9"}, "9.9 is not a pfSense version"},
		{[]string{"config", "knobs", "--flavor", "opnsense", "--version", "2.7.2"}, "2.7.2 looks like a pfSense version"},
		{[]string{"config", "show"}, "accepts 1 arg(s), received 0"},
		{[]string{"config", "show", pf, "--bogus"}, "unknown flag: --bogus"},
	}
	for _, tt := range tests {
		_, stderr, code := fwab(t, "", tt.args...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("fwab %v: exit %d, stderr %q; want exit 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}

func TestConfigStdin(t *testing.T) {
	stdout, stderr, code := fwab(t, string(fixtures.Read("configs/pfsense-2.7.xml")), "config", "set", "-", "xml:system/hostname=piped", "-o", "-")
	if code != 0 || !strings.Contains(stdout, "<hostname>piped</hostname>") {
		t.Errorf("exit %d, stderr %q; stdout lacks the change", code, stderr)
	}
}
