package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the agent's Config: its fields, defaults and checks.

// Config configures Run. Addresses are the node's own; the coordinator
// only learns them from the registration.
type Config struct {
	// Coordinator is the gRPC target: "host:port" or "unix:///path".
	Coordinator string
	// NodeName is the Kubernetes node name (DNS-1123 subdomain).
	NodeName string
	// HostIP is the node's address on the host network; required. HostIP,
	// PodIP and ServiceIP follow protocol.ParseEndpointIP (unicast,
	// loopback allowed).
	HostIP netip.Addr
	// PodIP is the node's pod endpoint address; invalid means no pod network.
	PodIP netip.Addr
	// PodNetNS is the pod endpoint's network namespace path
	// (/proc/PID/ns/net, /run/netns/NAME); required with PodIP.
	PodNetNS string
	// EndpointSocket is the path of a unix socket on which the agent
	// learns its pod endpoint from the pod itself (`agent endpoint`, see
	// agent/endpoint): the connected peer's network namespace and IPv4
	// address become PodNetNS and PodIP, and each change of endpoint
	// (admitted, replaced by a restarted pod, withdrawn when its
	// connection closes) ends the session with the coordinator and
	// registers anew with the new addresses. Empty means none. It excludes
	// PodIP and PodNetNS.
	EndpointSocket string
	// ServiceIP is the ClusterIP fronting the pod endpoint; optional.
	ServiceIP netip.Addr
	// HostIPv6, PodIPv6 and ServiceIPv6 are the node's IPv6 addresses on
	// the same networks in a dual-stack cluster, where HostIP, PodIP and
	// ServiceIP are the IPv4 ones; invalid means none (an IPv4-only
	// cluster, or an IPv6-only one, whose addresses are in HostIP, PodIP
	// and ServiceIP). Each must be IPv6 and, when set, its IPv4
	// counterpart must be set and IPv4. PodIPv6 needs PodNetNS.
	HostIPv6, PodIPv6, ServiceIPv6 netip.Addr
	// HTTPPort is the HTTP target's port on both networks; zero means
	// protocol.DefaultHTTPPort, 8080.
	HTTPPort uint32
	// ProbePort is the TCP echo responder's port on both networks, which
	// the other agents' continuous probes connect to (the command's
	// default is protocol.DefaultProbePort, 7947); zero means a port the
	// kernel picks on the host network (none of the other servers' ports),
	// then taken on the pod network too.
	ProbePort uint32
	// Ports are the test servers' pinned ports; a zero field means its
	// default (iperf3 5201, qperf 19765, qperf data 19766). The four ports
	// (HTTPPort included) must differ.
	Ports servers.Ports
	// AllowTargets are extra CIDRs clients may send to besides the
	// registered endpoints; and the only loopback addresses an external
	// target may be or resolve to (never a link-local or cloud metadata
	// address: see protocol.CheckExternalIP).
	AllowTargets []netip.Prefix
	// ExternalCIDRs, if set, are the only addresses an external target
	// (from the coordinator's allowlist) may be or resolve to, besides
	// the refusals of protocol.CheckExternalIP and the loopback rule of
	// AllowTargets: the node's own bound on where a coordinator may send
	// it, e.g. the ranges of the cluster's load balancers. Empty means any
	// address.
	ExternalCIDRs []netip.Prefix
	// LookupNetIP resolves the DNS name of an external target (an entry of
	// the coordinator's Endpoints.external_targets) that a client names;
	// nil means net.DefaultResolver.LookupNetIP. It is called with network
	// "ip" and a context bounded by 5 s (and by the work's deadline); the
	// agent sends to the first IPv4 address of the answer, else the first
	// IPv6 one, that it may send to (no link-local or metadata address,
	// loopback only within AllowTargets). Resolution happens in the agent's own network namespace
	// (the host's), also for a client on the pod network: a pod whose DNS
	// differs from its node's would get another answer. Tests inject a
	// resolver so that they send no DNS query.
	LookupNetIP LookupNetIPFunc
	// StateDir is where the agent records the test servers it runs, so
	// that after a crash its next life kills those still running (see
	// servers.Config.StateDir), and where it keeps the client results the
	// coordinator has not acknowledged (spool.FileName). Empty means no
	// record and no reclaim, and a spool in memory only: unacknowledged
	// results then die with the agent.
	StateDir string
	// SpoolMaxResults bounds the unacknowledged client results the agent
	// keeps; zero means spool.DefaultMaxResults (10,000). When it is full,
	// the oldest is dropped, logged and counted.
	SpoolMaxResults int
	// GossipPort is the UDP and TCP port of the agent's memberlist on
	// HostIP; zero means no gossip. It must differ from the other ports.
	GossipPort uint32
	// GossipKeyFile, if set, is the gossip key file (agent/gossip.ParseKeys:
	// base64 keys of 16, 24 or 32 bytes, one per line, the first the
	// primary): memberlist traffic is then encrypted and authenticated,
	// and the file is re-read while the agent runs (key rotation). Empty
	// means plaintext gossip. A bad file fails Run.
	GossipKeyFile string
	// MaxClients bounds concurrent client runs; zero means 8.
	MaxClients int
	// ReconnectMin and ReconnectMax bound the reconnect backoff; zero means
	// 200 ms and 30 s.
	ReconnectMin, ReconnectMax time.Duration
	// OnReconnectWait, if set, is called with the backoff (before jitter)
	// each time the agent is about to wait to reconnect to the
	// coordinator; nil means none. It is called from the agent's connect
	// loop, one call at a time, and must not block.
	OnReconnectWait func(backoff time.Duration)
	// RegisterTimeout bounds the wait for the coordinator's answer to
	// each Register: without one in time, the session ends and the agent
	// reconnects with backoff (the heartbeat timeout only starts with the
	// answer). Zero means 30 s; negative is an error.
	RegisterTimeout time.Duration
	// ServerLingerMax bounds how long a test server that still runs when
	// a session ends may linger (servers.Config.LingerMax), and
	// ServerLingerIdle how long it may go without a TCP connection while
	// it lingers (servers.Config.LingerIdle). Zero means
	// servers.DefaultLingerMax and servers.DefaultLingerIdle; negative is
	// an error.
	ServerLingerMax, ServerLingerIdle time.Duration
	// TLSCertFile and TLSKeyFile are the agent's client certificate and key
	// (PEM), presented to the coordinator, and TLSCAFile the CA (PEM) that
	// must have signed the coordinator's certificate, which must also be
	// for the host name or IP in Coordinator. All three or none; none means
	// plaintext. A failed TLS handshake is retried like any lost
	// coordinator, and logged at error level with its reason.
	TLSCertFile, TLSKeyFile, TLSCAFile string
	// IdentityTokenFile holds the agent's identity token, its projected
	// service-account token of audience meshperf, which it presents in the
	// metadata of each Connect (read anew each time: the kubelet rotates
	// it) so that the coordinator lets it register as its node. Empty means
	// none (the client certificate, if any, proves the node).
	IdentityTokenFile string
	// DialOptions are extra gRPC dial options, applied after the transport
	// security of the TLS files (or none).
	DialOptions []grpc.DialOption
	// Logger receives everything; nil means discard.
	Logger *slog.Logger
}

// validate fills in the defaults and checks c. Errors name the field, its
// command-line flag, and the value.
func (c *Config) validate() error {
	if c.Coordinator == "" {
		return errors.New("coordinator address (--coordinator) is empty")
	}
	if err := protocol.ValidateNodeName(c.NodeName); err != nil {
		return fmt.Errorf("node name (--node): %w", err)
	}
	if !c.HostIP.IsValid() {
		return errors.New("host IP (--host-ip) is not set")
	}
	for _, a := range []struct {
		name string
		ip   netip.Addr
		v6   netip.Addr
	}{{"host IP (--host-ip)", c.HostIP, c.HostIPv6}, {"pod IP (--pod-ip)", c.PodIP, c.PodIPv6}, {"service IP (--service-ip)", c.ServiceIP, c.ServiceIPv6}} {
		if a.v6.IsValid() {
			if !a.v6.Is6() || a.v6.Is4In6() {
				return fmt.Errorf("%s: second address %s is not IPv6", a.name, a.v6)
			}
			if !a.ip.Is4() {
				return fmt.Errorf("%s: IPv6 address %s given with %v: want one IPv4 and one IPv6 address", a.name, a.v6, a.ip)
			}
			if _, err := protocol.ParseEndpointIP(a.v6.String()); err != nil {
				return fmt.Errorf("%s: %w", a.name, err)
			}
		}
		if !a.ip.IsValid() {
			continue
		}
		if _, err := protocol.ParseEndpointIP(a.ip.String()); err != nil {
			return fmt.Errorf("%s: %w", a.name, err)
		}
	}
	if c.EndpointSocket != "" && (c.PodIP.IsValid() || c.PodNetNS != "") {
		return fmt.Errorf("endpoint socket (--endpoint-socket) %q and pod IP/netns (--pod-ip %q, --pod-netns %q) exclude each other: "+
			"the pod endpoint comes either from the socket or from the flags", c.EndpointSocket, c.PodIP, c.PodNetNS)
	}
	if c.PodIP.IsValid() != (c.PodNetNS != "") {
		return fmt.Errorf("pod IP (--pod-ip) %q and pod netns (--pod-netns) %q go together: set both or neither", c.PodIP, c.PodNetNS)
	}
	if _, err := mtls.AllOrNone(mtls.File{Flag: "tls-cert", Path: c.TLSCertFile}, mtls.File{Flag: "tls-key", Path: c.TLSKeyFile},
		mtls.File{Flag: "tls-ca", Path: c.TLSCAFile}); err != nil {
		return err
	}
	if err := c.validatePorts(); err != nil {
		return err
	}
	if c.MaxClients < 0 {
		return fmt.Errorf("MaxClients %d is negative", c.MaxClients)
	}
	if c.SpoolMaxResults < 0 {
		return fmt.Errorf("SpoolMaxResults %d is negative", c.SpoolMaxResults)
	}
	if c.MaxClients == 0 {
		c.MaxClients = 8
	}
	if c.ReconnectMin < 0 || c.ReconnectMax < 0 {
		return fmt.Errorf("ReconnectMin %v and ReconnectMax %v may not be negative", c.ReconnectMin, c.ReconnectMax)
	}
	if c.ReconnectMin == 0 {
		c.ReconnectMin = 200 * time.Millisecond
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = 30 * time.Second
	}
	if c.ReconnectMin > c.ReconnectMax {
		return fmt.Errorf("ReconnectMin %v is above ReconnectMax %v", c.ReconnectMin, c.ReconnectMax)
	}
	if c.RegisterTimeout < 0 {
		return fmt.Errorf("RegisterTimeout %v is negative", c.RegisterTimeout)
	}
	if c.RegisterTimeout == 0 {
		c.RegisterTimeout = defaultRegisterTimeout
	}
	if c.ServerLingerMax < 0 || c.ServerLingerIdle < 0 {
		return fmt.Errorf("ServerLingerMax %v and ServerLingerIdle %v may not be negative", c.ServerLingerMax, c.ServerLingerIdle)
	}
	if c.ServerLingerMax == 0 {
		c.ServerLingerMax = servers.DefaultLingerMax
	}
	if c.ServerLingerIdle == 0 {
		c.ServerLingerIdle = servers.DefaultLingerIdle
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// validatePorts fills in the default ports and checks that each is a port
// and that no two of them are the same: the servers of one network share
// its ports, and the HTTP target listens for the agent's whole life.
func (c *Config) validatePorts() error {
	if c.HTTPPort == 0 {
		c.HTTPPort = protocol.DefaultHTTPPort
	}
	c.Ports.SetDefaults()
	ports := []struct {
		name string
		port uint32
	}{
		{"HTTP port (--http-port)", c.HTTPPort},
		{"iperf3 port (--iperf3-port)", c.Ports.Iperf3},
		{"qperf port (--qperf-port)", c.Ports.Qperf},
		{"qperf data port (--qperf-data-port)", c.Ports.QperfData},
	}
	if c.GossipPort != 0 {
		ports = append(ports, struct {
			name string
			port uint32
		}{"gossip port (--gossip-port)", c.GossipPort})
	}
	if c.ProbePort != 0 {
		ports = append(ports, struct {
			name string
			port uint32
		}{"probe port (--probe-port)", c.ProbePort})
	}
	for i, p := range ports {
		if p.port > 65535 {
			return fmt.Errorf("%s %d is not a port: want 1..65535", p.name, p.port)
		}
		for _, q := range ports[:i] {
			if p.port == q.port {
				return fmt.Errorf("%s %d is also the %s: each needs its own", p.name, p.port, q.name)
			}
		}
	}
	return nil
}

// netNS maps each network the agent serves to its namespace path.
func (c *Config) netNS() map[measurev1.Network]string {
	m := map[measurev1.Network]string{measurev1.Network_NETWORK_HOST: ""}
	if c.PodNetNS != "" {
		m[measurev1.Network_NETWORK_POD] = c.PodNetNS
	}
	return m
}
