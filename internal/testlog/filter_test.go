package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const pkg = "example.com/p"

// ev builds one go test -json line.
func ev(action, test, output string) string {
	b, err := json.Marshal(event{Action: action, Package: pkg, Test: test, Output: output})
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

// passingPkg is the events of a package whose test TestA passes.
func passingPkg() string {
	return ev("start", "", "") + ev("run", "TestA", "") + ev("output", "TestA", "=== RUN   TestA\n") +
		ev("output", "TestA", "    a_test.go:9: chatter\n") + ev("output", "TestA", "--- PASS: TestA (0.00s)\n") +
		ev("pass", "TestA", "") + ev("output", "", "PASS\n") + ev("output", "", "ok  \t"+pkg+"\t0.01s\n") + ev("pass", "", "")
}

// skipped is a test TestS that skips with reason.
func skipped(reason string) string {
	return ev("run", "TestS", "") + ev("output", "TestS", "=== RUN   TestS\n") +
		ev("output", "TestS", "    s_test.go:12: "+reason+"\n") + ev("output", "TestS", "--- SKIP: TestS (0.00s)\n") + ev("skip", "TestS", "")
}

func TestFilter(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		ci      bool
		want    int
		wantOut []string // lines the output must hold
		notOut  []string // substrings it must not
	}{
		{
			name: "pass", in: passingPkg(), want: 0,
			wantOut: []string{"ok  \t" + pkg + "\t0.01s", "SKIPPED: none"}, notOut: []string{"chatter", "=== RUN", "PASS\n"},
		},
		{
			name: "failure shows its output",
			in: ev("start", "", "") + ev("run", "TestF", "") + ev("output", "TestF", "=== RUN   TestF\n") +
				ev("output", "TestF", "    f_test.go:3: got 1, want 2\n") + ev("output", "TestF", "--- FAIL: TestF (0.00s)\n") +
				ev("fail", "TestF", "") + ev("output", "", "FAIL\n") + ev("output", "", "FAIL\t"+pkg+"\t0.01s\n") + ev("fail", "", ""),
			want:    1,
			wantOut: []string{"    f_test.go:3: got 1, want 2", "--- FAIL: TestF (0.00s)", "FAIL\t" + pkg + "\t0.01s"},
			notOut:  []string{"=== RUN"},
		},
		{
			name: "a passing subtest's output is not shown with its failing parent",
			in: ev("run", "TestP", "") + ev("run", "TestP/ok", "") + ev("output", "TestP/ok", "    p_test.go:1: quiet\n") +
				ev("output", "TestP/ok", "    --- PASS: TestP/ok (0.00s)\n") + ev("pass", "TestP/ok", "") +
				ev("run", "TestP/bad", "") + ev("output", "TestP/bad", "    p_test.go:2: loud\n") +
				ev("output", "TestP/bad", "    --- FAIL: TestP/bad (0.00s)\n") + ev("fail", "TestP/bad", "") +
				ev("output", "TestP", "--- FAIL: TestP (0.00s)\n") + ev("fail", "TestP", "") + ev("fail", "", ""),
			want: 1, wantOut: []string{"    p_test.go:2: loud", "--- FAIL: TestP (0.00s)"}, notOut: []string{"quiet"},
		},
		{
			name: "skip by design is listed, CI passes",
			in:   ev("start", "", "") + skipped("a latency comparison: run it alone") + ev("output", "", "ok  \t"+pkg+"\t0.01s\n") + ev("pass", "", ""),
			ci:   true, want: 0,
			wantOut: []string{"SKIPPED: " + pkg + " TestS: a latency comparison: run it alone"},
		},
		{
			name: "missing tool is listed, passes outside CI",
			in:   skipped("missing tool: tc (iproute2)") + ev("pass", "", ""),
			want: 0, wantOut: []string{"SKIPPED: " + pkg + " TestS: missing tool: tc (iproute2) [missing tool or privilege]"},
		},
		{
			name: "missing tool fails under CI",
			in:   skipped("missing tool: tc (iproute2)") + ev("pass", "", ""),
			ci:   true, want: 1,
			wantOut: []string{"FAIL: 1 skipped for a missing tool or privilege; CI (CI=true) runs them all"},
		},
		{
			name: "missing root fails under CI, in a subtest",
			in: ev("run", "TestR", "") + ev("run", "TestR/lab", "") + ev("output", "TestR/lab", "=== RUN   TestR/lab\n") +
				ev("output", "TestR/lab", "    r_test.go:5: needs root: the lab creates network namespaces\n") +
				ev("output", "TestR/lab", "    --- SKIP: TestR/lab (0.00s)\n") + ev("skip", "TestR/lab", "") +
				ev("output", "TestR", "--- PASS: TestR (0.00s)\n") + ev("pass", "TestR", "") + ev("pass", "", ""),
			ci: true, want: 1,
			wantOut: []string{"SKIPPED: " + pkg + " TestR/lab: needs root: the lab creates network namespaces [missing tool or privilege]"},
		},
		{
			name: "free text that merely mentions root is by design",
			in:   skipped("qperf's child died with its parent: nothing left to reclaim (needs root: no)") + ev("pass", "", ""),
			ci:   true, want: 0,
		},
		{
			name: "a multi-line reason keeps its continuation",
			in: ev("run", "TestS", "") + ev("output", "TestS", "    s_test.go:1: first\n") +
				ev("output", "TestS", "        second\n") + ev("output", "TestS", "--- SKIP: TestS (0.00s)\n") + ev("skip", "TestS", "") + ev("pass", "", ""),
			want: 0, wantOut: []string{"SKIPPED: " + pkg + " TestS: first | second"},
		},
		{
			name: "SkipNow has no reason",
			in:   ev("run", "TestS", "") + ev("output", "TestS", "--- SKIP: TestS (0.00s)\n") + ev("skip", "TestS", "") + ev("pass", "", ""),
			want: 0, wantOut: []string{"SKIPPED: " + pkg + " TestS: (no reason given)"},
		},
		{
			name: "a package whose TestMain ran no test",
			in: ev("start", "", "") + ev("output", "", "skipping end-to-end tests: they need root\n") +
				ev("output", "", "ok  \t"+pkg+"\t0.01s\n") + ev("pass", "", ""),
			want: 0, wantOut: []string{"SKIPPED: " + pkg + ": no test ran: skipping end-to-end tests: they need root"},
		},
		{
			name: "a package whose TestMain ran no test for want of root fails under CI",
			in: ev("output", "", "needs root: the end-to-end tests build network namespaces\n") +
				ev("output", "", "ok  \t"+pkg+"\t0.01s\n") + ev("pass", "", ""),
			ci: true, want: 1,
			wantOut: []string{"SKIPPED: " + pkg + ": no test ran: needs root: the end-to-end tests build network namespaces [missing tool or privilege]"},
		},
		{
			name: "a package without test files is not a skip",
			in:   ev("output", "", "?   \t"+pkg+"\t[no test files]\n") + ev("skip", "", ""),
			want: 0, wantOut: []string{"?   \t" + pkg + "\t[no test files]", "SKIPPED: none"},
		},
		{
			name: "build failure",
			in: `{"ImportPath":"example.com/p [example.com/p.test]","Action":"build-output","Output":"p/a.go:1:1: syntax error\n"}` + "\n" +
				`{"ImportPath":"example.com/p [example.com/p.test]","Action":"build-fail"}` + "\n" +
				`{"Action":"start","Package":"example.com/p"}` + "\n" +
				`{"Action":"output","Package":"example.com/p","Output":"FAIL\texample.com/p [build failed]\n"}` + "\n" +
				`{"Action":"fail","Package":"example.com/p","FailedBuild":"example.com/p [example.com/p.test]"}` + "\n",
			want: 1, wantOut: []string{"p/a.go:1:1: syntax error", "FAIL\texample.com/p [build failed]"},
		},
		{
			name: "a package that never ended (go test killed)",
			in:   ev("run", "TestA", "") + ev("output", "TestA", "    a_test.go:1: before the end\n"),
			want: 1, wantOut: []string{"testlog: " + pkg + " did not finish", "    a_test.go:1: before the end"},
		},
		{name: "no input", in: "", want: 1, wantOut: []string{"testlog: no package in the input"}},
		{
			name: "a line that is not JSON is passed on",
			in:   "go: downloading example.com/x v1.0.0\n" + passingPkg(),
			want: 0, wantOut: []string{"go: downloading example.com/x v1.0.0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			got := filter(strings.NewReader(tt.in), &out, tt.ci)
			if got != tt.want {
				t.Errorf("status %d, want %d; output:\n%s", got, tt.want, out.String())
			}
			lines := strings.Split(out.String(), "\n")
			for _, w := range tt.wantOut {
				if !contains(lines, w) {
					t.Errorf("output lacks the line %q:\n%s", w, out.String())
				}
			}
			for _, n := range tt.notOut {
				if strings.Contains(out.String(), n) {
					t.Errorf("output holds %q:\n%s", n, out.String())
				}
			}
		})
	}
}

func contains(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestFilterRealGoTest runs go test -json on testdata/sample (a test that
// passes, one that skips by design, one that skips for a missing tool and
// one that fails) and filters it: the real format of this Go release, not
// a hand-written one.
func TestFilterRealGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not in PATH (the test runs go test)")
	}
	cmd := exec.Command(goBin, "test", "-json", "-count=1", "./testdata/sample")
	cmd.Env = append(os.Environ(), "MESHPERF_TESTLOG_SAMPLE=1")
	raw, _ := cmd.Output() // exits 1: TestFails fails
	const sample = "github.com/meshperf/meshperf/internal/testlog/testdata/sample"
	for _, ci := range []bool{false, true} {
		var out bytes.Buffer
		if got := filter(bytes.NewReader(raw), &out, ci); got != 1 {
			t.Errorf("ci=%t: status %d, want 1 (TestFails fails)", ci, got)
		}
		lines := strings.Split(out.String(), "\n")
		for _, w := range []string{
			"SKIPPED: " + sample + " TestByDesign: runs alone: set MESHPERF_SAMPLE_ALONE=1",
			"SKIPPED: " + sample + " TestNeedsTool: missing tool: meshperf-no-such-tool (the sample's hint) [missing tool or privilege]",
			"    sample_test.go:34: the failure's own words",
			"FAIL\t" + sample + "\t", // prefix: the elapsed time follows
		} {
			found := contains(lines, w)
			for _, l := range lines {
				found = found || strings.HasSuffix(w, "\t") && strings.HasPrefix(l, w)
			}
			if !found {
				t.Errorf("ci=%t: output lacks %q:\n%s", ci, w, out.String())
			}
		}
		for _, quiet := range []string{"passing chatter", "subtest chatter"} {
			if strings.Contains(out.String(), quiet) {
				t.Errorf("ci=%t: a passing test's log %q is shown:\n%s", ci, quiet, out.String())
			}
		}
	}
}
