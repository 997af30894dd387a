// Command agent is meshperf's node agent (a DaemonSet on hostNetwork, or a
// process in a lab node's namespace): it registers with the coordinator and
// runs tests on its orders. See package agent.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/signals"
	"github.com/meshperf/meshperf/internal/version"
)

func main() {
	if err := signals.Execute(context.Background(), NewCommand(os.Stdout, os.Stderr), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

// NewCommand returns the agent's command tree (the root `agent`, which
// runs the agent, and `agent endpoint`), writing its output to stdout and
// its logs and errors to stderr. The defaults of --node and --host-ip are
// read from $NODE_NAME and $HOST_IP when it is called. Execute it with a
// context (ExecuteContext); main runs it with signals.Execute, which adds
// SIGINT and SIGTERM. The tree also feeds the
// generated reference docs/cli/agent.md (internal/clidoc).
func NewCommand(stdout, stderr io.Writer) *cobra.Command {
	var (
		cfg                    agent.Config
		hostIP, podIP, service string
		allow, externalCIDRs   []string
		logLevel               string
	)
	cmd := &cobra.Command{
		Use:           "agent",
		Short:         "meshperf agent: runs network tests on this node on the coordinator's orders",
		Version:       version.Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: %w", logLevel, err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl, ReplaceAttr: safetext.LogAttr}))
			var err error
			for _, a := range []struct {
				flag, v string
				dst, v6 *netip.Addr
			}{{"host-ip", hostIP, &cfg.HostIP, &cfg.HostIPv6}, {"pod-ip", podIP, &cfg.PodIP, &cfg.PodIPv6},
				{"service-ip", service, &cfg.ServiceIP, &cfg.ServiceIPv6}} {
				if *a.dst, *a.v6, err = parseIPs(a.flag, a.v); err != nil {
					return err
				}
			}
			// The agent takes a zero port for its default: a zero given
			// here is a mistake, not a wish for the default.
			for _, name := range []string{"http-port", "probe-port", "iperf3-port", "qperf-port", "qperf-data-port"} {
				if fl := cmd.Flags().Lookup(name); fl.Changed && fl.Value.String() == "0" {
					return fmt.Errorf("--%s 0 is not a port: want 1..65535", name)
				}
			}
			if !cmd.Flags().Changed("state-dir") {
				cfg.StateDir = "/run/meshperf/agent-" + cfg.NodeName
			}
			for _, s := range allow {
				p, err := parseCIDR("--allow-target", s)
				if err != nil {
					return err
				}
				cfg.AllowTargets = append(cfg.AllowTargets, p)
			}
			for _, s := range externalCIDRs {
				p, err := parseCIDR("--external-cidr", s)
				if err != nil {
					return err
				}
				cfg.ExternalCIDRs = append(cfg.ExternalCIDRs, p)
			}
			return agent.Run(cmd.Context(), cfg)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	f := cmd.Flags()
	f.StringVar(&cfg.Coordinator, "coordinator", "", `coordinator gRPC address: "host:port" or "unix:///path" (required)`)
	f.StringVar(&cfg.NodeName, "node", os.Getenv("NODE_NAME"), "node name (default $NODE_NAME)")
	f.StringVar(&hostIP, "host-ip", os.Getenv("HOST_IP"), "node's host network IP, or its IPv4 and IPv6 IPs comma-separated on a dual-stack node (default $HOST_IP)")
	f.StringVar(&podIP, "pod-ip", "", "IP of this node's pod endpoint, or its IPv4 and IPv6 IPs comma-separated")
	f.StringVar(&cfg.PodNetNS, "pod-netns", "", "network namespace of the pod endpoint: /proc/PID/ns/net or /run/netns/NAME")
	f.StringVar(&cfg.EndpointSocket, "endpoint-socket", "", "unix socket on which the node's pod endpoint (agent endpoint) connects; the agent takes the pod's netns and IP from it (excludes --pod-ip and --pod-netns)")
	f.StringVar(&service, "service-ip", "", "ClusterIP that fronts this node's pod endpoint, or its IPv4 and IPv6 ClusterIPs comma-separated")
	f.Uint32Var(&cfg.HTTPPort, "http-port", protocol.DefaultHTTPPort, "port of the HTTP target on each network")
	f.Uint32Var(&cfg.ProbePort, "probe-port", protocol.DefaultProbePort, "port of the TCP echo responder of the continuous probes on each network")
	f.Uint32Var(&cfg.Ports.Iperf3, "iperf3-port", protocol.DefaultIperf3Port, "iperf3 server port")
	f.Uint32Var(&cfg.Ports.Qperf, "qperf-port", protocol.DefaultQperfPort, "qperf listen port")
	f.Uint32Var(&cfg.Ports.QperfData, "qperf-data-port", protocol.DefaultQperfDataPort, "qperf data port")
	f.Uint32Var(&cfg.GossipPort, "gossip-port", protocol.DefaultGossipPort, "UDP and TCP port of the agent's memberlist gossip on its host IP (0: no gossip)")
	f.StringVar(&cfg.GossipKeyFile, "gossip-key-file", "", "file of gossip encryption keys: base64 of 16, 24 or 32 bytes, one per line; the first encrypts, all decrypt. Re-read every 10 s, so keys rotate without a restart: add the new key everywhere, make it first, then remove the old. Empty: plaintext gossip")
	f.StringVar(&cfg.StateDir, "state-dir", "", `directory of the agent's state: its running test servers' records, to kill those a crash left at its next start, and its spool of results the coordinator has not acknowledged; "" for none (no reclaim, and a spool in memory that dies with the agent) (default /run/meshperf/agent-NODE)`)
	f.StringSliceVar(&allow, "allow-target", nil, "extra CIDR or IP address that tests may target besides registered endpoints, and the only loopback addresses an external target may be or resolve to (repeatable)")
	f.StringSliceVar(&externalCIDRs, "external-cidr", nil, "CIDR or IP address that an external target from the coordinator's allowlist must be or resolve to (repeatable); none means any address but link-local, cloud metadata and loopback outside --allow-target")
	f.StringVar(&cfg.TLSCertFile, "tls-cert", "", "client certificate (PEM) presented to the coordinator; with --tls-key and --tls-ca the agent speaks TLS 1.3. The three files are re-read when they change (checked at most once a second, at a new connection); a bad new file keeps the old one in use, with a warning")
	f.StringVar(&cfg.TLSKeyFile, "tls-key", "", "private key (PEM) of --tls-cert; re-read with it")
	f.StringVar(&cfg.IdentityTokenFile, "identity-token-file", "", "file with this agent's identity token, its projected service-account token of audience meshperf, "+
		"presented to the coordinator at each connect (re-read each time: the kubelet rotates it) to prove the node it registers as; never logged")
	f.StringVar(&cfg.TLSCAFile, "tls-ca", "", "CA (PEM) that must have signed the coordinator's certificate (checked against the --coordinator host name too); re-read when it changes")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	_ = cmd.MarkFlagRequired("coordinator")
	cmd.AddCommand(endpointCmd(stderr))
	return cmd
}

// parseIPs takes the value of an address flag: "" (none), one address,
// or two comma-separated of different families (a dual-stack node's, as
// Kubernetes lists status.hostIPs and status.podIPs), and returns the
// primary address (IPv4 if given, else IPv6) and the IPv6 one beside an
// IPv4 primary (else the zero Addr). The error names the flag and the
// value.
func parseIPs(flag, s string) (primary, v6 netip.Addr, err error) {
	if s == "" {
		return netip.Addr{}, netip.Addr{}, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 2 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("--%s %q: at most two addresses, one IPv4 and one IPv6", flag, s)
	}
	var ips []netip.Addr
	for _, p := range parts {
		ip, err := netip.ParseAddr(strings.TrimSpace(p))
		if err != nil {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("--%s %q: %w", flag, s, err)
		}
		ips = append(ips, ip)
	}
	if len(ips) == 1 {
		return ips[0], netip.Addr{}, nil
	}
	if ips[0].Is4() == ips[1].Is4() {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("--%s %q: two addresses of the same family; want one IPv4 and one IPv6", flag, s)
	}
	if ips[0].Is6() {
		ips[0], ips[1] = ips[1], ips[0]
	}
	return ips[0], ips[1], nil
}

// parseCIDR takes the value of flag, a CIDR ("10.0.0.0/8") or one address
// ("192.0.2.7", as /32 or /128). A CIDR with host bits set is refused: it
// would allow more, or other, addresses than it seems to. The error names
// the flag and the value.
func parseCIDR(flag, s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%s %q: want a CIDR or an IP address: %w", flag, s, err)
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("%s %q has host bits set: did you mean %s?", flag, s, p.Masked())
	}
	return p, nil
}
