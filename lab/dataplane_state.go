package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/emu"
)

// DataPlaneState is the part of the DUT's data plane that config.xml
// decides: the rules loaded in nftables (by their fwab:… keys, in order,
// and the blocklist sets), each DUT veth's offloads, and the inspection
// engines that run (mode → veths).
type DataPlaneState struct {
	Rules    []string
	Sets     []string
	Offloads map[string]emu.Offloads
	IDS      map[string][]string
}

// ExpectedDataPlane renders the data plane a boot from config would
// build: what `Boot` applies, read back the way LiveDataPlane reads it.
func ExpectedDataPlane(config []byte, ports emu.Ports) (DataPlaneState, error) {
	c, err := configxml.LoadBytes(config)
	if err != nil {
		return DataPlaneState{}, fmt.Errorf("parse config.xml: %w", err)
	}
	rs, err := emu.BuildRuleset(c, emu.RulesetOptions{Ports: ports, Blocklist: emu.BlocklistEnabled(c)})
	if err != nil {
		return DataPlaneState{}, err
	}
	offloads := func(dev string) emu.Offloads {
		o := emu.OffloadsFor(c, dev)
		o.TSO = o.TSO && o.TXCSUM // the kernel needs tx checksumming for TSO
		return o
	}
	plan, err := emu.PlanIDS(c, ports)
	if err != nil {
		return DataPlaneState{}, err
	}
	st := DataPlaneState{
		Rules:    emu.RuleKeys(rs.Script),
		Sets:     emu.SetNames(rs.Script),
		Offloads: map[string]emu.Offloads{ports.LanVeth: offloads(ports.LanDev), ports.WanVeth: offloads(ports.WanDev)},
		IDS:      map[string][]string{},
	}
	for m, devs := range plan {
		for _, d := range devs {
			v, _ := ports.Veth(d)
			st.IDS[m] = append(st.IDS[m], v)
		}
		slices.Sort(st.IDS[m])
	}
	return st, nil
}

// LiveDataPlane reads the running data plane of the lab in dir: nftables
// and ethtool in the DUT namespace, and the inspection engine processes
// (from /proc, not from the emulator's own bookkeeping).
func LiveDataPlane(ctx context.Context, dir string) (DataPlaneState, error) {
	st, err := readState(dir)
	if err != nil {
		return DataPlaneState{}, fmt.Errorf("no lab in %s: %w", dir, err)
	}
	topo := st.topology()
	ports := topo.Ports()
	dp := &LinuxDataPlane{Topo: topo}
	listing, err := dp.Listing(ctx)
	if err != nil {
		return DataPlaneState{}, err
	}
	live := DataPlaneState{Rules: emu.RuleKeys(listing), Sets: emu.SetNames(listing), Offloads: map[string]emu.Offloads{}}
	for _, v := range []string{ports.LanVeth, ports.WanVeth} {
		if live.Offloads[v], err = dp.Offloads(ctx, v); err != nil {
			return DataPlaneState{}, err
		}
	}
	if live.IDS, err = inspectionEngines(filepath.Join(dir, "ids")); err != nil {
		return DataPlaneState{}, err
	}
	return live, nil
}

// inspectionEngines finds the `fwab lab inspect` processes whose status file
// is in idsDir: mode → veths.
func inspectionEngines(idsDir string) (map[string][]string, error) {
	out := map[string][]string{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		// `ip netns exec NS fwab lab inspect …` execs the engine, so its
		// command line starts with the fwab binary.
		if len(args) < 3 || args[1] != "lab" || args[2] != "inspect" {
			continue
		}
		i := 2
		var mode, status string
		var ifaces []string
		for j := i + 1; j+1 < len(args); j++ {
			switch args[j] {
			case "--mode":
				mode = args[j+1]
			case "--status":
				status = args[j+1]
			case "--iface":
				ifaces = append(ifaces, args[j+1])
			}
		}
		if filepath.Dir(status) != idsDir {
			continue
		}
		knob := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(status), "suricata-"), ".json")
		if mode == "" || knob == "" {
			continue
		}
		out[knob] = append(out[knob], ifaces...)
		slices.Sort(out[knob])
	}
	return out, nil
}

// CheckDataPlane compares the running data plane of the lab in dir with
// the one config renders to; the error lists every difference.
func CheckDataPlane(ctx context.Context, dir string, config []byte) error {
	st, err := readState(dir)
	if err != nil {
		return fmt.Errorf("no lab in %s: %w", dir, err)
	}
	want, err := ExpectedDataPlane(config, st.topology().Ports())
	if err != nil {
		return err
	}
	got, err := LiveDataPlane(ctx, dir)
	if err != nil {
		return err
	}
	if diff := cmp.Diff(want, got); diff != "" {
		return fmt.Errorf("the running data plane differs from the one config.xml renders (-want +got):\n%s", diff)
	}
	return nil
}
