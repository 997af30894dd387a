// Package membership owns the coordinator's second view of its agents: the
// gossip views the connected agents report (agent/gossip). It keeps the
// latest view per reporting node, derives per node what gossip says of it
// (Judge), and compares that with the coordinator's own view, its
// sessions: a node that gossip declares dead while the coordinator is
// connected to it, or that gossip sees alive while the coordinator has
// lost it, is a partition (Disagreement). A Tracker reports a partition
// once it has lasted longer than a grace period, so that the few seconds
// gossip takes to notice a crash the coordinator saw at once (or the
// reverse) are not reported, and logs it when it appears and disappears.
package membership

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// Views maps each reporting node to what its gossip says of every member
// it knows: member name to state.
type Views map[string]map[string]agentv1.GossipState

// Verdict is what the reporters' gossip says of one node.
type Verdict struct {
	// State is ALIVE if a reporter sees the node alive, else SUSPECT if one
	// suspects it, else DEAD if every reporter that knows the node
	// declares it dead or left (LEFT if they all say it left), else
	// UNSPECIFIED: no reporter knows the node.
	State agentv1.GossipState
	// AliveBy are the reporters that see the node alive or suspect, sorted.
	AliveBy []string
	// DeadBy are the reporters that declare it dead or left, sorted.
	DeadBy []string
}

// Gone reports whether gossip declares the node dead or left.
func (v Verdict) Gone() bool {
	return v.State == agentv1.GossipState_GOSSIP_STATE_DEAD || v.State == agentv1.GossipState_GOSSIP_STATE_LEFT
}

// Judge derives the verdict on node from views. The node's own view is
// left out: an agent always sees itself alive.
func Judge(views Views, node string) Verdict {
	var v Verdict
	var alive, suspect, left bool
	for reporter, members := range views {
		if reporter == node {
			continue
		}
		switch members[node] {
		case agentv1.GossipState_GOSSIP_STATE_ALIVE:
			alive = true
			v.AliveBy = append(v.AliveBy, reporter)
		case agentv1.GossipState_GOSSIP_STATE_SUSPECT:
			suspect = true
			v.AliveBy = append(v.AliveBy, reporter)
		case agentv1.GossipState_GOSSIP_STATE_DEAD:
			v.DeadBy = append(v.DeadBy, reporter)
		case agentv1.GossipState_GOSSIP_STATE_LEFT:
			left = true
			v.DeadBy = append(v.DeadBy, reporter)
		}
	}
	slices.Sort(v.AliveBy)
	slices.Sort(v.DeadBy)
	switch {
	case alive:
		v.State = agentv1.GossipState_GOSSIP_STATE_ALIVE
	case suspect:
		v.State = agentv1.GossipState_GOSSIP_STATE_SUSPECT
	case len(v.DeadBy) > 0 && left && allLeft(views, node, v.DeadBy):
		v.State = agentv1.GossipState_GOSSIP_STATE_LEFT
	case len(v.DeadBy) > 0:
		v.State = agentv1.GossipState_GOSSIP_STATE_DEAD
	}
	return v
}

func allLeft(views Views, node string, reporters []string) bool {
	for _, r := range reporters {
		if views[r][node] != agentv1.GossipState_GOSSIP_STATE_LEFT {
			return false
		}
	}
	return true
}

// Disagreement describes, naming both sides, how the coordinator's view of
// node (connected or not) and gossip's verdict disagree; "" if they agree.
// They disagree when the coordinator is connected to a node gossip declares
// gone, or has lost a node that gossip sees alive (a suspect agrees with
// neither side yet).
func Disagreement(node string, connected bool, v Verdict) string {
	switch {
	case connected && v.Gone():
		return fmt.Sprintf("the coordinator is connected to %s, but the gossip of %s declares it %s",
			node, strings.Join(v.DeadBy, ", "), stateName(v.State))
	case !connected && v.State == agentv1.GossipState_GOSSIP_STATE_ALIVE:
		return fmt.Sprintf("the coordinator lost %s, but the gossip of %s sees it alive",
			node, strings.Join(v.AliveBy, ", "))
	}
	return ""
}

// stateName is a state's name in lower case: "dead", "left".
func stateName(s agentv1.GossipState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "GOSSIP_STATE_"))
}

// DefaultGrace is how long a disagreement lasts before it is reported as a
// partition when Config.Grace is zero: longer than memberlist's LAN
// settings take to declare a crashed member of a small pool dead.
const DefaultGrace = time.Minute

// DefaultSettle is how long after a node's agent registers a reporter's
// view must have been received for its "dead" or "left" about that node to
// count, when Config.Settle is zero: memberlist takes a few hundred
// milliseconds to see a restarted member alive again, and a fresh session
// is the newer evidence.
const DefaultSettle = 5 * time.Second

// Config configures New.
type Config struct {
	// Grace is how long a disagreement must last to be a partition; zero
	// means DefaultGrace, a negative value none.
	Grace time.Duration
	// Settle is how long after a node's registration (Joined) a reporter's
	// view must have been received for its dead or left about the node to
	// count; zero means DefaultSettle, a negative value none.
	Settle time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger receives a warning when a partition appears and a note when
	// it is over; nil means discard.
	Logger *slog.Logger
}

// Status is one node's gossip verdict and partition.
type Status struct {
	Verdict
	// Partition is the disagreement's description once it lasted longer
	// than the grace; "" otherwise.
	Partition string
}

// Tracker keeps the latest gossip view of every reporting node and the
// partitions. The caller gives views of connected agents only and drops a
// reporter's view when its agent disconnects. It is safe for concurrent
// use.
type Tracker struct {
	grace  time.Duration
	settle time.Duration
	now    func() time.Time
	log    *slog.Logger

	mu       sync.Mutex
	views    Views
	viewAt   map[string]time.Time // reporter -> when its view was received
	joined   map[string]time.Time // node -> when its agent last registered
	since    map[string]time.Time // node -> when its current disagreement began
	reported map[string]string    // node -> partition reported
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
	return &Tracker{grace: cfg.Grace, settle: cfg.Settle, now: cfg.Now, log: cfg.Logger, views: Views{},
		viewAt: map[string]time.Time{}, joined: map[string]time.Time{}, since: map[string]time.Time{}, reported: map[string]string{}}
}

// SetView replaces reporter's view with members. Members with an
// unspecified state are left out.
func (t *Tracker) SetView(reporter string, members []*agentv1.GossipMember) {
	v := make(map[string]agentv1.GossipState, len(members))
	for _, m := range members {
		if m.GetState() != agentv1.GossipState_GOSSIP_STATE_UNSPECIFIED {
			v[m.GetNodeName()] = m.GetState()
		}
	}
	t.mu.Lock()
	t.views[reporter] = v
	t.viewAt[reporter] = t.now()
	t.mu.Unlock()
}

// Drop forgets reporter's view.
func (t *Tracker) Drop(reporter string) {
	t.mu.Lock()
	delete(t.views, reporter)
	delete(t.viewAt, reporter)
	t.mu.Unlock()
}

// Joined records that node's agent registered now. From then on, a
// reporter's dead or left about node counts only from a view received
// Settle or more after this: an older view predates the node's new
// session, and a newer one may not have seen the node rejoin yet.
func (t *Tracker) Joined(node string) {
	t.mu.Lock()
	t.joined[node] = t.now()
	t.mu.Unlock()
}

// Verdict is Judge over the views held now, without the dead or left
// statements that predate node's registration (see Joined).
func (t *Tracker) Verdict(node string) Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.judge(node)
}

// judge is Judge of node over the views that count for it; t.mu is held.
func (t *Tracker) judge(node string) Verdict {
	joined, ok := t.joined[node]
	if !ok {
		return Judge(t.views, node)
	}
	views := make(Views, len(t.views))
	for reporter, members := range t.views {
		st := members[node]
		gone := st == agentv1.GossipState_GOSSIP_STATE_DEAD || st == agentv1.GossipState_GOSSIP_STATE_LEFT
		if gone && t.viewAt[reporter].Before(joined.Add(t.settle)) {
			continue // says nothing about node's current session
		}
		views[reporter] = members
	}
	return Judge(views, node)
}

// Evaluate judges every node of nodes (node name to whether the
// coordinator is connected to it), updates the partitions, logs those
// that appeared or ended, and returns every node's status.
func (t *Tracker) Evaluate(nodes map[string]bool) map[string]Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	out := make(map[string]Status, len(nodes))
	for _, node := range slices.Sorted(maps.Keys(nodes)) {
		v := t.judge(node)
		st := Status{Verdict: v}
		d := Disagreement(node, nodes[node], v)
		if d == "" {
			delete(t.since, node)
		} else if _, ok := t.since[node]; !ok {
			t.since[node] = now
		}
		if d != "" && now.Sub(t.since[node]) >= t.grace {
			st.Partition = d
		}
		if prev := t.reported[node]; prev != st.Partition {
			switch {
			case st.Partition == "":
				t.log.Info("partition over: the coordinator and gossip agree", "node", node, "was", prev,
					"gossip_state", stateName(v.State), "connected", nodes[node])
			default:
				t.log.Warn("partition between the coordinator and gossip", "node", node, "partition", st.Partition,
					"connected", nodes[node], "gossip_state", stateName(v.State),
					"gossip_alive_by", v.AliveBy, "gossip_dead_by", v.DeadBy, "since", t.since[node])
			}
		}
		if st.Partition == "" {
			delete(t.reported, node)
		} else {
			t.reported[node] = st.Partition
		}
		out[node] = st
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
	return out
}
