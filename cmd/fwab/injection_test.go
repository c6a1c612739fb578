package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/fwapi/fwapitest"
)

// fwabRunner runs fwab in-process or as a child and returns its output and
// exit status.
type fwabRunner func(t *testing.T, args ...string) (stdout, stderr string, code int)

// injectionSuite pushes hostile values through fwab to a firewall: config
// set, diff and lint offline, then push, pull, apply (interfaces and
// the given knob changes run with the hostile config in place), verify, knob names
// and an upgrade version built to inject. It returns the file holding the
// config the firewall had before.
func injectionSuite(t *testing.T, fwab fwabRunner, h fwapitest.Hostile, targetArgs []string, work string, applies ...string) (original string) {
	t.Helper()
	must := func(args ...string) string {
		t.Helper()
		out, errOut, code := fwab(t, args...)
		if code != 0 {
			t.Fatalf("fwab %s = %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	fw := func(args ...string) []string { return append(args, targetArgs...) }

	base := filepath.Join(work, "base.xml")
	must(fw("fw", "pull", "-o", base)...)
	bad := filepath.Join(work, "hostile.xml")
	must(append([]string{"config", "set", base, "-o", bad}, h.Assignments()...)...)
	data, _ := os.ReadFile(bad)
	h.CheckConfig(t, "config set output", data)
	if diff := must("config", "diff", base, bad); !strings.Contains(diff, "fwabinj") {
		t.Errorf("config diff does not show the new elements:\n%s", diff)
	}
	fwab(t, "config", "lint", "--json", bad) // findings are fine; running anything is not

	must(fw("fw", "push", bad)...)
	pulled := must(fw("fw", "pull")...)
	if pulled != string(data) {
		t.Errorf("the firewall holds a different config than pushed (%d vs %d bytes)", len(pulled), len(data))
	}
	h.CheckConfig(t, "the firewall's config", []byte(pulled))
	for _, a := range applies {
		must(fw("fw", "apply", a)...)
	}
	if _, errOut, code := fwab(t, fw("verify")...); code > 1 {
		t.Errorf("verify = %d: %s", code, errOut)
	}

	// Knob names and values built to inject are refused as bad input.
	for _, a := range []string{
		"rules@lan$(echo pwned > " + h.Canary(90) + ")=3",
		"ids@`echo pwned > " + h.Canary(91) + "`=ids",
		"xml:system/$(echo pwned > " + h.Canary(92) + ")=1",
		"offload.checksum=off; echo pwned > " + h.Canary(93),
		"nat.outbound=automatic\necho pwned > " + h.Canary(94),
	} {
		_, errOut, code := fwab(t, fw("fw", "apply", a)...)
		if code != 2 {
			t.Errorf("fw apply %q = %d, want 2 (bad input): %s", a, code, errOut)
		}
	}
	// An upgrade version that is not a version is refused before anything runs.
	if _, errOut, code := fwab(t, fw("fw", "upgrade", "9.9$(echo pwned > "+h.Canary(95)+")", "--timeout", "30s")...); code != 2 || !strings.Contains(errOut, "is not a version") {
		t.Errorf("fw upgrade with a hostile version = %d, want 2 (bad input): %s", code, errOut)
	}
	return base
}

// TestInjectionEmulatedPfSense runs the suite in-process against the
// emulated pfSense, whose shell is a real POSIX interpreter on its folder.
func TestInjectionEmulatedPfSense(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	h := fwapitest.NewHostile()
	_ = injectionSuite(t, func(t *testing.T, args ...string) (string, string, int) { return fwabRun(t, args...) },
		h, []string{"--target", "fw1", "--targets", targets}, t.TempDir(), "offload.checksum=off")
	h.CheckNoCanary(t, fake.Root, "/tmp")

	// Positive control: the same value, unquoted, does run on this shell
	// and leaves its canary, so a clean check above means something.
	sh, err := fwapi.DialSSH(t.Context(), fake.SSHConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := sh.Output(t.Context(), "x="+h.Values[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fake.Path(h.Canary(0))); err != nil {
		t.Errorf("the unquoted control left no canary: %v", err)
	}
	for _, c := range fake.Commands() {
		if strings.Contains(c, "pfSense-upgrade") {
			t.Errorf("an upgrade ran: %s", c)
		}
	}
}

// TestInjectionLab runs the suite against the lab's emulated pfSense (fwab
// as a child process, the config applied to the lab's data plane). Beyond
// the canaries, the lab daemon's log of every command line it ran shows
// that no hostile value ever reached a command line: config.xml travels on
// stdin, and the values built to inject are refused before any SSH.
func TestInjectionLab(t *testing.T) {
	l := newLab(t)
	h := fwapitest.NewHostile()
	run := func(t *testing.T, args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		cmd := l.fwabChild(t.Context(), args...)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if err != nil {
			code = -1
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		}
		return out.String(), errOut.String(), code
	}
	targetArgs := []string{"--target", "lab", "--targets", l.targets}
	original := injectionSuite(t, run, h, targetArgs, t.TempDir(), "offload.checksum=off", "rules@lan=3", "nat.outbound=hybrid")
	if _, errOut, code := run(t, append([]string{"fw", "push", original}, targetArgs...)...); code != 0 {
		t.Errorf("pushing the original back = %d: %s", code, errOut)
	}
	h.CheckNoCanary(t, filepath.Join(l.dir, "root"), "/tmp")

	log, err := os.ReadFile(filepath.Join(l.dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	execs := 0
	for _, line := range strings.Split(string(log), "\n") {
		if !strings.Contains(line, "msg=exec") {
			continue
		}
		execs++
		if strings.Contains(line, h.Token) {
			t.Errorf("a hostile value reached a command line: %s", line)
		}
	}
	if execs < 20 {
		t.Errorf("the lab logged %d commands; want the whole session's", execs)
	}

	// Positive control, as on the fake.
	tf, err := fwapi.LoadTargets(l.targets)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := tf.Lookup("lab")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := fwapi.DialTarget(t.Context(), tgt, fwapi.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	if _, err := sh.Output(t.Context(), "x="+h.Values[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(l.dir, "root", h.Canary(0))); err != nil {
		t.Errorf("the unquoted control left no canary on the lab: %v", err)
	}
}
