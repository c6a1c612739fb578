package fwapi

import (
	"fmt"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// cryptoModulesCmd asks the kernel, for every accelerator module the
// flavor's crypto.hardware knows, whether it has it, loaded from a file or
// compiled in: `kldstat -q -m NAME` exits 0 exactly then (kldstat(8)).
// Each module prints one "NAME yes|no" line.
func cryptoModulesCmd(f configxml.Flavor) string {
	var names []string
	for _, m := range configxml.CryptoModules(f) {
		names = append(names, ShellQuote(m))
	}
	return "for m in " + strings.Join(names, " ") + `; do if kldstat -q -m "$m"; then echo "$m yes"; else echo "$m no"; fi; done`
}

// ParseCryptoModules reads cryptoModulesCmd's answer: every module the
// flavor knows, true where the kernel has it.
func ParseCryptoModules(f configxml.Flavor, out string) (map[string]bool, error) {
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, state, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || (state != "yes" && state != "no") {
			return nil, fmt.Errorf("kldstat: unexpected line %q", line)
		}
		got[name] = state == "yes"
	}
	for _, m := range configxml.CryptoModules(f) {
		if _, ok := got[m]; !ok {
			return nil, fmt.Errorf("kldstat: no answer for module %s in %q", m, out)
		}
	}
	return got, nil
}
