package coordinator

import (
	"errors"
	"log/slog"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/internal/mtls"
)

// metricsAccess is what the metrics endpoint asks of a scraper, from the
// Metrics* files of cfg: TLS with a certificate reloaded as it changes, a
// verified client certificate for /metrics if a client CA is given, and a
// bearer token if a token file is.
func (cfg *Config) metricsAccess(log *slog.Logger) (metrics.Access, error) {
	var a metrics.Access
	on, err := mtls.AllOrNone(mtls.File{Flag: "metrics-tls-cert", Path: cfg.MetricsTLSCertFile}, mtls.File{Flag: "metrics-tls-key", Path: cfg.MetricsTLSKeyFile})
	if err != nil {
		return a, err
	}
	asked := on || cfg.MetricsTLSClientCAFile != "" || cfg.MetricsTokenFile != ""
	if asked && cfg.MetricsAddress == "" {
		return a, errors.New("--metrics-tls-cert, --metrics-tls-key, --metrics-tls-client-ca and --metrics-token-file are for the metrics listener, and --metrics-listen is empty")
	}
	if !on {
		switch {
		case cfg.MetricsTLSClientCAFile != "":
			return a, errors.New("--metrics-tls-client-ca needs --metrics-tls-cert and --metrics-tls-key")
		case cfg.MetricsTokenFile != "":
			return a, errors.New("--metrics-token-file needs --metrics-tls-cert and --metrics-tls-key: without TLS the token would cross the network in clear")
		}
		return a, nil
	}
	tlsLog := log.With("listener", cfg.MetricsAddress)
	files, err := mtls.LoadServer(mtls.Config{CertFile: cfg.MetricsTLSCertFile, KeyFile: cfg.MetricsTLSKeyFile, CAFile: cfg.MetricsTLSClientCAFile, Logger: tlsLog})
	if err != nil {
		return a, err
	}
	a.TLS, a.RequireClientCert, a.TokenFile = files.HTTPServerConfig(), cfg.MetricsTLSClientCAFile != "", cfg.MetricsTokenFile
	return a, nil
}
