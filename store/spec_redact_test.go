package store

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRunSpecHidesPlugCredentials: a spec's smart plug URL may carry a
// user, a password and a token; the run keeps the spec without them, read
// back (runs show --json prints it) for runs recorded before too, while
// the spec hash stays the hash of the spec as given, which a resumed
// sweep's spec is checked against.
func TestRunSpecHidesPlugCredentials(t *testing.T) {
	const spec = `name: power
probes:
  tcp-up: {iperf3: {duration: 10s}}
power: {url: 'http://plugadmin:s3cr3t-pw@plug.lab/cm?cmnd=Status%208&token=t0ken-XYZ', json_path: StatusSNS.ENERGY.Power}
# other forms of the same
#  url: http://plugadmin:s3cr3t-pw@plug.lab/status?token=t0ken-XYZ&password_file=/etc/plug
#  {url: http://plugadmin:s3cr3t-pw@plug.lab/cm?token=t0ken-XYZ, json_path: a}
#  url: "https://plugadmin:s3cr3t-pw@[2001:db8::7]:8443/status?token=t0ken-XYZ,more"
`
	eachBackend(t, func(t *testing.T, b backend) {
		s, _ := b.open(t)
		ctx := t.Context()
		id, err := s.CreateRun(ctx, Run{Spec: spec, Seed: 1, Target: "lab", TargetInfo: json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string) {
			t.Helper()
			r, err := s.Run(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			for _, secret := range []string{"plugadmin", "s3cr3t-pw", "t0ken-XYZ", "/etc/plug", "more"} {
				if strings.Contains(r.Spec, secret) {
					t.Errorf("%s: the run's spec shows %q:\n%s", what, secret, r.Spec)
				}
			}
			for _, keep := range []string{
				"power: {url: 'http://plug.lab/cm', json_path: StatusSNS.ENERGY.Power}",
				"#  url: http://plug.lab/status\n",
				"#  {url: http://plug.lab/cm, json_path: a}",
				`#  url: "https://[2001:db8::7]:8443/status"`,
				"tcp-up: {iperf3: {duration: 10s}}",
			} {
				if !strings.Contains(r.Spec, keep) {
					t.Errorf("%s: the run's spec lacks %q:\n%s", what, keep, r.Spec)
				}
			}
			if r.SpecHash != HashSpec(spec) {
				t.Errorf("%s: spec hash %s, want the hash of the spec as given, %s", what, r.SpecHash, HashSpec(spec))
			}
		}
		check("a new run")
		// A run recorded before URLs were redacted.
		if _, err := s.exec(ctx, `UPDATE runs SET spec = ? WHERE id = ?`, spec, id); err != nil {
			t.Fatal(err)
		}
		check("an older run")
	})
}
