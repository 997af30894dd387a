package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/spool"
	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestNoResultLostOnCoordinatorKill is the acceptance test of "nothing
// lost" (issue 4, part 3): it kills the coordinator with SIGKILL in the
// middle of a run, while a client of the run is running (so its result
// can only reach the agent's spool), keeps the coordinator down until every
// client in the lab has ended, starts it again on the same store, and
// checks that
//
//  1. every result an agent logged as sent or spooled is in the store with
//     its real results (no STATUS_INTERRUPTED placeholder), exactly once
//     per sample index;
//  2. the run ended INTERRUPTED, and every planned test has results: real
//     ones, or a placeholder that says why;
//  3. the run's tests_done and tests_failed agree with the stored results;
//  4. the agent whose client was running at the kill sent its result again
//     after the restart (the spool did its work);
//  5. every agent's spool is empty at the end (the acknowledgements came);
//  6. every heavy (iperf3, qperf) result sent again after the restart is
//     OK: the destination's server of a test in flight at the kill lingers
//     past the end of its agent's session (agent/servers: Linger), so the
//     client is not cut by a connection reset.
//
// Once while the light tests run (a ping is running), once in the heavy
// rounds (an iperf3 or qperf client is running).
func TestNoResultLostOnCoordinatorKill(t *testing.T) {
	for _, tt := range []lostCase{
		{
			name: "light tests",
			trigger: []string{"--tests", "ping,http", "--paths", "host-host,pod-pod",
				"--ping-count", "15", "--repeats", "2"},
			clients: []string{"ping"},
		},
		{
			name: "heavy rounds",
			trigger: []string{"--tests", "ping,http,qperf_tcp_bw,iperf3_tcp", "--paths", "host-host,pod-pod",
				"--duration", "2s", "--ping-count", "3", "--repeats", "1", "--msg-sizes", "64,64K"},
			clients:   []string{"iperf3", "qperf"},
			heavyDone: true,
		},
		{
			// Two samples per test: the resent answer must fill both.
			name: "qperf with two message sizes",
			trigger: []string{"--tests", "qperf_tcp_bw", "--paths", "host-host,pod-pod",
				"--duration", "2s", "--repeats", "1", "--msg-sizes", "64,64K"},
			clients:   []string{"qperf"},
			heavyDone: true,
		},
	} {
		t.Run(tt.name, func(t *testing.T) { killCoordinatorMidRun(t, tt) })
	}
}

// lostCase is one kill of TestNoResultLostOnCoordinatorKill.
type lostCase struct {
	name    string
	trigger []string // trigger's flags
	// clients are the tools of which a client must have just started when
	// the coordinator is killed.
	clients []string
	// heavyDone asks for a stored result of a heavy test before the kill.
	heavyDone bool
}

func killCoordinatorMidRun(t *testing.T, tt lostCase) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Debug: the agents log the acknowledgements they get (check 5).
	e := startEnvWith(t, ctx, lab.Config{Nodes: 3, Mode: lab.ModeHostGW}, t.TempDir(),
		func(c *cluster.Config) { c.AgentLogLevel = "debug" })

	stdout, stderr, err := e.cli(ctx, append([]string{"trigger", "--no-wait"}, tt.trigger...)...)
	if err != nil {
		t.Fatalf("trigger: %v\n%s", err, stderr)
	}
	runID := strings.TrimSpace(stdout)
	run := getRun(t, ctx, e, runID)
	planned := len(run.GetPlanned())
	t.Logf("run %s: %d tests planned", runID, planned)

	// Kill when some but not all tests have results and a client of the run
	// has just started: it was not running at the previous look, so it is
	// far from its end (every client here runs for 2 s or more), and its
	// result can only reach its agent's spool.
	var victim labProc
	seen := map[int]bool{}
	first := true
	pollFor(t, ctx, "a client to start mid-run", func() string {
		procs := clientProcs(t, e, tt.clients...)
		defer func() {
			seen = map[int]bool{}
			for _, p := range procs {
				seen[p.pid] = true
			}
			first = false
		}()
		res := runResults(t, ctx, e, runID)
		tests, heavy := map[string]bool{}, false
		for _, r := range res {
			tests[r.GetTestId()] = true
			heavy = heavy || testspec.IsHeavy(r.GetSpec().GetTest())
		}
		switch {
		case len(tests) == 0:
			return "no result stored yet"
		case tt.heavyDone && !heavy:
			return "no heavy result stored yet"
		case len(tests) == planned:
			t.Fatalf("run %s ended before a client of %v started mid-run; the test needs a longer run", runID, tt.clients)
		}
		for _, p := range procs {
			if !first && !seen[p.pid] {
				victim = p
				return ""
			}
		}
		return fmt.Sprintf("%d of %d tests stored; no new %v client", len(tests), planned, tt.clients)
	})
	killOffsets := logSizes(t, e)
	if err := e.c.StopCoordinator(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("coordinator killed while %s", victim)

	// Down until every client run of the run that an agent started is over
	// and its result is in the agent's spool (the agents' debug log says
	// both; tool processes are no sign: a qperf test with two sizes runs
	// two, and a failure is followed by probes).
	pollFor(t, ctx, "the client runs to end while the coordinator is down", func() string {
		for _, n := range e.lab.Nodes {
			put := map[string]bool{}
			lines := agentLines(t, e, n.Name, 0, runID)
			for _, l := range lines {
				if l.msg == msgPut {
					put[l.testID] = true
				}
			}
			for _, l := range lines {
				if l.msg == msgStarted && !put[l.testID] {
					return fmt.Sprintf("%s's client run %s has no result in the spool yet", n.Name, l.testID)
				}
			}
		}
		return ""
	})
	for _, n := range e.lab.Nodes {
		for _, l := range agentLines(t, e, n.Name, killOffsets[n.Name], runID) {
			t.Logf("while the coordinator was down, %s's agent: %s %s", n.Name, l.msg, l.testID)
		}
	}

	restartOffsets := logSizes(t, e)
	if err := e.c.StartCoordinator(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.c.WaitAgents(ctx, len(e.lab.Nodes)); err != nil {
		t.Fatal(err)
	}

	// Wait until the resends are handled: every result an agent sent or
	// spooled has its real results stored, and every agent that sent
	// results again was told afterwards that its spool is empty.
	var res []*measurev1.Result
	pollFor(t, ctx, "the resent results to be stored and acknowledged", func() string {
		res = runResults(t, ctx, e, runID)
		byTest := resultsByTest(res)
		for _, n := range e.lab.Nodes {
			for _, l := range agentLines(t, e, n.Name, 0, runID) {
				if l.msg != msgSent && l.msg != msgSpooled {
					continue
				}
				if why := realResults(byTest[l.testID]); why != "" {
					return fmt.Sprintf("%s %s %s: %s", n.Name, l.msg, l.testID, why)
				}
			}
			if why := spoolAcknowledged(agentLines(t, e, n.Name, restartOffsets[n.Name], "")); why != "" {
				return n.Name + ": " + why
			}
		}
		return ""
	})

	// 1. One stored result per sample of a test, for every test, and each
	// test's samples are 0..n-1.
	byTest := resultsByTest(res)
	for testID, rs := range byTest {
		idx := map[uint32]int{}
		for _, r := range rs {
			idx[r.GetIndex()]++
		}
		for i := range uint32(len(rs)) {
			if idx[i] != 1 {
				t.Errorf("test %s: %d stored results for sample %d; want exactly one (indexes %v)", testID, idx[i], i, idx)
			}
		}
	}
	sent := map[string]bool{} // run-relative test IDs an agent sent or spooled
	resent, heavyResent := map[string]int{}, map[string]int{}
	for _, n := range e.lab.Nodes {
		for _, l := range agentLines(t, e, n.Name, 0, runID) {
			if l.msg == msgSent || l.msg == msgSpooled {
				sent[l.testID] = true
				if why := realResults(byTest[l.testID]); why != "" {
					t.Errorf("%s's agent logged %q for %s/%s, but the store has %s", n.Name, l.msg, runID, l.testID, why)
				}
			}
		}
		for _, l := range agentLines(t, e, n.Name, restartOffsets[n.Name], runID) {
			if l.msg == msgSent && l.resent {
				resent[n.Name]++
				for _, r := range byTest[l.testID] {
					t.Logf("resent by %s: %s sample %d %v %s->%s: %v %s", n.Name, l.testID, r.GetIndex(),
						r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode(), r.GetStatus(), r.GetMessage())
					if !testspec.IsHeavy(r.GetSpec().GetTest()) {
						continue
					}
					heavyResent[n.Name]++
					// 6. The destination's server lingered past the end of
					// its session with the killed coordinator: the client
					// in flight ended its test well.
					if r.GetStatus() != measurev1.Status_STATUS_OK {
						t.Errorf("heavy test %s sample %d (%v %s->%s), in flight at the kill, ended %v: %s; want OK: its server lingers past the coordinator's end",
							l.testID, r.GetIndex(), r.GetSpec().GetTest(), r.GetSrcNode(), r.GetDstNode(), r.GetStatus(), r.GetMessage())
					}
				}
			}
		}
	}

	// 2. The run ended interrupted; every planned test has results, real
	// or a placeholder with a reason, never both.
	run = getRun(t, ctx, e, runID)
	if run.GetState() != measurev1.RunState_RUN_STATE_INTERRUPTED || run.GetMessage() == "" {
		t.Errorf("run state %v (%q), want RUN_STATE_INTERRUPTED with a reason", run.GetState(), run.GetMessage())
	}
	placeholders, failed := 0, 0
	for _, pt := range run.GetPlanned() {
		rs := byTest[pt.GetTestId()]
		if len(rs) == 0 {
			t.Errorf("planned test %s (%s->%s %v %v) has no result", pt.GetTestId(), pt.GetSrcNode(), pt.GetDstNode(), pt.GetPath(), pt.GetSpec().GetTest())
			continue
		}
		interrupted, bad := 0, false
		for _, r := range rs {
			if r.GetStatus() == measurev1.Status_STATUS_INTERRUPTED {
				interrupted++
				if r.GetMessage() == "" {
					t.Errorf("test %s: interrupted placeholder without a reason", pt.GetTestId())
				}
			}
			bad = bad || r.GetStatus() != measurev1.Status_STATUS_OK
		}
		switch {
		case interrupted > 0 && interrupted < len(rs):
			t.Errorf("test %s mixes %d interrupted placeholders with %d real results", pt.GetTestId(), interrupted, len(rs)-interrupted)
		case interrupted > 0:
			placeholders++
			if sent[pt.GetTestId()] {
				t.Errorf("test %s: an agent sent its result, the store keeps the placeholder", pt.GetTestId()) // also caught above
			}
		default:
			if want := max(len(pt.GetSpec().GetQperf().GetMsgSizeBytes()), 1); len(rs) != want {
				t.Errorf("test %s (%v): %d results, want one per sample: %d", pt.GetTestId(), pt.GetSpec().GetTest(), len(rs), want)
			}
		}
		if bad {
			failed++
		}
	}
	if len(byTest) != planned {
		t.Errorf("results for %d tests, %d planned", len(byTest), planned)
	}

	// 3. The header agrees with the stored results.
	if got := int(run.GetTestsDone()); got != len(byTest) {
		t.Errorf("run header: tests_done %d; %d tests have results", got, len(byTest))
	}
	if got := int(run.GetTestsFailed()); got != failed {
		t.Errorf("run header: tests_failed %d; %d tests have a result that is not OK", got, failed)
	}

	// 4. The spool was used: the victim's agent sent its result again.
	total := 0
	for _, n := range resent {
		total += n
	}
	t.Logf("%d tests planned, %d stored with results, %d still interrupted placeholders, %d failed; %d tests' results sent by agents, %d resent after the restart %v",
		planned, len(byTest)-placeholders, placeholders, failed, len(sent), total, resent)
	if resent[victim.node] == 0 {
		t.Errorf("%s's agent sent no result again after the restart, though its client %s ran when the coordinator was killed", victim.node, victim)
	}
	if tool := filepath.Base(victim.argv[0]); (tool == "iperf3" || tool == "qperf") && heavyResent[victim.node] == 0 {
		t.Errorf("%s's agent sent no heavy result again after the restart, though its %s client %s ran when the coordinator was killed", victim.node, tool, victim)
	}

	// 5. The spools are empty: stop the agents (their files are locked
	// while they run) and open them.
	for _, n := range e.lab.Nodes {
		if err := e.c.StopAgent(n.Name, syscall.SIGTERM); err != nil {
			t.Error(err)
		}
		sp, err := spool.Open(spool.Config{Dir: e.c.StateDir(n.Name)})
		if err != nil {
			t.Errorf("%s's spool: %v", n.Name, err)
			continue
		}
		pending, err := sp.Pending()
		if err != nil {
			t.Errorf("%s's spool: %v", n.Name, err)
		}
		for _, r := range pending {
			t.Errorf("%s's spool still holds %s (%v) after the coordinator stored it", n.Name, r.GetWorkId(), r.GetStatus())
		}
		if d := sp.Dropped(); d > 0 {
			t.Errorf("%s's spool dropped %d results", n.Name, d)
		}
		_ = sp.Close()
	}
}
