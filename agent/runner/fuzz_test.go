package runner

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/agent/proc"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The fuzzers feed tool output (stdout, stderr, exit status, how the run
// ended, whether proc truncated it) and a spec built from fuzzed numbers to
// the same code the runner uses, resultsOf, and check checkResults' rules:
// never a panic, a status on every result, OK results with metrics and no
// NaN, Inf or negative figure (ping min <= avg <= max and transmitted <=
// count, ordered curl timings, iperf3 lost <= packets), failed results
// with no metrics and a message that is not empty and does not start with
// punctuation; and a failed parse of truncated output says so. The public
// parser (ParsePing, ...) is called on the same output: its failure, if
// any, follows the same message rules.

// fuzzTests lists the tests each fuzzer may pick from.
var fuzzTests = map[measurev1.Tool][]measurev1.Test{
	measurev1.Tool_TOOL_PING:   {measurev1.Test_TEST_PING},
	measurev1.Tool_TOOL_QPERF:  {measurev1.Test_TEST_QPERF_TCP_LAT, measurev1.Test_TEST_QPERF_TCP_BW, measurev1.Test_TEST_QPERF_UDP_LAT, measurev1.Test_TEST_QPERF_UDP_BW},
	measurev1.Tool_TOOL_IPERF3: {measurev1.Test_TEST_IPERF3_TCP, measurev1.Test_TEST_IPERF3_UDP},
	measurev1.Tool_TOOL_CURL:   {measurev1.Test_TEST_HTTP},
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
// sizes (little-endian uint32s) for qperf; invalid sizes give the default.
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
