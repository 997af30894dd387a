// Package membership owns the coordinator's second view of its agents: the
// gossip views the connected agents report (agent/gossip). It keeps the
// latest view per reporting node, derives per node what gossip says of it
// (Judge: gossip declares a node dead or left only on a quorum of the
// reporters that know it, see Quorum), and compares that with the coordinator's own view, its
// sessions: a node that gossip declares dead while the coordinator is
// connected to it, or that gossip sees alive while the coordinator has
// lost it, is a partition (Disagreement). A Tracker reports a partition
// once it has lasted longer than a grace period, so that the few seconds
// gossip takes to notice a crash the coordinator saw at once (or the
// reverse) are not reported, and logs it when it appears and disappears.
//
// Judge is the reference: it walks every view. A Tracker keeps the same
// verdicts incrementally (per-node counters updated by each view's diff,
// compact shared views), so that thousands of agents each reporting
// thousands of members cost O(view) per view and O(1) per verdict state;
// see Tracker for the costs.
package membership

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"

	"github.com/meshperf/meshperf/internal/testspec"
)

// Views maps each reporting node to what its gossip says of every member
// it knows: member name to state.
type Views map[string]map[string]measurev1.GossipState

// Verdict is what the reporters' gossip says of one node.
//
// Judge fills AliveBy and DeadBy with every reporter. A Tracker fills them
// with at most MaxBy reporters each, the first by name, and counts the rest
// in MoreAlive and MoreDead; it fills them only when asked for the node
// (Tracker.Verdict, Tracker.Statuses) or to describe a partition, never on
// the hot paths (SetView, Tracker.State, Evaluate of agreeing nodes).
type Verdict struct {
	// State is DEAD if a quorum of the reporters that know the node
	// declares it dead or left (LEFT if all of those say it left; see
	// Quorum), else ALIVE if a reporter sees it alive, else SUSPECT if one
	// suspects it or declares it dead or left without a quorum
	// (Unconfirmed), else UNSPECIFIED: no reporter knows the node.
	State measurev1.GossipState
	// AliveBy are reporters that see the node alive or suspect, sorted.
	AliveBy []string
	// DeadBy are reporters that declare it dead or left, sorted.
	DeadBy []string
	// MoreAlive and MoreDead count the reporters that see the node alive
	// or suspect, or declare it dead or left, beyond those in AliveBy and
	// DeadBy; zero when the lists are complete.
	MoreAlive, MoreDead int
}

// MaxBy is how many reporters a Tracker names in Verdict.AliveBy and
// Verdict.DeadBy; the others are only counted.
const MaxBy = 10

// AliveCount is how many reporters see the node alive or suspect.
func (v Verdict) AliveCount() int { return len(v.AliveBy) + v.MoreAlive }

// DeadCount is how many reporters declare the node dead or left.
func (v Verdict) DeadCount() int { return len(v.DeadBy) + v.MoreDead }

// Gone reports whether gossip declares the node dead or left: a quorum of
// the reporters that know it says so.
func (v Verdict) Gone() bool { return StateGone(v.State) }

// Unconfirmed reports whether some reporters declare the node dead or left
// but not a quorum of them: their word is ignored.
func (v Verdict) Unconfirmed() bool { return v.DeadCount() > 0 && !v.Gone() }

// MinQuorum is the fewest reporters whose dead or left declares a node
// gone: never the word of one reporter alone, be it the node's only
// source.
const MinQuorum = 2

// Quorum reports whether gone reporters declaring a node dead or left, of
// the known reporters that know it (see it alive, suspect, dead or left;
// the node's own view left out), declare it gone: at least MinQuorum, and
// more than half of known. A node that only one reporter knows is never
// declared gone by gossip: its only source's word is not enough.
func Quorum(gone, known int) bool { return gone >= MinQuorum && 2*gone > known }

// StateGone reports whether s, a node's gossip state, is dead or left:
// the states a quorum of reporters must agree on before gossip takes the
// node out of the mesh (Verdict.Gone).
func StateGone(s measurev1.GossipState) bool {
	return s == measurev1.GossipState_GOSSIP_STATE_DEAD || s == measurev1.GossipState_GOSSIP_STATE_LEFT
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
		case measurev1.GossipState_GOSSIP_STATE_ALIVE:
			alive = true
			v.AliveBy = append(v.AliveBy, reporter)
		case measurev1.GossipState_GOSSIP_STATE_SUSPECT:
			suspect = true
			v.AliveBy = append(v.AliveBy, reporter)
		case measurev1.GossipState_GOSSIP_STATE_DEAD:
			v.DeadBy = append(v.DeadBy, reporter)
		case measurev1.GossipState_GOSSIP_STATE_LEFT:
			left = true
			v.DeadBy = append(v.DeadBy, reporter)
		}
	}
	slices.Sort(v.AliveBy)
	slices.Sort(v.DeadBy)
	quorum := Quorum(len(v.DeadBy), len(v.DeadBy)+len(v.AliveBy))
	switch {
	case quorum && left && allLeft(views, node, v.DeadBy):
		v.State = measurev1.GossipState_GOSSIP_STATE_LEFT
	case quorum:
		v.State = measurev1.GossipState_GOSSIP_STATE_DEAD
	case alive:
		v.State = measurev1.GossipState_GOSSIP_STATE_ALIVE
	case suspect || len(v.DeadBy) > 0:
		v.State = measurev1.GossipState_GOSSIP_STATE_SUSPECT
	}
	return v
}

func allLeft(views Views, node string, reporters []string) bool {
	for _, r := range reporters {
		if views[r][node] != measurev1.GossipState_GOSSIP_STATE_LEFT {
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
	if !disagrees(connected, v.State) {
		return ""
	}
	if connected {
		return fmt.Sprintf("the coordinator is connected to %s, but the gossip of %s declares it %s",
			node, names(v.DeadBy, v.MoreDead), testspec.GossipStateName(v.State))
	}
	return fmt.Sprintf("the coordinator lost %s, but the gossip of %s sees it alive",
		node, names(v.AliveBy, v.MoreAlive))
}

// disagrees is whether a node the coordinator is connected to or not and
// gossip's verdict state s disagree (see Disagreement).
func disagrees(connected bool, s measurev1.GossipState) bool {
	return connected && StateGone(s) || !connected && s == measurev1.GossipState_GOSSIP_STATE_ALIVE
}

// names lists reporters: "n1, n2" or "n1, n2 and 3 more".
func names(by []string, more int) string {
	s := strings.Join(by, ", ")
	if more > 0 {
		s += fmt.Sprintf(" and %d more", more)
	}
	return s
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
