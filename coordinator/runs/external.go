package runs

import (
	"context"
	"strings"
	"time"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// failFunc makes the single failed result of a test attempt.
type failFunc func(status measurev1.Status, format string, args ...any) ([]*measurev1.Result, bool)

// execExternal runs one attempt of a test to an external target (its
// dst_node is the target's name): no server starts, only the source agent
// must be there (gossip, session, and a pod endpoint for the pod path),
// and the client work names the target, which the agent resolves itself
// from the Endpoints' allowlist. An iperf3 or qperf test sends to the
// server ports the allowlist names for the target (RunClient port and
// data_port), and is INVALID for a target without them.
func (m *Manager) execExternal(ctx context.Context, runID string, pt *measurev1.PlannedTest, fail failFunc) ([]*measurev1.Result, bool) {
	start := time.Now()
	if deadBy, gone := m.cfg.Agents.GossipGone(pt.GetSrcNode()); gone {
		return fail(measurev1.Status_STATUS_AGENT_UNAVAILABLE, "source node %q: gossip declares it dead (the gossip of %s); no work sent to it",
			pt.GetSrcNode(), strings.Join(deadBy, ", "))
	}
	src, ok := m.cfg.Agents.Node(pt.GetSrcNode())
	if !ok {
		return fail(measurev1.Status_STATUS_AGENT_UNAVAILABLE, "source node %q has no connected agent", pt.GetSrcNode())
	}
	network := measurev1.Network_NETWORK_HOST
	if pt.GetPath() == measurev1.Path_PATH_POD_TO_EXTERNAL {
		network = measurev1.Network_NETWORK_POD
		if !src.PodIP.IsValid() {
			return fail(measurev1.Status_STATUS_INVALID, "node %q registered no pod endpoint", src.Name)
		}
	}
	d := testspec.DestOf(pt)
	if d.Name() == "" {
		return fail(measurev1.Status_STATUS_INVALID, "%s names no external target", testspec.PathName(pt.GetPath()))
	}
	target, ok := d.Entry(m.cfg.ExternalTargets)
	if !ok {
		return fail(measurev1.Status_STATUS_INVALID, "external target %q is not in the coordinator's allowlist", d.Target())
	}
	if why := schedule.NotApplying(pt.GetSpec().GetTest(), target); why != "" {
		return fail(measurev1.Status_STATUS_INVALID, "%s: %s", testspec.Name(pt.GetSpec().GetTest()), why)
	}
	var port, dataPort uint32
	switch testspec.Tool(pt.GetSpec().GetTest()) {
	case measurev1.Tool_TOOL_IPERF3:
		port = target.GetIperf3Port()
	case measurev1.Tool_TOOL_QPERF:
		port, dataPort = target.GetQperfPort(), target.GetQperfDataPort()
	}
	expected, err := testspec.ExpectedDuration(pt.GetSpec())
	if err != nil {
		return fail(measurev1.Status_STATUS_INVALID, "%v", err)
	}
	return m.runClient(ctx, runID, pt, start, expected, &agentv1.RunClient{
		Spec: pt.GetSpec(), Network: network, ExternalTarget: d.Target(), Port: port, DataPort: dataPort,
	})
}
