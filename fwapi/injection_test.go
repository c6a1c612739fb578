package fwapi_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/fwapi/fwapitest"
	"github.com/fwab/fwab/lab/labtest"
)

// TestInjectionOPNsense: hostile interface descriptions and element values
// go through the OPNsense driver (config.xml written over its shell, the
// changes applied through its API) without ever being run or breaking the
// XML; interface names and values built to inject are refused before
// anything runs.
func TestInjectionOPNsense(t *testing.T) {
	ctx := context.Background()
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense})
	sh := dial(t, em.SSHConfig())
	fw, err := fwapi.NewOPNsense(ctx, em.APITarget(t), sh, fwapi.OPNsenseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	h := fwapitest.NewHostile()
	raw, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before, err := configxml.LoadBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	after, err := configxml.LoadBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := after.SetAll(append(h.Assignments(), "offload.checksum=off", "rules@lan=2")); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, after.Bytes(), "fwab injection test"); err != nil {
		t.Fatal(err)
	}
	changes, _ := configxml.Diff(before, after)
	if err := fw.Apply(ctx, changes); err != nil {
		t.Fatal(err)
	}
	got, err := fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h.CheckConfig(t, "the emulated OPNsense's config", got)

	// Knob names and values built to inject: refused by the config model
	// or the driver, before any command.
	n := len(em.Commands())
	for _, a := range []string{
		"ids@lan$(echo pwned > " + h.Canary(90) + ")=ids",
		"rules@`echo pwned > " + h.Canary(91) + "`=1",
		"offload.tso=off; echo pwned > " + h.Canary(92),
	} {
		if err := after.SetAll([]string{a}); err == nil {
			t.Errorf("SetAll(%q) accepted it", a)
		}
	}
	if err := fw.Apply(ctx, []configxml.Change{{Knob: "offload.lro", To: "off\necho pwned > " + h.Canary(93), Action: configxml.ActionInterfaces}}); err == nil {
		t.Errorf("Apply took an offload value with a command in it")
	}
	if m := len(em.Commands()); m != n {
		t.Errorf("%d commands ran for refused input: %q", m-n, em.Commands()[n:])
	}

	for _, c := range em.Commands() {
		if strings.Contains(c, h.Token) {
			t.Errorf("a hostile value reached a command line: %q", c)
		}
	}
	h.CheckNoCanary(t, em.Root, "/tmp")

	// Positive control: unquoted, the value runs on this shell.
	if _, _, _, err := sh.Run(ctx, "x="+h.Values[0], nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(em.Path(h.Canary(0))); err != nil {
		t.Errorf("the unquoted control left no canary: %v", err)
	}
}
