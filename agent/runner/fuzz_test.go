package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// The fuzzers feed tool output (stdout, stderr, exit status, how the run
// ended, whether proc truncated it) and a spec built from fuzzed numbers to
// the same code the runner uses, resultsOf, and check checkResults' rules:
// never a panic, a status on every result, OK results with metrics and no
// NaN, Inf or negative figure (ping min <= avg <= max, a median within
// min..max up to ping's rounding, transmitted <= count; ordered curl
// timings; iperf3 lost <= packets), failed results with no metrics and a
// message that is not empty and does not start with punctuation; and a
// failed parse of truncated output says so. The public parser (ParsePing,
// ...) is called on the same output: its failure, if any, follows the
// same message rules; and issue 11's properties hold (checkHonest:
// fuzz_sources_test.go). FuzzPingMedian checks the ping median against a
// reference on well-formed output.

// fuzzTests lists the tests each fuzzer may pick from.
var fuzzTests = map[measurev1.Tool][]measurev1.Test{
	measurev1.Tool_TOOL_PING:   {measurev1.Test_TEST_PING},
	measurev1.Tool_TOOL_QPERF:  {measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_TCP_BW, measurev1.Test_TEST_QPERF_UDP_LAT, measurev1.Test_TEST_QPERF_UDP_BW},
	measurev1.Tool_TOOL_IPERF3: {measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_IPERF3_UDP},
	measurev1.Tool_TOOL_CURL:   {measurev1.Test_TEST_HTTP},
	measurev1.Tool_TOOL_AB:     {measurev1.Test_TEST_HTTP_LOAD},
}

// seedFuzz adds every capture of dir (testdata/<dir>) as a seed.
func seedFuzz(f *testing.F, tool measurev1.Tool, dir string) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.txt"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds in testdata/%s: %v", dir, err)
	}
	for _, path := range files {
		c := readCapture(f, path)
		var test uint8
		for i, t := range fuzzTests[tool] {
			if t == c.spec.GetTest() {
				test = uint8(i)
			}
		}
		var sizes []byte
		for _, s := range c.spec.GetQperf().GetMsgSizeBytes() {
			sizes = binary.LittleEndian.AppendUint32(sizes, uint32(s))
		}
		if p := c.spec.GetHttpLoad(); p != nil {
			for _, x := range []uint32{p.GetRequests(), p.GetConcurrency(), uint32(p.GetTimeout().GetSeconds())} {
				sizes = binary.LittleEndian.AppendUint32(sizes, x)
			}
		}
		var ended uint8
		switch {
		case c.runErr == nil:
		case errors.Is(c.runErr, context.Canceled):
			ended = 2
		default:
			ended = 1
		}
		if c.out.Truncated {
			ended |= 0x80
		}
		f.Add(c.out.Stdout, c.out.Stderr, c.out.ExitCode, ended, test, sizes)
	}
}

// fuzzSpec builds a normalized spec for the test'th test of tool with the
// sizes (little-endian uint32s) for qperf, or for ab requests,
// concurrency and timeout seconds; invalid ones give the default.
func fuzzSpec(tool measurev1.Tool, test uint8, sizes []byte) *measurev1.TestSpec {
	tests := fuzzTests[tool]
	spec := &measurev1.TestSpec{Test: tests[int(test)%len(tests)]}
	if tool == measurev1.Tool_TOOL_QPERF {
		q := &measurev1.QperfParams{}
		for len(sizes) >= 4 {
			q.MsgSizeBytes = append(q.MsgSizeBytes, uint64(binary.LittleEndian.Uint32(sizes)))
			sizes = sizes[4:]
		}
		spec.Params = &measurev1.TestSpec_Qperf{Qperf: q}
	}
	if tool == measurev1.Tool_TOOL_AB {
		var x [3]uint32
		for i := range x {
			if len(sizes) >= 4 {
				x[i], sizes = binary.LittleEndian.Uint32(sizes), sizes[4:]
			}
		}
		spec.Params = &measurev1.TestSpec_HttpLoad{HttpLoad: &measurev1.HttpLoadParams{
			Requests: x[0], Concurrency: x[1], Timeout: &durationpb.Duration{Seconds: int64(x[2])}}}
	}
	n, err := testspec.Normalize(spec)
	if err != nil {
		n, _ = testspec.Normalize(&measurev1.TestSpec{Test: spec.GetTest()})
	}
	return n
}

func fuzzRun(t *testing.T, tool measurev1.Tool, stdout, stderr []byte, exit int, ended, test uint8, sizes []byte) {
	spec := fuzzSpec(tool, test, sizes)
	// ended: the low bits say how the run ended, the top bit that proc
	// truncated the output.
	out := proc.Output{Stdout: stdout, Stderr: stderr, ExitCode: exit, Truncated: ended >= 0x80}
	ended &^= 0x80
	var runErr error
	switch ended % 3 {
	case 1:
		runErr = context.DeadlineExceeded
	case 2:
		runErr = context.Canceled
	}
	results, _ := resultsOf(spec, out, runErr)
	checkResults(t, spec, results)
	checkHonest(t, spec, out, results)
	parsed := runFailure(toolName(spec), out, runErr) == nil // the tool exited by itself
	for _, r := range results {
		if out.Truncated && parsed && r.GetStatus() != measurev1.Status_STATUS_OK &&
			!strings.Contains(r.GetMessage(), "output truncated at 8 MiB") {
			t.Errorf("truncated output, %v without saying so: %q", r.GetStatus(), r.GetMessage())
		}
	}
	if want := max(1, len(spec.GetQperf().GetMsgSizeBytes())); len(results) != want {
		t.Fatalf("%d results for %d sizes", len(results), want)
	}
	// The public parser's own failure follows the same message rule.
	var err error
	switch tool {
	case measurev1.Tool_TOOL_PING:
		_, err = ParsePing(out)
	case measurev1.Tool_TOOL_QPERF:
		_, _, err = ParseQperf(out)
	case measurev1.Tool_TOOL_IPERF3:
		_, err = ParseIperf3(spec.GetTest(), out)
	case measurev1.Tool_TOOL_CURL:
		_, err = ParseCurl(out)
	case measurev1.Tool_TOOL_AB:
		_, _, _, err = ParseAb(out, spec)
	}
	if err != nil {
		checkFailureMessage(t, toolName(spec), err)
		if out.Truncated && !strings.Contains(err.Error(), "output truncated at 8 MiB") {
			t.Errorf("truncated output, parser failure without saying so: %v", err)
		}
	}
}

func FuzzParsePing(f *testing.F) {
	seedFuzz(f, measurev1.Tool_TOOL_PING, "ping")
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, exit int, ended, test uint8, sizes []byte) {
		fuzzRun(t, measurev1.Tool_TOOL_PING, stdout, stderr, exit, ended, test, sizes)
	})
}

func FuzzParseQperf(f *testing.F) {
	seedFuzz(f, measurev1.Tool_TOOL_QPERF, "qperf")
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, exit int, ended, test uint8, sizes []byte) {
		fuzzRun(t, measurev1.Tool_TOOL_QPERF, stdout, stderr, exit, ended, test, sizes)
	})
}

func FuzzParseIperf3(f *testing.F) {
	seedFuzz(f, measurev1.Tool_TOOL_IPERF3, "iperf3")
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, exit int, ended, test uint8, sizes []byte) {
		fuzzRun(t, measurev1.Tool_TOOL_IPERF3, stdout, stderr, exit, ended, test, sizes)
	})
}

func FuzzParseCurl(f *testing.F) {
	seedFuzz(f, measurev1.Tool_TOOL_CURL, "curl")
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, exit int, ended, test uint8, sizes []byte) {
		fuzzRun(t, measurev1.Tool_TOOL_CURL, stdout, stderr, exit, ended, test, sizes)
	})
}

func FuzzParseAb(f *testing.F) {
	seedFuzz(f, measurev1.Tool_TOOL_AB, "ab")
	f.Fuzz(func(t *testing.T, stdout, stderr []byte, exit int, ended, test uint8, sizes []byte) {
		fuzzRun(t, measurev1.Tool_TOOL_AB, stdout, stderr, exit, ended, test, sizes)
	})
}

// FuzzPingMedian prints well-formed iputils ping output for fuzzed reply
// times (3 bytes each, in microseconds) with every dupEvery'th reply a
// duplicate, rounding each time as ping does, and checks that ParsePing
// accepts it and that its median is the median of the printed times of
// the replies that are not duplicates.
func FuzzPingMedian(f *testing.F) {
	f.Add([]byte{40, 0, 0, 50, 0, 0, 36, 0, 0}, uint8(0))
	f.Add([]byte{0x10, 0x27, 0, 0xa0, 0x86, 0x01, 0xe8, 0x03, 0, 0x0f, 0x27, 0}, uint8(2))
	f.Add([]byte{0xff, 0xff, 0xff, 1, 0, 0}, uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, dupEvery uint8) {
		var times []int64 // µs, as ping measured them
		for ; len(data) >= 3 && len(times) < 1000; data = data[3:] {
			times = append(times, 1+int64(data[0])|int64(data[1])<<8|int64(data[2])<<16)
		}
		if len(times) == 0 {
			return
		}
		// printed formats a time as iputils 20221126 prints a reply's.
		printed := func(us int64) (string, int64) {
			switch {
			case us >= 100000-50:
				v := (us + 500) / 1000
				return fmt.Sprintf("%d", v), v * 1000
			case us >= 10000-5:
				v := (us + 50) / 100
				return fmt.Sprintf("%d.%01d", v/10, v%10), v * 100
			case us >= 1000:
				v := (us + 5) / 10
				return fmt.Sprintf("%d.%02d", v/100, v%100), v * 10
			}
			return fmt.Sprintf("%d.%03d", us/1000, us%1000), us
		}
		ms := func(us int64) string { return fmt.Sprintf("%d.%03d", us/1000, us%1000) }
		var b strings.Builder
		b.WriteString("PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n")
		var counted []float64
		var seq, dups int
		tmin, tmax, tsum, tsum2 := times[0], times[0], int64(0), 0.0
		for i, us := range times {
			s, rounded := printed(us)
			dup := dupEvery > 0 && i > 0 && i%int(dupEvery) == 0
			if dup {
				dups++
				fmt.Fprintf(&b, "64 bytes from 10.0.0.2: icmp_seq=%d ttl=63 time=%s ms (DUP!)\n", seq, s)
			} else {
				seq++
				counted = append(counted, float64(rounded))
				fmt.Fprintf(&b, "64 bytes from 10.0.0.2: icmp_seq=%d ttl=63 time=%s ms\n", seq, s)
			}
			tmin, tmax, tsum, tsum2 = min(tmin, us), max(tmax, us), tsum+us, tsum2+float64(us)*float64(us)
		}
		n := int64(len(times))
		avg := tsum / n
		mdev := int64(math.Sqrt(max(0, tsum2/float64(n)-float64(avg)*float64(avg))))
		extra := ""
		if dups > 0 {
			extra = fmt.Sprintf(", +%d duplicates", dups)
		}
		fmt.Fprintf(&b, "\n--- 10.0.0.2 ping statistics ---\n%d packets transmitted, %d received%s, 0%% packet loss, time 1000ms\n", seq, seq, extra)
		fmt.Fprintf(&b, "rtt min/avg/max/mdev = %s/%s/%s/%s ms\n", ms(tmin), ms(avg), ms(tmax), ms(min(mdev, tmax)))
		m, err := ParsePing(proc.Output{Stdout: []byte(b.String())})
		if err != nil {
			t.Fatalf("ParsePing: %v\n%s", err, b.String())
		}
		slices.Sort(counted)
		want := counted[len(counted)/2]
		if len(counted)%2 == 0 {
			want = (counted[len(counted)/2-1] + counted[len(counted)/2]) / 2
		}
		if got := m.GetRttMedianSeconds(); m.RttMedianSeconds == nil || got != want/1e6 {
			t.Errorf("median %v s, want %v s\n%s", got, want/1e6, b.String())
		}
	})
}
