package probe

import (
	"context"
	"errors"
	"math"
	"time"
)

// PowerMeter reads the power the DUT draws, in watts. A smart plug read
// over HTTP is a smartplug.Meter; a figure read off a meter by hand is a
// ManualPower.
type PowerMeter interface {
	Watts(ctx context.Context) (float64, error)
}

// PowerReading is one power meter value.
type PowerReading struct {
	Time  time.Time
	Watts float64
}

// ManualPower is a power figure read off a meter by hand.
type ManualPower float64

// Watts implements PowerMeter.
func (m ManualPower) Watts(context.Context) (float64, error) {
	if m < 0 || math.IsNaN(float64(m)) || math.IsInf(float64(m), 0) {
		return 0, errors.New("manual power figure must be a non-negative number of watts")
	}
	return float64(m), nil
}
