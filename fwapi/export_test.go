package fwapi

// PfPackagesHookScript is the packages hook's text, for the tests that run
// it on the emulator.
var PfPackagesHookScript = pfPackagesHookScript

// OPNsenseStartedHookScript is OPNsense's start hook's text.
var OPNsenseStartedHookScript = opnStartedHookScript
