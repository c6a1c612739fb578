package emu

// BackgroundProcesses counts the emulator's background processes (the
// products' mwexec_bg), for the external tests.
func (e *Emulator) BackgroundProcesses() int { return len(e.procs.list()) }
