package registry

import (
	"fmt"

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

type pendingKey struct {
	testID string
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
	return 0, fmt.Errorf("work %q has no action", w.GetTestId())
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
