package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
)

// TestSweepLinks: a probe that names a link the target lacks is refused
// before anything touches the firewall, the target's links listed; one
// the target has plans a run per link.
func TestSweepLinks(t *testing.T) {
	fake, targets := labTarget(t, nil, true)
	spec := filepath.Join(t.TempDir(), "links.yaml")
	os.WriteFile(spec, []byte("target: fw1\naxes:\n  rules@lan: [0, 10]\nprobes:\n  - {name: up, duration: 1s, links: [main, b]}\n  - {name: both, duration: 1s, links: [main, b], concurrent: true}\nrepeats: 2\nidle: 0s\n"), 0o644)
	before := fake.StoredConfig(t)
	_, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--db", filepath.Join(t.TempDir(), "r.db"), "--progress=false")
	if code != 2 || !strings.Contains(errOut, `no link "b"`) || !strings.Contains(errOut, "it has main") {
		t.Errorf("sweep naming an unknown link = %d: %s; want exit 2 naming it and the known ones", code, errOut)
	}
	if string(fake.StoredConfig(t)) != string(before) || len(fake.Actions()) != 0 {
		t.Errorf("the refused sweep touched the firewall: actions %v", fake.Actions())
	}

	data, _ := os.ReadFile(targets)
	withB := strings.Replace(string(data), "      server: {addr: 198.19.1.10}\n", "      server: {addr: 198.19.1.10}\n      links:\n        b: {client: {addr: 198.18.2.10}, server: {addr: 198.19.2.10}}\n", 1)
	if withB == string(data) {
		t.Fatalf("could not add link b to %s", data)
	}
	os.WriteFile(targets, []byte(withB), 0o600)
	if out, errOut, code := fwabRun(t, "target", "list", "--targets", targets); code != 0 || !strings.Contains(out, "main,b") {
		t.Errorf("target list = %d:\n%s%s\nwant the links main,b", code, out, errOut)
	}
	out, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--dry-run")
	if code != 0 || !strings.Contains(out+errOut, "up@b") || !strings.Contains(out+errOut, "both@main+b") {
		t.Errorf("dry run with link b = %d:\n%s%s\nwant runs up@main, up@b and both@main+b", code, out, errOut)
	}
	// Pinned alike on one host (this machine: the endpoints have neither
	// netns nor ssh), the links at once are warned of in the dry run.
	os.WriteFile(spec, []byte("target: fw1\naxes:\n  rules@lan: [0, 10]\nprobes:\n  - {name: both, duration: 1s, links: [main, b], concurrent: true, cpuset: {client: '0', server: '1'}}\nrepeats: 2\nidle: 0s\n"), 0o644)
	if _, errOut, code := fwabRun(t, "sweep", spec, "--targets", targets, "--dry-run"); code != 0 || !strings.Contains(errOut, "warning: probe both: client@main and client@b run at once on this machine pinned to the same cores ([0])") {
		t.Errorf("dry run of links pinned alike = %d: %s; want the shared cores warned of", code, errOut)
	}
}

// TestSharedCores: links run at once with iperf3s pinned to the same cores
// of one host are named; cores of their own, or other hosts, are not.
func TestSharedCores(t *testing.T) {
	ns := func(n string) fwapi.Endpoint { return fwapi.Endpoint{Addr: "198.18.1.10", Netns: n} }
	ssh := func(h string) fwapi.Endpoint {
		return fwapi.Endpoint{Addr: "198.18.1.10", SSH: &fwapi.SSHHost{Host: h}}
	}
	target := func(a, b fwapi.EndpointPair) *fwapi.Target {
		return &fwapi.Target{Name: "fw", Endpoints: fwapi.Endpoints{Client: a.Client, Server: a.Server, Links: map[string]fwapi.EndpointPair{"b": b}}}
	}
	namespaces := target(fwapi.EndpointPair{Client: ns("lan"), Server: ns("wan")}, fwapi.EndpointPair{Client: ns("lan2"), Server: ns("wan2")})
	hosts := target(fwapi.EndpointPair{Client: ssh("c1"), Server: ssh("s1")}, fwapi.EndpointPair{Client: ssh("c2"), Server: ssh("s2")})
	probes := "  - {name: both, links: [main, b], concurrent: true, udp: true, bitrate: 100M, lengths: [64, 512], cpuset: %s}\n" // two runs, one warning each pair
	for _, tt := range []struct {
		name   string
		cpuset string
		target *fwapi.Target
		want   []string // substrings of the one warning; none: no warning
	}{
		{"one cpuset, namespaces", "{client: '0', server: '1'}", namespaces, []string{"client@main and client@b run at once on this machine pinned to the same cores ([0])", "server@main and server@b"}},
		{"own cores, namespaces", "{client: '0', server: '1', links: {b: {client: '2', server: '3'}}}", namespaces, nil},
		{"one cpuset, four hosts", "{client: '0', server: '1'}", hosts, nil},
		{"one cpuset, one SSH host", "{client: '0', server: '1'}", target(fwapi.EndpointPair{Client: ssh("h"), Server: ssh("s1")}, fwapi.EndpointPair{Client: ssh("h"), Server: ssh("s2")}), []string{"client@main and client@b run at once on h:22"}},
		{"one link's two ends", "{client: '0', server: '0', links: {b: {client: '1', server: '2'}}}", namespaces, []string{"client@main and server@main", "give the link's client and server different cores"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := matrix.Parse(strings.NewReader("axes:\n  rules@lan: [0]\nprobes:\n" + fmt.Sprintf(probes, tt.cpuset)))
			if err != nil {
				t.Fatal(err)
			}
			warns := sharedCores(spec, tt.target)
			got := strings.Join(warns, "\n")
			if len(tt.want) > 0 && len(warns) != 2 && tt.name == "one cpuset, namespaces" {
				t.Errorf("warnings %q: want one per pair of sides sharing cores (clients, servers)", warns)
			}
			if len(tt.want) == 0 && got != "" {
				t.Errorf("warnings %q, want none", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("warnings %q, want %q", got, w)
				}
			}
		})
	}
}
