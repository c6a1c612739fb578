package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/fwab/fwab/fwapi"
)

// testbedOf names the box a run measures: the target's name, "@", and 12
// hex digits of a hash of its hardware: CPU model and cores, each NIC with
// its driver, and the endpoint hosts traffic runs between. Software
// (firmware, packages) is left out, so a firmware before/after stays on
// one testbed; so is negotiated media, which a cable can change. Without
// an inventory (OPNsense without SSH) the NIC names stand in.
func testbedOf(t *fwapi.Target, info fwapi.Info, inv *fwapi.Inventory) string {
	hw := struct {
		CPU       string   `json:"cpu"`
		Cores     int      `json:"cores"`
		NICs      []string `json:"nics"`
		Endpoints []string `json:"endpoints"`
	}{Endpoints: endpointHosts(t)}
	if inv != nil {
		hw.CPU, hw.Cores = inv.CPUModel, inv.Cores
		for _, n := range inv.NICs {
			hw.NICs = append(hw.NICs, n.Name+"="+n.Driver)
		}
	} else {
		hw.NICs = append(hw.NICs, info.NICs...)
	}
	slices.Sort(hw.NICs)
	b, _ := json.Marshal(hw)
	sum := sha256.Sum256(b)
	return t.Name + "@" + hex.EncodeToString(sum[:6])
}

// endpointHosts are where the target's traffic runs from and to: its
// first link's client and server, then each further link's by name.
func endpointHosts(t *fwapi.Target) []string {
	var out []string
	eps := []fwapi.Endpoint{t.Endpoints.Client, t.Endpoints.Server}
	for _, n := range t.Endpoints.LinkNames()[1:] {
		l := t.Endpoints.Links[n]
		eps = append(eps, l.Client, l.Server)
	}
	for _, e := range eps {
		h := e.Addr
		switch {
		case e.SSH != nil:
			h += " ssh " + e.SSH.Host
		case e.Netns != "":
			h += " netns " + e.Netns
		}
		out = append(out, h)
	}
	return out
}

// stateDir is a target's local state folder (journal, original config):
// its name and 8 hex digits of where the box is (firewall host, SSH port,
// API URL, endpoint hosts), so that two targets files that both call
// different boxes "lab" keep apart. It is known from the targets file
// alone, as `fw recover` needs it before the box answers. A folder of the
// bare name that an fwab before testbeds left is used while it is there.
func stateDir(t *fwapi.Target) (string, error) {
	legacy, err := fwapi.StateDir(t.Name)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(legacy); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return legacy, nil
	}
	where := []string{t.Host}
	if t.SSH != nil {
		where = append(where, "ssh "+strconv.Itoa(t.SSH.Port))
	}
	if t.API != nil {
		where = append(where, "api "+t.API.URL)
	}
	where = append(where, endpointHosts(t)...)
	sum := sha256.Sum256([]byte(strings.Join(where, "\n")))
	return fwapi.StateDir(t.Name + "-" + hex.EncodeToString(sum[:4]))
}
