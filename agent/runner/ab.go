package runner

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// abCommand builds `ab -q -r -c C [-k] -s S -t T -n N URL` from a
// normalized http_load spec, URL as curlURL builds it (IPv6 in brackets,
// which ab 2.3 takes; a zoned address it does not, and checkRequest
// refuses it):
//   - -q: no "Completed N requests" progress lines on stderr.
//   - -r: a socket receive error (a refused or reset connection) is
//     counted ("Failed requests ... Receive") instead of aborting ab
//     without its summary.
//   - -s S: the socket timeout, testspec.LoadSocketTimeout(timeout): when
//     no request in flight gets a byte for S, ab aborts ("apr_pollset_poll:
//     The timeout specified has expired (70007)").
//   - -t T: the whole load's time limit (http_load.timeout); requests not
//     done by then count as failures. -t makes ab assume -n 50000, so -n
//     comes after it.
//   - -k: HTTP/1.0 keep-alive, when keep_alive is set.
//
// Not -l: an answer whose length differs from the first answer's is a
// failure (ab's "Length"), as http_load wants.
func abCommand(spec *measurev1.TestSpec, target string, port uint32, netns string) proc.Command {
	p := spec.GetHttpLoad()
	timeout := p.GetTimeout().AsDuration()
	args := []string{"-q", "-r", "-c", strconv.FormatUint(uint64(p.GetConcurrency()), 10)}
	if p.GetKeepAlive() {
		args = append(args, "-k")
	}
	args = append(args,
		"-s", strconv.FormatInt(int64(testspec.LoadSocketTimeout(timeout)/time.Second), 10),
		"-t", strconv.FormatInt(int64(timeout/time.Second), 10),
		"-n", strconv.FormatUint(uint64(p.GetRequests()), 10),
		curlURL(target, port))
	return proc.Command{Name: "ab", Args: args, NetNS: netns}
}

// abVersionRE finds ab's version in `ab -V`: "This is ApacheBench, Version
// 2.3 <$Revision$>".
var abVersionRE = regexp.MustCompile(`ApacheBench, Version ([0-9][0-9A-Za-z.\-]*)`)

// abVersion is "ApacheBench 2.3" for ab -V's first line, or the line
// itself when it is not ab's.
func abVersion(line string) string {
	if m := abVersionRE.FindStringSubmatch(line); m != nil {
		return "ApacheBench " + m[1]
	}
	return line
}

// abFigures are the lines of ab's summary, by the text before their
// colon.
type abFigures map[string]string

// abSummary returns the "Key: value" lines of ab's summary (from "Server
// Software:" on, before "Connection Times"), the percentile table
// ("50%" -> "1") and the Connection Times "Total:" line's fields;
// summary is nil when there is no "Complete requests:" line, i.e. ab
// aborted before its summary. Keys seen twice keep their first value
// ("Time per request": the mean over requests, not "across all
// concurrent requests").
func abSummary(stdout string) (summary abFigures, percent map[int]string, total []string) {
	percent = map[int]string{}
	figures := abFigures{}
	inTable := false
	for _, line := range strings.Split(stdout, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "Percentage of the requests served"):
			inTable = true
			continue
		case strings.HasPrefix(trimmed, "Total:") && strings.Contains(stdout, "Connection Times"):
			total = strings.Fields(strings.TrimPrefix(trimmed, "Total:"))
			continue
		case strings.HasPrefix(trimmed, "(Connect:"):
			if _, seen := figures["breakdown"]; !seen {
				figures["breakdown"] = trimmed
			}
			continue
		}
		if inTable {
			pct, rest, ok := strings.Cut(trimmed, "%")
			n, err := strconv.Atoi(pct)
			if !ok || err != nil {
				inTable = false
				continue
			}
			if f := strings.Fields(rest); len(f) > 0 {
				percent[n] = f[0]
			}
			continue
		}
		key, value, ok := strings.Cut(trimmed, ":")
		if !ok || strings.HasPrefix(trimmed, "apr_") {
			continue
		}
		if _, seen := figures[key]; !seen {
			figures[key] = strings.TrimSpace(value)
		}
	}
	if _, ok := figures["Complete requests"]; !ok {
		return nil, percent, total
	}
	return figures, percent, total
}

// abCountRE is a count as ab prints it: digits only.
var abCountRE = regexp.MustCompile(`^[0-9]{1,19}$`)

// count parses the count of key, whose value is "N" or "N unit"; absent
// is 0 when optional.
func (s abFigures) count(key string, optional bool) (uint64, error) {
	v, ok := s[key]
	if !ok {
		if optional {
			return 0, nil
		}
		return 0, fail(measurev1.Status_STATUS_PARSE_ERROR, "no %q line in ab's summary", key)
	}
	f := strings.Fields(v)
	if len(f) == 0 || !abCountRE.MatchString(f[0]) {
		return 0, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %s %q in ab output", key, abbrev(v))
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil || n > math.MaxInt64 {
		return 0, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %s %q in ab output", key, abbrev(v))
	}
	return n, nil
}

// decimal parses the figure of key, "X UNIT..." with the unit word
// unit ("seconds", "[#/sec]", "[ms]", "[Kbytes/sec]"), times 10^exp10
// (in decimal, as parsePlainDecimal) and times scale.
func (s abFigures) decimal(key, unit string, exp10 int, scale float64) (float64, error) {
	v, ok := s[key]
	if !ok {
		return 0, fail(measurev1.Status_STATUS_PARSE_ERROR, "no %q line in ab's summary", key)
	}
	f := strings.Fields(v)
	if len(f) < 2 || f[1] != unit {
		return 0, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %s %q in ab output (want a figure in %s)", key, abbrev(v), unit)
	}
	x, err := parsePlainDecimal(f[0], exp10)
	if err != nil {
		return 0, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %s %q in ab output", key, abbrev(v))
	}
	return x * scale, nil
}

// abBreakdownRE is the line under "Failed requests" when some failed.
var abBreakdownRE = regexp.MustCompile(`^\(Connect: ([0-9]{1,19}), Receive: ([0-9]{1,19}), Length: ([0-9]{1,19}), Exceptions: ([0-9]{1,19})\)$`)

// abPercents are the rows of ab's percentile table, in order.
var abPercents = [...]int{50, 66, 75, 80, 90, 95, 98, 99, 100}

// abDoneRE is what ab prints on stdout when it aborts after some
// requests: "Total of 45 requests completed".
var abDoneRE = regexp.MustCompile(`Total of ([0-9]+) requests completed`)

// abAborted is the failure of an ab run that printed no summary: ab's
// own words ("apr_pollset_poll: The timeout specified has expired
// (70007)" -> TIMEOUT; "Connection refused" -> REFUSED; unreachable ->
// UNREACHABLE; else TOOL_ERROR) and how many requests it had completed
// ("Total of N requests completed"), if it said.
func abAborted(out proc.Output) *Failure {
	words := tail(out.Stderr, 2)
	if words == "" {
		words = tail(out.Stdout, 1)
	}
	status := classifyText(words)
	switch {
	case strings.Contains(words, "timeout specified has expired"):
		status = measurev1.Status_STATUS_TIMEOUT
	case status == measurev1.Status_STATUS_UNSPECIFIED || status == measurev1.Status_STATUS_BUSY:
		status = measurev1.Status_STATUS_TOOL_ERROR
	}
	done := ""
	if m := abDoneRE.FindStringSubmatch(string(out.Stdout)); m != nil {
		done = " after " + m[1] + " requests completed"
	}
	if out.ExitCode == 0 {
		return fail(measurev1.Status_STATUS_PARSE_ERROR, "no summary in ab output%s: %s", done, abbrev(words))
	}
	return fail(status, "ab aborted (exit %d)%s without its summary: %s", out.ExitCode, done, words)
}

// ParseAb parses what ab 2.3 (apache2-utils 2.4.57..2.4.71, Debian 12)
// prints with abCommand's flags into HttpLoadMetrics for spec, a
// normalized http_load spec (its requests and concurrency are checked
// against ab's figures). note is what an OK result's message says:
// empty, or why successful_requests may be a lower bound, or ab's exit
// status and words (exitNote).
//
// Counting: successful = completed - ab's failed - non-2xx, at least 0;
// failed = requests - successful, so requests ab never completed (its
// time limit) are failures too. ab counts some requests twice (a non-2xx
// answer whose length differs from the first answer's is a Length
// failure and a non-2xx response; with -r a refused request is a Receive
// failure and an Exception), so successful is exact when only one kind of
// failure occurred and a lower bound otherwise (note says so).
//
// The error is a *Failure:
//   - no summary (ab aborted): see abAborted; exit 0 without one is
//     PARSE_ERROR.
//   - a summary whose answers carried no byte (Total transferred 0: every
//     request refused, reset or timed out) is UNREACHABLE with the counts,
//     and connectFailed is set: Run probes the port to tell REFUSED,
//     UNREACHABLE and TIMEOUT apart. One with bytes but no completed
//     request (ab prints no rates then) is TIMEOUT when nothing failed
//     (the target answered too slowly for -t), else TOOL_ERROR, both
//     with the counts.
//   - PARSE_ERROR naming the field and value: a required line missing
//     (Concurrency Level, Time taken for tests, Complete requests, Failed
//     requests, Total transferred; Requests per second, Time per request
//     and Transfer rate from 1 completed request on, the Connection Times
//     "Total:" line for 1, the percentile table from 2 on), a figure that
//     is not a plain count or decimal, a Concurrency Level other than -c,
//     more completed requests than -n, a breakdown (Connect, Receive,
//     Length, Exceptions) above Failed requests (below it is OK: ab counts
//     a response header it cannot read in none of the four, and note says
//     so), Non-2xx, Keep-Alive or Length counts above the completed ones,
//     percentiles out of order or longer than the load may last, a mean
//     time per request above 1 hour, a time taken above
//     testspec.ExpectedDuration (the timeout, the socket timeout and 2 s)
//     plus 10 s.
func ParseAb(out proc.Output, spec *measurev1.TestSpec) (m *measurev1.HttpLoadMetrics, note string, connectFailed bool, err error) {
	defer func() { err = parseFailure("ab", out, err) }()
	p := spec.GetHttpLoad()
	s, percent, total := abSummary(string(out.Stdout))
	if s == nil {
		return nil, "", false, abAborted(out)
	}
	m = &measurev1.HttpLoadMetrics{Requests: uint64(p.GetRequests())}
	conc, err := s.count("Concurrency Level", false)
	if err != nil {
		return nil, "", false, err
	}
	if conc != uint64(p.GetConcurrency()) {
		return nil, "", false, fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's Concurrency Level %d is not -c %d", conc, p.GetConcurrency())
	}
	m.Concurrency = uint32(conc)
	counts := []struct {
		key      string
		dst      *uint64
		optional bool
	}{
		{"Complete requests", &m.CompletedRequests, false},
		{"Non-2xx responses", &m.Non_2XxResponses, true},
		{"Keep-Alive requests", &m.KeepAliveRequests, true},
		{"Total transferred", &m.TransferredBytes, false},
	}
	for _, c := range counts {
		if *c.dst, err = s.count(c.key, c.optional); err != nil {
			return nil, "", false, err
		}
	}
	failedAb, err := s.count("Failed requests", false)
	if err != nil {
		return nil, "", false, err
	}
	if failedAb > 0 {
		b := abBreakdownRE.FindStringSubmatch(s["breakdown"])
		if b == nil {
			return nil, "", false, fail(measurev1.Status_STATUS_PARSE_ERROR, "Failed requests %d without its (Connect, Receive, Length, Exceptions) line: %q", failedAb, abbrev(s["breakdown"]))
		}
		var sum uint64
		for i, dst := range []*uint64{&m.ConnectFailures, &m.ReceiveFailures, &m.LengthFailures, &m.ExceptionFailures} {
			*dst, _ = strconv.ParseUint(b[i+1], 10, 64)
			if *dst > failedAb {
				return nil, "", false, fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's breakdown %q is more than Failed requests %d", b[0], failedAb)
			}
			sum += *dst
		}
		switch {
		case sum > failedAb:
			return nil, "", false, fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's breakdown %q is more than Failed requests %d", b[0], failedAb)
		case sum < failedAb:
			// ab.c counts a response whose header it cannot read (invalid,
			// or over its 8 KiB buffer) in Failed requests only.
			note = fmt.Sprintf("%d of ab's Failed requests %d are in none of Connect, Receive, Length and Exceptions: responses whose header ab could not read (invalid, or over 8 KiB)",
				failedAb-sum, failedAb)
		}
	}
	if m.CompletedRequests > m.Requests {
		return nil, "", false, fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's Complete requests %d is above -n %d", m.CompletedRequests, m.Requests)
	}
	for _, c := range []struct {
		what string
		n    uint64
	}{{"Non-2xx responses", m.Non_2XxResponses}, {"Keep-Alive requests", m.KeepAliveRequests}, {"Length failures", m.LengthFailures}} {
		if c.n > m.CompletedRequests {
			return nil, "", false, fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's %s %d is above its Complete requests %d", c.what, c.n, m.CompletedRequests)
		}
	}
	if m.CompletedRequests == 0 && m.TransferredBytes > 0 {
		// ab prints no rates and no times without a completed request.
		if failedAb == 0 {
			return nil, "", false, fail(measurev1.Status_STATUS_TIMEOUT, "ab completed none of %d requests within its time limit though %d bytes arrived: the target answers too slowly (Time taken for tests %s s)",
				m.Requests, m.TransferredBytes, abbrev(s["Time taken for tests"]))
		}
		return nil, "", false, fail(measurev1.Status_STATUS_TOOL_ERROR, "ab completed none of %d requests though %d bytes arrived (Failed requests %d: Connect %d, Receive %d, Length %d, Exceptions %d; Time taken for tests %s s)",
			m.Requests, m.TransferredBytes, failedAb, m.ConnectFailures, m.ReceiveFailures, m.LengthFailures, m.ExceptionFailures, abbrev(s["Time taken for tests"]))
	}
	if m.CompletedRequests == 0 {
		return nil, "", true, fail(measurev1.Status_STATUS_UNREACHABLE, "no answer from the target: ab completed none of %d requests (Failed requests %d: Connect %d, Receive %d, Exceptions %d)",
			m.Requests, failedAb, m.ConnectFailures, m.ReceiveFailures, m.ExceptionFailures)
	}
	if err := abRates(s, m, spec); err != nil {
		return nil, "", false, err
	}
	expected, _ := testspec.ExpectedDuration(spec)
	if err := abLatencies(percent, total, m, (expected+testspec.ClientSlack).Seconds()*1000); err != nil {
		return nil, "", false, err
	}
	bad := failedAb + m.Non_2XxResponses
	if bad < m.CompletedRequests {
		m.SuccessfulRequests = m.CompletedRequests - bad
	}
	m.FailedRequests = m.Requests - m.SuccessfulRequests
	if m.TransferredBytes == 0 {
		return nil, "", true, fail(measurev1.Status_STATUS_UNREACHABLE, "no answer from the target: ab completed %d of %d requests, none with a byte (Failed requests %d: Connect %d, Receive %d, Exceptions %d)",
			m.CompletedRequests, m.Requests, failedAb, m.ConnectFailures, m.ReceiveFailures, m.ExceptionFailures)
	}
	kinds := 0
	unexplained := failedAb - min(failedAb, m.ConnectFailures+m.ReceiveFailures+m.LengthFailures+m.ExceptionFailures)
	for _, n := range []uint64{m.ConnectFailures + m.ExceptionFailures, m.ReceiveFailures, m.LengthFailures, m.Non_2XxResponses, unexplained} {
		if n > 0 {
			kinds++
		}
	}
	if kinds > 1 {
		of := fmt.Sprintf("Connect %d, Receive %d, Length %d, Exceptions %d and Non-2xx %d",
			m.ConnectFailures, m.ReceiveFailures, m.LengthFailures, m.ExceptionFailures, m.Non_2XxResponses)
		if unexplained > 0 {
			of = fmt.Sprintf("Connect %d, Receive %d, Length %d, Exceptions %d, Non-2xx %d and the %d failures in none of them",
				m.ConnectFailures, m.ReceiveFailures, m.LengthFailures, m.ExceptionFailures, m.Non_2XxResponses, unexplained)
		}
		note = joinWords(note, fmt.Sprintf("successful_requests %d is a lower bound: ab may count one request in several of %s", m.SuccessfulRequests, of))
	}
	if out.ExitCode != 0 || len(lines(out.Stderr)) > 0 {
		note = joinWords(note, exitNote("ab", out.ExitCode, lines(out.Stderr)))
	}
	return m, note, false, nil
}

// abRates parses ab's duration, rates and mean time per request into m,
// and checks the duration against spec's timeout.
func abRates(s abFigures, m *measurev1.HttpLoadMetrics, spec *measurev1.TestSpec) error {
	var err error
	if m.DurationSeconds, err = s.decimal("Time taken for tests", "seconds", 0, 1); err != nil {
		return err
	}
	timeout := spec.GetHttpLoad().GetTimeout().AsDuration()
	// ab stops starting requests at -t and waits up to -s for those in
	// flight: ExpectedDuration; the slack is the coordinator's
	// (testspec.ClientSlack), which checks the same bound.
	expected, _ := testspec.ExpectedDuration(spec)
	if bound := expected + testspec.ClientSlack; m.DurationSeconds > bound.Seconds() {
		return fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's Time taken for tests %s s is far beyond its -t %s and -s: not a measurement",
			s["Time taken for tests"], testspec.Seconds(timeout))
	}
	if m.RequestsPerSecond, err = s.decimal("Requests per second", "[#/sec]", 0, 1); err != nil {
		return err
	}
	if m.LatencyMeanSeconds, err = s.decimal("Time per request", "[ms]", -3, 1); err != nil {
		return err
	}
	// ab's Kbytes are 1024 bytes.
	if m.TransferRateBps, err = s.decimal("Transfer rate", "[Kbytes/sec]", 0, 1024*8); err != nil {
		return err
	}
	for _, x := range []struct {
		key string
		v   float64
	}{{"Requests per second", m.RequestsPerSecond}, {"Time per request", m.LatencyMeanSeconds}, {"Transfer rate", m.TransferRateBps}} {
		if math.IsInf(x.v, 0) || math.IsNaN(x.v) {
			return fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's %s %q is out of range", x.key, abbrev(s[x.key]))
		}
	}
	if m.LatencyMeanSeconds > maxTimeSeconds {
		return fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's Time per request %s is above 1 hour, not a measurement", abbrev(s["Time per request"]))
	}
	return nil
}

// abLatencies fills m's percentiles from ab's table (ms, in order, at
// most maxMillis: no request outlasts the load), or for a single completed request, which ab prints no
// table for, from the Connection Times "Total:" line (min mean sd
// median max: every percentile is that request's time). With no
// completed request they stay 0.
func abLatencies(percent map[int]string, total []string, m *measurev1.HttpLoadMetrics, maxMillis float64) error {
	var ms [len(abPercents)]float64
	switch {
	case m.CompletedRequests == 0:
		return nil
	case m.CompletedRequests == 1 && len(percent) == 0:
		if len(total) != 5 {
			return fail(measurev1.Status_STATUS_PARSE_ERROR, "one completed request and no Connection Times Total: line in ab output")
		}
		x, err := parsePlainDecimal(total[4], 0)
		if err != nil {
			return fail(measurev1.Status_STATUS_PARSE_ERROR, "bad Connection Times Total max %q in ab output", abbrev(total[4]))
		}
		for i := range ms {
			ms[i] = x
		}
	default:
		prev := 0.0
		for i, pct := range abPercents {
			v, ok := percent[pct]
			if !ok {
				return fail(measurev1.Status_STATUS_PARSE_ERROR, "no %d%% line in ab's percentile table (%d completed requests)", pct, m.CompletedRequests)
			}
			x, err := parsePlainDecimal(v, 0)
			if err != nil {
				return fail(measurev1.Status_STATUS_PARSE_ERROR, "bad %d%% figure %q in ab's percentile table", pct, abbrev(v))
			}
			if x < prev {
				return fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's %d%% figure %s ms is below the one before it, %s ms", pct, v, strconv.FormatFloat(prev, 'f', -1, 64))
			}
			ms[i], prev = x, x
		}
	}
	if ms[len(ms)-1] > maxMillis {
		return fail(measurev1.Status_STATUS_PARSE_ERROR, "ab's longest request %s ms is longer than the load may last (%s ms), not a measurement",
			strconv.FormatFloat(ms[len(ms)-1], 'f', -1, 64), strconv.FormatFloat(maxMillis, 'f', -1, 64))
	}
	m.LatencyP50Seconds = ms[0] / 1000
	m.LatencyP90Seconds = ms[4] / 1000
	m.LatencyP95Seconds = ms[5] / 1000
	m.LatencyP99Seconds = ms[7] / 1000
	m.LatencyMaxSeconds = ms[8] / 1000
	return nil
}

// abResults turns one ab run into its result; connectFailed is ParseAb's.
func abResults(spec *measurev1.TestSpec, out proc.Output) ([]*measurev1.Result, bool) {
	m, note, connectFailed, err := ParseAb(out, spec)
	if err != nil {
		return []*measurev1.Result{failed(spec, 0, asFailure(err))}, connectFailed
	}
	r := okResult(spec, 0)
	r.Message = note
	r.Metrics = &measurev1.Result_HttpLoad{HttpLoad: m}
	return []*measurev1.Result{r}, false
}
