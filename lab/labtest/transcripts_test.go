package labtest

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fixtures/transcripts"
	"github.com/fwab/fwab/fwapi"
)

// TestEmulatorOutputParsesAsFreeBSDDoes checks the emulator's command
// output against the transcripts recorded on real boxes: fwapi's parsers
// read both, and what they read has the same shape.
func TestEmulatorOutputParsesAsFreeBSDDoes(t *testing.T) {
	for _, p := range []configxml.Flavor{configxml.PfSense, configxml.OPNsense} {
		t.Run(string(p), func(t *testing.T) {
			f := Start(t, Options{Product: p})
			// Something in the tables, NAT and generated rules to print.
			fw := f.Open(t)
			data, err := fw.ReadConfig(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			c, err := configxml.LoadBytes(data)
			if err != nil {
				t.Fatal(err)
			}
			set := []string{"rules@lan=3"}
			changes := []configxml.Change{{Knob: "rules@lan", To: "3", Action: configxml.ActionFilterReload}}
			if p == configxml.PfSense {
				set = append(set, "blocklist=on")
				changes = append(changes, configxml.Change{Knob: "blocklist", To: "on", Action: configxml.ActionBlocklistUpdate})
			}
			if err := c.SetAll(set); err != nil {
				t.Fatal(err)
			}
			f.PutFile(t, "/conf/config.xml", c.Bytes())
			if err := fw.Apply(t.Context(), changes); err != nil {
				t.Fatal(err)
			}
			for _, tc := range parsers {
				t.Run(tc.cmd, func(t *testing.T) {
					compare := shape
					if tc.absent[p] {
						compare = func(v any) string { return reflect.TypeOf(v).String() }
					}
					rec, ok := transcripts.Lookup(tc.cmd)
					if !ok {
						t.Fatalf("no transcript of %q", tc.cmd)
					}
					want, err := tc.parse(rec.Stdout)
					if err != nil {
						t.Fatalf("the transcript of %q does not parse: %v", tc.cmd, err)
					}
					out, errOut, code := f.Run(t, tc.cmd, "")
					if code != rec.Exit {
						t.Fatalf("%q: exit %d (%s), the real box's %d", tc.cmd, code, errOut, rec.Exit)
					}
					got, err := tc.parse(out)
					if err != nil {
						t.Fatalf("the emulator's %q does not parse: %v\n%s", tc.cmd, err, out)
					}
					if w, g := compare(want), compare(got); w != g {
						t.Errorf("%q reads as %s on the emulator, %s on the real box:\n%s", tc.cmd, g, w, out)
					}
				})
			}
		})
	}
}

// parsers are the commands fwapi reads, each with the parser it reads them
// with. absent marks what the emulator on a recording data plane has none
// of, so only the type is compared: OPNsense's tables (pfBlockerNG is
// pfSense's), IPsec SAs and Suricata engines (they need root: the lab's
// namespace tests check them).
var parsers = []struct {
	cmd    string
	parse  func(string) (any, error)
	absent map[configxml.Flavor]bool
}{
	{"ifconfig -a", func(s string) (any, error) { return fwapi.ParseIfconfig(s) }, nil},
	// OPNsense labels rules with a hash or uuid, not the description the
	// (pfSense) transcript's labels carry: fwab counts its rules there
	// through /tmp/rules.debug, so only the type is compared.
	{"pfctl -sr", func(s string) (any, error) { return fwapi.ParsePfctlRules(s) }, map[configxml.Flavor]bool{configxml.OPNsense: true}},
	{"pfctl -sn", func(s string) (any, error) { return fwapi.ParsePfctlNAT(s) }, nil},
	// fwab's table loop reads the names as words ($(pfctl -s Tables)).
	{"pfctl -s Tables", func(s string) (any, error) { return strings.Fields(s), nil }, map[configxml.Flavor]bool{configxml.OPNsense: true}},
	{"swanctl --list-sas", func(s string) (any, error) { return fwapi.ParseSwanctlSAs(s) }, both},
	{"netstat -m", func(s string) (any, error) { return fwapi.ParseNetstatMbufs(s) }, nil},
	{"sysctl -n hw.ncpu hw.physmem", func(s string) (any, error) { return fwapi.ParseSysctlValues(s, "hw.ncpu", "hw.physmem") }, nil},
	{"ps ax -o pid,command", func(s string) (any, error) { return fwapi.ParseSuricataProcesses(s) }, both},
}

var both = map[configxml.Flavor]bool{configxml.PfSense: true, configxml.OPNsense: true}

// shape describes a parsed value by its type and, for numbers and
// collections, whether it is empty: "[]IfaceState non-empty", "int64 > 0".
func shape(v any) string {
	r := reflect.ValueOf(v)
	kind := r.Type().String()
	switch r.Kind() {
	case reflect.Slice, reflect.Map:
		if r.Len() == 0 {
			return kind + " empty"
		}
		return kind + " non-empty"
	case reflect.Int, reflect.Int64:
		if r.Int() > 0 {
			return kind + " > 0"
		}
		return kind + " 0"
	case reflect.Struct:
		var parts []string
		for i := range r.NumField() {
			parts = append(parts, r.Type().Field(i).Name+":"+shape(r.Field(i).Interface()))
		}
		return kind + "{" + strings.Join(parts, " ") + "}"
	}
	return kind
}
