package probe

import "testing"

func TestManualPower(t *testing.T) {
	if w, err := ManualPower(35).Watts(t.Context()); err != nil || w != 35 {
		t.Errorf("ManualPower(35).Watts() = %v, %v", w, err)
	}
	if _, err := ManualPower(-1).Watts(t.Context()); err == nil {
		t.Errorf("ManualPower(-1).Watts() = nil error, want one")
	}
}
