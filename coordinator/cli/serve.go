package cli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/config"
	"github.com/meshperf/meshperf/coordinator/identity"
	"github.com/meshperf/meshperf/coordinator/kube"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/coordinator/remotewrite"
	"github.com/meshperf/meshperf/coordinator/runs"
)

func newServeCommand(o *options) *cobra.Command {
	var (
		cfg        coordinator.Config
		configPath string
		useKube    bool
		kubeClient kube.ClientOptions
		pprofAddr  string
		allowAddrs string
	)
	var remoteWrite func() (*remotewrite.Config, error) // set below, with its flags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the coordinator: accept agents, run tests, keep results",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := o.logger()
			if err != nil {
				return err
			}
			cfg.Logger = log
			// The client flags the root command shares are no serve flags.
			for _, name := range []string{"tls-ca", "token-file"} {
				if cmd.Flags().Changed(name) {
					return fmt.Errorf("--%s is a client flag; serve takes --tls-cert, --tls-key, --tls-client-ca and --api-token-file", name)
				}
			}
			if cfg.PartitionGrace == 0 { // the flag's 0 is "at once"; the Config's is the default
				cfg.PartitionGrace = -1
			}
			settings, err := config.Load(configPath)
			if err != nil {
				return err
			}
			cfg.Monitor, cfg.ExternalTargets, cfg.Probes = settings.Plans, settings.External, settings.Probes
			cfg.NodeCIDRs, cfg.PodCIDRs, cfg.ServiceCIDRs = settings.NodeCIDRs, settings.PodCIDRs, settings.ServiceCIDRs
			if cfg.AllowAddresses, err = registry.ParseAddressClasses(allowAddrs); err != nil {
				return fmt.Errorf("--allow-addresses: %w", err)
			}
			if useKube {
				if cfg.KubeClient, err = kube.InCluster(kubeClient); err != nil {
					return err
				}
				if cfg.AgentIdentity == coordinator.IdentityAuto {
					cfg.AgentIdentity = coordinator.IdentityToken
				}
			}
			if pprofAddr != "" {
				if err := servePprof(cmd.Context(), pprofAddr, log); err != nil {
					return err
				}
			}
			if cfg.RemoteWrite, err = remoteWrite(); err != nil {
				return err
			}
			return coordinator.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	remoteWrite = remoteWriteFlags(cmd)
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	f.StringVar(&cfg.ListenAddress, "listen", ":7700", `TCP address for agents and remote users ("" for none)`)
	f.StringVar(&cfg.SocketPath, "socket", DefaultSocket, `unix socket for the local CLI ("" for none)`)
	f.StringVar(&cfg.DBPath, "db", "/var/lib/meshperf/meshperf.db", "bbolt file that keeps every result (created with mode 0600)")
	f.StringVar(&cfg.WebAddress, "web-listen", "", `TCP address of the web UI and its read-only JSON API, e.g. ":8080" ("" for none); with --api-token-file the API needs that token, and an address that is not loopback needs --web-tls-cert`)
	f.StringSliceVar(&cfg.WebHosts, "web-host", nil, "host name, besides IP addresses and localhost, that requests to a plaintext web UI without --api-token-file may name (repeatable; e.g. an Ingress's name); others are refused (DNS rebinding)")
	f.StringVar(&cfg.WebTLSCertFile, "web-tls-cert", "", "TLS certificate (PEM) of the web UI; with --web-tls-key it serves HTTPS (TLS 1.3), re-read when it changes")
	f.StringVar(&cfg.WebTLSKeyFile, "web-tls-key", "", "private key (PEM) of --web-tls-cert")
	f.StringVar(&cfg.MetricsAddress, "metrics-listen", ":9090", `TCP address of the Prometheus /metrics and /healthz endpoint ("" for none)`)
	f.StringVar(&pprofAddr, "pprof-listen", "", `TCP address of Go's runtime profiles, /debug/pprof/ ("" for none; keep it on loopback)`)
	f.BoolVar(&cfg.MetricsPerPair, "metrics-per-pair", false, "also export one series per node pair on /metrics (nodes² series; per-node aggregates otherwise)")
	f.StringVar(&configPath, "config", "", "config file (YAML) with the continuous schedules and the external targets; see docs/config.md (none: on-demand runs only, no external target)")
	f.DurationVar(&cfg.Retention, "retention", 7*24*time.Hour, "keep raw results, runs and probe series this long, then roll results and series up per pair per hour (0: keep everything)")
	f.DurationVar(&cfg.SeriesRollupRetention, "series-rollup-retention", 30*24*time.Hour,
		"keep the probe series' hourly rollups this long (whole days; at least --retention; 0: no series rollups, raw series past --retention are deleted)")
	f.DurationVar(&cfg.HeartbeatInterval, "heartbeat-interval", time.Second, "agent heartbeat period; an agent silent for 10 periods is dropped")
	f.DurationVar(&cfg.PartitionGrace, "partition-grace", time.Minute,
		"how long the coordinator and the agents' gossip must disagree on a node before it is reported as a partition (0: at once)")
	f.DurationVar(&cfg.UnprovenGrace, "unproven-grace", registry.DefaultUnprovenGrace,
		"forget a node this long after its agent left if it never answered work, sent a probe report or outlived its heartbeat timeout (such a node is never in default meshes)")
	f.IntVar(&cfg.MaxActiveRuns, "max-active-runs", runs.DefaultMaxActiveRuns, "most runs in progress at once; more triggers are refused (RESOURCE_EXHAUSTED)")
	f.IntVar(&cfg.MaxWatchers, "max-watchers", runs.DefaultMaxWatchers, "most WatchRun calls following runs in progress at once; more are refused (RESOURCE_EXHAUSTED)")
	f.StringVar(&cfg.TLSCertFile, "tls-cert", "", "TLS certificate (PEM) of the TCP listener; with --tls-key and --tls-client-ca it serves TLS 1.3 and requires client certificates. The three files are re-read when they change (checked at most once a second, at a new connection); a bad new file keeps the old one in use, with a warning")
	f.StringVar(&cfg.TLSKeyFile, "tls-key", "", "private key (PEM) of --tls-cert; re-read with it")
	f.StringVar(&cfg.TLSClientCAFile, "tls-client-ca", "", "CA (PEM) that must have signed the certificate of every TCP client: agents and remote users; re-read when it changes")
	f.StringVar(&cfg.APITokenFile, "api-token-file", "", `file with the token every MeshService call on the TCP listener must carry as "authorization: Bearer TOKEN" (needs the TLS flags; the unix socket needs none)`)
	f.StringVar(&cfg.MetricsTLSCertFile, "metrics-tls-cert", "", "TLS certificate (PEM) of the metrics endpoint; with --metrics-tls-key it serves HTTPS (TLS 1.3), re-read when it changes. /healthz stays open")
	f.StringVar(&cfg.MetricsTLSKeyFile, "metrics-tls-key", "", "private key (PEM) of --metrics-tls-cert")
	f.StringVar(&cfg.MetricsTLSClientCAFile, "metrics-tls-client-ca", "", "CA (PEM) that must have signed the client certificate of every GET /metrics (needs --metrics-tls-cert)")
	f.StringVar(&cfg.MetricsTokenFile, "metrics-token-file", "", `file with the bearer token every GET /metrics must carry as "Authorization: Bearer TOKEN" (needs --metrics-tls-cert; re-read when it changes)`)
	f.BoolVar(&useKube, "kubernetes", false,
		"give each node's pod endpoint its own ClusterIP Service and EndpointSlice (in-cluster config) and use that ClusterIP as the node's service IP; "+
			"with --agent-identity=auto, agents prove their node with their projected service-account token (TokenReview)")
	f.StringVar(&cfg.AgentIdentity, "agent-identity", coordinator.IdentityAuto,
		"how an agent proves the node it registers as on the TCP listener: auto (token with --kubernetes, else cert with the TLS flags, else none), "+
			"cert (its client certificate's URI SAN spiffe://meshperf/node/NODE), token (its projected service-account token, audience meshperf, "+
			"checked with the TokenReview API; needs --kubernetes), token-or-cert, or none (anyone registers as any node)")
	f.StringVar(&cfg.AgentDaemonSet, "agent-daemonset", identity.DefaultDaemonSet,
		"the agents' DaemonSet in --kube-namespace: only its pods prove a node with --agent-identity=token")
	f.StringVar(&allowAddrs, "allow-addresses", "",
		"address classes the agents may register as host, pod or service IP besides unicast ones: loopback, link-local, comma-separated (none: both refused; labs on one machine need loopback)")
	f.StringVar(&cfg.KubeNamespace, "kube-namespace", kube.DefaultNamespace, "namespace of the per-node Services (with --kubernetes)")
	f.Float32Var(&kubeClient.QPS, "kube-qps", kube.DefaultQPS,
		"API requests per second the coordinator makes at most, after a burst of --kube-burst (with --kubernetes): a fleet registering again after a restart costs a TokenReview and a pod read per agent")
	f.IntVar(&kubeClient.Burst, "kube-burst", 0, fmt.Sprintf("API requests the coordinator may make at once above --kube-qps (with --kubernetes; 0: %d, or --kube-qps if more)", kube.DefaultBurst))
	return cmd
}

// remoteWriteFlags adds serve's --remote-write flags to cmd and returns
// what turns them into a config (nil without --remote-write; an error
// naming the flag and value when they are bad).
func remoteWriteFlags(cmd *cobra.Command) func() (*remotewrite.Config, error) {
	var c remotewrite.Config
	f := cmd.Flags()
	f.StringVar(&c.URL, "remote-write", "",
		`Prometheus remote-write 1.0 endpoint (http or https, e.g. http://vm:8428/api/v1/write) that gets the per-pair and per-node series ("" for none)`)
	f.StringVar(&c.BearerTokenFile, "remote-write-bearer-token-file", "", `file with the bearer token sent as "Authorization: Bearer TOKEN" to --remote-write (read at start)`)
	f.StringVar(&c.CAFile, "remote-write-ca-file", "", "PEM CA certificates an https --remote-write receiver must chain to (default: the system's)")
	f.IntVar(&c.QueueSamples, "remote-write-queue-samples", remotewrite.DefaultQueueSamples,
		"most samples queued for --remote-write (32 bytes each); beyond, the oldest are dropped and counted")
	return func() (*remotewrite.Config, error) {
		if c.URL == "" {
			for _, name := range []string{"remote-write-bearer-token-file", "remote-write-ca-file", "remote-write-queue-samples"} {
				if f.Changed(name) {
					return nil, fmt.Errorf("--%s needs --remote-write", name)
				}
			}
			return nil, nil
		}
		if _, err := remotewrite.ParseURL("remote-write", c.URL); err != nil {
			return nil, err
		}
		if c.QueueSamples <= 0 {
			return nil, fmt.Errorf("--remote-write-queue-samples %d: must be at least 1", c.QueueSamples)
		}
		out := c
		return &out, nil
	}
}
