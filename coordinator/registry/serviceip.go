package registry

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
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
// none, the node has no service IP (logged with why). Outside a cluster
// the agent's service IP is kept.
func (r *Registry) resolveServiceIP(ctx context.Context, n Node) Node {
	if r.cfg.ServiceIPs == nil && r.cfg.Addresses.Cluster == nil {
		return n
	}
	agentIP := n.ServiceIP
	// The lookup gives one ClusterIP, of the pod IP's family: an IPv6
	// ClusterIP beside it is the agent's word, never taken in a cluster.
	n.ServiceIP, n.ServiceIPv6 = netip.Addr{}, netip.Addr{}
	drop := func(level slog.Level, why string, args ...any) Node {
		if agentIP.IsValid() || level > slog.LevelWarn {
			r.log.Log(ctx, level, why+"; the node gets no service IP (the agent's is never taken in a cluster)",
				append([]any{"node", n.Name, "agent_service_ip", agentIP}, args...)...)
		}
		return n
	}
	switch {
	case !n.PodIP.IsValid():
		return drop(slog.LevelWarn, "the node registered no pod address, so no Service fronts it")
	case r.cfg.ServiceIPs == nil:
		return drop(slog.LevelWarn, "the coordinator looks up no ClusterIPs")
	}
	ctx, cancel := context.WithTimeout(ctx, serviceIPTimeout)
	defer cancel()
	ip, err := r.cfg.ServiceIPs(ctx, n.Name, n.PodIP, n.serverPorts())
	switch {
	case err != nil:
		return drop(slog.LevelError, "no ClusterIP for the node's pod endpoint", "pod_ip", n.PodIP, "err", err)
	case !ip.IsValid():
		return drop(slog.LevelError, "the node's Service has no ClusterIP", "pod_ip", n.PodIP)
	case agentIP.IsValid() && agentIP != ip:
		r.log.Warn("the agent's service IP is not its node's ClusterIP; using the ClusterIP", "node", n.Name,
			"agent_service_ip", agentIP, "cluster_ip", ip)
	}
	n.ServiceIP = ip
	return n
}
