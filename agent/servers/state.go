package servers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/google/renameio/v2"

	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/internal/procstat"
	"github.com/meshperf/meshperf/internal/statedir"
	"github.com/meshperf/meshperf/internal/testspec"
)

// StateFile is the name of the state file in Config.StateDir.
const StateFile = "servers.json"

// stateVersion is the format of the state file; a file of another version
// is ignored.
const stateVersion = 1

// record is a running server as the state file keeps it: enough to find
// its process after the agent died, and to tell that process from another
// that reused its PID.
type record struct {
	// WorkID is the work ID (RUN_ID/TEST_ID) of the start_server the
	// server was started for (for logs); "test_id" in the file, as the
	// first agents wrote it.
	WorkID string `json:"test_id"`
	// PID is the server's process ID, also its process group ID.
	PID int `json:"pid"`
	// StartTime is field 22 of /proc/PID/stat: when the process started,
	// in clock ticks since boot. With the PID it names one process.
	StartTime uint64 `json:"start_time"`
	// Tool is the server's program: "iperf3" or "qperf".
	Tool string `json:"tool"`
	// Port is its listen port.
	Port uint32 `json:"port"`
	// Network is the measurev1.Network it serves (for logs).
	Network string `json:"network"`
	// NetNS is the target of /proc/PID/ns/net, "net:[INODE]": the
	// namespace the process runs in; "" if it could not be read.
	NetNS string `json:"netns,omitempty"`
}

// state is the state file's content.
type state struct {
	Version int      `json:"version"`
	Servers []record `json:"servers"`
}

// check reports what makes r unusable, or nil.
func (r record) check() error {
	switch {
	case r.PID <= 1:
		return fmt.Errorf("PID %d", r.PID)
	case r.StartTime == 0:
		return errors.New("no start time")
	case r.Tool != "iperf3" && r.Tool != "qperf":
		return fmt.Errorf("tool %q has no server", r.Tool)
	case r.Port == 0 || r.Port > 65535:
		return fmt.Errorf("port %d", r.Port)
	}
	return nil
}

// maxStateBytes bounds the state file: a record is about 200 bytes, and
// an agent runs a few servers at once.
const maxStateBytes = 1 << 20

// readState reads the state file at path. The error wraps fs.ErrNotExist
// when there is none. Only a regular file is read (a link, a FIFO or a
// device is refused without blocking), and at most maxStateBytes of it.
func readState(path string) ([]record, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%v)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxStateBytes {
		return nil, fmt.Errorf("more than %d bytes", maxStateBytes)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%d bytes: %w", len(b), err)
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("format version %d, want %d", st.Version, stateVersion)
	}
	return st.Servers, nil
}

// writeState replaces the state file in dir with recs, atomically: a
// temporary file renamed over it, so a reader (the agent's next life) sees
// the old content or the new, never a part (renameio, which also syncs
// the file before the rename). No recs removes the file.
func writeState(dir string, recs []record) error {
	path := filepath.Join(dir, StateFile)
	if len(recs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	b, err := json.MarshalIndent(state{Version: stateVersion, Servers: recs}, "", "  ")
	if err != nil {
		return err
	}
	return renameio.WriteFile(path, append(b, '\n'), 0o600, renameio.WithTempDir(dir))
}

// lockDir creates dir (mode 0700) if needed, opens it and takes an
// exclusive flock on it without waiting: one live agent owns a state
// directory, and the kernel releases the lock when that agent dies, however
// it dies. errLocked means another process (or another Manager) holds it.
func lockDir(dir string) (*os.File, error) {
	if err := statedir.Ensure(dir); err != nil {
		return nil, err
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return f, nil
}

var errLocked = errors.New("locked by another live agent")

// procInfo is what Reclaim reads of a process in /proc: its stat, its
// command line and its network namespace.
type procInfo struct {
	procstat.Stat
	argv  []string
	netns string
}

// readProc reads pid's stat, cmdline and network namespace. The error
// wraps fs.ErrNotExist when there is no such process.
func readProc(pid int) (procInfo, error) {
	st, err := procstat.Read(pid)
	if err != nil {
		return procInfo{}, err
	}
	dir := "/proc/" + strconv.Itoa(pid)
	p := procInfo{Stat: st}
	if b, err := os.ReadFile(dir + "/cmdline"); err == nil && len(b) > 0 {
		p.argv = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	p.netns, _ = os.Readlink(dir + "/ns/net") // a zombie has none
	return p, nil
}

// serves reports whether p's command line is the server of tool (its
// program name, "iperf3" or "qperf") on port, as runner.ServerCommand
// writes it (runner.ServerPort).
func (p procInfo) serves(tool string, port uint32) bool {
	t, got, ok := runner.ServerPort(p.argv)
	return ok && testspec.ToolProgram(t) == tool && got == port
}

// sameAs reports whether p is still the process q was read from: same PID
// and start time, and not exited.
func (p procInfo) sameAs(q procInfo) bool {
	return p.PID == q.PID && p.StartTime == q.StartTime && p.Alive()
}

// procPIDs lists the numeric entries of /proc.
func procPIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	pids := make([]int, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}
