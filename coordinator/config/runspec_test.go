package config

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
)

// allNames names every field, indexed.
var allNames = Names{Indexed: true, Key: map[Field]string{
	FieldTests: "tests", FieldPaths: "paths", FieldPairs: "pairs", FieldIPFamily: "ip_family", FieldDuration: "duration",
	FieldPingCount: "ping_count", FieldMsgSizes: "msg_sizes", FieldSweep: "sweep", FieldStreams: "streams",
	FieldBlockSizes: "block_sizes", FieldRequests: "requests", FieldConcurrency: "concurrency",
	FieldKeepAlive: "keep_alive", FieldLoadTimeout: "load_timeout",
}}

// TestBuildRunSpec: the builder both the CLI and the schedules use; with
// indexed keys and not strict, as the file uses it.
func TestBuildRunSpec(t *testing.T) {
	sweep := "msg_size_bytes:64 msg_size_bytes:128 msg_size_bytes:256 msg_size_bytes:512 msg_size_bytes:1024 msg_size_bytes:2048 " +
		"msg_size_bytes:4096 msg_size_bytes:8192 msg_size_bytes:16384 msg_size_bytes:32768 msg_size_bytes:65536"
	tests := []struct {
		name    string
		in      RunInput
		want    string
		wantErr string
	}{
		{"defaults", RunInput{},
			`tests:{test:TEST_PING} tests:{test:TEST_QPERF_TCP_LAT} tests:{test:TEST_QPERF_TCP_BW} tests:{test:TEST_IPERF3_TCP} tests:{test:TEST_HTTP}`, ""},
		{"sweep reaches qperf only", RunInput{Tests: []string{"ping", "qperf_tcp_bw"}, Sweep: true, Label: "monitor-bandwidth"},
			`tests:{test:TEST_PING} tests:{test:TEST_QPERF_TCP_BW qperf:{` + sweep + `}} label:"monitor-bandwidth"`, ""},
		{"duration reaches qperf and iperf3", RunInput{Tests: []string{"qperf_tcp_lat", "iperf3_tcp", "ping"}, Duration: time.Second, Repeats: 2},
			`tests:{test:TEST_QPERF_TCP_LAT qperf:{duration:{seconds:1}}} tests:{test:TEST_IPERF3_TCP iperf3:{duration:{seconds:1}}} tests:{test:TEST_PING} repeats:2`, ""},
		{"unused duration ignored when not strict", RunInput{Tests: []string{"ping"}, Duration: 1500 * time.Millisecond}, `tests:{test:TEST_PING}`, ""},
		{"families", RunInput{Tests: []string{"ping"}, IPFamily: "dual"}, `tests:{test:TEST_PING} ip_families:IP_FAMILY_IPV4 ip_families:IP_FAMILY_IPV6`, ""},
		{"sizes with suffixes", RunInput{Tests: []string{"qperf_tcp_bw"}, MsgSizes: []string{"64", "1k", "2KiB", "1M"}},
			`tests:{test:TEST_QPERF_TCP_BW qperf:{msg_size_bytes:64 msg_size_bytes:1024 msg_size_bytes:2048 msg_size_bytes:1048576}}`, ""},
		{"iperf3 sweep", RunInput{Tests: []string{"iperf3_tcp"}, Streams: []string{"1", "2"}, BlockSizes: []string{"8K"}},
			`tests:{test:TEST_IPERF3_TCP iperf3:{parallel_streams:1 block_size_bytes:8192}} tests:{test:TEST_IPERF3_TCP iperf3:{parallel_streams:2 block_size_bytes:8192}}`, ""},
		{"unknown test names its index", RunInput{Tests: []string{"ping", "iperf2"}}, "", "tests[1]: "},
		{"unknown path names its index", RunInput{Tests: []string{"ping"}, Paths: []string{"host-host", "pod-moon"}}, "", "paths[1]: "},
		{"fractional duration refused by the test", RunInput{Tests: []string{"ping", "iperf3_tcp"}, Duration: 1500 * time.Millisecond}, "", "tests[1] iperf3_tcp: "},
		{"ping count out of range", RunInput{Tests: []string{"ping"}, PingCount: 1 << 20}, "", "tests[0] ping: "},
		{"sweep and sizes", RunInput{Tests: []string{"qperf_tcp_bw"}, Sweep: true, MsgSizes: []string{"64"}}, "", "sweep and msg_sizes both choose"},
		{"zero size", RunInput{Tests: []string{"qperf_tcp_bw"}, MsgSizes: []string{"64", "0"}}, "", `msg_sizes[1]: "0" is not a positive count`},
		{"size overflow", RunInput{Tests: []string{"qperf_tcp_bw"}, MsgSizes: []string{"4294967296"}}, "", `"4294967296" is not a positive count`},
		{"bad family", RunInput{IPFamily: "ipv5"}, "", `ip_family: IP family "ipv5"`},
		{"bad pair", RunInput{Tests: []string{"ping"}, Pairs: []string{"a:b", "a:"}}, "", `pairs[1] "a:": want SRC:DST`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := BuildRunSpec(tt.in, allNames)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := testutil.ProtoText(spec); got != tt.want {
				t.Errorf("spec\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestBuildRunSpecStrict: strict, a parameter no chosen test uses and a
// fractional duration are refused by the field's name, before any test.
func TestBuildRunSpecStrict(t *testing.T) {
	names := Names{Key: map[Field]string{FieldDuration: "--duration", FieldSweep: "--sweep", FieldLoadTimeout: "--load-timeout", FieldKeepAlive: "--keep-alive"}}
	if got := names.key(FieldTests); got != "field 0" {
		t.Errorf("an unnamed field is %q, want its number", got)
	}
	for _, tt := range []struct {
		name    string
		in      RunInput
		wantErr string
	}{
		{"sweep without qperf", RunInput{Tests: []string{"ping", "iperf3_tcp"}, Sweep: true}, "--sweep is set but no chosen test uses it (tests: ping,iperf3_tcp)"},
		{"duration without qperf or iperf3", RunInput{Tests: []string{"http"}, Duration: time.Second}, "--duration is set"},
		{"keep-alive without http_load", RunInput{Tests: []string{"http"}, KeepAlive: true}, "--keep-alive is set"},
		{"fractional duration", RunInput{Tests: []string{"iperf3_tcp"}, Duration: 1500 * time.Millisecond}, "--duration 1.5s: qperf and iperf3 take whole seconds"},
		{"negative load timeout", RunInput{Tests: []string{"http_load"}, LoadTimeout: -time.Second}, "--load-timeout -1s: ab takes whole seconds"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Strict = true
			if _, err := BuildRunSpec(tt.in, names); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
			tt.in.Strict = false // the same input, not strict: accepted or refused by the test it reaches
			if _, err := BuildRunSpec(tt.in, names); err != nil && strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("not strict: %v", err)
			}
		})
	}
}

// TestScheduleAndFlagsShareTheSweep: the schedule's sweep and the builder's
// are one list (the copy the schedules had is gone).
func TestScheduleAndFlagsShareTheSweep(t *testing.T) {
	s, err := Parse([]byte("monitor: {bandwidth: {interval: 6h, tests: [qperf_tcp_bw], sweep: true}}"))
	if err != nil {
		t.Fatal(err)
	}
	spec, err := BuildRunSpec(RunInput{Tests: []string{"qperf_tcp_bw"}, Sweep: true}, Names{})
	if err != nil {
		t.Fatal(err)
	}
	got, want := s.Plans[0].Spec.GetTests()[0].GetQperf().GetMsgSizeBytes(), spec.GetTests()[0].GetQperf().GetMsgSizeBytes()
	if !slices.Equal(got, want) || len(got) != 11 || got[0] != 64 || got[10] != 64<<10 {
		t.Errorf("schedule sweep %v, builder sweep %v; want 64 B .. 64 KiB, doubling", got, want)
	}
	if _, err := Parse([]byte("monitor: {bandwidth: {interval: 6h, tests: [qperf_tcp_bw], sweep: true, msg_sizes: [64]}}")); !errors.Is(err, ErrConfig) {
		t.Errorf("msg_sizes is no key of the file: %v", err)
	}
}
