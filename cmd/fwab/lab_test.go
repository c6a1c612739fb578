package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLabCommandUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{name: "unknown flavor", args: []string{"lab", "up", "--flavor", "vyos"}, wantCode: exitUsage, wantErr: "emulates pfsense or opnsense"},
		{name: "unknown profile", args: []string{"lab", "up", "--profile", "10g-big"}, wantCode: exitUsage, wantErr: `lab profile "10g-big": want one of unlimited, 1g-small`},
		{name: "unknown speed", args: []string{"lab", "up", "--link", "40g"}, wantCode: exitUsage, wantErr: `link speed "40g": want one of 100m, 1g, 2.5g, 10g, unlimited`},
		{name: "unknown interface", args: []string{"lab", "up", "--link-if", "opt1=1g"}, wantCode: exitUsage, wantErr: `link of interface "opt1": the lab's DUT interfaces are lan, wan`},
		{name: "budget too small", args: []string{"lab", "up", "--dut-cpu", "0.01"}, wantCode: exitUsage, wantErr: "dut cpu budget 0.01 cores: want 0.1 to"},
		{name: "budget above the machine", args: []string{"lab", "up", "--profile", "1g-small", "--dut-cpu", "512"}, wantCode: exitUsage, wantErr: "dut cpu budget 512 cores: want 0.1 to"},
		{name: "extra argument", args: []string{"lab", "down", "now"}, wantCode: exitUsage, wantErr: "accepts 0 arg"},
		{name: "status of no lab", args: []string{"lab", "status", "--prefix", "fwtnone", "--dir", filepath.Join(t.TempDir(), "none")}, wantOut: "lab:        down\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(""), &out, &errOut)
			if code != tt.wantCode {
				t.Errorf("run(%q) = %d, want %d (stderr %q)", tt.args, code, tt.wantCode, errOut.String())
			}
			if tt.wantOut != "" && !strings.HasPrefix(out.String(), tt.wantOut) {
				t.Errorf("run(%q) stdout = %q, want it to start with %q", tt.args, out.String(), tt.wantOut)
			}
			if tt.wantErr != "" && !strings.Contains(errOut.String(), tt.wantErr) {
				t.Errorf("run(%q) stderr = %q, want it to contain %q", tt.args, errOut.String(), tt.wantErr)
			}
		})
	}
}

// TestLabFaultLinkErrors: --link-errors writes the counts into the lab's
// fault file, and a count that is not above 0 is refused, named.
func TestLabFaultLinkErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, stderr, code := fwab(t, "", "lab", "fault", "--dir", dir, "--link-errors", "igb1=40,igb0=2"); code != exitOK || !strings.Contains(out, "link errors map[igb0:2 igb1:40]") {
		t.Fatalf("lab fault --link-errors: %q %q (exit %d)", out, stderr, code)
	}
	data, err := os.ReadFile(filepath.Join(dir, "fault.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"link_errors":{"igb0":2,"igb1":40},"link_errors_at":"`) {
		t.Errorf("fault file %s: want the link errors", data)
	}
	if _, stderr, code := fwab(t, "", "lab", "fault", "--dir", dir, "--link-errors", "igb1=0"); code != exitUsage || !strings.Contains(stderr, "--link-errors igb1=0: want a count above 0") {
		t.Errorf("--link-errors igb1=0: %q (exit %d), want a usage error", stderr, code)
	}
}
