package membership_test

import (
	"bytes"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshperf/meshperf/coordinator/membership"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

const (
	unspec  = measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED
	alive   = measurev1.GossipState_GOSSIP_STATE_ALIVE
	suspect = measurev1.GossipState_GOSSIP_STATE_SUSPECT
	dead    = measurev1.GossipState_GOSSIP_STATE_DEAD
	left    = measurev1.GossipState_GOSSIP_STATE_LEFT
	// forgotten appears only in deltas (UpdateView).
	forgotten = measurev1.GossipState_GOSSIP_STATE_FORGOTTEN
)

type view = map[string]measurev1.GossipState

// evaluate runs tr.Evaluate over nodes and returns their statuses; it
// checks that Evaluate's partitions are those of the statuses.
func evaluate(tr *membership.Tracker, nodes map[string]bool) map[string]membership.Status {
	partitions := tr.Evaluate(nodes)
	out := tr.Statuses(slices.Collect(maps.Keys(nodes)))
	for n, st := range out {
		if st.Partition != partitions[n] {
			panic("Evaluate and Statuses disagree on " + n)
		}
	}
	return out
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		name  string
		views membership.Views
		want  membership.Verdict
	}{
		{"nobody reports", nil, membership.Verdict{}},
		{"only the node itself reports", membership.Views{"n3": {"n3": alive}}, membership.Verdict{}},
		{"reporters that never heard of it", membership.Views{"n1": {"n1": alive}, "n2": {"n2": alive}}, membership.Verdict{}},
		{"all see it alive", membership.Views{"n1": {"n3": alive}, "n2": {"n3": alive}, "n3": {"n3": alive}},
			membership.Verdict{State: alive, AliveBy: []string{"n1", "n2"}}},
		{"one alive is enough", membership.Views{"n1": {"n3": dead}, "n2": {"n3": alive}},
			membership.Verdict{State: alive, AliveBy: []string{"n2"}, DeadBy: []string{"n1"}}},
		{"suspect beats dead", membership.Views{"n1": {"n3": dead}, "n2": {"n3": suspect}},
			membership.Verdict{State: suspect, AliveBy: []string{"n2"}, DeadBy: []string{"n1"}}},
		{"all that know it say dead; the node's own view does not count", membership.Views{"n1": {"n3": dead}, "n2": {"n3": dead}, "n3": {"n3": alive}, "n4": {}},
			membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}}},
		{"all say left", membership.Views{"n1": {"n3": left}, "n2": {"n3": left}},
			membership.Verdict{State: left, DeadBy: []string{"n1", "n2"}}},
		{"left and dead mixed is dead", membership.Views{"n1": {"n3": left}, "n2": {"n3": dead}},
			membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}}},
		{"unspecified counts as unknown", membership.Views{"n1": {"n3": unspec}, "n2": {"n3": dead}, "n4": {"n3": dead}},
			membership.Verdict{State: dead, DeadBy: []string{"n2", "n4"}}},
		// The quorum: at least two, more than half of those that know it.
		{"one reporter alone says dead: ignored", membership.Views{"n1": {"n3": dead}},
			membership.Verdict{State: suspect, DeadBy: []string{"n1"}}},
		{"the node's only source says dead; others never heard of it", membership.Views{"n1": {"n3": dead}, "n2": {"n2": alive}, "n4": {}},
			membership.Verdict{State: suspect, DeadBy: []string{"n1"}}},
		{"the node's own dead about itself does not count", membership.Views{"n1": {"n3": dead}, "n3": {"n3": dead}},
			membership.Verdict{State: suspect, DeadBy: []string{"n1"}}},
		{"one left alone: ignored", membership.Views{"n1": {"n3": left}},
			membership.Verdict{State: suspect, DeadBy: []string{"n1"}}},
		{"two of three say dead: a majority", membership.Views{"n1": {"n3": dead}, "n2": {"n3": dead}, "n4": {"n3": alive}},
			membership.Verdict{State: dead, AliveBy: []string{"n4"}, DeadBy: []string{"n1", "n2"}}},
		{"two of four say dead: no majority", membership.Views{"n1": {"n3": dead}, "n2": {"n3": dead}, "n4": {"n3": alive}, "n5": {"n3": suspect}},
			membership.Verdict{State: alive, AliveBy: []string{"n4", "n5"}, DeadBy: []string{"n1", "n2"}}},
		{"three of four say dead", membership.Views{"n1": {"n3": dead}, "n2": {"n3": dead}, "n4": {"n3": left}, "n5": {"n3": suspect}},
			membership.Verdict{State: dead, AliveBy: []string{"n5"}, DeadBy: []string{"n1", "n2", "n4"}}},
		{"two of three say left", membership.Views{"n1": {"n3": left}, "n2": {"n3": left}, "n4": {"n3": alive}},
			membership.Verdict{State: left, AliveBy: []string{"n4"}, DeadBy: []string{"n1", "n2"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := membership.Judge(tt.views, "n3")
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Judge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDisagreement(t *testing.T) {
	for _, tt := range []struct {
		name      string
		connected bool
		v         membership.Verdict
		want      []string // substrings; nil: no disagreement
	}{
		{"connected and alive", true, membership.Verdict{State: alive, AliveBy: []string{"n1"}}, nil},
		{"connected, nobody reports", true, membership.Verdict{}, nil},
		{"connected and suspect", true, membership.Verdict{State: suspect, AliveBy: []string{"n1"}}, nil},
		{"lost and dead", false, membership.Verdict{State: dead, DeadBy: []string{"n1"}}, nil},
		{"lost and left", false, membership.Verdict{State: left, DeadBy: []string{"n1"}}, nil},
		{"lost and suspect", false, membership.Verdict{State: suspect, AliveBy: []string{"n1"}}, nil},
		{"lost, nobody reports", false, membership.Verdict{}, nil},
		{"connected but dead", true, membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}},
			[]string{"coordinator is connected to n3", "gossip of n1, n2 declares it dead"}},
		{"connected but left", true, membership.Verdict{State: left, DeadBy: []string{"n2"}},
			[]string{"connected to n3", "gossip of n2 declares it left"}},
		{"lost but alive", false, membership.Verdict{State: alive, AliveBy: []string{"n1", "n2"}, DeadBy: []string{"n4"}},
			[]string{"coordinator lost n3", "gossip of n1, n2 sees it alive"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := membership.Disagreement("n3", tt.connected, tt.v)
			if tt.want == nil {
				if got != "" {
					t.Errorf("Disagreement = %q; want none", got)
				}
				return
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Disagreement = %q; want it to say %q", got, w)
				}
			}
		})
	}
}

// TestTracker walks one tracker through a crash seen by the coordinator
// first, then by gossip, and a partition where gossip loses a node the
// coordinator still has, with a fake clock.
func TestTracker(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var logs bytes.Buffer
	tr := membership.New(membership.Config{
		Grace: 30 * time.Second, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	members := func(states map[string]measurev1.GossipState) []*agentv1.GossipMember {
		var ms []*agentv1.GossipMember
		for n, s := range states {
			ms = append(ms, &agentv1.GossipMember{NodeName: n, State: s})
		}
		return ms
	}
	all := map[string]bool{"n1": true, "n2": true, "n3": true}
	steps := []struct {
		name    string
		do      func()
		nodes   map[string]bool
		advance time.Duration
		want    map[string]membership.Status // nodes not listed: alive by n1, n2, n3 minus itself, no partition
		logs    []string
	}{
		{
			name: "all alive",
			do: func() {
				for _, r := range []string{"n1", "n2", "n3"} {
					tr.SetView(r, members(view{"n1": alive, "n2": alive, "n3": alive}))
				}
			},
			nodes: all,
		},
		{
			name:  "coordinator lost n3, gossip still sees it: within the grace",
			do:    func() { tr.Drop("n3") },
			nodes: map[string]bool{"n1": true, "n2": true, "n3": false},
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}}},
				"n3": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1", "n2"}}},
			},
		},
		{
			name:    "past the grace: a partition",
			advance: 31 * time.Second,
			do:      func() {},
			nodes:   map[string]bool{"n1": true, "n2": true, "n3": false},
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}}},
				"n3": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1", "n2"}},
					Partition: "the coordinator lost n3, but the gossip of n1, n2 sees it alive"},
			},
			logs: []string{`level=WARN msg="partition between the coordinator and gossip" node=n3`},
		},
		{
			name: "gossip declares n3 dead: agreement",
			do: func() {
				tr.SetView("n1", members(view{"n1": alive, "n2": alive, "n3": dead}))
				tr.SetView("n2", members(view{"n1": alive, "n2": alive, "n3": dead}))
			},
			nodes: map[string]bool{"n1": true, "n2": true, "n3": false},
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}}},
				"n3": {Verdict: membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}}},
			},
			logs: []string{`level=INFO msg="partition over: the coordinator and gossip agree" node=n3`},
		},
		{
			name: "n3 back for the coordinator while gossip still has it dead",
			do: func() {
				tr.SetView("n3", members(view{"n1": dead, "n2": dead, "n3": alive}))
			},
			nodes: all,
			logs: []string{
				// n3's word alone about n1 and n2 (n2 and n1 see them alive): ignored.
				`level=WARN msg="gossip's dead ignored: no quorum of the reporters that know the node" node=n1 connected=true gossip_dead_by=[n3]`,
				`level=WARN msg="gossip's dead ignored: no quorum of the reporters that know the node" node=n2 connected=true gossip_dead_by=[n3]`,
				`level=WARN msg="gossip's quorum declares a connected node dead; the node stays in the mesh while its session's heartbeats are recent" node=n3`,
			},
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}, DeadBy: []string{"n3"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}, DeadBy: []string{"n3"}}},
				"n3": {Verdict: membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}}},
			},
		},
		{
			name:    "just within the grace",
			do:      func() {},
			nodes:   all,
			advance: 29 * time.Second,
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}, DeadBy: []string{"n3"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}, DeadBy: []string{"n3"}}},
				"n3": {Verdict: membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}}},
			},
		},
		{
			name:    "still so after the grace: a partition",
			do:      func() {},
			nodes:   all,
			advance: 2 * time.Second,
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}, DeadBy: []string{"n3"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}, DeadBy: []string{"n3"}}},
				"n3": {Verdict: membership.Verdict{State: dead, DeadBy: []string{"n1", "n2"}},
					Partition: "the coordinator is connected to n3, but the gossip of n1, n2 declares it dead"},
			},
			logs: []string{`level=WARN msg="partition between the coordinator and gossip" node=n3`},
		},
		{
			name:  "n3 left the coordinator's nodes: forgotten",
			do:    func() { tr.Drop("n3") },
			nodes: map[string]bool{"n1": true, "n2": true},
			want: map[string]membership.Status{
				"n1": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n2"}}},
				"n2": {Verdict: membership.Verdict{State: alive, AliveBy: []string{"n1"}}},
			},
		},
	}
	for _, st := range steps {
		now = now.Add(st.advance)
		logs.Reset()
		st.do()
		got := evaluate(tr, st.nodes)
		want := st.want
		if want == nil {
			want = map[string]membership.Status{}
			for n := range st.nodes {
				var by []string
				for _, r := range []string{"n1", "n2", "n3"} {
					if r != n {
						by = append(by, r)
					}
				}
				want[n] = membership.Status{Verdict: membership.Verdict{State: alive, AliveBy: by}}
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: Evaluate (-want +got):\n%s", st.name, diff)
		}
		for _, l := range st.logs {
			if !strings.Contains(logs.String(), l) {
				t.Errorf("%s: logs lack %q:\n%s", st.name, l, logs.String())
			}
		}
		if st.logs == nil && logs.Len() > 0 {
			t.Errorf("%s: unexpected logs:\n%s", st.name, logs.String())
		}
	}
	if got := tr.Verdict("n3"); got.State != dead {
		t.Errorf("Verdict(n3) after n3's own view was dropped = %v; want dead (n1 and n2 still say so)", got)
	}
}

func TestGraceNegativeReportsAtOnce(t *testing.T) {
	tr := membership.New(membership.Config{Grace: -1})
	tr.SetView("n1", []*agentv1.GossipMember{{NodeName: "n2", State: dead}})
	tr.SetView("n3", []*agentv1.GossipMember{{NodeName: "n2", State: dead}})
	got := evaluate(tr, map[string]bool{"n1": true, "n2": true, "n3": true})
	if got["n2"].Partition == "" || !got["n2"].Gone() {
		t.Errorf("n2 = %+v; want gone and a partition at once", got["n2"])
	}
	if got["n1"].Partition != "" || got["n1"].State != unspec {
		t.Errorf("n1 = %+v; want no verdict (nobody else reports)", got["n1"])
	}
}

// TestJoinedIgnoresOlderGossip: after a node's agent registers again, a
// reporter's "left" or "dead" about it counts only from a view received
// Settle after the registration; "alive" counts at once, and a node that
// never registered is judged on every view.
func TestJoinedIgnoresOlderGossip(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	tr := membership.New(membership.Config{Grace: -1, Settle: 5 * time.Second, Now: func() time.Time { return now }})
	set := func(reporter string, st measurev1.GossipState) {
		tr.SetView(reporter, []*agentv1.GossipMember{{NodeName: reporter, State: alive}, {NodeName: "n2", State: st}})
	}
	steps := []struct {
		name     string
		do       func()
		advance  time.Duration
		wantGone bool
		wantBy   []string
	}{
		{"n1 and n4 say n2 left before n2 ever registered", func() { set("n1", left); set("n4", left) }, 0, true, []string{"n1", "n4"}},
		{"n2 registers: n1's older view no longer counts", func() { tr.Joined("n2") }, time.Second, false, nil},
		{"n1's view within the settle still says left", func() { set("n1", left) }, time.Second, false, nil},
		{"n3's dead within the settle", func() { set("n3", dead) }, 0, false, nil},
		{"n1 sees n2 alive", func() { set("n1", alive) }, 0, false, nil},
		{"after the settle, n1 and n3 say dead", func() { now = now.Add(4 * time.Second); set("n1", dead); set("n3", dead) }, 0, true, []string{"n1", "n3"}},
		{"n2 registers again", func() { tr.Joined("n2") }, 0, false, nil},
	}
	for _, s := range steps {
		s.do()
		now = now.Add(s.advance)
		v := tr.Verdict("n2")
		if v.Gone() != s.wantGone || !slices.Equal(v.DeadBy, s.wantBy) {
			t.Errorf("%s: verdict %+v, want gone=%v dead by %v", s.name, v, s.wantGone, s.wantBy)
		}
		if st := evaluate(tr, map[string]bool{"n1": true, "n2": true, "n3": true})["n2"]; st.Gone() != s.wantGone {
			t.Errorf("%s: Evaluate gives %+v, want gone=%v", s.name, st, s.wantGone)
		}
	}
}

func TestQuorum(t *testing.T) {
	for _, tt := range []struct {
		gone, known int
		want        bool
	}{
		{0, 0, false},
		{1, 1, false}, // the node's only source
		{1, 2, false},
		{2, 2, true},
		{2, 3, true},
		{2, 4, false}, // half is no majority
		{3, 4, true},
		{16, 32, false},
		{17, 32, true},
	} {
		if got := membership.Quorum(tt.gone, tt.known); got != tt.want {
			t.Errorf("Quorum(%d gone of %d known) = %v, want %v", tt.gone, tt.known, got, tt.want)
		}
	}
}
