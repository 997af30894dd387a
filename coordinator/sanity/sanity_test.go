package sanity

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func okPing() *measurev1.Result {
	med := 0.0005
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
		Elapsed: durationpb.New(time.Second),
		Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{PacketsTransmitted: 5, PacketsReceived: 4, LossRatio: 0.2,
			RttMinSeconds: 0.0004, RttAvgSeconds: 0.0005, RttMaxSeconds: 0.0007, RttMdevSeconds: 0.0001, RttMedianSeconds: &med}}}
}

func okQperf() *measurev1.Result {
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_BW},
		Metrics: &measurev1.Result_Qperf{Qperf: &measurev1.QperfMetrics{MsgSizeBytes: 65536, ThroughputBps: 9.4e9, MsgRateHz: 18000, DurationSeconds: 2}}}
}

func okIperf3() *measurev1.Result {
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_UDP},
		Metrics: &measurev1.Result_Iperf3{Iperf3: &measurev1.Iperf3Metrics{ThroughputBps: 1e9, SenderThroughputBps: 1e9, JitterSeconds: 1e-5,
			LostPackets: 10, Packets: 1000, LossRatio: 0.01, BytesSent: 250e6, BytesReceived: 249e6, DurationSeconds: 2, SenderCpuRatio: 0.3}}}
}

func okHTTP() *measurev1.Result {
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP},
		Metrics: &measurev1.Result_Http{Http: &measurev1.HttpMetrics{HttpCode: 200, NamelookupSeconds: 1e-5, ConnectSeconds: 2e-4,
			FirstByteSeconds: 5e-4, TotalSeconds: 6e-4, SizeDownloadBytes: 100}}}
}

func okHTTPLoad() *measurev1.Result {
	return &measurev1.Result{Status: measurev1.Status_STATUS_OK, Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD,
		Params: &measurev1.TestSpec_HttpLoad{HttpLoad: &measurev1.HttpLoadParams{Requests: 2000, Concurrency: 10}}},
		Metrics: &measurev1.Result_HttpLoad{HttpLoad: &measurev1.HttpLoadMetrics{Requests: 2000, Concurrency: 10, CompletedRequests: 2000,
			SuccessfulRequests: 1990, FailedRequests: 10, Non_2XxResponses: 10, RequestsPerSecond: 1427.57, TransferRateBps: 1644544,
			DurationSeconds: 1.401, TransferredBytes: 288000, LatencyMeanSeconds: 0.007005, LatencyP50Seconds: 0.007,
			LatencyP90Seconds: 0.011, LatencyP95Seconds: 0.012, LatencyP99Seconds: 0.017, LatencyMaxSeconds: 0.026}}}
}

func TestCheckResult(t *testing.T) {
	with := func(r *measurev1.Result, f func(*measurev1.Result)) *measurev1.Result { f(r); return r }
	tests := []struct {
		name       string
		r          *measurev1.Result
		wantReason Reason // "" when it passes
		wantIn     string
	}{
		{"good ping", okPing(), "", ""},
		{"good qperf", okQperf(), "", ""},
		{"good iperf3", okIperf3(), "", ""},
		{"good http", okHTTP(), "", ""},
		{"good http_load", okHTTPLoad(), "", ""},
		{"http_load all failed", with(okHTTPLoad(), func(r *measurev1.Result) {
			m := r.GetHttpLoad()
			m.SuccessfulRequests, m.FailedRequests, m.Non_2XxResponses = 0, 2000, 2000
		}), "", ""},
		{"http_load NaN rps", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().RequestsPerSecond = math.NaN() }), NotFinite, "requests_per_second NaN"},
		{"http_load negative rps", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().RequestsPerSecond = -1 }), Negative, "requests_per_second -1"},
		{"http_load absurd rps", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().RequestsPerSecond = 1e12 }), OutOfBounds, "requests_per_second 1e+12"},
		{"http_load p99 under p95", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().LatencyP99Seconds = 0.001 }), Inconsistent,
			"latency_p99_seconds 0.001 is under latency_p95_seconds 0.012"},
		{"http_load latency over the deadline", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().LatencyMaxSeconds = 4000 }), OutOfBounds,
			"latency_max_seconds 4000 is over the test's deadline"},
		{"http_load counts", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().FailedRequests = 0 }), Inconsistent,
			"failed_requests 0 is not requests 2000 - successful_requests 1990"},
		{"http_load successes over completed", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().CompletedRequests = 1000 }), Inconsistent,
			"successful_requests 1990 is over completed_requests 1000"},
		{"http_load completed over requests", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().CompletedRequests = 2001 }), Inconsistent,
			"completed_requests 2001 is over requests 2000"},
		{"http_load requests not the spec's", with(okHTTPLoad(), func(r *measurev1.Result) {
			m := r.GetHttpLoad()
			m.Requests, m.FailedRequests = 1_000_000, 1_000_000-1990
		}), Inconsistent, "requests 1000000 is not the spec's requests 2000"},
		{"http_load concurrency not the spec's", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().Concurrency = 50 }), Inconsistent,
			"concurrency 50 is not the spec's concurrency 10"},
		{"http_load non-2xx over completed", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().Non_2XxResponses = 3000 }), Inconsistent,
			"non_2xx_responses 3000 is over completed_requests 2000"},
		{"http_load successes without a byte", with(okHTTPLoad(), func(r *measurev1.Result) { r.GetHttpLoad().TransferredBytes = 0 }), Inconsistent,
			"transferred_bytes 0 with 1990 successful requests"},
		{"http_load rate with nothing completed", with(okHTTPLoad(), func(r *measurev1.Result) {
			m := r.GetHttpLoad()
			m.CompletedRequests, m.SuccessfulRequests, m.FailedRequests, m.Non_2XxResponses = 0, 0, 2000, 0
		}), Inconsistent, "requests_per_second 1427.57 with no completed request"},
		{"failure without figures", &measurev1.Result{Status: measurev1.Status_STATUS_TIMEOUT}, "", ""},
		{"negative RTT", with(okPing(), func(r *measurev1.Result) { r.GetPing().RttMinSeconds = -5 }), Negative, "rtt_min_seconds -5 is negative"},
		{"NaN RTT", with(okPing(), func(r *measurev1.Result) { r.GetPing().RttAvgSeconds = math.NaN() }), NotFinite, "rtt_avg_seconds NaN"},
		{"+Inf median", with(okPing(), func(r *measurev1.Result) { v := math.Inf(1); r.GetPing().RttMedianSeconds = &v }), NotFinite, "rtt_median_seconds +Inf"},
		{"RTT over the deadline", with(okPing(), func(r *measurev1.Result) { r.GetPing().RttMaxSeconds = 3600 }), OutOfBounds, "rtt_max_seconds 3600 is over the test's deadline"},
		{"min over max", with(okPing(), func(r *measurev1.Result) { r.GetPing().RttMinSeconds = 0.001 }), Inconsistent, "rtt_avg_seconds 0.0005 is under rtt_min_seconds 0.001"},
		{"median outside", with(okPing(), func(r *measurev1.Result) { v := 0.0009; r.GetPing().RttMedianSeconds = &v }), Inconsistent, "rtt_max_seconds"},
		{"received over sent", with(okPing(), func(r *measurev1.Result) { r.GetPing().PacketsReceived = 9 }), Inconsistent, "packets_received 9 is over packets_transmitted 5"},
		{"loss not the counts'", with(okPing(), func(r *measurev1.Result) { r.GetPing().LossRatio = 0 }), Inconsistent, "loss_ratio 0 is not"},
		{"loss over 1", with(okPing(), func(r *measurev1.Result) { r.GetPing().LossRatio = 2 }), OutOfBounds, "loss_ratio 2"},
		{"1e300 bit/s", with(okQperf(), func(r *measurev1.Result) { r.GetQperf().ThroughputBps = 1e300 }), OutOfBounds, "throughput_bps 1e+300 is over"},
		{"qperf NaN latency", with(okQperf(), func(r *measurev1.Result) { r.GetQperf().LatencySeconds = math.NaN() }), NotFinite, "latency_seconds NaN"},
		{"iperf3 -Inf", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().ThroughputBps = math.Inf(-1) }), NotFinite, "throughput_bps -Inf"},
		{"iperf3 11 Tbit/s", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().SenderThroughputBps = 11e12 }), OutOfBounds, "sender_throughput_bps"},
		{"iperf3 lost over packets", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().LostPackets = 2000 }), Inconsistent, "lost_packets 2000 is over packets 1000"},
		{"iperf3 loss ratio over 1", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().LossRatio = 1.5 }), OutOfBounds, "loss_ratio 1.5 is over 1"},
		{"iperf3 jitter", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().JitterSeconds = 1e9 }), OutOfBounds, "jitter_seconds"},
		{"iperf3 retransmits", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().Retransmits = 5000 }), Inconsistent, "retransmits 5000 is over packets 1000"},
		{"iperf3 bytes", with(okIperf3(), func(r *measurev1.Result) { r.GetIperf3().BytesSent = math.MaxUint64 }), OutOfBounds, "bytes_sent"},
		{"http connect far beyond max-time", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().ConnectSeconds = 4e9 }), OutOfBounds, "connect_seconds 4e+09"},
		{"http out of order", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().FirstByteSeconds = 1e-4 }), Inconsistent, "first_byte_seconds 0.0001 is under connect_seconds"},
		{"http code", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().HttpCode = 5000 }), OutOfBounds, "http_code 5000"},
		{"http code 0 OK", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().HttpCode = 0 }), Inconsistent, "http_code 0 in an OK result"},
		{"http code 500 OK", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().HttpCode = 500 }), Inconsistent, "http_code 500 in an OK result"},
		{"http 204", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().HttpCode = 204 }), "", ""},
		{"http no time", with(okHTTP(), func(r *measurev1.Result) {
			m := r.GetHttp()
			m.NamelookupSeconds, m.ConnectSeconds, m.FirstByteSeconds, m.TotalSeconds = 0, 0, 0, 0
		}), Inconsistent, "total_seconds 0 in an OK result"},
		{"http negative time", with(okHTTP(), func(r *measurev1.Result) { r.GetHttp().TotalSeconds = -1 }), Negative, "total_seconds -1 is negative"},
		{"ping OK without counts", with(okPing(), func(r *measurev1.Result) {
			m := r.GetPing()
			m.PacketsTransmitted, m.PacketsReceived, m.LossRatio = 0, 0, 0
		}), Inconsistent, "packets_transmitted 0 in an OK result"},
		{"negative elapsed", with(&measurev1.Result{Status: measurev1.Status_STATUS_TIMEOUT}, func(r *measurev1.Result) {
			r.Elapsed = durationpb.New(-time.Second)
		}), Negative, "elapsed -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckResult(tt.r, Timeout(tt.r.GetSpec()))
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("CheckResult: %v, want it to pass", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || ReasonOf(err) != tt.wantReason || !strings.Contains(err.Error(), tt.wantIn) {
				t.Fatalf("CheckResult: %v (reason %s), want reason %s and %q", err, ReasonOf(err), tt.wantReason, tt.wantIn)
			}
			Invalidate(tt.r, err)
			if tt.r.GetStatus() != measurev1.Status_STATUS_INVALID || tt.r.GetMetrics() != nil || !strings.Contains(tt.r.GetMessage(), tt.wantIn) {
				t.Errorf("Invalidate: %v", tt.r)
			}
		})
	}
}

func okSummary() *agentv1.ProbeSummary {
	return &agentv1.ProbeSummary{Dst: &agentv1.ProbeSummary_Node{Node: "node-2"}, Sent: 6, Received: 6,
		RttMinSeconds: 1e-4, RttMedianSeconds: 2e-4, RttP90Seconds: 3e-4, RttMaxSeconds: 4e-4, Status: measurev1.Status_STATUS_OK}
}

func TestCheckSummary(t *testing.T) {
	with := func(f func(*agentv1.ProbeSummary)) *agentv1.ProbeSummary { s := okSummary(); f(s); return s }
	tests := []struct {
		name       string
		s          *agentv1.ProbeSummary
		wantReason Reason
		wantIn     string
	}{
		{"good", okSummary(), "", ""},
		{"a loss", with(func(s *agentv1.ProbeSummary) { s.Received, s.Status = 5, measurev1.Status_STATUS_TIMEOUT }), "", ""},
		{"negative", with(func(s *agentv1.ProbeSummary) { s.RttMinSeconds = -5 }), Negative, "rtt_min_seconds -5 is negative"},
		{"NaN", with(func(s *agentv1.ProbeSummary) { s.RttMedianSeconds = math.NaN() }), NotFinite, "rtt_median_seconds NaN"},
		{"+Inf", with(func(s *agentv1.ProbeSummary) { s.RttMaxSeconds = math.Inf(1) }), NotFinite, "rtt_max_seconds +Inf"},
		{"over the timeout", with(func(s *agentv1.ProbeSummary) { s.RttMaxSeconds = 30 }), OutOfBounds, "rtt_max_seconds 30 is over the probe timeout 2"},
		{"out of order", with(func(s *agentv1.ProbeSummary) { s.RttP90Seconds = 1e-3 }), Inconsistent, "rtt_max_seconds 0.0004 is under rtt_p90_seconds 0.001"},
		{"received over sent", with(func(s *agentv1.ProbeSummary) { s.Received = 7 }), Inconsistent, "received 7 is over sent 6"},
		{"sent over the period", with(func(s *agentv1.ProbeSummary) { s.Sent, s.Received = 100, 100 }), OutOfBounds, "sent 100 is over the 8 probes"},
		{"OK with a loss", with(func(s *agentv1.ProbeSummary) { s.Received = 5 }), Inconsistent, "status OK with 5 of 6"},
		{"RTT with no answer", with(func(s *agentv1.ProbeSummary) { s.Received, s.Status = 0, measurev1.Status_STATUS_TIMEOUT }), Inconsistent, "with no probe answered"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckSummary(tt.s, time.Second, 8)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("CheckSummary: %v, want it to pass", err)
				}
				return
			}
			if ReasonOf(err) != tt.wantReason || !strings.Contains(err.Error(), tt.wantIn) {
				t.Fatalf("CheckSummary: %v (reason %s), want reason %s and %q", err, ReasonOf(err), tt.wantReason, tt.wantIn)
			}
			InvalidSummary(tt.s, err, 256)
			if tt.s.GetStatus() != measurev1.Status_STATUS_INVALID || tt.s.GetSent() != 0 || tt.s.GetRttMaxSeconds() != 0 ||
				!strings.Contains(tt.s.GetMessage(), tt.wantIn) || CheckSummary(tt.s, time.Second, 8) == nil {
				t.Errorf("InvalidSummary: %v", tt.s)
			}
		})
	}
}

func TestCounterAndLimiter(t *testing.T) {
	var c Counter
	c.Add(SourceRun, &Error{Reason: Negative})
	c.Add(SourceRun, &Error{Reason: Negative})
	c.Add(SourceProbe, errors.New("other"))
	if c.Get(SourceRun, Negative) != 2 || c.Get(SourceProbe, Inconsistent) != 1 || c.Get(SourceProbe, Negative) != 0 {
		t.Errorf("counts: %d %d %d", c.Get(SourceRun, Negative), c.Get(SourceProbe, Inconsistent), c.Get(SourceProbe, Negative))
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	l := Limiter{Every: time.Hour}
	for range 5 {
		l.Warn(log, "rogue", "invalid figures")
	}
	l.Warn(log, "other", "invalid figures")
	l.Warn(log, "rogue", "plan refused") // another message about the node is not held back
	l.Warn(log, "rogue", "plan refused")
	if n := strings.Count(buf.String(), "invalid figures"); n != 2 {
		t.Errorf("%d warnings, want 2 (one per node):\n%s", n, buf.String())
	}
	if n := strings.Count(buf.String(), "plan refused"); n != 1 {
		t.Errorf("%d plan warnings, want 1 (one per node and message):\n%s", n, buf.String())
	}
}

// FuzzCheckResult: from any bytes that unmarshal into a Result, CheckResult
// never panics, and a result that passes has only finite, non-negative
// figures within the bounds.
func FuzzCheckResult(f *testing.F) {
	for _, r := range []*measurev1.Result{okPing(), okQperf(), okIperf3(), okHTTP(), okHTTPLoad(), {Status: measurev1.Status_STATUS_TIMEOUT}} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &measurev1.Result{}
		if proto.Unmarshal(b, r) != nil {
			return
		}
		timeout := Timeout(r.GetSpec())
		err := CheckResult(r, timeout)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || index(Reasons, ReasonOf(err)) < 0 {
				t.Fatalf("error %v is not an *Error with a known reason", err)
			}
			Invalidate(r, err)
			if r.GetMetrics() != nil || r.GetStatus() != measurev1.Status_STATUS_INVALID || CheckResult(r, timeout) != nil {
				t.Fatalf("Invalidate left %v", r)
			}
			return
		}
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			return
		}
		for name, v := range floats(r) {
			hi := MaxThroughputBps
			switch {
			case strings.HasSuffix(name, "_seconds"):
				hi = timeout.Seconds()
			case strings.HasSuffix(name, "_ratio") && !strings.HasSuffix(name, "cpu_ratio"):
				hi = 1
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > hi {
				t.Fatalf("passed with %s %v (bound %v): %v", name, v, hi, r)
			}
		}
	})
}

// floats are the float figures of r's metrics by field name.
func floats(r *measurev1.Result) map[string]float64 {
	out := map[string]float64{}
	r.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.ContainingOneof() == nil || fd.Message() == nil {
			return true
		}
		v.Message().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if fd.Kind() == protoreflect.DoubleKind {
				out[string(fd.Name())] = v.Float()
			}
			return true
		})
		return true
	})
	return out
}
