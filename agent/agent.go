// Package agent is meshperf's node agent: it serves an HTTP target on each
// of its networks, dials the coordinator and keeps one stream to it
// (reconnecting with backoff), registers its node, and carries out the
// coordinator's typed work: start and stop test servers, run test clients
// against registered endpoints only, or against the external targets
// (outside the mesh: ping, HTTP, and iperf3 and qperf to the server ports
// the allowlist names for the target, no other port) that the coordinator's last
// Endpoints listed; the agent resolves an external target's DNS name
// itself, in its own (host) network namespace, also for pod-network
// clients, and sends to that address only. Client results are kept in a spool
// (agent/spool) until the coordinator acknowledges them, and sent again
// after every reconnect: a coordinator that restarts loses none. When a
// session ends, the test servers that run linger until their client is
// done (servers.Manager.Linger), so that a test in flight when the
// coordinator went away still ends well; when the agent stops, they stop
// with it. With a gossip port, the agent also joins the memberlist pool of
// the agents (agent/gossip) through the seeds the coordinator names at each
// registration, and reports its view of the pool to the coordinator on
// every change and every few heartbeats; gossip that fails to start is
// logged, and the agent measures without it.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/agent/gossip"
	"github.com/meshperf/meshperf/agent/httptarget"
	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/agent/probe"
	"github.com/meshperf/meshperf/agent/runner"
	"github.com/meshperf/meshperf/agent/servers"
	"github.com/meshperf/meshperf/agent/spool"
	"github.com/meshperf/meshperf/internal/grpcbuf"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

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
	// HTTPPort is the HTTP target's port on both networks; zero means 8080.
	HTTPPort uint32
	// ProbePort is the TCP echo responder's port on both networks, which
	// the other agents' continuous probes connect to (the command's
	// default is DefaultProbePort, 7947); zero means a port the kernel
	// picks on the host network, then taken on the pod network too.
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
		c.HTTPPort = 8080
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

// Agent is a running agent; see Run.
type Agent struct {
	cfg     Config
	log     *slog.Logger
	runner  *runner.Runner
	servers *servers.Manager
	clients chan struct{} // semaphore of MaxClients
	targets *targets
	spool   *spool.Spool
	gossip  *gossip.Gossip // nil: no gossip
	tls     *tlsWatch      // nil: plaintext
	prober  *probe.Prober  // the continuous probes (probes.go)
	// hostMTU and podMTU are the MTUs of the interfaces holding HostIP and
	// PodIP (0: unknown), read at start.
	hostMTU, podMTU uint32

	// runs are the client runs in progress: they outlive the session that
	// ordered them, and Run waits for them.
	runs sync.WaitGroup
	// inFlight are the cancels of those runs (cancel_client).
	inFlight clientRuns
	// outMu orders putting a client result into the spool and handing it to
	// the current session against a new session's reading of the spool:
	// each result is then sent by exactly one of them.
	outMu   sync.Mutex
	current *outbox // the registered session's queue; nil between sessions
}

// outbox is a session's queue of messages to the coordinator.
type outbox struct {
	ch   chan *agentv1.ConnectRequest
	done <-chan struct{} // closed when the session ends
}

// Run runs the agent until ctx ends. First, it kills the test servers that
// a previous life of the agent recorded in StateDir and left running (see
// servers.Manager.Reclaim), and opens its result spool there (in memory if
// StateDir is empty or the spool file is held by another process). It fails
// at once on a bad Config, when an HTTP target cannot listen, or when the
// coordinator refuses the agent for good (protocol version mismatch, bad
// registration); a lost coordinator is retried with exponential backoff and
// jitter. Client runs still going when ctx ends are killed, and Run waits
// for them. With EndpointSocket, Run listens there for the pod endpoint
// (agent/endpoint) and runs the agent anew, with the new pod addresses,
// whenever the endpoint changes.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("agent config: %w", err)
	}
	var files *mtls.Files
	if cfg.TLSCertFile != "" { // a bad certificate fails now, not at the first endpoint
		var err error
		files, err = mtls.Load(mtls.Config{CAFile: cfg.TLSCAFile, CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile,
			Logger: cfg.Logger.With("node", cfg.NodeName)})
		if err != nil {
			return fmt.Errorf("agent config: %w", err)
		}
		if err := checkCertNode(cfg.TLSCertFile, cfg.NodeName, cfg.IdentityTokenFile != "", cfg.Logger.With("node", cfg.NodeName)); err != nil {
			return fmt.Errorf("agent config: %w", err)
		}
	}
	if cfg.IdentityTokenFile != "" { // a missing token fails now, not at each reconnect
		if _, err := readIdentityToken(cfg.IdentityTokenFile); err != nil {
			return fmt.Errorf("agent config: %w", err)
		}
	}
	if cfg.GossipKeyFile != "" && cfg.GossipPort != 0 { // a bad key fails now, not as "gossip off"
		if _, err := gossip.LoadKeys(cfg.GossipKeyFile); err != nil {
			return fmt.Errorf("agent config: --gossip-key-file: %w", err)
		}
	}
	if cfg.EndpointSocket != "" {
		return runEndpoint(ctx, cfg, files)
	}
	return run(ctx, cfg, files, false)
}

// run is Run with cfg validated and its pod endpoint fixed; files are the
// TLS material, kept current (nil: plaintext); fromSocket says that the
// pod endpoint (or its absence) comes from the endpoint socket.
func run(ctx context.Context, cfg Config, files *mtls.Files, fromSocket bool) error {
	var tw *tlsWatch
	creds := insecure.NewCredentials()
	if files != nil {
		tw = newTLSWatch(files.ClientCredentials())
		creds = tw
	}
	log := cfg.Logger.With("node", cfg.NodeName)
	sp, err := spool.Open(spool.Config{Dir: cfg.StateDir, MaxResults: cfg.SpoolMaxResults, Logger: log})
	if err != nil {
		log.Warn("result spool unusable; keeping unacknowledged results in memory only: they die with the agent", "err", err)
		if sp, err = spool.Open(spool.Config{MaxResults: cfg.SpoolMaxResults, Logger: log}); err != nil {
			return fmt.Errorf("result spool: %w", err)
		}
	}
	defer func() {
		if err := sp.Close(); err != nil {
			log.Error("close result spool", "err", err)
		}
	}()
	if n := sp.Len(); n > 0 || sp.Dropped() > 0 {
		log.Info("result spool holds results the coordinator has not acknowledged; they go first after registering",
			"results", n, "path", sp.Path(), "dropped_total", sp.Dropped())
	}
	srv := servers.Config{NetNS: cfg.netNS(), Ports: cfg.Ports, StateDir: cfg.StateDir, Logger: cfg.Logger,
		LingerMax: cfg.ServerLingerMax, LingerIdle: cfg.ServerLingerIdle}
	a := &Agent{
		cfg:     cfg,
		log:     log,
		runner:  runner.New(runner.Config{NetNS: cfg.netNS(), Logger: cfg.Logger}),
		servers: servers.New(srv),
		clients: make(chan struct{}, cfg.MaxClients),
		targets: newTargets(cfg.AllowTargets, log),
		spool:   sp,
		tls:     tw,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() { // before the spool closes: client runs put their results there
		cancel()
		a.runs.Wait()
	}()
	defer a.servers.Close()
	// Before the coordinator hears of this agent: a server of the previous
	// life would hold its port, and its test is over for the coordinator.
	if orphans := a.servers.Reclaim(ctx); len(orphans) > 0 {
		a.log.Warn("killed test servers left running by the agent's previous life", "count", len(orphans), "state_dir", cfg.StateDir)
	}
	if cfg.GossipPort != 0 {
		g, err := gossip.New(gossip.Config{NodeName: cfg.NodeName, BindAddr: cfg.HostIP, BindPort: int(cfg.GossipPort), KeyFile: cfg.GossipKeyFile,
			Logger: log.With("component", "gossip")})
		if err != nil {
			a.log.Warn("gossip off: the agent measures without it, and the coordinator gets no gossip view from it", "err", err)
		} else {
			a.gossip = g
			defer func() { // when Run returns: its sessions have ended
				if err := g.Close(); err != nil {
					a.log.Warn("leave the gossip pool", "err", err)
				}
			}()
			a.log.Info("gossip started", "addr", g.Addr(), "encrypted", cfg.GossipKeyFile != "")
			if cfg.GossipKeyFile == "" {
				a.log.Warn("gossip is plaintext and unauthenticated: any host that reaches the gossip port can join the pool and forge members' states; set --gossip-key-file")
			}
		}
	}
	if !cfg.PodIP.IsValid() && fromSocket {
		a.log.Warn("no pod endpoint connected to the endpoint socket yet: tests on pod and service paths from or to this node fail as invalid until one connects",
			"socket", cfg.EndpointSocket)
	} else if !cfg.PodIP.IsValid() {
		a.log.Warn("no pod network (--pod-ip, --pod-netns): tests on pod and service paths from or to this node will fail as invalid")
	}

	a.hostMTU = interfaceMTU("", cfg.HostIP)
	if cfg.PodIP.IsValid() {
		a.podMTU = interfaceMTU(cfg.PodNetNS, cfg.PodIP)
	}
	if a.prober, err = a.newProber(); err != nil {
		return fmt.Errorf("prober: %w", err)
	}
	listeners, err := a.listenHTTP()
	if err != nil {
		return err
	}
	opts := append(append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	}, grpcbuf.DialOptions()...), cfg.DialOptions...)
	conn, err := grpc.NewClient(cfg.Coordinator, opts...)
	if err != nil {
		for _, l := range listeners {
			_ = l.l.Close()
		}
		return fmt.Errorf("coordinator address %q: %w", cfg.Coordinator, err)
	}
	defer func() { _ = conn.Close() }()

	g, gctx := errgroup.WithContext(ctx)
	for _, l := range listeners {
		h := httptarget.Handler(cfg.NodeName, l.network)
		g.Go(func() error { return httptarget.Serve(gctx, l.l, h) })
	}
	if err := a.startProbing(gctx, g); err != nil {
		cancel()
		_ = g.Wait()
		return fmt.Errorf("TCP echo responder (--probe-port %d): %w", cfg.ProbePort, err)
	}
	g.Go(func() error { return a.connectLoop(gctx, conn) })
	return g.Wait()
}

// netListener is a listener and the network it serves ("host", "pod").
type netListener struct {
	network string
	l       net.Listener
}

// listenHTTP opens the HTTP target's listener on each network: on each
// host IP (HostIP, and HostIPv6 if set) and on every address of the pod's
// namespace.
func (a *Agent) listenHTTP() ([]netListener, error) {
	port := strconv.Itoa(int(a.cfg.HTTPPort))
	var ls []netListener
	closeAll := func() {
		for _, l := range ls {
			_ = l.l.Close()
		}
	}
	for _, ip := range []netip.Addr{a.cfg.HostIP, a.cfg.HostIPv6} {
		if !ip.IsValid() {
			continue
		}
		host, err := net.Listen("tcp", net.JoinHostPort(ip.String(), port))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("HTTP target on the host network (%s): %w", ip, err)
		}
		ls = append(ls, netListener{"host", host})
	}
	if a.cfg.PodNetNS != "" {
		pod, err := netns.Listen(a.cfg.PodNetNS, "tcp", net.JoinHostPort("", port))
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("HTTP target on the pod network: %w", err)
		}
		ls = append(ls, netListener{"pod", pod})
	}
	return ls, nil
}

// connectLoop keeps a session with the coordinator until ctx ends. The
// backoff grows exponentially (with jitter) while the agent fails to
// connect or register, and starts over at ReconnectMin after any session
// that got past registration, however short: a coordinator that ended it
// (restarted, or replaced the session) is there to take the next one.
func (a *Agent) connectLoop(ctx context.Context, conn *grpc.ClientConn) error {
	backoff := a.cfg.ReconnectMin
	for {
		registered, err := a.session(ctx, conn)
		if ctx.Err() != nil {
			return nil
		}
		switch status.Code(err) {
		case codes.FailedPrecondition, codes.InvalidArgument:
			return fmt.Errorf("coordinator refused this agent: %s", status.Convert(err).Message())
		case codes.PermissionDenied: // a renewed certificate or token may prove the node: retry
			a.log.Error("the coordinator refused this agent's node identity; check --tls-cert (URI SAN "+mtls.NodeURI(a.cfg.NodeName)+
				") or --identity-token-file, and the coordinator's --agent-identity; retrying", "reason", status.Convert(err).Message())
		}
		if registered {
			backoff = a.cfg.ReconnectMin
		}
		if a.cfg.OnReconnectWait != nil {
			a.cfg.OnReconnectWait(backoff)
		}
		wait := time.Duration(float64(backoff) * (0.5 + rand.Float64())) // jitter: 0.5x..1.5x
		msg := "no session with the coordinator; retrying"
		if registered {
			msg = "session with the coordinator ended; reconnecting"
		}
		if terr := a.tls.take(); terr != nil {
			a.log.Error("TLS handshake with the coordinator failed; check --tls-cert, --tls-key and --tls-ca here, and the coordinator's certificate and --tls-client-ca; retrying",
				"coordinator", a.cfg.Coordinator, "reason", terr, "in", wait.Round(time.Millisecond))
		} else {
			a.log.Warn(msg, "coordinator", a.cfg.Coordinator, "err", err, "in", wait.Round(time.Millisecond))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		backoff = min(2*backoff, a.cfg.ReconnectMax)
	}
}
