package registry

import (
	"slices"
	"strings"

	"github.com/meshperf/meshperf/coordinator/protoconv"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// endpoints builds the Endpoints message of the connected nodes, each with
// its server ports in force. A session that follows the probe plans gets
// the external targets and only the nodes whose iperf3 or qperf ports are
// not the defaults: its plan gives it the nodes' addresses and HTTP ports
// but no server ports, and its agent takes a plan peer that no Endpoints
// lists for one on the default ports.
func (r *Registry) endpoints(s *session) *agentv1.Endpoints {
	ep := &agentv1.Endpoints{}
	var nodes []Node
	if s.follower != nil {
		r.mu.Lock()
		for c := range r.custom {
			nodes = append(nodes, c.node)
		}
		r.mu.Unlock()
		slices.SortFunc(nodes, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	} else {
		nodes = r.Ready()
	}
	for _, n := range nodes {
		r.mu.Lock()
		a := r.known[n.Name]
		r.mu.Unlock()
		if a == nil {
			continue
		}
		ep.Nodes = append(ep.Nodes, nodeEndpoint(n, protoconv.Clones(a.GetAddresses()), a.GetServiceIp()))
	}
	ep.ExternalTargets = r.cfg.ExternalTargets // never modified after New
	return ep
}

// announceEndpoints tells the sessions whose Endpoints list changed
// node n's arrival or departure to send the current endpoints: those that
// do not follow the probe plans (followers learn the nodes from their
// plans' deltas), and the followers too if n's server ports are not the
// defaults.
func (r *Registry) announceEndpoints(n Node) {
	all := !n.defaultPorts()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.legacy == 0 && !all {
		return // every session follows a plan: O(1) per registration
	}
	for _, s := range r.sessions {
		if s.follower != nil && !all {
			continue
		}
		select {
		case s.endpointsDirty <- struct{}{}:
		default: // already pending
		}
	}
}
