package fwapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// OpenOptions are the caller's choices when opening a target.
type OpenOptions struct {
	// AcceptNewHostKey appends an unknown SSH host key to known_hosts.
	AcceptNewHostKey bool
	Logger           *slog.Logger
	PfSense          PfSenseOptions
}

// DriverFunc opens a driver for a target of one flavor.
type DriverFunc func(ctx context.Context, t *Target, opts OpenOptions) (Firewall, error)

var (
	driversMu sync.Mutex
	drivers   = map[string]DriverFunc{"pfsense": openPfSense}
)

// RegisterDriver makes Open use f for targets of the given flavor. Drivers
// register themselves from an init function in their own file.
func RegisterDriver(flavor string, f DriverFunc) {
	driversMu.Lock()
	defer driversMu.Unlock()
	drivers[flavor] = f
}

// Open connects to a target with the driver for its flavor.
func Open(ctx context.Context, t *Target, opts OpenOptions) (Firewall, error) {
	driversMu.Lock()
	f, ok := drivers[t.Flavor]
	var known []string
	for k := range drivers {
		known = append(known, k)
	}
	driversMu.Unlock()
	if !ok {
		sort.Strings(known)
		return nil, fmt.Errorf("target %s: no driver for flavor %q in this build (it has %s)", t.Name, t.Flavor, strings.Join(known, ", "))
	}
	return f(ctx, t, opts)
}

// DialTarget opens the SSH connection a target's ssh section describes.
func DialTarget(ctx context.Context, t *Target, opts OpenOptions) (*SSHClient, error) {
	if t.SSH == nil {
		return nil, fmt.Errorf("target %s: no ssh section in the targets file", t.Name)
	}
	if t.Host == "" {
		return nil, fmt.Errorf("target %s: no host in the targets file", t.Name)
	}
	cfg := SSHSpecConfig(t.Host, t.SSH)
	cfg.AcceptNewHostKey = opts.AcceptNewHostKey
	cfg.Logger = opts.Logger
	sh, err := DialSSH(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("target %s: %w", t.Name, err)
	}
	return sh, nil
}

func openPfSense(ctx context.Context, t *Target, opts OpenOptions) (Firewall, error) {
	sh, err := DialTarget(ctx, t, opts)
	if err != nil {
		return nil, err
	}
	po := opts.PfSense
	po.OffloadSSHInterface = po.OffloadSSHInterface || t.OffloadManagement
	if po.Logger == nil {
		po.Logger = opts.Logger
	}
	return NewPfSense(sh, po), nil
}

// StateDir is the local state folder for a target:
// $XDG_STATE_HOME/fwab/<target>, default ~/.local/state/fwab/<target>.
func StateDir(target string) (string, error) {
	if target == "" || target == "." || target == ".." || filepath.Base(target) != target {
		return "", fmt.Errorf("target name %q cannot name a folder", target)
	}
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", errors.New("no home folder for the local state: set XDG_STATE_HOME")
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "fwab", target), nil
}

// DialSSHHost opens an SSH connection to an endpoint host from the targets
// file (a LAN client or WAN server reached over SSH). Its Stream method is
// what probe.StreamShell adapts.
func DialSSHHost(ctx context.Context, h *SSHHost, opts OpenOptions) (*SSHClient, error) {
	if h == nil || h.Host == "" {
		return nil, errors.New("endpoint: no ssh host")
	}
	cfg := SSHSpecConfig(h.Host, &h.SSHSpec)
	cfg.AcceptNewHostKey = opts.AcceptNewHostKey
	cfg.Logger = opts.Logger
	sh, err := DialSSH(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("endpoint %s: %w", h.Host, err)
	}
	return sh, nil
}
