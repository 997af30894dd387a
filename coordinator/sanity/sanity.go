// Package sanity checks the figures an agent reports before the
// coordinator stores them: every figure of a test's Result (ping, qperf,
// iperf3, HTTP, http_load metrics and the elapsed time) and of a continuous probe's
// ProbeSummary must be finite, non-negative, within physical bounds (a
// time no longer than the test's deadline or the probe plan's timeout,
// a throughput under MaxThroughputBps, a ratio in 0..1) and consistent
// with the others and with the spec (received <= sent <= the spec's ping
// count, duplicates and errors <= sent, lost = sent - received, min <=
// median <= p90 <= max, a positive round trip when a reply came, qperf's
// message size the spec's, a count of bytes or packets no more than
// MaxThroughputBps carries in the deadline, an MSS <= MaxMSSBytes). A figure that fails is an *Error naming the
// field, its value and a Reason from a small fixed set, which is what the
// coordinator counts in meshperf_results_invalid_total. Invalidate and
// InvalidSummary turn a failed Result or summary into a STATUS_INVALID
// one without figures, never a measurement.
package sanity

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrInvalid is wrapped by every *Error.
var ErrInvalid = errors.New("invalid figure")

// Reason is why a figure failed: one of the constants below, the value of
// the reason label of meshperf_results_invalid_total.
type Reason string

// The reasons a figure fails.
const (
	// NotFinite is a NaN or an infinity.
	NotFinite Reason = "not_finite"
	// Negative is a figure under zero.
	Negative Reason = "negative"
	// OutOfBounds is a figure beyond what the test could measure: a time
	// over its deadline, a throughput over MaxThroughputBps, a ratio over 1.
	OutOfBounds Reason = "out_of_bounds"
	// Inconsistent is figures that contradict each other: more received
	// than sent, a minimum over a maximum, a loss ratio that is not what
	// the counts say.
	Inconsistent Reason = "inconsistent"
)

// Reasons lists every Reason, in a fixed order.
var Reasons = []Reason{NotFinite, Negative, OutOfBounds, Inconsistent}

// Bounds of the figures, whatever the test.
const (
	// MaxThroughputBps bounds every throughput: 10 Tbit/s, beyond any NIC.
	MaxThroughputBps = 10e12
	// MaxCPURatio bounds iperf3's CPU use figures (1.0 = one full CPU).
	MaxCPURatio = 4096
	// MaxHTTPCode bounds an HTTP status code.
	MaxHTTPCode = 999
	// ProbeSlack is added to the probe plan's timeout for the longest
	// round trip a summary may report: an answer read just as its timer
	// fired.
	ProbeSlack = time.Second
	// ratioTolerance is how far a loss ratio may be from what its counts
	// say (rounding by the tool).
	ratioTolerance = 1e-3
)

// Error is one figure that failed.
type Error struct {
	// Field is the figure's proto field name, e.g. "rtt_min_seconds".
	Field string
	// Value is the figure as text, e.g. "-5", "NaN", "+Inf".
	Value string
	// Reason is why it failed.
	Reason Reason
	// Detail says what the bound was, e.g. "is negative",
	// "is over the test's deadline 15 s".
	Detail string
}

// Error is "FIELD VALUE DETAIL", e.g. "rtt_seconds -5 is negative".
func (e *Error) Error() string { return e.Field + " " + e.Value + " " + e.Detail }

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *Error) Unwrap() error { return ErrInvalid }

// ReasonOf is err's Reason, or Inconsistent for an error that is not an
// *Error.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return Inconsistent
}

// num formats a figure as the error shows it: shortest form, "NaN",
// "+Inf", "-Inf".
func num(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// bound checks one figure: finite, non-negative, at most hi (with what
// hi is, for the message).
func bound(field string, v, hi float64, what string) error {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return &Error{Field: field, Value: num(v), Reason: NotFinite, Detail: "is not a finite number"}
	case v < 0:
		return &Error{Field: field, Value: num(v), Reason: Negative, Detail: "is negative"}
	case v > hi:
		return &Error{Field: field, Value: num(v), Reason: OutOfBounds, Detail: fmt.Sprintf("is over %s %s", what, num(hi))}
	}
	return nil
}

// figure is one named float figure with its bound.
type figure struct {
	field string
	v     float64
	hi    float64
	what  string
}

// checkAll checks each figure in turn; the first failure is returned.
func checkAll(fs ...figure) error {
	for _, f := range fs {
		if err := bound(f.field, f.v, f.hi, f.what); err != nil {
			return err
		}
	}
	return nil
}

// ordered checks that the figures, all finite, do not decrease, skipping
// the zero ones when skipZero (a figure the tool did not give).
func ordered(skipZero bool, fs ...figure) error {
	prev := -1
	for i, f := range fs {
		if skipZero && f.v == 0 {
			continue
		}
		if prev >= 0 && f.v < fs[prev].v {
			return &Error{Field: f.field, Value: num(f.v), Reason: Inconsistent,
				Detail: fmt.Sprintf("is under %s %s", fs[prev].field, num(fs[prev].v))}
		}
		prev = i
	}
	return nil
}

// inconsistent is an Inconsistent *Error.
func inconsistent(field, value, format string, args ...any) error {
	return &Error{Field: field, Value: value, Reason: Inconsistent, Detail: fmt.Sprintf(format, args...)}
}

// Timeout is the longest any time figure of a result of spec may be: the
// client's deadline, its expected duration (testspec.ExpectedDuration)
// plus testspec.ClientSlack. A spec that does not normalize gets
// testspec.MaxExpectedDuration's bound.
func Timeout(spec *measurev1.TestSpec) time.Duration {
	d, err := testspec.ExpectedDuration(spec)
	if err != nil {
		d = testspec.MaxExpectedDuration
	}
	return d + testspec.ClientSlack
}

// CheckResult checks every figure of r against timeout (Timeout of its
// spec): the elapsed time of any result, and the metrics of an OK one.
// The error is an *Error naming the first figure that fails.
func CheckResult(r *measurev1.Result, timeout time.Duration) error {
	t := timeout.Seconds()
	if e := r.GetElapsed(); e != nil {
		if err := e.CheckValid(); err != nil {
			return &Error{Field: "elapsed", Value: fmt.Sprintf("%ds%dns", e.GetSeconds(), e.GetNanos()), Reason: OutOfBounds, Detail: "is not a valid duration"}
		}
		// The agent's wall time includes starting and stopping the tool:
		// twice the deadline is beyond any honest answer.
		if err := bound("elapsed", e.AsDuration().Seconds(), 2*t, "twice the test's deadline"); err != nil {
			return err
		}
	}
	if r.GetStatus() != measurev1.Status_STATUS_OK {
		return nil
	}
	switch m := r.GetMetrics().(type) {
	case *measurev1.Result_Ping:
		return checkPing(m.Ping, t, pingCount(r.GetSpec()))
	case *measurev1.Result_Qperf:
		return checkQperf(m.Qperf, t, r.GetSpec())
	case *measurev1.Result_Iperf3:
		return checkIperf3(m.Iperf3, t, r.GetSpec().GetTest() == measurev1.Test_TEST_IPERF3_TCP)
	case *measurev1.Result_Http:
		return checkHTTP(m.Http, t)
	case *measurev1.Result_HttpLoad:
		return checkHTTPLoad(m.HttpLoad, t, r.GetSpec())
	}
	return nil
}

// MaxMSSBytes bounds iperf3's TCP MSS: the largest IP packet.
const MaxMSSBytes = 65535

// pingCount is the number of echo requests spec sends: its normalized
// count (the default when it gives none).
func pingCount(spec *measurev1.TestSpec) uint32 {
	if n, err := testspec.Normalize(spec); err == nil && n.GetPing().GetCount() > 0 {
		return n.GetPing().GetCount()
	}
	return spec.GetPing().GetCount()
}

// maxCount bounds a byte or packet count of a test with time figures
// up to t seconds: what MaxThroughputBps carries in that time (a
// packet is at least one byte).
func maxCount(field string, v uint64, t float64) error {
	if v > uint64(MaxThroughputBps/8*t) {
		return &Error{Field: field, Value: strconv.FormatUint(v, 10), Reason: OutOfBounds,
			Detail: fmt.Sprintf("is more than %s bit/s carry in the test's deadline", num(MaxThroughputBps))}
	}
	return nil
}

const deadline = "the test's deadline"

func checkPing(m *measurev1.PingMetrics, t float64, count uint32) error {
	rtts := []figure{{"rtt_min_seconds", m.GetRttMinSeconds(), t, deadline}, {"rtt_avg_seconds", m.GetRttAvgSeconds(), t, deadline},
		{"rtt_max_seconds", m.GetRttMaxSeconds(), t, deadline}}
	all := slices.Concat(rtts, []figure{{"rtt_mdev_seconds", m.GetRttMdevSeconds(), t, deadline}, {"loss_ratio", m.GetLossRatio(), 1, "1"}})
	if m.RttMedianSeconds != nil {
		all = append(all, figure{"rtt_median_seconds", m.GetRttMedianSeconds(), t, deadline})
	}
	if err := checkAll(all...); err != nil {
		return err
	}
	// A figure of 0 is one the agent did not give (older agents give only
	// some); those it gave must be in order.
	if err := ordered(true, rtts...); err != nil {
		return err
	}
	if m.RttMedianSeconds != nil {
		med := figure{"rtt_median_seconds", m.GetRttMedianSeconds(), t, deadline}
		if err := ordered(true, rtts[0], med, rtts[2]); err != nil {
			return err
		}
	}
	sent, got := m.GetPacketsTransmitted(), m.GetPacketsReceived()
	for _, c := range []struct {
		field string
		v     uint32
	}{{"duplicates", m.GetDuplicates()}, {"errors", m.GetErrors()}} {
		if c.v > sent {
			return inconsistent(c.field, strconv.FormatUint(uint64(c.v), 10), "is over packets_transmitted %d", sent)
		}
	}
	switch {
	case sent == 0:
		// The runner fails a ping that sent nothing (TOOL_ERROR): an OK
		// result without counts would carry RTTs and a loss of nothing.
		return inconsistent("packets_transmitted", "0", "in an OK result: no echo request sent")
	case count > 0 && sent > count:
		return &Error{Field: "packets_transmitted", Value: strconv.FormatUint(uint64(sent), 10), Reason: OutOfBounds,
			Detail: fmt.Sprintf("is over the spec's count %d", count)}
	case got > sent:
		return inconsistent("packets_received", strconv.FormatUint(uint64(got), 10), "is over packets_transmitted %d", sent)
	case got == 0 && m.GetRttMaxSeconds() != 0:
		return inconsistent("rtt_max_seconds", num(m.GetRttMaxSeconds()), "with no reply received")
	case got > 0 && m.GetRttMinSeconds() <= 0:
		// A reply takes time: 0 would show as a 0 ns round trip.
		return inconsistent("rtt_min_seconds", num(m.GetRttMinSeconds()), "is not positive with %d replies received", got)
	}
	if want := 1 - float64(got)/float64(sent); math.Abs(m.GetLossRatio()-want) > ratioTolerance {
		return inconsistent("loss_ratio", num(m.GetLossRatio()), "is not 1 - packets_received/packets_transmitted (%d of %d: %s)", got, sent, num(want))
	}
	return nil
}

func checkQperf(m *measurev1.QperfMetrics, t float64, spec *measurev1.TestSpec) error {
	if sizes := spec.GetQperf().GetMsgSizeBytes(); len(sizes) > 0 && !slices.Contains(sizes, m.GetMsgSizeBytes()) {
		return inconsistent("msg_size_bytes", strconv.FormatUint(m.GetMsgSizeBytes(), 10), "is not the spec's message size %v", sizes)
	}
	if lat := m.GetLatencySeconds(); (spec.GetTest() == measurev1.Test_TEST_QPERF_TCP_LAT || spec.GetTest() == measurev1.Test_TEST_QPERF_UDP_LAT) && lat == 0 {
		return inconsistent("latency_seconds", num(lat), "is not positive for a latency test")
	}
	return checkAll(
		figure{"latency_seconds", m.GetLatencySeconds(), t, deadline},
		figure{"duration_seconds", m.GetDurationSeconds(), t, deadline},
		figure{"throughput_bps", m.GetThroughputBps(), MaxThroughputBps, "the bound"},
		figure{"send_throughput_bps", m.GetSendThroughputBps(), MaxThroughputBps, "the bound"},
		// A message is at least one byte.
		figure{"msg_rate_hz", m.GetMsgRateHz(), MaxThroughputBps / 8, "the bound"},
	)
}

func checkIperf3(m *measurev1.Iperf3Metrics, t float64, tcp bool) error {
	err := checkAll(
		figure{"throughput_bps", m.GetThroughputBps(), MaxThroughputBps, "the bound"},
		figure{"sender_throughput_bps", m.GetSenderThroughputBps(), MaxThroughputBps, "the bound"},
		figure{"jitter_seconds", m.GetJitterSeconds(), t, deadline},
		figure{"loss_ratio", m.GetLossRatio(), 1, "1"},
		figure{"duration_seconds", m.GetDurationSeconds(), t, deadline},
		figure{"sender_cpu_ratio", m.GetSenderCpuRatio(), MaxCPURatio, "the bound"},
		figure{"receiver_cpu_ratio", m.GetReceiverCpuRatio(), MaxCPURatio, "the bound"},
	)
	if err != nil {
		return err
	}
	if mss := m.GetTcpMssBytes(); mss > MaxMSSBytes {
		return &Error{Field: "tcp_mss_bytes", Value: strconv.FormatUint(uint64(mss), 10), Reason: OutOfBounds,
			Detail: fmt.Sprintf("is over the largest IP packet %d", MaxMSSBytes)}
	}
	// What a link of MaxThroughputBps carries in the deadline, whatever
	// the other counts say.
	for _, c := range []struct {
		field string
		v     uint64
	}{{"bytes_sent", m.GetBytesSent()}, {"bytes_received", m.GetBytesReceived()},
		{"packets", m.GetPackets()}, {"lost_packets", m.GetLostPackets()}, {"retransmits", m.GetRetransmits()}} {
		if err := maxCount(c.field, c.v, t); err != nil {
			return err
		}
	}
	lost, packets := m.GetLostPackets(), m.GetPackets()
	switch {
	case lost > packets:
		return inconsistent("lost_packets", strconv.FormatUint(lost, 10), "is over packets %d", packets)
	case packets > 0 && m.GetRetransmits() > packets:
		return inconsistent("retransmits", strconv.FormatUint(m.GetRetransmits(), 10), "is over packets %d", packets)
	case m.GetBytesSent() > 0 && m.GetRetransmits() > m.GetBytesSent():
		return inconsistent("retransmits", strconv.FormatUint(m.GetRetransmits(), 10), "is over bytes_sent %d", m.GetBytesSent())
	case tcp && m.GetBytesSent() > 0 && m.GetBytesReceived() > m.GetBytesSent():
		// TCP delivers what was sent, once: the receiver's count (which
		// the server reports, another node) cannot be higher.
		return inconsistent("bytes_received", strconv.FormatUint(m.GetBytesReceived(), 10), "is over bytes_sent %d (TCP)", m.GetBytesSent())
	}
	// loss_ratio is not checked against lost_packets/packets: the runner
	// takes packets from the sender's sum when it has one and the ratio
	// from the receiver's (or its lost_percent), which differ a little.
	return nil
}

func checkHTTP(m *measurev1.HttpMetrics, t float64) error {
	if c := m.GetHttpCode(); c > MaxHTTPCode {
		return &Error{Field: "http_code", Value: strconv.FormatUint(uint64(c), 10), Reason: OutOfBounds, Detail: "is not an HTTP status code"}
	} else if c < 200 || c > 299 {
		// The runner fails any other answer (TOOL_ERROR, with the code).
		return inconsistent("http_code", strconv.FormatUint(uint64(c), 10), "in an OK result: not a success (2xx)")
	}
	times := []figure{{"namelookup_seconds", m.GetNamelookupSeconds(), t, deadline}, {"connect_seconds", m.GetConnectSeconds(), t, deadline},
		{"tls_seconds", m.GetTlsSeconds(), t, deadline}, {"first_byte_seconds", m.GetFirstByteSeconds(), t, deadline},
		{"total_seconds", m.GetTotalSeconds(), t, deadline}}
	if err := checkAll(times...); err != nil {
		return err
	}
	if m.GetTotalSeconds() == 0 {
		return inconsistent("total_seconds", "0", "in an OK result: a request takes time")
	}
	if err := maxCount("size_download_bytes", m.GetSizeDownloadBytes(), t); err != nil {
		return err
	}
	// curl's times count from the start: each phase ends after the one
	// before it (a phase that did not happen is 0).
	return ordered(true, times...)
}

// Invalidate makes r, whose figures failed with err, a STATUS_INVALID
// result without metrics whose message says which figure and why.
func Invalidate(r *measurev1.Result, err error) {
	msg := "the agent's figures failed the coordinator's checks: " + err.Error()
	if r.GetStatus() != measurev1.Status_STATUS_OK && r.GetStatus() != measurev1.Status_STATUS_UNSPECIFIED {
		msg += " (the agent said " + r.GetStatus().String() + ")"
	}
	r.Status, r.Message, r.Metrics = measurev1.Status_STATUS_INVALID, msg, nil
	r.Elapsed = nil
}

// CheckSummary checks the figures of a probe summary: the round trips
// finite, non-negative, in order and at most the plan's timeout plus
// ProbeSlack (timeout 0: one minute), none without an answer, received
// at most sent and sent at most maxSent (the probes the period holds;
// 0: no bound), an OK status only with every probe answered and a
// failure only with a probe sent.
func CheckSummary(s *agentv1.ProbeSummary, timeout time.Duration, maxSent uint32) error {
	if timeout <= 0 {
		timeout = time.Minute
	}
	hi := (timeout + ProbeSlack).Seconds()
	const what = "the probe timeout"
	rtts := []figure{{"rtt_min_seconds", s.GetRttMinSeconds(), hi, what}, {"rtt_median_seconds", s.GetRttMedianSeconds(), hi, what},
		{"rtt_p90_seconds", s.GetRttP90Seconds(), hi, what}, {"rtt_max_seconds", s.GetRttMaxSeconds(), hi, what}}
	if err := checkAll(rtts...); err != nil {
		return err
	}
	sent, got := s.GetSent(), s.GetReceived()
	if maxSent > 0 && sent > maxSent {
		return &Error{Field: "sent", Value: strconv.FormatUint(uint64(sent), 10), Reason: OutOfBounds,
			Detail: fmt.Sprintf("is over the %d probes the period holds", maxSent)}
	}
	if got > sent {
		return inconsistent("received", strconv.FormatUint(uint64(got), 10), "is over sent %d", sent)
	}
	for _, f := range rtts {
		if got == 0 && f.v != 0 {
			return inconsistent(f.field, num(f.v), "with no probe answered")
		}
	}
	if err := ordered(false, rtts...); err != nil {
		return err
	}
	switch ok := s.GetStatus() == measurev1.Status_STATUS_OK; {
	case ok && (got != sent || sent == 0):
		return inconsistent("status", "OK", "with %d of %d probes answered", got, sent)
	case !ok && sent == 0:
		return inconsistent("status", s.GetStatus().String(), "with no probe sent")
	}
	return nil
}

// InvalidSummary makes s, whose figures failed with err, a failed summary
// that is no sample: STATUS_INVALID, no probe counted, no round trip, and
// the reason as its message (at most maxMessage bytes).
func InvalidSummary(s *agentv1.ProbeSummary, err error, maxMessage int) {
	msg := "figures failed the coordinator's checks: " + err.Error()
	if len(msg) > maxMessage {
		msg = msg[:maxMessage]
	}
	s.Sent, s.Received = 0, 0
	s.RttMinSeconds, s.RttMedianSeconds, s.RttP90Seconds, s.RttMaxSeconds = 0, 0, 0, 0
	s.Status, s.Message = measurev1.Status_STATUS_INVALID, msg
}
