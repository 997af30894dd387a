package registry

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/tick"
)

// This file holds a node's service IP in a cluster: the ClusterIP of the
// coordinator's own Service for the node (Config.ServiceIPs), never the
// agent's word.

// ServiceIPFunc returns the ClusterIP that fronts node's pod endpoint at
// podIP on the ports of the servers its agent registered, creating or
// updating what it needs to.
type ServiceIPFunc func(ctx context.Context, node string, podIP netip.Addr, ports protocol.ServerPorts) (netip.Addr, error)

// serviceIPTimeout bounds a ServiceIPs call, well under the agents' wait
// for the answer to their Register.
const serviceIPTimeout = 10 * time.Second

// resolveServiceIP sets n.ServiceIP in a cluster (Config.ServiceIPs or
// AddressPolicy.Cluster set): to the ClusterIP of the coordinator's own
// Service for the node, never to the agent's, which a rogue agent could
// point at any address that all the others would then test. Without a pod
// endpoint, without a ClusterIP lookup, or when the lookup fails or finds
// none, the node has no service IP (logged with why); retry is true in the
// last two cases, where asking again later may get one (retryServiceIP).
// Outside a cluster the agent's service IP is kept.
func (r *Registry) resolveServiceIP(ctx context.Context, n Node) (_ Node, retry bool) {
	if r.cfg.ServiceIPs == nil && r.cfg.Addresses.Cluster == nil {
		return n, false
	}
	agentIP := n.ServiceIP
	// The lookup gives one ClusterIP, of the pod IP's family: an IPv6
	// ClusterIP beside it is the agent's word, never taken in a cluster.
	n.ServiceIP, n.ServiceIPv6 = netip.Addr{}, netip.Addr{}
	// drop leaves the node without a service IP. A lookup that failed is
	// retried (an error); a node that cannot have one is only a warning,
	// and only if its agent claimed one.
	drop := func(retry bool, why string, args ...any) (Node, bool) {
		level := slog.LevelWarn
		if retry {
			level = slog.LevelError
		}
		if agentIP.IsValid() || retry {
			r.log.Log(ctx, level, why+"; the node gets no service IP (the agent's is never taken in a cluster)",
				append([]any{"node", n.Name, "agent_service_ip", agentIP}, args...)...)
		}
		return n, retry
	}
	switch {
	case !n.PodIP.IsValid():
		return drop(false, "the node registered no pod address, so no Service fronts it")
	case r.cfg.ServiceIPs == nil:
		return drop(false, "the coordinator looks up no ClusterIPs")
	}
	ip, err := r.lookUpServiceIP(ctx, n)
	switch {
	case err != nil:
		return drop(true, "no ClusterIP for the node's pod endpoint, asking again later", "pod_ip", n.PodIP, "err", err)
	case agentIP.IsValid() && agentIP != ip:
		r.log.Warn("the agent's service IP is not its node's ClusterIP; using the ClusterIP", "node", n.Name,
			"agent_service_ip", agentIP, "cluster_ip", ip)
	}
	n.ServiceIP = ip
	return n, false
}

// lookUpServiceIP is one Config.ServiceIPs call for n, bounded by
// serviceIPTimeout; a Service without a ClusterIP is an error.
func (r *Registry) lookUpServiceIP(ctx context.Context, n Node) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, serviceIPTimeout)
	defer cancel()
	ip, err := r.cfg.ServiceIPs(ctx, n.Name, n.PodIP, n.serverPorts())
	if err == nil && !ip.IsValid() {
		err = errors.New("the node's Service has no ClusterIP")
	}
	return ip, err
}

// retryServiceIP asks Config.ServiceIPs again for the node of s, a
// session whose registration got no ClusterIP (resolveServiceIP's retry),
// after Config.ServiceIPRetry and then after twice the last wait, up to
// MaxServiceIPRetry, each wait drawn from half to one and a half times
// it, until it gets one, s is no longer its node's session, or ctx ends. Each call takes the
// node's registration turn (markRegistering), as a registration does, so
// that it never repoints the Service with ports an agent has since
// changed, and a prune keeps the Service. The ClusterIP it gets becomes
// the node's as if it had registered with it (setServiceIP). The caller
// ends ctx before it detaches s.
func (r *Registry) retryServiceIP(ctx context.Context, s *session) {
	wait := r.cfg.ServiceIPRetry
	for attempt := 1; ; attempt++ {
		jittered := wait/2 + time.Duration(rand.Int64N(int64(wait)+1)) // half to one and a half: a fleet's retries spread
		if tick.Sleep(ctx, jittered) != nil {
			return
		}
		done, err := r.markRegistering(ctx, s.node.Name)
		if err != nil {
			return
		}
		r.mu.Lock()
		n, current := s.node, r.sessions[s.node.Name] == s
		r.mu.Unlock()
		if !current {
			done()
			return
		}
		ip, err := r.lookUpServiceIP(ctx, n)
		if err == nil {
			r.setServiceIP(ctx, s, ip)
			done()
			return
		}
		done()
		wait = min(2*wait, MaxServiceIPRetry)
		r.warn.Warn(r.log, n.Name, "still no ClusterIP for the node's pod endpoint", "attempt", attempt, "next_in", wait, "err", err)
	}
}

// setServiceIP makes ip the service IP of the node of s, its current
// session, which had none: in the address index, the stored record, the
// probe plans and the other agents' Endpoints. An ip that is another
// connected node's host or pod IP is refused, logged, as it is at
// registration.
func (r *Registry) setServiceIP(ctx context.Context, s *session, ip netip.Addr) {
	r.mu.Lock()
	a := r.known[s.node.Name]
	if r.sessions[s.node.Name] != s || a == nil {
		r.mu.Unlock()
		return
	}
	n := s.node
	n.ServiceIP = ip
	if err := r.conflictsLocked(n); err != nil {
		r.mu.Unlock()
		r.log.Error("the ClusterIP found on retry is refused; the node keeps no service IP", "node", n.Name, "cluster_ip", ip, "err", err)
		return
	}
	s.node.ServiceIP = ip // the only field of a session's node that changes: readers of it hold r.mu
	r.addrs[ip] = append(r.addrs[ip], s)
	a = cloneAgent(a) // a new record, not an edit (storeRecord)
	a.ServiceIp = ip.String()
	r.known[n.Name] = a
	r.mu.Unlock()
	r.log.Info("the node got its ClusterIP on retry", "node", n.Name, "service_ip", ip)
	r.storeRecord(ctx, n.Name, r.joinIfConnected(n))
	r.announceEndpoints(n)
}
