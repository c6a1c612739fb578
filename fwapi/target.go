package fwapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fwab/fwab/internal/atomicfile"
	"gopkg.in/yaml.v3"

	"github.com/fwab/fwab/internal/yamlerr"
)

// Target is one firewall fwab may drive, as written in the targets file.
// Secrets are never stored here: only the names of files or environment
// variables that hold them.
type Target struct {
	Name      string    `yaml:"-"`
	Flavor    string    `yaml:"flavor"` // "pfsense" or "opnsense"
	Host      string    `yaml:"host"`
	SSH       *SSHSpec  `yaml:"ssh,omitempty"`
	API       *APISpec  `yaml:"api,omitempty"`
	Endpoints Endpoints `yaml:"endpoints"`
	// Lease is how long the box waits for a session's renewal before it
	// restores the session's original by itself (Go duration, e.g. 10m;
	// default DefaultLease). A command's --lease overrides it.
	Lease string `yaml:"lease,omitempty"`
	// OffloadManagement lets offload changes reach the NIC fwab's session
	// runs over, as the products' GUIs do; by default fwab leaves it as it
	// is (a capability change may reset its link) and verify says so.
	OffloadManagement bool `yaml:"offload_management,omitempty"`
	// Lab says what a lab target's emulated box stands for: its profile,
	// links and CPU budget with the budget's calibration (written by
	// `fwab lab up`; runs record it, reports print it).
	Lab string `yaml:"lab,omitempty"`
}

// LeaseLength is the target's lease, or 0 when it names none.
func (t *Target) LeaseLength() (time.Duration, error) {
	if t.Lease == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(t.Lease)
	if err != nil || d < 30*time.Second {
		return 0, fmt.Errorf("target %q: lease %q is not a duration of at least 30s (e.g. lease: 10m): the box needs time for a reboot between renewals", t.Name, t.Lease)
	}
	return d, nil
}

// SSHSpec says how to reach the firewall's shell.
type SSHSpec struct {
	Port             int    `yaml:"port,omitempty"` // default 22
	User             string `yaml:"user"`
	KeyFile          string `yaml:"key_file,omitempty"`
	PasswordFile     string `yaml:"password_file,omitempty"`
	Agent            bool   `yaml:"agent,omitempty"`
	KnownHosts       string `yaml:"known_hosts,omitempty"` // default ~/.ssh/known_hosts
	ConnectTimeoutMS int    `yaml:"connect_timeout_ms,omitempty"`
}

// APISpec says how to reach the firewall's REST API.
type APISpec struct {
	URL         string `yaml:"url"`
	KeyFile     string `yaml:"key_file,omitempty"`
	KeyEnv      string `yaml:"key_env,omitempty"`
	SecretFile  string `yaml:"secret_file,omitempty"`
	SecretEnv   string `yaml:"secret_env,omitempty"`
	CAFile      string `yaml:"ca_file,omitempty"`
	Fingerprint string `yaml:"fingerprint,omitempty"` // SHA-256 of the leaf certificate, hex
	Insecure    bool   `yaml:"insecure,omitempty"`    // skip TLS verification: explicit only
}

// Endpoints are the hosts that send traffic through the firewall: a
// client and a server, the target's first link, and optionally further
// links, each a client and a server on ports of their own (as the E302
// review's two 10G sets), which a probe names in its links.
type Endpoints struct {
	Client Endpoint `yaml:"client"` // LAN side
	Server Endpoint `yaml:"server"` // WAN side
	// Name is the first link's name; DefaultLinkName when empty.
	Name  string                  `yaml:"name,omitempty"`
	Links map[string]EndpointPair `yaml:"links,omitempty"`
}

// EndpointPair is one further link's client and server.
type EndpointPair struct {
	Client Endpoint `yaml:"client"`
	Server Endpoint `yaml:"server"`
}

// DefaultLinkName names a target's first link when its endpoints do not.
const DefaultLinkName = "main"

// FirstLink is the name of the target's first link.
func (e Endpoints) FirstLink() string {
	if e.Name != "" {
		return e.Name
	}
	return DefaultLinkName
}

// LinkNames are the target's links: the first, then the others by name.
func (e Endpoints) LinkNames() []string {
	return append([]string{e.FirstLink()}, slices.Sorted(maps.Keys(e.Links))...)
}

// Pair is the link called name, or an error that lists the known ones.
func (e Endpoints) Pair(name string) (EndpointPair, error) {
	if name == e.FirstLink() {
		return EndpointPair{Client: e.Client, Server: e.Server}, nil
	}
	if p, ok := e.Links[name]; ok {
		return p, nil
	}
	return EndpointPair{}, fmt.Errorf("no link %q among the target's endpoints; it has %s (add one under endpoints: links:)", name, strings.Join(e.LinkNames(), ", "))
}

// Endpoint is a traffic host: a local network namespace or an SSH host.
type Endpoint struct {
	Addr  string   `yaml:"addr"`            // address traffic is sent to or from
	Netns string   `yaml:"netns,omitempty"` // local network namespace
	SSH   *SSHHost `yaml:"ssh,omitempty"`   // or a remote host
}

// Host names the machine the endpoint's processes run on: its SSH host,
// or this machine for a network namespace or none (every namespace shares
// this machine's cores).
func (e Endpoint) Host() string {
	if e.SSH == nil {
		return "this machine"
	}
	return SSHSpecConfig(e.SSH.Host, &e.SSH.SSHSpec).Addr
}

// SSHHost is an endpoint host reached over SSH.
type SSHHost struct {
	Host    string `yaml:"host"`
	SSHSpec `yaml:",inline"`
}

// TargetsFile is the whole targets file.
type TargetsFile struct {
	Targets map[string]*Target `yaml:"targets"`
}

// DefaultTargetsPath is ~/.config/fwab/targets.yaml.
func DefaultTargetsPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "targets.yaml"
	}
	return filepath.Join(dir, "fwab", "targets.yaml")
}

// LoadTargets reads a targets file and checks every target in it
// (Target.Problems): an error lists every problem, each with its line. A
// missing file is an empty set.
func LoadTargets(path string) (*TargetsFile, error) {
	tf, data, err := readTargets(path)
	if err != nil {
		return nil, err
	}
	// What target add checks, for every target at once: a hand-written
	// file is held to the same rules.
	if err := checkTargets(path, data, tf); err != nil {
		return nil, err
	}
	return tf, nil
}

// EditTargets reads a targets file to add, replace or remove targets
// (target add, lab up and down): without the checks LoadTargets makes, so
// that a broken target can be replaced or removed by the commands that
// write the file. What they write they check themselves.
func EditTargets(path string) (*TargetsFile, error) {
	tf, _, err := readTargets(path)
	return tf, err
}

func readTargets(path string) (*TargetsFile, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &TargetsFile{Targets: map[string]*Target{}}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var tf TargetsFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&tf); err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, fmt.Errorf("targets file %s: %w", path, yamlerr.Translate(err, data, &tf))
	}
	if tf.Targets == nil {
		tf.Targets = map[string]*Target{}
	}
	for name, t := range tf.Targets {
		if t == nil {
			return nil, nil, fmt.Errorf("targets file %s: target %q is empty", path, name)
		}
		t.Name = name
	}
	return &tf, data, nil
}

// Lookup returns the named target, or an error that lists the known ones.
func (tf *TargetsFile) Lookup(name string) (*Target, error) {
	if t, ok := tf.Targets[name]; ok {
		return t, nil
	}
	names := make([]string, 0, len(tf.Targets))
	for n := range tf.Targets {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("no target %q: the targets file has none (run 'fwab lab up' for the embedded lab, or add one)", name)
	}
	return nil, fmt.Errorf("no target %q; known targets: %s", name, strings.Join(names, ", "))
}

// Save writes the targets file atomically (temp file, fsync, rename).
func (tf *TargetsFile) Save(path string) error {
	data, err := yaml.Marshal(tf)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}
