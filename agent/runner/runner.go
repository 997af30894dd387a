package runner

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Config configures a Runner.
type Config struct {
	// NetNS maps a network to the path of its namespace (/proc/PID/ns/net or
	// /run/netns/NAME); "" means the agent's own namespace. A network that
	// is absent from the map is not available on this agent (a RunClient for
	// it is INVALID), except NETWORK_HOST, which defaults to the agent's own
	// namespace. New copies the map.
	NetNS map[measurev1.Network]string
	// Logger gets a debug record per tool run (argv, exit status, elapsed,
	// status); nil discards.
	Logger *slog.Logger
	// ToolDir, when not "", is a directory searched before PATH for the
	// tools' programs (ping, qperf, iperf3, curl), for their runs and for
	// their version commands: DIR/NAME is run by that path when it is an
	// executable file, else NAME is looked up in PATH. For agents whose
	// tools live outside PATH, and for tests that stand a script in for a
	// tool. The agent's own environment (PATH) is not changed.
	ToolDir string
}

// Runner runs test clients: it validates a RunClient, runs the tool in the
// right namespace and turns its output into results. It is safe for
// concurrent use; it does not limit concurrency (the coordinator decides
// what runs together).
type Runner struct {
	netns   map[measurev1.Network]string
	log     *slog.Logger
	toolDir string

	mu     sync.Mutex
	tools  map[measurev1.Tool]*measurev1.ToolInfo // nil until detected
	detect func(context.Context) []*measurev1.ToolInfo
	// exec runs a tool (proc.Run) and probe opens one TCP connection
	// (probeTCP); tests replace them.
	exec  func(context.Context, proc.Command) (proc.Output, error)
	probe func(ctx context.Context, netns, addr string) error
}

// New returns a Runner. It runs nothing: the tools are detected on the
// first call of Tools or Run (see Tools).
func New(cfg Config) *Runner {
	r := &Runner{
		netns:   make(map[measurev1.Network]string, len(cfg.NetNS)+1),
		log:     cfg.Logger,
		toolDir: cfg.ToolDir,
		exec:    proc.Run,
		probe:   probeTCP,
	}
	r.detect = func(ctx context.Context) []*measurev1.ToolInfo { return detectTools(ctx, r.toolPath) }
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.netns[measurev1.Network_NETWORK_HOST] = ""
	for n, path := range cfg.NetNS {
		r.netns[n] = path
	}
	return r
}

// Tools returns what DetectTools found, one ToolInfo per tool. The first
// call (of Tools or Run) detects, and the answer is kept for the Runner's
// life; a detection cut short by ctx is not kept. Callers get copies.
func (r *Runner) Tools(ctx context.Context) []*measurev1.ToolInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tools == nil {
		infos := r.detect(ctx)
		if ctx.Err() != nil {
			return infos
		}
		r.tools = make(map[measurev1.Tool]*measurev1.ToolInfo, len(infos))
		for _, info := range infos {
			r.tools[info.GetTool()] = info
		}
	}
	out := make([]*measurev1.ToolInfo, 0, len(r.tools))
	for _, vc := range versionCommands {
		if info, ok := r.tools[vc.tool]; ok {
			out = append(out, proto.Clone(info).(*measurev1.ToolInfo))
		}
	}
	return out
}

// toolInfo returns the ToolInfo of tool, detecting the tools if needed.
func (r *Runner) toolInfo(ctx context.Context, tool measurev1.Tool) *measurev1.ToolInfo {
	for _, info := range r.Tools(ctx) {
		if info.GetTool() == tool {
			return info
		}
	}
	return &measurev1.ToolInfo{Tool: tool}
}

// Run runs req's client and returns its results: one per qperf message
// size (Index = position in spec.qperf.msg_size_bytes), else one. It never
// returns an empty slice and never panics.
//
// Run fills Index, Spec (normalized; for qperf with that result's single
// size), Status, Message, ToolVersion, StartTime, Elapsed, TargetAddress
// and, for STATUS_OK only, Metrics (base units: seconds, bits per second,
// bytes, ratios in 0..1; qperf's latency is its ONE-WAY figure). The caller
// fills TestId, RunId, SrcNode, DstNode and Path.
//
// Whatever the path, a result that is not STATUS_OK carries no metrics and
// a message that is never empty and never starts with punctuation (see
// finish).
//
// Statuses: INVALID for a spec that testspec.Normalize refuses or a bad
// request (target_ip not an IP, missing port or data_port, a network this
// agent has no namespace for); TOOL_MISSING when the tool is not installed;
// TIMEOUT when ctx's deadline passes before the tool ends, CANCELED when ctx
// is canceled; otherwise what the tool's parser says (ParsePing,
// ParseQperf, ParseIperf3, ParseCurl, ParseAb; an ab load that got no
// byte back is REFUSED, UNREACHABLE or TIMEOUT as a TCP connect to the
// port from the same namespace finds). When ctx has no deadline, Run sets
// one of twice testspec.ExpectedDuration plus 30s.
//
// Run serves node targets only: a req that names an external_target is
// INVALID (see RunExternal).
func (r *Runner) Run(ctx context.Context, req *agentv1.RunClient) []*measurev1.Result {
	return r.run(ctx, req, endpoint{})
}

// destination is where a client run goes, with what differs between its
// kinds: a node's endpoint (endpoint, for Run) or an external target
// (*External, for RunExternal). run takes one and never asks which.
type destination interface {
	// address is the IP the tool sends to, as results record it
	// (TargetAddress).
	address(req *agentv1.RunClient) string
	// check validates what testspec.Normalize does not see of req for this
	// destination: a STATUS_INVALID *Failure names the field and value.
	check(req *agentv1.RunClient, spec *measurev1.TestSpec) *Failure
	// command is spec's ping, iperf3, curl or ab command to the
	// destination in namespace netns (qperf runs per size: runQperf).
	command(req *agentv1.RunClient, spec *measurev1.TestSpec, netns string) (proc.Command, *Failure)
}

// endpoint is a node's endpoint as Run's destination: RunClient.target_ip,
// a registered endpoint the caller checked, on the ports req names.
type endpoint struct{}

func (endpoint) address(req *agentv1.RunClient) string { return req.GetTargetIp() }

func (endpoint) check(req *agentv1.RunClient, spec *measurev1.TestSpec) *Failure {
	invalid := func(format string, args ...any) *Failure {
		return fail(measurev1.Status_STATUS_INVALID, format, args...)
	}
	if name := req.GetExternalTarget(); name != "" {
		return invalid("external_target %q: this run is for a node target (target_ip), not an external one", name)
	}
	a, err := netip.ParseAddr(req.GetTargetIp())
	if err != nil {
		return invalid("target_ip: %q is not an IP address", req.GetTargetIp())
	}
	if f := req.GetIpFamily(); f != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED && f != protocol.FamilyOf(a) {
		return invalid("ip_family: %v, but target_ip %s is %v", f, a, protocol.FamilyOf(a))
	}
	tool := testspec.Tool(spec.GetTest())
	if tool == measurev1.Tool_TOOL_PING {
		return nil
	}
	if p := req.GetPort(); p == 0 || p > 65535 {
		return invalid("port: %d is not a port in 1..65535 (%s needs the server's port)", p, toolName(spec))
	}
	if tool == measurev1.Tool_TOOL_AB && a.Zone() != "" {
		// ab 2.3 refuses a zone in its URL ("http://[fe80::1%25eth0]:80/").
		return invalid("target_ip: %q has a zone, which ab cannot take in its URL", req.GetTargetIp())
	}
	if tool == measurev1.Tool_TOOL_QPERF {
		if p := req.GetDataPort(); p == 0 || p > 65535 || p == req.GetPort() {
			return invalid("data_port: %d is not a port in 1..65535 other than port %d (qperf pins its data port)", p, req.GetPort())
		}
	}
	return nil
}

func (endpoint) command(req *agentv1.RunClient, spec *measurev1.TestSpec, netns string) (proc.Command, *Failure) {
	switch testspec.Tool(spec.GetTest()) {
	case measurev1.Tool_TOOL_PING:
		return pingCommand(spec, req.GetTargetIp(), netns), nil
	case measurev1.Tool_TOOL_IPERF3:
		return iperf3Command(spec, req.GetTargetIp(), req.GetPort(), netns), nil
	case measurev1.Tool_TOOL_AB:
		return abCommand(spec, req.GetTargetIp(), req.GetPort(), netns), nil
	default:
		return curlCommand(spec, req.GetTargetIp(), req.GetPort(), netns), nil
	}
}

// run is Run or RunExternal, to d.
func (r *Runner) run(ctx context.Context, req *agentv1.RunClient, d destination) (results []*measurev1.Result) {
	start := time.Now()
	targetAddress := d.address(req)
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("runner panic", "panic", p)
			results = []*measurev1.Result{failed(req.GetSpec(), 0, fail(measurev1.Status_STATUS_TOOL_ERROR, "internal error: %v", p))}
		}
		for _, res := range results {
			spec := res.GetSpec()
			if spec == nil {
				spec = req.GetSpec()
			}
			finish(toolName(spec), res)
			res.TargetAddress = targetAddress
			res.IpFamily = familyOf(targetAddress)
			if res.StartTime == nil { // not run: invalid, tool missing, skipped
				res.StartTime = timestamppb.New(start)
				res.Elapsed = durationpb.New(0)
			}
		}
	}()
	spec, err := testspec.Normalize(req.GetSpec())
	if err != nil {
		return []*measurev1.Result{failed(req.GetSpec(), 0, fail(measurev1.Status_STATUS_INVALID, "%v", err))}
	}
	netns, f := r.checkRequest(req, spec, d)
	if f != nil {
		return perSize(spec, f)
	}
	info := r.toolInfo(ctx, testspec.Tool(spec.GetTest()))
	if info.GetError() == proc.ErrNotFound.Error() {
		results = perSize(spec, fail(measurev1.Status_STATUS_TOOL_MISSING, "%s: %s", toolName(spec), info.GetError()))
	} else {
		if _, ok := ctx.Deadline(); !ok {
			expected, _ := testspec.ExpectedDuration(spec)
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, 2*expected+30*time.Second)
			defer cancel()
		}
		if testspec.Tool(spec.GetTest()) == measurev1.Tool_TOOL_QPERF {
			results = r.runQperf(ctx, req, spec, netns, targetAddress)
		} else {
			results = r.runOnce(ctx, req, spec, netns, d)
		}
	}
	for _, res := range results {
		res.ToolVersion = info.GetVersion()
	}
	return results
}

// checkRequest validates the parts of req that Normalize does not see,
// for d (destination.check) and for this agent (the network's namespace),
// and returns the namespace path to run in.
func (r *Runner) checkRequest(req *agentv1.RunClient, spec *measurev1.TestSpec, d destination) (string, *Failure) {
	if f := d.check(req, spec); f != nil {
		return "", f
	}
	netns, ok := r.netns[req.GetNetwork()]
	if !ok {
		return "", fail(measurev1.Status_STATUS_INVALID, "network: %v has no namespace on this agent", req.GetNetwork())
	}
	return netns, nil
}

// runOnce runs ping, iperf3, curl or ab once, to d (checkRequest
// checked req for it).
func (r *Runner) runOnce(ctx context.Context, req *agentv1.RunClient, spec *measurev1.TestSpec, netns string, d destination) []*measurev1.Result {
	cmd, f := d.command(req, spec, netns)
	if f != nil {
		return []*measurev1.Result{failed(spec, 0, f)}
	}
	if f := ctxFailure(ctx, cmd.Name); f != nil {
		return []*measurev1.Result{failed(spec, 0, f)}
	}
	start := time.Now()
	cmd.Name = r.toolPath(cmd.Name)
	out, err := r.exec(ctx, cmd)
	results, connectFailed := resultsOf(spec, out, err)
	if connectFailed {
		r.refineConnect(ctx, results[0], netns, net.JoinHostPort(d.address(req), strconv.FormatUint(uint64(req.GetPort()), 10)))
	}
	r.logRun(cmd, out, results)
	stamp(results, start, out.Elapsed)
	return results
}

// runQperf runs qperf once per message size against target (target_ip,
// or an external target's resolved address). After a size fails to
// connect (REFUSED, UNREACHABLE, TIMEOUT), is cut by the deadline or
// canceled, or the tool is missing, the remaining sizes are not run and get
// the same status with "not run: ...".
func (r *Runner) runQperf(ctx context.Context, req *agentv1.RunClient, spec *measurev1.TestSpec, netns, target string) []*measurev1.Result {
	p := spec.GetQperf()
	seconds := uint64(p.GetDuration().AsDuration() / time.Second)
	var results []*measurev1.Result
	var stop *Failure
	for i, size := range p.GetMsgSizeBytes() {
		one := proto.Clone(spec).(*measurev1.TestSpec)
		one.GetQperf().MsgSizeBytes = []uint64{size}
		f := stop
		if f == nil {
			f = ctxFailure(ctx, fmt.Sprintf("qperf with msg_size %d", size))
		}
		if f != nil {
			results = append(results, failed(one, uint32(i), f))
			continue
		}
		cmd := qperfCommand(spec.GetTest(), seconds, size, target, req.GetPort(), req.GetDataPort(), netns)
		start := time.Now()
		cmd.Name = r.toolPath(cmd.Name)
		out, err := r.exec(ctx, cmd)
		rs, connectFailed := resultsOf(one, out, err)
		res := rs[0]
		if connectFailed && res.GetStatus() != measurev1.Status_STATUS_OK {
			r.refineConnect(ctx, res, netns, net.JoinHostPort(target, strconv.FormatUint(uint64(req.GetPort()), 10)))
		}
		r.logRun(cmd, out, rs)
		stamp(rs, start, out.Elapsed)
		res.Index = uint32(i)
		results = append(results, res)
		switch res.GetStatus() {
		case measurev1.Status_STATUS_REFUSED, measurev1.Status_STATUS_UNREACHABLE, measurev1.Status_STATUS_TIMEOUT,
			measurev1.Status_STATUS_CANCELED, measurev1.Status_STATUS_TOOL_MISSING:
			stop = &Failure{Status: res.GetStatus(), Message: oneLine(fmt.Sprintf("not run: msg_size %d ended %s: %s", size, testspec.StatusName(res.GetStatus()), res.GetMessage()))}
		}
	}
	return results
}

// refineConnect replaces the status of a qperf "failed to connect" (which
// does not say why), or of an ab load that got no byte back, by what a TCP
// connect to the listen port from the same namespace finds: REFUSED,
// UNREACHABLE or TIMEOUT; TOOL_ERROR if the port accepts connections now. An inconclusive probe leaves UNREACHABLE. It
// leaves an OK result alone (a block of the size was parsed: the connect
// failure was another size's) and never gives metrics to a failure.
func (r *Runner) refineConnect(ctx context.Context, res *measurev1.Result, netns, addr string) {
	if ctx.Err() != nil || res.GetStatus() == measurev1.Status_STATUS_OK {
		return
	}
	err := r.probe(ctx, netns, addr)
	status := probeStatus(err)
	var what string
	switch status {
	case measurev1.Status_STATUS_OK:
		status, what = measurev1.Status_STATUS_TOOL_ERROR, "yet a TCP connect to "+addr+" from the same network succeeded afterwards"
	case measurev1.Status_STATUS_UNSPECIFIED:
		status, what = res.GetStatus(), fmt.Sprintf("a TCP connect to %s was inconclusive: %v", addr, err)
	default:
		what = fmt.Sprintf("a TCP connect to %s from the same network: %v", addr, err)
	}
	res.Status, res.Metrics = status, nil
	res.Message = failMessage(toolName(res.GetSpec()), status, joinWords(res.GetMessage(), what))
}

// joinWords joins the parts of a message with "; ", each without the
// separators and spaces at its ends; parts left empty are dropped.
func joinWords(parts ...string) string {
	var keep []string
	for _, p := range parts {
		if p = strings.Trim(p, "; ,\t\r\n"); p != "" {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, "; ")
}

func (r *Runner) logRun(cmd proc.Command, out proc.Output, results []*measurev1.Result) {
	if !r.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	for _, res := range results {
		r.log.Debug("tool run", "argv", cmd.String(), "exit", out.ExitCode, "elapsed", out.Elapsed,
			"index", res.GetIndex(), "status", testspec.StatusName(res.GetStatus()), "message", res.GetMessage())
	}
}

// resultsOf turns one finished run of spec's tool into results with
// Index, Spec, Status, Message and Metrics set: one per size of
// spec.qperf.msg_size_bytes for qperf, else one. connectFailed is qperf's
// "failed to connect" (see qperfResults) or an ab load that got no byte
// back (ParseAb). It does no I/O.
//
// Every result goes through finish. When out was parsed (the tool exited
// by itself, even if ctx ended meanwhile: see runFailure), was truncated
// (proc's cap) and a result failed, its message starts with "TOOL output
// truncated at 8 MiB" (unless it already says so): the failure may be the
// cut's.
func resultsOf(spec *measurev1.TestSpec, out proc.Output, runErr error) (results []*measurev1.Result, connectFailed bool) {
	tool := toolName(spec)
	runFailed := runFailure(tool, out, runErr)
	defer func() {
		for _, res := range results {
			if out.Truncated && runFailed == nil && res.GetStatus() != measurev1.Status_STATUS_OK &&
				!strings.Contains(res.GetMessage(), truncatedWords(tool)) {
				res.Message = joinWords(truncatedWords(tool), res.GetMessage())
			}
			finish(tool, res)
		}
	}()
	if runFailed != nil {
		return perSize(spec, runFailed), false
	}
	switch testspec.Tool(spec.GetTest()) {
	case measurev1.Tool_TOOL_PING:
		return pingResults(spec, out), false
	case measurev1.Tool_TOOL_QPERF:
		return qperfResults(spec, out)
	case measurev1.Tool_TOOL_IPERF3:
		return iperf3Results(spec, out), false
	case measurev1.Tool_TOOL_CURL:
		return curlResults(spec, out), false
	case measurev1.Tool_TOOL_AB:
		return abResults(spec, out)
	}
	return []*measurev1.Result{failed(spec, 0, fail(measurev1.Status_STATUS_INVALID, "test %s has no tool", testspec.Name(spec.GetTest())))}, false
}

// perSize gives every qperf message size of spec (or the one result of
// other tools) the failure f.
func perSize(spec *measurev1.TestSpec, f *Failure) []*measurev1.Result {
	sizes := spec.GetQperf().GetMsgSizeBytes()
	if len(sizes) <= 1 {
		return []*measurev1.Result{failed(spec, 0, f)}
	}
	results := make([]*measurev1.Result, 0, len(sizes))
	for i, size := range sizes {
		one := proto.Clone(spec).(*measurev1.TestSpec)
		one.GetQperf().MsgSizeBytes = []uint64{size}
		results = append(results, failed(one, uint32(i), f))
	}
	return results
}

// okResult is a STATUS_OK result; the caller sets its metrics.
func okResult(spec *measurev1.TestSpec, index uint32) *measurev1.Result {
	return &measurev1.Result{Index: index, Spec: spec, Status: measurev1.Status_STATUS_OK}
}

// failed is a result for failure f, without metrics.
func failed(spec *measurev1.TestSpec, index uint32, f *Failure) *measurev1.Result {
	if spec != nil {
		spec = proto.Clone(spec).(*measurev1.TestSpec)
	}
	return &measurev1.Result{Index: index, Spec: spec, Status: f.Status, Message: failMessage(toolName(spec), f.Status, f.Message)}
}

func stamp(results []*measurev1.Result, start time.Time, elapsed time.Duration) {
	for _, res := range results {
		res.StartTime = timestamppb.New(start)
		res.Elapsed = durationpb.New(elapsed)
	}
}

// toolName is the program of spec's test (testspec.ToolProgram): "curl".
func toolName(spec *measurev1.TestSpec) string {
	return testspec.ToolProgram(testspec.Tool(spec.GetTest()))
}
