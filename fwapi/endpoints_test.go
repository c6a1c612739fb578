package fwapi_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/probe"
)

func TestEndpointOpen(t *testing.T) {
	shell := probe.StreamShell(func(context.Context, string, io.Writer) (int, []byte, error) { return 0, nil, nil })
	dial := func(h *fwapi.SSHHost) (probe.Shell, error) {
		if h.Host == "down.example" {
			return nil, errors.New("connection refused")
		}
		return shell, nil
	}
	tests := []struct {
		e       fwapi.Endpoint
		want    string // type of runner
		wantErr string
	}{
		{fwapi.Endpoint{Addr: "198.18.1.10", Netns: "fwab-lan"}, "probe.Local", ""},
		{fwapi.Endpoint{Addr: "198.19.1.10", SSH: &fwapi.SSHHost{Host: "wan.example"}}, "probe.ShellRunner", ""},
		{fwapi.Endpoint{Addr: "198.19.1.10"}, "probe.Local", ""},
		{fwapi.Endpoint{Netns: "x"}, "", "has no addr"},
		{fwapi.Endpoint{Addr: "198.19.1.10", Netns: "x", SSH: &fwapi.SSHHost{Host: "h"}}, "", "both netns and ssh"},
		{fwapi.Endpoint{Addr: "198.19.1.10", SSH: &fwapi.SSHHost{Host: "down.example"}}, "", "down.example: connection refused"},
	}
	for _, tt := range tests {
		got, err := tt.e.Open("server", dial)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Open(%+v) error = %v, want %q", tt.e, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%+v) = %v", tt.e, err)
			continue
		}
		if typ := runnerType(got.Runner); typ != tt.want || got.Addr != tt.e.Addr || got.Name != "server" {
			t.Errorf("Open(%+v) = %s %q at %s, want %s \"server\" at %s", tt.e, typ, got.Name, got.Addr, tt.want, tt.e.Addr)
		}
	}
}

func runnerType(r probe.Runner) string {
	switch r.(type) {
	case probe.Local:
		return "probe.Local"
	case probe.ShellRunner:
		return "probe.ShellRunner"
	}
	return "other"
}
