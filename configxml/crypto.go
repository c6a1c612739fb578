package configxml

import (
	"fmt"
	"slices"
	"strings"

	"github.com/beevik/etree"
)

// The crypto.hardware knob is the Hacom article's "with and without the
// accelerator": <system><crypto_hardware> names the kernel modules the boot
// loads. Modules are loaded at boot and never unloaded, so the change takes
// effect with a reboot (ActionReboot).
//
// pfSense names one module or two joined with "_", and an empty element or
// none at all means no accelerator:
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:2024 — `$crypto_modules = array('aesni', 'cryptodev');` (2.6.0: line 1948; master: line 2043)
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:2026 — `explode('_', config_get_path('system/crypto_hardware'))`, each kldloaded unless loaded
// upstream: pfsense 2.7.2 src/usr/local/pfSense/include/www/system_advanced_misc.inc:158 — the GUI's choices: `'aesni_cryptodev'`, aesni, cryptodev (2.6.0: line 107)
// upstream: pfsense 2.7.2 src/usr/local/pfSense/include/www/system_advanced_misc.inc:338 — no choice removes the element: `config_del_path('system/crypto_hardware');`
// upstream: pfsense 2.7.2 src/etc/rc.bootup:183 — `load_crypto();` at boot
//
// OPNsense has AES-NI in its kernel and offers only the drivers of
// accelerator cards, joined with ",", each only where its module file
// exists on the box:
// upstream: opnsense/core@8215982 src/www/system_advanced_misc.php:38 — crypto_modules(): hifn, padlock, qat, safe, kept `if (file_exists("/boot/kernel/{$name}.ko"))` (the same list in 24.7, 25.7, 26.1)
// upstream: opnsense/core@8215982 src/etc/inc/system.inc:1074 — system_kernel_configure(): `explode(',', $config['system']['crypto_hardware'])`, each kldloaded at boot (rc.bootup:79)
// upstream: opnsense/core@db686a857b src/www/system_advanced_misc.php:1 — "system: aesni is now a kernel-builtin #5559" (2022)
// upstream: not settled — which modules a product's kernel has compiled in (aesni may be built into the pfSense kernel, so none would not remove it); checked at run time by fwapi.VerifyRuntime, which asks `kldstat -q -m` for every module the flavor knows

// CryptoNone is the crypto.hardware value for no accelerator.
const CryptoNone = "none"

// cryptoModules are the modules each flavor's crypto.hardware may name, and
// the separator its config joins them with.
var cryptoModules = map[Flavor]struct {
	modules []string
	sep     string
}{
	PfSense:  {[]string{"aesni", "cryptodev"}, "_"},
	OPNsense: {[]string{"hifn", "padlock", "qat", "safe"}, ","},
}

// CryptoModules lists the kernel modules crypto.hardware may load on a
// flavor: the ones whose presence verification checks.
func CryptoModules(f Flavor) []string { return slices.Clone(cryptoModules[f].modules) }

// CryptoValues lists the crypto.hardware values a flavor takes. pfSense's
// are its GUI's three choices and none; OPNsense's are none and each card
// driver (several join with ",", as "qat,safe").
func CryptoValues(f Flavor) []string {
	if f == PfSense {
		return []string{CryptoNone, "aesni", "cryptodev", "aesni_cryptodev"}
	}
	return append([]string{CryptoNone}, cryptoModules[f].modules...)
}

// CryptoLoads lists the modules a crypto.hardware value loads on a flavor.
func CryptoLoads(f Flavor, value string) []string {
	if value == CryptoNone || value == "" {
		return nil
	}
	var out []string
	for _, m := range strings.Split(value, cryptoModules[f].sep) {
		if m = strings.TrimSpace(m); slices.Contains(cryptoModules[f].modules, m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func getCrypto(c *Config, _ string) (string, error) {
	e := c.find("system/crypto_hardware")
	if e == nil || strings.TrimSpace(e.Text()) == "" {
		return CryptoNone, nil
	}
	return strings.TrimSpace(e.Text()), nil
}

func validateCrypto(c *Config, _, value string) error {
	if c.section("system") == nil {
		return fmt.Errorf("the config has no <system> element")
	}
	valid := CryptoValues(c.flavor)
	if c.flavor == PfSense {
		if !slices.Contains(valid, value) {
			return fmt.Errorf("invalid value %q; %s %s knows: %s", value, c.flavor, c.product.Version, strings.Join(valid, ", "))
		}
		return nil
	}
	if value == CryptoNone {
		return nil
	}
	for _, m := range strings.Split(value, ",") {
		if !slices.Contains(cryptoModules[c.flavor].modules, m) {
			hint := ""
			if m == "aesni" {
				hint = " (OPNsense has AES-NI in its kernel: it is always on)"
			}
			return fmt.Errorf("invalid value %q: no accelerator %q on %s%s; valid: none, or %s joined with \",\"",
				value, m, c.flavor, hint, strings.Join(cryptoModules[c.flavor].modules, ", "))
		}
	}
	return nil
}

func setCrypto(c *Config, _ string, value string) error {
	system := c.section("system")
	if system == nil {
		return fmt.Errorf("the config has no <system> element")
	}
	c.removeElements(system, func(e *etree.Element) bool { return e.Tag == "crypto_hardware" })
	if value != CryptoNone {
		c.insertChild(system, leaf("crypto_hardware", value), "")
	}
	return nil
}
