package fwapi_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fwab/fwab/fwapi"
)

func TestCommandErrorDiskFailed(t *testing.T) {
	tests := []struct {
		stderr string
		want   bool
	}{
		{"cp: /conf/backup/config-1.xml: No space left on device", true},
		{"mv: /cf/conf/config.xml: Read-only file system", true},
		{"pfctl: syntax error", false},
		{"", false},
	}
	for _, tt := range tests {
		err := fmt.Errorf("apply: %w", &fwapi.CommandError{Cmd: "cp", Exit: 1, Stderr: tt.stderr})
		var ce *fwapi.CommandError
		if !errors.As(err, &ce) {
			t.Fatal("no CommandError in the chain")
		}
		if got := ce.DiskFailed(); got != tt.want {
			t.Errorf("DiskFailed() for %q = %v, want %v", tt.stderr, got, tt.want)
		}
		if got := errors.Is(err, fwapi.ErrFirewallDisk); got != tt.want {
			t.Errorf("errors.Is(%v, ErrFirewallDisk) = %v, want %v", err, got, tt.want)
		}
	}
}
