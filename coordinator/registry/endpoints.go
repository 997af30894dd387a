package registry

import agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"

// endpoints builds the Endpoints message of the connected nodes; for a
// session that follows the probe plans, the external targets only (its
// plan gives it the nodes).
func (r *Registry) endpoints(s *session) *agentv1.Endpoints {
	ep := &agentv1.Endpoints{}
	if s.follower != nil {
		ep.ExternalTargets = r.cfg.ExternalTargets
		return ep
	}
	for _, n := range r.Ready() {
		r.mu.Lock()
		a := r.known[n.Name]
		r.mu.Unlock()
		if a == nil {
			continue
		}
		ep.Nodes = append(ep.Nodes, &agentv1.NodeEndpoint{NodeName: n.Name, Addresses: a.GetAddresses(), ServiceIp: a.GetServiceIp()})
	}
	ep.ExternalTargets = r.cfg.ExternalTargets // never modified after New
	return ep
}

// announceEndpoints tells every session that does not follow the probe
// plans to send the current endpoints (followers learn the nodes from
// their plans' deltas).
func (r *Registry) announceEndpoints() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.legacy == 0 {
		return // every session follows a plan: O(1) per registration
	}
	for _, s := range r.sessions {
		if s.follower != nil {
			continue
		}
		select {
		case s.endpointsDirty <- struct{}{}:
		default: // already pending
		}
	}
}
