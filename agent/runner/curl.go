package runner

import (
	"math"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

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
// T --connect-timeout T -w CurlWriteOut http://TARGET:PORT/` from a
// normalized spec. -q ignores any .curlrc, --noproxy * any proxy variable of
// the agent's environment, -g keeps the brackets of an IPv6 URL literal;
// -v makes curl 7.88 say why a connection failed ("connect to ... failed:
// Connection refused"), which its one-line error does not.
func curlCommand(spec *measurev1.TestSpec, target string, port uint32, netns string) proc.Command {
	t := strconv.FormatFloat(spec.GetHttp().GetTimeout().AsDuration().Seconds(), 'f', -1, 64)
	host := target
	if a, err := netip.ParseAddr(target); err == nil && a.Is6() && !a.Is4In6() {
		host = "[" + target + "]"
	}
	return proc.Command{
		Name: "curl",
		Args: []string{
			"-q", "-g", "-v", "-sS",
			"-o", "/dev/null",
			"--noproxy", "*",
			"--max-time", t,
			"--connect-timeout", t,
			"-w", CurlWriteOut,
			"http://" + host + ":" + strconv.FormatUint(uint64(port), 10) + "/",
		},
		NetNS: netns,
	}
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
// errormsg and -v's reason. An HTTP status outside 200..299 is TOOL_ERROR
// "HTTP status 404 ..." without metrics: only STATUS_OK results carry
// metrics, and a target that answers 404 is not measuring the path.
func ParseCurl(out proc.Output) (*measurev1.HttpMetrics, error) {
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
		x, err := strconv.ParseFloat(kv[key], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || math.Signbit(x) {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %s %q in curl output", key, kv[key])
		}
		*dst = x
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
	m, err := ParseCurl(out)
	if err != nil {
		return []*measurev1.Result{failed(spec, 0, asFailure(err))}
	}
	r := okResult(spec, 0)
	r.Metrics = &measurev1.Result_Http{Http: m}
	return []*measurev1.Result{r}
}
