package runner

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/stats"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
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
		Args: append(familyFlag(target),
			"-n",
			"-c", strconv.FormatUint(uint64(p.GetCount()), 10),
			"-i", strconv.FormatFloat(p.GetInterval().AsDuration().Seconds(), 'f', -1, 64),
			"-s", strconv.FormatUint(uint64(p.GetPayloadSizeBytes()), 10),
			"-W", "1",
			target,
		),
		NetNS: netns,
	}
}

var (
	// The summary: "5 packets transmitted, 5 received, +1 duplicates, +3 errors, 0% packet loss, time 819ms".
	pingSummaryRE = regexp.MustCompile(`(?m)^(\d+) packets transmitted, (\d+) received((?:, \+\d+ [a-z]+)*)`)
	pingExtraRE   = regexp.MustCompile(`\+(\d+) ([a-z]+)`)
	// The RTT line: "rtt min/avg/max/mdev = 0.033/0.050/0.085/0.017 ms".
	pingRTTRE = regexp.MustCompile(`(?m)^rtt min/avg/max/mdev = ([^/\s]+)/([^/\s]+)/([^/\s]+)/([^/\s]+) ms`)
	// An error line: "From 10.250.0.1 icmp_seq=1 Destination Host Unreachable".
	pingErrorRE = regexp.MustCompile(`(?m)^From \S+ icmp_seq=\d+ (.+)$`)
	// A line that starts like an echo reply: "64 bytes from ".
	pingReplyStartRE = regexp.MustCompile(`^\d+ bytes from `)
	// 64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.040 ms (DUP!)
	// ttl is left out when the kernel gave none, time for a reply too
	// short to carry its timestamp (printed "(truncated)" instead); the
	// flags come in ping's order. Values are checked after the match, so
	// that a garbled one is named.
	pingReplyRE = regexp.MustCompile(`^\d+ bytes from (\S+): icmp_seq=(\S*)( ttl=(\S*))?(?:( \(truncated\))|( time=(\S*) ms)?( \(DUP!\))?( \(BAD CHECKSUM!\))?( \(DIFFERENT ADDRESS!\))?)$`)
	// The header: "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data." or
	// "PING ::1(::1) 56 data bytes".
	pingHeaderRE = regexp.MustCompile(`(?m)^PING [^\s(]*\s?\(([^)\s]+)\)`)
)

// pingReplies is what ParsePing counts in ping's per-reply lines.
type pingReplies struct {
	// timesMicros are the round-trip times of the replies that count in
	// ping's received figure (not duplicates, not corrupted), in
	// microseconds as printed (ms with 0 to 3 decimals).
	timesMicros []float64
	// untimed counts replies that count as received but carry no time
	// ("(truncated)").
	untimed uint32
	// duplicates and corrupted count "(DUP!)" and "(BAD CHECKSUM!)" lines.
	duplicates, corrupted uint32
	// lines are every reply line, in ping's order (applyPingSources reads them).
	lines []pingReplyLine
}

// pingReplyLine is one echo-reply line as ping printed it.
type pingReplyLine struct {
	// from is the address the reply came from, as printed.
	from string
	// seq is icmp_seq.
	seq uint16
	// us is the time in microseconds when hasTime.
	us      float64
	hasTime bool
	// dup, corrupt, truncated and different are ping's "(DUP!)", "(BAD
	// CHECKSUM!)", "(truncated)" and "(DIFFERENT ADDRESS!)" flags.
	dup, corrupt, truncated, different bool
}

// parsePingReplies reads every echo-reply line of stdout. A line that
// starts like one ("N bytes from ") but is not in iputils' form, or whose
// icmp_seq, ttl or time is not a plain number, is a PARSE_ERROR naming
// the field and its value; so is a time above 1 hour or outside the
// summary's min..max (m) by more than the rounding of its printed
// decimals (ping prints reply times at 3 decimals below 1 ms and fewer
// above, its summary at 3).
func parsePingReplies(stdout string, m *measurev1.PingMetrics) (pingReplies, error) {
	var rs pingReplies
	minUs, maxUs := m.RttMinSeconds*1e6, m.RttMaxSeconds*1e6
	for _, line := range strings.Split(stdout, "\n") {
		if !pingReplyStartRE.MatchString(line) {
			continue
		}
		r := pingReplyRE.FindStringSubmatch(line)
		if r == nil {
			return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply line not in iputils ping's form: %q", abbrevLine(line))
		}
		from, seq, hasTTL, ttl, truncated, hasTime, tm, dup, corrupt, different := r[1], r[2], r[3] != "", r[4], r[5] != "", r[6] != "", r[7], r[8] != "", r[9] != "", r[10] != ""
		seqN, err := strconv.ParseUint(seq, 10, 16)
		if err != nil {
			return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply icmp_seq %q is not a sequence number (0..65535) in %q", abbrev(seq), abbrevLine(line))
		}
		if _, err := strconv.ParseUint(ttl, 10, 8); hasTTL && err != nil {
			return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply icmp_seq=%s ttl %q is not a hop limit (0..255)", seq, abbrev(ttl))
		}
		var us float64
		if hasTime {
			var err error
			if us, err = parsePlainDecimal(tm, 3); err != nil {
				return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply icmp_seq=%s time: %v", seq, err)
			}
			if us > maxTimeSeconds*1e6 {
				return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply icmp_seq=%s time %s ms is above 1 hour, not a measurement", seq, abbrev(tm))
			}
			// Duplicates count in ping's min/max, corrupted replies do
			// not. Half a unit of the last printed decimal, and a little
			// for the conversion of the summary's figures to microseconds.
			tol := 0.5*math.Pow10(3-decimals(tm)) + 1e-3
			if !corrupt && (us < minUs-tol || us > maxUs+tol) {
				return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply icmp_seq=%s time %s ms is outside the summary's rtt min..max %s..%s ms",
					seq, abbrev(tm), formatMillis(m.RttMinSeconds), formatMillis(m.RttMaxSeconds))
			}
		}
		rs.lines = append(rs.lines, pingReplyLine{from: from, seq: uint16(seqN), us: us, hasTime: hasTime,
			dup: dup, corrupt: corrupt, truncated: truncated, different: different})
		switch {
		case corrupt:
			rs.corrupted++
			continue
		case dup:
			rs.duplicates++
			continue
		case truncated:
			rs.untimed++
			continue
		case !hasTime:
			return rs, fail(measurev1.Status_STATUS_PARSE_ERROR, "echo reply icmp_seq=%s has no time: %q", seq, abbrevLine(line))
		}
		rs.timesMicros = append(rs.timesMicros, us)
	}
	return rs, nil
}

// decimals counts the digits after the point of a plain decimal.
func decimals(s string) int {
	if _, frac, ok := strings.Cut(s, "."); ok {
		return len(frac)
	}
	return 0
}

// formatMillis formats seconds as ping's milliseconds with 3 decimals.
func formatMillis(sec float64) string {
	return strconv.FormatFloat(sec*1e3, 'f', 3, 64)
}

// abbrevLine shortens a line for a message.
func abbrevLine(s string) string {
	if len(s) <= 120 {
		return s
	}
	return fmt.Sprintf("%s... (%d bytes)", s[:100], len(s))
}

// ParsePing parses the output of iputils ping 20221126 (`ping -n -c ...`,
// LC_ALL=C) into metrics in base units: the summary line "N packets
// transmitted, M received[, +D duplicates][, +E errors], X% packet loss"
// and "rtt min/avg/max/mdev = a/b/c/d ms" (milliseconds, converted to
// seconds). loss_ratio is 1 - received/transmitted. rtt_median_seconds is
// the median of the per-reply lines ("64 bytes from ADDR: icmp_seq=N
// ttl=T time=X ms"), one per reply counted in M: "(DUP!)" and "(BAD
// CHECKSUM!)" replies are left out, a "(truncated)" reply counts without a
// time.
//
// The error is a *Failure: UNREACHABLE when no reply came back (message
// "0/5 echo replies", with the first ICMP error ping printed, e.g. "Destination
// Host Unreachable") or ping could not send ("connect: Network is
// unreachable"); TOOL_ERROR for other complaints of ping (exit status 2);
// PARSE_ERROR when the summary or the rtt line is missing or malformed,
// when an rtt figure is not a plain decimal, is above 1 hour (not a
// measurement) or out of order (min <= avg <= max, mdev <= max), when a
// reply line is garbled (parsePingReplies; the message names the field and
// its value), when the reply lines do not add up to the summary (M
// replies, D duplicates, "+C corrupted") or no counted reply has a time,
// and "ping output truncated at 8 MiB before its summary" when out.Truncated
// and there is no summary. When out.Truncated, any failure's message starts
// with "ping output truncated at 8 MiB".
//
// Replies from another address than the target (the header line's) and
// ping's own send errors on stderr are handled as ping_source.go says:
// only the target's replies count in packets_received, loss_ratio and the
// rtt figures, UNREACHABLE when it sent none; packets_transmitted counts
// only the echo requests that left the host, TOOL_ERROR when none did;
// more send errors than leaves room for the replies is PARSE_ERROR.
func ParsePing(out proc.Output) (*measurev1.PingMetrics, error) {
	m, _, err := parsePing(out, 0)
	return m, err
}

// parsePing is ParsePing for a run asked for count echo requests (0: not
// known). ping cannot send more than -c COUNT, so more transmitted than
// count is a PARSE_ERROR. Fewer is accepted: iputils ping prints its
// summary with what it sent so far when it is interrupted (SIGINT, from a
// person or a supervisor; proc's SIGKILL at the deadline leaves no summary
// and is TIMEOUT), and packets_transmitted and loss_ratio then say how
// many it sent and what share of those came back.
//
// note is what an OK result's message says: replies from other addresses,
// local send failures (ping_source.go), and, when ping exited non-zero or
// printed other words on stderr, those (a complete summary that passed every
// check keeps its figures: see exitNote).
func parsePing(out proc.Output, count uint32) (_ *measurev1.PingMetrics, note string, err error) {
	defer func() { err = parseFailure("ping", out, err) }()
	m, notes, err := parsePingFigures(out, count)
	if err != nil {
		return nil, "", err
	}
	return m, joinWords(notes...), nil
}

// parsePingFigures is parsePing, with the notes one by one.
func parsePingFigures(out proc.Output, count uint32) (*measurev1.PingMetrics, []string, error) {
	var err error
	stdout, stderr := string(out.Stdout), strings.TrimSpace(string(out.Stderr))
	sums := pingSummaryRE.FindAllStringSubmatch(stdout, -1)
	if len(sums) == 0 {
		if out.Truncated {
			msg := fmt.Sprintf("%s before its summary (exit %d)", truncatedWords("ping"), out.ExitCode)
			if stderr != "" {
				msg += "; stderr: " + tail(out.Stderr, 1)
			}
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%s", msg)
		}
		if stderr != "" {
			status := classifyText(stderr)
			if status == measurev1.Status_STATUS_UNSPECIFIED {
				status = measurev1.Status_STATUS_TOOL_ERROR
			}
			return nil, nil, fail(status, "%s", stderr)
		}
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "no summary in ping output (exit %d): %s", out.ExitCode, tail(out.Stdout, 3))
	}
	sum := sums[len(sums)-1]
	m := &measurev1.PingMetrics{}
	var corrupted uint32 // "+N corrupted": replies with a bad checksum
	if m.PacketsTransmitted, err = parseUint32(sum[1]); err != nil {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "packets transmitted %q: %v", sum[1], err)
	}
	if m.PacketsReceived, err = parseUint32(sum[2]); err != nil {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "packets received %q: %v", sum[2], err)
	}
	for _, extra := range pingExtraRE.FindAllStringSubmatch(sum[3], -1) {
		n, err := parseUint32(extra[1])
		if err != nil {
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%s %q: %v", extra[2], extra[1], err)
		}
		switch extra[2] {
		case "duplicates":
			m.Duplicates = n
		case "corrupted":
			corrupted = n
		case "errors":
			m.Errors = n
		}
	}
	if count > 0 && m.PacketsTransmitted > count {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "packets transmitted %d is more than the %d asked for (-c %d): %s",
			m.PacketsTransmitted, count, count, sum[0])
	}
	if m.PacketsTransmitted == 0 {
		return nil, nil, fail(measurev1.Status_STATUS_TOOL_ERROR, "ping sent no echo request: %s", firstNonEmpty(stderr, sum[0]))
	}
	var notes []string
	sendErrs := pingSendFailures(stderr)
	local, localWords, otherStderr := sendErrs.local, sendErrs.localWords, sendErrs.other
	if n := uint64(local) + uint64(sendErrs.route); n > uint64(m.PacketsTransmitted) {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d send errors on stderr (%s) but %d packets transmitted: %s",
			n, abbrevLine(firstNonEmpty(localWords, sendErrs.routeWords)), m.PacketsTransmitted, sum[0])
	}
	if sendErrs.route > 0 {
		notes = append(notes, fmt.Sprintf("%d of %d echo requests found no route from this host (%s): counted as lost",
			sendErrs.route, m.PacketsTransmitted, abbrevLine(sendErrs.routeWords)))
	}
	if local > 0 {
		transmitted := m.PacketsTransmitted
		switch {
		case local == transmitted:
			return nil, nil, fail(measurev1.Status_STATUS_TOOL_ERROR, "all %d echo requests failed to leave this host: %s (a local error such as a firewall rule, not loss on the network)",
				transmitted, abbrevLine(localWords))
		case m.PacketsReceived > transmitted-local:
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d replies but only %d of %d echo requests left this host (%d send errors: %s): %s",
				m.PacketsReceived, transmitted-local, transmitted, local, abbrevLine(localWords), sum[0])
		}
		m.PacketsTransmitted = transmitted - local
		notes = append(notes, fmt.Sprintf("%d of %d echo requests failed to leave this host (%s): a local error, not counted as loss",
			local, transmitted, abbrevLine(localWords)))
	}
	if m.PacketsReceived > m.PacketsTransmitted {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "more replies than requests: %s", sum[0])
	}
	if m.PacketsReceived == 0 {
		msg := fmt.Sprintf("%d/%d echo replies", m.PacketsReceived, m.PacketsTransmitted)
		if m.Errors > 0 {
			msg += fmt.Sprintf(", +%d errors", m.Errors)
		}
		if e := pingErrorRE.FindStringSubmatch(stdout); e != nil {
			msg += ": " + e[0]
		}
		return nil, nil, fail(measurev1.Status_STATUS_UNREACHABLE, "%s", joinWords(append([]string{msg}, notes...)...))
	}
	m.LossRatio = 1 - float64(m.PacketsReceived)/float64(m.PacketsTransmitted)
	rtts := pingRTTRE.FindAllStringSubmatch(stdout, -1)
	if len(rtts) == 0 {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d replies but no rtt line in ping output: %s", m.PacketsReceived, tail(out.Stdout, 2))
	}
	rtt := rtts[len(rtts)-1]
	for i, f := range []struct {
		name string
		dst  *float64
	}{{"min", &m.RttMinSeconds}, {"avg", &m.RttAvgSeconds}, {"max", &m.RttMaxSeconds}, {"mdev", &m.RttMdevSeconds}} {
		if strings.HasPrefix(rtt[i+1], "-") {
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt %s %s ms is negative in %q", f.name, rtt[i+1], rtt[0])
		}
		// "0.036"+"e-3": milliseconds to seconds without a rounding step.
		sec, err := parsePlainDecimal(rtt[i+1], -3)
		if err != nil {
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "bad rtt %s: %v in %q", f.name, err, rtt[0])
		}
		if sec > maxTimeSeconds {
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt %s %s ms is above 1 hour, not a measurement", f.name, abbrev(rtt[i+1]))
		}
		*f.dst = sec
	}
	if m.RttAvgSeconds <= 0 {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "zero average rtt in %q", rtt[0])
	}
	switch {
	case m.RttMinSeconds > m.RttAvgSeconds:
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt min %s ms is above avg %s ms in %q", rtt[1], rtt[2], rtt[0])
	case m.RttAvgSeconds > m.RttMaxSeconds:
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt avg %s ms is above max %s ms in %q", rtt[2], rtt[3], rtt[0])
	case m.RttMdevSeconds > m.RttMaxSeconds:
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "rtt mdev %s ms is above max %s ms in %q", rtt[4], rtt[3], rtt[0])
	}
	rs, err := parsePingReplies(stdout, m)
	if err != nil {
		return nil, nil, err
	}
	if got := uint32(len(rs.timesMicros)) + rs.untimed; got != m.PacketsReceived {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d received in the summary but %d echo reply lines (not counting duplicates and corrupted): %s",
			m.PacketsReceived, got, sum[0])
	}
	if rs.duplicates != m.Duplicates {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d echo reply lines marked (DUP!) but %d duplicates in the summary: %s",
			rs.duplicates, m.Duplicates, sum[0])
	}
	if rs.corrupted != corrupted {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d echo reply lines marked (BAD CHECKSUM!) but %d corrupted in the summary: %s",
			rs.corrupted, corrupted, sum[0])
	}
	if len(rs.timesMicros) == 0 {
		return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "%d replies but none with a time (all truncated): %s", m.PacketsReceived, sum[0])
	}
	m.RttMedianSeconds = proto.Float64(stats.Median(rs.timesMicros) / 1e6)
	srcNote, err := applyPingSources(stdout, m, rs)
	if err != nil {
		f := asFailure(err)
		return nil, nil, fail(f.Status, "%s", joinWords(append([]string{f.Message}, notes...)...))
	}
	// The exit status first: a long note must not cut it off (MaxMessageBytes).
	notes = append([]string{exitNote("ping", out.ExitCode, otherStderr)}, append(notes, srcNote)...)
	return m, notes, nil
}

// pingResults turns one ping run into its result (parsePing with the
// spec's count).
func pingResults(spec *measurev1.TestSpec, out proc.Output) []*measurev1.Result {
	m, note, err := parsePing(out, spec.GetPing().GetCount())
	if err != nil {
		return []*measurev1.Result{failed(spec, 0, asFailure(err))}
	}
	r := okResult(spec, 0)
	r.Message = note
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
