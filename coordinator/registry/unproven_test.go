package registry

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/probeplan"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

// deletingRecorder is a Recorder with DeleteAgent, recording deletions.
type deletingRecorder struct {
	knownRecorder
	mu      sync.Mutex
	deleted []string
}

func (d *deletingRecorder) DeleteAgent(_ context.Context, node string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted = append(d.deleted, node)
	return nil
}

// TestUnprovenAfterRestart: of the stored nodes, those whose record shows
// a last session shorter than the heartbeat timeout are unproven: out of
// default meshes and probe plans at once, forgotten (and deleted from the
// store) after UnprovenGrace; the others stay in meshes as unavailable.
func TestUnprovenAfterRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now()
	at := func(ago time.Duration) *timestamppb.Timestamp { return timestamppb.New(now.Add(-ago)) }
	addr := func(ip string) []*measurev1.NetworkAddress {
		return []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip}}
	}
	tests := []struct {
		agent              *storev1.Agent
		inMesh, targetable bool
		forgotten          bool
	}{
		// A session of 90 minutes: proven, in meshes until DepartAfter.
		{&storev1.Agent{NodeName: "long-session", ConnectTime: at(2 * time.Hour), LastSeenTime: at(30 * time.Minute), Addresses: addr("10.0.0.1"), ProbePort: 7947},
			true, true, false},
		// No connect time (an older record): proven.
		{&storev1.Agent{NodeName: "old-record", LastSeenTime: at(time.Minute), Addresses: addr("10.0.0.2"), ProbePort: 7947}, true, true, false},
		// A session of 1 s that left a minute ago: unproven, targetable
		// within the grace, never in meshes.
		{&storev1.Agent{NodeName: "brief-recent", ConnectTime: at(time.Minute + time.Second), LastSeenTime: at(time.Minute), Addresses: addr("10.0.0.3"), ProbePort: 7947},
			false, true, false},
		// A session of 1 s that left ten minutes ago: forgotten.
		{&storev1.Agent{NodeName: "brief-old", ConnectTime: at(10*time.Minute + time.Second), LastSeenTime: at(10 * time.Minute), Addresses: addr("10.0.0.4"), ProbePort: 7947},
			false, false, true},
	}
	var stored []*storev1.Agent
	for _, tt := range tests {
		stored = append(stored, tt.agent)
	}
	rec := &deletingRecorder{knownRecorder: knownRecorder{stored}}
	table := probeplan.NewTable(probeplan.Options{})
	r, err := New(ctx, Config{Recorder: rec, Probes: table, UnprovenGrace: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	r.SyncProbes()
	mesh, targetable := r.Known()
	plan, _ := table.Delta("observer", 0)
	var peers []string
	for _, p := range plan.GetUpsert() {
		peers = append(peers, p.GetNodeName())
	}
	known := map[string]bool{}
	for _, a := range r.Agents() {
		known[a.GetNodeName()] = true
	}
	for _, tt := range tests {
		name := tt.agent.GetNodeName()
		if got := slices.Contains(mesh, name); got != tt.inMesh {
			t.Errorf("%s in the default mesh: %v, want %v", name, got, tt.inMesh)
		}
		if got := slices.Contains(targetable, name); got != tt.targetable {
			t.Errorf("%s targetable: %v, want %v", name, got, tt.targetable)
		}
		if got := slices.Contains(peers, name); got != tt.inMesh {
			t.Errorf("%s in the probe plans: %v, want %v", name, got, tt.inMesh)
		}
		if known[name] == tt.forgotten {
			t.Errorf("%s known: %v, want %v", name, known[name], !tt.forgotten)
		}
		rec.mu.Lock()
		if got := slices.Contains(rec.deleted, name); got != tt.forgotten {
			t.Errorf("%s deleted from the store: %v, want %v", name, got, tt.forgotten)
		}
		rec.mu.Unlock()
	}
}

// TestUnprovenKeptBounded: of more than maxUnprovenGone unproven nodes
// within their grace, the longest gone are forgotten at once.
func TestUnprovenKeptBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now()
	var stored []*storev1.Agent
	for i := range maxUnprovenGone + 5 {
		seen := now.Add(-time.Duration(i) * time.Millisecond) // made-up-0000 was seen last
		stored = append(stored, &storev1.Agent{NodeName: fmt.Sprintf("made-up-%04d", i),
			ConnectTime: timestamppb.New(seen.Add(-time.Millisecond)), LastSeenTime: timestamppb.New(seen)})
	}
	rec := &deletingRecorder{knownRecorder: knownRecorder{stored}}
	r, err := New(ctx, Config{Recorder: rec})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	_, targetable := r.Known()
	if len(targetable) != maxUnprovenGone || targetable[0] != "made-up-0000" || targetable[len(targetable)-1] != fmt.Sprintf("made-up-%04d", maxUnprovenGone-1) {
		t.Errorf("%d targetable, from %s to %s; want the %d last seen", len(targetable), targetable[0], targetable[len(targetable)-1], maxUnprovenGone)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.deleted) != 5 {
		t.Errorf("deleted %v, want the 5 longest gone", rec.deleted)
	}
}
