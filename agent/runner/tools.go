package runner

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// VersionTimeout bounds each tool's version command in DetectTools.
const VersionTimeout = 3 * time.Second

// versionCommands are the commands that print each tool's version, in
// ToolInfo order.
var versionCommands = []struct {
	tool measurev1.Tool
	cmd  proc.Command
}{
	{measurev1.Tool_TOOL_PING, proc.Command{Name: "ping", Args: []string{"-V"}}},
	{measurev1.Tool_TOOL_QPERF, proc.Command{Name: "qperf", Args: []string{"--version"}}},
	{measurev1.Tool_TOOL_IPERF3, proc.Command{Name: "iperf3", Args: []string{"--version"}}},
	{measurev1.Tool_TOOL_CURL, proc.Command{Name: "curl", Args: []string{"--version"}}},
	{measurev1.Tool_TOOL_AB, proc.Command{Name: "ab", Args: []string{"-V"}}},
}

// DetectTools runs each tool's version command (`ping -V`, `qperf
// --version`, `iperf3 --version`, `curl --version`, `ab -V`) in the agent's
// own namespace, each bounded by VersionTimeout, and returns one ToolInfo
// per tool in the order ping, qperf, iperf3, curl, ab. Version is the
// first line the tool printed, cut before " (": "ping from iputils
// 20221126", "qperf 0.4.11", "iperf 3.12", "curl 7.88.1"; for ab
// "ApacheBench 2.3" (from "This is ApacheBench, Version 2.3 <$Revision$>"). A tool that is not installed has
// Error "not found in PATH"; one whose version command fails has the
// failure in Error and an empty Version.
func DetectTools(ctx context.Context) []*measurev1.ToolInfo {
	return detectTools(ctx, func(name string) string { return name })
}

// detectTools is DetectTools with each program's name mapped by path
// (Runner.toolPath).
func detectTools(ctx context.Context, path func(string) string) []*measurev1.ToolInfo {
	infos := make([]*measurev1.ToolInfo, 0, len(versionCommands))
	for _, vc := range versionCommands {
		cmd := vc.cmd
		cmd.Name = path(cmd.Name)
		infos = append(infos, detect(ctx, vc.tool, cmd))
	}
	return infos
}

// toolPath is the program proc runs for a tool's name: DIR/NAME when
// Config.ToolDir is set and holds an executable file of that name, else
// name (looked up in PATH).
func (r *Runner) toolPath(name string) string {
	if r.toolDir == "" || strings.ContainsRune(name, '/') {
		return name
	}
	p := filepath.Join(r.toolDir, name)
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
		return p
	}
	return name
}

func detect(ctx context.Context, tool measurev1.Tool, cmd proc.Command) *measurev1.ToolInfo {
	info := &measurev1.ToolInfo{Tool: tool}
	ctx, cancel := context.WithTimeout(ctx, VersionTimeout)
	defer cancel()
	out, err := proc.Run(ctx, cmd)
	if errors.Is(err, proc.ErrNotFound) {
		info.Error = proc.ErrNotFound.Error()
		return info
	}
	if err != nil {
		info.Error = oneLine(cmd.String() + ": " + err.Error())
		return info
	}
	if v := versionLine(out.Stdout); v != "" {
		info.Version = v
		if tool == measurev1.Tool_TOOL_AB {
			info.Version = abVersion(v)
		}
		return info
	}
	if v := versionLine(out.Stderr); v != "" && out.ExitCode == 0 {
		info.Version = v
		return info
	}
	info.Error = oneLine(cmd.String() + ": exit " + strconv.Itoa(out.ExitCode) + ": " + tail(out.Stderr, 2))
	return info
}

// versionLine returns the first non-empty line of b, cut before " (".
func versionLine(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if i := strings.Index(line, " ("); i > 0 {
			line = line[:i]
		}
		return oneLine(line)
	}
	return ""
}
