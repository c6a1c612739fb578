//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives path the owner and group of the file st describes. Only
// root may give a file away; for anyone else the new file is already theirs
// and a file they do not own could not have been replaced anyway, so a
// refusal (EPERM) is not an error.
func keepOwner(path string, st fs.FileInfo) error {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if err := os.Chown(path, int(sys.Uid), int(sys.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}
