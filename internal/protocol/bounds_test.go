package protocol

import (
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/safetext"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestBoundWorkResult(t *testing.T) {
	huge := strings.Repeat("A", 1258291)
	tests := []struct {
		name        string
		wr          *agentv1.WorkResult
		check       func(*agentv1.WorkResult) string // "" when right
		wantChanged int
	}{
		{"clean answer unchanged", &agentv1.WorkResult{Message: "ok", Outcome: &agentv1.WorkResult_ServerStarted{
			ServerStarted: &agentv1.ServerStarted{ToolVersion: "iperf 3.16"}}},
			func(wr *agentv1.WorkResult) string {
				if wr.GetMessage() != "ok" || wr.GetServerStarted().GetToolVersion() != "iperf 3.16" {
					return wr.String()
				}
				return ""
			}, 0},
		{"1.2 MiB result message cut", &agentv1.WorkResult{Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{
			Results: []*measurev1.Result{{Message: huge}}}}},
			func(wr *agentv1.WorkResult) string {
				m := wr.GetClientDone().GetResults()[0].GetMessage()
				if len(m) > safetext.MaxMessageBytes || !strings.HasSuffix(m, "[cut: 1258291 bytes]") || !strings.HasPrefix(m, "AAAA") {
					return m[:40] + "..." + m[len(m)-40:]
				}
				return ""
			}, 1},
		{"ESC in a tool version and a message escaped", &agentv1.WorkResult{Message: "\x1b[2J", Outcome: &agentv1.WorkResult_ClientDone{
			ClientDone: &agentv1.ClientDone{Results: []*measurev1.Result{{ToolVersion: "ping \x1b]0;x\x07", TargetAddress: "1.2.3.4\u202e"}}}}},
			func(wr *agentv1.WorkResult) string {
				r := wr.GetClientDone().GetResults()[0]
				if wr.GetMessage() != `\x1b[2J` || r.GetToolVersion() != `ping \x1b]0;x\a` || r.GetTargetAddress() != `1.2.3.4\u202e` {
					return wr.String()
				}
				return ""
			}, 3},
		{"long server tool version cut", &agentv1.WorkResult{Outcome: &agentv1.WorkResult_ServerStarted{
			ServerStarted: &agentv1.ServerStarted{ToolVersion: strings.Repeat("v", 1000)}}},
			func(wr *agentv1.WorkResult) string {
				if v := wr.GetServerStarted().GetToolVersion(); len(v) > safetext.MaxToolVersionBytes || !strings.HasSuffix(v, "[cut: 1000 bytes]") {
					return v
				}
				return ""
			}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			changed := BoundWorkResult(tt.wr)
			if len(changed) != tt.wantChanged {
				t.Errorf("changed %q, want %d lines", changed, tt.wantChanged)
			}
			if bad := tt.check(tt.wr); bad != "" {
				t.Errorf("after BoundWorkResult: %s", bad)
			}
		})
	}
	if BoundWorkResult(nil) != nil {
		t.Error("nil answer changed")
	}
}

func TestBoundToolInfo(t *testing.T) {
	ti := &measurev1.ToolInfo{Version: "qperf \x1b[1m" + strings.Repeat("9", 500), Error: "bad\nthing"}
	BoundToolInfo(ti)
	if len(ti.GetVersion()) > safetext.MaxToolVersionBytes || !strings.HasPrefix(ti.GetVersion(), `qperf \x1b[1m`) || ti.GetError() != `bad\nthing` {
		t.Errorf("BoundToolInfo: %v", ti)
	}
}
