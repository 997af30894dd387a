package registry

import "slices"

// This file tracks the registrations in progress, for the pruning of the
// nodes' Services (coordinator/kube): a registration creates its node's
// Service (Config.ServiceIPs) before its node is known, and a prune must
// not take it for a departed node's.

// markRegistering counts a registration of node as in progress until the
// returned function is called.
func (r *Registry) markRegistering(node string) (done func()) {
	r.mu.Lock()
	if r.registering == nil {
		r.registering = map[string]int{}
	}
	r.registering[node]++
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		if r.registering[node]--; r.registering[node] <= 0 {
			delete(r.registering, node)
		}
		r.mu.Unlock()
	}
}

// Registering returns, sorted, the nodes whose registration is in
// progress: past its check, before its session is attached or refused.
// Their Config.ServiceIPs call may have run already, while Known does not
// list them yet; whoever prunes the nodes' Services keeps these too.
func (r *Registry) Registering() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.registering))
	for n := range r.registering {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
