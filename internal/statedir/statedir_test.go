package statedir

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestEnsureAndCheckFile(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(filepath.Join(root, "dir"), 0o700))
	must(os.Symlink(filepath.Join(root, "dir"), filepath.Join(root, "link")))
	must(os.WriteFile(filepath.Join(root, "file"), []byte("x"), 0o600))
	must(os.Symlink(filepath.Join(root, "file"), filepath.Join(root, "filelink")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))

	dirs := []struct {
		name, wantErr string
	}{
		{"dir", ""},
		{"new/sub", ""}, // created
		{"link", "a symbolic link, not a directory"},
		{"file", "not a directory"},
	}
	for _, tt := range dirs {
		err := Ensure(filepath.Join(root, tt.name))
		if got := errString(err); tt.wantErr == "" && err != nil || !strings.Contains(got, tt.wantErr) {
			t.Errorf("Ensure(%s) = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
	if fi, err := os.Lstat(filepath.Join(root, "new/sub")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("created directory: %v, %v; want mode 0700", fi, err)
	}
	files := []struct {
		name, wantErr string
	}{
		{"file", ""},
		{"missing", ""},
		{"filelink", "a symbolic link, not a regular file"},
		{"fifo", "a FIFO, not a regular file"},
		{"dir", "a directory, not a regular file"},
	}
	for _, tt := range files {
		err := CheckFile(filepath.Join(root, tt.name))
		if got := errString(err); tt.wantErr == "" && err != nil || !strings.Contains(got, tt.wantErr) {
			t.Errorf("CheckFile(%s) = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
