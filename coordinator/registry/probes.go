package registry

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/coordinator/protoconv"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/queue"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// ReportSink takes the probe reports of the agents' sessions. It is
// coordinator/ingest behind a check in production.
type ReportSink interface {
	// Report takes node's report, which comes from node's own session
	// (never from a field of the report). It must not block: it returns an
	// error when it does not take the report (the agent keeps it and
	// sends it again); otherwise it calls ack exactly once, from any
	// goroutine, once the report is stored or known to be of no use. It
	// returns ErrReportRefused, wrapped, after calling ack for a report
	// it refused whole: a report that will never be good is acknowledged
	// (so that the agent drops it) but proves nothing of the node.
	Report(node string, r *agentv1.ProbeReport, ack func()) error
}

// ErrReportRefused is wrapped by a ReportSink's error for a report it
// refused whole and acknowledged: the node's session is not proven by it
// (a made-up node sending garbage stays unproven and is forgotten after
// Config.UnprovenGrace).
var ErrReportRefused = errors.New("probe report refused")

// maxReportAckBatch is the most seqs one ReportAck carries.
const maxReportAckBatch = 1000

// probePeer is n as a peer of the other agents' probe plans.
func probePeer(n Node, maintenance bool) probeplan.Peer {
	return probeplan.Peer{Name: n.Name, HostIP: n.HostIP, PodIP: n.PodIP, ServiceIP: n.ServiceIP,
		HostIPv6: n.HostIPv6, PodIPv6: n.PodIPv6, ServiceIPv6: n.ServiceIPv6,
		ProbePort: uint32(n.ProbePort), HTTPPort: uint32(n.HTTPPort), HostMTU: n.HostMTU, PodMTU: n.PodMTU, Maintenance: maintenance}
}

// planJoin puts a registering node that probes into the peer table. Caller
// is attach.
func (r *Registry) planJoin(n Node, maintenance bool) {
	if r.cfg.Probes == nil || n.ProbePort == 0 {
		return
	}
	r.mu.Lock()
	r.peers[n.Name] = n
	r.mu.Unlock()
	if _, _, err := r.cfg.Probes.Upsert(probePeer(n, maintenance)); err != nil {
		r.log.Warn("node left out of the probe plans", "node", n.Name, "err", err)
	}
}

// seedProbes puts the stored nodes that ran probe plans back in the peer
// table at start, as they last registered (checked again as a
// registration is, with the server ports they registered), so that after a coordinator restart the agents that
// register first still probe the peers that have not registered again
// yet, instead of dropping them from their plans for that while. Nodes
// that departed meanwhile leave with the next SyncProbes, as a node whose
// agent went away does.
func (r *Registry) seedProbes() {
	if r.cfg.Probes == nil {
		return
	}
	now := time.Now()
	for name, a := range r.known {
		if a.GetProbePort() == 0 || r.state(a, now, false) == meshv1.NodeState_NODE_STATE_DEPARTED {
			continue
		}
		n, err := validateRegister(&agentv1.Register{NodeName: name, ProtocolVersion: protocol.Version, Addresses: protoconv.Clones(a.GetAddresses()),
			ServiceIp: a.GetServiceIp(), ServiceIpv6: a.GetServiceIpv6(), ProbePort: a.GetProbePort(), HttpPort: a.GetHttpPort(),
			Iperf3Port: a.GetIperf3Port(), QperfPort: a.GetQperfPort(), QperfDataPort: a.GetQperfDataPort()}, r.cfg.Addresses)
		if err != nil {
			r.log.Warn("stored node left out of the probe plans until it registers again", "node", name, "err", err)
			continue
		}
		r.peers[name] = n
		if _, _, err := r.cfg.Probes.Upsert(probePeer(n, a.GetMaintenance())); err != nil {
			delete(r.peers, name)
			r.log.Warn("stored node left out of the probe plans until it registers again", "node", name, "err", err)
		}
	}
}

// SyncProbes brings the peer table in line with the nodes' states: nodes
// that departed leave the plans, nodes in maintenance stay in them marked
// so (not probed, still targets of on-demand runs), the others are in
// them. A node whose agent is gone stays a peer until it departs, so that
// its peers' probes show whether its network is gone too. It costs O(nodes)
// and changes the table only where a node's state changed; call it every
// few seconds.
func (r *Registry) SyncProbes() {
	r.expireUnproven()
	if r.cfg.Probes == nil {
		return
	}
	now := time.Now()
	type change struct {
		n          Node
		in, cordon bool
	}
	var changes []change
	r.mu.Lock()
	for name, n := range r.peers {
		a := r.known[name]
		if a == nil {
			delete(r.peers, name)
			changes = append(changes, change{n, false, false})
			continue
		}
		if r.unprovenGoneLocked(name) { // left before it proved itself: out at once
			delete(r.peers, name)
			changes = append(changes, change{n, false, false})
			continue
		}
		switch r.state(a, now, false) {
		case meshv1.NodeState_NODE_STATE_DEPARTED:
			delete(r.peers, name)
			changes = append(changes, change{n, false, false})
		case meshv1.NodeState_NODE_STATE_MAINTENANCE:
			changes = append(changes, change{n, true, true})
		default:
			changes = append(changes, change{n, true, false})
		}
	}
	r.mu.Unlock()
	for _, c := range changes {
		if !c.in {
			r.cfg.Probes.Remove(c.n.Name)
			continue
		}
		if _, _, err := r.cfg.Probes.Upsert(probePeer(c.n, c.cordon)); err != nil {
			r.log.Warn("node left out of the probe plans", "node", c.n.Name, "err", err)
		}
	}
}

// PlanVersion returns the probe plan version node's agent acknowledged (0:
// none, or not connected).
func (r *Registry) PlanVersion(node string) uint64 {
	r.mu.Lock()
	s, ok := r.sessions[node]
	r.mu.Unlock()
	if !ok {
		return 0
	}
	return s.planVersion.Load()
}

// PlansAcked counts the connected agents that acknowledged a probe plan.
func (r *Registry) PlansAcked() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, s := range r.sessions {
		if s.planVersion.Load() > 0 {
			n++
		}
	}
	return n
}

// IsPeer reports whether name may be a peer of a probe report: a node in
// the probe plans, or a known agent (every agent seen, loaded from the
// store at start). After a coordinator restart agents send again the
// reports it had not acknowledged, naming peers that have not registered
// again yet: their summaries must be stored, not dropped.
func (r *Registry) IsPeer(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.peers[name]; ok {
		return true
	}
	_, ok := r.known[name]
	return ok
}

// reportAck queues a report's seq for the next ReportAck; it never
// blocks and may be called from any goroutine.
func (s *session) reportAck(seq uint64) {
	s.mu.Lock()
	s.reportAcks = append(s.reportAcks, seq)
	s.mu.Unlock()
	signal(s.reportAcksDirty)
}

// sendReportAcks sends every queued report acknowledgement.
func sendReportAcks(s *session, send func(*agentv1.ConnectResponse) error) error {
	for {
		s.mu.Lock()
		seqs := queue.TakeFront(&s.reportAcks, maxReportAckBatch)
		s.mu.Unlock()
		if len(seqs) == 0 {
			return nil
		}
		if err := send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_ReportAck{ReportAck: &agentv1.ReportAck{Seqs: seqs}}}); err != nil {
			return err
		}
	}
}

// probeReport hands a report of s's agent to the sink. A report not
// taken is logged (at most one line per node a minute) and not
// acknowledged: the agent sends it again. A report refused for good
// (ErrReportRefused) was acknowledged by the sink and proves nothing.
func (r *Registry) probeReport(s *session, rep *agentv1.ProbeReport) {
	if r.cfg.Reports == nil {
		return
	}
	seq := rep.GetSeq()
	err := r.cfg.Reports.Report(s.node.Name, rep, func() { s.reportAck(seq) })
	if err == nil {
		r.prove(s, "probe report")
		return
	}
	if errors.Is(err, ErrReportRefused) {
		return // acknowledged and logged by the sink
	}
	r.warn.Warn(r.log, s.node.Name, "probe report not taken; the agent sends it again", "seq", seq, "err", err)
}

// checkProbeRegistration checks the probe fields of a Register into n.
func checkProbeRegistration(reg *agentv1.Register, n *Node) error {
	for _, p := range []struct {
		field string
		v     uint32
		slot  *uint16
	}{{"probe_port", reg.GetProbePort(), &n.ProbePort}, {"http_port", reg.GetHttpPort(), &n.HTTPPort}} {
		if p.v > 65535 {
			return fmt.Errorf("%s %d is not a port (0 or 1..65535)", p.field, p.v)
		}
		*p.slot = uint16(p.v)
	}
	for i, a := range reg.GetAddresses() {
		m := a.GetMtuBytes()
		if m != 0 && (m < protocol.MinMTUBytes || m > protocol.MaxMTUBytes) {
			return fmt.Errorf("addresses[%d].mtu_bytes %d: want 0 (unknown) or %d to %d", i, m, protocol.MinMTUBytes, protocol.MaxMTUBytes)
		}
		ip, _ := netip.ParseAddr(a.GetIp())
		switch ip {
		case n.HostIP: // the MTUs are the primary addresses' interfaces'
			n.HostMTU = m
		case n.PodIP:
			n.PodMTU = m
		}
	}
	return nil
}
