package emu

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/fwab/fwab/configxml"
)

// The products' GUI offload apply, as fwab runs it: the GUI's own PHP
// function over the interfaces it walks, with those fwab leaves alone
// (the ones its session runs over) named in an array literal. Only the
// capability flags change: no address, route or session is touched.
//
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:736 — setup_microcode: `enable_hardware_offloading($if)` for each key of `get_configured_interface_list(true)`
// upstream: pfsense 2.7.2 src/etc/inc/pfsense-utils.inc:647 — `get_parent_interface($interface)`: the flags go to the parent first, then the interface
// upstream: opnsense-core 24.7 src/etc/inc/interfaces.inc:660 — interfaces_hardware: `configure_interface_hardware($device, $intf_details)` for each device of `get_interface_list()`, the unassigned NICs included (25.7: 683)
var (
	pfOffloadPHP  = regexp.MustCompile(`^require_once\("config\.inc"\); require_once\("functions\.inc"\); foreach \(array_keys\(get_configured_interface_list\(true\)\) as \$if\) \{ if \(!in_array\(\$if, array\(([^()]*)\)\)\) \{ enable_hardware_offloading\(\$if\); \} \}$`)
	opnOffloadPHP = regexp.MustCompile(`^require_once\("config\.inc"\); require_once\("interfaces\.inc"\); \$details = legacy_interfaces_details\(\); foreach \(array_keys\(get_interface_list\(\)\) as \$dev\) \{ if \(!in_array\(\$dev, array\(([^()]*)\)\)\) \{ configure_interface_hardware\(\$dev, \$details\); \} \}$`)
	phpStrings    = regexp.MustCompile(`^(?:"[A-Za-z0-9_.]+"(?:, "[A-Za-z0-9_.]+")*)?$`)
)

// phpArrayNames are the names of a PHP array literal's contents
// (`"wan", "lan"`); ok is false for anything else.
func phpArrayNames(list string) (names []string, ok bool) {
	if !phpStrings.MatchString(list) {
		return nil, false
	}
	for _, q := range strings.Split(list, ", ") {
		if q != "" {
			names = append(names, strings.Trim(q, `"`))
		}
	}
	return names, true
}

// offloadPHP runs the GUI offload apply code, or reports that code is not
// it.
func (e *Emulator) offloadPHP(ctx context.Context, code string) (handled bool, err error) {
	re := pfOffloadPHP
	if e.opnsense() {
		re = opnOffloadPHP
	}
	m := re.FindStringSubmatch(code)
	if m == nil {
		return false, nil
	}
	skip, ok := phpArrayNames(m[1])
	if !ok {
		return false, nil
	}
	if e.opnsense() && e.atLeast(26, 1) {
		// upstream: opnsense-core 26.1 src/etc/inc/interfaces.inc:576 — `function _interfaces_hardware(`: 26.1 renamed it, so the 25.7 code dies
		return true, errors.New("PHP Fatal error:  Uncaught Error: Call to undefined function configure_interface_hardware()")
	}
	e.did(configxml.ActionInterfaces)
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return true, err
	}
	var devs []string
	if e.opnsense() {
		for _, in := range e.fbIfaces() {
			if !slices.Contains(skip, in.dev) {
				devs = append(devs, in.dev)
			}
		}
	} else {
		for _, i := range root.Interfaces() {
			if i.Device == "" || slices.Contains(skip, i.Key) {
				continue
			}
			if under := root.UnderneathDevices(i.Device); len(under) > 0 && !slices.Contains(devs, under[0]) {
				devs = append(devs, under[0])
			}
			if !slices.Contains(devs, i.Device) {
				devs = append(devs, i.Device)
			}
		}
	}
	if err := e.applyOffloadsTo(ctx, root, devs); err != nil {
		return true, err
	}
	return true, e.applySlowdown(ctx)
}
