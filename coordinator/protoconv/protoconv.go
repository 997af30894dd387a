// Package protoconv converts between the coordinator's three protocol
// packages: the agent wire protocol (meshperf.agent.v1), the stored
// records (meshperf.store.v1) and the user API (meshperf.mesh.v1). Their
// shared messages and enums are measure.v1's (a node's addresses and
// tools, the external targets, gossip states, probe kinds): the registry
// copies the messages (Clones) from a registration into a record and from
// a record into the Endpoints and probe plans it sends, and the server
// into its answers. The API's agent is its own: APIAgent builds it from a
// record, field by field. Every function returns nil for a nil or empty
// input slice and never shares a message with its input.
package protoconv

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// Clones returns a deep copy of each message of in: a node's addresses
// and tools and the external targets (measure.v1's, shared by the wire,
// the records and the API) as the registry stores them from a
// registration and sends them on in Endpoints and probe plans, and as the
// server answers ListAgents and ListExternalTargets, so that no message
// is shared between them.
func Clones[M proto.Message](in []M) []M {
	return each(in, proto.CloneOf[M])
}

// APIAgent returns the API view of a stored agent record: every stored
// field. The fields the coordinator derives when it answers (state,
// gossip_state, gossip_alive_by, gossip_dead_by, partition) are left for
// the caller to set. A nil record gives an empty Agent.
func APIAgent(rec *storev1.Agent) *meshv1.Agent {
	a := &meshv1.Agent{
		NodeName: rec.GetNodeName(), Connected: rec.GetConnected(), AgentVersion: rec.GetAgentVersion(),
		ServiceIp: rec.GetServiceIp(), ServiceIpv6: rec.GetServiceIpv6(), Maintenance: rec.GetMaintenance(),
		ProbePort: rec.GetProbePort(), HttpPort: rec.GetHttpPort(),
		Iperf3Port: rec.GetIperf3Port(), QperfPort: rec.GetQperfPort(), QperfDataPort: rec.GetQperfDataPort(),
	}
	if t := rec.GetConnectTime(); t != nil {
		a.ConnectTime = &timestamppb.Timestamp{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	if t := rec.GetLastSeenTime(); t != nil {
		a.LastSeenTime = &timestamppb.Timestamp{Seconds: t.GetSeconds(), Nanos: t.GetNanos()}
	}
	a.Addresses, a.Tools = Clones(rec.GetAddresses()), Clones(rec.GetTools())
	return a
}

// each returns conv of every element of in, in order; nil when in is
// empty (so an empty repeated field stays nil, as proto.Equal and the
// stored bytes expect).
func each[In, Out any](in []In, conv func(In) Out) []Out {
	if len(in) == 0 {
		return nil
	}
	out := make([]Out, len(in))
	for i, x := range in {
		out[i] = conv(x)
	}
	return out
}
