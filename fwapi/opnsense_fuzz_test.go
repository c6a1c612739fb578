package fwapi

import (
	"strings"
	"testing"

	"github.com/fwab/fwab/fixtures/api"
)

// The bodies and outputs below come from the firewall: hostile or broken
// ones must give an error or a value, never a panic.

func FuzzCheckOPNResult(f *testing.F) {
	for _, name := range []string{"opnsense/filter_apply.json", "opnsense/validation_failed.json", "opnsense/action_failed_get.json", "opnsense/savepoint.json"} {
		f.Add(api.Body(name))
	}
	f.Add([]byte(`{"validations":{"a":[1,{"b":2}]}}`))
	f.Add([]byte(`{"result":["failed"],"status":{"x":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		err := checkOPNResult("POST", "/api/x", body)
		if err != nil && err.Error() == "" {
			t.Error("empty error text")
		}
	})
}

func FuzzDecodeErrors(f *testing.F) {
	for _, name := range []string{"opnsense/error_401.json", "opnsense/error_500.json"} {
		f.Add(404, api.Body(name))
	}
	f.Add(404, []byte("<html>404</html>"))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := decodeOPNsenseError(status, body)
		if e == nil {
			t.Fatal("nil *APIError")
		}
		if len(e.Message) > 220 && !strings.HasPrefix(string(body), "{") {
			t.Errorf("message of %d bytes from a non-JSON body: not clipped", len(e.Message))
		}
	})
}

func FuzzSelectedValues(f *testing.F) {
	f.Add([]byte(`"lan,wan"`))
	f.Add([]byte(`{"lan":{"value":"LAN","selected":1},"wan":{"selected":"0"}}`))
	f.Add([]byte(`{"x":{"selected":true}}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, v := range selectedValues(raw) {
			if v == "" {
				t.Error("empty value selected")
			}
		}
	})
}
