package membership

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/testspec"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Tracker keeps the latest gossip view of every reporting node and the
// partitions. The caller gives views of connected agents only and drops a
// reporter's view when its agent disconnects. It is safe for concurrent
// use.
//
// Verdicts are kept incrementally: per node, counters of the reporters
// that see it alive, suspect, dead or left. Their cost, for V reporters
// with views of M members:
//
//   - SetView and Drop: O(M) (a diff of the reporter's previous view;
//     O(M log M) more when the reporter's set of members changed).
//   - Joined: O(1); O(V log M) only if a view was received at the very
//     instant of the registration with no Settle (Config.Settle < 0).
//   - State: O(1).
//   - Verdict and Statuses, which name reporters: per node O(MaxBy) view
//     lookups of O(log M) when most reporters agree on it; at worst
//     O(V log M), when few reporters know it.
//   - Evaluate: O(N log N) for N nodes, plus a Verdict per node in a
//     partition (reported only then).
//
// Memory: the views share their member sets (see views.go), so V views of
// the same M members cost O(M + V) plus O(1) per member not seen alive.
type Tracker struct {
	grace  time.Duration
	settle time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu        sync.Mutex
	ids       map[string]nodeID
	nodes     []node   // by ID
	free      []nodeID // IDs to reuse
	sets      map[uint64][]*memberSet
	reporters []nodeID             // the nodes with a view, sorted by name
	lastAt    time.Time            // the latest view's reception
	mark      []uint8              // by ID, scratch of SetView: a member's new state; all zero between calls
	buf       []nodeID             // scratch of SetView
	odd       []uint64             // scratch of SetView: ID<<8 | state
	since     map[string]time.Time // node -> when its current disagreement began
	reported  map[string]string    // node -> partition reported
	ignored   map[string]bool      // nodes whose dead or left without a quorum was logged as ignored
}

// New returns an empty Tracker.
func New(cfg Config) *Tracker {
	if cfg.Grace == 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.Grace < 0 {
		cfg.Grace = 0
	}
	if cfg.Settle == 0 {
		cfg.Settle = DefaultSettle
	}
	if cfg.Settle < 0 {
		cfg.Settle = 0
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Tracker{grace: cfg.Grace, settle: cfg.Settle, now: cfg.Now, log: cfg.Logger,
		ids: map[string]nodeID{}, sets: map[uint64][]*memberSet{},
		since: map[string]time.Time{}, reported: map[string]string{}, ignored: map[string]bool{}}
}

// counts reports whether a dead or left about n from a view received at
// at counts: always if n never registered, else if the view was received
// Settle or more after n's latest registration (see Joined).
func (t *Tracker) counts(n *node, at time.Time) bool {
	return !n.hasJoined || !at.Before(n.joined.Add(t.settle))
}

// count adds d (+1 or -1) to x's counter of st, for a statement from a
// view received at at. t.mu is held.
func (t *Tracker) count(x nodeID, st measurev1.GossipState, at time.Time, d int32) {
	n := &t.nodes[x]
	switch st {
	case measurev1.GossipState_GOSSIP_STATE_ALIVE:
		n.alive += d
	case measurev1.GossipState_GOSSIP_STATE_SUSPECT:
		n.suspect += d
	case measurev1.GossipState_GOSSIP_STATE_DEAD:
		if t.counts(n, at) {
			n.dead += d
		}
	case measurev1.GossipState_GOSSIP_STATE_LEFT:
		if t.counts(n, at) {
			n.left += d
		}
	}
}

// known reports whether st is a state SetView keeps.
func known(st measurev1.GossipState) bool {
	return st >= measurev1.GossipState_GOSSIP_STATE_ALIVE && st <= measurev1.GossipState_GOSSIP_STATE_LEFT
}

// SetView replaces reporter's view with members. Members with an
// unspecified (or unknown) state are left out; of a member listed twice,
// the last state counts. It costs O(len(members)): see Tracker.
func (t *Tracker) SetView(reporter string, members []*agentv1.GossipMember) {
	t.SetMembers(reporter, Compact(members))
}

// SetMembers is SetView of members in compact form.
func (t *Tracker) SetMembers(reporter string, members Members) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	r := t.intern(reporter)
	buf := t.buf[:0]
	for i := range members.Len() {
		st := members.states[i]
		if !known(st) {
			continue
		}
		x := t.internBytes(members.name(i))
		if t.mark[x] == 0 {
			buf = append(buf, x)
		}
		t.mark[x] = uint8(st)
	}
	old := t.nodes[r].view
	odd := t.odd[:0]
	kept := 0
	if old != nil {
		old.each(func(x nodeID, was measurev1.GossipState) {
			is := measurev1.GossipState(t.mark[x])
			if is != 0 {
				kept++
				if is != measurev1.GossipState_GOSSIP_STATE_ALIVE {
					odd = append(odd, uint64(x)<<8|uint64(is))
				}
				t.mark[x] = 0 // done
			}
			if x != r && (was != is || StateGone(was)) { // a gone may count now that the view is newer
				t.count(x, was, old.at, -1)
				t.count(x, is, now, +1)
			}
		})
	}
	sorted := true
	for _, x := range buf {
		is := measurev1.GossipState(t.mark[x])
		if is == 0 {
			continue // in the old view: done
		}
		t.mark[x] = 0
		if is != measurev1.GossipState_GOSSIP_STATE_ALIVE {
			odd = append(odd, uint64(x)<<8|uint64(is))
			sorted = false
		}
		if x != r {
			t.count(x, is, now, +1)
		}
	}
	var set *memberSet
	if old != nil && kept == len(buf) && kept == len(old.set.ids) {
		set = old.set
		set.refs++
	} else {
		ids := slices.Clone(buf)
		slices.Sort(ids)
		set = t.acquireSet(ids)
	}
	if !sorted {
		slices.Sort(odd)
	}
	t.nodes[r].view = newView(set, odd, now)
	if old != nil {
		t.releaseSet(old.set)
	} else {
		i, _ := slices.BinarySearchFunc(t.reporters, reporter, func(x nodeID, name string) int { return strings.Compare(t.nodes[x].name, name) })
		t.reporters = slices.Insert(t.reporters, i, r)
	}
	if now.After(t.lastAt) {
		t.lastAt = now
	}
	t.buf, t.odd = buf[:0], odd[:0]
}

// Drop forgets reporter's view.
func (t *Tracker) Drop(reporter string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.ids[reporter]
	if !ok || t.nodes[r].view == nil {
		return
	}
	v := t.nodes[r].view
	v.each(func(x nodeID, st measurev1.GossipState) {
		if x != r {
			t.count(x, st, v.at, -1)
		}
	})
	t.nodes[r].view = nil
	if i := slices.Index(t.reporters, r); i >= 0 {
		t.reporters = slices.Delete(t.reporters, i, i+1)
	}
	t.releaseSet(v.set) // may release r too
	t.release(r)
}

// Joined records that node's agent registered now. From then on, a
// reporter's dead or left about node counts only from a view received
// Settle or more after this: an older view predates the node's new
// session, and a newer one may not have seen the node rejoin yet.
func (t *Tracker) Joined(node string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	x := t.intern(node)
	n := &t.nodes[x]
	n.joined, n.hasJoined = now, true
	if t.lastAt.Before(now.Add(t.settle)) { // every view predates joined+settle: no dead or left counts
		n.dead, n.left = 0, 0
		return
	}
	// A view received at this very instant, with no settle: judge each.
	n.dead, n.left = 0, 0
	for _, r := range t.reporters {
		if v := t.nodes[r].view; r != x {
			if st := v.state(x); StateGone(st) {
				t.count(x, st, v.at, +1)
			}
		}
	}
}

// State is the verdict state on node, in O(1): Verdict without the lists.
func (t *Tracker) State(node string) measurev1.GossipState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if x, ok := t.ids[node]; ok {
		return t.nodes[x].state()
	}
	return measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED
}

// Verdict is Judge over the views held now, without the dead or left
// statements that predate node's registration (see Joined), with at most
// MaxBy reporters named per list.
func (t *Tracker) Verdict(node string) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.verdict(node)
}

// verdict is Verdict; t.mu is held.
func (t *Tracker) verdict(name string) Verdict {
	x, ok := t.ids[name]
	if !ok {
		return Verdict{}
	}
	n := &t.nodes[x]
	v := Verdict{State: n.state()}
	na, nd := int(n.alive+n.suspect), int(n.dead+n.left)
	wa, wd := min(na, MaxBy), min(nd, MaxBy)
	for _, r := range t.reporters {
		if len(v.AliveBy) == wa && len(v.DeadBy) == wd {
			break
		}
		rv := t.nodes[r].view
		if r == x || len(v.AliveBy) == wa && len(rv.odd) == 0 { // only the dead are missing, and rv sees all alive
			continue
		}
		switch st := rv.state(x); st {
		case measurev1.GossipState_GOSSIP_STATE_ALIVE, measurev1.GossipState_GOSSIP_STATE_SUSPECT:
			if len(v.AliveBy) < wa {
				v.AliveBy = append(v.AliveBy, t.nodes[r].name)
			}
		case measurev1.GossipState_GOSSIP_STATE_DEAD, measurev1.GossipState_GOSSIP_STATE_LEFT:
			if len(v.DeadBy) < wd && t.counts(n, rv.at) {
				v.DeadBy = append(v.DeadBy, t.nodes[r].name)
			}
		}
	}
	v.MoreAlive, v.MoreDead = na-len(v.AliveBy), nd-len(v.DeadBy)
	return v
}

// Statuses returns the verdict (as Verdict) on each of nodes and its
// partition as of the latest Evaluate.
func (t *Tracker) Statuses(nodes []string) map[string]Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Status, len(nodes))
	for _, node := range nodes {
		out[node] = Status{Verdict: t.verdict(node), Partition: t.reported[node]}
	}
	return out
}

// Pending reports whether a disagreement is younger than the grace: an
// Evaluate later may turn it into a partition with no new view.
func (t *Tracker) Pending() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.since) > len(t.reported)
}

// Evaluate judges every node of nodes (node name to whether the
// coordinator is connected to it), updates the partitions, logs those
// that appeared or ended, and returns the partitions (node to its
// description). It costs O(1) per agreeing node (see Tracker).
func (t *Tracker) Evaluate(nodes map[string]bool) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	for _, name := range slices.Sorted(maps.Keys(nodes)) {
		state := measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED
		unconfirmed := false
		if x, ok := t.ids[name]; ok {
			state, unconfirmed = t.nodes[x].state(), t.nodes[x].unconfirmed()
		}
		connected := nodes[name]
		t.logIgnored(name, unconfirmed, connected)
		d := disagrees(connected, state)
		if !d {
			delete(t.since, name)
		} else if _, ok := t.since[name]; !ok {
			t.since[name] = now
			if connected {
				v := t.verdict(name)
				t.log.Warn("gossip's quorum declares a connected node dead; the node stays in the mesh while its session's heartbeats are recent",
					"node", name, "gossip_state", testspec.GossipStateName(state), "gossip_dead_by", v.DeadBy, "gossip_dead", v.DeadCount(),
					"gossip_alive", v.AliveCount())
			}
		}
		partition, prev := "", t.reported[name]
		var v Verdict
		if d && now.Sub(t.since[name]) >= t.grace {
			v = t.verdict(name)
			partition = Disagreement(name, connected, v)
		}
		if prev != partition {
			switch partition {
			case "":
				t.log.Info("partition over: the coordinator and gossip agree", "node", name, "was", prev,
					"gossip_state", testspec.GossipStateName(state), "connected", connected)
			default:
				t.log.Warn("partition between the coordinator and gossip", "node", name, "partition", partition,
					"connected", connected, "gossip_state", testspec.GossipStateName(state),
					"gossip_alive_by", v.AliveBy, "gossip_dead_by", v.DeadBy, "since", t.since[name])
			}
		}
		if partition == "" {
			delete(t.reported, name)
		} else {
			t.reported[name] = partition
		}
	}
	for node := range t.since { // nodes no longer listed
		if _, ok := nodes[node]; !ok {
			delete(t.since, node)
		}
	}
	for node := range t.reported {
		if _, ok := nodes[node]; !ok {
			delete(t.reported, node)
		}
	}
	for node := range t.ignored {
		if _, ok := nodes[node]; !ok {
			delete(t.ignored, node)
		}
	}
	return maps.Clone(t.reported)
}

// logIgnored logs, once each time it begins, that reporters declare node
// dead or left without a quorum (unconfirmed): their word is ignored. A
// warning if the coordinator is connected to the node, a note otherwise.
// t.mu is held.
func (t *Tracker) logIgnored(node string, unconfirmed, connected bool) {
	if !unconfirmed {
		delete(t.ignored, node)
		return
	}
	if t.ignored[node] {
		return
	}
	t.ignored[node] = true
	v := t.verdict(node)
	// Of a node the coordinator lost, a first reporter's dead is how gossip
	// catches up; of a connected one, it is worth a warning.
	level := slog.LevelInfo
	if connected {
		level = slog.LevelWarn
	}
	t.log.Log(context.Background(), level, "gossip's dead ignored: no quorum of the reporters that know the node",
		"node", node, "connected", connected, "gossip_dead_by", v.DeadBy, "gossip_dead", v.DeadCount(),
		"gossip_alive", v.AliveCount(), "quorum", fmt.Sprintf("at least %d and more than half of %d", MinQuorum, v.DeadCount()+v.AliveCount()))
}
