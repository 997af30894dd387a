package coordinator

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/coordinator/web"
	"github.com/meshperf/meshperf/internal/mtls"
	"github.com/meshperf/meshperf/internal/testspec"
)

// webAccess is what the web UI asks of a browser, from the Web* files of
// cfg: TLS 1.3 with a certificate reloaded as it changes (internal/mtls,
// as the metrics endpoint's), and the API token of --api-token-file on
// every /api/v1/ call. A token on a web address that is not loopback
// needs TLS: it must not cross the network in clear.
func (cfg *Config) webAccess(log *slog.Logger) (conf *tls.Config, token []byte, err error) {
	on, err := mtls.AllOrNone(mtls.File{Flag: "web-tls-cert", Path: cfg.WebTLSCertFile}, mtls.File{Flag: "web-tls-key", Path: cfg.WebTLSKeyFile})
	if err != nil {
		return nil, nil, err
	}
	if cfg.WebAddress == "" {
		if on || len(cfg.WebHosts) > 0 {
			return nil, nil, errors.New("--web-tls-cert, --web-tls-key and --web-host are for the web UI, and --web-listen is empty")
		}
		return nil, nil, nil
	}
	for _, h := range cfg.WebHosts {
		if h == "" || len(h) > 253 || strings.ContainsAny(h, ":/@[] \t") {
			return nil, nil, fmt.Errorf("--web-host %q: want a host name as a browser sends it in Host, without scheme, port or path (e.g. meshperf.example.com)", h)
		}
	}
	if cfg.APITokenFile != "" {
		if token, err = readToken(cfg.APITokenFile); err != nil {
			return nil, nil, err
		}
		if !on && !loopback(cfg.WebAddress) {
			return nil, nil, fmt.Errorf("--web-listen %q with --api-token-file needs --web-tls-cert and --web-tls-key: without TLS the token would cross the network in clear (a loopback address needs none)", cfg.WebAddress)
		}
	}
	if !on {
		return nil, token, nil
	}
	files, err := mtls.LoadServer(mtls.Config{CertFile: cfg.WebTLSCertFile, KeyFile: cfg.WebTLSKeyFile, Logger: log.With("listener", cfg.WebAddress)})
	if err != nil {
		return nil, nil, err
	}
	return files.HTTPServerConfig(), token, nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	return mtls.LoopbackHost(host)
}

// webRefresh is how often the UI's live pages poll: the shortest monitor
// interval or the probes' report interval; zero (the UI's default) when
// neither is set.
func (cfg *Config) webRefresh() time.Duration {
	var d time.Duration
	for _, p := range cfg.Monitor {
		if d == 0 || p.Interval < d {
			d = p.Interval
		}
	}
	if ri := cfg.Probes.GetReportInterval().AsDuration(); ri > 0 && (d == 0 || ri < d) {
		d = ri
	}
	return d
}

// newWeb builds the web UI over src (the TCP listener's MeshService) and
// probes (the continuous probes' newest period; nil: none) for l, and
// logs how it is reached.
func (cfg *Config) newWeb(src web.Source, probes *web.Probes, l net.Listener, conf *tls.Config, token []byte, log *slog.Logger) (*web.UI, error) {
	// Plaintext without a token, answer only for IP addresses, localhost,
	// --web-listen's host and the names of --web-host: a page elsewhere
	// that DNS-rebinds its name to the UI (its pod IP, or 127.0.0.1 of a
	// kubectl port-forward) is refused. With a token the page could not
	// read the API, and with TLS its name is not the certificate's.
	var hosts []string
	if token == nil && conf == nil {
		hosts = []string{"localhost"}
		if host, _, err := net.SplitHostPort(cfg.WebAddress); err == nil && host != "" {
			hosts = append(hosts, host)
		}
		hosts = append(hosts, cfg.WebHosts...)
	}
	ui, err := web.New(web.Config{Source: src, Probes: probes, Token: token, Hosts: hosts, RefreshInterval: cfg.webRefresh(), TLS: conf, Logger: log.With("component", "web")})
	if err != nil {
		return nil, err
	}
	answers := "any Host"
	if len(hosts) > 0 {
		answers = "IP addresses, " + strings.Join(hosts, ", ")
	}
	log.Info("web UI listening", "address", l.Addr().String(), "tls", conf != nil, "api_token", token != nil, "answers_for", answers)
	if token == nil && !loopback(cfg.WebAddress) {
		log.Warn("the web UI needs no token: any host that reaches --web-listen can read the results; set --api-token-file and --web-tls-cert, --web-tls-key")
	}
	return ui, nil
}

// webProbes is what the web UI shows of the continuous probes: the
// configured kinds and paths, each node's newest stored report from st,
// and the faults the probes' judge published; nil without probes.
func (cfg *Config) webProbes(st *store.Store, sink *probeSink) *web.Probes {
	if cfg.Probes == nil {
		return nil
	}
	paths, _ := testspec.SplitPaths(cfg.Probes.GetPaths()) // the node paths: the matrix has no targets
	return &web.Probes{Kinds: cfg.Probes.GetKinds(), Paths: paths, ReportInterval: cfg.Probes.GetReportInterval().AsDuration(),
		Latest: st.LatestSamples, Faults: sink.publishedFaults}
}
