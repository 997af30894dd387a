package protocol

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestWorkDeadline: a timeout counts from the arrival and wins over the
// deadline; without one the deadline is used (a coordinator of the
// previous version); a bad timeout is refused naming the field and value.
func TestWorkDeadline(t *testing.T) {
	arrived := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	// skewed is a deadline written by a coordinator whose clock is an
	// hour behind this agent's: read as an absolute time it has passed.
	skewed := timestamppb.New(arrived.Add(-time.Hour + 30*time.Second))
	tests := []struct {
		name    string
		w       *agentv1.Work
		want    time.Time
		wantErr string // substring; empty: no error
	}{
		{"timeout preferred", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(30 * time.Second), Deadline: timestamppb.New(arrived.Add(time.Hour))}, arrived.Add(30 * time.Second), ""},
		{"skewed deadline ignored with a timeout", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(30 * time.Second), Deadline: skewed}, arrived.Add(30 * time.Second), ""},
		{"deadline fallback", &agentv1.Work{TestId: "r/t1", Deadline: timestamppb.New(arrived.Add(time.Minute))}, arrived.Add(time.Minute), ""},
		{"skewed deadline fallback is the old behaviour", &agentv1.Work{TestId: "r/t1", Deadline: skewed}, skewed.AsTime(), ""},
		{"at most", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(MaxWorkTimeout)}, arrived.Add(MaxWorkTimeout), ""},
		{"zero timeout", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(0), Deadline: timestamppb.New(arrived.Add(time.Minute))}, time.Time{}, `work "r/t1": timeout 0s: want more than 0`},
		{"negative timeout", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(-time.Second)}, time.Time{}, "timeout -1s: want more than 0"},
		{"absurd timeout", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(MaxWorkTimeout + time.Second)}, time.Time{}, "timeout 24h0m1s: want more than 0 and at most 24h0m0s"},
		{"invalid duration", &agentv1.Work{WorkId: "r/t1", Timeout: &durationpb.Duration{Seconds: 1, Nanos: -1}}, time.Time{}, "timeout"},
		{"neither", &agentv1.Work{WorkId: "r/t1"}, time.Time{}, `work "r/t1" has no timeout and no deadline`},
		{"work_id preferred in the error", &agentv1.Work{WorkId: "r/new", TestId: "r/old"}, time.Time{}, `"r/new"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WorkDeadline(tt.w, arrived)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("workDeadline: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("workDeadline = %v, %v; want an error with %q", got, err, tt.wantErr)
			case tt.wantErr == "" && !got.Equal(tt.want):
				t.Errorf("workDeadline = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWorkID: work_id when set, else the test_id of a coordinator of the
// previous version.
func TestWorkID(t *testing.T) {
	tests := []struct {
		w    *agentv1.Work
		want string
	}{
		{&agentv1.Work{WorkId: "r/a", TestId: "r/a"}, "r/a"},
		{&agentv1.Work{WorkId: "r/a", TestId: "r/b"}, "r/a"},
		{&agentv1.Work{TestId: "r/b"}, "r/b"},
		{&agentv1.Work{}, ""},
	}
	for _, tt := range tests {
		if got := WorkID(tt.w); got != tt.want {
			t.Errorf("WorkID(%v) = %q, want %q", tt.w, got, tt.want)
		}
	}
}

// TestStampAndAcks: Stamp writes the ID and the timeout in the fields of
// both versions (the deadline on the sender's clock), which WorkID and
// WorkDeadline read back; NewResultAck writes both ack fields, which
// AckedWorkIDs reads, preferring work_ids.
func TestStampAndAcks(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	w := &agentv1.Work{}
	Stamp(w, "r/t1", 30*time.Second, now)
	if w.GetWorkId() != "r/t1" || w.GetTestId() != "r/t1" || w.GetTimeout().AsDuration() != 30*time.Second || !w.GetDeadline().AsTime().Equal(now.Add(30*time.Second)) {
		t.Errorf("Stamp: %v, want r/t1 in work_id and test_id, timeout 30s, deadline now+30s", w)
	}
	arrived := now.Add(time.Hour) // the agent's clock, an hour ahead
	if got, err := WorkDeadline(w, arrived); err != nil || !got.Equal(arrived.Add(30*time.Second)) {
		t.Errorf("WorkDeadline = %v, %v; want arrival+30s", got, err)
	}
	if old := (&agentv1.Work{TestId: w.GetTestId(), Deadline: w.GetDeadline()}); WorkID(old) != "r/t1" {
		t.Errorf("a previous agent reads ID %q, want r/t1", WorkID(old))
	}
	ids := []string{"r/t1", "r/t2"}
	ack := NewResultAck(ids)
	if !slices.Equal(ack.GetWorkIds(), ids) || !slices.Equal(ack.GetTestIds(), ids) {
		t.Errorf("NewResultAck = %v, want %q in work_ids and test_ids", ack, ids)
	}
	for _, tt := range []struct {
		ack  *agentv1.ResultAck
		want []string
	}{
		{ack, ids},
		{&agentv1.ResultAck{WorkIds: []string{"r/a"}, TestIds: []string{"r/b"}}, []string{"r/a"}},
		{&agentv1.ResultAck{TestIds: []string{"r/b"}}, []string{"r/b"}},
		{&agentv1.ResultAck{}, nil},
	} {
		if got := AckedWorkIDs(tt.ack); !slices.Equal(got, tt.want) {
			t.Errorf("AckedWorkIDs(%v) = %q, want %q", tt.ack, got, tt.want)
		}
	}
}

// FuzzWorkDeadline: a taken timeout is always within (0, MaxWorkTimeout]
// of the arrival, and a refused one always names the field.
func FuzzWorkDeadline(f *testing.F) {
	f.Add(int64(30), int32(0), true)
	f.Add(int64(0), int32(0), true)
	f.Add(int64(-1), int32(0), true)
	f.Add(int64(86401), int32(0), true)
	f.Add(int64(1), int32(-1), true)
	f.Add(int64(0), int32(0), false)
	arrived := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s int64, n int32, has bool) {
		w := &agentv1.Work{WorkId: "r/t1", Deadline: timestamppb.New(arrived.Add(time.Minute))}
		if has {
			w.Timeout = &durationpb.Duration{Seconds: s, Nanos: n}
		}
		got, err := WorkDeadline(w, arrived)
		switch {
		case !has && (err != nil || !got.Equal(arrived.Add(time.Minute))):
			t.Fatalf("deadline fallback: %v, %v", got, err)
		case has && err != nil && !strings.Contains(err.Error(), "timeout"):
			t.Fatalf("refusal without the field: %v", err)
		case has && err == nil && (!got.After(arrived) || got.Sub(arrived) > MaxWorkTimeout):
			t.Fatalf("took %v/%v: %v after the arrival", s, n, got.Sub(arrived))
		}
	})
}

// TestStartAnswer: the answer carries the work ID in both ID fields and
// the outcome of the Work's action, also when it is refused; a Work with
// no action, no ID or a bad timeout is refused as invalid naming why.
func TestStartAnswer(t *testing.T) {
	arrived := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	ok := durationpb.New(30 * time.Second)
	tests := []struct {
		name        string
		w           *agentv1.Work
		wantOK      bool
		wantOutcome string // the outcome's field name; empty: none
		wantMsg     string // substring of the refusal
	}{
		{"start server", &agentv1.Work{WorkId: "r/t1", Timeout: ok, Action: &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{}}}, true, "server_started", ""},
		{"run client by test_id", &agentv1.Work{TestId: "r/t1", Timeout: ok, Action: &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{}}}, true, "client_done", ""},
		{"stop server", &agentv1.Work{WorkId: "r/t1", Timeout: ok, Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}}, true, "server_stopped", ""},
		{"no action", &agentv1.Work{WorkId: "r/t1", Timeout: ok}, false, "", `work "r/t1" has no action`},
		{"no ID", &agentv1.Work{Timeout: ok, Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}}, false, "server_stopped", "no work_id and no test_id"},
		{"bad timeout", &agentv1.Work{WorkId: "r/t1", Timeout: durationpb.New(-time.Second), Action: &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{}}}, false, "client_done", "timeout -1s: want more than 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, gotOK := StartAnswer(tt.w, arrived)
			res, deadline := a.Result, a.Deadline
			if gotOK != tt.wantOK {
				t.Fatalf("ok = %v, want %v (%v)", gotOK, tt.wantOK, res)
			}
			if id := WorkID(tt.w); res.GetWorkId() != id || res.GetTestId() != id || a.ID != id {
				t.Errorf("IDs %q, %q, %q, want %q in all", res.GetWorkId(), res.GetTestId(), a.ID, id)
			}
			outcome := ""
			if f := res.ProtoReflect().WhichOneof(res.ProtoReflect().Descriptor().Oneofs().ByName("outcome")); f != nil {
				outcome = string(f.Name())
			}
			if outcome != tt.wantOutcome {
				t.Errorf("outcome %q, want %q", outcome, tt.wantOutcome)
			}
			if tt.wantOK {
				if res.GetStatus() != measurev1.Status_STATUS_UNSPECIFIED || !deadline.Equal(arrived.Add(30*time.Second)) {
					t.Errorf("status %v, deadline %v, want unset and %v", res.GetStatus(), deadline, arrived.Add(30*time.Second))
				}
				return
			}
			if res.GetStatus() != measurev1.Status_STATUS_INVALID || !strings.Contains(res.GetMessage(), tt.wantMsg) {
				t.Errorf("refusal %v %q, want STATUS_INVALID with %q", res.GetStatus(), res.GetMessage(), tt.wantMsg)
			}
		})
	}
}

// TestAnswerLate: a work is late when its deadline is not after now; its
// answer is STATUS_TIMEOUT naming the work, how long ago, and the note.
func TestAnswerLate(t *testing.T) {
	deadline := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		now      time.Time
		note     string
		wantLate bool
		wantMsg  string
	}{
		{"before the deadline", deadline.Add(-time.Nanosecond), "", false, ""},
		{"at the deadline", deadline, "", true, `work "r/t1": deadline 2026-12-02T10:00:00Z already passed (0s ago)`},
		{"1.5 s after, with a note", deadline.Add(1500 * time.Millisecond), "; its server was stopped anyway",
			true, "already passed (1.5s ago); its server was stopped anyway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Answer{Result: &agentv1.WorkResult{WorkId: "r/t1"}, ID: "r/t1", Deadline: deadline}
			res, late := a.Late(tt.now, tt.note)
			if late != tt.wantLate {
				t.Fatalf("late = %v, want %v", late, tt.wantLate)
			}
			if !late {
				if res != nil || a.Result.GetStatus() != measurev1.Status_STATUS_UNSPECIFIED {
					t.Errorf("not late, but answer %v, status %v", res, a.Result.GetStatus())
				}
				return
			}
			if res != a.Result || res.GetStatus() != measurev1.Status_STATUS_TIMEOUT || !strings.Contains(res.GetMessage(), tt.wantMsg) {
				t.Errorf("answer %v %q, want the Result with STATUS_TIMEOUT and %q", res.GetStatus(), res.GetMessage(), tt.wantMsg)
			}
		})
	}
}
