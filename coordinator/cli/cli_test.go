package cli

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func TestTriggerFlagsSpec(t *testing.T) {
	tests := []struct {
		name    string
		flags   triggerFlags
		want    string // prototext of the RunSpec, spaces collapsed
		wantErr string
	}{
		{"defaults", triggerFlags{repeats: 1},
			`tests:{test:TEST_PING} tests:{test:TEST_QPERF_TCP_LAT} tests:{test:TEST_QPERF_TCP_BW} tests:{test:TEST_IPERF3_TCP} tests:{test:TEST_HTTP} repeats:1`, ""},
		{"params reach their tools", triggerFlags{tests: []string{"ping,qperf_tcp_lat", "iperf3_udp"}, duration: 3 * time.Second, pingCount: 7,
			msgSizes: []string{"64,1K"}, streams: []string{"2"}, paths: []string{"pod-pod"}, pairs: []string{"node-1:node-2"}, label: "vxlan", maxHeavy: 2},
			`tests:{test:TEST_PING ping:{count:7}} tests:{test:TEST_QPERF_TCP_LAT qperf:{duration:{seconds:3} msg_size_bytes:64 msg_size_bytes:1024}} tests:{test:TEST_IPERF3_UDP iperf3:{duration:{seconds:3} parallel_streams:2}} paths:PATH_POD_TO_POD pairs:{src_node:"node-1" dst_node:"node-2"} max_concurrent_heavy:2 label:"vxlan"`, ""},
		{"sweeps", triggerFlags{tests: []string{"qperf_tcp_bw,iperf3_tcp"}, sweep: true, streams: []string{"1,4"}, blockSizes: []string{"128K"}},
			`tests:{test:TEST_QPERF_TCP_BW qperf:{msg_size_bytes:64 msg_size_bytes:128 msg_size_bytes:256 msg_size_bytes:512 msg_size_bytes:1024 msg_size_bytes:2048 msg_size_bytes:4096 msg_size_bytes:8192 msg_size_bytes:16384 msg_size_bytes:32768 msg_size_bytes:65536}} tests:{test:TEST_IPERF3_TCP iperf3:{parallel_streams:1 block_size_bytes:131072}} tests:{test:TEST_IPERF3_TCP iperf3:{parallel_streams:4 block_size_bytes:131072}}`, ""},
		{"external targets", triggerFlags{tests: []string{"ping,http"}, paths: []string{"host-external,pod-external"}, external: []string{"lb, peer", "ingress"}},
			`tests:{test:TEST_PING} tests:{test:TEST_HTTP} paths:PATH_HOST_TO_EXTERNAL paths:PATH_POD_TO_EXTERNAL external_targets:"lb" external_targets:"peer" external_targets:"ingress"`, ""},
		{"http_load params", triggerFlags{tests: []string{"http_load"}, loadRequests: 90000, loadConcurrency: 50, keepAlive: true, loadTimeout: 60 * time.Second},
			`tests:{test:TEST_HTTP_LOAD http_load:{requests:90000 concurrency:50 keep_alive:true timeout:{seconds:60}}}`, ""},
		{"http_load defaults", triggerFlags{tests: []string{"http_load"}}, `tests:{test:TEST_HTTP_LOAD}`, ""},
		{"sweep and sizes", triggerFlags{tests: []string{"qperf_tcp_bw"}, sweep: true, msgSizes: []string{"64"}}, "", "--sweep and --msg-sizes"},
		{"bad streams", triggerFlags{tests: []string{"iperf3_tcp"}, streams: []string{"0"}}, "", `--streams: "0" is not a positive count`},
		{"unknown test", triggerFlags{tests: []string{"nping"}}, "", `--tests`},
		{"unknown path", triggerFlags{paths: []string{"pod-moon"}}, "", `--paths`},
		{"bad pair", triggerFlags{pairs: []string{"node-1"}}, "", `--pair "node-1": want SRC:DST`},
		{"bad size", triggerFlags{msgSizes: []string{"64x"}}, "", `--msg-sizes: "64x" is not a positive count`},
		// Checked where the config file's schedules are (config.BuildRunSpec), not first by the coordinator.
		{"ping count out of range", triggerFlags{tests: []string{"http,ping"}, pingCount: 1 << 20}, "", `--tests ping: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := tt.flags.spec()
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

func TestResultsFlagsRequest(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		flags   resultsFlags
		check   func(t *testing.T, req *meshv1.ListResultsRequest)
		wantErr string
	}{
		{"since a duration ago and until a time", resultsFlags{src: "node-1", test: "iperf3_tcp", path: "host-pod", since: "90m", until: "2026-11-30T11:59:00Z"}, nil, ""},
		{"bad test", resultsFlags{test: "iperf2"}, nil, "--test"},
		{"bad since", resultsFlags{since: "yesterday"}, nil, `--since: "yesterday" is neither a duration`},
		{"negative duration", resultsFlags{until: "-1h"}, nil, "must not be negative"},
		{"negative limit", resultsFlags{limit: -1}, nil, "--limit -1"},
		{"one family", resultsFlags{src: "node-1", test: "iperf3_tcp", path: "host-pod", since: "90m", until: "2026-11-30T11:59:00Z", family: "ipv6"},
			func(t *testing.T, req *meshv1.ListResultsRequest) {
				if req.GetIpFamily() != measurev1.IPFamily_IP_FAMILY_IPV6 {
					t.Errorf("ip_family %v, want IPv6", req.GetIpFamily())
				}
			}, ""},
		{"dual is no filter", resultsFlags{family: "dual"}, nil, "--ip-family"},
		{"bad family", resultsFlags{family: "ipv5"}, nil, `--ip-family "ipv5"`},
		{"on-demand runs' results", resultsFlags{src: "node-1", test: "iperf3_tcp", path: "host-pod", since: "90m", until: "2026-11-30T11:59:00Z", origin: "client"},
			func(t *testing.T, req *meshv1.ListResultsRequest) {
				if req.GetOrigin() != measurev1.RunOrigin_RUN_ORIGIN_CLIENT {
					t.Errorf("origin %v, want RUN_ORIGIN_CLIENT", req.GetOrigin())
				}
			}, ""},
		{"bad origin", resultsFlags{origin: "monitor-light"}, nil, `--origin: invalid test spec: unknown run origin "monitor-light"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := tt.flags.request(now)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.GetSrcNode() != "node-1" || req.GetTest() != measurev1.Test_TEST_IPERF3_TCP || req.GetPath() != measurev1.Path_PATH_HOST_TO_POD {
				t.Errorf("request %v", req)
			}
			if got, want := req.GetStartTime().AsTime(), now.Add(-90*time.Minute); !got.Equal(want) {
				t.Errorf("start %v, want %v", got, want)
			}
			if got, want := req.GetEndTime().AsTime(), now.Add(-time.Minute); !got.Equal(want) {
				t.Errorf("end %v, want %v", got, want)
			}
			if tt.check != nil {
				tt.check(t, req)
			} else if req.GetIpFamily() != measurev1.IPFamily_IP_FAMILY_UNSPECIFIED || req.GetOrigin() != measurev1.RunOrigin_RUN_ORIGIN_UNSPECIFIED {
				t.Errorf("ip_family %v, origin %v without --ip-family and --origin", req.GetIpFamily(), req.GetOrigin())
			}
		})
	}
}

func TestBadOutputFormat(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"yaml", []string{"agents", "-o", "yaml"}, `--output "yaml"`},
		{"plot writes a file only", []string{"plot", "01ARUN", "--out", "x.png", "-o", "json"}, `--output "json": plot writes the --out file only`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs(append(tt.args, "--coordinator", "unix:///nonexistent.sock"))
			if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTriggerFlagsNotSilentlyIgnored(t *testing.T) {
	tests := []struct {
		name    string
		flags   triggerFlags
		wantErr string
	}{
		{"msg sizes without qperf", triggerFlags{tests: []string{"ping"}, msgSizes: []string{"64"}}, "--msg-sizes is set but no chosen test uses it"},
		{"streams without iperf3", triggerFlags{tests: []string{"qperf_tcp_bw"}, streams: []string{"4"}}, "--streams is set"},
		{"ping count without ping", triggerFlags{tests: []string{"http"}, pingCount: 3}, "--ping-count is set"},
		{"duration without qperf or iperf3", triggerFlags{tests: []string{"ping"}, duration: time.Second}, "--duration is set"},
		{"fractional duration", triggerFlags{duration: 1500 * time.Millisecond}, "--duration 1.5s: qperf and iperf3 take whole seconds"},
		{"requests without http_load", triggerFlags{tests: []string{"http"}, loadRequests: 100}, "--requests is set but no chosen test uses it"},
		{"keep-alive without http_load", triggerFlags{tests: []string{"ping"}, keepAlive: true}, "--keep-alive is set"},
		{"fractional load timeout", triggerFlags{tests: []string{"http_load"}, loadTimeout: 1500 * time.Millisecond}, "--load-timeout 1.5s: ab takes whole seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.flags.spec()
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestResultsCSVPingColumns(t *testing.T) {
	pingSpec := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	results := []*measurev1.Result{
		{RunId: "r1", Spec: pingSpec, Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
			RttMinSeconds: 36e-6, RttAvgSeconds: 43e-6, RttMaxSeconds: 50e-6, RttMedianSeconds: proto.Float64(40e-6), LossRatio: 0.2}}},
		// An older agent's result: no median; value falls back to the average.
		{RunId: "r1", Spec: pingSpec, Status: measurev1.Status_STATUS_OK, Metrics: &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{
			RttMinSeconds: 36e-6, RttAvgSeconds: 43e-6, RttMaxSeconds: 50e-6}}},
		{RunId: "r1", Spec: pingSpec, Status: measurev1.Status_STATUS_UNREACHABLE, Message: "0/5 echo replies"},
		{RunId: "r1", Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_Http{Http: &measurev1.HttpMetrics{TotalSeconds: 0.001}}},
		{RunId: "r1", Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD}, Status: measurev1.Status_STATUS_OK,
			Metrics: &measurev1.Result_HttpLoad{HttpLoad: &measurev1.HttpLoadMetrics{Requests: 1000, SuccessfulRequests: 990, FailedRequests: 10,
				RequestsPerSecond: 1427.5, LatencyP50Seconds: 0.007, LatencyP99Seconds: 0.017}}},
	}
	var out bytes.Buffer
	if err := printResultsCSV(&options{stdout: &out}, results); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	want := []map[string]string{
		{"value": "4e-05", "rtt_min_seconds": "3.6e-05", "rtt_median_seconds": "4e-05", "rtt_max_seconds": "5e-05", "loss_ratio": "0.2"},
		{"value": "4.3e-05", "rtt_min_seconds": "3.6e-05", "rtt_median_seconds": "", "rtt_max_seconds": "5e-05", "loss_ratio": "0"},
		{"value": "", "rtt_min_seconds": "", "rtt_median_seconds": "", "rtt_max_seconds": "", "loss_ratio": ""},
		{"value": "0.001", "rtt_min_seconds": "", "rtt_median_seconds": "", "rtt_max_seconds": "", "loss_ratio": "", "requests_per_second": ""},
		{"value": "0.007", "unit": "s", "rtt_min_seconds": "", "requests_per_second": "1427.5", "latency_p50_seconds": "0.007",
			"latency_p99_seconds": "0.017", "failed_requests": "10"},
	}
	if len(rows) != len(want)+1 {
		t.Fatalf("%d rows, want %d and a header", len(rows)-1, len(want))
	}
	for i, w := range want {
		for name, v := range w {
			j, ok := col[name]
			if !ok {
				t.Fatalf("no %s column in %v", name, rows[0])
			}
			if got := rows[i+1][j]; got != v {
				t.Errorf("row %d %s = %q, want %q", i, name, got, v)
			}
		}
	}
}
