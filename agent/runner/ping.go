package runner

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// pingCommand builds `ping -n -c COUNT -i INTERVAL -s SIZE -W 1 TARGET` from
// a normalized spec. There is deliberately no -w DEADLINE: with -w, iputils
// ping keeps sending past COUNT until COUNT replies arrived or the deadline
// passed (-c 3 -w 3 against a silent peer sent 15 probes), which changes
// what the loss ratio is a ratio of. Without it ping sends exactly COUNT
// probes and waits at most 1 s (-W 1) for the last reply; the context's
// deadline bounds the rest.
func pingCommand(spec *measurev1.TestSpec, target, netns string) proc.Command {
	p := spec.GetPing()
	return proc.Command{
		Name: "ping",
		Args: []string{
			"-n",
			"-c", strconv.FormatUint(uint64(p.GetCount()), 10),
			"-i", strconv.FormatFloat(p.GetInterval().AsDuration().Seconds(), 'f', -1, 64),
			"-s", strconv.FormatUint(uint64(p.GetPayloadSizeBytes()), 10),
			"-W", "1",
			target,
		},
		NetNS: netns,
	}
}

var (
	// 5 packets transmitted, 5 received, +1 duplicates, +3 errors, 0% packet loss, time 819ms
	pingSummaryRE = regexp.MustCompile(`(?m)^(\d+) packets transmitted, (\d+) received((?:, \+\d+ [a-z]+)*)`)
	pingExtraRE   = regexp.MustCompile(`\+(\d+) ([a-z]+)`)
	// rtt min/avg/max/mdev = 0.033/0.050/0.085/0.017 ms
	pingRTTRE = regexp.MustCompile(`(?m)^rtt min/avg/max/mdev = ([^/\s]+)/([^/\s]+)/([^/\s]+)/([^/\s]+) ms`)
	// From 10.250.0.1 icmp_seq=1 Destination Host Unreachable
	pingErrorRE = regexp.MustCompile(`(?m)^From \S+ icmp_seq=\d+ (.+)$`)
)

// ParsePing parses the output of iputils ping 20221126 (`ping -n -c ...`,
// LC_ALL=C) into metrics in base units: the summary line "N packets
// transmitted, M received[, +D duplicates][, +E errors], X% packet loss"
// and "rtt min/avg/max/mdev = a/b/c/d ms" (milliseconds, converted to
// seconds). loss_ratio is 1 - received/transmitted.
//
// The error is a *Failure: UNREACHABLE when no reply came back (message
// "0/5 echo replies", with the first ICMP error ping printed, e.g. "Destination
// Host Unreachable") or ping could not send ("connect: Network is
// unreachable"); TOOL_ERROR for other complaints of ping (exit status 2);
// PARSE_ERROR when the summary or the rtt line is missing or malformed,
// when an rtt figure is not a plain decimal, is above 1 hour (not a
// measurement) or out of order (min <= avg <= max, mdev <= max), and
// "ping output truncated at 8 MiB before its summary" when out.Truncated
// and there is no summary. When out.Truncated, any failure's message starts
// with "ping output truncated at 8 MiB".
func ParsePing(out proc.Output) (*measurev1.PingMetrics, error) {
	return parsePing(out, 0)
}

// parsePing is ParsePing for a run asked for count echo requests (0: not
// known). ping cannot send more than -c COUNT, so more transmitted than
// count is a PARSE_ERROR. Fewer is accepted: iputils ping prints its
// summary with what it sent so far when it is interrupted (SIGINT, from a
// person or a supervisor; proc's SIGKILL at the deadline leaves no summary
// and is TIMEOUT), and packets_transmitted and loss_ratio then say how
// many it sent and what share of those came back.
func parsePing(out proc.Output, count uint32) (_ *measurev1.PingMetrics, err error) {
	defer func() { err = parseFailure("ping", out, err) }()
	stdout, stderr := string(out.Stdout), strings.TrimSpace(string(out.Stderr))
	sums := pingSummaryRE.FindAllStringSubmatch(stdout, -1)
	if len(sums) == 0 {
		if out.Truncated {
			msg := fmt.Sprintf("%s before its summary (exit %d)", truncatedWords("ping"), out.ExitCode)
			if stderr != "" {
				msg += "; stderr: " + tail(out.Stderr, 1)
			}
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%s", msg)
		}
		if stderr != "" {
			status := classifyText(stderr)
			if status == measurev1.Status_STATUS_UNSPECIFIED {
				status = measurev1.Status_STATUS_TOOL_ERROR
			}
			return nil, fail(status, "%s", stderr)
		}
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "no summary in ping output (exit %d): %s", out.ExitCode, tail(out.Stdout, 3))
	}
	sum := sums[len(sums)-1]
	m := &measurev1.PingMetrics{}
	if m.PacketsTransmitted, err = parseUint32(sum[1]); err != nil {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "packets transmitted %q: %v", sum[1], err)
	}
	if m.PacketsReceived, err = parseUint32(sum[2]); err != nil {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "packets received %q: %v", sum[2], err)
	}
	for _, extra := range pingExtraRE.FindAllStringSubmatch(sum[3], -1) {
		n, err := parseUint32(extra[1])
		if err != nil {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%s %q: %v", extra[2], extra[1], err)
		}
		switch extra[2] {
		case "duplicates":
			m.Duplicates = n
		case "errors":
			m.Errors = n
		}
	}
	if count > 0 && m.PacketsTransmitted > count {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "packets transmitted %d is more than the %d asked for (-c %d): %s",
			m.PacketsTransmitted, count, count, sum[0])
	}
	if m.PacketsTransmitted == 0 {
		return nil, fail(measurev1.Status_STATUS_TOOL_ERROR, "ping sent no echo request: %s", firstNonEmpty(stderr, sum[0]))
	}
	if m.PacketsReceived > m.PacketsTransmitted {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "more replies than requests: %s", sum[0])
	}
	if m.PacketsReceived == 0 {
		msg := fmt.Sprintf("%d/%d echo replies", m.PacketsReceived, m.PacketsTransmitted)
		if m.Errors > 0 {
			msg += fmt.Sprintf(", +%d errors", m.Errors)
		}
		if e := pingErrorRE.FindStringSubmatch(stdout); e != nil {
			msg += ": " + e[0]
		}
		return nil, fail(measurev1.Status_STATUS_UNREACHABLE, "%s", msg)
	}
	m.LossRatio = 1 - float64(m.PacketsReceived)/float64(m.PacketsTransmitted)
	rtts := pingRTTRE.FindAllStringSubmatch(stdout, -1)
	if len(rtts) == 0 {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d replies but no rtt line in ping output: %s", m.PacketsReceived, tail(out.Stdout, 2))
	}
	rtt := rtts[len(rtts)-1]
	for i, f := range []struct {
		name string
		dst  *float64
	}{{"min", &m.RttMinSeconds}, {"avg", &m.RttAvgSeconds}, {"max", &m.RttMaxSeconds}, {"mdev", &m.RttMdevSeconds}} {
		if strings.HasPrefix(rtt[i+1], "-") {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt %s %s ms is negative in %q", f.name, rtt[i+1], rtt[0])
		}
		// "0.036"+"e-3": milliseconds to seconds without a rounding step.
		sec, err := parsePlainDecimal(rtt[i+1], -3)
		if err != nil {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad rtt %s: %v in %q", f.name, err, rtt[0])
		}
		if sec > maxTimeSeconds {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt %s %s ms is above 1 hour, not a measurement", f.name, abbrev(rtt[i+1]))
		}
		*f.dst = sec
	}
	if m.RttAvgSeconds <= 0 {
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "zero average rtt in %q", rtt[0])
	}
	switch {
	case m.RttMinSeconds > m.RttAvgSeconds:
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt min %s ms is above avg %s ms in %q", rtt[1], rtt[2], rtt[0])
	case m.RttAvgSeconds > m.RttMaxSeconds:
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt avg %s ms is above max %s ms in %q", rtt[2], rtt[3], rtt[0])
	case m.RttMdevSeconds > m.RttMaxSeconds:
		return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt mdev %s ms is above max %s ms in %q", rtt[4], rtt[3], rtt[0])
	}
	return m, nil
}

// pingResults turns one ping run into its result (parsePing with the
// spec's count).
func pingResults(spec *measurev1.TestSpec, out proc.Output) []*measurev1.Result {
	m, err := parsePing(out, spec.GetPing().GetCount())
	if err != nil {
		return []*measurev1.Result{failed(spec, 0, asFailure(err))}
	}
	r := okResult(spec, 0)
	r.Metrics = &measurev1.Result_Ping{Ping: m}
	return []*measurev1.Result{r}
}

func parseUint32(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("not a 32-bit count")
	}
	return uint32(n), nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}
