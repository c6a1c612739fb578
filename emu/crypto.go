package emu

import (
	"context"
	"fmt"
	"os"
	"slices"

	"github.com/fwab/fwab/configxml"
)

// The crypto accelerator in the lab. The boot loads the modules
// <system><crypto_hardware> names, as the products do (pfSense's
// load_crypto() from rc.bootup, OPNsense's system_kernel_configure()), and
// nothing unloads them until the next boot; kldstat answers from that set.
// The accelerator is real where the lab can make it so: ESP runs in the
// DUT's charon (kernel-libipsec), and with aesni loaded charon's AES comes
// from strongSwan's aesni plugin (AES-NI instructions), without it from the
// software aes plugin (see charonLoad). 3DES and everything else come from
// openssl either way, so only AES changes, as only AES uses AES-NI.

// bootCryptoModules are the modules a boot with root loads. OPNsense's
// boot kldloads each named module and gets only those whose file exists;
// its kernel has aesni built in.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:2026 — `explode('_', config_get_path('system/crypto_hardware'))`
// upstream: opnsense/core@8215982 src/etc/inc/system.inc:1074 — `explode(',', $config['system']['crypto_hardware'])`, then `mwexecfm('/sbin/kldload %s', $mod)`
func (e *Emulator) bootCryptoModules(root *configxml.Config) []string {
	value, err := root.Get("crypto.hardware")
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range configxml.CryptoLoads(e.flavor(), value) {
		if e.opnsense() {
			if _, err := os.Stat(e.path("/boot/kernel/" + m + ".ko")); err != nil {
				e.logger().Warn("boot: kldload failed: no module file", "module", m)
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

// hasKernelModule reports whether the running kernel has a module, loaded
// at boot or compiled in (OPNsense's aesni).
func (e *Emulator) hasKernelModule(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hasKernelModuleLocked(name)
}

func (e *Emulator) hasKernelModuleLocked(name string) bool {
	return slices.Contains(e.kmods, name) || (e.opnsense() && name == "aesni")
}

// cmdKldstat is kldstat(8): the loaded files, or with -m NAME whether the
// kernel has that module (-q: exit status only).
func (e *Emulator) cmdKldstat(_ context.Context, c *call) error {
	args := c.args[1:]
	quiet := len(args) > 0 && args[0] == "-q"
	if quiet {
		args = args[1:]
	}
	switch {
	case len(args) == 0 && !quiet:
		fmt.Fprintln(c.stdout, "Id Refs Address                Size Name")
		fmt.Fprintln(c.stdout, " 1   40 0xffffffff80200000  1f4a1d8 kernel")
		e.mu.Lock()
		mods := slices.Clone(e.kmods)
		e.mu.Unlock()
		for i, m := range mods {
			fmt.Fprintf(c.stdout, "%2d    1 0xffffffff8%07x     %4x %s.ko\n", i+2, 0x2150000+i*0x10000, 0x5b58+i*0x100, m)
		}
		return nil
	case len(args) == 2 && args[0] == "-m":
		if !e.hasKernelModule(args[1]) {
			if !quiet {
				fmt.Fprintf(c.stderr, "kldstat: can't find module %s: No such file or directory\n", args[1])
			}
			return status(1)
		}
		if !quiet {
			fmt.Fprintln(c.stdout, "Id  Refs Name")
			fmt.Fprintf(c.stdout, "%3d    1 %s\n", 500, args[1])
		}
		return nil
	}
	return c.errorf(64, "kldstat: only kldstat, kldstat [-q] -m NAME are emulated")
}
