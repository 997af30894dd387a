package runner

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// External is a target outside the mesh (an entry of the coordinator's
// Endpoints.external_targets) as the agent resolved it, for RunExternal.
type External struct {
	// Name is the entry's name; RunClient.external_target must name it.
	Name string
	// IP is the address the agent resolved the entry's address to (the
	// address itself when it is an IP); the tool sends to it and to no
	// other address. It must pass protocol.ParseEndpointIP.
	IP netip.Addr
	// HTTPURL is what an HTTP test fetches: the entry's http_url, an http
	// or https URL whose host is the entry's address (see
	// protocol.ValidateExternalTarget). Empty means no HTTP test.
	HTTPURL string
	// Iperf3Port is the entry's iperf3_port: the only port an iperf3
	// client to the target may use; 0 means no iperf3 test.
	Iperf3Port uint32
	// QperfPort and QperfDataPort are the entry's qperf_port and
	// qperf_data_port: the only ports a qperf client to the target may
	// pin (-lp, -ip); 0 means no qperf test.
	QperfPort, QperfDataPort uint32
}

// entry is ext as the allowlist entry CheckExternal reads.
func (ext *External) entry() *measurev1.ExternalTarget {
	return &measurev1.ExternalTarget{Name: ext.Name, HttpUrl: ext.HTTPURL, Iperf3Port: ext.Iperf3Port,
		QperfPort: ext.QperfPort, QperfDataPort: ext.QperfDataPort}
}

// RunExternal runs req's client against the external target ext, like Run
// otherwise (results, statuses, deadlines; TargetAddress is ext.IP).
// req.external_target must be ext.Name and target_ip empty; TEST_PING
// (to ext.IP) and TEST_HTTP (a GET of ext.HTTPURL, which must not be
// empty) run without ports; an iperf3 test (iperf3 -c ext.IP -p PORT -J
// ...) only with port ext.Iperf3Port (not 0) and no data_port, a qperf
// test (qperf -lp PORT -ip DATA_PORT ext.IP TEST) only with port and
// data_port ext.QperfPort and ext.QperfDataPort (not 0): the ports the
// allowlist names, no other. A request that breaks these rules is
// INVALID, with a message naming the field and its value, and runs no
// tool. An iperf3 server serving another client answers "the server is
// busy running a test", which is STATUS_BUSY (retried by the coordinator,
// never a sample).
//
// curl fetches HTTPURL itself, so that the request carries the URL's host
// in its Host header and TLS SNI, and verifies an https certificate (no
// -k); when the URL's host is a DNS name, --resolve HOST:PORT:IP pins it
// to ext.IP (PORT the URL's, else 80 or 443 by scheme; an IPv6 IP in
// brackets); and --connect-to ::IP: (any host, any port, to ext.IP on the
// URL's port) holds even when curl reads the URL's host otherwise than Go
// does: curl connects to exactly the address the agent checked and never
// resolves a name itself. When the host is an IP, it must be ext.IP.
// -q, -g and --noproxy * keep their meaning: no .curlrc, no URL
// globbing of brackets and braces, and no proxy whatever the agent's
// environment says. Redirects are not followed: a 3xx answer is a
// TOOL_ERROR, like any status outside 200..299.
func (r *Runner) RunExternal(ctx context.Context, req *agentv1.RunClient, ext External) []*measurev1.Result {
	return r.run(ctx, req, &ext)
}

// CheckExternal checks what RunExternal can check of req before the
// target's address is resolved, so that a caller refuses a bad request
// before it resolves anything: req.external_target names e, target_ip is
// empty, and the test is TEST_PING or TEST_HTTP (e with a non-empty
// http_url) without port and data_port, an iperf3 test with port e's
// iperf3_port (not 0) and no data_port, or a qperf test with port and
// data_port e's qperf_port and qperf_data_port (not 0). The trust rule:
// an agent sends to an external target on the allowlisted ports only.
// The error is a *Failure with STATUS_INVALID and a message naming the
// field and its value.
func CheckExternal(req *agentv1.RunClient, e *measurev1.ExternalTarget) error {
	invalid := func(format string, args ...any) error {
		return fail(measurev1.Status_STATUS_INVALID, format, args...)
	}
	name, got := e.GetName(), req.GetExternalTarget()
	switch {
	case got == "":
		return invalid("external_target is empty: a run against external target %q must name it", name)
	case got != name:
		return invalid("external_target %q is not the external target %q this run was given", got, name)
	case req.GetTargetIp() != "":
		return invalid("external_target %q: target_ip %q must be empty with an external target", got, req.GetTargetIp())
	}
	test := req.GetSpec().GetTest()
	noPorts := func() error {
		if req.GetPort() != 0 || req.GetDataPort() != 0 {
			return invalid("external_target %q: port %d and data_port %d must be 0 for test %s", got, req.GetPort(), req.GetDataPort(), testspec.Name(test))
		}
		return nil
	}
	switch testspec.Tool(test) {
	case measurev1.Tool_TOOL_PING:
		return noPorts()
	case measurev1.Tool_TOOL_CURL:
		if e.GetHttpUrl() == "" {
			return invalid("external_target %q has no http_url: it takes no HTTP test (test %s)", got, testspec.Name(test))
		}
		return noPorts()
	case measurev1.Tool_TOOL_IPERF3:
		switch want := e.GetIperf3Port(); {
		case want == 0:
			return invalid("external_target %q has no iperf3_port: it takes no iperf3 test (test %s)", got, testspec.Name(test))
		case req.GetPort() != want:
			return invalid("external_target %q: port %d is not its iperf3_port %d (test %s)", got, req.GetPort(), want, testspec.Name(test))
		case req.GetDataPort() != 0:
			return invalid("external_target %q: data_port %d must be 0 for test %s", got, req.GetDataPort(), testspec.Name(test))
		}
		return nil
	case measurev1.Tool_TOOL_QPERF:
		switch wantPort, wantData := e.GetQperfPort(), e.GetQperfDataPort(); {
		case wantPort == 0 || wantData == 0:
			return invalid("external_target %q has no qperf_port and qperf_data_port: it takes no qperf test (test %s)", got, testspec.Name(test))
		case req.GetPort() != wantPort:
			return invalid("external_target %q: port %d is not its qperf_port %d (test %s)", got, req.GetPort(), wantPort, testspec.Name(test))
		case req.GetDataPort() != wantData:
			return invalid("external_target %q: data_port %d is not its qperf_data_port %d (test %s)", got, req.GetDataPort(), wantData, testspec.Name(test))
		}
		return nil
	default:
		return invalid("external_target %q: test %s cannot run against an external target: only ping, HTTP, iperf3 and qperf can",
			got, testspec.Name(test))
	}
}

// address is ext.IP: RunExternal sends to no other address.
func (ext *External) address(*agentv1.RunClient) string { return ext.IP.String() }

// command is spec's ping or iperf3 command to ext.IP, or its curl command
// of ext.HTTPURL pinned to ext.IP (curlExternalCommand); ab does not run
// to an external target (check refuses it).
func (ext *External) command(req *agentv1.RunClient, spec *measurev1.TestSpec, netns string) (proc.Command, *Failure) {
	switch testspec.Tool(spec.GetTest()) {
	case measurev1.Tool_TOOL_PING:
		return pingCommand(spec, ext.IP.String(), netns), nil
	case measurev1.Tool_TOOL_IPERF3:
		return iperf3Command(spec, ext.IP.String(), req.GetPort(), netns), nil
	default:
		cmd, err := curlExternalCommand(spec, ext.HTTPURL, ext.IP, netns)
		if err != nil {
			return cmd, fail(measurev1.Status_STATUS_INVALID, "%v", err)
		}
		return cmd, nil
	}
}

// check checks a RunExternal request: see RunExternal.
func (ext *External) check(req *agentv1.RunClient, _ *measurev1.TestSpec) *Failure {
	if err := CheckExternal(req, ext.entry()); err != nil {
		return asFailure(err)
	}
	name := req.GetExternalTarget()
	if err := protocol.CheckExternalIP(ext.IP); err != nil {
		return fail(measurev1.Status_STATUS_INVALID, "external_target %q: resolved address: %v", name, err)
	}
	if testspec.Tool(req.GetSpec().GetTest()) == measurev1.Tool_TOOL_CURL {
		if _, err := curlPin(ext.HTTPURL, ext.IP); err != nil {
			return fail(measurev1.Status_STATUS_INVALID, "external_target %q: %v", name, err)
		}
	}
	return nil
}

// curlExternalCommand builds `curl OPTIONS [--resolve HOST:PORT:IP]
// --connect-to ::IP: URL` for an external target: OPTIONS as curlCommand
// has them, rawURL as it is, the --resolve pin (curlPin) when its host is
// a DNS name, and the catch-all connectTo. The error names the URL and
// what is wrong with it.
func curlExternalCommand(spec *measurev1.TestSpec, rawURL string, ip netip.Addr, netns string) (proc.Command, error) {
	pin, err := curlPin(rawURL, ip)
	if err != nil {
		return proc.Command{}, err
	}
	args := curlOptions(spec)
	if pin != "" {
		args = append(args, "--resolve", pin)
	}
	args = append(args, connectTo(ip)...)
	return proc.Command{Name: "curl", Args: append(args, rawURL), NetNS: netns}, nil
}

// connectTo is curl's --connect-to ::IP: (an IPv6 ip in brackets): every
// connection, whatever host and port curl makes of the URL, goes to ip on
// that port; the Host header, TLS SNI and certificate check stay the
// URL's. It backs the --resolve pin up where curl's reading of a host
// differs from Go's (curl takes 0x7f.1 for 127.0.0.1, and then ignores a
// --resolve for 0x7f.1).
func connectTo(ip netip.Addr) []string {
	s := ip.String()
	if ip.Is6() {
		s = "[" + s + "]"
	}
	return []string{"--connect-to", "::" + s + ":"}
}

// curlPin returns the value of curl's --resolve that sends a request for
// rawURL to ip: "HOST:PORT:IP" with HOST as the URL spells it (curl
// matches it case-insensitively, but a trailing dot must match), PORT the
// URL's or the scheme's default (http 80, https 443), and an IPv6 ip in
// brackets; "" when the URL's host is an IP, which must then be ip. It
// refuses (naming http_url and its value) a URL that is not an absolute
// http or https URL with a host, has user information, whitespace or
// control characters, a host that is neither an IP nor a DNS name as
// protocol.ParseExternalAddress accepts one (curl would read it otherwise
// than Go: 0x7f.1 is 127.0.0.1 to curl), or an ip that
// protocol.CheckExternalIP refuses.
func curlPin(rawURL string, ip netip.Addr) (string, error) {
	bad := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("http_url %q: %s", rawURL, fmt.Sprintf(format, args...))
	}
	if strings.IndexFunc(rawURL, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return bad("has whitespace or control characters")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("%v", err)
	}
	if err := protocol.CheckHTTPURL(u, rawURL); err != nil {
		return bad("%v", err)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if !ip.IsValid() || ip.Zone() != "" {
		return bad("resolved address %q is not a plain IP address", ip)
	}
	if err := protocol.CheckExternalIP(ip); err != nil {
		return bad("resolved address: %v", err)
	}
	if hostIP, err := netip.ParseAddr(host); err == nil {
		if hostIP != ip {
			return bad("host %s is not the resolved address %s", hostIP, ip)
		}
		return "", nil
	}
	if strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "" {
		return bad("host %q is neither an IP address nor a DNS name", host)
	}
	if _, err := protocol.ParseExternalAddress(host); err != nil {
		return bad("host %q is neither an IP address nor a DNS name: %v", host, err)
	}
	pinned := ip.String()
	if ip.Is6() {
		pinned = "[" + pinned + "]"
	}
	return host + ":" + port + ":" + pinned, nil
}
