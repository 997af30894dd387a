package registry

import (
	"context"
	"slices"
	"sync"
)

// This file tracks the registrations in progress. A registration creates
// or updates its node's Service (Config.ServiceIPs) before its node is
// known: a prune of the nodes' Services (coordinator/kube) must not take
// it for a departed node's, and two registrations of one node (an agent
// restarting while its last Register is still in flight) take turns, so
// that the one attached last is the one whose ports its Service carries
// and whose record is stored.

// registration is a node's registrations in progress.
type registration struct {
	// n counts them, the one holding turn and those waiting for it;
	// guarded by Registry.mu.
	n int
	// turn holds a token while one of them is between its ServiceIPs call
	// and its attach or refusal (capacity 1).
	turn chan struct{}
}

// markRegistering counts a registration of node as in progress, then
// waits for its turn: until every registration of node that came before
// it has attached or been refused. It returns ctx's error if ctx ends
// first (the registration is then no longer counted); otherwise done ends
// the turn and the count, and calling it again does nothing.
func (r *Registry) markRegistering(ctx context.Context, node string) (done func(), err error) {
	r.mu.Lock()
	if r.registering == nil {
		r.registering = map[string]*registration{}
	}
	reg := r.registering[node]
	if reg == nil {
		reg = &registration{turn: make(chan struct{}, 1)}
		r.registering[node] = reg
	}
	reg.n++
	r.mu.Unlock()
	uncount := func() {
		r.mu.Lock()
		if reg.n--; reg.n == 0 {
			delete(r.registering, node)
		}
		r.mu.Unlock()
	}
	select {
	case reg.turn <- struct{}{}:
	case <-ctx.Done():
		uncount()
		return nil, ctx.Err()
	}
	return sync.OnceFunc(func() {
		<-reg.turn
		uncount()
	}), nil
}

// registeringLocked reports whether a registration of node is in
// progress. Caller holds r.mu.
func (r *Registry) registeringLocked(node string) bool { return r.registering[node] != nil }

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
