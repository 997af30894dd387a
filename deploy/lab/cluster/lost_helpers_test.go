package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// Helpers of TestNoResultLostOnCoordinatorKill: reading runs, results,
// the agents' logs and the lab's processes.

// getRun returns a run with its planned tests.
func getRun(t *testing.T, ctx context.Context, e *env, runID string) *measurev1.Run {
	t.Helper()
	client, conn, err := e.c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	resp, err := client.GetRun(ctx, &meshv1.GetRunRequest{RunId: runID})
	if err != nil {
		t.Fatalf("get run %s: %v", runID, err)
	}
	return resp.GetRun()
}

// runResults returns every stored result of a run, page by page.
func runResults(t *testing.T, ctx context.Context, e *env, runID string) []*measurev1.Result {
	t.Helper()
	client, conn, err := e.c.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	var out []*measurev1.Result
	token := ""
	for {
		resp, err := client.ListResults(ctx, &meshv1.ListResultsRequest{RunId: runID, PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatalf("results of run %s: %v", runID, err)
		}
		out = append(out, resp.GetResults()...)
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// resultsByTest groups results by test ID.
func resultsByTest(res []*measurev1.Result) map[string][]*measurev1.Result {
	m := map[string][]*measurev1.Result{}
	for _, r := range res {
		m[r.GetTestId()] = append(m[r.GetTestId()], r)
	}
	return m
}

// realResults says what is wrong with a test's stored results for a test
// whose agent sent its answer: "" if there are some and none is an
// interrupted placeholder.
func realResults(rs []*measurev1.Result) string {
	if len(rs) == 0 {
		return "no result"
	}
	for _, r := range rs {
		if r.GetStatus() == measurev1.Status_STATUS_INTERRUPTED {
			return fmt.Sprintf("an interrupted placeholder (%q)", r.GetMessage())
		}
	}
	return ""
}

// Messages of the agent's log about client results.
const (
	msgSent    = "result sent"
	msgSpooled = "result spooled until the next session with the coordinator"
	msgAcked   = "results acknowledged"
	msgBacklog = "result backlog read"
	msgStarted = "client run started"
	msgPut     = "result put in the spool"
)

// agentLine is one line of an agent's log about client results.
type agentLine struct {
	msg    string
	testID string // run-relative: the part after "RUN_ID/"
	resent bool
	// n is what an msgAcked line says the spool holds, or how many results
	// an msgBacklog line says the agent sends again; -1 otherwise.
	n int
}

var logAttrRE = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S*)`)

// agentLines returns the lines about client results in node's agent log,
// from byte offset on; with runID set, only those of that run (and no
// msgAcked or msgBacklog line, which name no test).
func agentLines(t *testing.T, e *env, node string, offset int64, runID string) []agentLine {
	t.Helper()
	f, err := os.Open(e.c.LogPath(node))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var out []agentLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		attrs := map[string]string{}
		for _, m := range logAttrRE.FindAllStringSubmatch(sc.Text(), -1) {
			v := m[2]
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			attrs[m[1]] = v
		}
		l := agentLine{msg: attrs["msg"], resent: attrs["resent"] == "true", n: -1}
		switch l.msg {
		case msgSent, msgSpooled, msgStarted, msgPut:
		case msgAcked, msgBacklog:
			if runID != "" {
				continue
			}
			key := "spooled"
			if l.msg == msgBacklog {
				key = "results"
			}
			if l.n, err = strconv.Atoi(attrs[key]); err != nil {
				t.Fatalf("%s's log: %q: %s: %v", node, sc.Text(), key, err)
			}
		default:
			continue
		}
		run, test, _ := strings.Cut(attrs["work_id"], "/")
		if runID != "" && run != runID {
			continue
		}
		l.testID = test
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// spoolAcknowledged says why an agent's log lines since the restart do not
// show its spool emptied: "" once it has registered, read its backlog, sent
// all of it again, and an acknowledgement after the last result it sent
// left its spool empty (or it had nothing to send).
func spoolAcknowledged(lines []agentLine) string {
	backlog, resent, empty := -1, 0, true
	for _, l := range lines {
		switch l.msg {
		case msgBacklog: // a new session: it sends its whole backlog again
			backlog, resent, empty = l.n, 0, l.n == 0
		case msgSent:
			if l.resent {
				resent++
			}
			empty = false
		case msgAcked:
			empty = l.n == 0
		}
	}
	switch {
	case backlog < 0:
		return "its agent has not read its backlog since the restart"
	case resent < backlog:
		return fmt.Sprintf("its agent sent %d of its %d spooled results again", resent, backlog)
	case !empty:
		return "its spool is not acknowledged empty since its last resend"
	}
	return ""
}

// logSizes returns the size of each agent's log file, by node.
func logSizes(t *testing.T, e *env) map[string]int64 {
	t.Helper()
	sizes := map[string]int64{}
	for _, n := range e.lab.Nodes {
		fi, err := os.Stat(e.c.LogPath(n.Name))
		if err != nil {
			t.Fatal(err)
		}
		sizes[n.Name] = fi.Size()
	}
	return sizes
}

// labProc is a process in one of a lab node's namespaces.
type labProc struct {
	node string
	pid  int
	argv []string
}

func (p labProc) String() string {
	return fmt.Sprintf("%s pid %d: %s", p.node, p.pid, strings.Join(p.argv, " "))
}

// clientProcs lists the test clients of the given tools (ping, iperf3 -c,
// qperf with -t, curl) running in the host or pod namespace of any node of
// e's lab; tool probes (--version, -V) and servers are left out.
func clientProcs(t *testing.T, e *env, tools ...string) []labProc {
	t.Helper()
	nodes := map[string]string{}
	var paths []string
	for _, n := range e.lab.Nodes {
		for _, path := range []string{n.HostNetNSPath, n.PodNetNSPath} {
			nodes[path] = n.Name
			paths = append(paths, path)
		}
	}
	procs, err := testutil.ProcsInNetNS(paths...)
	if err != nil {
		t.Fatal(err)
	}
	var out []labProc
	for _, p := range procs {
		argv := p.Argv
		tool := filepath.Base(argv[0])
		if !slices.Contains(tools, tool) {
			continue
		}
		var client bool
		switch tool {
		case "ping", "iperf3":
			client = slices.Contains(argv, "-c")
		case "qperf":
			client = slices.Contains(argv, "-t")
		case "curl":
			client = !slices.Contains(argv, "--version")
		}
		if client {
			out = append(out, labProc{node: nodes[p.NetNS], pid: p.PID, argv: argv})
		}
	}
	return out
}

// pollFor waits until cond returns ""; the test fails with cond's last
// answer if it does not within 3 minutes or before ctx ends. The bound only
// turns a hang into a failure.
func pollFor(t *testing.T, ctx context.Context, what string, cond func() string) {
	t.Helper()
	testutil.WaitFor(t, ctx, 3*time.Minute, 50*time.Millisecond, what, cond)
}
