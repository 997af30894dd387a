package testspec

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"
)

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// sizes returns n distinct message sizes: 1..n.
func sizes(n int) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		s[i] = uint64(i + 1)
	}
	return s
}

func pingSpec(p *measurev1.PingParams) *measurev1.TestSpec {
	return &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: p}}
}

func qperfSpec(test measurev1.Test, p *measurev1.QperfParams) *measurev1.TestSpec {
	return &measurev1.TestSpec{Test: test, Params: &measurev1.TestSpec_Qperf{Qperf: p}}
}

func iperf3Spec(test measurev1.Test, p *measurev1.Iperf3Params) *measurev1.TestSpec {
	return &measurev1.TestSpec{Test: test, Params: &measurev1.TestSpec_Iperf3{Iperf3: p}}
}

func loadSpec(p *measurev1.HttpLoadParams) *measurev1.TestSpec {
	return &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_HttpLoad{HttpLoad: p}}
}

func httpSpec(p *measurev1.HttpParams) *measurev1.TestSpec {
	return &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP, Params: &measurev1.TestSpec_Http{Http: p}}
}

func TestNormalizeDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   *measurev1.TestSpec
		want *measurev1.TestSpec
	}{
		{
			name: "ping without params",
			in:   &measurev1.TestSpec{Test: measurev1.Test_TEST_PING},
			want: pingSpec(&measurev1.PingParams{Count: 5, Interval: dur(200 * time.Millisecond), PayloadSizeBytes: 56}),
		},
		{
			name: "ping keeps given values",
			in:   pingSpec(&measurev1.PingParams{Count: 20, Interval: dur(time.Second), PayloadSizeBytes: 1400}),
			want: pingSpec(&measurev1.PingParams{Count: 20, Interval: dur(time.Second), PayloadSizeBytes: 1400}),
		},
		{
			name: "qperf tcp_lat default size 1",
			in:   &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT},
			want: qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, &measurev1.QperfParams{Duration: dur(2 * time.Second), MsgSizeBytes: []uint64{1}}),
		},
		{
			name: "qperf tcp_bw default size 64 KiB",
			in:   qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{}),
			want: qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(2 * time.Second), MsgSizeBytes: []uint64{65536}}),
		},
		{
			name: "qperf udp_bw default size 32 KiB",
			in:   qperfSpec(measurev1.Test_TEST_QPERF_UDP_BW, nil),
			want: qperfSpec(measurev1.Test_TEST_QPERF_UDP_BW, &measurev1.QperfParams{Duration: dur(2 * time.Second), MsgSizeBytes: []uint64{32768}}),
		},
		{
			name: "qperf keeps size order",
			in:   qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(5 * time.Second), MsgSizeBytes: []uint64{4096, 64}}),
			want: qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(5 * time.Second), MsgSizeBytes: []uint64{4096, 64}}),
		},
		{
			name: "iperf3 tcp",
			in:   &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP},
			want: iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{Duration: dur(2 * time.Second), ParallelStreams: 1}),
		},
		{
			name: "iperf3 udp gets 1 Gbit/s",
			in:   iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{BlockSizeBytes: 1400}),
			want: iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{Duration: dur(2 * time.Second), ParallelStreams: 1, BlockSizeBytes: 1400, UdpTargetBps: 1e9}),
		},
		{
			name: "iperf3 udp load at 100 Gbit/s",
			in:   iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{ParallelStreams: 100}),
			want: iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{Duration: dur(2 * time.Second), ParallelStreams: 100, UdpTargetBps: 1e9}),
		},
		{
			name: "iperf3 tcp 64 streams of 1 MiB: 64 MiB of buffers, the most",
			in:   iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{ParallelStreams: 64, BlockSizeBytes: 1 << 20}),
			want: iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{Duration: dur(2 * time.Second), ParallelStreams: 64, BlockSizeBytes: 1 << 20}),
		},
		{
			name: "iperf3 tcp 128 streams of the default 128 KiB",
			in:   iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{ParallelStreams: 128}),
			want: iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{Duration: dur(2 * time.Second), ParallelStreams: 128}),
		},
		{
			name: "iperf3 udp 25 Gbit/s x 4",
			in:   iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{ParallelStreams: 4, UdpTargetBps: 25e9}),
			want: iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{Duration: dur(2 * time.Second), ParallelStreams: 4, UdpTargetBps: 25e9}),
		},
		{
			name: "qperf 2 sizes x 299s: 600s, as long as a server lives",
			in:   qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(299 * time.Second), MsgSizeBytes: sizes(2)}),
			want: qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(299 * time.Second), MsgSizeBytes: sizes(2)}),
		},
		{
			name: "qperf 32 sizes x 17s",
			in:   qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(17 * time.Second), MsgSizeBytes: sizes(32)}),
			want: qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(17 * time.Second), MsgSizeBytes: sizes(32)}),
		},
		{
			name: "http",
			in:   &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP},
			want: httpSpec(&measurev1.HttpParams{Timeout: dur(5 * time.Second)}),
		},
		{
			name: "http_load",
			in:   &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD},
			want: loadSpec(&measurev1.HttpLoadParams{Requests: 1000, Concurrency: 10, Timeout: dur(30 * time.Second)}),
		},
		{
			name: "http_load fewer requests than the default concurrency",
			in:   loadSpec(&measurev1.HttpLoadParams{Requests: 4, KeepAlive: true}),
			want: loadSpec(&measurev1.HttpLoadParams{Requests: 4, Concurrency: 4, KeepAlive: true, Timeout: dur(30 * time.Second)}),
		},
		{
			name: "http_load at the bounds",
			in:   loadSpec(&measurev1.HttpLoadParams{Requests: 1_000_000, Concurrency: 1000, Timeout: dur(300 * time.Second)}),
			want: loadSpec(&measurev1.HttpLoadParams{Requests: 1_000_000, Concurrency: 1000, Timeout: dur(300 * time.Second)}),
		},
		{
			name: "http fractional timeout",
			in:   httpSpec(&measurev1.HttpParams{Timeout: dur(250 * time.Millisecond)}),
			want: httpSpec(&measurev1.HttpParams{Timeout: dur(250 * time.Millisecond)}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := proto.Clone(tt.in)
			got, err := Normalize(tt.in)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("Normalize (-want +got):\n%s", diff)
			}
			if !proto.Equal(before, tt.in) {
				t.Errorf("Normalize modified its argument")
			}
			again, err := Normalize(got)
			if err != nil || !proto.Equal(again, got) {
				t.Errorf("Normalize(Normalize(x)) = %v, %v; want %v", again, err, got)
			}
		})
	}
}

func TestNormalizeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   *measurev1.TestSpec
		want string // the error after "invalid test spec: "
	}{
		{"nil", nil, "spec: missing"},
		{"unspecified test", &measurev1.TestSpec{}, "test: TEST_UNSPECIFIED is not a test"},
		{"unknown test", &measurev1.TestSpec{Test: 99}, "test: 99 is not a known test"},
		{"wrong params", &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{}}},
			"params: iperf3 params given for test qperf_tcp_lat, which takes qperf params"},
		{"ping params for http", &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP, Params: &measurev1.TestSpec_Ping{}},
			"params: ping params given for test http, which takes http params"},
		{"ping count", pingSpec(&measurev1.PingParams{Count: 1001}), "ping.count: 1001 is not in 1..1000"},
		{"ping interval small", pingSpec(&measurev1.PingParams{Interval: dur(time.Millisecond)}), "ping.interval: 0.001s is not in 0.002s..10s"},
		{"ping interval negative", pingSpec(&measurev1.PingParams{Interval: dur(-time.Second)}), "ping.interval: -1s is not in 0.002s..10s"},
		{"ping interval invalid", pingSpec(&measurev1.PingParams{Interval: &durationpb.Duration{Seconds: 1, Nanos: -5}}),
			"ping.interval: {seconds:1 nanos:-5} is not a valid duration"},
		{"ping payload small", pingSpec(&measurev1.PingParams{PayloadSizeBytes: 8}), "ping.payload_size_bytes: 8 is not in 16..65507 (ping times replies only from 16 bytes)"},
		{"ping payload large", pingSpec(&measurev1.PingParams{PayloadSizeBytes: 65508}), "ping.payload_size_bytes: 65508 is not in 16..65507 (ping times replies only from 16 bytes)"},
		{"ping too long", pingSpec(&measurev1.PingParams{Count: 1000, Interval: dur(time.Second)}), "ping: count 1000 x interval 1s = 1000s is longer than 300s"},
		{"qperf fractional", qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, &measurev1.QperfParams{Duration: dur(500 * time.Millisecond)}),
			"qperf.duration: 0.5s is not a whole number of seconds in 1..300"},
		{"qperf 1.5s", qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, &measurev1.QperfParams{Duration: dur(1500 * time.Millisecond)}),
			"qperf.duration: 1.5s is not a whole number of seconds in 1..300"},
		{"qperf too long", qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(301 * time.Second)}),
			"qperf.duration: 301s is not a whole number of seconds in 1..300"},
		{"qperf zero size", qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{MsgSizeBytes: []uint64{64, 0}}),
			"qperf.msg_size_bytes[1]: 0 is not in 1..67108864"},
		{"qperf huge size", qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{MsgSizeBytes: []uint64{64<<20 + 1}}),
			"qperf.msg_size_bytes[0]: 67108865 is not in 1..67108864"},
		{"qperf udp size", qperfSpec(measurev1.Test_TEST_QPERF_UDP_LAT, &measurev1.QperfParams{MsgSizeBytes: []uint64{70000}}),
			"qperf.msg_size_bytes[0]: 70000 is not in 1..65507"},
		{"qperf repeat", qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, &measurev1.QperfParams{MsgSizeBytes: []uint64{1, 64, 1}}),
			"qperf.msg_size_bytes[2]: 1 repeats msg_size_bytes[0]"},
		{"qperf too many sizes", qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, &measurev1.QperfParams{MsgSizeBytes: make([]uint64, 33)}),
			"qperf.msg_size_bytes: 33 sizes, at most 32"},
		{"iperf3 duration", iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{Duration: dur(2500 * time.Millisecond)}),
			"iperf3.duration: 2.5s is not a whole number of seconds in 1..300"},
		{"iperf3 streams", iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{ParallelStreams: 129}),
			"iperf3.parallel_streams: 129 is not in 1..128"},
		{"iperf3 tcp buffers", iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{ParallelStreams: 65, BlockSizeBytes: 1 << 20}),
			"iperf3.parallel_streams x iperf3.block_size_bytes: 65 x 1048576 = 68157440 bytes of buffers is above 67108864 (64 MiB, within the agent's memory)"},
		{"iperf3 tcp block", iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{BlockSizeBytes: 2 << 20}),
			"iperf3.block_size_bytes: 2097152 is not in 1..1048576 (iperf3's TCP limit)"},
		{"iperf3 udp block", iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{BlockSizeBytes: 8}),
			"iperf3.block_size_bytes: 8 is not in 16..65507 (iperf3's UDP limits)"},
		{"iperf3 bps on tcp", iperf3Spec(measurev1.Test_TEST_IPERF3_TCP, &measurev1.Iperf3Params{UdpTargetBps: 1000}),
			"iperf3.udp_target_bps: 1000 is set for iperf3_tcp, a TCP test"},
		{"iperf3 bps huge", iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{UdpTargetBps: 2e12}),
			"iperf3.udp_target_bps x iperf3.parallel_streams: 2000000000000 x 1 = 2000000000000 bit/s is above 100000000000 (100 Gbit/s; iperf3's -b applies to each stream)"},
		// -b is per stream: the load is udp_target_bps x parallel_streams.
		{"iperf3 udp load", iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{UdpTargetBps: 1e9, ParallelStreams: 128}),
			"iperf3.udp_target_bps x iperf3.parallel_streams: 1000000000 x 128 = 128000000000 bit/s is above 100000000000 (100 Gbit/s; iperf3's -b applies to each stream)"},
		{"iperf3 udp load default bps", iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{ParallelStreams: 101}),
			"iperf3.udp_target_bps x iperf3.parallel_streams: 1000000000 x 101 = 101000000000 bit/s is above 100000000000 (100 Gbit/s; iperf3's -b applies to each stream)"},
		{"iperf3 udp load one over", iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{UdpTargetBps: 25e9 + 1, ParallelStreams: 4}),
			"iperf3.udp_target_bps x iperf3.parallel_streams: 25000000001 x 4 = 100000000004 bit/s is above 100000000000 (100 Gbit/s; iperf3's -b applies to each stream)"},
		{"iperf3 udp load beyond 64 bits", iperf3Spec(measurev1.Test_TEST_IPERF3_UDP, &measurev1.Iperf3Params{UdpTargetBps: 1<<64 - 1, ParallelStreams: 128}),
			"iperf3.udp_target_bps x iperf3.parallel_streams: 18446744073709551615 x 128 = 2361183241434822606720 bit/s is above 100000000000 (100 Gbit/s; iperf3's -b applies to each stream)"},
		// A client that cannot finish while its server lives (10 minutes).
		{"qperf 32 sizes x 300s", qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(300 * time.Second), MsgSizeBytes: sizes(32)}),
			"qperf.msg_size_bytes x qperf.duration: 32 sizes x (300s + 1s) = 9632s expected, longer than the 600s a test may last (a test server lives at most 10 minutes)"},
		{"qperf 2 sizes x 300s", qperfSpec(measurev1.Test_TEST_QPERF_UDP_LAT, &measurev1.QperfParams{Duration: dur(300 * time.Second), MsgSizeBytes: sizes(2)}),
			"qperf.msg_size_bytes x qperf.duration: 2 sizes x (300s + 1s) = 602s expected, longer than the 600s a test may last (a test server lives at most 10 minutes)"},
		{"qperf 32 sizes x 20s", qperfSpec(measurev1.Test_TEST_QPERF_TCP_LAT, &measurev1.QperfParams{Duration: dur(20 * time.Second), MsgSizeBytes: sizes(32)}),
			"qperf.msg_size_bytes x qperf.duration: 32 sizes x (20s + 1s) = 672s expected, longer than the 600s a test may last (a test server lives at most 10 minutes)"},
		{"http short", httpSpec(&measurev1.HttpParams{Timeout: dur(50 * time.Millisecond)}), "http.timeout: 0.05s is not in 0.1s..60s"},
		{"http long", httpSpec(&measurev1.HttpParams{Timeout: dur(61 * time.Second)}), "http.timeout: 61s is not in 0.1s..60s"},
		{"http_load requests", loadSpec(&measurev1.HttpLoadParams{Requests: 1_000_001}), "http_load.requests: 1000001 is not in 1..1000000"},
		{"http_load concurrency", loadSpec(&measurev1.HttpLoadParams{Requests: 5000, Concurrency: 1001}), "http_load.concurrency: 1001 is not in 1..1000"},
		{"http_load concurrency above requests", loadSpec(&measurev1.HttpLoadParams{Requests: 5, Concurrency: 6}),
			"http_load.concurrency: 6 is above http_load.requests 5 (ab refuses more requests in flight than it makes)"},
		{"http_load fractional timeout", loadSpec(&measurev1.HttpLoadParams{Timeout: dur(1500 * time.Millisecond)}),
			"http_load.timeout: 1.5s is not a whole number of seconds in 1..300"},
		{"http_load long timeout", loadSpec(&measurev1.HttpLoadParams{Timeout: dur(301 * time.Second)}),
			"http_load.timeout: 301s is not a whole number of seconds in 1..300"},
		{"http params for http_load", &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_Http{}},
			"params: http params given for test http_load, which takes http_load params"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Normalize(tt.in)
			if err == nil {
				t.Fatalf("Normalize = %v, want error %q", got, tt.want)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if msg := strings.TrimPrefix(err.Error(), "invalid test spec: "); msg != tt.want {
				t.Errorf("error = %q, want %q", msg, tt.want)
			}
		})
	}
}

func TestExpectedDuration(t *testing.T) {
	tests := []struct {
		name string
		in   *measurev1.TestSpec
		want time.Duration
	}{
		{"ping", &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, 2 * time.Second},
		{"qperf 3 sizes", qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(time.Second), MsgSizeBytes: []uint64{1, 2, 3}}), 6 * time.Second},
		{"iperf3", &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_UDP}, 4 * time.Second},
		{"http", &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, 5 * time.Second},
		{"http_load", &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD}, 62 * time.Second},
		{"http_load short", loadSpec(&measurev1.HttpLoadParams{Timeout: dur(5 * time.Second)}), 12 * time.Second},
		{"http_load longest", loadSpec(&measurev1.HttpLoadParams{Timeout: dur(300 * time.Second)}), 332 * time.Second},
		{"qperf at the bound", qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(299 * time.Second), MsgSizeBytes: []uint64{1, 2}}), MaxExpectedDuration},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ExpectedDuration(tt.in)
			if err != nil || got != tt.want {
				t.Errorf("ExpectedDuration = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	if d, err := ExpectedDuration(qperfSpec(measurev1.Test_TEST_QPERF_TCP_BW, &measurev1.QperfParams{Duration: dur(300 * time.Second), MsgSizeBytes: sizes(32)})); !errors.Is(err, ErrInvalid) {
		t.Errorf("ExpectedDuration(32 sizes x 300s) = %v, %v; want ErrInvalid", d, err)
	}
	if _, err := ExpectedDuration(&measurev1.TestSpec{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("ExpectedDuration(unspecified) error = %v, want ErrInvalid", err)
	}
}
