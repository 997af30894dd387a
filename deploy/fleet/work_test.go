package fleet

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/sanity"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestAnswer: the fleet answers work as a current agent does (agent/work.go):
// work_id and test_id both carry the work ID (test_id's when work_id is
// unset), the timeout counts from the arrival and wins over the
// deprecated deadline, which counts only without a timeout, and bad work
// is refused with its outcome's kind set. Times are fixed, not measured.
func TestAnswer(t *testing.T) {
	arrived := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	start := &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{Tool: measurev1.Tool_TOOL_IPERF3}}
	stop := &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}
	ping := &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}, TargetIp: "127.1.0.2"}}
	iperf := &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP}, TargetIp: "127.1.0.2"}}
	udp := &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_UDP}, TargetIp: "127.1.0.2"}}
	sec := durationpb.New(time.Second)
	for _, tt := range []struct {
		name    string
		work    *agentv1.Work
		now     time.Time
		wantID  string
		want    measurev1.Status
		wantMsg string // a part of the message
	}{
		{name: "work_id and test_id", now: arrived,
			work:   &agentv1.Work{WorkId: "r/1", TestId: "r/1", Timeout: sec, Action: start},
			wantID: "r/1", want: measurev1.Status_STATUS_OK},
		{name: "work_id only", now: arrived,
			work:   &agentv1.Work{WorkId: "r/2", Timeout: sec, Action: ping},
			wantID: "r/2", want: measurev1.Status_STATUS_OK},
		{name: "test_id only, from an older coordinator", now: arrived,
			work:   &agentv1.Work{TestId: "r/3", Deadline: timestamppb.New(arrived.Add(time.Minute)), Action: stop},
			wantID: "r/3", want: measurev1.Status_STATUS_OK},
		{name: "timeout counts from the arrival", now: arrived.Add(999 * time.Millisecond),
			work:   &agentv1.Work{WorkId: "r/4", Timeout: sec, Action: start},
			wantID: "r/4", want: measurev1.Status_STATUS_OK},
		{name: "timeout over", now: arrived.Add(time.Second),
			work:   &agentv1.Work{WorkId: "r/5", Timeout: sec, Action: ping},
			wantID: "r/5", want: measurev1.Status_STATUS_TIMEOUT, wantMsg: "already passed"},
		{name: "timeout wins over a past deadline", now: arrived,
			work:   &agentv1.Work{WorkId: "r/6", Timeout: sec, Deadline: timestamppb.New(arrived.Add(-time.Hour)), Action: start},
			wantID: "r/6", want: measurev1.Status_STATUS_OK},
		{name: "deadline without timeout, passed", now: arrived,
			work:   &agentv1.Work{TestId: "r/7", Deadline: timestamppb.New(arrived.Add(-time.Second)), Action: stop},
			wantID: "r/7", want: measurev1.Status_STATUS_TIMEOUT, wantMsg: "already passed"},
		{name: "zero timeout", now: arrived,
			work:   &agentv1.Work{WorkId: "r/8", Timeout: durationpb.New(0), Deadline: timestamppb.New(arrived.Add(time.Minute)), Action: start},
			wantID: "r/8", want: measurev1.Status_STATUS_INVALID, wantMsg: "timeout"},
		{name: "negative timeout", now: arrived,
			work:   &agentv1.Work{WorkId: "r/9", Timeout: durationpb.New(-time.Second), Action: ping},
			wantID: "r/9", want: measurev1.Status_STATUS_INVALID, wantMsg: "timeout"},
		{name: "timeout over a day", now: arrived,
			work:   &agentv1.Work{WorkId: "r/10", Timeout: durationpb.New(25 * time.Hour), Action: ping},
			wantID: "r/10", want: measurev1.Status_STATUS_INVALID, wantMsg: "at most"},
		{name: "timeout not a valid Duration", now: arrived,
			work:   &agentv1.Work{WorkId: "r/11", Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}, Action: ping},
			wantID: "r/11", want: measurev1.Status_STATUS_INVALID, wantMsg: "timeout"},
		{name: "neither timeout nor deadline", now: arrived,
			work:   &agentv1.Work{WorkId: "r/12", Action: start},
			wantID: "r/12", want: measurev1.Status_STATUS_INVALID, wantMsg: "no timeout and no deadline"},
		{name: "no ID", now: arrived,
			work: &agentv1.Work{Timeout: sec, Action: start},
			want: measurev1.Status_STATUS_INVALID, wantMsg: "no work_id and no test_id"},
		{name: "no action", now: arrived,
			work:   &agentv1.Work{WorkId: "r/13", Timeout: sec},
			wantID: "r/13", want: measurev1.Status_STATUS_INVALID, wantMsg: "no action"},
		{name: "iperf3 TCP", now: arrived,
			work:   &agentv1.Work{WorkId: "r/15", Timeout: sec, Action: iperf},
			wantID: "r/15", want: measurev1.Status_STATUS_OK},
		{name: "a test the fleet does not simulate sums up as its result", now: arrived,
			work:   &agentv1.Work{WorkId: "r/14", Timeout: sec, Action: udp},
			wantID: "r/14", want: measurev1.Status_STATUS_INVALID, wantMsg: "ping, HTTP and iperf3 TCP only"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := answer(tt.work, arrived, tt.now)
			if got == nil {
				t.Fatal("no answer")
			}
			if got.GetWorkId() != tt.wantID || got.GetTestId() != tt.wantID {
				t.Errorf("work_id %q, test_id %q; want both %q", got.GetWorkId(), got.GetTestId(), tt.wantID)
			}
			if got.GetStatus() != tt.want || !strings.Contains(got.GetMessage(), tt.wantMsg) {
				t.Errorf("status %v, message %q; want %v with %q", got.GetStatus(), got.GetMessage(), tt.want, tt.wantMsg)
			}
			// The outcome's kind answers the action, refused or not.
			var kindOK bool
			switch tt.work.GetAction().(type) {
			case *agentv1.Work_StartServer:
				kindOK = got.GetServerStarted() != nil
			case *agentv1.Work_RunClient:
				kindOK = got.GetClientDone() != nil
			case *agentv1.Work_StopServer:
				kindOK = got.GetServerStopped() != nil
			default:
				kindOK = got.GetOutcome() == nil
			}
			if !kindOK {
				t.Errorf("outcome %T for action %T", got.GetOutcome(), tt.work.GetAction())
			}
			// What the fleet claims passes the coordinator's checks.
			for _, r := range got.GetClientDone().GetResults() {
				if r.GetStatus() == measurev1.Status_STATUS_OK {
					if err := sanity.CheckResult(r, sanity.Timeout(r.GetSpec())); err != nil {
						t.Errorf("the simulated %v result: %v", r.GetSpec().GetTest(), err)
					}
				}
			}
		})
	}
}

// TestAnswerCancelClient: cancel_client gets no answer, as from an agent.
func TestAnswerCancelClient(t *testing.T) {
	now := time.Now()
	w := &agentv1.Work{WorkId: "r/1", TestId: "r/1", Timeout: durationpb.New(time.Second),
		Action: &agentv1.Work_CancelClient{CancelClient: &agentv1.CancelClient{}}}
	if got := answer(w, now, now); got != nil {
		t.Errorf("answer to cancel_client = %v, want none", got)
	}
}

// TestAnswerBounded: the answer's texts are bounded as an agent's are, so
// that a long work ID cannot get the answer refused.
func TestAnswerBounded(t *testing.T) {
	now := time.Now()
	id := strings.Repeat("x", 64<<10)
	got := answer(&agentv1.Work{WorkId: id, Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}}, now, now)
	if got.GetStatus() != measurev1.Status_STATUS_INVALID {
		t.Fatalf("status %v, want STATUS_INVALID (no timeout, no deadline)", got.GetStatus())
	}
	if len(got.GetMessage()) >= len(id) {
		t.Errorf("message of %d bytes, want it cut", len(got.GetMessage()))
	}
}
