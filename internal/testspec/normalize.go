package testspec

import (
	"errors"
	"fmt"
	"math/big"
	"math/bits"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid test spec")

// Defaults and limits. Where a tool's own limit is tighter than the range
// written in measure.proto, the tool's limit wins, so that a spec this
// package accepts is one the tool accepts too.
const (
	defaultPingCount    = 5
	maxPingCount        = 1000
	defaultPingInterval = 200 * time.Millisecond
	minPingInterval     = 2 * time.Millisecond
	maxPingInterval     = 10 * time.Second
	defaultPingPayload  = 56
	// minPingPayload: iputils ping times a reply only when the payload
	// holds its timestamp (16 bytes); below that it prints no rtt line.
	minPingPayload = 16
	maxPingPayload = maxIPv4Payload
	// maxRun bounds a tool's run (qperf -t, iperf3 -t, a ping's count x
	// interval).
	maxRun = 300 * time.Second

	defaultQperfDuration = 2 * time.Second
	maxQperfSizes        = 32
	// maxQperfMsgSize: qperf allocates a message's buffer on both nodes,
	// inside the agent's memory limit (the DaemonSet's 256 MiB); a 1 GiB
	// message would have the kernel kill the tool, or the agent.
	maxQperfMsgSize = 64 << 20
	// maxIPv4Payload is the largest payload of a UDP datagram or an ICMP
	// echo over IPv4: 65535 - 20 (IP header) - 8 (UDP or ICMP header).
	// qperf udp_* with a larger message gets send errors and reports a
	// latency of 0 ns; ping and iperf3 refuse it.
	maxIPv4Payload = 65507

	defaultIperf3Duration = 2 * time.Second
	maxIperf3Streams      = 128
	// iperf3 3.12 refuses -l above 1 MiB for TCP ("block size too large")
	// and outside 16..65507 for UDP ("block size invalid").
	maxIperf3TCPBlock = 1 << 20
	// iperf3 allocates a block per stream: parallel_streams x
	// block_size_bytes is bounded as qperf's message is, and an unset TCP
	// block is iperf3's default, 128 KiB.
	maxIperf3Buffer       = 64 << 20
	defaultIperf3TCPBlock = 128 << 10
	minIperf3UDPBlock     = 16
	maxIperf3UDPBlock     = maxIPv4Payload
	defaultIperf3UDPBps   = 1_000_000_000
	// maxIperf3UDPLoad bounds udp_target_bps x parallel_streams: iperf3
	// applies -b to each stream, so that product is the load offered.
	maxIperf3UDPLoad    = 100_000_000_000
	defaultHTTPTimeout  = 5 * time.Second
	minHTTPTimeout      = 100 * time.Millisecond
	maxHTTPTimeout      = 60 * time.Second
	defaultQperfLatSize = 1
	// http_load (ab): -n, -c and -t. ab's -t and -s take whole seconds.
	defaultLoadRequests    = 1000
	maxLoadRequests        = 1_000_000
	defaultLoadConcurrency = 10
	maxLoadConcurrency     = 1000
	defaultLoadTimeout     = 30 * time.Second
	// MaxLoadSocketTimeout is ab's -s of an http_load: its timeout, at
	// most 30 s (ab's own default). ab waits that long for a byte from a
	// request in flight when the time limit (-t) passes, so a load lasts
	// at most timeout + min(timeout, 30 s).
	MaxLoadSocketTimeout = 30 * time.Second
	defaultQperfTCPBSize = 64 << 10
	// defaultQperfUDPBSize is qperf 0.4.11's default for udp_bw (32 KiB,
	// measured), not the 64 KiB that measure.proto's comment says.
	defaultQperfUDPBSize = 32 << 10

	// MaxExpectedDuration bounds ExpectedDuration of any spec Normalize
	// accepts: a test server lives at most 10 minutes (agent/servers) and
	// the agent caps any work at 15 minutes, so a longer client could not
	// finish.
	MaxExpectedDuration = 10 * time.Minute
	// ClientSlack is added to a test's ExpectedDuration for its client's
	// deadline: the coordinator's deadline for the run (runs), the
	// longest time figure a result may report (sanity.Timeout), and how
	// far ab's "Time taken for tests" may run past its -t (the runner).
	ClientSlack = 10 * time.Second
)

// Normalize returns a copy of spec with every default filled in, or an
// error wrapping ErrInvalid that names the field and the value, e.g.
// "invalid test spec: qperf.duration: 0.5s is not a whole number of seconds
// in 1..300". spec itself is never modified.
//
// Defaults (zero or missing means the default):
//   - ping: count 5 (1..1000), interval 0.2s (0.002s..10s), payload 56 bytes
//     (16..65507: below 16 ping cannot time replies), and count x interval
//     at most 300s.
//   - qperf: duration 2s (whole seconds 1..300); msg_size_bytes empty means
//     qperf's own default, written out: [1] for *_lat, [65536] for tcp_bw,
//     [32768] for udp_bw. At most 32 sizes, no repeats, each 1..1 GiB and
//     at most 65507 for udp_*.
//   - iperf3: duration 2s (whole seconds 1..300), parallel_streams 1
//     (1..128), block_size_bytes 0 = iperf3's default (TCP 1..1 MiB, UDP
//     16..65507: iperf3 3.12's limits), udp_target_bps 1 Gbit/s for UDP and
//     must be 0 for TCP. udp_target_bps is iperf3's -b, which applies PER
//     STREAM: the load offered is udp_target_bps x parallel_streams, and
//     that product must be at most 100 Gbit/s.
//   - http: timeout 5s (0.1s..60s).
//   - http_load: requests 1000 (1..1,000,000), concurrency 10 but at most
//     requests (1..1000, and at most requests: ab refuses more), timeout
//     30s (whole seconds 1..300: ab's -t takes whole seconds).
//
// Whatever the tool, a spec whose ExpectedDuration exceeds
// MaxExpectedDuration (10 minutes, the longest a test server lives) is
// refused, e.g. 32 qperf sizes x (300s + 1s).
//
// The params field must match the test (ping for TEST_PING, qperf for
// TEST_QPERF_*, iperf3 for TEST_IPERF3_*, http for TEST_HTTP, http_load for
// TEST_HTTP_LOAD) or be unset.
// Normalize is idempotent: a normalized spec normalizes to an equal copy.
func Normalize(spec *measurev1.TestSpec) (*measurev1.TestSpec, error) {
	if spec == nil {
		return nil, invalid("spec", "missing")
	}
	test := spec.GetTest()
	if test == measurev1.Test_TEST_UNSPECIFIED {
		return nil, invalid("test", "TEST_UNSPECIFIED is not a test")
	}
	if _, ok := tests[test]; !ok {
		return nil, invalid("test", "%d is not a known test", int32(test))
	}
	out := proto.Clone(spec).(*measurev1.TestSpec)
	var err error
	switch Tool(test) {
	case measurev1.Tool_TOOL_PING:
		err = normalizeParams(out, "ping", out.GetPing,
			func(p *measurev1.PingParams) { out.Params = &measurev1.TestSpec_Ping{Ping: p} }, normalizePing)
	case measurev1.Tool_TOOL_QPERF:
		err = normalizeParams(out, "qperf", out.GetQperf,
			func(p *measurev1.QperfParams) { out.Params = &measurev1.TestSpec_Qperf{Qperf: p} },
			func(p *measurev1.QperfParams) error { return normalizeQperf(test, p) })
	case measurev1.Tool_TOOL_IPERF3:
		err = normalizeParams(out, "iperf3", out.GetIperf3,
			func(p *measurev1.Iperf3Params) { out.Params = &measurev1.TestSpec_Iperf3{Iperf3: p} },
			func(p *measurev1.Iperf3Params) error { return normalizeIperf3(test, p) })
	case measurev1.Tool_TOOL_CURL:
		err = normalizeParams(out, "http", out.GetHttp,
			func(p *measurev1.HttpParams) { out.Params = &measurev1.TestSpec_Http{Http: p} }, normalizeHTTP)
	case measurev1.Tool_TOOL_AB:
		err = normalizeParams(out, "http_load", out.GetHttpLoad,
			func(p *measurev1.HttpLoadParams) { out.Params = &measurev1.TestSpec_HttpLoad{HttpLoad: p} }, normalizeHTTPLoad)
	}
	if err != nil {
		return nil, err
	}
	if d := expectedDuration(out); d > MaxExpectedDuration {
		return nil, invalid(durationFields(out), "%s = %s expected, longer than the %s a test may last (a test server lives at most %d minutes)",
			durationTerms(out), Seconds(d), Seconds(MaxExpectedDuration), MaxExpectedDuration/time.Minute)
	}
	return out, nil
}

// durationFields names the fields that make up a normalized spec's
// ExpectedDuration, for errors.
func durationFields(n *measurev1.TestSpec) string {
	switch Tool(n.GetTest()) {
	case measurev1.Tool_TOOL_PING:
		return "ping.count x ping.interval"
	case measurev1.Tool_TOOL_QPERF:
		return "qperf.msg_size_bytes x qperf.duration"
	case measurev1.Tool_TOOL_IPERF3:
		return "iperf3.duration"
	case measurev1.Tool_TOOL_AB:
		return "http_load.timeout"
	default:
		return "http.timeout"
	}
}

// durationTerms writes out how a normalized spec's ExpectedDuration is
// made, for errors: "32 sizes x (300s + 1s)".
func durationTerms(n *measurev1.TestSpec) string {
	switch Tool(n.GetTest()) {
	case measurev1.Tool_TOOL_PING:
		p := n.GetPing()
		return fmt.Sprintf("%d x %s + %s", p.GetCount(), Seconds(p.GetInterval().AsDuration()), Seconds(pingLinger))
	case measurev1.Tool_TOOL_QPERF:
		p := n.GetQperf()
		return fmt.Sprintf("%d sizes x (%s + %s)", len(p.GetMsgSizeBytes()), Seconds(p.GetDuration().AsDuration()), Seconds(qperfOverhead))
	case measurev1.Tool_TOOL_IPERF3:
		return fmt.Sprintf("%s + %s", Seconds(n.GetIperf3().GetDuration().AsDuration()), Seconds(iperf3Overhead))
	case measurev1.Tool_TOOL_AB:
		t := n.GetHttpLoad().GetTimeout().AsDuration()
		return fmt.Sprintf("%s + %s + %s", Seconds(t), Seconds(LoadSocketTimeout(t)), Seconds(abOverhead))
	default:
		return Seconds(n.GetHttp().GetTimeout().AsDuration())
	}
}

// normalizeParams checks that out carries no parameters of a tool other
// than kind's (checkKind), sets out's parameters to the tool's own (get;
// an empty message when absent) through set, and normalizes them in
// place.
func normalizeParams[P any](out *measurev1.TestSpec, kind string, get func() *P, set func(*P), normalize func(*P) error) error {
	if err := checkKind(out, kind); err != nil {
		return err
	}
	p := get()
	if p == nil {
		p = new(P)
	}
	set(p)
	return normalize(p)
}

// checkKind checks that spec's params, if set, are of the kind want.
func checkKind(spec *measurev1.TestSpec, want string) error {
	var got string
	switch spec.Params.(type) {
	case nil:
		return nil
	case *measurev1.TestSpec_Ping:
		got = "ping"
	case *measurev1.TestSpec_Qperf:
		got = "qperf"
	case *measurev1.TestSpec_Iperf3:
		got = "iperf3"
	case *measurev1.TestSpec_Http:
		got = "http"
	case *measurev1.TestSpec_HttpLoad:
		got = "http_load"
	}
	if got == want {
		return nil
	}
	return invalid("params", "%s params given for test %s, which takes %s params", got, Name(spec.GetTest()), want)
}

func normalizePing(p *measurev1.PingParams) error {
	if p.Count == 0 {
		p.Count = defaultPingCount
	}
	if p.Count > maxPingCount {
		return invalid("ping.count", "%d is not in 1..%d", p.Count, maxPingCount)
	}
	iv, err := durationField("ping.interval", p.Interval, defaultPingInterval, minPingInterval, maxPingInterval, false)
	if err != nil {
		return err
	}
	p.Interval = iv
	if p.PayloadSizeBytes == 0 {
		p.PayloadSizeBytes = defaultPingPayload
	}
	if p.PayloadSizeBytes < minPingPayload || p.PayloadSizeBytes > maxPingPayload {
		return invalid("ping.payload_size_bytes", "%d is not in %d..%d (ping times replies only from %d bytes)",
			p.PayloadSizeBytes, minPingPayload, maxPingPayload, minPingPayload)
	}
	if total := time.Duration(p.Count) * iv.AsDuration(); total > maxRun {
		return invalid("ping", "count %d x interval %s = %s is longer than %s",
			p.Count, Seconds(iv.AsDuration()), Seconds(total), Seconds(maxRun))
	}
	return nil
}

func normalizeQperf(test measurev1.Test, p *measurev1.QperfParams) error {
	d, err := durationField("qperf.duration", p.Duration, defaultQperfDuration, time.Second, maxRun, true)
	if err != nil {
		return err
	}
	p.Duration = d
	if len(p.MsgSizeBytes) == 0 {
		switch test {
		case measurev1.Test_TEST_QPERF_TCP_BW:
			p.MsgSizeBytes = []uint64{defaultQperfTCPBSize}
		case measurev1.Test_TEST_QPERF_UDP_BW:
			p.MsgSizeBytes = []uint64{defaultQperfUDPBSize}
		default:
			p.MsgSizeBytes = []uint64{defaultQperfLatSize}
		}
	}
	if len(p.MsgSizeBytes) > maxQperfSizes {
		return invalid("qperf.msg_size_bytes", "%d sizes, at most %d", len(p.MsgSizeBytes), maxQperfSizes)
	}
	limit := uint64(maxQperfMsgSize)
	if IsUDP(test) {
		limit = maxIPv4Payload
	}
	seen := make(map[uint64]int, len(p.MsgSizeBytes))
	for i, size := range p.MsgSizeBytes {
		field := fmt.Sprintf("qperf.msg_size_bytes[%d]", i)
		if size == 0 || size > limit {
			return invalid(field, "%d is not in 1..%d", size, limit)
		}
		if j, dup := seen[size]; dup {
			return invalid(field, "%d repeats msg_size_bytes[%d]", size, j)
		}
		seen[size] = i
	}
	return nil
}

func normalizeIperf3(test measurev1.Test, p *measurev1.Iperf3Params) error {
	d, err := durationField("iperf3.duration", p.Duration, defaultIperf3Duration, time.Second, maxRun, true)
	if err != nil {
		return err
	}
	p.Duration = d
	if p.ParallelStreams == 0 {
		p.ParallelStreams = 1
	}
	if p.ParallelStreams > maxIperf3Streams {
		return invalid("iperf3.parallel_streams", "%d is not in 1..%d", p.ParallelStreams, maxIperf3Streams)
	}
	udp := test == measurev1.Test_TEST_IPERF3_UDP
	if b := p.BlockSizeBytes; b != 0 {
		if udp && (b < minIperf3UDPBlock || b > maxIperf3UDPBlock) {
			return invalid("iperf3.block_size_bytes", "%d is not in %d..%d (iperf3's UDP limits)", b, minIperf3UDPBlock, maxIperf3UDPBlock)
		}
		if !udp && b > maxIperf3TCPBlock {
			return invalid("iperf3.block_size_bytes", "%d is not in 1..%d (iperf3's TCP limit)", b, maxIperf3TCPBlock)
		}
	}
	if !udp {
		block := uint64(p.BlockSizeBytes)
		if block == 0 {
			block = defaultIperf3TCPBlock
		}
		if buf := block * uint64(p.ParallelStreams); buf > maxIperf3Buffer {
			return invalid("iperf3.parallel_streams x iperf3.block_size_bytes",
				"%d x %d = %d bytes of buffers is above %d (64 MiB, within the agent's memory)", p.ParallelStreams, block, buf, maxIperf3Buffer)
		}
		if p.UdpTargetBps != 0 {
			return invalid("iperf3.udp_target_bps", "%d is set for %s, a TCP test", p.UdpTargetBps, Name(test))
		}
		return nil
	}
	if p.UdpTargetBps == 0 {
		p.UdpTargetBps = defaultIperf3UDPBps
	}
	// -b is per stream; parallel_streams is 1..128 here. The division
	// keeps the product from overflowing.
	if p.UdpTargetBps > maxIperf3UDPLoad/uint64(p.ParallelStreams) {
		return invalid("iperf3.udp_target_bps x iperf3.parallel_streams",
			"%d x %d = %s bit/s is above %d (100 Gbit/s; iperf3's -b applies to each stream)",
			p.UdpTargetBps, p.ParallelStreams, productString(p.UdpTargetBps, uint64(p.ParallelStreams)), uint64(maxIperf3UDPLoad))
	}
	return nil
}

func normalizeHTTP(p *measurev1.HttpParams) error {
	d, err := durationField("http.timeout", p.Timeout, defaultHTTPTimeout, minHTTPTimeout, maxHTTPTimeout, false)
	if err != nil {
		return err
	}
	p.Timeout = d
	return nil
}

func normalizeHTTPLoad(p *measurev1.HttpLoadParams) error {
	if p.Requests == 0 {
		p.Requests = defaultLoadRequests
	}
	if p.Requests > maxLoadRequests {
		return invalid("http_load.requests", "%d is not in 1..%d", p.Requests, maxLoadRequests)
	}
	if p.Concurrency == 0 {
		p.Concurrency = min(defaultLoadConcurrency, p.Requests)
	}
	if p.Concurrency > maxLoadConcurrency {
		return invalid("http_load.concurrency", "%d is not in 1..%d", p.Concurrency, maxLoadConcurrency)
	}
	if p.Concurrency > p.Requests {
		return invalid("http_load.concurrency", "%d is above http_load.requests %d (ab refuses more requests in flight than it makes)", p.Concurrency, p.Requests)
	}
	d, err := durationField("http_load.timeout", p.Timeout, defaultLoadTimeout, time.Second, maxRun, true)
	if err != nil {
		return err
	}
	p.Timeout = d
	return nil
}

// LoadSocketTimeout is ab's -s for an http_load of the given timeout:
// min(timeout, MaxLoadSocketTimeout).
func LoadSocketTimeout(timeout time.Duration) time.Duration {
	return min(timeout, MaxLoadSocketTimeout)
}

// durationField checks a Duration field: nil or zero gives def; otherwise it
// must be valid, in min..max and, if whole, a whole number of seconds.
func durationField(field string, d *durationpb.Duration, def, lo, hi time.Duration, whole bool) (*durationpb.Duration, error) {
	if d == nil || (d.Seconds == 0 && d.Nanos == 0) {
		return durationpb.New(def), nil
	}
	if err := d.CheckValid(); err != nil {
		return nil, invalid(field, "{seconds:%d nanos:%d} is not a valid duration", d.Seconds, d.Nanos)
	}
	v := d.AsDuration()
	if whole {
		if v%time.Second != 0 || v < lo || v > hi {
			return nil, invalid(field, "%s is not a whole number of seconds in %d..%d", Seconds(v), lo/time.Second, hi/time.Second)
		}
		return d, nil
	}
	if v < lo || v > hi {
		return nil, invalid(field, "%s is not in %s..%s", Seconds(v), Seconds(lo), Seconds(hi))
	}
	return d, nil
}

// productString is a x b in decimal, exact even beyond 64 bits.
func productString(a, b uint64) string {
	hi, lo := bits.Mul64(a, b)
	if hi == 0 {
		return strconv.FormatUint(lo, 10)
	}
	return new(big.Int).Mul(new(big.Int).SetUint64(a), new(big.Int).SetUint64(b)).String()
}

// Seconds formats d as decimal seconds, the way the specs' errors and the
// tools' flags write a duration: "0.5s", "300s" (never "5m0s").
func Seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Per-run overheads used by ExpectedDuration: measured on loopback and veth,
// rounded up.
const (
	pingLinger     = time.Second // -W 1: how long ping waits for the last reply
	qperfOverhead  = time.Second // connect, exchange of parameters and results
	iperf3Overhead = 2 * time.Second
	abOverhead     = 2 * time.Second // start, connects, the summary
)

// ExpectedDuration returns how long the client of spec normally runs,
// failures aside: ping count x interval + 1s; qperf (duration + 1s) per
// message size; iperf3 duration + 2s; http its timeout; http_load its
// timeout + LoadSocketTimeout(timeout) + 2s (ab stops starting requests at
// its -t but waits up to -s for those in flight). It is an estimate
// for deadlines, not a bound: callers add slack (a qperf client that cannot
// connect gives up after 5s, per message size). spec is normalized first;
// the error is Normalize's. It is at most MaxExpectedDuration.
func ExpectedDuration(spec *measurev1.TestSpec) (time.Duration, error) {
	n, err := Normalize(spec)
	if err != nil {
		return 0, err
	}
	return expectedDuration(n), nil
}

// expectedDuration is ExpectedDuration of a normalized spec. It cannot
// overflow: counts, sizes and durations are bounded before it is called.
func expectedDuration(n *measurev1.TestSpec) time.Duration {
	switch Tool(n.GetTest()) {
	case measurev1.Tool_TOOL_PING:
		p := n.GetPing()
		return time.Duration(p.GetCount())*p.GetInterval().AsDuration() + pingLinger
	case measurev1.Tool_TOOL_QPERF:
		p := n.GetQperf()
		return time.Duration(len(p.GetMsgSizeBytes())) * (p.GetDuration().AsDuration() + qperfOverhead)
	case measurev1.Tool_TOOL_IPERF3:
		return n.GetIperf3().GetDuration().AsDuration() + iperf3Overhead
	case measurev1.Tool_TOOL_AB:
		t := n.GetHttpLoad().GetTimeout().AsDuration()
		return t + LoadSocketTimeout(t) + abOverhead
	default:
		return n.GetHttp().GetTimeout().AsDuration()
	}
}
