package labtest

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/probe"
)

// Versions are the product versions the knobs know, one release of each
// series, as the emulator runs them.
var Versions = []struct {
	Product configxml.Flavor
	Version string
}{
	{configxml.PfSense, "2.6.0-RELEASE"},
	{configxml.PfSense, "2.7.2-RELEASE"},
	{configxml.PfSense, "2.8.0-RELEASE"},
	{configxml.OPNsense, "24.7.12"},
	{configxml.OPNsense, "25.7.8"},
	{configxml.OPNsense, "26.1.2"},
	{configxml.OPNsense, "26.7.1"},
}

// Suite checks that fwapi's driver for a product drives the emulated
// firewall correctly: each exported Test method is one test, run by Run
// on a fresh emulator.
type Suite struct {
	// Options choose the emulated firewall.
	Options Options
	// Setup, when set, adjusts the options for each test (e.g. a fresh
	// data plane on network namespaces).
	Setup func(t *testing.T, o *Options)
}

// Run runs every Test method of the suite as a subtest.
func (s *Suite) Run(t *testing.T) {
	v := reflect.ValueOf(s)
	n := 0
	for i := range v.NumMethod() {
		m := v.Type().Method(i)
		if !strings.HasPrefix(m.Name, "Test") {
			continue
		}
		test := v.Method(i).Interface().(func(*testing.T))
		t.Run(strings.TrimPrefix(m.Name, "Test"), test)
		n++
	}
	if n == 0 {
		t.Fatal("the suite has no Test methods")
	}
}

// fixture is one driver on one fresh emulator.
type fixture struct {
	*Firewall
	fw fwapi.Firewall
}

func (s *Suite) start(t *testing.T) fixture {
	t.Helper()
	o := s.Options
	if s.Setup != nil {
		s.Setup(t, &o)
	}
	f := Start(t, o)
	return fixture{Firewall: f, fw: f.Open(t)}
}

// unsupported are the actions the product does not have: Apply must refuse
// them.
func (f fixture) unsupported() []configxml.Action {
	if f.Product() == configxml.OPNsense {
		return []configxml.Action{configxml.ActionBlocklistUpdate}
	}
	return nil
}

// checkActions compares the service actions the emulator ran with want.
func (f fixture) checkActions(t *testing.T, what string, want []configxml.Action) {
	t.Helper()
	if diff := cmp.Diff(want, f.Actions(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: service actions mismatch (-want +got):\n%s", what, diff)
	}
}

// writeKnob reads the firewall's config, sets one knob and writes it back
// without applying anything; it returns the config written.
func (f fixture) writeKnob(t *testing.T, knob, value string) *configxml.Config {
	t.Helper()
	c := f.readConfig(t)
	if err := c.Set(knob, value); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.WriteConfig(t.Context(), c.Bytes(), "suite: "+knob+" "+value); err != nil {
		t.Fatal(err)
	}
	return c
}

// readConfig reads the firewall's config through the driver.
func (f fixture) readConfig(t *testing.T) *configxml.Config {
	t.Helper()
	data, err := f.fw.ReadConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetProduct(strings.TrimSuffix(f.Version(), "-RELEASE")); err != nil {
		t.Fatal(err)
	}
	return c
}

// readKnob is a knob's value in the firewall's config.
func (f fixture) readKnob(t *testing.T, knob string) string {
	t.Helper()
	v, err := f.readConfig(t).Get(knob)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestInfo: Info names the product, a version, a hostname and the NICs.
func (s *Suite) TestInfo(t *testing.T) {
	f := s.start(t)
	info, err := f.fw.Info(t.Context())
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	if info.Flavor != f.Product() {
		t.Errorf("Info().Flavor = %q, want %q", info.Flavor, f.Product())
	}
	if info.Version == "" || info.Hostname == "" {
		t.Errorf("Info() = %+v, want a version and a hostname", info)
	}
	if !strings.HasPrefix(info.Version, strings.TrimSuffix(f.Version(), "-RELEASE")) {
		t.Errorf("Info().Version = %q, want the emulated %q", info.Version, f.Version())
	}
	if len(info.NICs) == 0 {
		t.Errorf("Info().NICs is empty")
	}
	for _, n := range info.NICs {
		if !fwapi.IsNIC(n) {
			t.Errorf("Info().NICs has %q, which is not a physical NIC", n)
		}
	}
}

// TestConfigRoundTrip: WriteConfig stores exactly the bytes given, and
// ReadConfig returns them; an empty config is refused.
func (s *Suite) TestConfigRoundTrip(t *testing.T) {
	f := s.start(t)
	ctx := t.Context()
	orig, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatalf("ReadConfig: %v", err)
	}
	if !bytes.Equal(orig, f.StoredConfig(t)) {
		t.Fatalf("ReadConfig differs from the stored config")
	}
	variants := map[string][]byte{
		"comment":           append(bytes.Clone(orig), "<!-- fwab suite -->\n"...),
		"no final newline":  bytes.TrimRight(orig, "\n"),
		"CRLF and odd text": bytes.ReplaceAll(append(bytes.Clone(orig), "<!-- it's $(reboot) `reboot`; \"q\" ünï -->\n"...), []byte("\n"), []byte("\r\n")),
	}
	for name, want := range variants {
		if err := f.fw.WriteConfig(ctx, want, "suite: "+name); err != nil {
			t.Fatalf("WriteConfig(%s): %v", name, err)
		}
		got, err := f.fw.ReadConfig(ctx)
		if err != nil {
			t.Fatalf("ReadConfig after %s: %v", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("ReadConfig after WriteConfig(%s) differs:\n%s", name, cmp.Diff(string(want), string(got)))
		}
		if stored := f.StoredConfig(t); !bytes.Equal(stored, want) {
			t.Errorf("stored config after WriteConfig(%s) differs:\n%s", name, cmp.Diff(string(want), string(stored)))
		}
	}
	if err := f.fw.WriteConfig(ctx, orig, "suite: restore"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.StoredConfig(t), orig) {
		t.Errorf("stored config after restoring differs from the original")
	}
	if err := f.fw.WriteConfig(ctx, nil, "suite: empty"); err == nil {
		t.Errorf("WriteConfig(empty) = nil error, want a refusal")
	}
	if !bytes.Equal(f.StoredConfig(t), orig) {
		t.Errorf("a refused WriteConfig changed the stored config")
	}
}

// TestApplyEachAction: each action runs exactly its service action, and
// an action the product lacks is refused.
func (s *Suite) TestApplyEachAction(t *testing.T) {
	f := s.start(t)
	cases := []configxml.Change{
		{Knob: "rules@lan", From: "0", To: "10", Action: configxml.ActionFilterReload},
		{Knob: "nat.outbound", From: "automatic", To: "hybrid", Action: configxml.ActionFilterReload},
		{Knob: "offload.checksum", From: "on", To: "off", Action: configxml.ActionInterfaces},
		{Knob: "ids@lan", From: "off", To: "ids", Action: configxml.ActionIDSRestart},
		{Knob: "ipsec@site", From: "none", To: "aes128gcm16", Action: configxml.ActionIPsecRestart},
		{Knob: "blocklist", From: "off", To: "on", Action: configxml.ActionBlocklistUpdate},
	}
	for _, c := range cases {
		if c.Action == configxml.ActionIDSRestart && !slices.Contains(f.unsupported(), c.Action) {
			// The config names Suricata, as after a real ids change: the
			// package's start runs only what its config sets up.
			f.writeKnob(t, c.Knob, c.To)
		}
		f.ResetActions()
		err := f.fw.Apply(t.Context(), []configxml.Change{c})
		if slices.Contains(f.unsupported(), c.Action) {
			if err == nil {
				t.Errorf("Apply(%s) = nil error, want a refusal: the product has no %s", c.Knob, c.Action)
			}
			f.checkActions(t, "refused Apply("+c.Knob+")", nil)
			continue
		}
		if err != nil {
			t.Errorf("Apply(%s): %v", c.Knob, err)
			continue
		}
		f.checkActions(t, "Apply("+c.Knob+")", []configxml.Action{c.Action})
	}
}

// TestApplyRunsEachActionOnceInOrder: interfaces before the filter before
// the IDS, each once; firmware is refused (it goes through Upgrade).
func (s *Suite) TestApplyRunsEachActionOnceInOrder(t *testing.T) {
	f := s.start(t)
	changes := []configxml.Change{
		{Knob: "ids@lan", From: "off", To: "ips-inline", Action: configxml.ActionIDSRestart},
		{Knob: "rules@lan", From: "0", To: "10", Action: configxml.ActionFilterReload},
		{Knob: "offload.tso", From: "on", To: "off", Action: configxml.ActionInterfaces},
		{Knob: "rules@wan", From: "0", To: "5", Action: configxml.ActionFilterReload},
		{Knob: "offload.lro", From: "on", To: "off", Action: configxml.ActionInterfaces},
	}
	c := f.readConfig(t)
	if err := c.SetAll([]string{"offload.tso=off", "offload.lro=off", "offload.checksum=off", "ids@lan=ips-inline"}); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.WriteConfig(t.Context(), c.Bytes(), "suite: inline IPS"); err != nil {
		t.Fatal(err)
	}
	f.ResetActions()
	if err := f.fw.Apply(t.Context(), changes); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	f.checkActions(t, "Apply", []configxml.Action{configxml.ActionInterfaces, configxml.ActionFilterReload, configxml.ActionIDSRestart})
	f.ResetActions()
	if err := f.fw.Apply(t.Context(), []configxml.Change{{Knob: "firmware", To: "9.9", Action: configxml.ActionFirmware}}); err == nil {
		t.Errorf("Apply(firmware) = nil error, want a refusal (firmware goes through Upgrade)")
	}
	f.checkActions(t, "refused Apply", nil)
}

// TestRuntimeStateFollowsOffloadApply: after an offload change and its
// apply, ifconfig on every NIC shows the new state, but for the one the
// management session runs over where fwab leaves it alone.
func (s *Suite) TestRuntimeStateFollowsOffloadApply(t *testing.T) {
	f := s.start(t)
	ctx := t.Context()
	info, err := f.fw.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"off", "on", "off"} {
		f.writeKnob(t, "offload.checksum", to)
		if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "offload.checksum", To: to, Action: configxml.ActionInterfaces}}); err != nil {
			t.Fatalf("Apply(checksum %s): %v", to, err)
		}
		st, err := f.fw.RuntimeState(ctx)
		if err != nil {
			t.Fatalf("RuntimeState: %v", err)
		}
		for _, nic := range info.NICs {
			if slices.Contains(st.Management, nic) {
				continue // left as it was: TestOffloadApplyAsTheGUI
			}
			i, ok := st.Interfaces[nic]
			if !ok {
				t.Errorf("RuntimeState has no interface %s", nic)
				continue
			}
			if got := fwapi.OffloadState(i, "offload.checksum"); got != to {
				t.Errorf("after checksum %s, %s shows checksum offload %s (options %v)", to, nic, got, i.Options)
			}
		}
		if st.FilterRules <= 0 {
			t.Errorf("RuntimeState().FilterRules = %d, want > 0", st.FilterRules)
		}
		if st.Version == "" {
			t.Errorf("RuntimeState().Version is empty")
		}
	}
}

// TestOffloadApplyAsTheGUI: an offload change reaches the NICs as the
// product's GUI applies it, with no interface reconfigure (which would
// drop the management session: the LAN, as on a factory box), and leaves
// the NIC the session runs over as it is where fwab runs the GUI's code
// itself (pfSense; OPNsense before 26.1), which verify then reports;
// with the target's offload_management it changes that NIC too.
func (s *Suite) TestOffloadApplyAsTheGUI(t *testing.T) {
	for _, include := range []bool{false, true} {
		o := s.Options
		if s.Setup != nil {
			s.Setup(t, &o)
		}
		o.SSHVia = "lan"
		em := Start(t, o)
		em.Target.OffloadManagement = include
		f := fixture{Firewall: em, fw: em.Open(t)}
		ctx := t.Context()
		from, to := "on", "off"
		if f.readKnob(t, "offload.checksum") == "off" {
			from, to = to, from
		}
		c := f.writeKnob(t, "offload.checksum", to)
		f.ResetActions()
		if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "offload.checksum", From: from, To: to, Action: configxml.ActionInterfaces}}); err != nil {
			t.Fatalf("offload_management %v: Apply(checksum %s): %v", include, to, err)
		}
		for _, a := range f.Actions() {
			if a == emu.ActionInterfaceReconfigure || a == emu.ActionReloadAll {
				t.Errorf("offload_management %v: the offload apply ran %s: the GUI only sets the NICs' flags", include, a)
			}
		}
		st, err := f.fw.RuntimeState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		guiTouchesAll := f.Product() == configxml.OPNsense && f.Version() >= "26.1"
		for _, dev := range []string{f.Ports.WanDev, f.Ports.LanDev} {
			want := to
			if dev == f.Ports.LanDev && !include && !guiTouchesAll {
				want = from
			}
			if got := fwapi.OffloadState(st.Interfaces[dev], "offload.checksum"); got != want {
				t.Errorf("offload_management %v: after the apply %s shows checksum offload %s, want %s (the management NIC is %s)", include, dev, got, want, f.Ports.LanDev)
			}
		}
		var mgmt []configxml.Finding
		for _, x := range fwapi.VerifyRuntime(c, st) {
			if x.Rule == fwapi.RuleOffloadMismatch {
				mgmt = append(mgmt, x)
			}
		}
		if !include && !guiTouchesAll {
			if len(mgmt) != 1 || !strings.Contains(mgmt[0].Message, "offload_management") {
				t.Errorf("offload_management off: verify's %s findings = %v, want one naming the management NIC and offload_management (management: %v)", fwapi.RuleOffloadMismatch, mgmt, st.Management)
			}
		} else if len(mgmt) != 0 {
			t.Errorf("offload_management %v: verify reports %v after the apply", include, mgmt)
		}
	}
}

// TestRouterMode: filter=disabled written but not applied leaves pf
// filtering, which verification refuses; the filter reload disables pf and
// pfctl -si says so; enabling it again restores the filter.
func (s *Suite) TestRouterMode(t *testing.T) {
	f := s.start(t)
	ctx := t.Context()
	for _, to := range []string{configxml.FilterDisabled, configxml.FilterEnabled} {
		c := f.writeKnob(t, "filter", to)
		st, err := f.fw.RuntimeState(ctx)
		if err != nil {
			t.Fatalf("RuntimeState: %v", err)
		}
		if !slices.ContainsFunc(fwapi.VerifyRuntime(c, st), func(x configxml.Finding) bool { return x.Rule == fwapi.RuleFilterMismatch }) {
			t.Errorf("filter=%s written, not applied (pf %s): VerifyRuntime reports no %s", to, st.PF, fwapi.RuleFilterMismatch)
		}
		if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "filter", To: to, Action: configxml.ActionFilterReload}}); err != nil {
			t.Fatalf("Apply(filter %s): %v", to, err)
		}
		if st, err = f.fw.RuntimeState(ctx); err != nil {
			t.Fatalf("RuntimeState: %v", err)
		}
		want := fwapi.PFEnabled
		if to == configxml.FilterDisabled {
			want = fwapi.PFDisabled
		}
		if st.PF != want {
			t.Errorf("after filter=%s and a filter reload, pfctl -si reports %q; want %q", to, st.PF, want)
		}
		for _, x := range fwapi.VerifyRuntime(c, st) {
			if x.Rule == fwapi.RuleFilterMismatch {
				t.Errorf("after the apply: %s", x.Message)
			}
		}
	}
}

// TestInventory: the driver lists the product's package at the running
// version, the CPU and every NIC with its driver and full-duplex media.
func (s *Suite) TestInventory(t *testing.T) {
	f := s.start(t)
	inv, ok := f.fw.(interface {
		Inventory(context.Context) (fwapi.Inventory, error)
	})
	if !ok {
		t.Fatalf("%T has no Inventory", f.fw)
	}
	got, err := inv.Inventory(t.Context())
	if err != nil {
		t.Fatalf("Inventory: %v", err)
	}
	if got.CPUModel == "" || got.Cores <= 0 {
		t.Errorf("Inventory CPU = %q, %d cores", got.CPUModel, got.Cores)
	}
	version := strings.TrimSuffix(f.Version(), "-RELEASE")
	if !slices.ContainsFunc(got.Packages, func(p fwapi.Package) bool { return p.Version == version }) {
		t.Errorf("Inventory packages %v lack the product at %s", got.Packages, version)
	}
	if len(got.NICs) == 0 {
		t.Fatal("Inventory lists no NIC")
	}
	for _, n := range got.NICs {
		if n.Driver == "" || n.Media == "" || !n.FullDuplex() || n.Best == "" || n.BelowBest() {
			t.Errorf("NIC %+v: want a driver, full-duplex media and the NIC's best media", n)
		}
	}
	if got.AESNI == nil {
		t.Error("Inventory does not say whether the CPU has AES-NI (dmesg.boot)")
	}
	if len(got.CryptoModules) != len(configxml.CryptoModules(f.Product())) {
		t.Errorf("Inventory crypto modules %v; want every one crypto.hardware knows on %s", got.CryptoModules, f.Product())
	}
}

// TestMetricsSane: CPU and memory are percentages, the time is now.
func (s *Suite) TestMetricsSane(t *testing.T) {
	f := s.start(t)
	m, err := f.fw.Metrics(t.Context())
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
}

// TestHealthSeesRestartsAndReboots: the health a sample rests on stays
// the same while nothing happens, and names a Suricata restart (a new
// pid, as the product's) and a reboot.
func (s *Suite) TestHealthSeesRestartsAndReboots(t *testing.T) {
	f := s.start(t)
	hr, ok := f.fw.(fwapi.HealthReader)
	if !ok {
		t.Fatalf("%T has no Health", f.fw)
	}
	read := func() probe.Health {
		t.Helper()
		h, err := hr.Health(t.Context())
		if err != nil {
			t.Fatalf("Health: %v", err)
		}
		return h
	}
	ApplyKnobs(t, f.fw, "ids@lan=ids")
	h0 := read()
	if len(h0.Services["suricata"]) == 0 || h0.Boot == 0 {
		t.Fatalf("Health with IDS on lan = %+v, want Suricata running and a boot time", h0)
	}
	if c := h0.Changes(read()); len(c) != 0 {
		t.Errorf("nothing happened, yet Changes = %q", c)
	}
	// The ports' error counters, read as netstat -i shows them: a bad
	// cable's damaged frames are named, and are no change of the box.
	if _, ok := h0.Links["igb1"]; !ok {
		t.Errorf("Health().Links = %v, want the ports' counters", h0.Links)
	}
	f.SetFault(emu.Fault{LinkErrors: map[string]uint64{"igb1": 40}, LinkErrorsAt: time.Now()})
	hErr := read()
	if w := h0.LinkErrors(hErr); len(w) != 1 || !strings.HasPrefix(w[0], "igb1 counted 40 input and 0 output errors") {
		t.Errorf("with 40 input errors on igb1, LinkErrors = %q", w)
	}
	// Counters only grow: clearing the fault takes no error back.
	f.SetFault(emu.Fault{})
	if w := hErr.LinkErrors(read()); len(w) != 0 {
		t.Errorf("after the fault is cleared, LinkErrors = %q, want none", w)
	}
	// A netstat that fails costs the counters, not the rest.
	f.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "netstat -i", Exit: 1, Stderr: "netstat: kvm not available"}}})
	if h := read(); h.Links != nil || h.LinksUnread == "" || h.Boot != h0.Boot || len(h.Services["suricata"]) == 0 {
		t.Errorf("with netstat failing, Health() = %+v, want the boot and pids read and the counters' absence said", h)
	} else if w := h0.LinkErrors(h); len(w) != 1 || !strings.Contains(w[0], "were not read after the probe") {
		t.Errorf("with netstat failing, LinkErrors = %q", w)
	}
	f.SetFault(emu.Fault{})
	if c := h0.Changes(hErr); len(c) != 0 {
		t.Errorf("link errors are not a change of the box, yet Changes = %q", c)
	}
	if err := f.fw.Apply(t.Context(), []configxml.Change{{Knob: "ids@lan", From: "ids", To: "ids", Action: configxml.ActionIDSRestart}}); err != nil {
		t.Fatal(err)
	}
	h1 := read()
	if c := h0.Changes(h1); len(c) != 1 || !strings.HasPrefix(c[0], "suricata restarted") {
		t.Errorf("after an IDS restart, Changes = %q, want suricata restarted", c)
	}
	// A reboot within seconds of the last reading is told from a clock
	// step by an uptime that fell behind by more than 2 s.
	time.Sleep(3 * time.Second)
	f.reboot(t)
	h2 := read()
	if c := h1.Changes(h2); !slices.Contains(c, "the firewall rebooted") {
		t.Errorf("after a reboot, Changes = %q, want the reboot named", c)
	}
	// The boot starts the counters from zero, the fault's errors with them.
	if w := hErr.LinkErrors(h2); !slices.ContainsFunc(w, func(s string) bool { return strings.HasPrefix(s, "igb1's error counters went back to 0 in") }) {
		t.Errorf("after a reboot, LinkErrors = %q, want igb1's counters back at 0", w)
	}
}

// guard is the driver's fwapi.Guard; every driver has one.
func (f fixture) guard(t *testing.T) fwapi.Guard {
	t.Helper()
	g, ok := f.fw.(fwapi.Guard)
	if !ok {
		t.Fatalf("%T does not implement fwapi.Guard", f.fw)
	}
	return g
}

// TestLockRefusesSecondWriter: a second Lock names the holder; only the
// holder unlocks.
func (s *Suite) TestLockRefusesSecondWriter(t *testing.T) {
	f := s.start(t)
	g := f.guard(t)
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
}

// TestLockAfterReboot: a reboot voids the lock on both products (pfSense
// mounts a fresh /var/run; OPNsense deletes its files and keeps the lock's
// folder, empty): the holder's Unlock finds nothing to release, and a new
// writer (fw recover, a resumed sweep) takes the lock.
func (s *Suite) TestLockAfterReboot(t *testing.T) {
	f := s.start(t)
	g := f.guard(t)
	ctx := t.Context()
	a := fwapi.LockOwner{Owner: "alice@ws1", PID: 4242, Time: time.Now(), Token: "a1"}
	b := fwapi.LockOwner{Owner: "bob@ws2", PID: 777, Time: time.Now(), Token: "b2"}
	if err := g.Lock(ctx, a); err != nil {
		t.Fatalf("Lock(alice): %v", err)
	}
	f.reboot(t)
	if err := g.Lock(ctx, b); err != nil {
		t.Fatalf("Lock(bob) after the reboot voided alice's lock: %v", err)
	}
	if err := g.Unlock(ctx, a); err == nil || !strings.Contains(err.Error(), "bob@ws2") {
		t.Errorf("Unlock(alice) with bob holding the lock: %v, want it refused naming bob", err)
	}
	if err := g.Unlock(ctx, b); err != nil {
		t.Fatalf("Unlock(bob): %v", err)
	}
	// The holder whose lock the reboot voided unlocks without an error.
	if err := g.Lock(ctx, a); err != nil {
		t.Fatal(err)
	}
	f.reboot(t)
	if err := g.Unlock(ctx, a); err != nil {
		t.Errorf("Unlock(alice) after a reboot voided her lock: %v, want nothing to release", err)
	}
}

// TestRollbackFiresUnlessDisarmed: a disarmed rollback leaves the change;
// an armed one restores the previous config by itself.
func (s *Suite) TestRollbackFiresUnlessDisarmed(t *testing.T) {
	f := s.start(t)
	g := f.guard(t)
	ctx := t.Context()
	prev, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)

	// A write is several commands (each through csh on OPNsense): leave
	// the rollback time for them on a loaded machine.
	if err := g.ArmRollback(ctx, prev, 3*time.Second); err != nil {
		t.Fatalf("ArmRollback: %v", err)
	}
	if err := f.fw.WriteConfig(ctx, changed, "suite"); err != nil {
		t.Fatal(err)
	}
	if err := g.Disarm(ctx); err != nil {
		t.Fatalf("Disarm: %v", err)
	}
	time.Sleep(3500 * time.Millisecond)
	if !bytes.Equal(f.StoredConfig(t), changed) {
		t.Errorf("a disarmed rollback still restored the config")
	}
	if fired, _, err := g.RollbackFired(ctx); err != nil || fired {
		t.Errorf("RollbackFired() = %v, %v after Disarm, want false", fired, err)
	}

	if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
		t.Fatalf("ArmRollback: %v", err)
	}
	// The config is judged once the rollback has ended: on pfSense the
	// package syncs after the reload save config.xml themselves, and the
	// script puts the restored file back after them (ShellGuard's
	// AfterReload), so a config equal to prev halfway is not yet the end.
	deadline := time.Now().Add(10 * time.Second)
	var fired bool
	for time.Now().Before(deadline) {
		if fired, _, err = g.RollbackFired(ctx); err != nil || fired {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !fired || err != nil {
		t.Fatalf("RollbackFired() = %v, %v 10s after the rollback was due, want true", fired, err)
	}
	if !bytes.Equal(f.StoredConfig(t), prev) {
		t.Errorf("the rollback ended without the previous config in place:\n%s", f.StoredConfig(t))
	}
}

// TestCryptoAccelerator: crypto.hardware is applied by a reboot, and only
// then does kldstat show the module; a switch back to none takes a reboot
// too, after which the module is gone. OPNsense loads only the card
// drivers whose module file is on the box.
func (s *Suite) TestCryptoAccelerator(t *testing.T) {
	f := s.start(t)
	ctx := t.Context()
	value, module := "aesni", "aesni"
	if f.Product() == configxml.OPNsense {
		value, module = "qat", "qat"
	}
	apply := func(to string) []configxml.Finding {
		t.Helper()
		c := f.writeKnob(t, "crypto.hardware", to)
		boots := f.Boots()
		f.ResetActions()
		if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "crypto.hardware", To: to, Action: configxml.ActionReboot}}); err != nil {
			t.Fatalf("Apply(crypto.hardware=%s): %v", to, err)
		}
		if f.Boots() != boots+1 {
			t.Errorf("Apply(crypto.hardware=%s): %d boots; want one reboot", to, f.Boots()-boots)
		}
		st, err := f.fw.RuntimeState(ctx)
		if err != nil {
			t.Fatalf("RuntimeState: %v", err)
		}
		if st.CryptoModules == nil {
			t.Fatal("RuntimeState did not read the kernel's crypto modules")
		}
		if got, want := st.CryptoModules[module], to != "none"; got != want {
			t.Errorf("after crypto.hardware=%s and the reboot, kldstat -m %s = %v; want %v", to, module, got, want)
		}
		var found []configxml.Finding
		for _, x := range fwapi.VerifyRuntime(c, st) {
			if x.Rule == fwapi.RuleCryptoMismatch {
				found = append(found, x)
			}
		}
		return found
	}
	if f.Product() == configxml.OPNsense {
		// No module file: the boot's kldload fails, and verify says so.
		c := f.writeKnob(t, "crypto.hardware", value)
		if err := f.fw.Apply(ctx, []configxml.Change{{Knob: "crypto.hardware", To: value, Action: configxml.ActionReboot}}); err != nil {
			t.Fatalf("Apply(crypto.hardware=%s): %v", value, err)
		}
		st, err := f.fw.RuntimeState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(fwapi.VerifyRuntime(c, st), func(x configxml.Finding) bool {
			return x.Rule == fwapi.RuleCryptoMismatch && strings.Contains(x.Message, "/boot/kernel/qat.ko")
		}) {
			t.Errorf("crypto.hardware=qat without /boot/kernel/qat.ko: VerifyRuntime reports no %s naming the file", fwapi.RuleCryptoMismatch)
		}
		f.PutFile(t, "/boot/kernel/qat.ko", []byte("\x7fELF"))
	}
	if found := apply(value); len(found) > 0 {
		t.Errorf("after crypto.hardware=%s: %v", value, found)
	}
	if found := apply("none"); len(found) > 0 {
		t.Errorf("after crypto.hardware=none: %v", found)
	}
}

// TestRebootRollback: a rollback armed for a reboot-applied change
// restores the previous config and reboots, so the boot loads what that
// config names; it is marked fired across the reboot.
func (s *Suite) TestRebootRollback(t *testing.T) {
	f := s.start(t)
	g, ok := f.fw.(fwapi.RebootRollbacker)
	if !ok {
		t.Fatalf("%T cannot arm a rollback that reboots", f.fw)
	}
	ctx := t.Context()
	prev, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	boots := f.Boots()
	// Written before the rollback is armed: a write after its timer ran
	// out is refused (TestWriteRefusedOnceRollbackClaims).
	f.writeKnob(t, "crypto.hardware", "none")
	changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)
	if err := f.fw.WriteConfig(ctx, changed, "suite"); err != nil {
		t.Fatal(err)
	}
	if err := g.ArmRollbackReboot(ctx, prev, 2*time.Second); err != nil {
		t.Fatalf("ArmRollbackReboot: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for (f.Boots() == boots || !bytes.Equal(f.StoredConfig(t), prev)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !bytes.Equal(f.StoredConfig(t), prev) || f.Boots() != boots+1 {
		t.Fatalf("after the rollback: config restored %v, %d boots; want restored and one reboot", bytes.Equal(f.StoredConfig(t), prev), f.Boots()-boots)
	}
	if err := f.fw.WaitReady(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if fired, _, err := f.guard(t).RollbackFired(ctx); err != nil || !fired {
		t.Errorf("RollbackFired() = %v, %v after the rollback rebooted; want true", fired, err)
	}
	// The boot hook is gone with the fired rollback: another boot does not
	// arm it again.
	for _, hook := range []string{fwapi.RollbackBootHook, fwapi.OPNsenseRollbackBootHook} {
		if _, _, code := f.Run(t, "test -e "+hook, ""); code == 0 {
			t.Errorf("%s is left after the rollback fired", hook)
		}
	}
}

// TestRollbackSurvivesReboot: a reboot while a rollback is armed (a
// watchdog, a power cut) ends the timer; the boot runs the rollback's hook
// by path, as the products do, so the hook must be executable, and the
// rollback restores the previous config after the boot.
func (s *Suite) TestRollbackSurvivesReboot(t *testing.T) {
	f := s.start(t)
	g := f.guard(t)
	ctx := t.Context()
	prev, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)
	if err := f.fw.WriteConfig(ctx, changed, "suite"); err != nil {
		t.Fatal(err)
	}
	if err := g.ArmRollback(ctx, prev, 2*time.Second); err != nil {
		t.Fatalf("ArmRollback: %v", err)
	}
	f.reboot(t)
	// Judged once the rollback has ended, as in TestRollbackFiresUnlessDisarmed.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !bytes.Equal(f.StoredConfig(t), prev) {
		t.Fatalf("the rollback armed before the reboot did not restore the previous config after it; the boot printed:\n%s", f.BootConsole())
	}
	if c := f.BootConsole(); strings.Contains(c, "Permission denied") || strings.Contains(c, ">>> Error") {
		t.Errorf("the boot could not run a hook:\n%s", c)
	}
}

// TestWriteRefusedOnceRollbackClaims: once the rollback has claimed the
// hand-off, a write of fwab's must not land: between the rollback's
// restore and its reload or reboot it would survive, and after them the
// session would write over a restore it has not seen. The write is
// refused, under the product's config lock, until Disarm has reported the
// rollback; then it goes through.
func (s *Suite) TestWriteRefusedOnceRollbackClaims(t *testing.T) {
	f := s.start(t)
	g := f.guard(t)
	ctx := t.Context()
	prev, err := f.fw.ReadConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.ArmRollback(ctx, prev, time.Second); err != nil {
		t.Fatalf("ArmRollback: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if fired, _, err := g.RollbackFired(ctx); err == nil && fired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rollback did not fire within 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	changed := append(bytes.Clone(prev), "<!-- changed -->\n"...)
	err = f.fw.WriteConfig(ctx, changed, "suite")
	var claimed *fwapi.RollbackClaimedError
	if !errors.As(err, &claimed) {
		t.Errorf("WriteConfig after the rollback claimed the hand-off = %v; want a *fwapi.RollbackClaimedError", err)
	}
	if !bytes.Equal(f.StoredConfig(t), prev) {
		t.Fatal("a write after the rollback claimed the hand-off replaced the restored config")
	}
	var ran *fwapi.RollbackRanError
	if err := g.Disarm(ctx); !errors.As(err, &ran) {
		t.Fatalf("Disarm = %v; want a *fwapi.RollbackRanError", err)
	}
	if err := f.fw.WriteConfig(ctx, changed, "suite"); err != nil {
		t.Fatalf("WriteConfig once Disarm has reported the rollback: %v", err)
	}
	if !bytes.Equal(f.StoredConfig(t), changed) {
		t.Error("the write once Disarm had reported the rollback did not land")
	}
}

// reboot reboots the firewall through the driver and waits for it.
func (f fixture) reboot(t *testing.T) {
	t.Helper()
	if err := f.fw.Reboot(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := f.fw.WaitReady(t.Context(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestBootEnvs: the box's boot environments with the version each holds,
// a new one of the running system, a boot into it once and back.
func (s *Suite) TestBootEnvs(t *testing.T) {
	f := s.start(t)
	b, ok := f.fw.(fwapi.BootEnvironments)
	if !ok {
		t.Fatalf("%T does not manage boot environments", f.fw)
	}
	ctx := t.Context()
	info, err := f.fw.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := b.BootEnvs(ctx)
	if err != nil {
		t.Fatalf("BootEnvs: %v", err)
	}
	if len(envs) != 1 || !envs[0].Booted || !envs[0].NextBoot || envs[0].Version != info.Version {
		t.Fatalf("a fresh box: %+v, want one environment, booted and next, holding %s", envs, info.Version)
	}
	if err := f.SetPoolFree(5 << 30); err != nil {
		t.Fatal(err)
	}
	if sp, err := b.BootEnvSpace(ctx); err != nil || sp.Available != 5<<30 || sp.Referenced < 1<<30 {
		t.Errorf("BootEnvSpace: %+v, %v; want 5 GiB available and the root's size (over 1 GiB) referenced", sp, err)
	}
	if err := b.CreateBootEnv(ctx, "keep"); err != nil {
		t.Fatalf("CreateBootEnv: %v", err)
	}
	if err := b.CreateBootEnv(ctx, "keep"); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("a second CreateBootEnv of the same name: %v, want it refused", err)
	}
	// Each environment boots with its own config.xml: the running one
	// moves on, keep's stays as it was made (on pfSense read from
	// MOUNT/cf/conf, not through the absolute link /conf).
	kept := f.StoredConfig(t)
	f.PutFile(t, "/conf/config.xml", bytes.Replace(kept, []byte("<hostname>"), []byte("<hostname>moved"), 1))
	if cfg, err := b.BootEnvConfig(ctx, "keep"); err != nil || !bytes.Equal(cfg, kept) {
		t.Errorf("BootEnvConfig(keep): %d bytes, %v; want the config it was made with", len(cfg), err)
	}
	if cfg, err := b.BootEnvConfig(ctx, "default"); err != nil || !bytes.Contains(cfg, []byte("<hostname>moved")) {
		t.Errorf("BootEnvConfig(default): %v; want the running config", err)
	}
	f.PutFile(t, "/conf/config.xml", kept)
	// Left mounted (a fwab killed between its mount and umount): bectl
	// refuses a second mount, the version is read where it is.
	if _, errOut, code := f.Run(t, "bectl mount keep", ""); code != 0 {
		t.Fatalf("bectl mount keep: %s", errOut)
	}
	if envs, err := b.BootEnvs(ctx); err != nil || len(envs) != 2 || envs[1].Version != info.Version {
		t.Errorf("BootEnvs with keep left mounted: %+v, %v; want keep's version %s", envs, err, info.Version)
	}
	if _, errOut, code := f.Run(t, "bectl umount keep", ""); code != 0 {
		t.Fatalf("bectl umount keep: %s", errOut)
	}
	if err := b.ActivateBootEnvOnce(ctx, "nosuch"); err == nil || !strings.Contains(err.Error(), "default, keep") {
		t.Errorf("ActivateBootEnvOnce(nosuch): %v, want the environments listed", err)
	}
	if err := b.ActivateBootEnvOnce(ctx, "keep"); err != nil {
		t.Fatalf("ActivateBootEnvOnce: %v", err)
	}
	envs, err = b.BootEnvs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]fwapi.BootEnv{}
	for _, e := range envs {
		byName[e.Name] = e
	}
	if k := byName["keep"]; !k.NextBoot || k.Booted || k.Version != info.Version {
		t.Errorf("keep after activate -t: %+v, want next boot, not booted, holding %s (read through bectl mount)", k, info.Version)
	}
	if d := byName["default"]; !d.Booted || d.NextBoot {
		t.Errorf("default after activate -t: %+v, want booted and not next", d)
	}
	f.reboot(t)
	if envs, err = b.BootEnvs(ctx); err != nil {
		t.Fatal(err)
	}
	for _, e := range envs {
		if (e.Name == "keep") != e.Booted || (e.Name == "default") != e.NextBoot {
			t.Errorf("booted once into keep: %+v, want keep booted and default next", e)
		}
	}
	if err := f.SetUFS(true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.BootEnvs(ctx); !errors.Is(err, fwapi.ErrNoBootEnvs) {
		t.Errorf("BootEnvs on a UFS root: %v, want ErrNoBootEnvs", err)
	}
}
