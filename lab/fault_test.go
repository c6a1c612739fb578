package lab

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fwab/fwab/emu"
)

func TestSetFaultNeedsALab(t *testing.T) {
	if err := SetFault(t.TempDir(), emu.Fault{}); err == nil {
		t.Errorf("SetFault accepted a folder with no lab")
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SetFault(dir, emu.Fault{Disk: "full"}); err == nil {
		t.Errorf("SetFault accepted disk fault %q", "full")
	}
	if err := SetFault(dir, emu.Fault{Disk: emu.DiskFull}); err != nil {
		t.Errorf("SetFault(%s, disk full): %v", dir, err)
	}
}
