package lab

import (
	"fmt"

	"github.com/fwab/fwab/emu"
)

// SetFault switches the lab's faults to f (the zero Fault clears them).
// The daemon picks the change up within a tenth of a second.
func SetFault(dir string, f emu.Fault) error {
	if !isLabDir(dir) {
		return fmt.Errorf("no lab in %s (run 'fwab lab up')", dir)
	}
	return emu.WriteFault(dir, f)
}
