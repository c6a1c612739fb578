package smartplug

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestWattsAt(t *testing.T) {
	tasmota := `{"StatusSNS":{"Time":"2026-11-30T03:00:00","ENERGY":{"Total":12.3,"Power":41,"Voltage":230}}}`
	shelly := `{"meters":[{"power":17.25,"is_valid":true}],"emeters":[{"power":3.5},{"power":"8.75"}]}`
	tests := []struct {
		doc, path string
		want      float64
		wantErr   string
	}{
		{tasmota, "StatusSNS.ENERGY.Power", 41, ""},
		{shelly, "meters.0.power", 17.25, ""},
		{shelly, "emeters.1.power", 8.75, ""},
		{tasmota, "StatusSNS.ENERGY.Watts", 0, `no "StatusSNS.ENERGY.Watts" in the reply (keys there: Power, Total, Voltage)`},
		{shelly, "emeters.2.power", 0, "not an index of a 2-element array"},
		{shelly, "meters.0.is_valid", 0, "is a bool, not a number"},
		{tasmota, "StatusSNS.Time", 0, "not a number"},
		{`{"p":-5}`, "p", 0, "not a power"},
		{`<html>`, "p", 0, "not JSON"},
	}
	for _, tt := range tests {
		got, err := WattsAt([]byte(tt.doc), tt.path)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("WattsAt(%s) error = %v, want %q", tt.path, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("WattsAt(%s) = %v, %v; want %v", tt.path, got, err, tt.want)
		}
	}
}

func TestMeter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/broken" {
			http.Error(w, "oops", http.StatusInternalServerError)
			return
		}
		fmt.Fprint(w, `{"ENERGY":{"Power":12.5}}`)
	}))
	t.Cleanup(srv.Close)
	got, err := Meter{URL: srv.URL + "/status", Path: "ENERGY.Power"}.Watts(t.Context())
	if err != nil || got != 12.5 {
		t.Errorf("Watts() = %v, %v; want 12.5", got, err)
	}
	_, err = Meter{URL: srv.URL + "/broken", Path: "ENERGY.Power"}.Watts(t.Context())
	if err == nil || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("Watts() on a 500 = %v, want an HTTP 500 error", err)
	}
	for _, m := range []Meter{{URL: "plug.local/status", Path: "a"}, {URL: srv.URL, Path: ""}, {URL: srv.URL, Path: "a..b"}} {
		if err := m.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", m)
		}
	}
}
