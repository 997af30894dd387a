package membership_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/meshperf/meshperf/coordinator/membership"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// model is the brute-force reference of a Tracker: the views as
// membership.Views, judged by membership.Judge over the views that count
// under the settle rule.
type model struct {
	settle time.Duration
	views  membership.Views
	viewAt map[string]time.Time
	joined map[string]time.Time
}

func newModel(settle time.Duration) *model {
	return &model{settle: settle, views: membership.Views{}, viewAt: map[string]time.Time{}, joined: map[string]time.Time{}}
}

func (m *model) setView(now time.Time, reporter string, members []*agentv1.GossipMember) {
	v := map[string]measurev1.GossipState{}
	for _, mb := range members {
		if s := mb.GetState(); s >= alive && s <= left {
			v[mb.GetNodeName()] = s
		}
	}
	m.views[reporter], m.viewAt[reporter] = v, now
}

// update applies a delta to reporter's view as the protocol defines it:
// each changed member takes its state, one with a state a view leaves out
// (forgotten, unspecified, unknown) is removed; then the merged view is
// set as a whole, received now. No view: the delta is ignored.
func (m *model) update(now time.Time, reporter string, changed []*agentv1.GossipMember) {
	v, ok := m.views[reporter]
	if !ok {
		return
	}
	merged := maps.Clone(v)
	for _, mb := range changed {
		if s := mb.GetState(); s >= alive && s <= left {
			merged[mb.GetNodeName()] = s
		} else {
			delete(merged, mb.GetNodeName())
		}
	}
	m.views[reporter], m.viewAt[reporter] = merged, now
}

func (m *model) drop(reporter string) { delete(m.views, reporter); delete(m.viewAt, reporter) }

// judge is the Tracker's verdict as it was before counters: Judge over the
// views, less the dead or left that predate the node's joined+settle.
func (m *model) judge(node string) membership.Verdict {
	joined, ok := m.joined[node]
	if !ok {
		return membership.Judge(m.views, node)
	}
	views := membership.Views{}
	for r, members := range m.views {
		st := members[node]
		if (st == dead || st == left) && m.viewAt[r].Before(joined.Add(m.settle)) {
			continue
		}
		views[r] = members
	}
	return membership.Judge(views, node)
}

// bounded is v as a Tracker gives it: at most MaxBy names per list.
func bounded(v membership.Verdict) membership.Verdict {
	if n := len(v.AliveBy); n > membership.MaxBy {
		v.AliveBy, v.MoreAlive = v.AliveBy[:membership.MaxBy], n-membership.MaxBy
	}
	if n := len(v.DeadBy); n > membership.MaxBy {
		v.DeadBy, v.MoreDead = v.DeadBy[:membership.MaxBy], n-membership.MaxBy
	}
	return v
}

// pair drives a Tracker and its model with the same operations.
type pair struct {
	now   time.Time
	tr    *membership.Tracker
	m     *model
	nodes []string
}

func newPair(settle time.Duration, nodes []string) *pair {
	p := &pair{now: time.Unix(1_000_000, 0), nodes: nodes}
	s := settle
	if s == 0 {
		s = -1 // none
	}
	p.tr = membership.New(membership.Config{Grace: -1, Settle: s, Now: func() time.Time { return p.now }})
	p.m = newModel(settle)
	return p
}

func (p *pair) setView(r string, members []*agentv1.GossipMember) {
	p.tr.SetView(r, members)
	p.m.setView(p.now, r, members)
}

// update gives both the delta; the Tracker must refuse it exactly when
// the model holds no view of r.
func (p *pair) update(t *testing.T, r string, changed []*agentv1.GossipMember) {
	t.Helper()
	_, had := p.m.views[r]
	err := p.tr.UpdateView(r, changed)
	if had && err != nil || !had && !errors.Is(err, membership.ErrNoView) {
		t.Errorf("UpdateView(%s) with a view: %v; error = %v", r, had, err)
	}
	p.m.update(p.now, r, changed)
}

func (p *pair) drop(r string) { p.tr.Drop(r); p.m.drop(r) }

func (p *pair) joined(n string) { p.tr.Joined(n); p.m.joined[n] = p.now }

// check compares every node's State and Verdict with the model's.
func (p *pair) check(t *testing.T, step string) bool {
	t.Helper()
	ok := true
	for _, n := range p.nodes {
		want := bounded(p.m.judge(n))
		if got := p.tr.State(n); got != want.State {
			t.Errorf("%s: State(%s) = %v, want %v", step, n, got, want.State)
			ok = false
		}
		if got := p.tr.Verdict(n); !sameVerdict(want, got) {
			t.Errorf("%s: Verdict(%s) (-want +got):\n%s", step, n, cmp.Diff(want, got, cmpopts.EquateEmpty()))
			ok = false
		}
	}
	return ok
}

// sameVerdict is cmp.Equal with cmpopts.EquateEmpty, faster.
func sameVerdict(a, b membership.Verdict) bool {
	return a.State == b.State && slices.Equal(a.AliveBy, b.AliveBy) && slices.Equal(a.DeadBy, b.DeadBy) &&
		a.MoreAlive == b.MoreAlive && a.MoreDead == b.MoreDead
}

// op applies one operation decoded from b (5 bytes) and names it.
func (p *pair) op(t *testing.T, b []byte) string {
	states := []measurev1.GossipState{alive, alive, suspect, dead, left, unspec, 9}
	r := p.nodes[int(b[1])%len(p.nodes)]
	switch b[0] % 10 {
	case 8, 9: // a delta: which members (bits of b[2]), states from b[3], b[4]
		var changed []*agentv1.GossipMember
		seed := uint64(b[3])<<8 | uint64(b[4])
		rnd := rand.New(rand.NewPCG(seed, ^seed))
		deltaStates := append(slices.Clone(states), forgotten, forgotten)
		for i, n := range p.nodes {
			if b[2]&(1<<(i%8)) != 0 && (b[0]%10 == 8 || i%3 == 0) { // 9: fewer members
				changed = append(changed, &agentv1.GossipMember{NodeName: n, State: deltaStates[rnd.IntN(len(deltaStates))]})
				if rnd.IntN(10) == 0 { // listed twice
					changed = append(changed, &agentv1.GossipMember{NodeName: n, State: deltaStates[rnd.IntN(len(deltaStates))]})
				}
			}
		}
		if rnd.IntN(4) == 0 { // a member no view knows, forgotten
			changed = append(changed, &agentv1.GossipMember{NodeName: "stranger", State: forgotten})
		}
		rnd.Shuffle(len(changed), func(i, j int) { changed[i], changed[j] = changed[j], changed[i] })
		p.update(t, r, changed)
		var b []byte
		for _, m := range changed {
			b = fmt.Appendf(b, " %s:%d", m.GetNodeName(), m.GetState())
		}
		return "UpdateView(" + r + "," + string(b) + ")"
	case 0, 1, 2, 3: // a view: which members (bits of b[2]), states from b[3], b[4]
		var members []*agentv1.GossipMember
		seed := uint64(b[3])<<8 | uint64(b[4])
		rnd := rand.New(rand.NewPCG(seed, seed))
		for i, n := range p.nodes {
			if b[2]&(1<<(i%8)) != 0 || b[0]%8 == 3 { // 3: every member
				st := alive
				if rnd.IntN(3) == 0 {
					st = states[rnd.IntN(len(states))]
				}
				members = append(members, &agentv1.GossipMember{NodeName: n, State: st})
				if rnd.IntN(10) == 0 { // listed twice
					members = append(members, &agentv1.GossipMember{NodeName: n, State: states[rnd.IntN(len(states))]})
				}
			}
		}
		rnd.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		p.setView(r, members)
		var b []byte
		for _, m := range members {
			b = fmt.Appendf(b, " %s:%d", m.GetNodeName(), m.GetState())
		}
		return "SetView(" + r + "," + string(b) + ")"
	case 4:
		p.drop(r)
		return fmt.Sprintf("Drop(%s)", r)
	case 5:
		p.joined(r)
		return fmt.Sprintf("Joined(%s)", r)
	default:
		d := time.Duration(b[2]%4) * time.Second
		p.now = p.now.Add(d)
		return fmt.Sprintf("advance %v", d)
	}
}

// run applies the operations of data (5 bytes each) and checks after each.
func run(t *testing.T, settle time.Duration, nodes []string, data []byte) {
	t.Helper()
	p := newPair(settle, nodes)
	for i := 0; i+5 <= len(data); i += 5 {
		step := p.op(t, data[i:i+5])
		if !p.check(t, fmt.Sprintf("op %d %s", i/5, step)) {
			return
		}
	}
}

// TestTrackerMatchesJudge: random sequences of SetView, UpdateView
// (deltas, also before any view), Drop, Joined and clock steps give the verdicts of Judge over the same views, with and
// without a settle window, with few reporters (complete lists) and more
// than MaxBy (bounded lists).
func TestTrackerMatchesJudge(t *testing.T) {
	few := []string{"n1", "n2", "n3", "n4"}
	var many []string
	for i := range 14 {
		many = append(many, fmt.Sprintf("m%02d", i))
	}
	for _, tt := range []struct {
		name   string
		settle time.Duration
		nodes  []string
	}{
		{"few, no settle", 0, few},
		{"few, settle", 2 * time.Second, few},
		{"many, no settle", 0, many},
		{"many, settle", 2 * time.Second, many},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(1, uint64(len(tt.nodes))))
			for range 200 {
				data := make([]byte, 5*40)
				for i := range data {
					data[i] = byte(rnd.Uint32())
				}
				run(t, tt.settle, tt.nodes, data)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// FuzzTracker is TestTrackerMatchesJudge's check on fuzzed operations.
func FuzzTracker(f *testing.F) {
	f.Add([]byte{3, 0, 0, 1, 2, 5, 1, 0, 0, 0, 3, 0, 0, 3, 4, 7, 0, 3, 0, 0, 3, 0, 0, 5, 6}, true)
	f.Add([]byte{0, 1, 0xff, 9, 9, 4, 1, 0, 0, 0, 5, 2, 0, 0, 0}, false)
	f.Fuzz(func(t *testing.T, data []byte, settle bool) {
		s := time.Duration(0)
		if settle {
			s = 2 * time.Second
		}
		run(t, s, []string{"n1", "n2", "n3", "n4"}, data)
	})
}

// TestTrackerForgetsNames: once no view mentions a node (and it never
// registered), the tracker keeps nothing of it, and a name reused later
// starts afresh.
func TestTrackerForgetsNames(t *testing.T) {
	p := newPair(0, []string{"n1", "n2", "gone"})
	p.setView("n1", []*agentv1.GossipMember{{NodeName: "gone", State: dead}, {NodeName: "n2", State: alive}})
	p.setView("n2", []*agentv1.GossipMember{{NodeName: "gone", State: left}})
	p.check(t, "both know gone")
	p.setView("n1", []*agentv1.GossipMember{{NodeName: "n2", State: alive}})
	p.drop("n2")
	p.check(t, "nobody knows gone")
	p.setView("n2", []*agentv1.GossipMember{{NodeName: "gone", State: suspect}, {NodeName: "n1", State: alive}})
	p.check(t, "gone is back")
	if got := p.tr.Verdict("gone"); got.State != suspect || !slices.Equal(got.AliveBy, []string{"n2"}) {
		t.Errorf("Verdict(gone) = %+v, want suspect by n2", got)
	}
}

// TestUpdateView: deltas change only what they list, forget members, and
// are refused before a whole view and after Drop.
func TestUpdateView(t *testing.T) {
	m := func(name string, st measurev1.GossipState) *agentv1.GossipMember {
		return &agentv1.GossipMember{NodeName: name, State: st}
	}
	for _, tt := range []struct {
		name    string
		view    []*agentv1.GossipMember // nil: no whole view first
		drop    bool
		delta   []*agentv1.GossipMember
		wantErr bool
		want    map[string]measurev1.GossipState // State of each node
	}{
		{"no whole view", nil, false, []*agentv1.GossipMember{m("n2", dead)}, true, map[string]measurev1.GossipState{"n2": unspec}},
		{"after drop", []*agentv1.GossipMember{m("n2", alive)}, true, []*agentv1.GossipMember{m("n2", dead)}, true, map[string]measurev1.GossipState{"n2": unspec}},
		{"state change", []*agentv1.GossipMember{m("n1", alive), m("n2", alive), m("n3", alive)}, false,
			[]*agentv1.GossipMember{m("n2", dead)}, false, map[string]measurev1.GossipState{"n2": suspect, "n3": alive}}, // one reporter: no quorum
		{"forgotten", []*agentv1.GossipMember{m("n2", dead), m("n3", alive)}, false,
			[]*agentv1.GossipMember{m("n2", forgotten)}, false, map[string]measurev1.GossipState{"n2": unspec, "n3": alive}},
		{"new member, last listing counts", []*agentv1.GossipMember{m("n3", alive)}, false,
			[]*agentv1.GossipMember{m("n4", dead), m("n4", suspect)}, false, map[string]measurev1.GossipState{"n3": alive, "n4": suspect}},
		{"empty delta", []*agentv1.GossipMember{m("n3", left)}, false, nil, false, map[string]measurev1.GossipState{"n3": suspect}}, // one reporter's left: no quorum
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr := membership.New(membership.Config{Grace: -1, Settle: -1})
			if tt.view != nil {
				tr.SetView("n1", tt.view)
			}
			if tt.drop {
				tr.Drop("n1")
			}
			err := tr.UpdateView("n1", tt.delta)
			if gotErr := errors.Is(err, membership.ErrNoView); gotErr != tt.wantErr || !tt.wantErr && err != nil {
				t.Errorf("UpdateView: error %v, want ErrNoView: %v", err, tt.wantErr)
			}
			for node, want := range tt.want {
				if got := tr.State(node); got != want {
					t.Errorf("State(%s) = %v, want %v", node, got, want)
				}
			}
		})
	}
}
