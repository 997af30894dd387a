package runs

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	"github.com/meshperf/meshperf/internal/tick"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Timing of one test.
const (
	// serverStartTimeout bounds a StartServer round trip.
	serverStartTimeout = 10 * time.Second
	// serverStopTimeout bounds a StopServer round trip.
	serverStopTimeout = 5 * time.Second
	// busyRetries and busyBackoff bound the retries of a test whose server
	// answered busy; a busy answer is never a sample.
	busyRetries = 3
	busyBackoff = 500 * time.Millisecond
)

// route is where a test's client runs and where it sends.
type route struct {
	clientNet, serverNet measurev1.Network
	target               netip.Addr
}

// routeFor resolves a path between two connected nodes in family fam;
// IP_FAMILY_UNSPECIFIED (a run planned before families) takes their
// primary addresses.
func routeFor(path measurev1.Path, fam measurev1.IPFamily, src, dst registry.Node) (route, error) {
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	addr, service := func(n registry.Node, network measurev1.Network) netip.Addr {
		if fam == measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
			if network == host {
				return n.HostIP
			}
			return n.PodIP
		}
		return n.Addr(network, fam)
	}, dst.ServiceIP
	if fam != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		service = dst.ServiceAddr(fam)
	}
	var r route
	switch path {
	case measurev1.Path_PATH_HOST_TO_HOST:
		r = route{host, host, addr(dst, host)}
	case measurev1.Path_PATH_HOST_TO_POD:
		r = route{host, pod, addr(dst, pod)}
	case measurev1.Path_PATH_POD_TO_POD:
		r = route{pod, pod, addr(dst, pod)}
	case measurev1.Path_PATH_POD_TO_SERVICE:
		r = route{pod, pod, service}
	case measurev1.Path_PATH_HOST_TO_SERVICE:
		r = route{host, pod, service}
	default:
		return route{}, fmt.Errorf("path %v is not supported", path)
	}
	in := ""
	if fam != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		in = " in " + protocol.FamilyName(fam)
	}
	switch {
	case !r.target.IsValid():
		return route{}, fmt.Errorf("node %q registered no address%s for %s", dst.Name, in, testspec.PathName(path))
	case r.clientNet == pod && !src.PodIP.IsValid():
		return route{}, fmt.Errorf("node %q registered no pod endpoint", src.Name)
	case !addr(src, r.clientNet).IsValid():
		// The client sends from an address of the family on its network.
		network := "host"
		if r.clientNet == pod {
			network = "pod"
		}
		return route{}, fmt.Errorf("node %q registered no %s address%s to send from", src.Name, network, in)
	}
	return r, nil
}

// execTest runs one planned test to its results, retrying a busy server a
// few times (busyPolicyOf). It never fails: every problem is a result with
// its status. answered reports that the results are the source agent's
// answer to the client work, which that agent keeps until it is
// acknowledged.
func (m *Manager) execTest(ctx context.Context, runID string, pt *measurev1.PlannedTest) (results []*measurev1.Result, answered bool) {
	var start time.Time
	first := time.Now()
	policy := m.busyPolicyOf(pt, sanity.Timeout(pt.GetSpec()))
	for attempt := 0; ; attempt++ {
		// The attempt's own start: the one its results' start times are
		// checked against.
		start = time.Now()
		results, answered = m.execOnce(ctx, runID, pt)
		if attempt == policy.retries || !anyBusy(results) || m.halted(ctx) {
			break
		}
		backoff := policy.backoff(attempt)
		if policy.within > 0 && time.Since(first)+backoff > policy.within {
			m.log.Info("server busy, no retry left within the test's deadline", "run_id", runID, "test_id", pt.GetTestId(),
				"attempts", attempt+1, "deadline", policy.within)
			break
		}
		if answered {
			// A busy answer is never stored: the agent may forget it now,
			// before the retry's answer (same test ID) exists.
			m.cfg.Agents.Ack(pt.GetSrcNode(), workID(runID, pt))
		}
		m.log.Info("server busy, retrying", "run_id", runID, "test_id", pt.GetTestId(), "attempt", attempt+1, "backoff", backoff)
		if tick.Sleep(ctx, backoff) != nil || m.halted(ctx) {
			break // canceled, or the coordinator stopping: no retry
		}
	}
	if m.halted(ctx) && anyBusy(results) {
		// Canceled between busy attempts: no sample, and no retry either.
		results = m.cutResult(pt, start, "while its server was busy")
	}
	return m.checkFigures(pt, sanitize(runID, pt, results, start)), answered
}

// checkFigures checks the figures of a test's sanitized results
// (coordinator/sanity): a result whose figures fail becomes
// STATUS_INVALID without metrics, its reason in its message, is counted
// in Config.Invalid and logged (at most once a minute per source node).
// The bound of its time figures is the planned test's deadline, never
// one of a spec the agent sent. It returns results.
func (m *Manager) checkFigures(pt *measurev1.PlannedTest, results []*measurev1.Result) []*measurev1.Result {
	timeout := sanity.Timeout(pt.GetSpec())
	for _, r := range results {
		err := sanity.CheckResult(r, timeout)
		if err == nil {
			continue
		}
		sanity.Invalidate(r, err)
		m.cfg.Invalid.Add(sanity.SourceRun, err)
		m.warn.Warn(m.log, r.GetSrcNode(), "result figures failed the checks; stored as invalid, not as a measurement",
			"run_id", r.GetRunId(), "test_id", r.GetTestId(), "index", r.GetIndex(), "reason", string(sanity.ReasonOf(err)), "err", err)
	}
	return results
}

// metricsFit reports whether r carries the metrics of its test's tool.
func metricsFit(r *measurev1.Result) bool {
	switch testspec.Tool(r.GetSpec().GetTest()) {
	case measurev1.Tool_TOOL_PING:
		return r.GetPing() != nil
	case measurev1.Tool_TOOL_QPERF:
		return r.GetQperf() != nil
	case measurev1.Tool_TOOL_IPERF3:
		return r.GetIperf3() != nil
	case measurev1.Tool_TOOL_CURL:
		return r.GetHttp() != nil
	case measurev1.Tool_TOOL_AB:
		return r.GetHttpLoad() != nil
	}
	return false
}

func anyBusy(rs []*measurev1.Result) bool {
	for _, r := range rs {
		if r.GetStatus() == measurev1.Status_STATUS_BUSY {
			return true
		}
	}
	return false
}

// execOnce runs one attempt of a test, to a node (execNode) or to an
// external target (execExternal), as its destination's kind says;
// answered reports that the results are the source agent's answer to the
// client work.
func (m *Manager) execOnce(ctx context.Context, runID string, pt *measurev1.PlannedTest) (results []*measurev1.Result, answered bool) {
	start := time.Now()
	fail := func(status measurev1.Status, format string, args ...any) ([]*measurev1.Result, bool) {
		return []*measurev1.Result{{
			Spec: pt.GetSpec(), Status: status, Message: fmt.Sprintf(format, args...),
			StartTime: timestamppb.New(start), Elapsed: durationpb.New(time.Since(start)),
		}}, false
	}
	exec := testspec.Pick(testspec.DestOf(pt), m.execNode, m.execExternal)
	return exec(ctx, runID, pt, fail)
}

// execNode runs one attempt of a test to a node: both agents must be
// there (gossip and session), every test but ping asks the destination's
// agent for its server (qperf and iperf3 start one, stopped after the
// client; the HTTP tests get the always-up HTTP target's port), and the
// client work names the destination's address on the path.
func (m *Manager) execNode(ctx context.Context, runID string, pt *measurev1.PlannedTest, fail failFunc) ([]*measurev1.Result, bool) {
	start := time.Now()
	for _, n := range []struct{ role, name string }{{"source", pt.GetSrcNode()}, {"destination", pt.GetDstNode()}} {
		if deadBy, gone := m.cfg.Agents.GossipGone(n.name); gone {
			return fail(measurev1.Status_STATUS_AGENT_UNAVAILABLE, "%s node %q: gossip declares it dead (the gossip of %s); no work sent to it",
				n.role, n.name, strings.Join(deadBy, ", "))
		}
	}
	src, ok := m.cfg.Agents.Node(pt.GetSrcNode())
	if !ok {
		return fail(measurev1.Status_STATUS_AGENT_UNAVAILABLE, "source node %q has no connected agent", pt.GetSrcNode())
	}
	dst, ok := m.cfg.Agents.Node(pt.GetDstNode())
	if !ok {
		return fail(measurev1.Status_STATUS_AGENT_UNAVAILABLE, "destination node %q has no connected agent", pt.GetDstNode())
	}
	rt, err := routeFor(pt.GetPath(), pt.GetIpFamily(), src, dst)
	if err != nil {
		return fail(measurev1.Status_STATUS_INVALID, "%v", err)
	}
	test := pt.GetSpec().GetTest()
	tool := testspec.Tool(test)

	var started *agentv1.ServerStarted
	if tool != measurev1.Tool_TOOL_PING {
		// Not cut by a cancel of the run (ctx), only by Close: a server
		// it starts is stopped below, never left behind.
		startCtx, stopStart := m.untilClose(ctx)
		wr, err := m.dispatch(startCtx, pt.GetDstNode(), workID(runID, pt), serverStartTimeout,
			&agentv1.Work{Action: &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{Tool: tool, Network: rt.serverNet}}})
		stopStart()
		if err != nil {
			if m.halted(ctx) {
				// The agent may have started the server after all.
				defer m.stopServer(ctx, runID, pt)
			}
			return fail(m.statusOf(ctx, err), "start %s server on %s: %v", testspec.ToolName(tool), pt.GetDstNode(), err)
		}
		if wr.GetStatus() != measurev1.Status_STATUS_OK {
			status := wr.GetStatus()
			if status != measurev1.Status_STATUS_BUSY {
				status = measurev1.Status_STATUS_SERVER_ERROR
			}
			return fail(status, "start %s server on %s: %s", testspec.ToolName(tool), pt.GetDstNode(), wr.GetMessage())
		}
		started = wr.GetServerStarted()
		if testspec.NeedsServer(test) {
			defer m.stopServer(ctx, runID, pt)
		}
		if err := registry.CheckServerStarted(dst, tool, started); err != nil {
			// No client is ever sent to a port the node did not register.
			m.log.Warn("ServerStarted refused: not the registered port", "node", dst.Name, "tool", testspec.ToolName(tool),
				"port", started.GetPort(), "data_port", started.GetDataPort(), "run_id", runID, "test_id", pt.GetTestId(), "err", err)
			return fail(measurev1.Status_STATUS_SERVER_ERROR, "start %s server on %s: %v", testspec.ToolName(tool), pt.GetDstNode(), err)
		}
	}

	expected, err := testspec.ExpectedDuration(pt.GetSpec())
	if err != nil {
		return fail(measurev1.Status_STATUS_INVALID, "%v", err)
	}
	return m.runClient(ctx, runID, pt, start, expected, &agentv1.RunClient{
		Spec: pt.GetSpec(), Network: rt.clientNet, TargetIp: rt.target.String(),
		Port: started.GetPort(), DataPort: started.GetDataPort(), IpFamily: pt.GetIpFamily(),
	})
}

// runClient sends the client work rc of pt to its source agent, which is
// expected to take about expected, and returns its results.
func (m *Manager) runClient(ctx context.Context, runID string, pt *measurev1.PlannedTest, start time.Time, expected time.Duration,
	rc *agentv1.RunClient) (results []*measurev1.Result, answered bool) {
	fail := func(status measurev1.Status, format string, args ...any) ([]*measurev1.Result, bool) {
		return []*measurev1.Result{{
			Spec: pt.GetSpec(), Status: status, Message: fmt.Sprintf(format, args...),
			StartTime: timestamppb.New(start), Elapsed: durationpb.New(time.Since(start)),
		}}, false
	}
	budget := expected + testspec.ClientSlack
	if m.halted(ctx) {
		return m.cutResult(pt, start, "before its client started"), false
	}
	// The record that this node has this test in flight comes first: it
	// is what a late answer (after a restart) is checked against.
	if err := m.cfg.Store.PutDispatched(ctx, workID(runID, pt), pt.GetSrcNode(), start); err != nil && ctx.Err() == nil {
		m.log.Warn("record client work in flight; a late answer to it will be refused", "node", pt.GetSrcNode(), "work_id", workID(runID, pt), "err", err)
	}
	// A cancel of the run (ctx) stops the client on its agent, which
	// answers it; only Close (untilClose) gives up the wait. Close (which
	// ends ctx too) stops no client: the agent keeps its answer for the
	// next coordinator, whose late handler stores it in place of the
	// STATUS_INTERRUPTED placeholder.
	answeredc, cancelDone := make(chan struct{}), make(chan struct{})
	stopCancel := context.AfterFunc(ctx, func() { // owner: this call, which waits for it below
		defer close(cancelDone)
		if !m.closing() {
			m.cancelClient(ctx, pt.GetSrcNode(), workID(runID, pt), answeredc)
		}
	})
	clientCtx, stopClient := m.untilClose(ctx)
	wr, err := m.dispatch(clientCtx, pt.GetSrcNode(), workID(runID, pt), budget, &agentv1.Work{Action: &agentv1.Work_RunClient{RunClient: rc}})
	stopClient()
	close(answeredc)
	if !stopCancel() {
		<-cancelDone
	}
	if err != nil {
		if m.closing() {
			// The coordinator is stopping while the client may still run:
			// the agent keeps its answer and sends it again to the next
			// coordinator, whose late handler replaces this placeholder.
			return fail(measurev1.Status_STATUS_INTERRUPTED, "the coordinator stopped before the client on %s answered", pt.GetSrcNode())
		}
		return fail(m.statusOf(ctx, err), "run client on %s: %v", pt.GetSrcNode(), err)
	}
	return clientResults(pt, wr, start, time.Since(start)), true
}

// clientResults are the results in a client's answer, or one failure
// (started at start, lasting elapsed) saying that it has none.
func clientResults(pt *measurev1.PlannedTest, wr *agentv1.WorkResult, start time.Time, elapsed time.Duration) []*measurev1.Result {
	if results := wr.GetClientDone().GetResults(); len(results) > 0 {
		return results
	}
	status := wr.GetStatus()
	if status == measurev1.Status_STATUS_OK || status == measurev1.Status_STATUS_UNSPECIFIED {
		status = measurev1.Status_STATUS_TOOL_ERROR
	}
	return []*measurev1.Result{{
		Spec: pt.GetSpec(), Status: status, Message: fmt.Sprintf("agent on %s returned no result: %s", pt.GetSrcNode(), wr.GetMessage()),
		StartTime: timestamppb.New(start), Elapsed: durationpb.New(elapsed),
	}}
}

// stopServer stops the test's server; it runs even when ctx is done, so a
// canceled run leaves no server behind.
func (m *Manager) stopServer(ctx context.Context, runID string, pt *measurev1.PlannedTest) {
	ctx = context.WithoutCancel(ctx)
	wr, err := m.dispatch(ctx, pt.GetDstNode(), workID(runID, pt), serverStopTimeout,
		&agentv1.Work{Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}})
	if err == nil && wr.GetStatus() != measurev1.Status_STATUS_OK {
		err = errors.New(wr.GetMessage())
	}
	if err != nil {
		m.log.Warn("stop server", "node", pt.GetDstNode(), "test_id", pt.GetTestId(), "err", err)
	}
}

// workID names a test's work on the agents: unique across runs, so that
// two runs at once never mix their answers or their servers.
func workID(runID string, pt *measurev1.PlannedTest) string {
	return runID + "/" + pt.GetTestId()
}

// dispatch sends one Work with its timeout (and, for agents of the previous
// version, the deprecated deadline now+timeout and test_id) and waits a
// little longer than that for the answer, so the agent's own timeout
// result wins.
func (m *Manager) dispatch(ctx context.Context, node, workID string, timeout time.Duration, w *agentv1.Work) (*agentv1.WorkResult, error) {
	now := time.Now()
	w = proto.CloneOf(w)
	protocol.Stamp(w, workID, timeout, now)
	ctx, cancel := context.WithDeadline(ctx, now.Add(timeout+3*time.Second))
	defer cancel()
	return m.cfg.Agents.Dispatch(ctx, node, w)
}

// statusOf maps a dispatch error to a result status: STATUS_INTERRUPTED
// if the coordinator is stopping, STATUS_CANCELED if the run was.
func (m *Manager) statusOf(ctx context.Context, err error) measurev1.Status {
	switch {
	case errors.Is(err, registry.ErrAgentUnavailable):
		return measurev1.Status_STATUS_AGENT_UNAVAILABLE
	case m.closing():
		return measurev1.Status_STATUS_INTERRUPTED
	case ctx.Err() != nil:
		return measurev1.Status_STATUS_CANCELED
	case errors.Is(err, context.DeadlineExceeded):
		return measurev1.Status_STATUS_TIMEOUT
	}
	return measurev1.Status_STATUS_TOOL_ERROR
}
