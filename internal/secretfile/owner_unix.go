//go:build unix

package secretfile

import (
	"io/fs"
	"syscall"
)

// fileOwner is the uid that owns the file.
func owner(st fs.FileInfo) (int, bool) {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid), true
	}
	return 0, false
}
