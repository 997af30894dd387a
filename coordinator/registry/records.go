package registry

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// This file holds the known nodes' records (Registry.known) and their
// writes to the store.

// storeRecord stores the record of node name as it is now and calls then
// (if not nil) with it. If the record was replaced meanwhile (another
// writer between the read and the write), it does both again, at most
// three times, so that writes that race end with the later state stored
// rather than a stale one (a cordon lost, a disconnect undone).
//
// The records in r.known are never edited once there: a change puts a
// new record in its place (cloneAgent), so a record read under r.mu can
// be used, stored and compared by pointer outside it.
func (r *Registry) storeRecord(ctx context.Context, name string, then func(*storev1.Agent)) {
	for range 3 {
		r.mu.Lock()
		a := r.known[name]
		r.mu.Unlock()
		if a == nil {
			return
		}
		r.persist(ctx, a)
		if then != nil {
			then(a)
		}
		r.mu.Lock()
		same := r.known[name] == a
		r.mu.Unlock()
		if same {
			return
		}
	}
}

// joinIfConnected is storeRecord's then for a record of n's session: it
// puts n in the probe plans with the record's cordon, unless the record
// says the session ended meanwhile (SyncProbes takes it out).
func (r *Registry) joinIfConnected(n Node) func(*storev1.Agent) {
	return func(a *storev1.Agent) {
		if a.GetConnected() {
			r.planJoin(n, a.GetMaintenance())
		}
	}
}

func (r *Registry) persist(ctx context.Context, a *storev1.Agent) {
	// The session's context may be gone already; the write must still happen.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := r.cfg.Recorder.PutAgent(ctx, a); err != nil {
		r.log.Error("persist agent", "node", a.GetNodeName(), "err", err)
	}
}

func cloneAgent(a *storev1.Agent) *storev1.Agent {
	return proto.CloneOf(a)
}
