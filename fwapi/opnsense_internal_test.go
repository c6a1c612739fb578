package fwapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/fixtures/api"
)

func TestParseOPNVersion(t *testing.T) {
	tests := []struct {
		in                    string
		want                  opnVersion
		ifSettings, modeField bool
		wantErr               bool
	}{
		{in: "25.7.11_2", want: opnVersion{25, 7, "25.7.11_2"}},
		{in: "26.1", want: opnVersion{26, 1, "26.1"}, ifSettings: true, modeField: true},
		{in: " 26.1.2\n", want: opnVersion{26, 1, "26.1.2"}, ifSettings: true, modeField: true},
		{in: "26.7.r1", want: opnVersion{26, 7, "26.7.r1"}, ifSettings: true, modeField: true},
		{in: "27.1", want: opnVersion{27, 1, "27.1"}, ifSettings: true, modeField: true},
		{in: "OPNsense 26.1", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tc := range tests {
		got, err := parseOPNVersion(tc.in)
		if tc.wantErr {
			if err == nil {
				t.Errorf("parseOPNVersion(%q) = %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("parseOPNVersion(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if got.hasInterfaceSettings() != tc.ifSettings || got.idsUsesModeField() != tc.modeField {
			t.Errorf("%q: interface settings %v, mode field %v; want %v %v", tc.in,
				got.hasInterfaceSettings(), got.idsUsesModeField(), tc.ifSettings, tc.modeField)
		}
	}
}

// TestIDSSettingsFixtures decodes the documented getAction shapes.
func TestIDSSettingsFixtures(t *testing.T) {
	tests := []struct {
		file  string
		field string
		want  []string
	}{
		{"opnsense/ids_settings_get_26.1.json", "mode", []string{"netmap"}},
		{"opnsense/ids_settings_get_26.1.json", "interfaces", []string{"lan"}},
		{"opnsense/ids_settings_get_26.1.json", "enabled", []string{"1"}},
		{"opnsense/ids_settings_get_25.7.json", "ips", []string{"1"}},
		{"opnsense/ids_settings_get_25.7.json", "interfaces", []string{"lan", "wan"}},
		{"opnsense/ids_settings_get_25.7.json", "homenet", []string{"198.18.0.0/15"}},
	}
	for _, tc := range tests {
		var s struct {
			IDS struct {
				General map[string]json.RawMessage `json:"general"`
			} `json:"ids"`
		}
		if err := json.Unmarshal(api.Body(tc.file), &s); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, selectedValues(s.IDS.General[tc.field])); diff != "" {
			t.Errorf("%s %s (-want +got):\n%s", tc.file, tc.field, diff)
		}
	}
}

func TestCheckOPNResultFixtures(t *testing.T) {
	tests := []struct {
		file    string
		wantErr string
	}{
		{"opnsense/filter_apply.json", ""},
		{"opnsense/service_reconfigure.json", ""},
		{"opnsense/savepoint.json", ""},
		{"opnsense/validation_failed.json", "validation failed: ids.general.homenet: Invalid network address.; Field required.; ids.general.interfaces: Interface lan is not netmap capable.;"},
		{"opnsense/action_failed_get.json", `the firewall reported "failed"`},
	}
	for _, tc := range tests {
		err := checkOPNResult("POST", "/api/x", api.Body(tc.file))
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("checkOPNResult(%s) = %v, want nil", tc.file, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("checkOPNResult(%s) = %v, want one containing %q", tc.file, err, tc.wantErr)
		}
	}
}

func TestDecodeErrorFixtures(t *testing.T) {
	tests := []struct {
		file   string
		decode func(int, []byte) *APIError
		want   APIError
	}{
		{"opnsense/error_401.json", decodeOPNsenseError, APIError{Message: "Authentication Failed"}},
		{"opnsense/error_404.json", decodeOPNsenseError, APIError{Message: "Endpoint not found"}},
		{"opnsense/error_500.json", decodeOPNsenseError, APIError{Message: "Unexpected error, check log for details"}},
		{"opnsense/error_400.json", decodeOPNsenseError, APIError{Message: "Invalid JSON syntax"}},
	}
	for _, tc := range tests {
		got := tc.decode(400, api.Body(tc.file))
		if diff := cmp.Diff(tc.want, *got); diff != "" {
			t.Errorf("decode %s (-want +got):\n%s", tc.file, diff)
		}
	}
}

func TestFingerprintRoundTrip(t *testing.T) {
	const fp = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89"
	for _, in := range []string{fp, strings.ToLower(fp), strings.ReplaceAll(fp, ":", ""), "SHA256:" + fp} {
		b, err := ParseFingerprint(in)
		if err != nil {
			t.Errorf("ParseFingerprint(%q) error = %v", in, err)
			continue
		}
		if got := FormatFingerprint(b); got != fp {
			t.Errorf("FormatFingerprint(ParseFingerprint(%q)) = %q, want %q", in, got, fp)
		}
	}
	for _, in := range []string{"", "AB", strings.Repeat("G", 64), fp + ":00"} {
		if _, err := ParseFingerprint(in); err == nil {
			t.Errorf("ParseFingerprint(%q) succeeded, want an error", in)
		}
	}
}
