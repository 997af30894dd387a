package runner

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

func normalized(t *testing.T, spec *measurev1.TestSpec) *measurev1.TestSpec {
	t.Helper()
	n, err := testspec.Normalize(spec)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCommands(t *testing.T) {
	tests := []struct {
		name string
		cmd  func(t *testing.T) proc.Command
		want string
	}{
		{"ping", func(t *testing.T) proc.Command {
			return pingCommand(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}), "10.0.0.2", "")
		}, "ping -n -c 5 -i 0.2 -s 56 -W 1 10.0.0.2"},
		{"ping netns", func(t *testing.T) proc.Command {
			return pingCommand(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{
				Count: 20, Interval: durationpb.New(2500 * time.Microsecond), PayloadSizeBytes: 1400,
			}}}), "fd00::2", "/proc/42/ns/net")
		}, "nsenter --net=/proc/42/ns/net -- ping -6 -n -c 20 -i 0.0025 -s 1400 -W 1 fd00::2"},
		{"qperf", func(t *testing.T) proc.Command {
			return qperfCommand(measurev1.Test_TEST_QPERF_UDP_BW, 3, 32768, "10.96.0.10", 19765, 19766, "")
		}, "qperf -lp 19765 -ip 19766 -t 3 -vv -oo msg_size:32768 10.96.0.10 udp_bw"},
		{"iperf3 tcp", func(t *testing.T) proc.Command {
			return iperf3Command(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP, Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{
				ParallelStreams: 4, BlockSizeBytes: 131072,
			}}}), "10.0.0.2", 5201, "")
		}, "iperf3 -c 10.0.0.2 -p 5201 -J -i 0 -t 2 -P 4 -l 131072 --connect-timeout 5000"},
		{"iperf3 tcp ipv6", func(t *testing.T) proc.Command {
			return iperf3Command(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP}), "fd00:10:96::12", 5201, "")
		}, "iperf3 -6 -c fd00:10:96::12 -p 5201 -J -i 0 -t 2 -P 1 --connect-timeout 5000"},
		{"qperf ipv6", func(t *testing.T) proc.Command {
			return qperfCommand(measurev1.Test_TEST_QPERF_TCP_LAT, 2, 64, "fd00:10:244:2::2", 19765, 19766, "")
		}, "qperf -lp 19765 -ip 19766 -t 2 -vv -oo msg_size:64 fd00:10:244:2::2 tcp_lat"},
		{"iperf3 udp", func(t *testing.T) proc.Command {
			return iperf3Command(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_UDP}), "10.0.0.2", 5201, "")
		}, "iperf3 -c 10.0.0.2 -p 5201 -J -i 0 -t 2 -P 1 -u -b 1000000000 --connect-timeout 5000"},
		{"curl", func(t *testing.T) proc.Command {
			return curlCommand(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}), "10.0.0.2", 8080, "")
		}, "curl -q -g -v -sS -o /dev/null --noproxy * --max-time 5 --connect-timeout 5 -w " + CurlWriteOut + " http://10.0.0.2:8080/"},
		{"curl ipv6", func(t *testing.T) proc.Command {
			return curlCommand(normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP, Params: &measurev1.TestSpec_Http{Http: &measurev1.HttpParams{
				Timeout: durationpb.New(250 * time.Millisecond),
			}}}), "fd00::2", 8080, "")
		}, "curl -q -g -v -sS -o /dev/null --noproxy * --max-time 0.25 --connect-timeout 0.25 -w " + CurlWriteOut + " http://[fd00::2]:8080/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cmd(t).String(); got != tt.want {
				t.Errorf("argv:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestServerCommand(t *testing.T) {
	tests := []struct {
		name     string
		tool     measurev1.Tool
		port     uint32
		dataPort uint32
		netns    string
		want     string
		wantErr  error
	}{
		{"qperf", measurev1.Tool_TOOL_QPERF, 19765, 19766, "", "qperf -lp 19765", nil},
		{"qperf netns", measurev1.Tool_TOOL_QPERF, 19765, 19766, "/run/netns/x", "nsenter --net=/run/netns/x -- qperf -lp 19765", nil},
		{"qperf without data port", measurev1.Tool_TOOL_QPERF, 19765, 0, "", "", ErrBadPort},
		{"qperf same ports", measurev1.Tool_TOOL_QPERF, 19765, 19765, "", "", ErrBadPort},
		{"iperf3", measurev1.Tool_TOOL_IPERF3, 5201, 0, "", "iperf3 -s -p 5201 -1 --idle-timeout 60", nil},
		{"port 0", measurev1.Tool_TOOL_IPERF3, 0, 0, "", "", ErrBadPort},
		{"port too big", measurev1.Tool_TOOL_IPERF3, 70000, 0, "", "", ErrBadPort},
		{"ping", measurev1.Tool_TOOL_PING, 5201, 0, "", "", ErrNoServer},
		{"curl", measurev1.Tool_TOOL_CURL, 5201, 0, "", "", ErrNoServer},
		{"unspecified", measurev1.Tool_TOOL_UNSPECIFIED, 5201, 0, "", "", ErrNoServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := ServerCommand(tt.tool, tt.port, tt.dataPort, tt.netns)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
			if err == nil && cmd.String() != tt.want {
				t.Errorf("argv = %q, want %q", cmd.String(), tt.want)
			}
		})
	}
}

// fakeRunner is a Runner whose tool detection is canned.
func fakeRunner(cfg Config, infos ...*measurev1.ToolInfo) *Runner {
	r := New(cfg)
	r.detect = func(context.Context) []*measurev1.ToolInfo { return infos }
	return r
}

func TestRunRefusesBeforeRunning(t *testing.T) {
	missing := &measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_QPERF, Error: "not found in PATH"}
	qperf2 := &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_BW, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{64, 128}}}}
	tests := []struct {
		name        string
		req         *agentv1.RunClient
		wantStatus  []measurev1.Status
		wantMessage string
	}{
		{"nil request", nil, []measurev1.Status{measurev1.Status_STATUS_INVALID}, "spec: missing"},
		{"bad spec", &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP, Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{ParallelStreams: 500}}},
			Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1", Port: 5201},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID}, "iperf3.parallel_streams: 500 is not in 1..128"},
		{"bad target", &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Network: measurev1.Network_NETWORK_HOST, TargetIp: "node-1"},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID}, `target_ip: "node-1" is not an IP address`},
		{"no pod namespace", &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Network: measurev1.Network_NETWORK_POD, TargetIp: "127.0.0.1"},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID}, "network: NETWORK_POD has no namespace on this agent"},
		{"unspecified network", &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, TargetIp: "127.0.0.1"},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID}, "network: NETWORK_UNSPECIFIED has no namespace"},
		{"no port", &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP}, Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1"},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID}, "port: 0 is not a port"},
		{"no data port", &agentv1.RunClient{Spec: qperf2, Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1", Port: 19765},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID, measurev1.Status_STATUS_INVALID}, "data_port: 0 is not a port"},
		{"family not the target's", &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, Network: measurev1.Network_NETWORK_HOST,
			TargetIp: "127.0.0.1", IpFamily: measurev1.IPFamily_IP_FAMILY_IPV6},
			[]measurev1.Status{measurev1.Status_STATUS_INVALID}, "ip_family: IP_FAMILY_IPV6, but target_ip 127.0.0.1 is IP_FAMILY_IPV4"},
		{"qperf missing", &agentv1.RunClient{Spec: qperf2, Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1", Port: 19765, DataPort: 19766},
			[]measurev1.Status{measurev1.Status_STATUS_TOOL_MISSING, measurev1.Status_STATUS_TOOL_MISSING}, "qperf: not found in PATH"},
	}
	r := fakeRunner(Config{}, missing)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := r.Run(ctx, tt.req)
			var statuses []measurev1.Status
			for _, res := range got {
				statuses = append(statuses, res.GetStatus())
				if !strings.Contains(res.GetMessage(), tt.wantMessage) {
					t.Errorf("message %q does not contain %q", res.GetMessage(), tt.wantMessage)
				}
				if res.GetStartTime() == nil || res.GetElapsed() == nil {
					t.Errorf("start_time or elapsed not set: %v", res)
				}
			}
			if diff := cmp.Diff(tt.wantStatus, statuses); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			checkResults(t, tt.req.GetSpec(), got)
		})
	}
}

func TestRunEndedContext(t *testing.T) {
	r := fakeRunner(Config{})
	req := &agentv1.RunClient{
		Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{MsgSizeBytes: []uint64{1, 2}}}},
		Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1", Port: 1, DataPort: 2,
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	tests := []struct {
		name string
		ctx  context.Context
		want measurev1.Status
	}{
		{"canceled", canceled, measurev1.Status_STATUS_CANCELED},
		{"deadline", expired, measurev1.Status_STATUS_TIMEOUT},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.Run(tt.ctx, req)
			if len(got) != 2 {
				t.Fatalf("%d results, want 2", len(got))
			}
			for i, res := range got {
				if res.GetStatus() != tt.want || res.GetIndex() != uint32(i) || res.GetSpec().GetQperf().GetMsgSizeBytes()[0] != uint64(i+1) {
					t.Errorf("result %d = %v", i, res)
				}
			}
			checkResults(t, req.GetSpec(), got)
		})
	}
}

func TestToolsDetectedOnce(t *testing.T) {
	calls := 0
	r := New(Config{})
	r.detect = func(context.Context) []*measurev1.ToolInfo {
		calls++
		return []*measurev1.ToolInfo{{Tool: measurev1.Tool_TOOL_PING, Version: "ping from iputils 20221126"}}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	r.Tools(canceled) // cut short: not kept
	ctx, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	first := r.Tools(ctx)
	first[0].Version = "changed by the caller"
	second := r.Tools(ctx)
	if calls != 2 {
		t.Errorf("detect called %d times, want 2", calls)
	}
	if len(second) != 1 || second[0].GetVersion() != "ping from iputils 20221126" {
		t.Errorf("Tools = %v", second)
	}
}

func TestOneLine(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"  a\n\n b\tc  \r\n", "a; b c"},
		{"bad \xff utf8\x00\x1b[31m", "bad ? utf8[31m"},
		{strings.Repeat("é", 400), strings.Repeat("é", 254) + "..."},
	}
	for _, tt := range tests {
		if got := oneLine(tt.in); got != tt.want {
			t.Errorf("oneLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestVersionLine(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"iperf 3.12 (cJSON 1.7.15)\nLinux vm 6.18\n", "iperf 3.12"},
		{"curl 7.88.1 (x86_64-pc-linux-gnu) libcurl/7.88.1\nRelease-Date: 2023-02-20\n", "curl 7.88.1"},
		{"ping from iputils 20221126\nlibcap: yes\n", "ping from iputils 20221126"},
		{"\nqperf 0.4.11\n", "qperf 0.4.11"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := versionLine([]byte(tt.in)); got != tt.want {
			t.Errorf("versionLine(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestProbeStatus(t *testing.T) {
	tests := []struct {
		err  error
		want measurev1.Status
	}{
		{nil, measurev1.Status_STATUS_OK},
		{context.DeadlineExceeded, measurev1.Status_STATUS_TIMEOUT},
		{errors.New("something else"), measurev1.Status_STATUS_UNSPECIFIED},
	}
	for _, tt := range tests {
		if got := probeStatus(tt.err); got != tt.want {
			t.Errorf("probeStatus(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
