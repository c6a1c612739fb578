package configxml

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// opnConfigs are the OPNsense configs the conformance test starts from: the
// repository's fixtures, goldens and lab factory config, and the upstream
// factory configs beside the source.
func opnConfigs(t *testing.T, up string) map[string][]byte {
	t.Helper()
	root := repoRoot(t)
	out := map[string][]byte{}
	var paths []string
	for _, glob := range []string{
		filepath.Join(root, "fixtures/configs/opnsense-*.xml"),
		filepath.Join(root, "configxml/testdata/opnsense-*.xml"),
		filepath.Join(root, "emu/assets/opnsense/config.xml"),
		filepath.Join(up, "opnsense-core-stable-*-config-sample.xml"),
		filepath.Join(up, "opnsense-docs-hardware-configs-*-config.xml"),
	} {
		m, _ := filepath.Glob(glob)
		paths = append(paths, m...)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name, err := filepath.Rel(root, p)
		if err != nil || strings.HasPrefix(name, "..") {
			name = "upstream/" + filepath.Base(p)
		}
		out[name] = data
	}
	if len(out) < 5 {
		t.Fatalf("found only %d OPNsense configs: %v", len(out), paths)
	}
	return out
}

// proposalCandidates are the ipsec values the test sets: fwab's common
// proposals and forms with PFS and an explicit IKE proposal.
var proposalCandidates = append(slices.Clone(commonProposals),
	"aes128gcm16-modp2048", "aes256gcm16-ecp521", "chacha20poly1305-x25519",
	"aes128-sha256-modp2048", "aes256-sha1",
	"aes256gcm16-sha256-x25519/chacha20poly1305",
	"chacha20poly1305-sha256-x25519/chacha20poly1305",
	"aes256-sha256-modp2048/aes256-sha256-modp2048",
	"aes128gcm16-sha256-modp2048/aes128gcm16",
)

func knobAssignments(c *Config) []string {
	var out []string
	for _, k := range Knobs(OPNsense) {
		var refs []string
		switch k.Qualifier {
		case "":
			refs = []string{k.Name}
		case "interface":
			for _, key := range c.interfaceKeys() {
				if key == "lan" || key == "wan" {
					refs = append(refs, k.Name+"@"+key)
				}
			}
		case "tunnel":
			refs = append([]string{k.Name + "@fwab"}, prefixed(k.Name+"@", c.tunnelNames())...)
		default:
			continue // xml: free-form; firmware: not in config.xml
		}
		values := k.Values
		switch k.Name {
		case "rules":
			values = []string{"0", "3"}
		case "ipsec":
			values = append(slices.Clone(proposalCandidates), ipsecNone)
		case "firmware", "xml":
			continue
		}
		for _, r := range refs {
			for _, v := range values {
				out = append(out, r+"="+v)
			}
		}
	}
	return out
}

func prefixed(p string, names []string) []string {
	var out []string
	for _, n := range names {
		out = append(out, p+n)
	}
	return out
}

// TestUpstreamModelConformance sets every knob value on every OPNsense config
// for each OPNsense version whose source ../shared/upstream holds, and holds
// each element written below <OPNsense> against that version's MVC model:
// the element exists there, its value is one its field type allows, new
// array items carry a uuid and their Required fields, and no read-only link
// or volatile field is written. ipsec values are accepted exactly when the
// version's Swanctl model offers both proposals, and an accepted change
// leaves the service switch its ServiceController reads on.
func TestUpstreamModelConformance(t *testing.T) {
	up := upstreamDir(t)
	configs := opnConfigs(t, up)
	names := make([]string, 0, len(configs))
	for n := range configs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, version := range opnVersions {
		models := loadOPNModels(t, up, version)
		phase1, phase2 := models.ipsecProposals(t, "1"), models.ipsecProposals(t, "2")
		t.Run(version, func(t *testing.T) {
			for _, name := range names {
				t.Run(strings.ReplaceAll(name, "/", "_"), func(t *testing.T) {
					base, err := LoadBytes(configs[name])
					if err != nil {
						t.Fatal(err)
					}
					if base.Flavor() != OPNsense {
						t.Fatalf("%s is not an OPNsense config", name)
					}
					for _, a := range knobAssignments(base) {
						before, _ := LoadBytes(configs[name])
						after, _ := LoadBytes(configs[name])
						if err := before.SetProduct(version); err != nil {
							// The file's layout is of a later release.
							t.Skipf("%s is not a config of OPNsense %s: %v", name, version, err)
						}
						if err := after.SetProduct(version); err != nil {
							t.Fatal(err)
						}
						after.DefineTunnel(TunnelSpec{
							Name: "fwab", Interface: "wan", LocalAddr: "198.19.0.1", RemoteAddr: "198.19.0.2",
							LocalNet: "198.18.1.0/24", RemoteNet: "198.19.1.0/24",
							LocalID: "dut.fwab.test", RemoteID: "peer.fwab.test", PSK: "conformance-psk",
						})
						ref, value, _ := ParseAssignment(a)
						err := after.Set(ref.String(), value)
						if ref.Name == "ipsec" && value != ipsecNone {
							p, perr := ParseProposal(value)
							if perr != nil {
								t.Fatalf("%s: %v", a, perr)
							}
							allowed := phase1[p.IKE.String()] && phase2[p.ESP.String()]
							switch {
							case err == nil && !allowed:
								t.Errorf("%s: accepted, but OPNsense %s's Swanctl model offers IKE %s: %v, ESP %s: %v",
									a, version, p.IKE, phase1[p.IKE.String()], p.ESP, phase2[p.ESP.String()])
							case err != nil && allowed:
								t.Errorf("%s: refused (%v), but OPNsense %s's Swanctl model offers it", a, err, version)
							case err != nil && !strings.Contains(err.Error(), version):
								t.Errorf("%s: the refusal does not name the version %s: %v", a, version, err)
							}
						}
						if err != nil {
							continue // refused: nothing written
						}
						for _, msg := range models.conformance(t, before, after) {
							t.Errorf("%s: %s", a, msg)
						}
						switch {
						case ref.Name == "ipsec" && value != ipsecNone:
							if path, v := models.serviceEnabled(t, after, "OPNsense/IPsec/Api/ServiceController.php", "OPNsense.IPsec.IPsec"); v != "1" {
								t.Errorf("%s: the IPsec service stays off: its switch, %s, is %q", a, path, v)
							}
						case ref.Name == "ids" && value != IDSOff:
							if path, v := models.serviceEnabled(t, after, "OPNsense/IDS/Api/ServiceController.php", "OPNsense.IDS.IDS"); v != "1" {
								t.Errorf("%s: the IDS stays off: its switch, %s, is %q", a, path, v)
							}
						}
					}
				})
			}
		})
	}
}

// TestUpstreamProposalTable holds configxml's table of the proposals each
// OPNsense version's Swanctl model offers against the upstream field type.
func TestUpstreamProposalTable(t *testing.T) {
	up := upstreamDir(t)
	for _, version := range opnVersions {
		models := loadOPNModels(t, up, version)
		for _, phase := range []string{"1", "2"} {
			want := models.ipsecProposals(t, phase)
			got := opnProposals(version, phase == "1")
			for p := range want {
				if !got[p] {
					t.Errorf("OPNsense %s phase %s: upstream offers %s, configxml's table lacks it", version, phase, p)
				}
			}
			for p := range got {
				if !want[p] {
					t.Errorf("OPNsense %s phase %s: configxml's table has %s, upstream does not offer it", version, phase, p)
				}
			}
		}
	}
}
