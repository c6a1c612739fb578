package labtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/fwapi"
)

// TestCommandFaults: each kind of CommandFault does what it says, only to
// the lines it names, and Times runs out.
func TestCommandFaults(t *testing.T) {
	f := Start(t, Options{Fault: emu.Fault{Commands: []emu.CommandFault{
		{On: "hostname", Exit: 3, Stdout: "odd\n", Stderr: "broken\n", Times: 1},
		{On: "sleep 0", Delay: 300 * time.Millisecond},
		{On: "rc.filter_configure_sync", Skip: true},
	}}})
	out, errOut, code := f.Run(t, "hostname", "")
	if out != "odd\n" || errOut != "broken\n" || code != 3 {
		t.Errorf("faulty hostname = %q, %q, %d; want the fault's answer", out, errOut, code)
	}
	if out, _, code = f.Run(t, "hostname", ""); code != 0 || out != "pfSense.lab.fwab.test\n" {
		t.Errorf("hostname after its one fault = %q, %d; want the real answer", out, code)
	}
	start := time.Now()
	if _, _, code = f.Run(t, "sleep 0", ""); code != 0 || time.Since(start) < 300*time.Millisecond {
		t.Errorf("sleep 0 = %d after %v, want it delayed by 300ms", code, time.Since(start))
	}
	f.ResetActions()
	if _, _, code = f.Run(t, "/etc/rc.filter_configure_sync", ""); code != 0 || len(f.Actions()) != 0 {
		t.Errorf("skipped filter reload = %d with actions %v, want success and nothing run", code, f.Actions())
	}

	f.SetFault(emu.Fault{Commands: []emu.CommandFault{{On: "cat > /tmp/x", Drop: true, DropAfter: 4}}})
	c, err := fwapi.DialSSH(context.Background(), f.SSHConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _, _, err = c.Run(context.Background(), "cat > /tmp/x", strings.NewReader(strings.Repeat("data", 1000)))
	if !errors.Is(err, fwapi.ErrConnectionLost) {
		t.Errorf("a dropped command = %v, want the connection lost", err)
	}
	if out, _, code = f.Run(t, "echo still up", ""); code != 0 || out != "still up\n" {
		t.Errorf("after a dropped connection = %q, %d; want new connections to work", out, code)
	}
}

// TestRequestFaults: a RequestFault replaces or drops the API's answer for
// its route only; Drop still runs the request.
func TestRequestFaults(t *testing.T) {
	f := Start(t, Options{Product: configxml.OPNsense})
	tg := f.APITarget(t)
	fw, err := fwapi.NewOPNsense(context.Background(), tg, nil, fwapi.OPNsenseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	f.SetFault(emu.Fault{Requests: []emu.RequestFault{
		{Route: "POST /api/ids/service/reconfigure", Status: 500, Body: `{"errorMessage":"boom"}`},
		{Route: "POST /api/firewall/filter/apply", Drop: true},
	}})
	f.ResetActions()
	if err := fw.Apply(context.Background(), []configxml.Change{{Knob: "ids@lan", To: "ids", Action: configxml.ActionIDSRestart}}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("Apply(ids) = %v, want the fault's 500", err)
	}
	if err := fw.Apply(context.Background(), []configxml.Change{{Knob: "rules@lan", To: "1", Action: configxml.ActionFilterReload}}); err == nil {
		t.Errorf("Apply(rules) with the answer dropped succeeded")
	}
	want := []configxml.Action{configxml.ActionFilterReload}
	if got := f.Actions(); len(got) != 1 || got[0] != want[0] {
		t.Errorf("actions %v, want only the dropped request's filter reload (the 500 answered without running)", got)
	}
	// The emulator answers other routes itself.
	if info, err := fw.Info(context.Background()); err != nil || info.Version == "" {
		t.Errorf("Info with faults on other routes = %+v, %v", info, err)
	}
}

// timedOut reports whether err is a timeout (no answer), not a refusal.
func timedOut(err error) bool {
	var ne interface{ Timeout() bool }
	return (errors.As(err, &ne) && ne.Timeout()) || errors.Is(err, context.DeadlineExceeded)
}

// TestSilentLinkFault: a management link that drops packets silently makes
// SSH dials, open SSH sessions and HTTPS calls time out (nothing is
// refused), each within fwab's own deadlines; once it carries packets
// again, everything works.
func TestSilentLinkFault(t *testing.T) {
	f := Start(t, Options{Product: configxml.OPNsense})
	open, err := fwapi.DialSSH(t.Context(), func() fwapi.SSHConfig {
		c := f.SSHConfig()
		c.KeepAlive = 200 * time.Millisecond
		return c
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	api, err := fwapi.NewOPNsense(t.Context(), f.APITarget(t), nil, fwapi.OPNsenseOptions{REST: fwapi.RESTOptions{Timeout: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	const silence = 3 * time.Second
	// The link goes silent while a command runs: its status is unknown.
	ran := make(chan error, 1)
	go func() {
		_, _, _, err := open.Run(t.Context(), "sleep 1", nil)
		ran <- err
	}()
	time.Sleep(200 * time.Millisecond)
	f.SetFault(emu.Fault{SilentUntil: time.Now().Add(silence)})
	start := time.Now()

	if err := <-ran; !errors.Is(err, fwapi.ErrConnectionLost) {
		t.Errorf("a command on an open SSH connection over a silent link = %v, want the connection lost (keepalive timed out)", err)
	}
	if _, err := api.ReadConfig(t.Context()); err == nil || !timedOut(err) {
		t.Errorf("an API call over a silent link = %v, want a timeout", err)
	}
	cfg := f.SSHConfig()
	cfg.ConnectTimeout, cfg.Retries = 300*time.Millisecond, 1
	if c, err := fwapi.DialSSH(t.Context(), cfg); err == nil {
		c.Close()
		t.Errorf("DialSSH over a silent link succeeded")
	} else if !timedOut(err) || strings.Contains(err.Error(), "refused") {
		t.Errorf("DialSSH over a silent link = %v, want a timeout", err)
	}
	if el := time.Since(start); el > silence {
		t.Errorf("the timeouts took %v, want each within its deadline (all under the %v silence)", el, silence)
	}
	time.Sleep(time.Until(start.Add(silence + 100*time.Millisecond)))
	if out, _, code := f.Run(t, "echo back", ""); code != 0 || out != "back\n" {
		t.Errorf("after the silence = %q, %d; want SSH to work again", out, code)
	}
	if _, err := api.ReadConfig(t.Context()); err != nil {
		t.Errorf("an API call after the silence: %v", err)
	}
}
