package fwapitest

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
)

// Fixture is one driver connected to one fresh fake firewall, with ways to
// look at the fake behind the driver's back.
type Fixture struct {
	FW fwapi.Firewall
	// Flavor the driver must report.
	Flavor configxml.Flavor
	// Actions returns the service actions the fake ran, in order;
	// ResetActions forgets them. Both may be nil for a firewall that does
	// not record them (the lab's emulator): Apply must then still succeed,
	// but which actions ran is not checked.
	Actions      func() []configxml.Action
	ResetActions func()
	// StoredConfig returns config.xml as the fake holds it, read behind the
	// driver's back; nil skips those checks.
	StoredConfig func() []byte
	// Unsupported lists actions the product does not have (Apply must
	// refuse them with an error), e.g. blocklist-update on OPNsense.
	Unsupported []configxml.Action
}

// RunDriverSuite exercises a Firewall driver generically. newFixture must
// return a driver on a fresh fake each time.
func RunDriverSuite(t *testing.T, newFixture func(t *testing.T) Fixture) {
	newFixture = withDefaults(newFixture)
	t.Run("Info", func(t *testing.T) {
		f := newFixture(t)
		info, err := f.FW.Info(t.Context())
		if err != nil {
			t.Fatalf("Info: %v", err)
		}
		if info.Flavor != f.Flavor {
			t.Errorf("Info().Flavor = %q, want %q", info.Flavor, f.Flavor)
		}
		if info.Version == "" || info.Hostname == "" {
			t.Errorf("Info() = %+v, want a version and a hostname", info)
		}
		if len(info.NICs) == 0 {
			t.Errorf("Info().NICs is empty")
		}
		for _, n := range info.NICs {
			if !fwapi.IsNIC(n) {
				t.Errorf("Info().NICs has %q, which is not a physical NIC", n)
			}
		}
	})

	t.Run("ConfigRoundTrip", func(t *testing.T) {
		f := newFixture(t)
		ctx := t.Context()
		orig, err := f.FW.ReadConfig(ctx)
		if err != nil {
			t.Fatalf("ReadConfig: %v", err)
		}
		if !bytes.Equal(orig, f.StoredConfig()) {
			t.Fatalf("ReadConfig differs from the stored config")
		}
		variants := map[string][]byte{
			"comment":           append(bytes.Clone(orig), "<!-- fwab suite -->\n"...),
			"no final newline":  bytes.TrimRight(orig, "\n"),
			"CRLF and odd text": bytes.ReplaceAll(append(bytes.Clone(orig), "<!-- it's $(reboot) `reboot`; \"q\" ünï -->\n"...), []byte("\n"), []byte("\r\n")),
		}
		for name, want := range variants {
			if err := f.FW.WriteConfig(ctx, want, "suite: "+name); err != nil {
				t.Fatalf("WriteConfig(%s): %v", name, err)
			}
			got, err := f.FW.ReadConfig(ctx)
			if err != nil {
				t.Fatalf("ReadConfig after %s: %v", name, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("ReadConfig after WriteConfig(%s) differs:\n%s", name, cmp.Diff(string(want), string(got)))
			}
			if stored := f.StoredConfig(); !bytes.Equal(stored, want) {
				t.Errorf("stored config after WriteConfig(%s) differs:\n%s", name, cmp.Diff(string(want), string(stored)))
			}
		}
		if err := f.FW.WriteConfig(ctx, orig, "suite: restore"); err != nil {
			t.Fatal(err)
		}
		if got := f.StoredConfig(); !bytes.Equal(got, orig) {
			t.Errorf("stored config after restoring differs from the original")
		}
		if err := f.FW.WriteConfig(ctx, nil, "suite: empty"); err == nil {
			t.Errorf("WriteConfig(empty) = nil error, want a refusal")
		}
		if got := f.StoredConfig(); !bytes.Equal(got, orig) {
			t.Errorf("a refused WriteConfig changed the stored config")
		}
	})

	t.Run("ApplyEachAction", func(t *testing.T) {
		f := newFixture(t)
		cases := []configxml.Change{
			{Knob: "rules@lan", From: "0", To: "10", Action: configxml.ActionFilterReload},
			{Knob: "nat.outbound", From: "automatic", To: "hybrid", Action: configxml.ActionFilterReload},
			{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces},
			{Knob: "ids@lan", From: "off", To: "ids", Action: configxml.ActionIDSRestart},
			{Knob: "ipsec@site", From: "none", To: "aes128gcm16", Action: configxml.ActionIPsecRestart},
			{Knob: "blocklist", From: "off", To: "on", Action: configxml.ActionBlocklistUpdate},
		}
		for _, c := range cases {
			f.ResetActions()
			err := f.FW.Apply(t.Context(), []configxml.Change{c})
			if slices.Contains(f.Unsupported, c.Action) {
				if err == nil {
					t.Errorf("Apply(%s) = nil error, want a refusal: the product has no %s", c.Knob, c.Action)
				}
				continue
			}
			if err != nil {
				t.Errorf("Apply(%s): %v", c.Knob, err)
				continue
			}
			checkActions(t, f, "Apply("+c.Knob+")", []configxml.Action{c.Action})
		}
	})

	t.Run("ApplyRunsEachActionOnceInOrder", func(t *testing.T) {
		f := newFixture(t)
		changes := []configxml.Change{
			{Knob: "ids@lan", From: "off", To: "ips-inline", Action: configxml.ActionIDSRestart},
			{Knob: "rules@lan", From: "0", To: "10", Action: configxml.ActionFilterReload},
			{Knob: "offload.tso", From: "on", To: "off", Action: configxml.ActionInterfaces},
			{Knob: "rules@wan", From: "0", To: "5", Action: configxml.ActionFilterReload},
			{Knob: "offload.lro", From: "on", To: "off", Action: configxml.ActionInterfaces},
		}
		f.ResetActions()
		if err := f.FW.Apply(t.Context(), changes); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		checkActions(t, f, "Apply", []configxml.Action{configxml.ActionInterfaces, configxml.ActionFilterReload, configxml.ActionIDSRestart})
		f.ResetActions()
		if err := f.FW.Apply(t.Context(), []configxml.Change{{Knob: "firmware", To: "9.9", Action: configxml.ActionFirmware}}); err == nil {
			t.Errorf("Apply(firmware) = nil error, want a refusal (firmware goes through Upgrade)")
		}
		checkActions(t, f, "refused Apply", nil)
	})

	t.Run("RuntimeStateFollowsOffloadApply", func(t *testing.T) {
		f := newFixture(t)
		ctx := t.Context()
		info, err := f.FW.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"off", "on", "off"} {
			c := configxml.Change{Knob: "offload.checksum", To: to, Action: configxml.ActionInterfaces}
			if err := f.FW.Apply(ctx, []configxml.Change{c}); err != nil {
				t.Fatalf("Apply(checksum %s): %v", to, err)
			}
			st, err := f.FW.RuntimeState(ctx)
			if err != nil {
				t.Fatalf("RuntimeState: %v", err)
			}
			for _, nic := range info.NICs {
				s, ok := st.Interfaces[nic]
				if !ok {
					t.Errorf("RuntimeState has no interface %s", nic)
					continue
				}
				if got := fwapi.OffloadState(s, "offload.checksum"); got != to {
					t.Errorf("after checksum %s, %s shows checksum offload %s (options %v)", to, nic, got, s.Options)
				}
			}
			if st.FilterRules <= 0 {
				t.Errorf("RuntimeState().FilterRules = %d, want > 0", st.FilterRules)
			}
			if st.Version == "" {
				t.Errorf("RuntimeState().Version is empty")
			}
		}
	})

	t.Run("MetricsSane", func(t *testing.T) {
		f := newFixture(t)
		m, err := f.FW.Metrics(t.Context())
		if err != nil {
			t.Fatalf("Metrics: %v", err)
		}
		inRange := func(v float64) bool { return v >= 0 && v <= 100 }
		if !inRange(m.CPUPercent) || !inRange(m.MemUsedPct) || m.MemUsedPct == 0 {
			t.Errorf("Metrics() = %+v: CPU and memory must be percentages, memory above 0", m)
		}
		for i, p := range m.PerCPU {
			if !inRange(p) {
				t.Errorf("Metrics().PerCPU[%d] = %v", i, p)
			}
		}
		if m.MbufsInUse < 0 || m.TempCelsius < 0 || m.TempCelsius > 150 {
			t.Errorf("Metrics() = %+v", m)
		}
		if d := time.Since(m.Time); d < 0 || d > time.Minute {
			t.Errorf("Metrics().Time = %v, want now", m.Time)
		}
	})

	t.Run("LockRefusesSecondWriter", func(t *testing.T) {
		f := newFixture(t)
		g, ok := f.FW.(fwapi.Guard)
		if !ok {
			t.Skip("driver does not implement fwapi.Guard")
		}
		ctx := t.Context()
		a := fwapi.LockOwner{Owner: "alice@ws1", PID: 4242, Time: time.Now(), Token: "a1"}
		b := fwapi.LockOwner{Owner: "bob@ws2", PID: 777, Time: time.Now(), Token: "b2"}
		if err := g.Lock(ctx, a); err != nil {
			t.Fatalf("Lock(alice): %v", err)
		}
		err := g.Lock(ctx, b)
		var locked *fwapi.LockedError
		if !errors.As(err, &locked) {
			t.Fatalf("second Lock = %v, want *fwapi.LockedError", err)
		}
		if !strings.Contains(err.Error(), "alice@ws1") || !strings.Contains(err.Error(), "pid=4242") {
			t.Errorf("second Lock error %q does not name the holder alice@ws1 pid=4242", err)
		}
		if err := g.Unlock(ctx, b); err == nil {
			t.Errorf("Unlock by a non-holder = nil error, want a refusal")
		}
		if err := g.Unlock(ctx, a); err != nil {
			t.Fatalf("Unlock(alice): %v", err)
		}
		if err := g.Lock(ctx, b); err != nil {
			t.Fatalf("Lock(bob) after alice unlocked: %v", err)
		}
		if err := g.Unlock(ctx, b); err != nil {
			t.Fatalf("Unlock(bob): %v", err)
		}
	})

	t.Run("RollbackFiresUnlessDisarmed", func(t *testing.T) {
		f := newFixture(t)
		g, ok := f.FW.(fwapi.Guard)
		if !ok {
			t.Skip("driver does not implement fwapi.Guard")
		}
		ctx := t.Context()
		prev, err := f.FW.ReadConfig(ctx)
		if err != nil {
			t.Fatal(err)
		}
		changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)

		// Disarmed in time: the change stays.
		if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
			t.Fatalf("ArmRollback: %v", err)
		}
		if err := f.FW.WriteConfig(ctx, changed, "suite"); err != nil {
			t.Fatal(err)
		}
		if err := g.Disarm(ctx); err != nil {
			t.Fatalf("Disarm: %v", err)
		}
		time.Sleep(1500 * time.Millisecond)
		if got := f.StoredConfig(); !bytes.Equal(got, changed) {
			t.Errorf("a disarmed rollback still restored the config")
		}
		if fired, _, err := g.RollbackFired(ctx); err != nil || fired {
			t.Errorf("RollbackFired() = %v, %v after Disarm, want false", fired, err)
		}

		// Not disarmed: the firewall restores prev by itself.
		if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
			t.Fatalf("ArmRollback: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for !bytes.Equal(f.StoredConfig(), prev) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !bytes.Equal(f.StoredConfig(), prev) {
			t.Fatalf("the armed rollback did not restore the previous config within 10s")
		}
		var fired bool
		for time.Now().Before(deadline) {
			if fired, _, err = g.RollbackFired(ctx); err != nil || fired {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if !fired || err != nil {
			t.Errorf("RollbackFired() = %v, %v after the rollback ran, want true", fired, err)
		}
	})
}

// withDefaults fills in the optional Fixture fields.
func withDefaults(newFixture func(t *testing.T) Fixture) func(t *testing.T) Fixture {
	return func(t *testing.T) Fixture {
		f := newFixture(t)
		if f.ResetActions == nil {
			f.ResetActions = func() {}
		}
		if f.StoredConfig == nil {
			fw := f.FW
			f.StoredConfig = func() []byte {
				data, err := fw.ReadConfig(t.Context())
				if err != nil {
					t.Fatalf("ReadConfig: %v", err)
				}
				return data
			}
		}
		return f
	}
}

// checkActions compares the actions the fake ran with want, when the fake
// records them.
func checkActions(t *testing.T, f Fixture, what string, want []configxml.Action) {
	t.Helper()
	if f.Actions == nil {
		return
	}
	if diff := cmp.Diff(want, f.Actions(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s actions mismatch (-want +got):\n%s", what, diff)
	}
}
