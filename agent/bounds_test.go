package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/safetext"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestHandleBoundsAnswer: an answer whose message would be 1.2 MiB (here:
// a refusal quoting a 1.2 MiB test ID) leaves the agent cut to 4 KiB,
// with the marker.
func TestHandleBoundsAnswer(t *testing.T) {
	a := &Agent{log: slog.New(slog.DiscardHandler)}
	tests := []struct {
		name      string
		testID    string
		wantIn    string
		wantUnder int
	}{
		{"1.2 MiB message cut", strings.Repeat("x", 1258291), "[cut: ", safetext.MaxMessageBytes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wr := a.handle(context.Background(), &agentv1.Work{WorkId: tt.testID, Action: &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}}, time.Now())
			m := wr.GetMessage()
			if wr.GetStatus() != measurev1.Status_STATUS_INVALID || len(m) > tt.wantUnder || !strings.Contains(m, tt.wantIn) || strings.ContainsRune(m, 0x1b) {
				t.Errorf("answer status %v, message of %d bytes %.80q...; want INVALID, at most %d bytes with %q", wr.GetStatus(), len(m), m, tt.wantUnder, tt.wantIn)
			}
		})
	}
}

// TestBoundTools: a tool version with an ESC sequence or of 1 KiB no
// longer gets the registration refused: it is escaped and cut.
func TestBoundTools(t *testing.T) {
	tools := boundTools([]*measurev1.ToolInfo{{Version: "ping \x1b[31mred"}, {Version: strings.Repeat("9", 1024)}, {Error: "not\nfound"}})
	want := []func(*measurev1.ToolInfo) bool{
		func(ti *measurev1.ToolInfo) bool { return ti.GetVersion() == `ping \x1b[31mred` },
		func(ti *measurev1.ToolInfo) bool {
			return len(ti.GetVersion()) <= safetext.MaxToolVersionBytes && strings.HasSuffix(ti.GetVersion(), "[cut: 1024 bytes]")
		},
		func(ti *measurev1.ToolInfo) bool { return ti.GetError() == `not\nfound` },
	}
	for i, ok := range want {
		if !ok(tools[i]) {
			t.Errorf("tools[%d] = %v", i, tools[i])
		}
	}
}
