// Package statedir owns the checks on the agent's state directory
// (--state-dir: its spool, its servers' records) before anything in it is
// opened: the directory, created 0700 if missing, must be a directory and
// no symbolic link, and a file in it, if it exists, a regular file and no
// link. Whoever could write the directory's parent could otherwise point
// the privileged agent's writes anywhere on the host, or hang its reads on
// a FIFO.
package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Ensure creates dir (mode 0700) if it does not exist and checks that it
// is a directory, not a symbolic link. The error names dir and what it is.
func Ensure(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory %q: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("state directory %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %q: a %s, not a directory", dir, kind(fi.Mode()))
	}
	return nil
}

// CheckFile checks that path, if it exists, is a regular file and not a
// symbolic link; a missing file is no error.
func CheckFile(path string) error {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("state file %q: %w", path, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("state file %q: a %s, not a regular file", path, kind(fi.Mode()))
	}
	return nil
}

// kind names a file mode's type.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsDir():
		return "directory"
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "file of mode " + m.String()
}
