package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// complete asks cobra's hidden completion command what the shell would be
// offered for args (the last one being the word under the cursor).
func complete(t *testing.T, args ...string) []string {
	t.Helper()
	out, stderr, code := fwab(t, "", append([]string{"__complete"}, args...)...)
	if code != exitOK {
		t.Fatalf("__complete %q: exit %d, %s", args, code, stderr)
	}
	var words []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, ":") {
			continue
		}
		w, _, _ := strings.Cut(l, "\t")
		words = append(words, w)
	}
	return words
}

func TestCompletion(t *testing.T) {
	cfg := fixtureFile(t, "configs/pfsense-2.7.xml")
	knobs := complete(t, "config", "set", cfg, "")
	for _, want := range []string{"offload.tso=", "ids@lan=", "rules@wan=", "blocklist="} {
		if !slices.Contains(knobs, want) {
			t.Errorf("config set completes %v; want %s among them", knobs, want)
		}
	}
	if slices.Contains(knobs, "firmware=") {
		t.Errorf("config set offers firmware=, which is not changed in config.xml")
	}
	if got := complete(t, "config", "set", cfg, "ids@lan="); !slices.Equal(got, []string{"ids@lan=off", "ids@lan=ids", "ids@lan=ips-legacy", "ids@lan=ips-inline"}) {
		t.Errorf("ids@lan= completes %v", got)
	}
	ciphers := complete(t, "config", "set", cfg, "ipsec@site-b=")
	if !slices.Contains(ciphers, "ipsec@site-b=aes256gcm16") || slices.Contains(ciphers, "ipsec@site-b=3des-sha1") {
		t.Errorf("ipsec@ on pfSense 2.7 completes %v; want its ciphers, without 3DES", ciphers)
	}

	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.yaml")
	key := filepath.Join(dir, "k")
	if err := os.WriteFile(key, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := fwab(t, "", "target", "add", "edge1", "--targets", targets, "--flavor", "pfsense", "--host", "198.18.0.1", "--ssh-user", "admin", "--ssh-key-file", key,
		"--client-addr", "198.18.1.10", "--client-netns", "lan", "--server-addr", "198.19.1.10", "--server-netns", "wan"); code != exitOK {
		t.Fatal(stderr)
	}
	if got := complete(t, "fw", "info", "--targets", targets, "--target", ""); !slices.Equal(got, []string{"edge1"}) {
		t.Errorf("--target completes %v; want edge1", got)
	}
	if got := complete(t, "report", "--db", filepath.Join(dir, "none.db"), ""); len(got) != 0 {
		t.Errorf("run ids from a missing database: %v", got)
	}
	if got := complete(t, "compare", "--db", resultsDB(t), ""); len(got) == 0 || got[0] != "1" {
		t.Errorf("run ids complete %v; want the runs, newest first", got)
	}
	if got := complete(t, "--log-level", ""); !slices.Contains(got, "debug") {
		t.Errorf("--log-level completes %v", got)
	}
}

func TestManPages(t *testing.T) {
	dir := t.TempDir()
	if out, stderr, code := fwab(t, "", "gen-man", dir); code != exitOK {
		t.Fatalf("gen-man: exit %d, %s %s", code, out, stderr)
	}
	for _, page := range []string{"fwab.1", "fwab-config-set.1", "fwab-sweep.1", "fwab-target-add.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Errorf("no man page %s: %v", page, err)
			continue
		}
		if !strings.Contains(string(b), ".TH \"FWAB\"") || !strings.Contains(string(b), ".SH SYNOPSIS") {
			t.Errorf("%s is not a man page:\n%.300s", page, b)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "fwab-gen-man.1")); err == nil {
		t.Errorf("the hidden gen-man command has a page")
	}
}
