package coordinator_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestRogueLateResults: after a coordinator restart interrupted a run,
// late answers are taken only from the node each test's client work went
// to, and only for work it had in flight (the dispatch record outlives
// the restart): a rogue's answers for another node's tests, and the
// source's own answer for a test never dispatched to it, are refused with
// the reason in the log and leave the stored results as they were; the
// source's answers for its tests in flight are stored (an absurd one as
// invalid).
func TestRogueLateResults(t *testing.T) {
	dir := t.TempDir()
	c := runAt(t, dir, coordinator.Config{}, nil)
	ctx := testnet.Ctx(t, time.Minute)
	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	// node-1 keeps its client work in flight; ping needs no server.
	src := playAgent(t, first, dial(t, c.addr, insecureCreds()), "node-1", "127.0.0.1", func(*agentv1.Work) *agentv1.WorkResult { return nil })
	playAgent(t, first, dial(t, c.addr, insecureCreds()), "node-2", "127.0.0.2", nil)
	mesh := meshv1.NewMeshServiceClient(c.socketConn(t))
	// Five pings from node-1: the Gate lets four run on a node at once,
	// so the fifth is never dispatched while the others are in flight.
	// Their echoes 10 s apart give them a deadline of a minute: none
	// ends (and frees a place for the fifth) while the test runs, however
	// slow the machine.
	slow := &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Interval: durationpb.New(10 * time.Second)}}
	trig, err := mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{
		Tests: []*measurev1.TestSpec{{Test: measurev1.Test_TEST_PING, Params: slow}}, Paths: []measurev1.Path{measurev1.Path_PATH_HOST_TO_HOST},
		Pairs: []*measurev1.NodePair{{SrcNode: "node-1", DstNode: "node-2"}}, Repeats: 5,
	}})
	if err != nil {
		t.Fatal(err)
	}
	runID := trig.GetRun().GetRunId()
	if !testutil.Within(20*time.Second, 10*time.Millisecond, func() bool { return len(src.ClientWork()) == 4 }) {
		t.Fatalf("node-1 got client work %v, want 4\n%s", src.ClientWork(), c.logs)
	}
	inFlight := src.ClientWork()
	slices.Sort(inFlight)
	var never string
	for _, pt := range trig.GetRun().GetPlanned() {
		if id := runID + "/" + pt.GetTestId(); !slices.Contains(inFlight, id) {
			never = id
		}
	}
	// The coordinator stops first, its agents still connected: were the
	// agents gone first, the fifth ping could be dispatched to node-1's
	// freed slot after it left and end as AGENT_UNAVAILABLE before the
	// stop.
	c.stop()
	cancelFirst()

	// The restart: the run is interrupted, every test a placeholder.
	c = runAt(t, dir, coordinator.Config{}, nil)
	mesh = meshv1.NewMeshServiceClient(c.socketConn(t))
	before := fakeagent.ResultsByTest(t, ctx, mesh, runID)
	if len(before) != 5 {
		t.Fatalf("after the restart: %d results, want 5 placeholders", len(before))
	}
	for id, r := range before {
		if r.GetStatus() != measurev1.Status_STATUS_INTERRUPTED {
			t.Fatalf("after the restart: %s is %v, want STATUS_INTERRUPTED", id, r.GetStatus())
		}
	}
	testOf := func(workID string) string { return strings.TrimPrefix(workID, runID+"/") }
	answer := func(rtt float64) *measurev1.Result {
		r := absurdPing(rtt)
		r.GetPing().LossRatio = 0
		r.Spec = &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
		return r
	}
	conn := dial(t, c.addr, insecureCreds())

	// A rogue node sends answers for node-1's tests in flight, and node-1
	// one for the test it never got.
	rogue := playAgent(t, ctx, conn, "node-3", "127.0.0.3", nil)
	for _, id := range inFlight[:2] {
		if err := rogue.Send(fakeagent.ClientDone(id, answer(0.001))); err != nil {
			t.Fatal(err)
		}
	}
	src = playAgent(t, ctx, conn, "node-1", "127.0.0.1", nil)
	if err := src.Send(fakeagent.ClientDone(never, answer(0.001))); err != nil {
		t.Fatal(err)
	}
	// Then a flood of answers naming no test, and one of an unknown run:
	// refusals are logged once a minute per node and kind, the others
	// counted (suppressed=N on the next line).
	const flood = 200
	for i := range flood {
		if err := rogue.Send(fakeagent.ClientDone(fmt.Sprintf("junk-%d", i), answer(0.001))); err != nil {
			t.Fatal(err)
		}
	}
	if err := rogue.Send(fakeagent.ClientDone("no-such-run/t1", answer(0.001))); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{
		// The first of a kind per node is logged, in full.
		`msg="late client result refused: from a node that is not its test's source; acknowledged, not stored" node=node-3 suppressed=0 work_id=` + inFlight[0],
		`msg="late client result refused: the test was not in flight on this node (no dispatch record); acknowledged, not stored" node=node-1 suppressed=0 work_id=` + never,
		`msg="late client result of an unknown run; acknowledged, not stored" node=node-3 suppressed=0 work_id=no-such-run/t1`,
	} {
		if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(c.logs.String(), w) }) {
			t.Errorf("log lacks %s\n%s", w, c.logs)
		}
	}
	if n := strings.Count(c.logs.String(), `msg="late client result names no run's test; acknowledged, not stored" node=node-3`); n != 1 {
		t.Errorf("%d log lines for node-3's %d answers that name no test, want 1", n, flood)
	}
	if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool {
		return rogue.Acked(inFlight[0]) && rogue.Acked(inFlight[1]) && rogue.Acked("junk-0") && rogue.Acked(fmt.Sprintf("junk-%d", flood-1)) && src.Acked(never)
	}) {
		t.Errorf("refused answers not acknowledged: the agents would send them forever")
	}
	after := fakeagent.ResultsByTest(t, ctx, mesh, runID)
	for id, r := range before {
		if a := after[id]; a.GetStatus() != r.GetStatus() || a.GetMessage() != r.GetMessage() || a.GetSrcNode() != "node-1" {
			t.Errorf("%s changed: %v, was %v", id, a, r)
		}
	}

	// node-1's own answers for its tests in flight are taken: the record
	// outlived the restart; the absurd one is stored as invalid.
	// Its answer carries a spec of its own and 256 KiB of unknown fields:
	// neither is stored.
	padded := answer(0.001)
	padded.Spec = &measurev1.TestSpec{Test: measurev1.Test_TEST_PING, Params: &measurev1.TestSpec_Ping{Ping: &measurev1.PingParams{Count: 1000}}}
	junk := append([]byte{0xba, 0x3e, 0x80, 0x80, 0x10}, make([]byte, 256<<10)...) // field 999, 256 KiB
	padded.ProtoReflect().SetUnknown(junk)
	padded.GetPing().ProtoReflect().SetUnknown(junk)
	if err := src.Send(fakeagent.ClientDone(inFlight[2], padded)); err != nil {
		t.Fatal(err)
	}
	if err := src.Send(fakeagent.ClientDone(inFlight[3], answer(-5))); err != nil {
		t.Fatal(err)
	}
	var got map[string]*measurev1.Result
	if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool {
		got = fakeagent.ResultsByTest(t, ctx, mesh, runID)
		return got[testOf(inFlight[2])].GetStatus() == measurev1.Status_STATUS_OK && got[testOf(inFlight[3])].GetStatus() == measurev1.Status_STATUS_INVALID
	}) {
		t.Fatalf("node-1's late answers: %v and %v, want OK and INVALID\n%s", got[testOf(inFlight[2])], got[testOf(inFlight[3])], c.logs)
	}
	var planned *measurev1.TestSpec
	for _, pt := range trig.GetRun().GetPlanned() {
		if pt.GetTestId() == testOf(inFlight[2]) {
			planned = pt.GetSpec()
		}
	}
	if r := got[testOf(inFlight[2])]; !proto.Equal(r.GetSpec(), planned) || len(r.ProtoReflect().GetUnknown()) > 0 ||
		len(r.GetPing().ProtoReflect().GetUnknown()) > 0 {
		t.Errorf("late answer stored with spec %v (planned %v) and %d+%d bytes of unknown fields", r.GetSpec(), planned,
			len(r.ProtoReflect().GetUnknown()), len(r.GetPing().ProtoReflect().GetUnknown()))
	}
	if m := got[testOf(inFlight[3])].GetMessage(); !strings.Contains(m, "rtt_min_seconds -5 is negative") {
		t.Errorf("invalid late answer's message %q lacks the reason", m)
	}
	for _, id := range []string{inFlight[0], inFlight[1], never} {
		if s := got[testOf(id)].GetStatus(); s != measurev1.Status_STATUS_INTERRUPTED {
			t.Errorf("%s is %v after the refused answers, want still STATUS_INTERRUPTED", id, s)
		}
	}
	// Answered, its record is gone: the same answer again changes nothing.
	// Its refusal is of a kind logged a moment ago, so it is only counted;
	// an answer of an unknown run sent after it shows it was handled.
	if err := src.Send(fakeagent.ClientDone(inFlight[2], answer(0.002))); err != nil {
		t.Fatal(err)
	}
	if err := src.Send(fakeagent.ClientDone("no-such-run/t2", answer(0.001))); err != nil {
		t.Fatal(err)
	}
	w := `msg="late client result of an unknown run; acknowledged, not stored" node=node-1 suppressed=0 work_id=no-such-run/t2`
	if !testutil.Within(10*time.Second, 10*time.Millisecond, func() bool { return strings.Contains(c.logs.String(), w) }) {
		t.Errorf("log lacks %s", w)
	}
	again := fakeagent.ResultsByTest(t, ctx, mesh, runID)[testOf(inFlight[2])]
	if !proto.Equal(again, got[testOf(inFlight[2])]) {
		t.Errorf("the answer sent again changed the stored result: %v, was %v", again, got[testOf(inFlight[2])])
	}
}
