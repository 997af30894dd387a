package agent

import (
	"net/netip"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file gives the agent's gossip the registered nodes
// (gossip.Gossip.SetRegistered): the nodes of the coordinator's Endpoints
// and of the probe plan, each at its host IP. The gossip port of a node is
// the one a gossip seed (Registered.gossip_seeds: "host_ip:port") names
// for its host IP, else the agent's own --gossip-port (a DaemonSet's
// agents share it); any port for a host IP of several registered nodes, or
// named by seeds with several ports (agents on one machine: a lab). Until
// the agent holds a probe plan or Endpoints that list a node, its gossip
// checks members' address classes only.

// endpointHosts returns the host IPs of ep's nodes, by node name; an
// address that is no endpoint (protocol.ParseEndpointIP) is left out, as
// setEndpoints drops it.
func endpointHosts(ep *agentv1.Endpoints) map[string]netip.Addr {
	hosts := map[string]netip.Addr{}
	for _, n := range ep.GetNodes() {
		for _, a := range n.GetAddresses() {
			if a.GetNetwork() != measurev1.Network_NETWORK_HOST {
				continue
			}
			if ip, err := protocol.ParseEndpointIP(a.GetIp()); err == nil {
				hosts[n.GetNodeName()] = ip
				break
			}
		}
	}
	return hosts
}

// setGossipSeeds records the gossip ports the seeds name, by host IP; a
// seed that is no "ip:port" is ignored.
func (t *targets) setGossipSeeds(seeds []string) {
	ports := map[netip.Addr]map[uint16]bool{}
	for _, s := range seeds {
		ap, err := netip.ParseAddrPort(s)
		if err != nil || ap.Port() == 0 {
			continue
		}
		ip := ap.Addr().Unmap()
		if ports[ip] == nil {
			ports[ip] = map[uint16]bool{}
		}
		ports[ip][ap.Port()] = true
	}
	t.mu.Lock()
	t.seedPorts = ports
	t.mu.Unlock()
}

// gossipRegistered returns the registered nodes at their gossip
// addresses (port 0: any), ownPort being the agent's gossip port; nil
// while neither a probe plan nor Endpoints listing a node came.
func (t *targets) gossipRegistered(ownPort uint16) map[string]netip.AddrPort {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.planPeers == nil && len(t.hosts) == 0 {
		return nil
	}
	hosts := map[string]netip.Addr{}
	for name, pp := range t.planPeers {
		if pp.addrs[0].IsValid() {
			hosts[name] = pp.addrs[0]
		}
	}
	for name, ip := range t.hosts { // Endpoints win: they carry what the node registered
		hosts[name] = ip
	}
	shared := map[netip.Addr]int{}
	for _, ip := range hosts {
		shared[ip]++
	}
	reg := make(map[string]netip.AddrPort, len(hosts))
	for name, ip := range hosts {
		port := ownPort
		switch seeds := t.seedPorts[ip]; {
		case shared[ip] > 1 || len(seeds) > 1:
			port = 0
		case len(seeds) == 1:
			for p := range seeds {
				port = p
			}
		}
		reg[name] = netip.AddrPortFrom(ip, port)
	}
	return reg
}

// updateGossipRegistered hands the gossip the registered nodes, if it
// runs and they are known.
func (a *Agent) updateGossipRegistered() {
	if a.gossip == nil {
		return
	}
	if reg := a.targets.gossipRegistered(uint16(a.cfg.GossipPort)); reg != nil {
		a.gossip.SetRegistered(reg)
	}
}
