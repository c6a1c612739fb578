package emu

import (
	"context"
	"maps"
	"math"
	"sync"
)

// RecordingDataPlane is a DataPlane that keeps what the emulator applies in
// memory instead of programming nftables, ethtool and tc, so the emulator
// runs without root or namespaces. Tests that need a firewall use it.
type RecordingDataPlane struct {
	mu       sync.Mutex
	script   string
	offloads map[string]Offloads
	shapes   map[string]float64
	resets   int
	measured int
	// up and down are what MeasureMbit reports per direction.
	up, down float64
}

// NewRecordingDataPlane returns a recording data plane whose measured
// goodput is 1000 Mbit/s up and 800 down.
func NewRecordingDataPlane() *RecordingDataPlane {
	return &RecordingDataPlane{offloads: map[string]Offloads{}, shapes: map[string]float64{}, up: 1000, down: 800}
}

// Script is the nftables script last loaded.
func (d *RecordingDataPlane) Script() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.script
}

func (d *RecordingDataPlane) LoadRuleset(_ context.Context, script string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.script = script
	return nil
}

func (d *RecordingDataPlane) Listing(context.Context) (string, error) {
	return d.Script(), nil
}

func (d *RecordingDataPlane) SetElements(_ context.Context, set string) ([]string, error) {
	return SetElementsOf(d.Script(), set), nil
}

func (d *RecordingDataPlane) SetOffloads(_ context.Context, veth string, o Offloads) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.offloads[veth] = o
	return nil
}

func (d *RecordingDataPlane) Offloads(_ context.Context, veth string) (Offloads, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.offloads[veth], nil
}

func (d *RecordingDataPlane) Link(_ context.Context, veth string) (VethState, error) {
	// No addresses: the emulator prints what config.xml gives each device.
	return VethState{MTU: 1500, MAC: "02:00:00:00:00:01", Up: true}, nil
}

func (d *RecordingDataPlane) Shape(_ context.Context, veth string, rate float64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shapes[veth] = rate
	return nil
}

func (d *RecordingDataPlane) Reset(context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.script = DownRuleset
	d.shapes = map[string]float64{}
	d.resets++
	return nil
}

func (d *RecordingDataPlane) StateCount(context.Context) (int, error) { return 7, nil }

// MeasureMbit reports the configured goodput, held to the lowest tbf rate
// set (as goodput at MTU 1500), as a real measurement is: one taken with a
// slowdown cap still on comes out at the cap, one on a shaped link at its
// line rate.
func (d *RecordingDataPlane) MeasureMbit(_ context.Context, reverse bool) (float64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.measured++
	v := d.up
	if reverse {
		v = d.down
	}
	for _, s := range d.shapes {
		if s != 0 {
			v = math.Min(v, s/WireFactor(1500))
		}
	}
	return v, nil
}

// Shapes returns the tbf rate last set per veth (0: unshaped).
func (d *RecordingDataPlane) Shapes() map[string]float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.shapes)
}
