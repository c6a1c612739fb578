package fwapi_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/fwapi/fwapitest"
)

// TestOPNsenseDriverSuite runs the shared driver suite against the OPNsense
// driver, with the lock and the SSH rollback, on each firmware generation.
func TestOPNsenseDriverSuite(t *testing.T) {
	for _, v := range []string{"25.7.11", "26.1.2", "26.7"} {
		t.Run(v, func(t *testing.T) {
			fwapitest.RunDriverSuite(t, func(t *testing.T) fwapitest.Fixture {
				fw, fake := fwapitest.NewOPNsenseFirewall(t, fwapitest.OPNsenseOptions{Version: v}, fwapi.OPNsenseOptions{})
				return fwapitest.Fixture{
					FW:           fwapi.NewGuardedOPNsense(fw, fake.Shell()),
					Flavor:       configxml.OPNsense,
					Actions:      fake.Actions,
					ResetActions: fake.ResetActions,
					StoredConfig: fake.ConfigXML,
					Unsupported:  []configxml.Action{configxml.ActionBlocklistUpdate},
				}
			})
		})
	}
}

// TestOpenOPNsense: fwapi.Open picks the OPNsense driver by flavor.
func TestOpenOPNsense(t *testing.T) {
	ctx := context.Background()
	fake := fwapitest.NewOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.7"})
	tg := fake.Target()
	fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{})
	if err != nil {
		t.Fatalf("Open() error = %v", err)
	}
	defer fw.Close()
	if _, ok := fw.(*fwapi.OPNsense); !ok {
		t.Errorf("Open() without an ssh section = %T, want *fwapi.OPNsense", fw)
	}
	info, err := fw.Info(ctx)
	if err != nil || info.Version != "26.7" || info.Flavor != configxml.OPNsense {
		t.Errorf("Info() = %+v, %v; want OPNsense 26.7", info, err)
	}

	// With an ssh section that cannot come up (no key, nothing listening),
	// Open fails and names the target.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	tg.SSH = &fwapi.SSHSpec{User: "root", Port: port, KeyFile: tg.API.KeyFile, KnownHosts: tg.API.KeyFile, ConnectTimeoutMS: 2000}
	if fw, err := fwapi.Open(ctx, tg, fwapi.OpenOptions{}); err == nil {
		fw.Close()
		t.Fatal("Open() with an unreachable ssh port succeeded")
	} else if !strings.Contains(err.Error(), "fake-opnsense") {
		t.Errorf("Open() error = %v, want the target named", err)
	}
}

// TestOPNsenseShellRollback: on 26.7, commit-confirmed runs on the SSH
// rollback script; left armed, the firewall restores the previous config by
// itself; disarmed, the change stays.
func TestOPNsenseShellRollback(t *testing.T) {
	ctx := context.Background()
	fake := fwapitest.NewOPNsense(t, fwapitest.OPNsenseOptions{Version: "26.7"})
	fw, err := fwapi.NewOPNsense(ctx, fake.Target(), fake.Shell(), fwapi.OPNsenseOptions{Rollback: fwapi.ShellRollback(fake.Shell(), time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	prev := fake.ConfigXML()
	changed := bytes.Replace(prev, []byte("<hostname>fw1</hostname>"), []byte("<hostname>fw2</hostname>"), 1)

	disarm, err := fw.ArmCommitConfirmed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, changed, "test"); err != nil {
		t.Fatal(err)
	}
	if err := disarm(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if !bytes.Equal(fake.ConfigXML(), changed) {
		t.Fatal("a disarmed rollback still restored the config")
	}

	if _, err := fw.ArmCommitConfirmed(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, prev, "test"); err != nil {
		t.Fatal(err)
	}
	if err := fw.WriteConfig(ctx, bytes.Replace(prev, []byte("fw1"), []byte("fw3"), 1), "test"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !bytes.Equal(fake.ConfigXML(), changed) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !bytes.Equal(fake.ConfigXML(), changed) {
		t.Fatalf("the armed rollback did not restore the config it was armed with within 5s; config now %q", fake.ConfigXML())
	}
}
