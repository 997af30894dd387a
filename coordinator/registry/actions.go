package registry

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// actionKind is the kind of a Work's action, matched with the kind of the
// WorkResult's outcome.
type actionKind int

const (
	actionStartServer actionKind = iota + 1
	actionRunClient
	actionStopServer
)

// pendingKey names a Work waiting for its answer: its work ID (workID)
// and the kind of its action.
type pendingKey struct {
	workID string
	kind   actionKind
}

func workKind(w *agentv1.Work) (actionKind, error) {
	switch w.GetAction().(type) {
	case *agentv1.Work_StartServer:
		return actionStartServer, nil
	case *agentv1.Work_RunClient:
		return actionRunClient, nil
	case *agentv1.Work_StopServer:
		return actionStopServer, nil
	}
	return 0, fmt.Errorf("work %q has no action", protocol.WorkID(w))
}

func resultKind(r *agentv1.WorkResult) (actionKind, bool) {
	switch r.GetOutcome().(type) {
	case *agentv1.WorkResult_ServerStarted:
		return actionStartServer, true
	case *agentv1.WorkResult_ClientDone:
		return actionRunClient, true
	case *agentv1.WorkResult_ServerStopped:
		return actionStopServer, true
	}
	return 0, false
}
