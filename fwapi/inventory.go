package fwapi

import (
	"bufio"
	"context"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/fwab/fwab/configxml"
)

// Inventory is what ran on the box during a run: its software packages,
// CPU and links. A sweep records it with the run, so that two runs can be
// told apart by more than their knobs.
type Inventory struct {
	CPUModel string         `json:"cpu_model"`
	Cores    int            `json:"cores"`
	Packages []Package      `json:"packages"`
	NICs     []NICInventory `json:"nics"`
	// AESNI says whether the CPU has the AES-NI instructions (its
	// Features2 line in /var/run/dmesg.boot); nil when the box does not
	// say.
	AESNI *bool `json:"aesni,omitempty"`
	// CryptoModules are the accelerator modules crypto.hardware knows on
	// the product, with whether the kernel has each (kldstat -m).
	CryptoModules map[string]bool `json:"crypto_modules,omitempty"`
}

// Package is one installed package as `pkg info` lists it.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// NICInventory is one physical interface: its driver and the media it
// negotiated.
type NICInventory struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	Media  string `json:"media"` // ifconfig's media in parentheses: "1000baseT <full-duplex>"
	// Best is the fastest media the NIC lists (ifconfig -m), "" when it
	// lists none with a rate.
	Best string `json:"best_media,omitempty"`
}

// BelowBest reports whether the link negotiated a slower media than the
// best its NIC lists: a cable, a switch port or a forced setting is then
// what bounds the throughput.
func (n NICInventory) BelowBest() bool {
	sub, _, _ := strings.Cut(n.Media, " ")
	got, best := mediaSpeed(sub), mediaSpeed(n.Best)
	return got > 0 && best > got
}

// FullDuplex reports whether the link negotiated full duplex. A link with
// no media reading is not reported as half.
func (n NICInventory) FullDuplex() bool {
	return n.Media == "" || strings.Contains(n.Media, "full-duplex")
}

// LinkWarnings names every link that is not full duplex (such a link
// halves what the box can forward, whatever the knobs) or that negotiated
// below the best media its NIC lists.
func (inv Inventory) LinkWarnings() []string {
	var out []string
	for _, n := range inv.NICs {
		if !n.FullDuplex() {
			out = append(out, fmt.Sprintf("%s (%s) negotiated %q, not full duplex: its throughput is not the box's", n.Name, n.Driver, n.Media))
		}
		if n.BelowBest() {
			out = append(out, fmt.Sprintf("%s (%s) negotiated %q, below the %s its NIC lists: the link, not the box, may bound the throughput", n.Name, n.Driver, n.Media, n.Best))
		}
	}
	return out
}

// inventoryCmds are the commands an inventory runs, in order.
const (
	inventoryCPUCmd = "sysctl -n hw.model hw.ncpu"
	inventoryPkgCmd = "pkg info"
	// -m adds each NIC's supported media, for BelowBest.
	inventoryIfconfigCmd = "ifconfig -a -m"
	// inventoryAESNICmd prints yes or no, or nothing without dmesg.boot.
	// upstream: not settled — FreeBSD's boot messages name the CPU's features (`Features2=…<…AESNI…>`), not in the upstream copy; checked at run time: no dmesg.boot leaves AESNI unknown
	inventoryAESNICmd = "if [ -r /var/run/dmesg.boot ]; then if grep -q 'Features2=.*AESNI' /var/run/dmesg.boot; then echo yes; else echo no; fi; fi"
)

// readInventory runs the inventory's commands through run (a driver's
// shell) and parses their answers.
func readInventory(ctx context.Context, f configxml.Flavor, run func(context.Context, string) (string, error)) (Inventory, error) {
	var inv Inventory
	out, err := run(ctx, inventoryCPUCmd)
	if err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if inv.CPUModel, inv.Cores, err = parseCPU(out); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if out, err = run(ctx, inventoryPkgCmd); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if inv.Packages, err = ParsePkgInfo(out); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if out, err = run(ctx, inventoryIfconfigCmd); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	ifs, err := ParseIfconfig(out)
	if err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if out, err = run(ctx, inventoryAESNICmd); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if a := strings.TrimSpace(out); a == "yes" || a == "no" {
		has := a == "yes"
		inv.AESNI = &has
	}
	if out, err = run(ctx, cryptoModulesCmd(f)); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	if inv.CryptoModules, err = ParseCryptoModules(f, out); err != nil {
		return inv, fmt.Errorf("inventory: %w", err)
	}
	for _, i := range ifs {
		if IsNIC(i.Name) {
			inv.NICs = append(inv.NICs, NICInventory{Name: i.Name, Driver: strings.TrimRightFunc(i.Name, unicode.IsDigit), Media: i.Media, Best: BestMedia(i.Supported)})
		}
	}
	return inv, nil
}

// parseCPU reads `sysctl -n hw.model hw.ncpu`: the model line, then the
// core count.
//
// upstream: not settled — hw.model and hw.ncpu are FreeBSD's sysctls (not in the upstream copy); checked at run time by parseCPU, which refuses an answer that is not a model line and a positive count
func parseCPU(out string) (string, int, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 2 {
		return "", 0, fmt.Errorf("%s: want 2 lines (model, cores), got %q", inventoryCPUCmd, out)
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n <= 0 || strings.TrimSpace(lines[0]) == "" {
		return "", 0, fmt.Errorf("%s: %q is not a CPU model and a core count", inventoryCPUCmd, out)
	}
	return strings.TrimSpace(lines[0]), n, nil
}

// ParsePkgInfo reads `pkg info`: one package a line, NAME-VERSION then its
// comment; the version is what follows the last hyphen of the first word.
//
// upstream: not settled — `pkg info`'s line format is FreeBSD pkg's (not in the upstream copy); checked at run time by ParsePkgInfo, which refuses a line whose first word has no NAME-VERSION hyphen
func ParsePkgInfo(out string) ([]Package, error) {
	var pkgs []Package
	sc := bufio.NewScanner(strings.NewReader(out))
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		i := strings.LastIndexByte(f[0], '-')
		if i <= 0 || i == len(f[0])-1 {
			return nil, fmt.Errorf("pkg info line %d: %q does not start with NAME-VERSION", line, sc.Text())
		}
		pkgs = append(pkgs, Package{Name: f[0][:i], Version: f[0][i+1:]})
	}
	return pkgs, sc.Err()
}

// Inventory reads the packages, CPU and links over SSH.
func (p *PfSense) Inventory(ctx context.Context) (Inventory, error) {
	return readInventory(ctx, configxml.PfSense, p.output)
}

// Inventory reads the packages, CPU and links over SSH; without SSH there
// is no inventory.
func (o *OPNsense) Inventory(ctx context.Context) (Inventory, error) {
	if o.ssh == nil {
		return Inventory{}, fmt.Errorf("inventory: the target has no ssh section; OPNsense's API alone does not list the hardware")
	}
	return readInventory(ctx, configxml.OPNsense, func(ctx context.Context, cmd string) (string, error) {
		out, err := o.shell(ctx, cmd, nil)
		return string(out), err
	})
}
