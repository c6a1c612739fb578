package configxml

import (
	"strings"
	"testing"
)

// TestCheckVersion holds each flavor to its own version scheme: a version
// of the other product, or no version at all, is refused with the scheme
// named.
func TestCheckVersion(t *testing.T) {
	for _, tt := range []struct {
		f    Flavor
		v    string
		want string // "" = accepted
	}{
		{PfSense, "2.7.2", ""},
		{PfSense, "2.7.2-RELEASE", ""},
		{PfSense, "2.8.0-DEVELOPMENT", ""},
		{PfSense, "2.6", ""},
		{PfSense, "24.11-RELEASE", ""}, // pfSense Plus
		{PfSense, "25.07.1", ""},
		{PfSense, "26.1", "looks like an OPNsense version"},
		{PfSense, "9.9", "not a pfSense version"},
		{PfSense, "banana", "not a dotted version"},
		{PfSense, "", "empty version"},
		{OPNsense, "26.1", ""},
		{OPNsense, "OPNsense 26.1.2_1", ""},
		{OPNsense, "24.7.12", ""},
		{OPNsense, "25.10", ""},
		{OPNsense, "26.1.r1", ""}, // a release candidate (opnsense/core Makefile: tags 26.1.r1)
		{OPNsense, "26.7.a_355", ""},
		{OPNsense, "26.1.r1_2", ""},
		{PfSense, "2.8.0.a.20240115.0600", ""}, // a development snapshot's package version
		{OPNsense, "2.7.2", "looks like a pfSense version"},
		{OPNsense, "9.9", "not an OPNsense version"},
		{OPNsense, "26.13", "not an OPNsense version"},
	} {
		err := CheckVersion(tt.f, tt.v)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckVersion(%s, %q) = %v, want it accepted", tt.f, tt.v, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckVersion(%s, %q) = %v, want an error with %q", tt.f, tt.v, err, tt.want)
		}
	}
}

// TestSetProductChecksTheScheme: a config told it runs the other product's
// version refuses it, so that no message reads "OPNsense 2.7.2".
func TestSetProductChecksTheScheme(t *testing.T) {
	pf, opn := loadFixture(t, "configs/pfsense-2.7.xml"), loadFixture(t, "configs/opnsense-26.1.xml")
	if err := pf.SetProduct("26.1"); err == nil {
		t.Errorf("a pfSense config took product version 26.1")
	}
	if err := opn.SetProduct("2.7.2"); err == nil {
		t.Errorf("an OPNsense config took product version 2.7.2")
	}
	if _, err := Ciphers(PfSense, "9.9"); err == nil {
		t.Errorf("Ciphers(pfsense, 9.9) listed ciphers of a version pfSense never had")
	}
}
