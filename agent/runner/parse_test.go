package runner

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestQperfValue(t *testing.T) {
	tests := []struct {
		key, num, unit string
		want           float64
		wantErr        string // "" for no error, else a part of it
	}{
		{"latency", "15.3", "us", 15.3e-6, ""},
		{"latency", "980", "ms", 0.98, ""},
		{"time", "1", "sec", 1, ""},
		{"latency", "0", "ns", 0, ""},
		{"bw", "3.36", "GB/sec", 3.36e9 * 8, ""},
		{"recv_bw", "37.7", "MB/sec", 37.7e6 * 8, ""},
		{"bw", "26.9", "Gb/sec", 26.9e9, ""},
		{"msg_rate", "588", "K/sec", 588e3, ""},
		{"msg_rate", "346", "/sec", 346, ""},
		{"msg_size", "64", "KiB (65,536)", 65536, ""},
		{"msg_size", "1", "MiB (1,048,576)", 1 << 20, ""},
		{"msg_size", "1.23", "MB", 1.23e6, ""},
		{"msg_size", "1", "bytes", 1, ""},
		{"port", "30,766", "", 30766, ""},
		{"send_msgs", "1.2", "million", 1.2e6, ""},
		{"send_cpus_used", "98", "% cpus", 0.98, ""},
		{"send_cost", "50.9", "sec/GB", 50.9e-9, ""},
		{"send_bytes", "1.47", "GB", 1.47e9, ""}, // decimal prefixes (22,488 x 65,536 bytes)
		{"some_new_key", "5", "us", 5e-6, ""},    // no rule: any known unit
		{"bw", "3.36", "XB/sec", 0, `unknown unit "XB/sec"`},
		{"latency", "-1", "us", 0, "bad number"},
		{"latency", "1e3", "us", 0, "bad number"},
		{"latency", "Inf", "us", 0, "bad number"},
		{"time", "NaN", "sec", 0, "bad number"},
		{"time", "0x10", "sec", 0, "bad number"},
		{"time", "1.2.3", "sec", 0, "bad number"},
		{"msg_size", "64", "KiB (x)", 0, "unknown unit"},
		{"msg_size", "1.5", "KiB (1,536)", 1536, ""},
		{"msg_size", "xyz", "KiB (65,536)", 0, `bad number "xyz"`},
		{"msg_size", "64", "KiB (1,024)", 0, "64 KiB does not match its exact count 1,024"},
		{"msg_size", "64", "KiB (" + strings.Repeat("9", 400) + ")", 0, "bad number"},
		{"bw", strings.Repeat("9", 400), "TB/sec", 0, "bad number"},
		// A unit of the wrong kind for its key.
		{"latency", "5", "GB/sec", 0, `latency must be a time, and "GB/sec" is a bandwidth`},
		{"latency", "5", "% cpus", 0, `latency must be a time, and "% cpus" is a CPU share`},
		{"latency", "5", "", 0, `latency must be a time, and "" is a count`},
		{"bw", "5", "us", 0, `bw must be a bandwidth, and "us" is a time`},
		{"send_bw", "5", "K/sec", 0, `send_bw must be a bandwidth, and "K/sec" is a message rate`},
		{"recv_bw", "5", "GB", 0, `recv_bw must be a bandwidth, and "GB" is a size`},
		{"msg_rate", "5", "GB/sec", 0, `msg_rate must be a message rate, and "GB/sec" is a bandwidth`},
		{"msg_size", "5", "sec", 0, `msg_size must be a size, and "sec" is a time`},
		{"port", "5", "ms", 0, `port must be a count, and "ms" is a time`},
		{"send_cpus_used", "5", "sec/GB", 0, `send_cpus_used must be a CPU share`},
		{"recv_cost", "5", "MB/sec", 0, `recv_cost must be a cost per GB`},
		{"loc_real_time", "5", "KiB (5,120)", 0, `loc_real_time must be a time, and "KiB" is a size`},
	}
	for _, tt := range tests {
		got, err := qperfValue(tt.key, tt.num, tt.unit)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("qperfValue(%q, %q, %q) = %v, %v; want error with %q", tt.key, tt.num, tt.unit, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("qperfValue(%q, %q, %q): %v", tt.key, tt.num, tt.unit, err)
			continue
		}
		if math.Abs(got-tt.want) > 1e-9*math.Abs(tt.want) {
			t.Errorf("qperfValue(%q, %q, %q) = %v, want %v", tt.key, tt.num, tt.unit, got, tt.want)
		}
	}
}

func TestQperfSizeMatches(t *testing.T) {
	tests := []struct {
		printed float64
		want    uint64
		match   bool
	}{
		{1.23e6, 1234567, true}, // "1.23 MB"
		{70e3, 70000, true},     // "70 KB"
		{1.5e3, 1500, true},
		{65536, 65536, true},
		{1, 1, true},
		{2048, 1, false},
		{64, 512, false},
		{1e3, 1024, false}, // 1,000 is "1 KB", 1,024 "1 KiB (1,024)"
	}
	for _, tt := range tests {
		if got := qperfSizeMatches(tt.printed, tt.want); got != tt.match {
			t.Errorf("qperfSizeMatches(%v, %d) = %v, want %v", tt.printed, tt.want, got, tt.match)
		}
	}
}

func TestParsePingVariants(t *testing.T) {
	tests := []struct {
		name     string
		stdout   string
		exit     int
		wantErr  measurev1.Status
		wantLoss float64
		wantDups uint32
	}{
		{"ipg/ewma and pipe on the rtt line",
			"64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.056 ms\n64 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.004 ms\n" +
				"2 packets transmitted, 2 received, 0% packet loss, time 1ms\nrtt min/avg/max/mdev = 0.004/0.030/0.056/0.026 ms, pipe 2, ipg/ewma 0.428/0.049 ms\n",
			0, measurev1.Status_STATUS_OK, 0, 0},
		{"duplicates, corrupted and errors",
			"64 bytes from 10.0.0.2: icmp_seq=1 ttl=63 time=1.00 ms\n64 bytes from 10.0.0.2: icmp_seq=1 ttl=63 time=3.00 ms (DUP!)\n" +
				"64 bytes from 10.0.0.2: icmp_seq=2 ttl=63 time=2.00 ms (BAD CHECKSUM!)\n64 bytes from 10.0.0.2: icmp_seq=3 ttl=63 time=2.00 ms\n" +
				"From 10.0.0.1 icmp_seq=4 Destination Host Unreachable\nFrom 10.0.0.1 icmp_seq=4 Destination Host Unreachable\n" +
				"64 bytes from 10.0.0.2: icmp_seq=4 ttl=63 time=2.00 ms\n" +
				"4 packets transmitted, 3 received, +1 duplicates, +1 corrupted, +2 errors, 25% packet loss, time 3003ms\nrtt min/avg/max/mdev = 1.000/2.000/3.000/0.500 ms\n",
			1, measurev1.Status_STATUS_OK, 0.25, 1},
		{"no probe sent", "0 packets transmitted, 0 received\n", 1, measurev1.Status_STATUS_TOOL_ERROR, 0, 0},
		{"zero rtt", "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=0.000 ms\n1 packets transmitted, 1 received, 0% packet loss, time 0ms\nrtt min/avg/max/mdev = 0.000/0.000/0.000/0.000 ms\n",
			0, measurev1.Status_STATUS_PARSE_ERROR, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParsePing(proc.Output{Stdout: []byte(tt.stdout), ExitCode: tt.exit})
			if tt.wantErr != measurev1.Status_STATUS_OK {
				if f := asFailure(err); err == nil || f.Status != tt.wantErr {
					t.Fatalf("ParsePing = %v, %v; want %v", m, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePing: %v", err)
			}
			if m.GetLossRatio() != tt.wantLoss || m.GetDuplicates() != tt.wantDups || m.GetRttAvgSeconds() <= 0 {
				t.Errorf("ParsePing = %v", m)
			}
		})
	}
}

// TestParsePingMedian covers the median of the per-reply lines and how
// strictly they are read.
func TestParsePingMedian(t *testing.T) {
	reply := func(seq int, rest string) string {
		return fmt.Sprintf("64 bytes from 127.0.0.1: icmp_seq=%d ttl=64 %s\n", seq, rest)
	}
	sum := func(tx, rx int, extra, figs string) string {
		return fmt.Sprintf("\n--- 127.0.0.1 ping statistics ---\n%d packets transmitted, %d received%s, 0%% packet loss, time 814ms\nrtt min/avg/max/mdev = %s ms\n",
			tx, rx, extra, figs)
	}
	const head = "PING 127.0.0.1 (127.0.0.1) 56(84) bytes of data.\n"
	tests := []struct {
		name       string
		stdout     string
		wantMedian float64 // seconds, when wantMsg is ""
		wantMsg    string  // part of the PARSE_ERROR message
	}{
		{"odd count: the middle reply",
			head + reply(1, "time=0.040 ms") + reply(2, "time=0.050 ms") + reply(3, "time=0.036 ms") + sum(3, 3, "", "0.036/0.042/0.050/0.005"),
			40e-6, ""},
		{"even count: the mean of the middle two",
			head + reply(1, "time=0.023 ms") + reply(2, "time=0.069 ms") + reply(3, "time=0.049 ms") + reply(4, "time=0.052 ms") + sum(4, 4, "", "0.023/0.048/0.069/0.016"),
			50.5e-6, ""},
		{"duplicates left out",
			head + reply(1, "time=0.010 ms") + reply(1, "time=0.090 ms (DUP!)") + reply(2, "time=0.020 ms") + reply(3, "time=0.030 ms") + sum(3, 3, ", +1 duplicates", "0.010/0.037/0.090/0.031"),
			20e-6, ""},
		{"corrupted left out, even outside min..max",
			head + reply(1, "time=0.010 ms") + reply(2, "time=9.000 ms (BAD CHECKSUM!)") + reply(2, "time=0.020 ms") + reply(3, "time=0.030 ms") + sum(3, 3, ", +1 corrupted", "0.010/0.020/0.030/0.008"),
			20e-6, ""},
		{"a truncated reply counts as received, without a time",
			head + reply(1, "time=0.010 ms") + reply(2, "(truncated)") + reply(3, "time=0.030 ms") + sum(3, 3, "", "0.010/0.020/0.030/0.010"),
			20e-6, ""},
		{"every reply truncated",
			head + reply(1, "(truncated)") + sum(1, 1, "", "0.010/0.010/0.010/0.000"),
			0, "1 replies but none with a time"},
		{"IPv6, no ttl, different address, wrong data lines",
			"PING ::1(::1) 56 data bytes\n64 bytes from ::1: icmp_seq=1 time=0.040 ms\n64 bytes from ::1: icmp_seq=2 ttl=64 time=0.050 ms (DIFFERENT ADDRESS!)\n" +
				"wrong data byte #8 should be 0x8 but was 0x9\n#8\t9 9 a b\n" + sum(2, 2, "", "0.040/0.045/0.050/0.005"),
			45e-6, ""},
		{"reply times rounded above 10 ms and 100 ms",
			head + reply(1, "time=12.3 ms") + reply(2, "time=123 ms") + reply(3, "time=99.9 ms") + sum(3, 3, ", +0 errors", "12.345/78.455/123.400/46.101"),
			99.9e-3, ""},
		{"1-decimal time more than its rounding below min",
			head + reply(1, "time=12.2 ms") + sum(1, 1, "", "12.345/12.345/12.345/0.000"),
			0, "echo reply icmp_seq=1 time 12.2 ms is outside the summary's rtt min..max 12.345..12.345 ms"},
		{"a duplicate above the summary's max",
			head + reply(1, "time=0.010 ms") + reply(1, "time=0.090 ms (DUP!)") + sum(1, 1, ", +1 duplicates", "0.010/0.010/0.010/0.000"),
			0, "echo reply icmp_seq=1 time 0.090 ms is outside"},
		{"garbled time", head + reply(1, "time=0.0.4 ms") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply icmp_seq=1 time: "0.0.4" is not a plain decimal`},
		{"negative time", head + reply(1, "time=-0.040 ms") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply icmp_seq=1 time: "-0.040" is not a plain decimal`},
		{"empty time", head + reply(1, "time= ms") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply icmp_seq=1 time: "" is not a plain decimal`},
		{"time in another unit", head + reply(1, "time=40 us") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply line not in iputils ping's form: "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64 time=40 us"`},
		{"unknown flag", head + reply(1, "time=0.040 ms (WEIRD!)") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, "echo reply line not in iputils ping's form"},
		{"no time, not truncated", head + "64 bytes from 127.0.0.1: icmp_seq=1 ttl=64\n" + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, "echo reply icmp_seq=1 has no time"},
		{"garbled icmp_seq", head + "64 bytes from 127.0.0.1: icmp_seq=1x ttl=64 time=0.040 ms\n" + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply icmp_seq "1x" is not a sequence number (0..65535)`},
		{"icmp_seq above 16 bits", head + reply(65536, "time=0.040 ms") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply icmp_seq "65536" is not a sequence number`},
		{"ttl above 255", head + "64 bytes from 127.0.0.1: icmp_seq=1 ttl=256 time=0.040 ms\n" + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, `echo reply icmp_seq=1 ttl "256" is not a hop limit (0..255)`},
		{"more reply lines than received",
			head + reply(1, "time=0.040 ms") + reply(2, "time=0.040 ms") + sum(2, 1, "", "0.040/0.040/0.040/0.000"),
			0, "1 received in the summary but 2 echo reply lines"},
		{"fewer reply lines than received",
			head + reply(1, "time=0.040 ms") + sum(2, 2, "", "0.040/0.040/0.040/0.000"),
			0, "2 received in the summary but 1 echo reply lines"},
		{"a (DUP!) line the summary does not count",
			head + reply(1, "time=0.040 ms") + reply(1, "time=0.040 ms (DUP!)") + sum(1, 1, "", "0.040/0.040/0.040/0.000"),
			0, "1 echo reply lines marked (DUP!) but 0 duplicates in the summary"},
		{"a corrupted count without its line",
			head + reply(1, "time=0.040 ms") + sum(1, 1, ", +1 corrupted", "0.040/0.040/0.040/0.000"),
			0, "0 echo reply lines marked (BAD CHECKSUM!) but 1 corrupted in the summary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := ParsePing(proc.Output{Stdout: []byte(tt.stdout)})
			if tt.wantMsg != "" {
				f := asFailure(err)
				if err == nil || f.Status != measurev1.Status_STATUS_PARSE_ERROR || !strings.Contains(f.Message, tt.wantMsg) {
					t.Fatalf("ParsePing = %v, %v; want a parse error with %q", m, err, tt.wantMsg)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePing: %v", err)
			}
			if m.RttMedianSeconds == nil || *m.RttMedianSeconds != tt.wantMedian {
				t.Errorf("median = %v s, want %v s (%v)", m.GetRttMedianSeconds(), tt.wantMedian, m)
			}
		})
	}
}

// TestParseIperf3UDPEnds: UDP end sums of iperf3's versions and of paths
// that died during a test, each figure computed by hand. 3.12's receiver
// packets is the last sequence number that arrived and lost_packets the
// gaps below it, so a tail the sender sent after it is lost too
// (esnet/iperf#698); iperf3 before 3.11 prints end.sum alone, the
// sender's figures (esnet/iperf#1174), which cannot show that tail: a
// TOOL_ERROR that says so, not a result.
func TestParseIperf3UDPEnds(t *testing.T) {
	tests := []struct {
		name, end  string
		want       string // the metrics in text form
		wantStatus measurev1.Status
		wantNote   string
	}{
		{"3.12, gaps only",
			`"sum_sent":{"seconds":1,"bytes":1000,"bits_per_second":8000,"packets":10},
			 "sum_received":{"seconds":1,"bytes":900,"bits_per_second":7200,"jitter_ms":0.5,"lost_packets":1,"packets":10,"lost_percent":10}`,
			// 1 of 10 lost; 900 bytes x 8 / 1 s.
			`throughput_bps:7200 sender_throughput_bps:8000 jitter_seconds:0.0005 lost_packets:1 packets:10 loss_ratio:0.1 bytes_sent:1000 bytes_received:900 duration_seconds:1`,
			measurev1.Status_STATUS_OK, ""},
		{"3.12, the path died at 40%",
			`"sum_sent":{"seconds":10,"bytes":1000000,"bits_per_second":800000,"packets":1000},
			 "sum_received":{"seconds":10,"bytes":400000,"bits_per_second":320000,"packets":400,"lost_packets":0,"lost_percent":0}`,
			// 600 sent after the last that arrived: 600 of 1000 lost.
			`throughput_bps:320000 sender_throughput_bps:800000 lost_packets:600 packets:1000 loss_ratio:0.6 bytes_sent:1000000 bytes_received:400000 duration_seconds:10`,
			measurev1.Status_STATUS_OK, "the last 600 datagrams sent never arrived"},
		{"3.12, gaps and a lost tail",
			`"sum_sent":{"seconds":2,"bytes":100000,"bits_per_second":400000,"packets":100},
			 "sum_received":{"seconds":2,"bytes":70000,"bits_per_second":280000,"packets":80,"lost_packets":10,"lost_percent":12.5}`,
			// 10 gaps + 20 tail = 30 of 100.
			`throughput_bps:280000 sender_throughput_bps:400000 lost_packets:30 packets:100 loss_ratio:0.3 bytes_sent:100000 bytes_received:70000 duration_seconds:2`,
			measurev1.Status_STATUS_OK, "counted lost with the 10 gaps"},
		{"3.12, all lost but the tail count",
			`"sum_sent":{"seconds":1,"bytes":1000,"bits_per_second":8000,"packets":10},
			 "sum_received":{"seconds":1,"bytes":0,"bits_per_second":0,"packets":3,"lost_packets":3,"lost_percent":100}`,
			``, measurev1.Status_STATUS_UNREACHABLE, "the last 7 datagrams sent never arrived"},
		{"3.9: end.sum alone",
			`"sum":{"start":0,"end":2,"seconds":2,"bytes":200000,"bits_per_second":800000,"jitter_ms":0.25,"lost_packets":50,"packets":200,"lost_percent":25,"sender":true}`,
			``, measurev1.Status_STATUS_TOOL_ERROR, "iperf 3.x prints a UDP test's end.sum only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout := `{"start":{"version":"iperf 3.x"},"end":{` + tt.end + `}}`
			m, note, err := parseIperf3(measurev1.Test_TEST_IPERF3_UDP, proc.Output{Stdout: []byte(stdout)})
			if tt.wantStatus != measurev1.Status_STATUS_OK {
				var f *Failure
				if !errors.As(err, &f) || f.Status != tt.wantStatus || !strings.Contains(f.Message, tt.wantNote) {
					t.Fatalf("err = %v, want %v saying %q", err, tt.wantStatus, tt.wantNote)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := testutil.ProtoText(m); got != tt.want {
				t.Errorf("metrics\n got %s\nwant %s", got, tt.want)
			}
			if !strings.Contains(note, tt.wantNote) || (tt.wantNote == "") != (note == "") {
				t.Errorf("note %q, want one saying %q", note, tt.wantNote)
			}
		})
	}
}

// TestParseIperf3TCPReceivedOverSent: the receiver's sum comes from the
// server, another node: a TCP receiver that claims more bytes than the
// client sent is refused, whatever its rate.
func TestParseIperf3TCPReceivedOverSent(t *testing.T) {
	tests := []struct {
		name, end  string
		wantStatus measurev1.Status
	}{
		{"received all", `"sum_sent":{"seconds":1,"bytes":1000000,"bits_per_second":8e6},
			"sum_received":{"seconds":1,"bytes":1000000,"bits_per_second":8e6}`, measurev1.Status_STATUS_OK},
		{"received 10,000 times more", `"sum_sent":{"seconds":1,"bytes":100000,"bits_per_second":8e5},
			"sum_received":{"seconds":1,"bytes":1000000000,"bits_per_second":8e9}`, measurev1.Status_STATUS_PARSE_ERROR},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout := `{"start":{"version":"iperf 3.x"},"end":{` + tt.end + `}}`
			_, _, err := parseIperf3(measurev1.Test_TEST_IPERF3_TCP, proc.Output{Stdout: []byte(stdout)})
			var f *Failure
			switch {
			case tt.wantStatus == measurev1.Status_STATUS_OK && err != nil:
				t.Fatalf("err = %v, want none", err)
			case tt.wantStatus != measurev1.Status_STATUS_OK && (!errors.As(err, &f) || f.Status != tt.wantStatus || !strings.Contains(f.Message, "cannot get more than was sent")):
				t.Fatalf("err = %v, want %v", err, tt.wantStatus)
			}
		})
	}
}

func TestClassifyText(t *testing.T) {
	tests := []struct {
		in   string
		want measurev1.Status
	}{
		{"the server is busy running a test. try again later", measurev1.Status_STATUS_BUSY},
		{"unable to connect to server: Connection refused", measurev1.Status_STATUS_REFUSED},
		{"unable to connect to server: No route to host", measurev1.Status_STATUS_UNREACHABLE},
		{"ping: connect: Network is unreachable", measurev1.Status_STATUS_UNREACHABLE},
		{"From 10.0.0.1 icmp_seq=1 Destination Host Unreachable", measurev1.Status_STATUS_UNREACHABLE},
		{"unable to connect to server: Connection timed out", measurev1.Status_STATUS_TIMEOUT},
		{"control socket has closed unexpectedly", measurev1.Status_STATUS_UNSPECIFIED},
	}
	for _, tt := range tests {
		if got := classifyText(tt.in); got != tt.want {
			t.Errorf("classifyText(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
