package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/store"
)

func TestTestbedFingerprint(t *testing.T) {
	target := &fwapi.Target{Name: "lab", Host: "127.0.0.1", SSH: &fwapi.SSHSpec{Port: 2201},
		Endpoints: fwapi.Endpoints{Client: fwapi.Endpoint{Addr: "198.18.1.10", Netns: "fwab-lan"}, Server: fwapi.Endpoint{Addr: "198.19.1.10", Netns: "fwab-wan"}}}
	info := fwapi.Info{Flavor: "pfsense", Version: "2.7.2-RELEASE", NICs: []string{"igb0", "igb1"}}
	inv := &fwapi.Inventory{CPUModel: "AMD GX-412TC SOC", Cores: 4,
		Packages: []fwapi.Package{{Name: "pfSense-pkg-suricata", Version: "7.0.4"}},
		NICs:     []fwapi.NICInventory{{Name: "igb0", Driver: "igb", Media: "1000baseT <full-duplex>"}, {Name: "igb1", Driver: "igb"}}}
	base := testbedOf(target, info, inv)
	if !strings.HasPrefix(base, "lab@") || len(base) != len("lab@")+12 {
		t.Fatalf("testbedOf = %q, want lab@ and 12 hex digits", base)
	}

	// Software and negotiated media are not the box.
	upgraded := *inv
	upgraded.Packages = []fwapi.Package{{Name: "pfSense-pkg-suricata", Version: "7.0.8"}}
	upgraded.NICs = []fwapi.NICInventory{{Name: "igb1", Driver: "igb"}, {Name: "igb0", Driver: "igb", Media: "100baseTX <half-duplex>"}}
	newInfo := info
	newInfo.Version = "2.8.0-RELEASE"
	if got := testbedOf(target, newInfo, &upgraded); got != base {
		t.Errorf("after a firmware and package upgrade the testbed is %s, want %s", got, base)
	}
	// Hardware is.
	otherCPU := *inv
	otherCPU.CPUModel = "Intel Atom C3758"
	otherNIC := *inv
	otherNIC.NICs = []fwapi.NICInventory{{Name: "igb0", Driver: "ix"}, {Name: "igb1", Driver: "igb"}}
	otherEnd := *target
	otherEnd.Endpoints.Server = fwapi.Endpoint{Addr: "198.19.1.10", SSH: &fwapi.SSHHost{Host: "wan-host.example"}}
	for name, got := range map[string]string{
		"another CPU":      testbedOf(target, info, &otherCPU),
		"another driver":   testbedOf(target, info, &otherNIC),
		"another endpoint": testbedOf(&otherEnd, info, inv),
	} {
		if got == base {
			t.Errorf("%s: testbed %s unchanged", name, got)
		}
	}
}

// Two targets files that both name a box "lab" but mean two boxes keep
// two journals; a folder an older fwab left under the bare name is kept.
func TestStateDirPerTestbed(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	a := &fwapi.Target{Name: "lab", Host: "127.0.0.1", SSH: &fwapi.SSHSpec{Port: 2201}}
	b := &fwapi.Target{Name: "lab", Host: "127.0.0.1", SSH: &fwapi.SSHSpec{Port: 2202}}
	da, err := stateDir(a)
	if err != nil {
		t.Fatal(err)
	}
	db, _ := stateDir(b)
	if da == db || !strings.HasPrefix(filepath.Base(da), "lab-") {
		t.Errorf("stateDir = %s and %s; want two folders named lab-HASH", da, db)
	}
	if again, _ := stateDir(a); again != da {
		t.Errorf("stateDir changed between calls: %s, %s", da, again)
	}
	legacy, _ := fwapi.StateDir("lab")
	os.MkdirAll(legacy, 0o700)
	if got, _ := stateDir(a); got != legacy {
		t.Errorf("with %s present stateDir = %s, want it", legacy, got)
	}
}

// runs list --testbed picks a testbed's runs; compare says in its first
// line when the two runs are on different testbeds.
func TestTestbedCommands(t *testing.T) {
	db := sweepDB(t) // runs 1, 2 (A/A) and 3 (10 % slower)
	st, err := store.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	for id, tb := range map[int64]string{1: "t730@0000000000aa", 2: "t730@0000000000aa", 3: "apu2@0000000000bb"} {
		if _, err := st.DB().Exec(st.Rebind(`UPDATE runs SET testbed = ? WHERE id = ?`), tb, id); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	for _, tt := range []struct {
		testbed string
		want    []string
	}{
		{"t730@0000000000aa", []string{"2", "1"}},
		{"apu2", []string{"3"}},
		{"apu2@ffffffffffff", nil},
	} {
		out, errOut, code := runFwab(t, "runs", "list", "--db", db, "--testbed", tt.testbed)
		var ids []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			ids = append(ids, strings.Fields(line)[0])
		}
		if code != 0 || strings.Join(ids, ",") != strings.Join(tt.want, ",") {
			t.Errorf("runs list --testbed %s = %d, runs %v; want %v (%s)", tt.testbed, code, ids, tt.want, errOut)
		}
	}

	out, _, _ := runFwab(t, "compare", "1", "3", "--db", db)
	if first, _, _ := strings.Cut(out, "\n"); !strings.Contains(first, "different testbeds") || !strings.Contains(first, "apu2@0000000000bb") {
		t.Errorf("compare of two testbeds: first line %q, want it to say so", first)
	}
	out, _, _ = runFwab(t, "compare", "1", "2", "--db", db)
	if strings.Contains(out, "different testbeds") {
		t.Errorf("compare on one testbed says the testbeds differ:\n%s", out)
	}
	out, _, _ = runFwab(t, "compare", "1", "3", "--db", db, "--json")
	if !strings.Contains(out, "different testbeds") {
		t.Errorf("compare --json of two testbeds has no warning saying so")
	}
}
