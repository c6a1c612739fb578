package lab

import (
	"testing"

	"github.com/fwab/fwab/emu"
	"github.com/google/go-cmp/cmp"
)

func TestParseEthtoolFeatures(t *testing.T) {
	out := `Features for fwabd0:
rx-checksumming: on
tx-checksumming: off
	tx-checksum-ip-generic: off
tcp-segmentation-offload: off
generic-receive-offload: on
large-receive-offload: off [fixed]
`
	want := emu.Offloads{RXCSUM: true, LRO: true}
	if diff := cmp.Diff(want, parseEthtoolFeatures(out)); diff != "" {
		t.Errorf("parseEthtoolFeatures (-want +got):\n%s", diff)
	}
}

func TestCheckToolsNamesMissingAndAptLine(t *testing.T) {
	have := map[string]bool{"ip": true, "tc": true, "ethtool": true, "iperf3": true, "swanctl": true}
	err := checkTools(func(bin string) bool { return have[bin] })
	if err == nil {
		t.Fatal("checkTools with nft and charon-systemd missing = nil, want an error")
	}
	want := "the lab needs nft, charon-systemd; install with: apt-get install -y nftables charon-systemd (or run scripts/setup.sh)"
	if err.Error() != want {
		t.Errorf("checkTools = %q, want %q", err, want)
	}
	if err := checkTools(func(string) bool { return true }); err != nil {
		t.Errorf("checkTools with everything present = %v", err)
	}
}
