// Package freeport finds a TCP port of 127.0.0.1 for a test's server.
package freeport

import (
	"net"
	"testing"
)

// TCP is a port of 127.0.0.1 where nothing listens at the moment it is
// asked; the test fails when none can be had.
func TCP(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
