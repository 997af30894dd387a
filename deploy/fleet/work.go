package fleet

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds a simulated agent's instant answers to on-demand work,
// under the rules of a current agent (agent/work.go, Agent.handleWork):
// the answer carries the work ID in work_id and in the deprecated
// test_id; Work.timeout counts from the Work's arrival, and the
// deprecated deadline is read only when timeout is unset; a Work with no
// action, no ID, a bad timeout or neither field is refused
// (STATUS_INVALID), one already past its deadline answers STATUS_TIMEOUT;
// cancel_client gets no answer; the texts are bounded as an agent bounds
// them. The work's ID and deadline follow internal/protocol (WorkID,
// WorkDeadline), as an agent's do.

// answer is the instant answer to w, which arrived at arrived, as of now,
// with its texts bounded (protocol.BoundWorkResult); nil for
// cancel_client, which an agent does not answer (the fleet's client runs
// are over as soon as they arrive, so there is nothing to cancel).
func answer(w *agentv1.Work, arrived, now time.Time) *agentv1.WorkResult {
	if _, ok := w.GetAction().(*agentv1.Work_CancelClient); ok {
		return nil
	}
	r := answerWork(w, arrived, now)
	protocol.BoundWorkResult(r)
	return r
}

// answerWork is answer's result before the bounds: a refusal, or a
// plausible outcome of the action.
func answerWork(w *agentv1.Work, arrived, now time.Time) *agentv1.WorkResult {
	ans, ok := protocol.StartAnswer(w, arrived)
	if !ok {
		return ans.Result
	}
	if late, ok := ans.Late(now, ""); ok {
		return late
	}
	r := ans.Result
	switch act := w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		// The ports the fleet's agents register (the defaults; HTTP 8080):
		// the coordinator takes no others.
		st := &agentv1.ServerStarted{Port: protocol.DefaultIperf3Port, ToolVersion: "fleet"}
		switch act.StartServer.GetTool() {
		case measurev1.Tool_TOOL_QPERF:
			st.Port, st.DataPort = protocol.DefaultQperfPort, protocol.DefaultQperfDataPort
		case measurev1.Tool_TOOL_CURL, measurev1.Tool_TOOL_AB:
			st.Port = protocol.DefaultHTTPPort
		}
		r.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: st}
	case *agentv1.Work_RunClient:
		res := clientResult(act.RunClient)
		r.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{res}}}
		if res.GetStatus() != measurev1.Status_STATUS_OK {
			// As an agent: the answer's status sums up its results.
			return ans.Fail(res.GetStatus(), "%s", res.GetMessage())
		}
	}
	r.Status = measurev1.Status_STATUS_OK
	return r
}

// clientResult is a plausible result of rc's client: a quick, clean ping,
// HTTP or iperf3 TCP test; any other test is refused as one the fleet does
// not simulate.
func clientResult(rc *agentv1.RunClient) *measurev1.Result {
	res := &measurev1.Result{Spec: rc.GetSpec(), Status: measurev1.Status_STATUS_OK, ToolVersion: "fleet",
		StartTime: timestamppb.Now(), Elapsed: durationpb.New(time.Millisecond), TargetAddress: rc.GetTargetIp()}
	switch rc.GetSpec().GetTest() {
	case measurev1.Test_TEST_PING:
		med := 100e-6
		res.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5,
			RttMinSeconds: 80e-6, RttAvgSeconds: med, RttMaxSeconds: 150e-6, RttMdevSeconds: 10e-6, RttMedianSeconds: &med}}
	case measurev1.Test_TEST_HTTP:
		res.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, ConnectSeconds: 100e-6,
			FirstByteSeconds: 300e-6, TotalSeconds: 400e-6, SizeDownloadBytes: 100}}
	case measurev1.Test_TEST_IPERF3_TCP:
		// 9.4 Gbit/s for 2 s, what a 10 GbE link carries: the server and
		// client of a round, answered at once.
		const bps, seconds = 9.4e9, 2
		res.Metrics = &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: bps, SenderThroughputBps: bps,
			BytesSent: bps * seconds / 8, BytesReceived: bps * seconds / 8, DurationSeconds: seconds, TcpMssBytes: 1448}}
	default:
		res.Status, res.Message = measurev1.Status_STATUS_INVALID, "the simulated fleet answers ping, HTTP and iperf3 TCP only"
	}
	return res
}
