package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshperf/meshperf/agent/proc"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

const qperfLatBlock = `tcp_lat:
    latency          =    12.5 us
    msg_rate         =      80 K/sec
    msg_size         =       1 bytes
    time             =       1 sec
    loc_real_time    =       1 sec
`

// TestRunQperfConnectFailure runs qperf through Runner.Run with canned
// output and a canned TCP probe: a result that is not OK never carries
// metrics, and its message is never empty nor starts with punctuation.
func TestRunQperfConnectFailure(t *testing.T) {
	tests := []struct {
		name        string
		target      string
		stdout      string
		stderr      string
		exit        int
		probe       error
		want        measurev1.Status
		wantMessage string // prefix of the message; "" for OK
	}{
		// qperf printed its block and "failed to connect" (for another
		// size of a loop): the block stands, the probe does not run.
		{"block and failed to connect", "127.0.0.1", qperfLatBlock, "127.0.0.1: failed to connect\n", 0,
			syscall.ECONNREFUSED, measurev1.Status_STATUS_OK, ""},
		{"failed to connect, refused", "127.0.0.1", "", "127.0.0.1: failed to connect\n", 1,
			syscall.ECONNREFUSED, measurev1.Status_STATUS_REFUSED,
			"127.0.0.1: failed to connect; a TCP connect to 127.0.0.1:19765 from the same network: connection refused"},
		{"IPv6 failed to connect, port open afterwards", "::1", "", "::1: failed to connect\n", 1,
			nil, measurev1.Status_STATUS_TOOL_ERROR,
			"qperf: ::1: failed to connect; yet a TCP connect to [::1]:19765 from the same network succeeded afterwards"},
		{"failed to connect, inconclusive probe", "127.0.0.1", "", "127.0.0.1: failed to connect\n", 1,
			errors.New("no idea"), measurev1.Status_STATUS_UNREACHABLE,
			"127.0.0.1: failed to connect; a TCP connect to 127.0.0.1:19765 was inconclusive: no idea"},
		{"block of 0 ns and failed to connect", "127.0.0.1", strings.Replace(qperfLatBlock, "12.5 us", "0 ns", 1),
			"127.0.0.1: failed to connect\n", 0, syscall.ECONNREFUSED, measurev1.Status_STATUS_TOOL_ERROR,
			"qperf tcp_lat reported a latency of 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fakeRunner(Config{}, &measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_QPERF, Version: "qperf 0.4.11"})
			r.exec = func(context.Context, proc.Command) (proc.Output, error) {
				return proc.Output{Stdout: []byte(tt.stdout), Stderr: []byte(tt.stderr), ExitCode: tt.exit}, nil
			}
			probed := false
			r.probe = func(context.Context, string, string) error { probed = true; return tt.probe }
			req := &agentv1.RunClient{
				Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT},
				Network: measurev1.Network_NETWORK_HOST, TargetIp: tt.target, Port: 19765, DataPort: 19766,
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			got := r.Run(ctx, req)
			checkResults(t, req.GetSpec(), got)
			if len(got) != 1 {
				t.Fatalf("%d results", len(got))
			}
			res := got[0]
			if res.GetStatus() != tt.want || !strings.HasPrefix(res.GetMessage(), tt.wantMessage) {
				t.Errorf("status %v, message %q; want %v, %q...", res.GetStatus(), res.GetMessage(), tt.want, tt.wantMessage)
			}
			if tt.want == measurev1.Status_STATUS_OK && (probed || res.GetQperf().GetLatencySeconds() != 12.5e-6) {
				t.Errorf("probed %v, metrics %v", probed, res.GetQperf())
			}
		})
	}
}

func TestFinish(t *testing.T) {
	ping := &measurev1.Result_Ping{Ping: &measurev1.PingMetrics{RttAvgSeconds: 1}}
	tests := []struct {
		name        string
		in          *measurev1.Result
		wantStatus  measurev1.Status
		wantMessage string
		wantMetrics bool
	}{
		{"ok kept", &measurev1.Result{Status: measurev1.Status_STATUS_OK, Metrics: ping}, measurev1.Status_STATUS_OK, "", true},
		{"failure loses its metrics", &measurev1.Result{Status: measurev1.Status_STATUS_REFUSED, Message: "refused", Metrics: ping},
			measurev1.Status_STATUS_REFUSED, "refused", false},
		{"empty message", &measurev1.Result{Status: measurev1.Status_STATUS_TIMEOUT}, measurev1.Status_STATUS_TIMEOUT, "timeout", false},
		{"separator first", &measurev1.Result{Status: measurev1.Status_STATUS_REFUSED, Message: "; , a TCP connect"},
			measurev1.Status_STATUS_REFUSED, "a TCP connect", false},
		{"only separators", &measurev1.Result{Status: measurev1.Status_STATUS_REFUSED, Message: " ;\n; "},
			measurev1.Status_STATUS_REFUSED, "refused", false},
		{"punctuation first", &measurev1.Result{Status: measurev1.Status_STATUS_UNREACHABLE, Message: "::1: failed to connect"},
			measurev1.Status_STATUS_UNREACHABLE, "ping: ::1: failed to connect", false},
		{"symbol first", &measurev1.Result{Status: measurev1.Status_STATUS_TOOL_ERROR, Message: "* connect to x failed"},
			measurev1.Status_STATUS_TOOL_ERROR, "ping: * connect to x failed", false},
		{"no status", &measurev1.Result{Message: "x"}, measurev1.Status_STATUS_TOOL_ERROR, "internal error: no status set; x", false},
		{"ok without metrics", &measurev1.Result{Status: measurev1.Status_STATUS_OK}, measurev1.Status_STATUS_TOOL_ERROR,
			"internal error: ok without metrics", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			finish("ping", tt.in)
			if tt.in.GetStatus() != tt.wantStatus || tt.in.GetMessage() != tt.wantMessage || (tt.in.Metrics != nil) != tt.wantMetrics {
				t.Errorf("finish = %v %q metrics %v; want %v %q metrics %v", tt.in.GetStatus(), tt.in.GetMessage(), tt.in.Metrics != nil,
					tt.wantStatus, tt.wantMessage, tt.wantMetrics)
			}
		})
	}
}

func TestPingRules(t *testing.T) {
	summary := func(tx, rx int) string {
		return fmt.Sprintf("%d packets transmitted, %d received, 0%% packet loss, time 814ms\n", tx, rx)
	}
	rtt := func(figs string) string { return "rtt min/avg/max/mdev = " + figs + " ms\n" }
	// replies prints one echo reply line per time (ms, as ping prints it).
	replies := func(times ...string) string {
		var b strings.Builder
		for i, tm := range times {
			fmt.Fprintf(&b, "64 bytes from 127.0.0.1: icmp_seq=%d ttl=64 time=%s ms\n", i+1, tm)
		}
		return b.String()
	}
	five := replies("0.040", "0.050", "0.050", "0.036", "0.039")
	tests := []struct {
		name    string
		stdout  string
		count   uint32
		want    measurev1.Status
		wantMsg string
	}{
		{"ok", five + summary(5, 5) + rtt("0.036/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_OK, ""},
		{"all equal", replies("0.036") + summary(1, 1) + rtt("0.036/0.036/0.036/0.000"), 5, measurev1.Status_STATUS_OK, ""},
		{"min above avg", summary(5, 5) + rtt("0.050/0.043/0.036/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR, "rtt min 0.050 ms is above avg 0.043 ms"},
		{"avg above max", summary(5, 5) + rtt("0.036/0.060/0.050/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR, "rtt avg 0.060 ms is above max 0.050 ms"},
		{"mdev above max", summary(5, 5) + rtt("0.036/0.043/0.050/0.051"), 5, measurev1.Status_STATUS_PARSE_ERROR, "rtt mdev 0.051 ms is above max 0.050 ms"},
		{"negative mdev", summary(5, 5) + rtt("0.036/0.043/0.050/-0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR, "rtt mdev -0.005 ms is negative"},
		{"negative min", summary(5, 5) + rtt("-0.036/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR, "rtt min -0.036 ms is negative"},
		{"300 digits", summary(5, 5) + rtt("0.036/0.043/"+strings.Repeat("9", 300)+"/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"rtt max 99999999999999999999... (300 bytes) ms is above 1 hour"},
		{"400 digits", summary(5, 5) + rtt("0.036/0.043/"+strings.Repeat("9", 400)+"/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"bad rtt max: 99999999999999999999... (400 bytes) is out of range"},
		{"1 hour", replies("3600000") + summary(1, 1) + rtt("3600000.000/3600000.000/3600000.000/0.000"), 5, measurev1.Status_STATUS_OK, ""},
		{"reply above 1 hour", replies("3600001") + summary(1, 1) + rtt("3600000.000/3600000.000/3600000.000/0.000"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"echo reply icmp_seq=1 time 3600001 ms is above 1 hour"},
		{"reply 400 digits", replies(strings.Repeat("9", 400)) + summary(1, 1) + rtt("0.036/0.036/0.036/0.000"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"echo reply icmp_seq=1 time: 99999999999999999999... (400 bytes) is out of range"},
		{"above 1 hour", summary(1, 1) + rtt("3600000.001/3600000.001/3600000.001/0.000"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"rtt min 3600000.001 ms is above 1 hour"},
		{"exponent", summary(5, 5) + rtt("3.6e-2/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR, `bad rtt min: "3.6e-2" is not a plain decimal`},
		{"hex", summary(5, 5) + rtt("0x1p-5/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR, `bad rtt min: "0x1p-5" is not a plain decimal`},
		{"more transmitted than count", summary(6, 5) + rtt("0.036/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"packets transmitted 6 is more than the 5 asked for (-c 5)"},
		{"more transmitted, none back", summary(9, 0), 5, measurev1.Status_STATUS_PARSE_ERROR, "packets transmitted 9 is more than the 5 asked for"},
		// Fewer than count: ping stopped early but printed its summary.
		{"fewer transmitted than count", replies("0.036", "0.043", "0.050") + summary(3, 3) + rtt("0.036/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_OK, ""},
		{"no reply lines", summary(5, 5) + rtt("0.036/0.043/0.050/0.005"), 5, measurev1.Status_STATUS_PARSE_ERROR,
			"5 received in the summary but 0 echo reply lines"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: tt.count}}})
			got, _ := resultsOf(spec, proc.Output{Stdout: []byte(tt.stdout)}, nil)
			checkResults(t, spec, got)
			if got[0].GetStatus() != tt.want || !strings.Contains(got[0].GetMessage(), tt.wantMsg) {
				t.Errorf("got %v %q; want %v with %q", got[0].GetStatus(), got[0].GetMessage(), tt.want, tt.wantMsg)
			}
		})
	}
}

func TestCurlRules(t *testing.T) {
	const ok = "time_namelookup=0.000065\ntime_connect=0.000495\ntime_appconnect=0.000000\ntime_starttransfer=0.010510\ntime_total=0.010837\n"
	with := func(key, value string) string {
		var b strings.Builder
		for _, line := range strings.SplitAfter(ok, "\n") {
			if k, _, _ := strings.Cut(line, "="); k == key {
				line = key + "=" + value + "\n"
			}
			b.WriteString(line)
		}
		return b.String()
	}
	tests := []struct {
		name    string
		times   string
		want    measurev1.Status
		wantMsg string
	}{
		{"ok", ok, measurev1.Status_STATUS_OK, ""},
		{"integer seconds", with("time_total", "1"), measurev1.Status_STATUS_OK, ""},
		{"with tls", with("time_appconnect", "0.005000"), measurev1.Status_STATUS_OK, ""},
		{"hex float", with("time_total", "0x1p-2"), measurev1.Status_STATUS_PARSE_ERROR, `bad time_total "0x1p-2"`},
		{"underscore", with("time_connect", "1_0"), measurev1.Status_STATUS_PARSE_ERROR, `bad time_connect "1_0"`},
		{"exponent", with("time_total", "1e-2"), measurev1.Status_STATUS_PARSE_ERROR, `bad time_total "1e-2"`},
		{"sign", with("time_total", "+0.5"), measurev1.Status_STATUS_PARSE_ERROR, `bad time_total "+0.5"`},
		{"inf", with("time_total", "Inf"), measurev1.Status_STATUS_PARSE_ERROR, `bad time_total "Inf"`},
		{"above 1 day", with("time_total", "86400.000001"), measurev1.Status_STATUS_PARSE_ERROR, "curl time_total = 86400.000001 s is above 1 day"},
		{"300 digits", with("time_total", strings.Repeat("9", 300)), measurev1.Status_STATUS_PARSE_ERROR, "curl time_total = 99999999999999999999... (300 bytes) s is above 1 day"},
		{"total before connect", with("time_total", "0.000400"), measurev1.Status_STATUS_PARSE_ERROR, "time_total = 0.000400 is before time_starttransfer = 0.010510"},
		{"first byte before connect", with("time_starttransfer", "0.000400"), measurev1.Status_STATUS_PARSE_ERROR, "time_starttransfer = 0.000400 is before time_connect = 0.000495"},
		{"connect before namelookup", with("time_namelookup", "0.000500"), measurev1.Status_STATUS_PARSE_ERROR, "time_connect = 0.000495 is before time_namelookup = 0.000500"},
		{"tls before connect", with("time_appconnect", "0.000100"), measurev1.Status_STATUS_PARSE_ERROR, "time_appconnect = 0.000100 is before time_connect = 0.000495"},
		{"first byte before tls", with("time_appconnect", "0.020000"), measurev1.Status_STATUS_PARSE_ERROR, "time_starttransfer = 0.010510 is before time_appconnect = 0.020000"},
	}
	spec := normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout := curlMarker + "\nhttp_code=200\n" + tt.times + "size_download=335\nexitcode=0\nerrormsg=\n"
			got, _ := resultsOf(spec, proc.Output{Stdout: []byte(stdout)}, nil)
			checkResults(t, spec, got)
			if got[0].GetStatus() != tt.want || !strings.Contains(got[0].GetMessage(), tt.wantMsg) {
				t.Errorf("got %v %q; want %v with %q", got[0].GetStatus(), got[0].GetMessage(), tt.want, tt.wantMsg)
			}
		})
	}
}

func TestIperf3Rules(t *testing.T) {
	// sum is an end sum: seconds, bytes, bits_per_second, then extra JSON.
	sum := func(seconds, bytes, bps float64, extra string) string {
		return fmt.Sprintf(`{"seconds":%v,"bytes":%v,"bits_per_second":%v%s}`, seconds, bytes, bps, extra)
	}
	doc := func(sent, recv, cpu string) string {
		return `{"start":{"version":"iperf 3.12"},"end":{"sum_sent":` + sent + `,"sum_received":` + recv + cpu + `}}`
	}
	const cpu = `,"cpu_utilization_percent":{"host_total":50,"remote_total":40}`
	goodSent, goodRecv := sum(1, 1000, 8000, ""), sum(1, 900, 7200, "")
	udpSent := sum(1, 1000, 8000, `,"packets":10`)
	tests := []struct {
		name    string
		test    measurev1.Test
		stdout  string
		want    measurev1.Status
		wantMsg string
	}{
		{"tcp ok", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, goodRecv, cpu), measurev1.Status_STATUS_OK, ""},
		{"udp ok", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 900, 7200, `,"packets":10,"lost_packets":1,"jitter_ms":0.5`), cpu), measurev1.Status_STATUS_OK, ""},
		{"udp all lost", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 0, 0, `,"packets":10,"lost_packets":10`), cpu), measurev1.Status_STATUS_UNREACHABLE, "nothing arrived"},
		{"lost above packets", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 900, 7200, `,"packets":10,"lost_packets":11`), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.lost_packets = 11 is more than end.sum_received.packets = 10"},
		{"lost above sent packets", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 900, 7200, `,"packets":20,"lost_packets":11`), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.lost_packets = 11 is more than end.sum_sent.packets = 10"},
		{"lost without packets", measurev1.Test_TEST_IPERF3_UDP, doc(goodSent, sum(1, 900, 7200, `,"lost_packets":1`), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.lost_packets = 1 is more than end.sum_received.packets = 0"},
		{"lost_percent above 100", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 900, 7200, `,"lost_percent":101`), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.lost_percent = 101 is above 100"},
		{"bps 2x bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(1, 900, 7200*2, ""), cpu), measurev1.Status_STATUS_OK, ""},
		{"bps above 2x bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(1, 900, 7200*2+1, ""), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.bits_per_second = 14401 is not bytes x 8 / seconds = 900 x 8 / 1 = 7200"},
		{"bps below half of bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(1, 900, 3599, ""), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.bits_per_second = 3599 is not bytes"},
		{"bps without bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(1, 0, 7200, ""), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.bits_per_second = 7200 is not bytes"},
		{"sender bps off", measurev1.Test_TEST_IPERF3_TCP, doc(sum(1, 1000, 1e12, ""), goodRecv, cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_sent.bits_per_second = 1e+12 is not bytes"},
		{"zero seconds with bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(0, 900, 7200, ""), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.seconds = 0 with 900 bytes"},
		{"tiny seconds with bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(1e-9, 900, 7.2e12, ""), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.seconds = 1e-09 with 900 bytes"},
		{"sender ran for no time", measurev1.Test_TEST_IPERF3_TCP, doc(sum(0, 0, 0, ""), goodRecv, cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_sent.seconds = 0: the sender ran for no time"},
		{"jitter above 1 hour", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 900, 7200, `,"packets":10,"jitter_ms":3600001`), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.jitter_ms = 3.600001e+06 is above 1 hour"},
		{"jitter of 1 hour", measurev1.Test_TEST_IPERF3_UDP, doc(udpSent, sum(1, 900, 7200, `,"packets":10,"jitter_ms":3600000`), cpu),
			measurev1.Status_STATUS_OK, ""},
		{"fractional bytes", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, sum(1, 900.5, 7204, ""), cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_received.bytes = 900.5 is not a whole number"},
		{"negative retransmits", measurev1.Test_TEST_IPERF3_TCP, doc(sum(1, 1000, 8000, `,"retransmits":-1`), goodRecv, cpu),
			measurev1.Status_STATUS_PARSE_ERROR, "end.sum_sent.retransmits = -1 is negative"},
		{"negative host cpu", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, goodRecv, `,"cpu_utilization_percent":{"host_total":-1,"remote_total":40}`),
			measurev1.Status_STATUS_PARSE_ERROR, "end.cpu_utilization_percent.host_total = -1 is not a CPU share"},
		{"negative remote cpu", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, goodRecv, `,"cpu_utilization_percent":{"host_total":1,"remote_total":-0.5}`),
			measurev1.Status_STATUS_PARSE_ERROR, "end.cpu_utilization_percent.remote_total = -0.5 is not a CPU share"},
		{"huge cpu", measurev1.Test_TEST_IPERF3_TCP, doc(goodSent, goodRecv, `,"cpu_utilization_percent":{"host_total":1e300,"remote_total":1}`),
			measurev1.Status_STATUS_PARSE_ERROR, "end.cpu_utilization_percent.host_total = 1e+300 is not a CPU share"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := normalized(t, &measurev1.TestSpec{Test: tt.test})
			got, _ := resultsOf(spec, proc.Output{Stdout: []byte(tt.stdout)}, nil)
			checkResults(t, spec, got)
			if got[0].GetStatus() != tt.want || !strings.Contains(got[0].GetMessage(), tt.wantMsg) {
				t.Errorf("got %v %q; want %v with %q", got[0].GetStatus(), got[0].GetMessage(), tt.want, tt.wantMsg)
			}
		})
	}
}

func TestCurlURL(t *testing.T) {
	tests := []struct {
		target string
		want   string
	}{
		{"10.0.0.2", "http://10.0.0.2:8080/"},
		{"fd00::2", "http://[fd00::2]:8080/"},
		{"::ffff:127.0.0.1", "http://[::ffff:127.0.0.1]:8080/"},
		{"::1", "http://[::1]:8080/"},
		{"fe80::1%eth0", "http://[fe80::1%25eth0]:8080/"},
		{"fe80::1%eth0.100", "http://[fe80::1%25eth0.100]:8080/"},
		{"fe80::1%a b[]%", "http://[fe80::1%25a%20b%5B%5D%25]:8080/"},
		{"fe80::1%3", "http://[fe80::1%253]:8080/"},
	}
	spec := normalized(t, &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP, Params: &measurev1.TestSpec_Http{Http: &measurev1.HttpParams{
		Timeout: durationpb.New(time.Second),
	}}})
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			cmd := curlCommand(spec, tt.target, 8080, "")
			want := "curl -q -g -v -sS -o /dev/null --noproxy * --max-time 1 --connect-timeout 1 -w " + CurlWriteOut + " " + tt.want
			if got := cmd.String(); got != want {
				t.Errorf("argv:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestTruncatedMessages: when proc cut the output at its cap and the parse
// fails, the message says so, for every tool.
func TestTruncatedMessages(t *testing.T) {
	const words = "output truncated at 8 MiB"
	tests := []struct {
		name   string
		test   measurev1.Test
		stdout string
		stderr string
		// runErr with exit >= 0: ctx ended as the tool exited by itself,
		// so its output is parsed all the same (runFailure).
		exit   int
		runErr error
	}{
		{"ping without summary", measurev1.Test_TEST_PING, "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.035 ms\n", "", 0, nil},
		{"ping without summary, stderr", measurev1.Test_TEST_PING, "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.035 ms\n", "ping: sendmsg: No buffer space available\n", 0, nil},
		{"ping cut in the rtt line", measurev1.Test_TEST_PING, "5 packets transmitted, 5 received, 0% packet loss, time 814ms\nrtt min/avg/max/mdev = 0.036/0", "", 0, nil},
		{"qperf without block", measurev1.Test_TEST_QPERF_TCP_BW, "tcp_bw:\n", "", 0, nil},
		{"qperf cut in a value", measurev1.Test_TEST_QPERF_TCP_BW, "tcp_bw:\n    bw   =   4.2 GB/s", "", 0, nil},
		{"qperf with notes", measurev1.Test_TEST_QPERF_TCP_BW, "", "server: something\n", 0, nil},
		{"iperf3 cut JSON", measurev1.Test_TEST_IPERF3_TCP, `{"start":{"version":"iperf 3.12"},"end":{"sum_sent":`, "", 0, nil},
		{"iperf3 cut JSON, stderr", measurev1.Test_TEST_IPERF3_TCP, `{"start":{`, "iperf3: error\n", 0, nil},
		{"curl without block", measurev1.Test_TEST_HTTP, "", "* Trying 127.0.0.1:8080...\n", 0, nil},
		{"curl cut block", measurev1.Test_TEST_HTTP, curlMarker + "\nhttp_code=200\ntime_namelookup=0.000065\n", "", 0, nil},
		{"qperf with notes, ctx ended as it exited", measurev1.Test_TEST_QPERF_TCP_BW, "tcp_bw:\n", "server: something\n", 1, context.DeadlineExceeded},
		{"ping without summary, ctx ended as it exited", measurev1.Test_TEST_PING, "64 bytes from 127.0.0.1: icmp_seq=1\n", "", 1, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := normalized(t, &measurev1.TestSpec{Test: tt.test})
			out := proc.Output{Stdout: []byte(tt.stdout), Stderr: []byte(tt.stderr), Truncated: true, ExitCode: tt.exit}
			got, _ := resultsOf(spec, out, tt.runErr)
			checkResults(t, spec, got)
			t.Logf("%v: %s", got[0].GetStatus(), got[0].GetMessage())
			if got[0].GetStatus() == measurev1.Status_STATUS_OK || !strings.Contains(got[0].GetMessage(), words) {
				t.Errorf("got %v %q; want a failure saying %q", got[0].GetStatus(), got[0].GetMessage(), words)
			}
		})
	}
}

// checkFailureMessage checks the message rule of failed results on a
// parser's own *Failure: not empty, not starting with punctuation, a
// symbol or a space, one line of at most MaxMessageBytes.
func checkFailureMessage(t testing.TB, what string, err error) {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		t.Errorf("%s: error %v is not a *Failure", what, err)
		return
	}
	if f.Status == measurev1.Status_STATUS_OK || f.Status == measurev1.Status_STATUS_UNSPECIFIED {
		t.Errorf("%s: failure with status %v", what, f.Status)
	}
	msg := f.Message
	if c, _ := utf8.DecodeRuneInString(msg); msg == "" || unicode.IsPunct(c) || unicode.IsSymbol(c) || unicode.IsSpace(c) ||
		len(msg) > MaxMessageBytes || strings.Contains(msg, "\n") || !utf8.ValidString(msg) {
		t.Errorf("%s: bad failure message %q", what, msg)
	}
}

// TestParserFailureMessages: the parsers' own failures (not only the
// results Run makes of them) have a message that is never empty and never
// starts with punctuation, whatever words the tool printed.
func TestParserFailureMessages(t *testing.T) {
	tests := []struct {
		name  string
		parse func(proc.Output) error
		out   proc.Output
		want  string // the whole message
	}{
		{"ping stderr starting with a colon", func(o proc.Output) error { _, err := ParsePing(o); return err },
			proc.Output{Stderr: []byte(": connect: Network is unreachable\n"), ExitCode: 2}, "ping: : connect: Network is unreachable"},
		{"ping IPv6 complaint", func(o proc.Output) error { _, err := ParsePing(o); return err },
			proc.Output{Stderr: []byte("::1: Name or service not known\n"), ExitCode: 2}, "ping: ::1: Name or service not known"},
		{"iperf3 blank error", func(o proc.Output) error { _, err := ParseIperf3(measurev1.Test_TEST_IPERF3_TCP, o); return err },
			proc.Output{Stdout: []byte(`{"error":" \n "}`)}, "tool_error"},
		{"iperf3 error in brackets", func(o proc.Output) error { _, err := ParseIperf3(measurev1.Test_TEST_IPERF3_TCP, o); return err },
			proc.Output{Stdout: []byte(`{"error":"[5] control socket has closed unexpectedly"}`)}, "iperf3: [5] control socket has closed unexpectedly"},
		{"iperf3 blank error, truncated", func(o proc.Output) error { _, err := ParseIperf3(measurev1.Test_TEST_IPERF3_TCP, o); return err },
			proc.Output{Stdout: []byte(`{"error":";"}`), Truncated: true}, "iperf3 output truncated at 8 MiB"},
		{"qperf wrong unit", func(o proc.Output) error { _, _, err := ParseQperf(o); return err },
			proc.Output{Stdout: []byte("tcp_lat:\n    latency  =  5 GB/sec\n")}, `qperf tcp_lat: latency = 5 GB/sec: latency must be a time, and "GB/sec" is a bandwidth`},
		{"curl exit without words", func(o proc.Output) error { _, err := ParseCurl(o); return err },
			proc.Output{ExitCode: 56}, "curl exit 56:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.parse(tt.out)
			checkFailureMessage(t, tt.name, err)
			if f := asFailure(err); f.Message != tt.want {
				t.Errorf("message %q, want %q", f.Message, tt.want)
			}
		})
	}
}

// TestRunQperfBlockAndConnectFailureRealProbe is the reviewer's case end
// to end, with the real proc.Run and TCP probe: a stand-in qperf on PATH
// prints a tcp_lat block and "failed to connect", and nothing listens on
// the 127.0.0.1 port the probe tries. The block stands: OK with its
// latency, not REFUSED with the metrics left on and a message starting
// with "; ".
func TestRunQperfBlockAndConnectFailureRealProbe(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\ncat <<'EOF'\n" + qperfLatBlock + "EOF\necho '127.0.0.1: failed to connect'\n"
	if err := os.WriteFile(filepath.Join(dir, "qperf"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close() // a closed port: the probe is refused
	r := fakeRunner(Config{}, &measurev1.ToolInfo{Tool: measurev1.Tool_TOOL_QPERF, Version: "qperf 0.4.11"})
	req := &agentv1.RunClient{
		Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT},
		Network: measurev1.Network_NETWORK_HOST, TargetIp: "127.0.0.1", Port: port, DataPort: port%65535 + 1,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := r.Run(ctx, req)
	checkResults(t, req.GetSpec(), got)
	if len(got) != 1 || got[0].GetStatus() != measurev1.Status_STATUS_OK || got[0].GetQperf().GetLatencySeconds() != 12.5e-6 {
		t.Errorf("Run = %v", got)
	}
}
