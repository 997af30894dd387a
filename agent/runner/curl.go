package runner

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// curlMarker starts the block that CurlWriteOut makes curl print.
const curlMarker = "meshperf-curl 1"

// CurlWriteOut is the -w format: a marker line, then one key=value line per
// variable (times in seconds with 6 decimals, as curl 7.88 prints them).
// With -o /dev/null it is all that curl writes to stdout.
const CurlWriteOut = curlMarker + `\n` +
	`http_code=%{http_code}\n` +
	`time_namelookup=%{time_namelookup}\n` +
	`time_connect=%{time_connect}\n` +
	`time_appconnect=%{time_appconnect}\n` +
	`time_starttransfer=%{time_starttransfer}\n` +
	`time_total=%{time_total}\n` +
	`size_download=%{size_download}\n` +
	`exitcode=%{exitcode}\n` +
	`errormsg=%{errormsg}\n`

// curlCommand builds `curl -q -g -v -sS -o /dev/null --noproxy * --max-time
// T --connect-timeout T -w CurlWriteOut URL` from a normalized spec, URL as
// curlURL builds it. -q ignores any .curlrc, --noproxy * any proxy variable
// of the agent's environment, -g keeps the brackets of an IPv6 URL literal;
// -v makes curl 7.88 say why a connection failed ("connect to ... failed:
// Connection refused"), which its one-line error does not.
func curlCommand(spec *measurev1.TestSpec, target string, port uint32, netns string) proc.Command {
	return proc.Command{Name: "curl", Args: append(curlOptions(spec), curlURL(target, port)), NetNS: netns}
}

// curlOptions are curl's options before the URL (and any --resolve), for
// a node target and an external one alike.
func curlOptions(spec *measurev1.TestSpec) []string {
	t := strconv.FormatFloat(spec.GetHttp().GetTimeout().AsDuration().Seconds(), 'f', -1, 64)
	return []string{
		"-q", "-g", "-v", "-sS",
		"-o", "/dev/null",
		"--noproxy", "*",
		"--max-time", t,
		"--connect-timeout", t,
		"-w", CurlWriteOut,
	}
}

// curlURL is http://HOST:PORT/ for target, an IP address: IPv4 as it is,
// IPv6 (IPv4-mapped ones too: the address is kept as given) in brackets,
// as netip.AddrPort prints them, and a zone percent-encoded as RFC 6874
// wants it in a URL: http://[fe80::1%25eth0]:8080/. A target that is not
// an IP (Run refuses those) is used as it is.
func curlURL(target string, port uint32) string {
	a, err := netip.ParseAddr(target)
	if err != nil || port > 65535 {
		return "http://" + target + ":" + strconv.FormatUint(uint64(port), 10) + "/"
	}
	hostPort := netip.AddrPortFrom(a, uint16(port)).String()
	if zone := a.Zone(); zone != "" {
		hostPort = "[" + a.WithZone("").String() + "%25" + escapeZone(zone) + "]:" + strconv.FormatUint(uint64(port), 10)
	}
	return "http://" + hostPort + "/"
}

// escapeZone percent-encodes every byte of an IPv6 zone that is not
// unreserved (RFC 3986: letters, digits, "-", ".", "_", "~").
func escapeZone(zone string) string {
	var b strings.Builder
	for i := 0; i < len(zone); i++ {
		c := zone[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// curlErrorRE matches curl's own error line: "curl: (7) Failed to connect ...".
var curlErrorRE = regexp.MustCompile(`(?m)^curl: \((\d+)\) (.*)$`)

// ParseCurl parses what curl 7.88 prints with -w CurlWriteOut and -v into
// metrics: http_code, and time_namelookup, time_connect, time_appconnect,
// time_starttransfer, time_total (seconds since the start) and
// size_download (bytes).
//
// The error is a *Failure, chosen by curl's exit status: 7 (could not
// connect) is REFUSED or UNREACHABLE as -v's "connect to ... failed: ..."
// line says (UNREACHABLE when it says nothing known), 28 TIMEOUT, 6 (could
// not resolve) UNREACHABLE, others TOOL_ERROR; the message is curl's
// errormsg and -v's reason. With exit 0, a time_* figure that is not a
// plain decimal (no hex float, exponent, sign or underscore) or is above 1
// day, or times out of order (namelookup <= connect <= appconnect, when
// not 0, <= starttransfer <= total; connect <= starttransfer) are
// PARSE_ERROR naming the fields. An HTTP status outside 200..299 is TOOL_ERROR
// "HTTP status 404 ..." without metrics: only STATUS_OK results carry
// metrics, and a target that answers 404 is not measuring the path. When
// out.Truncated, a failure's message starts with "curl output truncated
// at 8 MiB".
func ParseCurl(out proc.Output) (*measurev1.HttpMetrics, error) {
	return parseCurl(out, 0)
}

// curlBound is how far past its --max-time a curl time_* figure may be
// before it cannot be true: curl stops the transfer at --max-time (it
// overshoots by its polling, milliseconds), so a figure far beyond it is
// a counter gone wrong (some curl versions wrap), not a slow path. Twice
// --max-time plus 1 s leaves room for a loaded host.
func curlBound(maxTime time.Duration) float64 {
	return 2*maxTime.Seconds() + 1
}

// parseCurl is ParseCurl for a run with --max-time maxTime (0: not known,
// only the 1-day bound applies): a time_* figure above curlBound(maxTime)
// is a PARSE_ERROR naming the field, its value and --max-time.
//
// PARSE_ERROR, not STATUS_INVALID: these are figures the agent's own tool
// printed that cannot be a measurement, the class of failure the runner's
// parsers report as PARSE_ERROR (doc.go); STATUS_INVALID is kept for specs
// and requests refused and for figures the coordinator's checks refuse,
// so that "this agent's curl printed garbage" and "the coordinator refused
// what an agent sent" stay apart.
func parseCurl(out proc.Output, maxTime time.Duration) (_ *measurev1.HttpMetrics, err error) {
	defer func() { err = parseFailure("curl", out, err) }()
	kv := curlValues(string(out.Stdout))
	stderr := string(out.Stderr)
	msg := kv["errormsg"]
	if e := curlErrorRE.FindAllStringSubmatch(stderr, -1); msg == "" && e != nil {
		msg = e[len(e)-1][2]
	}
	if out.ExitCode != 0 {
		reason := curlReason(stderr)
		status := measurev1.Status_STATUS_TOOL_ERROR
		switch out.ExitCode {
		case 7:
			status = classifyText(reason)
			if status != measurev1.Status_STATUS_REFUSED {
				status = measurev1.Status_STATUS_UNREACHABLE
			}
		case 28:
			status = measurev1.Status_STATUS_TIMEOUT
		case 6:
			status = measurev1.Status_STATUS_UNREACHABLE
		}
		if msg == "" {
			msg = tail(out.Stderr, 2)
		}
		if reason != "" && !strings.Contains(msg, reason) {
			msg += " (" + reason + ")"
		}
		return nil, fail(status, "curl exit %d: %s", out.ExitCode, msg)
	}
	if kv == nil {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "no %q block in curl output: %.80q", curlMarker, out.Stdout)
	}
	code, err := strconv.ParseUint(kv["http_code"], 10, 32)
	if err != nil {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad http_code %q in curl output", kv["http_code"])
	}
	m := &measurev1.HttpMetrics{HttpCode: uint32(code)}
	for _, f := range []struct {
		key string
		dst *float64
	}{
		{"time_namelookup", &m.NamelookupSeconds},
		{"time_connect", &m.ConnectSeconds},
		{"time_appconnect", &m.TlsSeconds},
		{"time_starttransfer", &m.FirstByteSeconds},
		{"time_total", &m.TotalSeconds},
	} {
		key, dst := f.key, f.dst
		x, err := parsePlainDecimal(kv[key], 0)
		if err != nil {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %s %q in curl output", key, abbrev(kv[key]))
		}
		if x > maxCurlSeconds {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "curl %s = %s s is above 1 day, not a measurement", key, abbrev(kv[key]))
		}
		if maxTime > 0 && x > curlBound(maxTime) {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "curl %s = %s s is far beyond --max-time %s, which curl stops at: not a measurement",
				key, abbrev(kv[key]), strconv.FormatFloat(maxTime.Seconds(), 'f', -1, 64))
		}
		*dst = x
	}
	if err := curlTimesInOrder(kv, m); err != nil {
		return nil, err
	}
	if m.SizeDownloadBytes, err = strconv.ParseUint(kv["size_download"], 10, 64); err != nil {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad size_download %q in curl output", kv["size_download"])
	}
	if code < 200 || code > 299 {
		return nil, fail(measurev1.Status_STATUS_TOOL_ERROR, "HTTP status %d (%d bytes) from the target", code, m.SizeDownloadBytes)
	}
	if m.TotalSeconds <= 0 {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "zero time_total in curl output")
	}
	return m, nil
}

// curlTimesInOrder checks that curl's times, each counted from the start,
// are in the order the request goes through: name lookup, connect, TLS
// (time_appconnect, 0 without TLS), first byte, total.
func curlTimesInOrder(kv map[string]string, m *measurev1.HttpMetrics) error {
	type point struct {
		key string
		x   float64
	}
	afterConnect := point{"time_connect", m.GetConnectSeconds()}
	if m.GetTlsSeconds() > 0 {
		afterConnect = point{"time_appconnect", m.GetTlsSeconds()}
	}
	for _, p := range [][2]point{
		{{"time_namelookup", m.GetNamelookupSeconds()}, {"time_connect", m.GetConnectSeconds()}},
		{{"time_connect", m.GetConnectSeconds()}, afterConnect},
		{afterConnect, {"time_starttransfer", m.GetFirstByteSeconds()}},
		{{"time_starttransfer", m.GetFirstByteSeconds()}, {"time_total", m.GetTotalSeconds()}},
	} {
		if p[1].x < p[0].x {
			return fail(measurev1.Status_STATUS_PARSE_ERROR, "curl %s = %s is before %s = %s", p[1].key, kv[p[1].key], p[0].key, kv[p[0].key])
		}
	}
	return nil
}

// curlValues returns the key=value lines after the last marker line, or nil
// if there is no marker.
func curlValues(stdout string) map[string]string {
	i := strings.LastIndex(stdout, curlMarker+"\n")
	if i < 0 || (i > 0 && stdout[i-1] != '\n') {
		return nil
	}
	kv := map[string]string{}
	for _, line := range strings.Split(stdout[i+len(curlMarker)+1:], "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			if _, seen := kv[k]; !seen {
				kv[k] = strings.TrimSpace(v)
			}
		}
	}
	return kv
}

// curlReason finds why curl -v could not connect: the text after the last
// colon of "* connect to X port N failed: Connection refused" or "*
// Immediate connect fail for X: Network is unreachable".
func curlReason(stderr string) string {
	reason := ""
	for _, line := range strings.Split(stderr, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "* ") || !strings.Contains(line, "connect fail") && !strings.Contains(line, "failed: ") {
			continue
		}
		if i := strings.LastIndex(line, ": "); i >= 0 {
			reason = strings.TrimPrefix(line[:i], "* ") + ": " + line[i+2:]
		}
	}
	return reason
}

// curlResults turns one curl run into its result.
func curlResults(spec *measurev1.TestSpec, out proc.Output) []*measurev1.Result {
	m, err := parseCurl(out, spec.GetHttp().GetTimeout().AsDuration())
	if err != nil {
		return []*measurev1.Result{failed(spec, 0, asFailure(err))}
	}
	r := okResult(spec, 0)
	r.Metrics = &measurev1.Result_Http{Http: m}
	return []*measurev1.Result{r}
}
