package protocol

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/safetext"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// BoundWorkResult escapes (safetext.Escape) and cuts (safetext.Cut, with
// its marker) the texts of an answer to work, in place: the answer's
// message and each result's message to safetext.MaxMessageBytes, the
// server's and each result's tool version to
// safetext.MaxToolVersionBytes, each result's target address to
// safetext.MaxAddressBytes. The agent calls it before sending, the
// coordinator again on arrival. It returns one line per text it changed,
// naming the field and its original length, for the log.
func BoundWorkResult(wr *agentv1.WorkResult) (changed []string) {
	bound := func(field string, s *string, maxBytes int) {
		if out, ok := safetext.Bound(*s, maxBytes); ok {
			changed = append(changed, fmt.Sprintf("%s (%d bytes) escaped or cut to %d bytes", field, len(*s), len(out)))
			*s = out
		}
	}
	if wr == nil {
		return nil
	}
	bound("message", &wr.Message, safetext.MaxMessageBytes)
	if st := wr.GetServerStarted(); st != nil {
		bound("server_started.tool_version", &st.ToolVersion, safetext.MaxToolVersionBytes)
	}
	for i, r := range wr.GetClientDone().GetResults() {
		if r == nil {
			continue
		}
		bound(fmt.Sprintf("client_done.results[%d].message", i), &r.Message, safetext.MaxMessageBytes)
		bound(fmt.Sprintf("client_done.results[%d].tool_version", i), &r.ToolVersion, safetext.MaxToolVersionBytes)
		bound(fmt.Sprintf("client_done.results[%d].target_address", i), &r.TargetAddress, safetext.MaxAddressBytes)
	}
	return changed
}

// BoundToolInfo escapes and cuts a tool's version and error to
// safetext.MaxToolVersionBytes, in place, so that a tool printing a long
// or garbled version line cannot keep its agent from registering.
func BoundToolInfo(t *measurev1.ToolInfo) {
	if t == nil {
		return
	}
	t.Version, _ = safetext.Bound(t.Version, safetext.MaxToolVersionBytes)
	t.Error, _ = safetext.Bound(t.Error, safetext.MaxToolVersionBytes)
}
