package servers_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/servers"
)

// TestReclaimRefusesOddStateFiles: a state file that is a FIFO (a read
// would block for ever), a symbolic link, or larger than any agent writes
// is refused with a log line, and Reclaim returns; a state directory that
// is a link is not used at all.
func TestReclaimRefusesOddStateFiles(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string) string // returns the state dir
		wantLog string
	}{
		{"fifo", func(t *testing.T, dir string) string {
			if err := syscall.Mkfifo(filepath.Join(dir, servers.StateFile), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "not a regular file"},
		{"link to a file", func(t *testing.T, dir string) string {
			other := filepath.Join(t.TempDir(), "other.json")
			if err := os.WriteFile(other, []byte(`{"version":1,"servers":[]}`), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(other, filepath.Join(dir, servers.StateFile)); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "too many levels of symbolic links"},
		{"huge", func(t *testing.T, dir string) string {
			if err := os.WriteFile(filepath.Join(dir, servers.StateFile), make([]byte, 2<<20), 0o600); err != nil {
				t.Fatal(err)
			}
			return dir
		}, "more than 1048576 bytes"},
		{"directory is a link", func(t *testing.T, dir string) string {
			link := filepath.Join(t.TempDir(), "state")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "a symbolic link, not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.prepare(t, t.TempDir())
			m, _, logs := newStateManager(t, dir, "")
			done := make(chan struct{})
			go func() { defer close(done); m.Reclaim(t.Context()) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				// A writer's open and close end the read it blocks in.
				if w, err := os.OpenFile(filepath.Join(dir, servers.StateFile), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
					_ = w.Close()
				}
				<-done
				t.Fatal("Reclaim blocked on the state file")
			}
			if !strings.Contains(logs.String(), tt.wantLog) {
				t.Errorf("log %q, want %q", logs.String(), tt.wantLog)
			}
		})
	}
}
