package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/meshperf/meshperf/agent/proc"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"
)

var update = flag.Bool("update", false, "rewrite testdata/*/*.golden.json from the parsers' results")

// capture is one testdata/<tool>/<case>.txt file (format: testdata/README.md).
type capture struct {
	argv   string
	spec   *measurev1.TestSpec
	runErr error
	out    proc.Output
}

const (
	stdoutMarker = "==> stdout <==\n"
	stderrMarker = "==> stderr <==\n"
)

func parseCapture(data []byte) (capture, error) {
	var c capture
	s := string(data)
	i := strings.Index(s, stdoutMarker)
	if i < 0 || (i > 0 && s[i-1] != '\n') {
		return c, fmt.Errorf("no %q line", strings.TrimSpace(stdoutMarker))
	}
	head, body := s[:i], s[i+len(stdoutMarker):]
	j := strings.LastIndex(body, stderrMarker)
	if j < 0 || (j > 0 && body[j-1] != '\n') {
		return c, fmt.Errorf("no %q line", strings.TrimSpace(stderrMarker))
	}
	c.out.Stdout, c.out.Stderr = []byte(body[:j]), []byte(body[j+len(stderrMarker):])
	exitSeen := false
	for _, line := range strings.Split(head, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, ": ")
		if !ok {
			return c, fmt.Errorf("header line %q is not key: value", line)
		}
		switch key {
		case "argv":
			c.argv = value
		case "exit":
			n, err := strconv.Atoi(value)
			if err != nil {
				return c, fmt.Errorf("exit: %w", err)
			}
			c.out.ExitCode, exitSeen = n, true
		case "spec":
			c.spec = &measurev1.TestSpec{}
			if err := protojson.Unmarshal([]byte(value), c.spec); err != nil {
				return c, fmt.Errorf("spec: %w", err)
			}
		case "error":
			switch value {
			case "deadline":
				c.runErr = fmt.Errorf("%s: %w", strings.Fields(c.argv + " tool")[0], context.DeadlineExceeded)
			case "canceled":
				c.runErr = fmt.Errorf("%s: %w", strings.Fields(c.argv + " tool")[0], context.Canceled)
			default:
				return c, fmt.Errorf("error: %q is not deadline or canceled", value)
			}
		case "truncated":
			// Derived cases only: proc.Output.Truncated, as if the tool
			// had printed more than proc.MaxOutputBytes.
			c.out.Truncated = value == "true"
		case "note", "netns":
		default:
			return c, fmt.Errorf("unknown header %q", key)
		}
	}
	if c.spec == nil || !exitSeen || c.argv == "" {
		return c, fmt.Errorf("argv, exit and spec are required")
	}
	return c, nil
}

func captureFiles(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata captures: %v", err)
	}
	return files
}

func readCapture(t testing.TB, path string) capture {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseCapture(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return c
}

func marshalResults(t testing.TB, results []*measurev1.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	buf.WriteString("[")
	for i, r := range results {
		b, err := protojson.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			buf.WriteString(",")
		}
		buf.Write(b)
	}
	buf.WriteString("]")
	// protojson's whitespace is deliberately unstable: re-indent.
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		t.Fatal(err)
	}
	out.WriteString("\n")
	return out.Bytes()
}

func unmarshalResults(t testing.TB, data []byte) []*measurev1.Result {
	t.Helper()
	var raws []json.RawMessage
	if err := json.Unmarshal(data, &raws); err != nil {
		t.Fatal(err)
	}
	var results []*measurev1.Result
	for _, raw := range raws {
		r := &measurev1.Result{}
		if err := protojson.Unmarshal(raw, r); err != nil {
			t.Fatal(err)
		}
		results = append(results, r)
	}
	return results
}

// TestGolden parses every capture under testdata and compares the results
// with testdata/<tool>/<case>.golden.json (-update rewrites them).
func TestGolden(t *testing.T) {
	for _, path := range captureFiles(t) {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "testdata"+string(filepath.Separator)), ".txt")
		t.Run(name, func(t *testing.T) {
			c := readCapture(t, path)
			got, _ := resultsOf(c.spec, c.out, c.runErr)
			checkResults(t, c.spec, got)
			golden := strings.TrimSuffix(path, ".txt") + ".golden.json"
			if *update {
				if err := os.WriteFile(golden, marshalResults(t, got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			data, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			want := unmarshalResults(t, data)
			if diff := cmp.Diff(want, got, protocmp.Transform()); diff != "" {
				t.Errorf("results differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

// TestGoldenStatuses pins the status of each real capture, so that a
// careless -update cannot change the mapping unnoticed.
func TestGoldenStatuses(t *testing.T) {
	const (
		ok          = measurev1.Status_STATUS_OK
		refused     = measurev1.Status_STATUS_REFUSED
		unreachable = measurev1.Status_STATUS_UNREACHABLE
		timeout     = measurev1.Status_STATUS_TIMEOUT
		busy        = measurev1.Status_STATUS_BUSY
		parseErr    = measurev1.Status_STATUS_PARSE_ERROR
		toolErr     = measurev1.Status_STATUS_TOOL_ERROR
		canceled    = measurev1.Status_STATUS_CANCELED
	)
	want := map[string][]measurev1.Status{
		"ping/ok_loopback": {ok}, "ping/ok_loopback_even": {ok}, "ping/ok_payload_1400": {ok}, "ping/partial_loss": {ok},
		"ping/duplicates": {ok}, "ping/derived_truncated_reply": {ok}, "ping/derived_corrupted": {ok},
		"ping/all_lost": {unreachable}, "ping/filtered": {unreachable}, "ping/host_unreachable": {unreachable},
		"ping/host_unreachable_errors": {unreachable}, "ping/network_unreachable": {unreachable},
		"ping/killed_deadline": {timeout}, "ping/derived_canceled": {canceled}, "ping/derived_duplicates": {parseErr},
		"ping/derived_truncated_rtt": {parseErr}, "ping/derived_garbled_rtt": {parseErr}, "ping/derived_empty": {parseErr},
		"ping/derived_more_received": {parseErr}, "ping/derived_huge_count": {parseErr},
		"ping/derived_rtt_out_of_order": {parseErr}, "ping/derived_rtt_absurd": {parseErr},
		"ping/derived_negative_mdev": {parseErr}, "ping/derived_more_transmitted": {parseErr},
		"ping/derived_truncated_8mib": {parseErr}, "ping/derived_garbled_reply_time": {parseErr},
		"ping/derived_garbled_reply_line": {parseErr}, "ping/derived_reply_missing": {parseErr},
		"ping/derived_reply_outside_summary": {parseErr},
		"ping/foreign_all":                   {unreachable}, "ping/foreign_dup_all": {unreachable}, "ping/foreign_some": {ok},
		"ping/derived_foreign_then_target_dup": {ok}, "ping/send_failed_all": {toolErr}, "ping/send_failed_some": {ok},
		"ping/derived_send_errors_above_sent": {parseErr}, "ping/derived_complete_then_error": {ok},
		"ping/route_gone_some": {ok}, "ping/route_gone_all": {ok}, "ping/derived_route_gone_printed": {ok},
		"qperf/udp_lat_dropped": {unreachable},

		"qperf/tcp_lat_ok": {ok}, "qperf/tcp_bw_ok": {ok}, "qperf/tcp_bw_1234567": {ok}, "qperf/udp_lat_ok": {ok},
		"qperf/udp_bw_ok": {ok}, "qperf/tcp_bw_loop_sizes": {ok, ok, ok}, "qperf/tcp_lat_repeated_oo": {parseErr, ok},
		"qperf/udp_lat_oversize": {toolErr}, "qperf/data_port_in_use": {toolErr}, "qperf/killed_deadline": {timeout},
		"qperf/server_stopped": {timeout}, "qperf/refused": {unreachable}, "qperf/network_unreachable": {unreachable},
		"qperf/timeout_drop": {unreachable}, "qperf/derived_loop_missing_size": {ok, parseErr, ok},
		"qperf/derived_unknown_unit": {parseErr}, "qperf/derived_truncated_block": {parseErr},
		"qperf/derived_udp_bw_nothing_received": {unreachable}, "qperf/derived_bits_per_sec": {ok},
		"qperf/derived_wrong_size": {parseErr}, "qperf/derived_latency_wrong_unit": {parseErr},
		"qperf/derived_connect_failed_after_block": {ok}, "qperf/derived_truncated_8mib": {parseErr},
		"qperf/derived_complete_then_error": {ok},

		"iperf3/tcp_ok": {ok}, "iperf3/tcp_p2_ok": {ok}, "iperf3/tcp_len_ok": {ok}, "iperf3/udp_ok": {ok},
		"iperf3/udp_loss": {ok}, "iperf3/busy": {busy}, "iperf3/refused": {refused},
		"iperf3/network_unreachable": {unreachable}, "iperf3/host_unreachable": {unreachable},
		"iperf3/timeout_drop": {timeout}, "iperf3/udp_block_too_large": {toolErr}, "iperf3/server_killed": {toolErr},
		"iperf3/killed_deadline": {timeout}, "iperf3/derived_truncated_json": {parseErr},
		"iperf3/derived_no_end_sums": {parseErr}, "iperf3/derived_negative_figure": {parseErr},
		"iperf3/derived_udp_all_lost": {unreachable}, "iperf3/derived_not_json": {parseErr},
		"iperf3/derived_udp_lost_above_packets": {parseErr}, "iperf3/derived_rate_inconsistent": {parseErr},
		"iperf3/derived_negative_cpu": {parseErr}, "iperf3/derived_truncated_8mib": {parseErr},
		"iperf3/derived_udp_receiver_bytes_zero": {ok}, "iperf3/derived_complete_then_error": {ok},

		"curl/ok_200": {ok}, "curl/not_found_404": {toolErr}, "curl/refused": {refused},
		"curl/no_response": {timeout}, "curl/empty_reply": {toolErr}, "curl/network_unreachable": {unreachable},
		"curl/host_unreachable": {unreachable}, "curl/connect_timeout": {timeout}, "curl/resolve_error": {unreachable},
		"curl/derived_truncated_w": {parseErr}, "curl/derived_no_marker": {parseErr},
		"curl/derived_garbled_time": {parseErr}, "curl/derived_http_500": {toolErr},
		"curl/derived_refused_quiet": {unreachable}, "curl/derived_hex_time": {parseErr},
		"curl/derived_total_before_connect": {parseErr}, "curl/derived_connect_beyond_max_time": {parseErr},
		"curl/derived_connect_before_namelookup": {parseErr}, "curl/derived_total_before_starttransfer": {parseErr},

		"ab/ok": {ok}, "ab/ok_keepalive": {ok}, "ab/single": {ok}, "ab/non2xx_500": {ok}, "ab/non2xx_half": {ok},
		"ab/length_mismatch": {ok}, "ab/time_limit": {ok}, "ab/refused": {unreachable}, "ab/timeout": {timeout},
		"ab/some_slow": {timeout}, "ab/too_many_files": {toolErr},
	}
	seen := map[string]bool{}
	for _, path := range captureFiles(t) {
		name := strings.TrimSuffix(strings.TrimPrefix(path, "testdata"+string(filepath.Separator)), ".txt")
		seen[name] = true
		c := readCapture(t, path)
		results, _ := resultsOf(c.spec, c.out, c.runErr)
		var got []measurev1.Status
		for _, r := range results {
			got = append(got, r.GetStatus())
		}
		if diff := cmp.Diff(want[name], got); diff != "" {
			t.Errorf("%s: statuses (-want +got):\n%s", name, diff)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("%s: no such capture", name)
		}
	}
}

// checkResults checks what every result set must satisfy: at least one
// result, Index = position, a status, and either OK with sane metrics of
// the test's kind (ping: min <= avg <= max, mdev <= max, received <=
// transmitted <= count; curl: timings in order; iperf3: lost <= packets;
// times below their bounds) or a failure with no metrics and a message that
// is not empty and does not start with punctuation, a symbol or a space.
func checkResults(t testing.TB, spec *measurev1.TestSpec, results []*measurev1.Result) {
	t.Helper()
	if len(results) == 0 {
		t.Fatalf("no results")
	}
	for i, r := range results {
		if r.GetIndex() != uint32(i) {
			t.Errorf("result %d has index %d", i, r.GetIndex())
		}
		if !utf8.ValidString(r.GetMessage()) || len(r.GetMessage()) > MaxMessageBytes || strings.Contains(r.GetMessage(), "\n") {
			t.Errorf("result %d: bad message %q", i, r.GetMessage())
		}
		if _, err := protojson.Marshal(r); err != nil {
			t.Errorf("result %d does not marshal: %v", i, err)
		}
		switch r.GetStatus() {
		case measurev1.Status_STATUS_UNSPECIFIED:
			t.Errorf("result %d: status unspecified", i)
		case measurev1.Status_STATUS_OK:
			checkMetrics(t, spec.GetTest(), r)
		default:
			if r.GetMessage() == "" {
				t.Errorf("result %d: %v without a message", i, r.GetStatus())
			}
			if c, _ := utf8.DecodeRuneInString(r.GetMessage()); unicode.IsPunct(c) || unicode.IsSymbol(c) || unicode.IsSpace(c) {
				t.Errorf("result %d: %v message starts with %q: %q", i, r.GetStatus(), c, r.GetMessage())
			}
			if r.Metrics != nil {
				t.Errorf("result %d: %v with metrics %v", i, r.GetStatus(), r.Metrics)
			}
		}
	}
}

func checkMetrics(t testing.TB, test measurev1.Test, r *measurev1.Result) {
	t.Helper()
	var m protoreflect.ProtoMessage
	var headline float64
	switch test {
	case measurev1.Test_TEST_PING:
		p := r.GetPing()
		m, headline = p, p.GetRttAvgSeconds()
		if x := p.GetLossRatio(); x > 1 {
			t.Errorf("loss ratio %v > 1", x)
		}
		if !(p.GetRttMinSeconds() <= p.GetRttAvgSeconds() && p.GetRttAvgSeconds() <= p.GetRttMaxSeconds() &&
			p.GetRttMdevSeconds() <= p.GetRttMaxSeconds() && p.GetRttMaxSeconds() <= maxTimeSeconds) {
			t.Errorf("rtt min/avg/max/mdev out of order or above 1 hour: %v", p)
		}
		// The median comes from reply times ping prints with fewer
		// decimals than its summary (whole ms from 100 ms): it may be
		// half a millisecond outside min..max, no more.
		if med := p.RttMedianSeconds; med == nil || *med < p.GetRttMinSeconds()-0.5e-3 || *med > p.GetRttMaxSeconds()+0.5e-3 || *med > maxTimeSeconds {
			t.Errorf("rtt median unset, outside min..max or above 1 hour: %v", p)
		}
		if p.GetPacketsReceived() > p.GetPacketsTransmitted() || p.GetPacketsTransmitted() > r.GetSpec().GetPing().GetCount() {
			t.Errorf("received %d, transmitted %d, count %d", p.GetPacketsReceived(), p.GetPacketsTransmitted(), r.GetSpec().GetPing().GetCount())
		}
	case measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_UDP_LAT:
		m, headline = r.GetQperf(), r.GetQperf().GetLatencySeconds()
		if headline > maxTimeSeconds {
			t.Errorf("latency %v s above 1 hour", headline)
		}
	case measurev1.Test_TEST_QPERF_TCP_BW, measurev1.Test_TEST_QPERF_UDP_BW:
		m, headline = r.GetQperf(), r.GetQperf().GetThroughputBps()
	case measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_IPERF3_UDP:
		p := r.GetIperf3()
		m, headline = p, p.GetThroughputBps()
		if x := p.GetLossRatio(); x > 1 {
			t.Errorf("loss ratio %v > 1", x)
		}
		if p.GetLostPackets() > p.GetPackets() || p.GetJitterSeconds() > maxTimeSeconds || !(p.GetDurationSeconds() > 0) {
			t.Errorf("lost %d of %d packets, jitter %v s, duration %v s", p.GetLostPackets(), p.GetPackets(), p.GetJitterSeconds(), p.GetDurationSeconds())
		}
	case measurev1.Test_TEST_HTTP:
		h := r.GetHttp()
		m, headline = h, h.GetTotalSeconds()
		afterConnect := max(h.GetConnectSeconds(), h.GetTlsSeconds())
		if !(h.GetNamelookupSeconds() <= h.GetConnectSeconds() && afterConnect <= h.GetFirstByteSeconds() &&
			h.GetFirstByteSeconds() <= h.GetTotalSeconds() && h.GetTotalSeconds() <= maxCurlSeconds) {
			t.Errorf("curl timings out of order or above 1 day: %v", h)
		}
	case measurev1.Test_TEST_HTTP_LOAD:
		h := r.GetHttpLoad()
		m, headline = h, h.GetRequestsPerSecond()
		if !(h.GetLatencyP50Seconds() <= h.GetLatencyP90Seconds() && h.GetLatencyP90Seconds() <= h.GetLatencyP95Seconds() &&
			h.GetLatencyP95Seconds() <= h.GetLatencyP99Seconds() && h.GetLatencyP99Seconds() <= h.GetLatencyMaxSeconds() &&
			h.GetLatencyMaxSeconds() <= maxTimeSeconds) {
			t.Errorf("ab percentiles out of order or above 1 hour: %v", h)
		}
		if h.GetSuccessfulRequests()+h.GetFailedRequests() != h.GetRequests() || h.GetCompletedRequests() > h.GetRequests() ||
			h.GetSuccessfulRequests() > h.GetCompletedRequests() || h.GetRequests() != uint64(r.GetSpec().GetHttpLoad().GetRequests()) {
			t.Errorf("ab counts inconsistent: %v", h)
		}
	}
	if m == nil || !m.ProtoReflect().IsValid() {
		t.Fatalf("OK result without %v metrics: %v", test, r)
	}
	if !(headline > 0) {
		t.Errorf("OK result with a headline figure of %v: %v", headline, r)
	}
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.DoubleKind || fd.Kind() == protoreflect.FloatKind {
			if x := v.Float(); math.IsNaN(x) || math.IsInf(x, 0) || math.Signbit(x) {
				t.Errorf("metric %s = %v", fd.Name(), x)
			}
		}
		return true
	})
}
