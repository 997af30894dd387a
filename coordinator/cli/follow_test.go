package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func TestInterruptPolicy(t *testing.T) {
	tests := []struct {
		flag     string
		terminal bool
		want     string
		wantErr  string
	}{
		{"", true, onInterruptAsk, ""},
		{"", false, onInterruptDetach, ""},
		{"ask", false, onInterruptAsk, ""},
		{"cancel", true, onInterruptCancel, ""},
		{"detach", true, onInterruptDetach, ""},
		{"kill", true, "", `--on-interrupt "kill": want ask, cancel or detach`},
	}
	for _, tt := range tests {
		got, err := interruptPolicy(tt.flag, tt.terminal)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("interruptPolicy(%q, %v) err = %v, want %q", tt.flag, tt.terminal, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("interruptPolicy(%q, %v) = %q, %v; want %q", tt.flag, tt.terminal, got, err, tt.want)
		}
	}
}

// fakeMesh watches one run that ends only once canceled (or at end).
type fakeMesh struct {
	meshv1.MeshServiceClient
	end chan struct{} // closed: the run ended (by itself or canceled)

	mu      sync.Mutex
	cancels int
	once    sync.Once
}

func (f *fakeMesh) CancelRun(context.Context, *meshv1.CancelRunRequest, ...grpc.CallOption) (*meshv1.CancelRunResponse, error) {
	f.mu.Lock()
	f.cancels++
	f.mu.Unlock()
	f.once.Do(func() { close(f.end) })
	return &meshv1.CancelRunResponse{Run: &measurev1.Run{RunId: "R1", State: measurev1.RunState_RUN_STATE_RUNNING}}, nil
}

func (f *fakeMesh) WatchRun(ctx context.Context, _ *meshv1.WatchRunRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[meshv1.WatchRunResponse], error) {
	return &fakeWatch{ctx: ctx, end: f.end}, nil
}

type fakeWatch struct {
	grpc.ClientStream
	ctx  context.Context
	end  chan struct{}
	sent bool
}

func (w *fakeWatch) Recv() (*meshv1.WatchRunResponse, error) {
	select {
	case <-w.end:
		if !w.sent {
			w.sent = true
			return &meshv1.WatchRunResponse{Run: &measurev1.Run{RunId: "R1", State: measurev1.RunState_RUN_STATE_CANCELED}}, nil
		}
		return nil, io.EOF
	case <-w.ctx.Done():
		return nil, w.ctx.Err()
	}
}

// answerReader is stdin: it tells when it is read, then gives line, or
// blocks until the test ends when block is set.
type answerReader struct {
	line  string
	block bool
	read  chan struct{} // closed on the first Read
	stop  chan struct{} // closed by the test's end
	once  sync.Once
}

func (r *answerReader) Read(p []byte) (int, error) {
	r.once.Do(func() { close(r.read) })
	if r.block {
		<-r.stop
		return 0, io.EOF
	}
	if r.line == "" {
		return 0, io.EOF
	}
	n := copy(p, r.line)
	r.line = r.line[n:]
	return n, nil
}

// The first Ctrl-C asks (or not) and cancels or detaches; a second one
// stops watching at once.
func TestFollowInterrupts(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		answer string // typed at the question
		block  bool   // nobody answers the question
		// interrupts is how many Ctrl-C arrive: the second one once the
		// question is read, or once the cancel was sent.
		interrupts  int
		wantCancels int
		wantCode    int    // ExitError code; 0: follow returns nil
		wantAsked   bool   // the question was printed
		wantIn      string // in stderr
	}{
		{"no interrupt: the run ends", onInterruptAsk, "", false, 0, 0, 0, false, ""},
		{"ask, yes: canceled and watched to its end", onInterruptAsk, "y\n", false, 1, 1, 0, true, "run R1 canceled (running)"},
		{"ask, YES", onInterruptAsk, "YES\n", false, 1, 1, 0, true, "waiting for its running tests to stop"},
		{"ask, no: detached", onInterruptAsk, "n\n", false, 1, 0, ExitInterrupted, true, "not canceled; run R1 goes on"},
		{"ask, empty answer: detached", onInterruptAsk, "\n", false, 1, 0, ExitInterrupted, true, "coordinator cancel R1"},
		{"ask, stdin closed: detached", onInterruptAsk, "", false, 1, 0, ExitInterrupted, true, "not canceled"},
		{"ask, second Ctrl-C at the question: out at once", onInterruptAsk, "", true, 2, 0, ExitInterrupted, true, "interrupted again"},
		{"cancel: no question", onInterruptCancel, "", false, 1, 1, 0, false, "run R1 canceled"},
		{"detach: no question, no cancel", onInterruptDetach, "", false, 1, 0, ExitInterrupted, false, "interrupted; run R1 goes on"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			o := &options{stdout: &stdout, stderr: &stderr, timeout: 5 * time.Second}
			mesh := &fakeMesh{end: make(chan struct{})}
			in := &answerReader{line: tt.answer, block: tt.block, read: make(chan struct{}), stop: make(chan struct{})}
			defer close(in.stop)
			intr := make(chan struct{}, 2)
			f := &follower{o: o, client: mesh, run: &measurev1.Run{RunId: "R1"}, policy: tt.policy, interrupts: intr, answers: in}
			errc := make(chan error, 1)
			go func() { errc <- f.follow(ctx) }()
			switch tt.interrupts {
			case 0:
				close(mesh.end) // the run ends by itself
			case 1:
				intr <- struct{}{}
			case 2:
				intr <- struct{}{}
				<-in.read
				intr <- struct{}{}
			}
			var err error
			select {
			case err = <-errc:
			case <-ctx.Done():
				t.Fatal("follow did not return")
			}
			var exit *ExitError
			switch {
			case tt.wantCode == 0 && err != nil:
				t.Errorf("follow: %v, want nil", err)
			case tt.wantCode != 0 && (!errors.As(err, &exit) || exit.Code != tt.wantCode):
				t.Errorf("follow: %v, want exit code %d", err, tt.wantCode)
			}
			mesh.mu.Lock()
			if mesh.cancels != tt.wantCancels {
				t.Errorf("%d CancelRun calls, want %d", mesh.cancels, tt.wantCancels)
			}
			mesh.mu.Unlock()
			if asked := strings.Contains(stderr.String(), "cancel run R1? [y/N]"); asked != tt.wantAsked {
				t.Errorf("asked = %v, want %v; stderr:\n%s", asked, tt.wantAsked, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantIn) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantIn, stderr.String())
			}
		})
	}
}

func TestCancelLine(t *testing.T) {
	tests := []struct {
		run  *measurev1.Run
		want string
	}{
		{&measurev1.Run{RunId: "R1", State: measurev1.RunState_RUN_STATE_RUNNING, TestsDone: 2, TestsPlanned: 6},
			"run R1: canceling (running, 2/6 tests done; its running tests are stopping)"},
		{&measurev1.Run{RunId: "R1", State: measurev1.RunState_RUN_STATE_CANCELED, Message: "canceled by a local client", TestsDone: 6, TestsPlanned: 6},
			"run R1: canceled (canceled by a local client), 6/6 tests done"},
		{&measurev1.Run{RunId: "R1", State: measurev1.RunState_RUN_STATE_SUCCEEDED}, "run R1 already ended: succeeded, left as it is"},
	}
	for _, tt := range tests {
		if got := cancelLine(tt.run); got != tt.want {
			t.Errorf("cancelLine(%v) = %q, want %q", tt.run.GetState(), got, tt.want)
		}
	}
}
