package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/stringers"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// maxWorkTime caps any work's deadline, whatever the coordinator asks.
const maxWorkTime = 15 * time.Minute

// handleWork carries out one Work that arrived at arrived and always
// answers it (handle bounds the answer).
func (a *Agent) handleWork(ctx context.Context, w *agentv1.Work, arrived time.Time) *agentv1.WorkResult {
	ans, ok := protocol.StartAnswer(w, arrived)
	if !ok {
		return ans.Result
	}
	id, deadline, res, fail := ans.ID, ans.Deadline, ans.Result, ans.Fail
	if now := time.Now(); !deadline.After(now) {
		// Nothing can be done in time. A stop is cleanup that never hurts:
		// do it anyway, so that a late order does not leave a server up.
		note := ""
		if _, ok := w.GetAction().(*agentv1.Work_StopServer); ok && a.servers.Stop(id) == nil {
			note = "; its server was stopped anyway"
		}
		late, _ := ans.Late(now, note)
		return late
	}
	if limit := time.Now().Add(maxWorkTime); deadline.After(limit) {
		deadline = limit
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	log := a.log.With("work_id", id)

	switch act := w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		st, err := a.startServer(ctx, id, act.StartServer)
		if err != nil {
			log.Warn("start server", "tool", act.StartServer.GetTool(), "err", err)
			return fail(serverStatus(err), "%v", err)
		}
		res.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: st}
	case *agentv1.Work_StopServer:
		if err := a.servers.Stop(id); err != nil && !errors.Is(err, servers.ErrUnknown) {
			return fail(measurev1.Status_STATUS_SERVER_ERROR, "%v", err)
		}
	case *agentv1.Work_RunClient:
		results := a.runClient(ctx, act.RunClient)
		res.Outcome = &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: results}}
		for _, r := range results {
			if r.GetStatus() != measurev1.Status_STATUS_OK {
				log.Info("client failed", "status", r.GetStatus(), "message", r.GetMessage())
				return fail(r.GetStatus(), "%s", r.GetMessage())
			}
		}
	}
	res.Status = measurev1.Status_STATUS_OK
	return res
}

func (a *Agent) startServer(ctx context.Context, testID string, s *agentv1.StartServer) (*agentv1.ServerStarted, error) {
	if s.GetTool() == measurev1.Tool_TOOL_CURL || s.GetTool() == measurev1.Tool_TOOL_AB {
		// The HTTP target is always up on every network the agent serves.
		if _, ok := a.cfg.netNS()[s.GetNetwork()]; !ok {
			return nil, fmt.Errorf("network %v is not served by this agent", s.GetNetwork())
		}
		return &agentv1.ServerStarted{Port: a.cfg.HTTPPort}, nil
	}
	st, err := a.servers.Start(ctx, testID, s.GetTool(), s.GetNetwork())
	if err != nil {
		return nil, err
	}
	return &agentv1.ServerStarted{Port: st.Port, DataPort: st.DataPort, ToolVersion: a.toolVersion(ctx, s.GetTool())}, nil
}

// toolVersion is the version line the runner detected for tool, or "".
func (a *Agent) toolVersion(ctx context.Context, tool measurev1.Tool) string {
	for _, t := range a.runner.Tools(ctx) {
		if t.GetTool() == tool {
			return t.GetVersion()
		}
	}
	return ""
}

func serverStatus(err error) measurev1.Status {
	switch {
	case errors.Is(err, servers.ErrBusy):
		return measurev1.Status_STATUS_BUSY
	case errors.Is(err, proc.ErrNotFound):
		return measurev1.Status_STATUS_TOOL_MISSING
	case errors.Is(err, servers.ErrStopped):
		return measurev1.Status_STATUS_CANCELED
	case errors.Is(err, context.DeadlineExceeded):
		return measurev1.Status_STATUS_TIMEOUT
	}
	return measurev1.Status_STATUS_SERVER_ERROR
}

// runClient checks the client's destination (clientRun), then runs the
// client, at most MaxClients at once.
func (a *Agent) runClient(ctx context.Context, rc *agentv1.RunClient) []*measurev1.Result {
	refuse := func(st measurev1.Status, format string, args ...any) []*measurev1.Result {
		return []*measurev1.Result{{Spec: rc.GetSpec(), Status: st, Message: fmt.Sprintf(format, args...), TargetAddress: rc.GetTargetIp()}}
	}
	run, st, msg := a.clientRun(ctx, rc)
	if st != measurev1.Status_STATUS_OK {
		return refuse(st, "%s", msg)
	}
	if !a.takeSlot(ctx) {
		return refuse(slotStatus(ctx), "no free client slot before the deadline (%d of %d clients running)", len(a.clients), cap(a.clients))
	}
	defer func() { <-a.clients }()
	return run(ctx)
}

// clientRun checks where rc's client goes (endpointClient or
// externalClient, as testspec.ClientDestination reads rc) and returns how
// to run it, or a failure status and its message.
func (a *Agent) clientRun(ctx context.Context, rc *agentv1.RunClient) (run func(context.Context) []*measurev1.Result, st measurev1.Status, msg string) {
	check := testspec.Pick(testspec.ClientDestination(rc.GetExternalTarget()), a.endpointClient, a.externalClient)
	return check(ctx, rc)
}

// externalClient is clientRun for a client that names an external
// target: it runs against the address the target's entry resolves to
// (see Agent.external), which needs to be no registered endpoint; no
// ClusterIP wait applies to it.
func (a *Agent) externalClient(ctx context.Context, rc *agentv1.RunClient) (run func(context.Context) []*measurev1.Result, st measurev1.Status, msg string) {
	ext, st, msg := a.external(ctx, rc)
	if st != measurev1.Status_STATUS_OK {
		return nil, st, msg
	}
	return func(ctx context.Context) []*measurev1.Result { return a.runner.RunExternal(ctx, rc, ext) }, st, ""
}

// endpointClient is clientRun for a client to a node: it goes to
// target_ip, which must be a registered endpoint or allowlisted, on a
// port it serves.
func (a *Agent) endpointClient(ctx context.Context, rc *agentv1.RunClient) (run func(context.Context) []*measurev1.Result, st measurev1.Status, msg string) {
	// No allowlist makes the unspecified, a multicast or the broadcast
	// address a target.
	target, err := protocol.ParseEndpointIP(rc.GetTargetIp())
	if err != nil {
		return nil, measurev1.Status_STATUS_INVALID, fmt.Sprintf("target_ip: %v", err)
	}
	if !a.targets.allowed(target) {
		return nil, measurev1.Status_STATUS_INVALID, fmt.Sprintf(
			"target_ip %s refused: it is neither a registered endpoint nor in the allowlist; allowed: %s", target, a.targets)
	}
	if err := a.targets.checkPort(target, rc); err != nil {
		return nil, measurev1.Status_STATUS_INVALID, err.Error()
	}
	if a.targets.isService(target) && rc.GetPort() != 0 && rc.GetPort() <= 65535 && probeSafe(rc.GetSpec().GetTest()) {
		// A ClusterIP answers only once this node's kube-proxy has
		// programmed its Service: wait for that rather than measure it.
		// The client runs either way, and says in its own words what
		// fails.
		ap := netip.AddrPortFrom(target, uint16(rc.GetPort()))
		if err := a.runner.WaitConnectable(ctx, rc.GetNetwork(), ap, serviceWait); err != nil {
			a.log.Warn("service IP not connectable before the client; running it anyway", "target", ap, "err", err)
		}
	}
	return func(ctx context.Context) []*measurev1.Result { return a.runner.Run(ctx, rc) }, measurev1.Status_STATUS_OK, ""
}

// takeSlot takes a client slot, waiting for one until ctx ends; false
// means none was free in time. The caller gives a slot back with
// <-a.clients.
func (a *Agent) takeSlot(ctx context.Context) bool {
	select {
	case a.clients <- struct{}{}:
		return true
	default: // every slot is taken: wait for one
		select {
		case a.clients <- struct{}{}:
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// slotStatus is the status of a client that got no slot before ctx
// ended: CANCELED if it was canceled (cancel_client, the agent's end),
// else TIMEOUT.
func slotStatus(ctx context.Context) measurev1.Status {
	if errors.Is(ctx.Err(), context.Canceled) {
		return measurev1.Status_STATUS_CANCELED
	}
	return measurev1.Status_STATUS_TIMEOUT
}

// serviceWait bounds the wait for a ClusterIP to accept a TCP connection
// before a client runs against it; it is taken from the coordinator's
// slack on the client's deadline (10 s).
const serviceWait = 5 * time.Second

// targets is the set of addresses clients may send to: every registered
// endpoint (from the coordinator's Endpoints) and the allowlisted CIDRs;
// and the external targets of the last Endpoints, which clients name
// rather than address.
type targets struct {
	allow []netip.Prefix
	// loopback lets Endpoints name loopback addresses: the agent's own
	// host IP is one (a lab or a simulated fleet on one machine).
	loopback bool
	log      *slog.Logger

	mu            sync.RWMutex
	endpoints     map[netip.Addr]bool
	services      map[netip.Addr]bool // the endpoints that are service IPs
	external      map[string]*measurev1.ExternalTarget
	externalNames []string // external's keys, in the coordinator's order
	// planPeers are the peers of the probe plan, by node name, and
	// planAddrs and planServices their addresses (probes.go): endpoints
	// too, for a coordinator that sends a following agent the nodes in
	// its plan only.
	planPeers    map[string]planPeer
	planAddrs    map[netip.Addr]bool
	planServices map[netip.Addr]bool
	// ports and planPorts are the server ports of the endpoints and of
	// the plan's peers, by address (ports.go); ports wins.
	ports, planPorts map[netip.Addr]serverPorts
	// hosts are the host IPs of the endpoints, by node name, and
	// seedPorts the gossip ports the gossip seeds name, by host IP
	// (gossippeers.go).
	hosts     map[string]netip.Addr
	seedPorts map[netip.Addr]map[uint16]bool
}

func newTargets(allow []netip.Prefix, loopback bool, log *slog.Logger) *targets {
	return &targets{allow: allow, loopback: loopback, log: log, endpoints: map[netip.Addr]bool{}}
}

// setEndpoints replaces the registered endpoints with ep's addresses, and
// the external targets with ep's (see externalList). An address that is
// no node's (protocol.ParsePeerIP: unspecified, multicast, broadcast,
// IPv4-mapped, zoned, link-local, a cloud metadata service, loopback but
// in a lab on loopback, or not an IP) is dropped with a warning: the
// probe plans' rule, so that a coordinator cannot aim the clients at the
// node's own services or the metadata service as a peer's address.
func (t *targets) setEndpoints(ep *agentv1.Endpoints) {
	m, svc := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, n := range ep.GetNodes() {
		type addr struct{ kind, ip string }
		var addrs []addr
		for _, s := range []string{n.GetServiceIp(), n.GetServiceIpv6()} {
			if s != "" {
				addrs = append(addrs, addr{"service IP", s})
			}
		}
		for _, a := range n.GetAddresses() {
			addrs = append(addrs, addr{a.GetNetwork().String(), a.GetIp()})
		}
		for _, a := range addrs {
			ip, err := protocol.ParsePeerIP(a.ip, t.loopback)
			if err != nil {
				t.log.Warn("coordinator sent an endpoint address that is no target; dropped",
					"endpoint_node", n.GetNodeName(), "address", a.ip, "kind", a.kind, "err", err)
				continue
			}
			m[ip] = true
			if a.kind == "service IP" {
				svc[ip] = true
			}
		}
	}
	ext, names := t.externalList(ep.GetExternalTargets())
	ports, hosts := endpointPorts(ep), endpointHosts(ep)
	t.mu.Lock()
	t.endpoints, t.services, t.ports, t.hosts = m, svc, ports, hosts
	t.external, t.externalNames = ext, names
	t.mu.Unlock()
}

// maxListed bounds the registered endpoints a refusal lists.
const maxListed = 8

// String describes the allowed set, for a refusal: the registered
// endpoints (the first maxListed, sorted) and the allowlisted CIDRs.
func (t *targets) String() string {
	t.mu.RLock()
	eps := slices.Collect(maps.Keys(t.endpoints))
	for ip := range t.planAddrs {
		if !t.endpoints[ip] {
			eps = append(eps, ip)
		}
	}
	t.mu.RUnlock()
	slices.SortFunc(eps, netip.Addr.Compare)
	var b strings.Builder
	b.WriteString("registered endpoints ")
	switch {
	case len(eps) == 0:
		b.WriteString("none (the coordinator has sent none yet)")
	case len(eps) > maxListed:
		fmt.Fprintf(&b, "%s and %d more", stringers.Join(eps[:maxListed], ", ", ""), len(eps)-maxListed)
	default:
		b.WriteString(stringers.Join(eps, ", ", ""))
	}
	b.WriteString("; --allow-target ")
	if len(t.allow) == 0 {
		b.WriteString("none")
	}
	for i, p := range t.allow {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// probeSafe reports whether a bare TCP connect to the test's server (the
// wait for a ClusterIP) leaves the server serving. iperf3's server is
// one-off (-s -1): it takes the probe for its one test and exits, and the
// real client is refused. qperf's and the HTTP target keep listening.
func probeSafe(t measurev1.Test) bool {
	return testspec.Tool(t) != measurev1.Tool_TOOL_IPERF3
}

// isService reports whether ip is a node's service IP (a ClusterIP).
func (t *targets) isService(ip netip.Addr) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.services[ip] || t.planServices[ip]
}

func (t *targets) allowed(ip netip.Addr) bool {
	t.mu.RLock()
	ok := t.endpoints[ip] || t.planAddrs[ip]
	t.mu.RUnlock()
	if ok {
		return true
	}
	for _, p := range t.allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
