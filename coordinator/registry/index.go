package registry

import "slices"

// The registry's indexes of its connected sessions, kept under its mu by
// attach and detach: their addresses (for the conflict check), the count
// of sessions without a probe plan, and the gossip reporters.

// isReporter says whether s's agent is to send gossip views.
func (r *Registry) isReporter(s *session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return s.reporter
}

// promoteLocked makes quiet gossiping sessions reporters while there are
// fewer than Config.GossipReporters; r.mu is held. It costs O(sessions),
// once per reporter that leaves.
func (r *Registry) promoteLocked() {
	if r.cfg.GossipReporters < 0 || r.reporters >= r.cfg.GossipReporters {
		return
	}
	for _, s := range r.sessions {
		if s.node.GossipPort == 0 || s.reporter {
			continue
		}
		s.reporter = true
		r.reporters++
		signal(s.reportDirty)
		if r.reporters >= r.cfg.GossipReporters {
			return
		}
	}
}

// unindexLocked takes s, no longer its node's current session, out of
// the address index, the custom ports and the legacy and reporter counts; r.mu is held.
func (r *Registry) unindexLocked(s *session) {
	for _, a := range s.node.addrs() {
		kept := slices.DeleteFunc(r.addrs[a], func(o *session) bool { return o == s })
		if len(kept) == 0 {
			delete(r.addrs, a)
		} else {
			r.addrs[a] = kept
		}
	}
	if s.follower == nil {
		r.legacy--
	}
	delete(r.custom, s)
	if s.reporter {
		s.reporter = false
		r.reporters--
	}
}

// indexLocked adds s, just made its node's current session, to the
// address index, the custom ports and the legacy count; r.mu is held.
func (r *Registry) indexLocked(s *session) {
	for _, a := range s.node.addrs() {
		r.addrs[a] = append(r.addrs[a], s)
	}
	if s.follower == nil {
		r.legacy++
	}
	if !s.node.defaultPorts() {
		r.custom[s] = struct{}{}
	}
}
