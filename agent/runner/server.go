package runner

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrNoServer means a tool has no server to start (ping, curl, unknown).
var ErrNoServer = errors.New("tool has no server")

// ErrBadPort means a port is 0 or above 65535.
var ErrBadPort = errors.New("bad port")

// Iperf3IdleTimeout is the server's --idle-timeout: an iperf3 server that
// no client reached within it exits by itself (iperf3 3.12 with -1 exits
// rather than restarts; a running test is not cut).
const Iperf3IdleTimeout = 60 * time.Second

// ServerCommand returns the argv of the server for a test client of tool,
// to be started with proc.Start in the namespace at netns ("" = own) and
// stopped with Process.Stop:
//
//   - qperf: `qperf -lp PORT`. The server needs nothing for the data port:
//     qperf's client sends its -ip DATA_PORT in the request and the server
//     listens on it for that test. dataPort must be a port other than
//     port, to catch a caller that forgot it.
//   - iperf3: `iperf3 -s -p PORT -1 --idle-timeout 60`: one test, then it
//     exits; never -D. dataPort is ignored.
//
// Errors: ErrNoServer for other tools, ErrBadPort (wrapped) for a port
// outside 1..65535.
func ServerCommand(tool measurev1.Tool, port, dataPort uint32, netns string) (proc.Command, error) {
	if port == 0 || port > 65535 {
		return proc.Command{}, fmt.Errorf("%w: port %d", ErrBadPort, port)
	}
	switch tool {
	case measurev1.Tool_TOOL_QPERF:
		if dataPort == 0 || dataPort > 65535 || dataPort == port {
			return proc.Command{}, fmt.Errorf("%w: qperf data port %d (listen port %d)", ErrBadPort, dataPort, port)
		}
		return proc.Command{Name: "qperf", Args: []string{"-lp", strconv.FormatUint(uint64(port), 10)}, NetNS: netns}, nil
	case measurev1.Tool_TOOL_IPERF3:
		return proc.Command{Name: "iperf3", Args: []string{
			"-s", "-p", strconv.FormatUint(uint64(port), 10), "-1",
			"--idle-timeout", strconv.FormatInt(int64(Iperf3IdleTimeout/time.Second), 10),
		}, NetNS: netns}, nil
	}
	return proc.Command{}, fmt.Errorf("%w: %v", ErrNoServer, tool)
}

// ServerPort reads a process's argument vector back as ServerCommand
// writes it: an iperf3 server ("iperf3 ... -s ... -p PORT") or a qperf
// server ("qperf ... -lp PORT"), the program by its base name, whatever
// else the command carries. ok is false for any other command (an iperf3
// client too), or a port that is not 1..65535 in plain decimal.
func ServerPort(argv []string) (tool measurev1.Tool, port uint32, ok bool) {
	if len(argv) == 0 {
		return measurev1.Tool_TOOL_UNSPECIFIED, 0, false
	}
	var flag string
	switch filepath.Base(argv[0]) {
	case testspec.ToolProgram(measurev1.Tool_TOOL_IPERF3):
		if !slices.Contains(argv[1:], "-s") {
			return measurev1.Tool_TOOL_UNSPECIFIED, 0, false
		}
		tool, flag = measurev1.Tool_TOOL_IPERF3, "-p"
	case testspec.ToolProgram(measurev1.Tool_TOOL_QPERF):
		tool, flag = measurev1.Tool_TOOL_QPERF, "-lp"
	default:
		return measurev1.Tool_TOOL_UNSPECIFIED, 0, false
	}
	for i := 1; i+1 < len(argv); i++ {
		if argv[i] != flag {
			continue
		}
		n, err := strconv.ParseUint(argv[i+1], 10, 16)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != argv[i+1] {
			return measurev1.Tool_TOOL_UNSPECIFIED, 0, false
		}
		return tool, uint32(n), true
	}
	return measurev1.Tool_TOOL_UNSPECIFIED, 0, false
}
