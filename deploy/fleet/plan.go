package fleet

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds what a simulated agent keeps of its plan, and its
// instant answers to on-demand work.

// heldPlan is what a simulated agent holds of its plan: the peers as a
// bitset of fleet indexes (names outside the fleet are counted apart).
type heldPlan struct {
	version  uint64
	settings *agentv1.ProbeSettings
	peers    *bitset
}

// apply takes a full plan or a delta on the held version.
func (h *heldPlan) apply(p *agentv1.ProbePlan) error {
	if p.GetBaseVersion() != 0 && p.GetBaseVersion() != h.version {
		return fmt.Errorf("%w: delta on version %d, holding %d", errBadPlan, p.GetBaseVersion(), h.version)
	}
	if p.GetBaseVersion() == 0 {
		h.peers.reset()
		h.settings = p.GetSettings()
	} else if p.GetSettings() != nil {
		h.settings = p.GetSettings()
	}
	for _, n := range p.GetRemove() {
		if i := nodeIndex(n); i >= 0 && i < h.peers.n {
			h.peers.clear(i)
		}
	}
	for _, peer := range p.GetUpsert() {
		if i := nodeIndex(peer.GetNodeName()); i >= 0 && i < h.peers.n {
			h.peers.set(i)
		}
	}
	h.version = p.GetVersion()
	return nil
}

// answer is an instant, plausible answer to on-demand work.
func answer(w *agentv1.Work) *agentv1.WorkResult {
	r := &agentv1.WorkResult{TestId: w.GetTestId(), Status: measurev1.Status_STATUS_OK}
	switch act := w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		// The ports the fleet's agents register (the defaults; HTTP 8080):
		// the coordinator takes no others.
		st := &agentv1.ServerStarted{Port: protocol.DefaultIperf3Port, ToolVersion: "fleet"}
		switch act.StartServer.GetTool() {
		case measurev1.Tool_TOOL_QPERF:
			st.Port, st.DataPort = protocol.DefaultQperfPort, protocol.DefaultQperfDataPort
		case measurev1.Tool_TOOL_CURL, measurev1.Tool_TOOL_AB:
			st.Port = 8080
		}
		r.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: st}
	case *agentv1.Work_StopServer:
		r.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	case *agentv1.Work_RunClient:
		res := &measurev1.Result{Spec: act.RunClient.GetSpec(), Status: measurev1.Status_STATUS_OK, ToolVersion: "fleet",
			StartTime: timestamppb.Now(), Elapsed: durationpb.New(time.Millisecond), TargetAddress: act.RunClient.GetTargetIp()}
		switch act.RunClient.GetSpec().GetTest() {
		case measurev1.Test_TEST_PING:
			med := 100e-6
			res.Metrics = &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 5,
				RttMinSeconds: 80e-6, RttAvgSeconds: med, RttMaxSeconds: 150e-6, RttMdevSeconds: 10e-6, RttMedianSeconds: &med}}
		case measurev1.Test_TEST_HTTP:
			res.Metrics = &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, ConnectSeconds: 100e-6,
				FirstByteSeconds: 300e-6, TotalSeconds: 400e-6, SizeDownloadBytes: 100}}
		default:
			res.Status, res.Message = measurev1.Status_STATUS_INVALID, "the simulated fleet answers ping and HTTP only"
		}
		r.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{res}}}
	}
	return r
}

// bitset is a set of fleet indexes with its count.
type bitset struct {
	w     []uint64
	n     int
	count int
}

func newBitset(n int) *bitset    { return &bitset{w: make([]uint64, (n+63)/64), n: n} }
func (b *bitset) has(i int) bool { return b.w[i/64]&(1<<(i%64)) != 0 }
func (b *bitset) set(i int) {
	if !b.has(i) {
		b.w[i/64] |= 1 << (i % 64)
		b.count++
	}
}
func (b *bitset) clear(i int) {
	if b.has(i) {
		b.w[i/64] &^= 1 << (i % 64)
		b.count--
	}
}
func (b *bitset) reset() { clear(b.w); b.count = 0 }
