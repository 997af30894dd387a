package runner

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent/httptarget"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func loadSpec(t *testing.T, p *measurev1.HttpLoadParams) *measurev1.TestSpec {
	t.Helper()
	spec, err := testspec.Normalize(&measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_HttpLoad{HttpLoad: p}})
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestAbCommand(t *testing.T) {
	tests := []struct {
		name   string
		params *measurev1.HttpLoadParams
		target string
		want   string
	}{
		{"defaults", &measurev1.HttpLoadParams{}, "10.244.1.2",
			"ab -q -r -c 10 -s 30 -t 30 -n 1000 http://10.244.1.2:8080/"},
		{"keep-alive, short", &measurev1.HttpLoadParams{Requests: 90000, Concurrency: 50, KeepAlive: true, Timeout: durationpb.New(5 * time.Second)}, "172.18.0.2",
			"ab -q -r -c 50 -k -s 5 -t 5 -n 90000 http://172.18.0.2:8080/"},
		{"long: -s stays at 30", &measurev1.HttpLoadParams{Requests: 5, Timeout: durationpb.New(300 * time.Second)}, "fd00::2",
			"ab -q -r -c 5 -s 30 -t 300 -n 5 http://[fd00::2]:8080/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := abCommand(loadSpec(t, tt.params), tt.target, 8080, "/run/netns/x")
			if got := cmd.Name + " " + strings.Join(cmd.Args, " "); got != tt.want {
				t.Errorf("argv = %q, want %q", got, tt.want)
			}
			if cmd.NetNS != "/run/netns/x" {
				t.Errorf("netns = %q", cmd.NetNS)
			}
		})
	}
}

func TestAbVersion(t *testing.T) {
	for in, want := range map[string]string{
		"This is ApacheBench, Version 2.3 <$Revision: 1903618 $>": "ApacheBench 2.3",
		"This is ApacheBench, Version 2.3 <$Revision$>":           "ApacheBench 2.3",
		"something else": "something else",
	} {
		if got := abVersion(in); got != want {
			t.Errorf("abVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestParseAbGarbled mutates the real ok capture: each change must turn
// into a failure naming what is wrong, never an OK result with a zero.
func TestParseAbGarbled(t *testing.T) {
	base := readCapture(t, "testdata/ab/ok.txt")
	half := readCapture(t, "testdata/ab/non2xx_half.txt")
	tests := []struct {
		name       string
		c          capture
		old, new   string
		exit       int
		wantStatus measurev1.Status
		wantWords  string
	}{
		{"garbled rps", base, "Requests per second:    1427.57", "Requests per second:    1e9", 0, measurev1.Status_STATUS_PARSE_ERROR, "bad Requests per second"},
		{"rps unit", base, "[#/sec] (mean)", "[#/min] (mean)", 0, measurev1.Status_STATUS_PARSE_ERROR, "want a figure in [#/sec]"},
		{"no transfer rate", base, "Transfer rate:", "Transfer speed:", 0, measurev1.Status_STATUS_PARSE_ERROR, `no "Transfer rate" line`},
		{"negative count", base, "Complete requests:      2000", "Complete requests:      -2000", 0, measurev1.Status_STATUS_PARSE_ERROR, "bad Complete requests"},
		{"more completed than asked", base, "Complete requests:      2000", "Complete requests:      2001", 0, measurev1.Status_STATUS_PARSE_ERROR, "above -n 2000"},
		{"other concurrency", base, "Concurrency Level:      10", "Concurrency Level:      11", 0, measurev1.Status_STATUS_PARSE_ERROR, "Concurrency Level 11 is not -c 10"},
		{"percentiles out of order", base, "  90%     11", "  90%      1", 0, measurev1.Status_STATUS_PARSE_ERROR, "90% figure 1 ms is below"},
		{"percentile missing", base, "  99%     17\n", "", 0, measurev1.Status_STATUS_PARSE_ERROR, "no 99% line"},
		{"longest request beyond the load", base, " 100%     26 (longest", " 100%  99999 (longest", 0, measurev1.Status_STATUS_PARSE_ERROR, "longer than the load may last (72000 ms)"},
		{"percentile garbled", base, "  95%     12", "  95%     1x2", 0, measurev1.Status_STATUS_PARSE_ERROR, "bad 95% figure"},
		{"summary cut", base, "Requests per second", "Requests per sec", 0, measurev1.Status_STATUS_PARSE_ERROR, `no "Requests per second" line`},
		{"time beyond the limit", base, "Time taken for tests:   1.401 seconds", "Time taken for tests:   99.401 seconds", 0, measurev1.Status_STATUS_PARSE_ERROR, "far beyond its -t 30s"},
		{"breakdown missing", half, "   (Connect: 0, Receive: 0, Length: 250, Exceptions: 0)\n", "", 0, measurev1.Status_STATUS_PARSE_ERROR, "without its (Connect"},
		{"breakdown above Failed requests", half, "Length: 250,", "Length: 251,", 0, measurev1.Status_STATUS_PARSE_ERROR, "is more than Failed requests 250"},
		// ab.c counts a response header it cannot read (over 8 KiB) in
		// Failed requests and in none of the breakdown's counters.
		{"breakdown below Failed requests", half, "Length: 250,", "Length: 249,", 0, measurev1.Status_STATUS_OK,
			"1 of ab's Failed requests 250 are in none of Connect, Receive, Length and Exceptions"},
		{"non-2xx above completed", half, "Non-2xx responses:      250", "Non-2xx responses:      501", 0, measurev1.Status_STATUS_PARSE_ERROR, "Non-2xx responses 501 is above"},
		{"no summary, exit 0", base, "Server Software:", "", 0, measurev1.Status_STATUS_PARSE_ERROR, "no summary in ab output"},
		{"killed by a signal after its summary", base, "", "", -1, measurev1.Status_STATUS_OK, "ab was killed by a signal after a complete result"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.c.out
			stdout := string(out.Stdout)
			if tt.old != "" {
				if !strings.Contains(stdout, tt.old) {
					t.Fatalf("capture has no %q", tt.old)
				}
				if tt.name == "no summary, exit 0" {
					before, _, ok := strings.Cut(stdout, tt.old)
					if !ok {
						t.Fatalf("%s: %q not in the capture", tt.name, tt.old)
					}
					stdout = before
				} else {
					stdout = strings.Replace(stdout, tt.old, tt.new, 1)
				}
			}
			out.Stdout, out.ExitCode = []byte(stdout), tt.exit
			results, _ := resultsOf(tt.c.spec, out, nil)
			checkResults(t, tt.c.spec, results)
			r := results[0]
			if r.GetStatus() != tt.wantStatus || !strings.Contains(r.GetMessage(), tt.wantWords) {
				t.Errorf("got %v %q, want %v with %q", r.GetStatus(), r.GetMessage(), tt.wantStatus, tt.wantWords)
			}
		})
	}
}

// TestParseAbNoneCompleted: ab prints no rates and no times when no
// request completed (its -t ended while a target trickled its answers,
// or every connection failed): a failure with the counts, not a
// PARSE_ERROR for the missing "Requests per second" line.
func TestParseAbNoneCompleted(t *testing.T) {
	base := readCapture(t, "testdata/ab/ok.txt")
	stdout := string(base.out.Stdout)
	head, _, ok := strings.Cut(stdout, "Complete requests:")
	if !ok {
		t.Fatal("capture has no Complete requests line")
	}
	for _, tt := range []struct {
		name, failed, bytes string
		want                measurev1.Status
		wantWords           string
	}{
		{"bytes arrived", "0", "4096", measurev1.Status_STATUS_TIMEOUT, "ab completed none of 2000 requests within its time limit though 4096 bytes arrived"},
		{"bytes arrived, then resets", "3\n   (Connect: 0, Receive: 3, Length: 0, Exceptions: 0)", "4096", measurev1.Status_STATUS_TOOL_ERROR,
			"ab completed none of 2000 requests though 4096 bytes arrived (Failed requests 3: Connect 0, Receive 3"},
		{"nothing arrived", "0", "0", measurev1.Status_STATUS_UNREACHABLE, "ab completed none of 2000 requests"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := base.out
			out.Stdout = []byte(head + "Complete requests:      0\nFailed requests:        " + tt.failed + "\nTotal transferred:      " + tt.bytes + " bytes\nHTML transferred:       0 bytes\n")
			_, _, _, err := ParseAb(out, base.spec)
			var f *Failure
			if !errors.As(err, &f) || f.Status != tt.want || !strings.Contains(f.Message, tt.wantWords) {
				t.Errorf("ParseAb: %v, want %v with %q", err, tt.want, tt.wantWords)
			}
		})
	}
}

// TestParseAbCounts pins the failure counting of the real captures:
// failures are what ab's Failed requests line says (0 for all-500
// answers) plus non-2xx answers plus requests never completed.
func TestParseAbCounts(t *testing.T) {
	tests := []struct {
		file                  string
		successful, failed    uint64
		non2xx, length, kept  uint64
		wantNote              string
		p50, p99, maxLatencyS float64
	}{
		{"ok", 2000, 0, 0, 0, 0, "", 0.007, 0.017, 0.026},
		{"ok_keepalive", 2000, 0, 0, 0, 2000, "", 0, 0.001, 0.005},
		{"single", 1, 0, 0, 0, 0, "", 0.001, 0.001, 0.001},
		{"non2xx_500", 0, 500, 500, 0, 0, "", 0.002, 0.008, 0.009},
		{"non2xx_half", 0, 500, 250, 250, 0, "lower bound", 0.004, 0.038, 0.039},
		{"length_mismatch", 167, 333, 0, 333, 0, "", 0.006, 0.02, 0.021},
		{"time_limit", 8959, 1_000_000 - 8959, 0, 0, 8959, "", 0.003, 0.033, 0.066},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			c := readCapture(t, "testdata/ab/"+tt.file+".txt")
			m, note, _, err := ParseAb(c.out, c.spec)
			if err != nil {
				t.Fatal(err)
			}
			if m.GetSuccessfulRequests() != tt.successful || m.GetFailedRequests() != tt.failed || m.GetNon_2XxResponses() != tt.non2xx ||
				m.GetLengthFailures() != tt.length || m.GetKeepAliveRequests() != tt.kept {
				t.Errorf("successful %d failed %d non2xx %d length %d keep-alive %d; want %d %d %d %d %d", m.GetSuccessfulRequests(), m.GetFailedRequests(),
					m.GetNon_2XxResponses(), m.GetLengthFailures(), m.GetKeepAliveRequests(), tt.successful, tt.failed, tt.non2xx, tt.length, tt.kept)
			}
			if m.GetLatencyP50Seconds() != tt.p50 || m.GetLatencyP99Seconds() != tt.p99 || m.GetLatencyMaxSeconds() != tt.maxLatencyS {
				t.Errorf("p50 %v p99 %v max %v; want %v %v %v", m.GetLatencyP50Seconds(), m.GetLatencyP99Seconds(), m.GetLatencyMaxSeconds(), tt.p50, tt.p99, tt.maxLatencyS)
			}
			if (tt.wantNote == "") != (note == "") || !strings.Contains(note, tt.wantNote) {
				t.Errorf("note %q, want %q", note, tt.wantNote)
			}
			if !(m.GetRequestsPerSecond() > 0) || !(m.GetTransferRateBps() > 0) || !(m.GetDurationSeconds() > 0) {
				t.Errorf("rps %v, transfer %v, duration %v", m.GetRequestsPerSecond(), m.GetTransferRateBps(), m.GetDurationSeconds())
			}
		})
	}
}

// TestAbIntegration runs the real ab against 127.0.0.1: agent/httptarget
// (a real load: every request a success), a target answering 503 (every
// request a failure, though ab's Failed requests says 0), and a port
// nothing listens on (REFUSED, from the TCP probe).
func TestAbIntegration(t *testing.T) {
	testnet.Need(t, "ab")
	good := httptest.NewServer(httptarget.Handler("node-b", "host"))
	defer good.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer bad.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := uint32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	port := func(s *httptest.Server) uint32 {
		u, _ := url.Parse(s.URL)
		p, _ := strconv.Atoi(u.Port())
		return uint32(p)
	}
	r := New(Config{})
	tests := []struct {
		name   string
		port   uint32
		params *measurev1.HttpLoadParams
		want   measurev1.Status
		check  func(t *testing.T, m *measurev1.HttpLoadMetrics)
	}{
		{"agent target", port(good), &measurev1.HttpLoadParams{Requests: 300, Concurrency: 5, Timeout: durationpb.New(20 * time.Second)},
			measurev1.Status_STATUS_OK, func(t *testing.T, m *measurev1.HttpLoadMetrics) {
				if m.GetSuccessfulRequests() != 300 || m.GetFailedRequests() != 0 || !(m.GetRequestsPerSecond() > 0) || !(m.GetLatencyMaxSeconds() > 0) {
					t.Errorf("metrics %v", m)
				}
			}},
		{"agent target keep-alive", port(good), &measurev1.HttpLoadParams{Requests: 300, Concurrency: 5, KeepAlive: true, Timeout: durationpb.New(20 * time.Second)},
			measurev1.Status_STATUS_OK, func(t *testing.T, m *measurev1.HttpLoadMetrics) {
				if m.GetSuccessfulRequests() != 300 || m.GetKeepAliveRequests() == 0 {
					t.Errorf("metrics %v", m)
				}
			}},
		{"503 target", port(bad), &measurev1.HttpLoadParams{Requests: 200, Concurrency: 4, Timeout: durationpb.New(20 * time.Second)},
			measurev1.Status_STATUS_OK, func(t *testing.T, m *measurev1.HttpLoadMetrics) {
				if m.GetFailedRequests() != 200 || m.GetSuccessfulRequests() != 0 || m.GetNon_2XxResponses() != 200 {
					t.Errorf("metrics %v", m)
				}
			}},
		{"zoned IPv6", 0, &measurev1.HttpLoadParams{Requests: 5}, measurev1.Status_STATUS_INVALID, nil},
		{"nothing listens", closedPort, &measurev1.HttpLoadParams{Requests: 50, Concurrency: 2, Timeout: durationpb.New(10 * time.Second)},
			measurev1.Status_STATUS_REFUSED, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			spec := &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP_LOAD, Params: &measurev1.TestSpec_HttpLoad{HttpLoad: tt.params}}
			target, port := "127.0.0.1", tt.port
			if port == 0 {
				target, port = "fe80::1%lo", 8080
			}
			results := r.Run(ctx, &agentv1.RunClient{Spec: spec, Network: measurev1.Network_NETWORK_HOST, TargetIp: target, Port: port})
			checkResults(t, results[0].GetSpec(), results)
			res := results[0]
			if res.GetStatus() != tt.want {
				t.Fatalf("status %v %q, want %v", res.GetStatus(), res.GetMessage(), tt.want)
			}
			if res.GetStatus() != measurev1.Status_STATUS_INVALID && !strings.HasPrefix(res.GetToolVersion(), "ApacheBench ") {
				t.Errorf("tool_version %q", res.GetToolVersion())
			}
			if tt.check != nil {
				tt.check(t, res.GetHttpLoad())
			}
		})
	}
}
