package agent

import (
	"context"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// handle carries out one Work that arrived at arrived and answers it with its texts bounded
// (protocol.BoundWorkResult: messages of at most 4 KiB, tool versions of
// at most 256 bytes, control characters escaped), so that whatever a tool
// prints, an answer never grows past what the coordinator keeps.
func (a *Agent) handle(ctx context.Context, w *agentv1.Work, arrived time.Time) *agentv1.WorkResult {
	wr := a.handleWork(ctx, w, arrived)
	if changed := protocol.BoundWorkResult(wr); len(changed) > 0 {
		a.log.Warn("answer texts escaped or cut before sending", "work_id", wr.GetWorkId(), "fields", changed)
	}
	return wr
}

// boundTools bounds each tool's version and error (protocol.BoundToolInfo)
// so that a tool's odd version line cannot get the registration refused.
func boundTools(tools []*measurev1.ToolInfo) []*measurev1.ToolInfo {
	for _, t := range tools {
		protocol.BoundToolInfo(t)
	}
	return tools
}
