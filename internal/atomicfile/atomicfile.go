// Package atomicfile writes local files so that a reader, or the file system
// after a crash, sees either the old content or the new, never a part.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFile writes data to the file name with permissions perm (exactly perm:
// the umask does not apply). It writes a temporary file in the same
// directory, syncs it, sets its mode, renames it over name and syncs the
// directory. On an error before the rename the temporary file is removed
// and name is left as it was; an error syncing the directory comes after
// the rename, when name already holds data but may not survive a crash.
//
// If name is a symbolic link, the file it points to is replaced and the link
// stays; a link to a missing file is an error. The directory must exist.
func WriteFile(name string, data []byte, perm fs.FileMode) error {
	return WriteFileFrom(name, perm, bytesOf(data))
}

// WriteFileFrom is WriteFile for content that fill writes: a large
// document streamed to the file instead of being built in memory first.
// An error from fill leaves name as it was.
func WriteFileFrom(name string, perm fs.FileMode, fill func(io.Writer) error) error {
	target, err := resolve(name)
	if err != nil {
		return err
	}
	return write(target, fill, perm)
}

func bytesOf(data []byte) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}
}

// WriteFileKeepMode is WriteFile, except that when name (or the file it links
// to) already exists its permissions and, where the caller may set it
// (root), its owner are kept; perm applies only to a new file.
func WriteFileKeepMode(name string, data []byte, perm fs.FileMode) error {
	return WriteFileKeepModeFrom(name, perm, bytesOf(data))
}

// WriteFileKeepModeFrom is WriteFileKeepMode for content that fill writes
// (see WriteFileFrom).
func WriteFileKeepModeFrom(name string, perm fs.FileMode, fill func(io.Writer) error) error {
	target, err := resolve(name)
	if err != nil {
		return err
	}
	st, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return write(target, fill, perm)
	case err != nil:
		return err
	}
	tmp, err := writeTemp(target, fill, st.Mode().Perm())
	if err != nil {
		return err
	}
	if err := keepOwner(tmp, st); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, target); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(target))
}

// WriteNew writes data to name only if name does not exist yet, atomically:
// a reader sees no file or the whole one, and an existing file is never
// replaced (the error then wraps fs.ErrExist).
func WriteNew(name string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(name, bytesOf(data), perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	// link(2) fails when name exists, where rename(2) would replace it.
	if err := os.Link(tmp, name); err != nil {
		return err
	}
	return syncDir(filepath.Dir(name))
}

// resolve returns the path that a write to name must replace: name itself,
// or the end of the chain of links that starts at name.
func resolve(name string) (string, error) {
	st, err := os.Lstat(name)
	if err != nil || st.Mode()&fs.ModeSymlink == 0 {
		return name, nil
	}
	target, err := filepath.EvalSymlinks(name)
	if err != nil {
		return "", fmt.Errorf("write %s through its link: %w", name, err)
	}
	return target, nil
}

func write(name string, fill func(io.Writer) error, perm fs.FileMode) error {
	tmp, err := writeTemp(name, fill, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(name))
}

// writeTemp writes what fill writes, with mode perm, to a new file beside
// name, syncs it and returns its path; on error it leaves nothing behind.
func writeTemp(name string, fill func(io.Writer) error, perm fs.FileMode) (path string, err error) {
	f, err := os.CreateTemp(filepath.Dir(name), "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		// Name the file asked for, not the temporary one.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", &fs.PathError{Op: "write", Path: name, Err: err}
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = fill(f); err != nil {
		return "", err
	}
	if err = f.Chmod(perm); err != nil {
		return "", err
	}
	if err = f.Sync(); err != nil {
		return "", err
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return d.Close()
}
