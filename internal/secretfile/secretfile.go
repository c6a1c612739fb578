// Package secretfile reads the files that hold fwab's secrets (SSH keys
// and passwords, API keys and secrets, IPsec pre-shared keys, database
// passwords) and refuses one that others may read, as ssh refuses such a
// private key.
package secretfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Check refuses a secret file that is missing, that its group or others
// may read, or that belongs to another user (unless fwab runs as root);
// the error names the file and what to run.
func Check(path string) error {
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist", path)
	}
	if err != nil {
		return err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s is readable by others (mode %04o): run chmod 600 '%s'", path, perm, strings.ReplaceAll(path, "'", `'\''`))
	}
	if uid, ok := owner(st); ok && uid != os.Getuid() && os.Getuid() != 0 {
		return fmt.Errorf("%s belongs to user %d, not to you (%d): copy it to a file of your own, mode 600", path, uid, os.Getuid())
	}
	return nil
}

// ReadLine checks the file (Check) and returns its content without the
// surrounding white space; an empty one is an error.
func ReadLine(path string) (string, error) {
	if err := Check(path); err != nil {
		return "", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return s, nil
}
