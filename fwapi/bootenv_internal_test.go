package fwapi

import (
	"context"
	"strings"
	"testing"
)

// TestBootEnvSpace: the room --keep needs is what the running environment
// and its children refer to, the room it has the first line's available;
// what zfs did not answer as asked is an error that quotes it.
func TestBootEnvSpace(t *testing.T) {
	for _, tt := range []struct {
		out        string
		avail, ref int64
		err        string
	}{
		{out: "5368709120\t1299227607\n5368709120\t3145728\n5368709120\t42991616\n", avail: 5 << 30, ref: 1299227607 + 3145728 + 42991616},
		{out: "100\t200", avail: 100, ref: 200},
		{out: "100\t200\r\n", avail: 100, ref: 200},
		{out: "", err: "want two numbers a line"},
		{out: "100\n", err: "want two numbers a line"},
		{out: "100\tlots\n", err: `said "100\tlots"`},
	} {
		var asked string
		b := bootEnvShell{run: func(_ context.Context, cmd string) ([]byte, error) {
			asked = cmd
			return []byte(tt.out), nil
		}}
		sp, err := b.space(t.Context())
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("space on %q = %+v, %v; want an error with %q", tt.out, sp, err, tt.err)
			}
		case err != nil || sp.Available != tt.avail || sp.Referenced != tt.ref:
			t.Errorf("space on %q = %+v, %v; want available %d, referenced %d", tt.out, sp, err, tt.avail, tt.ref)
		}
		if !strings.Contains(asked, "-r") || !strings.Contains(asked, "-t filesystem") || !strings.HasSuffix(strings.Fields(asked)[len(strings.Fields(asked))-1], "/") {
			t.Errorf("space asked %q: want zfs list -r -t filesystem of /", asked)
		}
	}
}
