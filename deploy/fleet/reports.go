package fleet

import (
	"cmp"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds what a simulated agent reports on its own: one
// ProbeReport per report period with plausible figures, each kept until
// the coordinator acknowledges it and sent again after every
// registration (as a real agent's spool does), and whole gossip views of
// the fleet's join order. Heartbeats are the send loop's (session.go).

// membersField is GossipView.members' field number.
var membersField = (&agentv1.GossipView{}).ProtoReflect().Descriptor().Fields().ByName("members").Number()

// ack records the coordinator's acknowledgement of seqs.
func (a *simAgent) ack(seqs []uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, seq := range seqs {
		if r, ok := a.unacked[seq]; ok {
			delete(a.unacked, seq)
			a.acked[seq] = r.GetPeriodStart().AsTime()
		}
	}
}

// pending returns the unacknowledged reports, oldest first.
func (a *simAgent) pending() []*agentv1.ProbeReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*agentv1.ProbeReport, 0, len(a.unacked))
	for _, r := range a.unacked {
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y *agentv1.ProbeReport) int { return cmp.Compare(x.GetSeq(), y.GetSeq()) })
	return out
}

// report is one report period of the held plan, with plausible figures:
// every probe answered, RTTs around 100 us.
func (a *simAgent) report(h *heldPlan) *agentv1.ConnectRequest {
	s := h.settings
	every := s.GetReportInterval().AsDuration()
	sent := uint32(every / s.GetInterval().AsDuration())
	a.seq++
	r := &agentv1.ProbeReport{Seq: a.seq, PeriodStart: timestamppb.New(time.Now().Add(-every)), Period: durationpb.New(every),
		PlanVersion: h.version}
	r.Summaries = make([]*agentv1.ProbeSummary, 0, h.peers.count*len(s.GetPaths())*len(s.GetKinds()))
	for i := range h.peers.n {
		if !h.peers.has(i) {
			continue
		}
		dst := &agentv1.ProbeSummary_Node{Node: NodeName(i)}
		for _, path := range s.GetPaths() {
			for _, kind := range s.GetKinds() {
				med := 80e-6 + a.rng.Float64()*40e-6
				r.Summaries = append(r.Summaries, &agentv1.ProbeSummary{Dst: dst, Path: path, Kind: kind, Sent: sent, Received: sent,
					RttMinSeconds: med * 0.8, RttMedianSeconds: med, RttP90Seconds: med * 1.2, RttMaxSeconds: med * 1.5,
					Status: measurev1.Status_STATUS_OK})
			}
		}
	}
	a.f.reports.Add(1)
	a.f.summaries.Add(int64(len(r.Summaries)))
	a.mu.Lock()
	a.unacked[r.Seq] = r
	a.mu.Unlock()
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: r}}
}

// gossipView is a whole gossip view, every member alive: a itself and the
// first n agents of the fleet's join order (those that stored their place
// yet).
func (a *simAgent) gossipView(n int) *agentv1.ConnectRequest {
	n = min(n, len(a.f.joinOrder))
	raw := append(make([]byte, 0, (n+1)*len(a.f.members[a.i])), a.f.members[a.i]...)
	for k := range n {
		if i := int(a.f.joinOrder[k].Load()) - 1; i >= 0 && i != a.i {
			raw = append(raw, a.f.members[i]...)
		}
	}
	v := &agentv1.GossipView{}
	v.ProtoReflect().SetUnknown(raw) // marshalled as the members they encode
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_GossipView{GossipView: v}}
}
