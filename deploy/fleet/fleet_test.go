package fleet

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// TestGossipViewJoinOrder: an agent's first view lists itself and the
// agents registered before it; a later registration, and a resync, every
// agent registered by then.
func TestGossipViewJoinOrder(t *testing.T) {
	f, err := New(Config{Coordinator: "127.0.0.1:1", Nodes: 4, Gossip: true})
	if err != nil {
		t.Fatal(err)
	}
	agents := make([]*simAgent, 4)
	for i := range agents {
		agents[i] = &simAgent{f: f, i: i, name: NodeName(i)}
	}
	names := func(a *simAgent, n int) []string {
		var out []string
		// As the coordinator decodes it: the view's members travel
		// pre-encoded.
		b, err := proto.Marshal(a.gossipView(n))
		if err != nil {
			t.Fatal(err)
		}
		var req agentv1.ConnectRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		for _, m := range req.GetGossipView().GetMembers() {
			out = append(out, m.GetNodeName())
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		name  string
		agent int
		want  []string
	}{
		{"first to join knows itself", 2, []string{"sim-00002"}},
		{"second knows the first", 0, []string{"sim-00000", "sim-00002"}},
		{"third knows both", 3, []string{"sim-00000", "sim-00002", "sim-00003"}},
		{"a reconnect knows all registered", 2, []string{"sim-00000", "sim-00002", "sim-00003"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := agents[tt.agent]
			if got := names(a, f.join(a)); !slices.Equal(got, tt.want) {
				t.Errorf("view of %s = %v, want %v", a.name, got, tt.want)
			}
		})
	}
	if got := names(agents[1], int(f.joins.Load())); len(got) != 4 {
		t.Errorf("resync view of sim-00001 = %v, want all 4", got)
	}
}
