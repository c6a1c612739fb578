// Package netnstest opens sockets inside a network namespace for tests: a
// socket stays in the namespace it was made in when other threads use it.
package netnstest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread: Do's goroutine must never run
// there, or the namespace switch would outlive it (Go does not end the
// main thread when a goroutine locked to it exits), and ip netns pids
// would then list the whole test process in the namespace.
func init() { runtime.LockOSThread() }

// Do runs fn on an OS thread inside the named namespace (ip netns's
// /run/netns/NAME) and returns its error. The thread is discarded
// afterwards, so no other goroutine ever runs in the namespace.
func Do(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
