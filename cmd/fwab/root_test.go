package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

// A mistyped command must not look like success in a script:
// `fwab config lnit cfg.xml && deploy` must not deploy.
func TestUnknownCommandIsAUsageError(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		suggest string
	}{
		{[]string{"lnit"}, ""},
		{[]string{"sweeep", "spec.yaml"}, "sweep"},
		{[]string{"config", "lnit", "cfg.xml"}, "lint"},
		{[]string{"runs", "lst"}, "list"},
		{[]string{"fw", "recovr"}, "recover"},
		{[]string{"matrix", "chek", "spec.yaml"}, "check"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			stdout, stderr, code := fwab(t, "", tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d (usage)\nstdout: %s\nstderr: %s", code, exitUsage, stdout, stderr)
			}
			if !strings.Contains(stderr, "unknown command") {
				t.Errorf("stderr does not say the command is unknown: %q", stderr)
			}
			if tt.suggest != "" && (!strings.Contains(stderr, "did you mean") || !strings.Contains(stderr, tt.suggest)) {
				t.Errorf("stderr does not suggest %q: %q", tt.suggest, stderr)
			}
			if stdout != "" {
				t.Errorf("an unknown command printed help on stdout: %q", stdout)
			}
		})
	}
	// A group named alone still shows its help and succeeds.
	if stdout, _, code := fwab(t, "", "config"); code != exitOK || !strings.Contains(stdout, "lint") {
		t.Errorf("fwab config: exit %d, stdout %q; want its help and exit 0", code, stdout)
	}
}

func TestVersion(t *testing.T) {
	out, stderr, code := fwab(t, "", "version")
	if code != exitOK || !strings.HasPrefix(out, "fwab ") {
		t.Fatalf("fwab version: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	flagOut, _, code := fwab(t, "", "--version")
	if code != exitOK || flagOut != out {
		t.Errorf("fwab --version = %q (exit %d), want the same as fwab version: %q", flagOut, code, out)
	}
}

func TestVersionString(t *testing.T) {
	for _, tt := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"no build info", nil, "dev"},
		{"tagged", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}}, "v1.2.0"},
		{"checkout", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "799c80d1cdb6ca2eb8161be29ad8cfb38f568520"}, {Key: "vcs.modified", Value: "false"}}}, "dev 799c80d1cdb6"},
		{"modified checkout", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261130091500-799c80d1cdb6+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "799c80d1cdb6ca2eb8161be29ad8cfb38f568520"}, {Key: "vcs.modified", Value: "true"}}}, "v0.0.0-20261130091500-799c80d1cdb6+dirty"},
		{"revision not in the version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "abcdef0123456789"}, {Key: "vcs.modified", Value: "true"}}}, "v1.2.0 abcdef012345+modified"},
	} {
		if got := versionString(tt.info); got != tt.want {
			t.Errorf("%s: versionString = %q, want %q", tt.name, got, tt.want)
		}
	}
}
