package runner

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
)

// qperfCommand builds `qperf -lp PORT -ip DATA_PORT -t SECONDS -vv -oo
// msg_size:SIZE TARGET TEST` for one message size. Both ports are pinned on
// the client (the server takes the data port from the client's request), so
// the test works through a DNAT'ed service VIP. qperf 0.4.11 keeps only the
// last of several -oo msg_size options and its loop only walks arithmetic or
// geometric series, so the runner runs qperf once per size.
func qperfCommand(test measurev1.Test, duration uint64, size uint64, target string, port, dataPort uint32, netns string) proc.Command {
	return proc.Command{
		Name: "qperf",
		Args: []string{
			"-lp", strconv.FormatUint(uint64(port), 10),
			"-ip", strconv.FormatUint(uint64(dataPort), 10),
			"-t", strconv.FormatUint(duration, 10),
			"-vv",
			"-oo", "msg_size:" + strconv.FormatUint(size, 10),
			target,
			testspec.QperfTestName(test),
		},
		NetNS: netns,
	}
}

// QperfBlock is one result block of qperf's output ("tcp_bw:" and its
// indented "key = value unit" lines), converted to base units.
type QperfBlock struct {
	// Test is qperf's test name: tcp_lat, tcp_bw, udp_lat or udp_bw.
	Test string
	// Values maps each key to its value in base units: seconds for times
	// (ns/us/ms/sec), bits per second for bandwidths (bytes/sec, KB/sec, ...,
	// decimal prefixes, x8; or bits/sec, Kb/sec, ... with -ub), hertz for
	// rates (/sec, K/sec, ...), bytes for sizes (bytes, KB..TB decimal,
	// KiB..TiB binary: "64 KiB (65,536)"), ratios for "% cpus" (100% = 1.0),
	// seconds per byte for costs (sec/GB), plain numbers otherwise
	// ("30,766", "1.2 million"). "latency" is qperf's ONE-WAY latency (half
	// the measured round trip), kept as qperf reports it.
	Values map[string]float64
}

var (
	qperfHeaderRE = regexp.MustCompile(`^(tcp_lat|tcp_bw|udp_lat|udp_bw):\s*$`)
	qperfValueRE  = regexp.MustCompile(`^\s+([a-z_]+)\s+=\s+(\S+)(?:\s+(.*?))?\s*$`)
	qperfAltRE    = regexp.MustCompile(`^(\S+)\s+\(([0-9,]+)\)$`)
)

// qperfUnit converts one of qperf's units to base units: x * factor *
// 10^exp10, the power of ten applied in decimal (so "12.5 us" is exactly
// the float64 nearest 12.5e-6). kind is what the unit measures.
type qperfUnit struct {
	factor float64
	exp10  int
	kind   qperfKind
}

// qperfKind is what a qperf value measures; a key takes units of one kind
// only (qperfKeyKind).
type qperfKind int

const (
	qperfAnyKind qperfKind = iota // a key this parser has no rule for
	qperfCount
	qperfTime
	qperfBandwidth
	qperfMsgRate
	qperfSize
	qperfCPU
	qperfCost
)

var qperfKindNames = [...]string{"of any kind", "a count", "a time", "a bandwidth", "a message rate", "a size", "a CPU share", "a cost per GB"}

func (k qperfKind) String() string { return qperfKindNames[k] }

// qperfUnits are the units of qperf 0.4.11's output (qperf.c view_*).
var qperfUnits = map[string]qperfUnit{
	"": {1, 0, qperfCount}, "thousand": {1, 3, qperfCount}, "million": {1, 6, qperfCount},
	"billion": {1, 9, qperfCount}, "trillion": {1, 12, qperfCount},
	"ns": {1, -9, qperfTime}, "us": {1, -6, qperfTime}, "ms": {1, -3, qperfTime}, "sec": {1, 0, qperfTime},
	"bytes/sec": {8, 0, qperfBandwidth}, "KB/sec": {8, 3, qperfBandwidth}, "MB/sec": {8, 6, qperfBandwidth},
	"GB/sec": {8, 9, qperfBandwidth}, "TB/sec": {8, 12, qperfBandwidth},
	"bits/sec": {1, 0, qperfBandwidth}, "Kb/sec": {1, 3, qperfBandwidth}, "Mb/sec": {1, 6, qperfBandwidth},
	"Gb/sec": {1, 9, qperfBandwidth}, "Tb/sec": {1, 12, qperfBandwidth},
	"/sec": {1, 0, qperfMsgRate}, "K/sec": {1, 3, qperfMsgRate}, "M/sec": {1, 6, qperfMsgRate},
	"G/sec": {1, 9, qperfMsgRate}, "T/sec": {1, 12, qperfMsgRate},
	"bytes": {1, 0, qperfSize}, "KB": {1, 3, qperfSize}, "MB": {1, 6, qperfSize}, "GB": {1, 9, qperfSize}, "TB": {1, 12, qperfSize},
	"KiB": {1 << 10, 0, qperfSize}, "MiB": {1 << 20, 0, qperfSize}, "GiB": {1 << 30, 0, qperfSize}, "TiB": {1 << 40, 0, qperfSize},
	"% cpus": {1, -2, qperfCPU},
	"ns/GB":  {1, -18, qperfCost}, "us/GB": {1, -15, qperfCost}, "ms/GB": {1, -12, qperfCost}, "sec/GB": {1, -9, qperfCost},
}

// qperfKeyKind is the kind of unit key takes in qperf 0.4.11's -vv
// output: latency, time, timeout, *_time a time (ns, us, ms, sec); bw,
// *_bw a bandwidth (bytes/sec..TB/sec, bits/sec..Tb/sec); msg_rate,
// *_rate a message rate (/sec..T/sec); msg_size, *_bytes, *_size a size
// (bytes, KB..TB, KiB..TiB); *_cost a cost (ns/GB..sec/GB); *_cpus_* a CPU
// share (% cpus); port, *_msgs, *_errors a count (no unit, or
// thousand..trillion). Other keys take any known unit.
func qperfKeyKind(key string) qperfKind {
	has := func(suffixes ...string) bool {
		for _, s := range suffixes {
			if strings.HasSuffix(key, s) {
				return true
			}
		}
		return false
	}
	switch {
	case key == "latency" || key == "time" || key == "timeout" || has("_time"):
		return qperfTime
	case key == "bw" || has("_bw"):
		return qperfBandwidth
	case has("_rate"):
		return qperfMsgRate
	case has("_bytes", "_size"):
		return qperfSize
	case has("_cost"):
		return qperfCost
	case strings.Contains(key, "_cpus_"):
		return qperfCPU
	case key == "port" || has("_msgs", "_errors"):
		return qperfCount
	}
	return qperfAnyKind
}

// ParseQperf parses qperf 0.4.11 output (run with -vv, LC_ALL=C): every
// block in output order, and every other line (qperf's complaints such as
// "127.0.0.1: failed to connect", "failed to receive port: timed out",
// "server: unable to make TCP socket"), from stdout and stderr, as notes.
// A value whose number or unit is not understood, whose unit is of the
// wrong kind for its key (qperfKeyKind: "latency = 5 GB/sec"), or a binary
// size whose rounded figure does not stand for the exact count after it
// ("64 KiB (1,024)") is an error (PARSE_ERROR *Failure naming the key and
// the value; "qperf output truncated at 8 MiB" first when out.Truncated).
func ParseQperf(out proc.Output) (blocks []QperfBlock, notes []string, err error) {
	defer func() { err = parseFailure("qperf", out, err) }()
	for _, line := range strings.Split(string(out.Stdout), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if h := qperfHeaderRE.FindStringSubmatch(line); h != nil {
			blocks = append(blocks, QperfBlock{Test: h[1], Values: map[string]float64{}})
			continue
		}
		v := qperfValueRE.FindStringSubmatch(line)
		if v == nil || len(blocks) == 0 {
			notes = append(notes, strings.TrimSpace(line))
			continue
		}
		x, err := qperfValue(v[1], v[2], v[3])
		if err != nil {
			return nil, nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "qperf %s: %s = %s %s: %v", blocks[len(blocks)-1].Test, v[1], v[2], v[3], err)
		}
		blocks[len(blocks)-1].Values[v[1]] = x
	}
	for _, line := range strings.Split(string(out.Stderr), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			notes = append(notes, line)
		}
	}
	return blocks, notes, nil
}

// qperfValue converts key's "3.36" "GB/sec" or "64" "KiB (65,536)" to base
// units; the unit must be of key's kind (qperfKeyKind).
func qperfValue(key, num, unit string) (float64, error) {
	kindOK := func(u qperfUnit, name string) error {
		if want := qperfKeyKind(key); want != qperfAnyKind && u.kind != want {
			return fmt.Errorf("%s must be %s, and %q is %s", key, want, name, u.kind)
		}
		return nil
	}
	if alt := qperfAltRE.FindStringSubmatch(unit); alt != nil {
		// nice_1024 sizes: the exact byte count is in parentheses.
		u, ok := qperfUnits[alt[1]]
		if !ok || u.kind != qperfSize {
			return 0, fmt.Errorf("unknown unit %q", alt[1])
		}
		if err := kindOK(u, alt[1]); err != nil {
			return 0, err
		}
		// The rounded figure in front must be a number and stand for the
		// exact count: "64 KiB (65,536)", not "xyz KiB (65,536)" or "64
		// KiB (1,024)".
		printed, err := parseQperfNumber(num)
		if err != nil {
			return 0, err
		}
		exact, err := parseQperfNumber(alt[2])
		if err != nil {
			return 0, err
		}
		if math.Abs(printed*u.factor-exact) > 0.006*exact {
			return 0, fmt.Errorf("%s %s does not match its exact count %s", num, alt[1], alt[2])
		}
		return exact, nil
	}
	u, ok := qperfUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	if err := kindOK(u, unit); err != nil {
		return 0, err
	}
	if _, err := parseQperfNumber(num); err != nil {
		return 0, err
	}
	x, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", "")+"e"+strconv.Itoa(u.exp10), 64)
	if x *= u.factor; err != nil || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%s %s is out of range", num, unit)
	}
	return x, nil
}

// parseQperfNumber parses qperf's commified decimals: "30,766", "1.23".
func parseQperfNumber(s string) (float64, error) {
	x, err := strconv.ParseFloat(strings.ReplaceAll(s, ",", ""), 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 || strings.ContainsAny(s, "eExXpP_+-") {
		return 0, fmt.Errorf("bad number %q", s)
	}
	return x, nil
}

// qperfSizeMatches reports whether qperf's printed msg_size (rounded to 3
// significant digits unless it is a multiple of 1024) stands for want.
func qperfSizeMatches(printed float64, want uint64) bool {
	return math.Abs(printed-float64(want)) <= 0.006*float64(want)
}

// qperfResults turns one qperf run into one result per message size of
// spec (normally one): the i-th size takes the first unused block of the
// test whose msg_size matches it. A size with no block is a failed result
// with qperf's own words. connectFailed reports that a result failed with
// qperf's "failed to connect", which says nothing of why: the runner then
// probes the port to tell refused from unreachable from timed out. A size
// whose block is there is OK even if qperf also failed to connect (for
// another size of a loop): its result never takes the connect failure,
// but its message carries qperf's words and exit status (exitNote).
func qperfResults(spec *measurev1.TestSpec, out proc.Output) (results []*measurev1.Result, connectFailed bool) {
	test := spec.GetTest()
	name := testspec.QperfTestName(test)
	sizes := spec.GetQperf().GetMsgSizeBytes()
	blocks, notes, err := ParseQperf(out)
	noteText := strings.Join(notes, "\n")
	var missing *Failure
	connectFailure := false
	switch {
	case err != nil:
		missing = asFailure(err)
	case strings.Contains(noteText, "failed to connect"):
		connectFailure = true
		missing = fail(measurev1.Status_STATUS_UNREACHABLE, "%s", noteText)
	case noteText != "":
		status := classifyText(noteText)
		if status == measurev1.Status_STATUS_UNSPECIFIED {
			status = measurev1.Status_STATUS_TOOL_ERROR
		}
		missing = fail(status, "qperf exited %d: %s", out.ExitCode, noteText)
	}
	if len(sizes) == 0 {
		return []*measurev1.Result{failed(spec, 0, fail(measurev1.Status_STATUS_INVALID, "qperf spec without msg_size_bytes"))}, false
	}
	used := make([]bool, len(blocks))
	for i, size := range sizes {
		one := proto.Clone(spec).(*measurev1.TestSpec)
		one.GetQperf().MsgSizeBytes = []uint64{size}
		var block *QperfBlock
		for j := range blocks {
			if used[j] || blocks[j].Test != name || len(blocks[j].Values) == 0 {
				continue
			}
			if printed, ok := blocks[j].Values["msg_size"]; ok && !qperfSizeMatches(printed, size) {
				continue
			}
			used[j], block = true, &blocks[j]
			break
		}
		if block == nil {
			f := missing
			if f == nil {
				f = fail(measurev1.Status_STATUS_PARSE_ERROR, "no %s block with msg_size %d in qperf output (exit %d)", name, size, out.ExitCode)
				if out.Truncated {
					f = fail(measurev1.Status_STATUS_PARSE_ERROR, "%s before a %s block with msg_size %d (exit %d)", truncatedWords("qperf"), name, size, out.ExitCode)
				}
			}
			connectFailed = connectFailed || connectFailure
			results = append(results, failed(one, uint32(i), f))
			continue
		}
		m, err := qperfMetrics(test, size, block)
		if err != nil {
			results = append(results, failed(one, uint32(i), asFailure(err)))
			continue
		}
		r := okResult(one, uint32(i))
		r.Metrics = &measurev1.Result_Qperf{Qperf: m}
		// qperf's complaints (another size of a loop that failed to
		// connect, an error after the block) and a non-zero exit are
		// not dropped: see exitNote.
		r.Message = exitNote("qperf", out.ExitCode, notes)
		results = append(results, r)
	}
	return results, connectFailed
}

// qperfMetrics picks a block's figures: latency_seconds is qperf's
// one-way latency, throughput_bps its bw (tcp_bw) or recv_bw (udp_bw) in
// bits per second. A *_lat block needs latency > 0 and at most 1 hour
// (PARSE_ERROR above): qperf prints "latency = 0 ns" when no round trip
// completed, TOOL_ERROR with its error counters when sends failed, and
// UNREACHABLE for a udp_lat that sent datagrams and got none back and
// counted no error (qperf 0.4.11's datagram_client_lat waits in read(2)
// without a timeout: one lost datagram stalls the run to its end).
// tcp_bw needs bw > 0; udp_bw needs recv_bw > 0 (UNREACHABLE when it sent
// but nothing arrived).
func qperfMetrics(test measurev1.Test, size uint64, b *QperfBlock) (*measurev1.QperfMetrics, error) {
	v := b.Values
	m := &measurev1.QperfMetrics{MsgSizeBytes: size, MsgRateHz: v["msg_rate"]}
	errs := qperfErrors(v)
	switch test {
	case measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_UDP_LAT:
		lat, ok := v["latency"]
		if !ok {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "no latency in qperf %s block", b.Test)
		}
		if lat <= 0 {
			if test == measurev1.Test_TEST_QPERF_UDP_LAT && errs == "" && v["loc_send_msgs"] > 0 && v["loc_recv_msgs"] == 0 {
				return nil, fail(measurev1.Status_STATUS_UNREACHABLE, "qperf %s: no answer came back (loc_send_msgs = %.0f, no loc_recv_msgs): a datagram or its answer was lost on the path, or UDP to the data port is dropped",
					b.Test, v["loc_send_msgs"])
			}
			return nil, fail(measurev1.Status_STATUS_TOOL_ERROR, "qperf %s reported a latency of 0%s", b.Test, errs)
		}
		if lat > maxTimeSeconds {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "qperf %s: latency = %v s is above 1 hour, not a measurement", b.Test, lat)
		}
		m.LatencySeconds = lat
		m.DurationSeconds = firstPositive(v["loc_real_time"], v["time"])
	case measurev1.Test_TEST_QPERF_TCP_BW:
		bw, ok := v["bw"]
		if !ok {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "no bw in qperf %s block", b.Test)
		}
		if bw <= 0 {
			return nil, fail(measurev1.Status_STATUS_TOOL_ERROR, "qperf %s reported a bandwidth of 0%s", b.Test, errs)
		}
		m.ThroughputBps = bw
		m.DurationSeconds = firstPositive(v["recv_real_time"], v["send_real_time"], v["time"])
	case measurev1.Test_TEST_QPERF_UDP_BW:
		recv, ok := v["recv_bw"]
		if !ok {
			return nil, fail(measurev1.Status_STATUS_PARSE_ERROR, "no recv_bw in qperf %s block", b.Test)
		}
		if recv <= 0 {
			return nil, fail(measurev1.Status_STATUS_UNREACHABLE, "qperf %s: sent %.4g bit/s, received nothing%s", b.Test, v["send_bw"], errs)
		}
		m.ThroughputBps = recv
		m.SendThroughputBps = v["send_bw"]
		m.DurationSeconds = firstPositive(v["recv_real_time"], v["send_real_time"], v["time"])
	}
	return m, nil
}

// qperfErrors lists a block's non-zero *_errors counters for a message.
func qperfErrors(v map[string]float64) string {
	var s []string
	for _, k := range []string{"loc_send_errors", "loc_recv_errors", "rem_send_errors", "rem_recv_errors", "send_errors", "recv_errors"} {
		if v[k] > 0 {
			s = append(s, fmt.Sprintf("%s = %.0f", k, v[k]))
		}
	}
	if len(s) == 0 {
		return ""
	}
	return " (" + strings.Join(s, ", ") + ")"
}

func firstPositive(xs ...float64) float64 {
	for _, x := range xs {
		if x > 0 {
			return x
		}
	}
	return 0
}
