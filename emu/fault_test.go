package emu

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestDiskFaults(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	f.mustRun(t, "echo old > /tmp/a && echo keep > /conf/backup/keep.xml", "")
	tests := []struct {
		fault    string
		cmd      string
		wantCode int    // 0 or non-zero
		wantErr  string // in stderr, case-insensitive
	}{
		{DiskFull, "cat > /conf/x.xml", 1, "no space left on device"},
		{DiskFull, "cp /conf/config.xml /conf/backup/b.xml", 1, "No space left on device"},
		{DiskFull, "cp /conf/config.xml /cf/conf/backup/b.xml", 1, "No space left on device"},
		{DiskFull, "mkdir /var/run/fwab.lock", 1, "No space left on device"},
		{DiskFull, "echo x > /tmp/b", 1, "no space left on device"},
		{DiskFull, "echo x >> /tmp/a", 1, "no space left on device"},
		{DiskFull, "mv /tmp/a /tmp/c", 1, "No space left on device"},
		{DiskFull, "daemon -f -p /var/run/x.pid sleep 1", 1, "No space left on device"},
		{DiskFull, "cat /conf/config.xml > /dev/null && sha256 -q /conf/config.xml", 0, ""},
		{DiskFull, "echo x > /var/log/fine.log", 0, ""},
		{DiskFull, "rm -f /conf/backup/keep.xml", 0, ""}, // a full disk still frees space
		{DiskReadOnly, "rm -f /tmp/a", 1, "Read-only file system"},
		{DiskReadOnly, "echo x > /tmp/b", 1, "read-only file system"},
		{DiskReadOnly, "rm -f /tmp/does-not-exist", 0, ""},
		{"", "echo x > /tmp/b && mkdir /var/run/fwab.lock && rm -r /var/run/fwab.lock && cp /tmp/b /conf/backup/b.xml", 0, ""},
	}
	for _, tt := range tests {
		f.em.SetFault(Fault{Disk: tt.fault})
		// Stdin only for the command that reads it: a command that exits
		// without reading races the client's copy of it (EOF).
		stdin := ""
		if strings.HasPrefix(tt.cmd, "cat >") {
			stdin = "data"
		}
		_, errOut, code := f.run(t, tt.cmd, stdin)
		if (code != 0) != (tt.wantCode != 0) || !strings.Contains(strings.ToLower(errOut), strings.ToLower(tt.wantErr)) {
			t.Errorf("disk %q: %q: exit %d, stderr %q; want exit %d and %q", tt.fault, tt.cmd, code, errOut, tt.wantCode, tt.wantErr)
		}
	}
}

func TestLinkFaults(t *testing.T) {
	f := startEmulator(t, newRecordingDataPlane(), testPorts, DefaultProfiles())
	dir := filepath.Dir(f.em.Root)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go f.em.WatchFaults(ctx, dir)
	refused := func() bool {
		c, err := net.DialTimeout("tcp", f.addr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	}
	waitUp := func(within time.Duration) time.Duration {
		start := time.Now()
		for refused() {
			if time.Since(start) > within {
				t.Fatalf("the link is still down after %v", within)
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(start)
	}

	// A link cut on a command: the connection that ran it is lost, new
	// ones are refused for the fault's duration, then SSH answers again.
	c, err := ssh.Dial("tcp", f.addr, f.client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := WriteFault(dir, Fault{LinkDownOn: "/etc/rc.filter_configure_sync", LinkDownFor: time.Second}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	sshRun(t, c, "echo unaffected", "")
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run("sleep 1; /etc/rc.filter_configure_sync"); err == nil {
		t.Errorf("the command that cut the link returned normally")
	}
	if !refused() {
		t.Errorf("a new connection was accepted while the link was down")
	}
	if d := waitUp(5 * time.Second); d < 300*time.Millisecond {
		t.Errorf("the link came back after %v, want about 1s", d)
	}
	if out := f.mustRun(t, "/etc/rc.filter_configure_sync && echo ok", ""); !strings.Contains(out, "ok") {
		t.Errorf("the link fault fired twice: %q", out)
	}

	// A link cut for a while, and a clear.
	if err := WriteFault(dir, Fault{LinkDownUntil: time.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if !refused() {
		t.Errorf("a new connection was accepted while the link was down")
	}
	waitUp(5 * time.Second)
	if err := WriteFault(dir, Fault{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteFault(dir, Fault{Disk: "full"}); err == nil {
		t.Errorf("WriteFault accepted disk fault %q", "full")
	}
}
