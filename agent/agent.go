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
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

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
		targets: newTargets(cfg.AllowTargets, cfg.HostIP.IsLoopback(), log),
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
