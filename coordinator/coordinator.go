// Package coordinator wires the coordinator's parts into a daemon: the
// bbolt store, the agent registry, the run manager and two gRPC servers
// that serve AgentService, MeshService and the health service, one on a TCP
// listener (for agents and remote users) and one on a unix socket (for the
// CLI on the same machine), and, if asked, Prometheus metrics over HTTP
// (coordinator/metrics), the web UI (coordinator/web, over the TCP
// listener's MeshService server) and a ClusterIP Service per node
// (coordinator/kube).
//
// Security: with TLS files, the TCP listener speaks TLS 1.3 only and
// requires a client certificate signed by the client CA (internal/mtls);
// that certificate is what authenticates a client. An agent session on
// the TCP listener registers only as the node it proves (AgentIdentity,
// coordinator/identity): by its certificate's URI SAN
// spiffe://meshperf/node/NODE, or in a cluster by its projected
// service-account token. With an API token
// file, every MeshService call on the TCP listener must also carry
// "authorization: Bearer TOKEN"; AgentService and the health service do
// not need it. The unix socket stays plaintext and needs no token: its mode
// 0600 lets only root (or the coordinator's user) connect, who could read
// the token file and the store anyway. The web UI's API needs the same
// token ("Authorization: Bearer TOKEN", coordinator/apitoken), and with
// it TLS unless it listens on loopback.
package coordinator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/coordinator/alert"
	"github.com/meshperf/meshperf/coordinator/config"
	"github.com/meshperf/meshperf/coordinator/ingest"
	"github.com/meshperf/meshperf/coordinator/kube"
	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/coordinator/monitor"
	"github.com/meshperf/meshperf/coordinator/probeplan"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/remotewrite"
	"github.com/meshperf/meshperf/coordinator/retention"
	"github.com/meshperf/meshperf/coordinator/runs"
	"github.com/meshperf/meshperf/coordinator/sanity"
	"github.com/meshperf/meshperf/coordinator/server"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/coordinator/web"
	"github.com/meshperf/meshperf/internal/grpcbuf"
	"github.com/meshperf/meshperf/internal/version"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// MaxRecvMsgBytes bounds every message the coordinator's gRPC servers
// take, an agent's Connect messages (ClientDone, ProbeReport) included:
// 4 MiB, gRPC's default, set explicitly so that no change of it goes
// unnoticed. A larger message ends its stream with ResourceExhausted
// before any of it is decoded; the per-message bounds on the number of
// results (runs: the planned count + 1 per ClientDone; ingest: the plan's
// summaries per ProbeReport) apply within it.
const MaxRecvMsgBytes = 4 << 20

// Config configures Run.
type Config struct {
	// ListenAddress is the TCP address for agents and remote users, e.g.
	// "0.0.0.0:7700"; empty means no TCP listener.
	ListenAddress string
	// SocketPath is the unix socket for the local CLI, created with mode
	// 0600 (a stale file is replaced); empty means no socket.
	SocketPath string
	// DBPath is the bbolt file.
	DBPath string
	// HeartbeatInterval is the agents' heartbeat period; zero means 1 s.
	HeartbeatInterval time.Duration
	// ShutdownTimeout bounds the graceful stop; zero means 5 s.
	ShutdownTimeout time.Duration
	// Logger receives everything; nil means discard.
	Logger *slog.Logger
	// Ready, if set, is called once every listener is up.
	Ready func()
	// MetricsAddress is the TCP address of the Prometheus endpoint
	// (/metrics and /healthz), e.g. ":9090"; empty means none.
	MetricsAddress string
	// Monitor are the continuous schedules (coordinator/config.Load of the
	// config file; coordinator/monitor ticks them); none means on-demand
	// runs only.
	Monitor []config.Plan
	// ExternalTargets is the allowlist of external targets (the config
	// file's external list): sent to every agent, the only targets a run
	// may name, listed by MeshService.ListExternalTargets. Nil means none.
	ExternalTargets []*measurev1.ExternalTarget
	// Retention is how long raw results and runs are kept before they are
	// rolled up per pair per hour (coordinator/retention); zero keeps
	// everything.
	Retention time.Duration
	// SeriesRollupRetention is how long the continuous probes' hourly
	// series rollups are kept (coordinator/retention): the series' raw
	// chunks past Retention are rolled up per pair, path, kind and hour
	// before they are deleted. Zero means no series rollups (raw chunks
	// are deleted as they are); it must not be shorter than Retention.
	SeriesRollupRetention time.Duration
	// DepartAfter is how long a node whose agent is gone stays in meshes
	// (its tests failing as agent_unavailable) before it departs, and with
	// KubeClient its Service is pruned; zero means one hour.
	DepartAfter time.Duration
	// PartitionGrace is how long the coordinator and the agents' gossip
	// must disagree on a node before it is reported as a partition; zero
	// means one minute, a negative value at once.
	PartitionGrace time.Duration
	// UnprovenGrace is how long a node whose agent left before it ever
	// answered work, sent a probe report or outlived its heartbeat timeout
	// stays known (never in default meshes) before it is forgotten; zero
	// means registry.DefaultUnprovenGrace (3 min).
	UnprovenGrace time.Duration
	// MaxActiveRuns bounds the runs in progress at once (TriggerRun beyond
	// it is RESOURCE_EXHAUSTED); zero means runs.DefaultMaxActiveRuns.
	MaxActiveRuns int
	// MaxWatchers bounds the WatchRun calls following runs in progress at
	// once (RESOURCE_EXHAUSTED beyond); zero means runs.DefaultMaxWatchers.
	MaxWatchers int
	// MetricsTLSCertFile and MetricsTLSKeyFile, both or neither, make the
	// metrics endpoint speak TLS 1.3 (re-read when they change); with
	// MetricsTLSClientCAFile too, GET /metrics needs a client certificate
	// that CA signed. MetricsTokenFile (needs the TLS files) holds a bearer
	// token every GET /metrics must carry. GET /healthz needs neither, for
	// the kubelet's probes. Empty means plaintext and open.
	MetricsTLSCertFile, MetricsTLSKeyFile, MetricsTLSClientCAFile, MetricsTokenFile string
	// WebAddress is the TCP address of the web UI (coordinator/web: the
	// pages and their read-only JSON API under /api/v1/), e.g. ":8080";
	// empty means none. With APITokenFile, every /api/v1/ call needs the
	// same token as MeshService, and an address that is not loopback
	// needs WebTLSCertFile and WebTLSKeyFile.
	WebAddress string
	// WebHosts are the host names, besides IP addresses, localhost and
	// WebAddress's host, a request to a plaintext web UI without
	// APITokenFile may name in its Host header (an Ingress's name, a
	// Service's DNS name): any other is refused with 421, so that a page
	// elsewhere cannot DNS-rebind its own name to the UI and read it.
	// With APITokenFile or web TLS (whose certificate names the UI) any
	// Host is answered.
	WebHosts []string
	// WebTLSCertFile and WebTLSKeyFile, both or neither, make the web UI
	// speak TLS 1.3 (re-read when they change); empty means plaintext.
	WebTLSCertFile, WebTLSKeyFile string
	// MetricsPerPair adds one series per node pair to /metrics
	// (O(nodes²) series); false means per-node aggregates only.
	MetricsPerPair bool
	// RemoteWrite, if set, sends the per-pair and per-node series to a
	// remote-write receiver (see coordinator/remotewrite); nil: none.
	RemoteWrite *remotewrite.Config
	// TLSCertFile and TLSKeyFile are the TCP listener's certificate and
	// key (PEM), and TLSClientCAFile the CA (PEM) that must have signed
	// every client's certificate (agents and remote users). All three or
	// none; none means plaintext TCP, without client authentication.
	TLSCertFile, TLSKeyFile, TLSClientCAFile string
	// APITokenFile holds the token that every MeshService call on the TCP
	// listener must carry as "authorization: Bearer TOKEN" (one line;
	// surrounding white space is ignored). It needs the TLS files, so that
	// the token never crosses the network in clear. Empty means no token.
	APITokenFile string
	// KubeClient, if set, makes the coordinator give every node's pod
	// endpoint its own selectorless ClusterIP Service and EndpointSlice
	// (coordinator/kube) when its agent registers, use that ClusterIP as
	// the node's service IP, and delete those of departed nodes every
	// KubePruneInterval; and it refuses a registration whose host IP is
	// not one of its Node object's InternalIP and ExternalIP addresses or
	// whose pod IP is not its pod endpoint's (the meshperf-endpoint pods
	// in KubeNamespace), known from informers. Nil means none: the
	// agents' --service-ip is used as it is.
	KubeClient kubernetes.Interface
	// KubeNamespace holds those Services; empty means kube.DefaultNamespace
	// ("meshperf").
	KubeNamespace string
	// KubePruneInterval is how often Services of departed nodes are
	// deleted; zero means one minute.
	KubePruneInterval time.Duration
	// KubeServiceIPRetry is the first wait before a node whose
	// registration got no ClusterIP (the API server down or slow) is
	// asked for again (registry.Config.ServiceIPRetry); zero means
	// registry.DefaultServiceIPRetry.
	KubeServiceIPRetry time.Duration
	// Probes are the settings of the agents' continuous in-process probes
	// (the config file's probes section, coordinator/config.Load); nil
	// means none. Either way, agents that run probe plans get their peers
	// in plans (full, then deltas), not in whole Endpoints lists.
	Probes *agentv1.ProbeSettings
	// AgentIdentity is how an agent session on the TCP listener proves the
	// node it registers as: IdentityAuto (""), IdentityCert,
	// IdentityToken, IdentityTokenOrCert or IdentityNone. A session that
	// registers as another node than it proved is refused
	// (PermissionDenied) and logged. The unix socket checks nothing: only
	// root reaches it.
	AgentIdentity string
	// AgentDaemonSet is the agents' DaemonSet in KubeNamespace, whose pods
	// alone prove a node with IdentityToken; empty means
	// identity.DefaultDaemonSet ("meshperf-agent").
	AgentDaemonSet string
	// IdentityCacheTTL bounds how long a checked identity token is
	// trusted without another TokenReview (never past the token's
	// expiry); zero means identity.DefaultCacheTTL (2 min), negative no
	// cache.
	IdentityCacheTTL time.Duration
	// PlanDebounce is how long an agent's session waits after a peer
	// change before it sends the agent its plan delta, so that a fleet
	// joining costs each agent a few deltas; zero means 200 ms.
	PlanDebounce time.Duration
	// AllowAddresses are the address classes (loopback, link-local) the
	// agents may register besides unicast addresses (serve
	// --allow-addresses); none means that a registration with a loopback
	// or link-local host, pod or service IP is refused.
	AllowAddresses []registry.AddressClass
	// NodeCIDRs, PodCIDRs and ServiceCIDRs are the prefixes the agents'
	// host, pod and service IPs must be in (the config file's node_cidrs,
	// pod_cidrs and service_cidrs); empty means any address. With
	// KubeClient, a host IP must also be one of its Node object's
	// addresses and a pod IP its pod endpoint's.
	NodeCIDRs, PodCIDRs, ServiceCIDRs []netip.Prefix
}

// Run serves until ctx ends, then stops gracefully: it marks itself not
// serving, interrupts the runs in progress (stopping their servers), ends
// the agent sessions and stops the gRPC server. It returns the first
// listener or store error, or nil after a clean stop.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.ListenAddress == "" && cfg.SocketPath == "" {
		return errors.New("neither a listen address nor a socket path is set")
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	creds, auth, err := cfg.security(log)
	if err != nil {
		return err
	}
	access, err := cfg.metricsAccess(log)
	if err != nil {
		return err
	}
	webTLS, webToken, err := cfg.webAccess(log)
	if err != nil {
		return err
	}
	agentID, idMode, err := cfg.agentIdentity(ctx, creds != nil, log)
	if err != nil {
		return err
	}
	st, err := store.Open(store.Config{Path: cfg.DBPath, Logger: log})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	}()
	var services *kube.Services
	peers := probeplan.NewTable(probeplan.Options{})
	if cfg.Probes != nil {
		peers.SetSettings(cfg.Probes)
	}
	invalid := &sanity.Counter{} // figures that failed the checks, runs' and probes'
	sink := &probeSink{peers: peers, settings: cfg.Probes, log: log, reported: map[string]reported{}, invalid: invalid,
		judge: newProbeJudge(cfg.Probes), judgeC: make(chan struct{}, 1)}
	rw, err := newRemoteWrite(cfg.RemoteWrite, log)
	if err != nil {
		return err
	}
	if sink.in, err = ingest.New(ingest.Config{Write: writeReports(st, rw.reports()...), Logger: log}); err != nil {
		return err
	}
	policy := &registry.AddressPolicy{Allow: cfg.AllowAddresses, NodeCIDRs: cfg.NodeCIDRs, PodCIDRs: cfg.PodCIDRs, ServiceCIDRs: cfg.ServiceCIDRs}
	regCfg := registry.Config{
		Recorder: st, Version: version.Version, HeartbeatInterval: cfg.HeartbeatInterval, DepartAfter: cfg.DepartAfter, PartitionGrace: cfg.PartitionGrace,
		UnprovenGrace: cfg.UnprovenGrace,
		Logger:        log, ExternalTargets: cfg.ExternalTargets, Probes: peers, PlanDebounce: cfg.PlanDebounce, Reports: sink, Addresses: policy,
	}
	if cfg.KubeClient != nil {
		if services, err = kube.New(kube.Config{Client: cfg.KubeClient, Namespace: cfg.KubeNamespace, Logger: log}); err != nil {
			return err
		}
		services.Watch(ctx) // a join wave of nodes whose objects are right costs no API call
		regCfg.ServiceIPs, regCfg.ServiceIPRetry = services.Ensure, cfg.KubeServiceIPRetry
		// A node's host IP must be its Node's, its pod IP its pod
		// endpoint's: informers, so that a join wave costs no API call
		// per registration.
		if policy.Cluster, err = kube.NewAddresses(ctx, kube.AddressesConfig{Client: cfg.KubeClient, Namespace: cfg.KubeNamespace, Logger: log}); err != nil {
			return err
		}
		if cfg.KubePruneInterval == 0 {
			cfg.KubePruneInterval = time.Minute
		}
	}
	reg, err := registry.New(ctx, regCfg)
	if err != nil {
		return err
	}
	sink.reg = reg
	sink.meshNodes = func() int { mesh, _ := reg.Known(); return len(mesh) }
	var met *metrics.Metrics
	alertCfg := alert.Config{Store: st, Logger: log}
	if cfg.MetricsAddress != "" {
		if met, err = metrics.New(metrics.Config{Agents: reg, StorePath: st.Path(), PerPair: cfg.MetricsPerPair, Probes: sink, Invalid: invalid, Logger: log}); err != nil {
			return err
		}
		if err := met.SetAccess(access); err != nil {
			return err
		}
		alertCfg.Publisher = met
	}
	alertCfg.Publisher = rw.publisher(alertCfg.Publisher)
	alerter := alert.New(alertCfg)
	observer := observers{alerter}
	if met != nil {
		observer = append(observer, met)
	}
	observer = append(observer, rw.observers(met)...)
	mgr, err := runs.New(ctx, runs.Config{
		Store: st, IsNotFound: func(err error) bool { return errors.Is(err, store.ErrNotFound) },
		Agents: reg, Logger: log, Observer: observer, ExternalTargets: reg.ExternalTargets(), Invalid: invalid,
		MaxActiveRuns: cfg.MaxActiveRuns, MaxWatchers: cfg.MaxWatchers,
	})
	if err != nil {
		return err
	}

	tcpL, unixL, err := listen(cfg)
	if err != nil {
		mgr.Close()
		return err
	}
	listeners := map[net.Listener]*grpc.Server{}
	var metricsListener, webListener net.Listener
	closeListeners := func() {
		for _, l := range []net.Listener{tcpL, unixL, metricsListener} {
			if l != nil {
				_ = l.Close()
			}
		}
	}
	if met != nil {
		if metricsListener, err = net.Listen("tcp", cfg.MetricsAddress); err != nil {
			closeListeners()
			mgr.Close()
			return fmt.Errorf("listen on %s: %w", cfg.MetricsAddress, err)
		}
	}
	if cfg.WebAddress != "" {
		if webListener, err = net.Listen("tcp", cfg.WebAddress); err != nil {
			closeListeners()
			mgr.Close()
			return fmt.Errorf("listen on %s (--web-listen): %w", cfg.WebAddress, err)
		}
	}
	// One gRPC server per listener: the TCP one with TLS and the token
	// check when configured, the socket's plaintext and without a token.
	// The TCP listener's server checks each agent's identity; the socket's
	// does not (only root reaches it).
	srvCfg := server.Config{Registry: reg, Runs: mgr, Store: st, Logger: log}
	srv := server.New(srvCfg)
	srvCfg.Identity = agentID
	tcpSrv := server.New(srvCfg)
	var ui *web.UI
	if webListener != nil {
		if ui, err = cfg.newWeb(tcpSrv, cfg.webProbes(st, sink), webListener, webTLS, webToken, log); err != nil {
			closeListeners()
			_ = webListener.Close()
			mgr.Close()
			return err
		}
	}
	hs := health.NewServer()
	newServer := func(srv *server.Server, extra ...grpc.ServerOption) *grpc.Server {
		g := grpc.NewServer(append(append([]grpc.ServerOption{
			grpc.MaxRecvMsgSize(MaxRecvMsgBytes),
			grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
			grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		}, grpcbuf.ServerOptions()...), extra...)...)
		srv.Register(g)
		healthpb.RegisterHealthServer(g, hs)
		return g
	}
	if tcpL != nil {
		var opts []grpc.ServerOption
		if creds != nil {
			opts = append(opts, creds)
		}
		if auth != nil {
			opts = append(opts, grpc.ChainUnaryInterceptor(auth.unary), grpc.ChainStreamInterceptor(auth.stream))
		}
		listeners[tcpL] = newServer(tcpSrv, opts...)
		log.Info("TCP listener security", "address", tcpL.Addr().String(), "mtls", creds != nil, "api_token", auth != nil, "agent_identity", idMode)
		switch {
		case creds == nil && agentID != nil:
			log.Warn("the TCP listener is plaintext: agents prove their node with identity tokens that cross the network in clear, and any host that reaches it can drive MeshService; set --tls-cert, --tls-key, --tls-client-ca and --api-token-file")
		case agentID == nil && creds != nil:
			log.Warn("--agent-identity=none: any client certificate signed by the client CA may register as any node")
		}
		if creds == nil && agentID == nil {
			log.Warn("the TCP listener is plaintext and authenticates nobody: any host that reaches it can register as an agent and drive MeshService; set --tls-cert, --tls-key, --tls-client-ca and --api-token-file")
		} else if creds != nil && auth == nil {
			log.Warn("no --api-token-file: any client certificate signed by the client CA, an agent's included, may drive MeshService on the TCP listener")
		}
	}
	if unixL != nil {
		listeners[unixL] = newServer(srv)
	}

	eg, egCtx := errgroup.WithContext(ctx)
	for l, g := range listeners {
		log.Info("coordinator listening", "network", l.Addr().Network(), "address", l.Addr().String(), "version", version.Version)
		eg.Go(func() error {
			if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("serve %s: %w", l.Addr(), err)
			}
			return nil
		})
	}
	if metricsListener != nil {
		log.Info("metrics listening", "address", metricsListener.Addr().String(), "tls", access.TLS != nil,
			"client_cert", access.RequireClientCert, "token", access.TokenFile != "")
		eg.Go(func() error { return met.Serve(egCtx, metricsListener, cfg.ShutdownTimeout) })
	}
	if ui != nil {
		eg.Go(func() error { return ui.Serve(egCtx, webListener, cfg.ShutdownTimeout) })
	}
	eg.Go(func() error { return alerter.Run(egCtx) })
	eg.Go(func() error { return sink.in.Run(egCtx) })
	eg.Go(func() error { return sink.judgeProbes(egCtx) })
	eg.Go(func() error { return syncProbes(egCtx, reg) })
	eg.Go(func() error {
		return compactSeries(egCtx, st, compactEvery, web.ProbeFreshness(cfg.Probes.GetReportInterval().AsDuration()), log)
	})
	rw.start(egCtx, eg)
	if len(cfg.Monitor) > 0 {
		eg.Go(func() error {
			return monitor.Run(egCtx, monitor.Config{Plans: cfg.Monitor, Runs: monitorRuns{Manager: mgr, Store: st}, Logger: log})
		})
	}
	if cfg.Retention > 0 {
		eg.Go(func() error {
			return retention.Run(egCtx, retention.Config{Store: st, Retention: cfg.Retention, SeriesRollupRetention: cfg.SeriesRollupRetention, Logger: log})
		})
	}
	if services != nil {
		eg.Go(func() error {
			return services.PruneEvery(egCtx, cfg.KubePruneInterval, func() map[string]bool {
				_, targetable := reg.Known() // every node but the departed
				keep := make(map[string]bool, len(targetable))
				// and those registering, whose Service exists before they are known
				for _, n := range append(targetable, reg.Registering()...) {
					keep[n] = true
				}
				return keep
			})
		})
	}
	if cfg.Ready != nil {
		cfg.Ready()
	}
	eg.Go(func() error {
		<-egCtx.Done()
		log.Info("coordinator stopping")
		hs.Shutdown()
		mgr.Close()
		reg.Shutdown()
		stopped := make(chan struct{})
		go func() {
			var wg sync.WaitGroup
			for _, g := range listeners {
				wg.Go(g.GracefulStop)
			}
			wg.Wait()
			close(stopped)
		}()
		t := time.NewTimer(cfg.ShutdownTimeout)
		defer t.Stop()
		select {
		case <-stopped:
		case <-t.C:
			log.Warn("graceful stop timed out; forcing", "timeout", cfg.ShutdownTimeout)
			for _, g := range listeners {
				g.Stop()
			}
			t.Reset(cfg.ShutdownTimeout)
			select {
			case <-stopped:
			case <-t.C:
				log.Error("gRPC handlers still running after a forced stop; exiting anyway")
			}
		}
		return nil
	})
	err = eg.Wait()
	if cfg.SocketPath != "" {
		_ = os.Remove(cfg.SocketPath)
	}
	return err
}
