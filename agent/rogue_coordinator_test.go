package agent_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// registered is a Registered with 1 s heartbeats and a 60 s timeout.
func registered() *agentv1.ConnectResponse {
	return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
		HeartbeatInterval: durationpb.New(time.Second), HeartbeatTimeout: durationpb.New(60 * time.Second)}}}
}

// padded is a ping spec carrying n bytes of an unknown field (999).
func padded(n int) *measurev1.TestSpec {
	s := &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
	b := protowire.AppendTag(nil, 999, protowire.BytesType)
	s.ProtoReflect().SetUnknown(protowire.AppendBytes(b, make([]byte, n)))
	return s
}

// TestRogueCoordinatorFloodsWhileNotReading: a coordinator that stops
// reading its stream (its flow-control window small) and sends thousands
// of works answered at once (client runs to a target that is no endpoint,
// servers with no tool) does not grow the agent by a goroutine a work:
// client runs count until their result is handed over, other works are
// bounded per session, and what is over the bounds is answered busy or
// dropped.
func TestRogueCoordinatorFloodsWhileNotReading(t *testing.T) {
	const works = 3000
	grew := make(chan int, 1)
	target := startFake(t, func(s stream) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		_ = s.Send(registered())
		base := runtime.NumGoroutine()
		for i := range works {
			w := &agentv1.Work{WorkId: fmt.Sprintf("w%d", i), Timeout: durationpb.New(10 * time.Minute)}
			if i%2 == 0 {
				w.Action = &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: padded(2048), TargetIp: "192.0.2.1"}}
			} else {
				w.Action = &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{}} // no tool: refused at once
			}
			if err := s.Send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Work{Work: w}}); err != nil {
				return err
			}
		}
		// The agent answers each at once: a moment settles them.
		time.Sleep(2 * time.Second)
		grew <- runtime.NumGoroutine() - base
		<-s.Context().Done()
		return nil
	}, grpc.InitialWindowSize(65535), grpc.InitialConnWindowSize(65535))
	startAgent(t, baseConfig(t, target, "node-a"))
	select {
	case extra := <-grew:
		// 4 x 8 client runs and 64 other works at most, and the session's
		// own goroutines.
		if most := 4*8 + 64 + 50; extra > most {
			t.Errorf("%d works from a coordinator that does not read grew the agent by %d goroutines, want at most %d", works, extra, most)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the rogue coordinator did not get its works sent")
	}
}

// TestRogueCoordinatorPadsWorks: unknown fields in a coordinator's works
// are dropped before anything copies them (a refused client run puts its
// spec into its result, and the result into the spool file), and a work
// over 64 KiB is refused: 40 works with 1 MiB of padding each leave the
// spool small.
func TestRogueCoordinatorPadsWorks(t *testing.T) {
	const works, pad = 40, 1 << 20
	state := t.TempDir()
	sent := make(chan struct{})
	target := startFake(t, func(s stream) error {
		if _, err := s.Recv(); err != nil {
			return err
		}
		_ = s.Send(registered())
		for i := range works {
			w := &agentv1.Work{WorkId: fmt.Sprintf("w%d", i), Timeout: durationpb.New(time.Minute),
				Action: &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: padded(pad), TargetIp: "192.0.2.1"}}}
			if i%2 == 1 { // a known field of 1 MiB: the target
				w.GetRunClient().Spec = &measurev1.TestSpec{Test: measurev1.Test_TEST_PING}
				w.GetRunClient().TargetIp = string(make([]byte, pad))
			}
			if err := s.Send(&agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Work{Work: w}}); err != nil {
				return err
			}
		}
		close(sent)
		<-s.Context().Done()
		return nil
	}, grpc.MaxRecvMsgSize(8<<20))
	cfg := baseConfig(t, target, "node-a")
	cfg.StateDir = state
	startAgent(t, cfg)
	select {
	case <-sent:
	case <-time.After(60 * time.Second):
		t.Fatal("the rogue coordinator did not get its works sent")
	}
	// The refusals are spooled at once; give them a moment to land.
	time.Sleep(time.Second)
	fi, err := os.Stat(filepath.Join(state, "spool.db"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > 4<<20 {
		t.Errorf("spool.db is %d bytes after %d padded works of 1 MiB, want at most 4 MiB", fi.Size(), works)
	}
}
