package fwapi_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/lab/labtest"
)

// TestOpenOPNsense: fwapi.Open picks the OPNsense driver by flavor.
func TestOpenOPNsense(t *testing.T) {
	ctx := context.Background()
	em := labtest.Start(t, labtest.Options{Product: configxml.OPNsense, Version: "26.7.1"})
	tg := em.APITarget(t)
	fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer fw.Close()
	if _, ok := fw.(*fwapi.OPNsense); !ok {
		t.Errorf("Open() without an ssh section = %T, want *fwapi.OPNsense", fw)
	}
	info, err := fw.Info(ctx)
	if err != nil || info.Version != "26.7.1" || info.Flavor != configxml.OPNsense {
		t.Errorf("Info() = %+v, %v; want OPNsense 26.7.1", info, err)
	}
	if g, err := fwapi.Open(ctx, em.Target, fwapi.OpenOptions{}); err != nil {
		t.Errorf("Open() with ssh: %v", err)
	} else {
		if _, ok := g.(*fwapi.GuardedOPNsense); !ok {
			t.Errorf("Open() with an ssh section = %T, want *fwapi.GuardedOPNsense", g)
		}
		g.Close()
	}

	// With an ssh section that cannot come up (no key, nothing listening),
	// Open fails and names the target.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tg.Name = "opn-unreachable"
	tg.SSH = &fwapi.SSHSpec{User: "root", Port: port, KeyFile: tg.API.KeyFile, KnownHosts: tg.API.KeyFile, ConnectTimeoutMS: 2000}
	if fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{}); err == nil {
		fw.Close()
		t.Fatal("Open() with an unreachable ssh port succeeded")
	} else if !strings.Contains(err.Error(), "opn-unreachable") {
		t.Errorf("Open() error = %v, want the target named", err)
	}
}
