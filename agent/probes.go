package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/agent/probe"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// interfaceMTU returns the MTU of the interface that holds ip in the
// network namespace at path ("" for the agent's own), at most 65535 (the
// largest IPv4 datagram), or 0 if unknown.
func interfaceMTU(path string, ip netip.Addr) uint32 {
	var mtu uint32
	find := func() error {
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		for _, ifc := range ifs {
			addrs, err := ifc.Addrs()
			if err != nil {
				continue
			}
			for _, a := range addrs {
				if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr() == ip {
					// Loopback's 65536 is more than an IPv4 datagram can be.
					mtu = uint32(min(max(ifc.MTU, 0), 65535))
					return nil
				}
			}
		}
		return nil
	}
	if path == "" {
		_ = find()
	} else {
		_ = netns.Do(path, find)
	}
	return mtu
}

// newProber makes the agent's continuous prober over its networks.
func (a *Agent) newProber() (*probe.Prober, error) {
	cfg := probe.Config{
		Node:          a.cfg.NodeName,
		Host:          probe.Network{Net: measurev1.Network_NETWORK_HOST, IP: a.cfg.HostIP, IPv6: a.cfg.HostIPv6, MTU: int(a.hostMTU)},
		Logger:        a.log.With("component", "probe"),
		Report:        a.probeReported,
		NextSeq:       func() uint64 { return 0 }, // the spool numbers reports (PutReport)
		AllowLoopback: a.cfg.HostIP.IsLoopback(),
	}
	if a.cfg.PodIP.IsValid() {
		cfg.Pod = &probe.Network{Net: measurev1.Network_NETWORK_POD, NetNS: a.cfg.PodNetNS, IP: a.cfg.PodIP, IPv6: a.cfg.PodIPv6, MTU: int(a.podMTU)}
	}
	return probe.New(cfg)
}

// startProbing opens the TCP echo responder on each network (each host IP)
// and runs the prober, both in g until its context ends.
func (a *Agent) startProbing(ctx context.Context, g *errgroup.Group) error {
	ls, err := a.listenEcho(netns.Listen)
	if err != nil {
		return err
	}
	a.cfg.ProbePort = uint32(ls[0].Addr().(*net.TCPAddr).Port) // the kernel's pick for 0
	for _, l := range ls {
		g.Go(func() error { return probe.ServeEcho(ctx, l, probe.EchoConfig{}) })
	}
	g.Go(func() error { return a.prober.Run(ctx) })
	return nil
}

// maxEchoPicks bounds the kernel's picks of the echo responder's port
// (listenEcho).
const maxEchoPicks = 8

// errPickAgain: the kernel picked a port the echo responder cannot keep.
var errPickAgain = errors.New("pick again")

// listenEcho opens the TCP echo responder's listeners, all on one port:
// the host IP, the host IPv6 address if any, and the pod network
// namespace if any. The port is ProbePort or, for 0, one the kernel picks
// on the host IP that is none of the agent's other server ports (the
// kernel may hand out a port that an iperf3 or qperf server, which
// listens only while a test runs, is configured to take, and the
// coordinator refuses a Register with two servers on one port) and is
// free on the other listeners too; it gives up after maxEchoPicks picks.
// listen is netns.Listen (a test's to count the picks); the first
// listener is the host IP's.
func (a *Agent) listenEcho(listen func(nsPath, network, address string) (net.Listener, error)) ([]net.Listener, error) {
	for range maxEchoPicks {
		ls, err := a.listenEchoOnce(listen)
		switch {
		case err == nil:
			return ls, nil
		case a.cfg.ProbePort != 0 || !errors.Is(err, errPickAgain) && !errors.Is(err, syscall.EADDRINUSE):
			return nil, err
		}
	}
	return nil, fmt.Errorf("the kernel picked %d times a port that is another server's or taken on another network (other servers: %v)",
		maxEchoPicks, a.echoTaken())
}

// echoTaken are the agent's other server ports.
func (a *Agent) echoTaken() []uint32 {
	return []uint32{a.cfg.HTTPPort, a.cfg.Ports.Iperf3, a.cfg.Ports.Qperf, a.cfg.Ports.QperfData, a.cfg.GossipPort}
}

// listenEchoOnce is one try of listenEcho: with ProbePort 0 it fails with
// errPickAgain if the kernel's pick is another server's port, and with
// EADDRINUSE (wrapped) if it is taken on another listener.
func (a *Agent) listenEchoOnce(listen func(nsPath, network, address string) (net.Listener, error)) (ls []net.Listener, err error) {
	defer func() {
		if err != nil {
			for _, l := range ls {
				_ = l.Close()
			}
			ls = nil
		}
	}()
	host, err := listen("", "tcp", net.JoinHostPort(a.cfg.HostIP.String(), strconv.Itoa(int(a.cfg.ProbePort))))
	if err != nil {
		return nil, err
	}
	ls = append(ls, host)
	port := host.Addr().(*net.TCPAddr).Port
	if a.cfg.ProbePort == 0 && slices.Contains(a.echoTaken(), uint32(port)) {
		return ls, errPickAgain
	}
	type on struct{ nsPath, addr string }
	var others []on
	if a.cfg.HostIPv6.IsValid() {
		others = append(others, on{"", net.JoinHostPort(a.cfg.HostIPv6.String(), strconv.Itoa(port))})
	}
	if a.cfg.PodNetNS != "" {
		others = append(others, on{a.cfg.PodNetNS, net.JoinHostPort("", strconv.Itoa(port))})
	}
	for _, o := range others {
		l, err := listen(o.nsPath, "tcp", o.addr)
		if err != nil {
			return ls, err
		}
		ls = append(ls, l)
	}
	return ls, nil
}

// applyPlan hands a plan to the prober and, once taken, its peers'
// addresses to the targets clients may send to; the answer is the PlanAck.
func (a *Agent) applyPlan(plan *agentv1.ProbePlan) *agentv1.PlanAck {
	v, err := a.prober.Apply(plan)
	if err != nil {
		a.log.Warn("probe plan refused", "version", plan.GetVersion(), "base_version", plan.GetBaseVersion(), "holding", v, "err", err)
		return &agentv1.PlanAck{Version: v, Error: truncate(err.Error(), 512)}
	}
	a.targets.applyPlan(plan)
	a.updateGossipRegistered()
	a.log.Debug("probe plan applied", "version", v, "full", plan.GetBaseVersion() == 0, "upsert", len(plan.GetUpsert()), "remove", len(plan.GetRemove()))
	return &agentv1.PlanAck{Version: v}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// probeReported keeps a report in the spool (which numbers it) and hands
// it to the current session without waiting: a report no session takes now
// goes with the next session's backlog.
func (a *Agent) probeReported(r *agentv1.ProbeReport) {
	a.outMu.Lock()
	seq, err := a.spool.PutReport(r)
	ob := a.current
	a.outMu.Unlock()
	if err != nil {
		a.log.Error("probe report not spooled: lost unless this session delivers it", "err", err)
		return
	}
	if ob == nil {
		return
	}
	select {
	case ob.ch <- &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_ProbeReport{ProbeReport: r}}:
	case <-ob.done:
	default:
		a.log.Warn("session queue full: probe report waits in the spool for the next session", "seq", seq)
	}
}

// applyPlan records the peers of a plan the prober took: their addresses
// are registered endpoints for client runs too.
func (t *targets) applyPlan(plan *agentv1.ProbePlan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if plan.GetBaseVersion() == 0 || t.planPeers == nil {
		t.planPeers = map[string]planPeer{}
	}
	for _, name := range plan.GetRemove() {
		delete(t.planPeers, name)
	}
	for _, p := range plan.GetUpsert() {
		pp := planPeer{http: p.GetHttpPort()}
		for i, s := range []string{p.GetHostIp(), p.GetPodIp(), p.GetServiceIp(), p.GetHostIpv6(), p.GetPodIpv6(), p.GetServiceIpv6()} {
			if s == "" {
				continue
			}
			ip, err := protocol.ParseEndpointIP(s)
			if err != nil {
				continue // the prober refused such a plan already
			}
			pp.addrs[i] = ip
		}
		t.planPeers[p.GetNodeName()] = pp
	}
	t.planAddrs, t.planServices = map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, pp := range t.planPeers {
		for i, ip := range pp.addrs {
			if ip.IsValid() {
				t.planAddrs[ip] = true
				if i == 2 || i == 5 {
					t.planServices[ip] = true
				}
			}
		}
	}
	t.planPorts = planPorts(t.planPeers)
}

// planPeer is a plan peer's host, pod and service IPs, then their IPv6
// counterparts (invalid: none),
// and its HTTP target's port.
type planPeer struct {
	addrs [6]netip.Addr
	http  uint32
}
