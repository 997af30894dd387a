package membership

import (
	"slices"
	"time"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// The Tracker's storage. Node names are interned to dense IDs (nodeID);
// a reporter's view is the set of members it knows, shared between the
// reporters that know the same members (memberSet, hash-consed: in a
// settled pool every reporter knows every member and all views share one
// set), plus the members it does not see alive (odd, usually none). A view
// of a pool of M members thus costs O(M) bytes only while its set is its
// own (the pool is changing), and O(1) plus its odd members once the pools
// agree.

// nodeID is an interned node name: an index into Tracker.nodes.
type nodeID = uint32

// memberSet is a set of members, shared by the views that know exactly
// these members.
type memberSet struct {
	ids  []nodeID // sorted, distinct
	hash uint64
	refs int // views using it
}

// view is one reporter's latest gossip view.
type view struct {
	set   *memberSet
	odd   []nodeID // sorted: the members of set not seen alive
	oddSt []uint8  // their states, parallel to odd
	at    time.Time
}

// newView is the view of set at at whose members not seen alive are
// odd, sorted, each packed as ID<<8 | state (the scratch of SetView and
// of a delta); odd is copied, not kept.
func newView(set *memberSet, odd []uint64, at time.Time) *view {
	v := &view{set: set, at: at}
	if len(odd) > 0 {
		v.odd, v.oddSt = make([]nodeID, len(odd)), make([]uint8, len(odd))
		for i, p := range odd {
			v.odd[i], v.oddSt[i] = nodeID(p>>8), uint8(p)
		}
	}
	return v
}

// state is what v says of x: UNSPECIFIED if v does not know x.
func (v *view) state(x nodeID) measurev1.GossipState {
	if len(v.odd) > 0 {
		if i, ok := slices.BinarySearch(v.odd, x); ok {
			return measurev1.GossipState(v.oddSt[i])
		}
	}
	if _, ok := slices.BinarySearch(v.set.ids, x); ok {
		return measurev1.GossipState_GOSSIP_STATE_ALIVE
	}
	return measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED
}

// each calls f with every member of v and its state, in ID order.
func (v *view) each(f func(x nodeID, st measurev1.GossipState)) {
	j := 0
	for _, x := range v.set.ids {
		st := measurev1.GossipState_GOSSIP_STATE_ALIVE
		if j < len(v.odd) && v.odd[j] == x {
			st = measurev1.GossipState(v.oddSt[j])
			j++
		}
		f(x, st)
	}
}

// node is what the Tracker holds per interned name.
type node struct {
	name string
	// refs counts the member sets that contain the node; with view and
	// hasJoined, what keeps its ID.
	refs int
	// alive, suspect, dead and left count the reporters (other than the
	// node) whose view says so of the node; dead and left only those
	// that count under the settle rule (Tracker.counts).
	alive, suspect, dead, left int32
	joined                     time.Time // latest registration (Joined)
	hasJoined                  bool
	view                       *view // the node's own view as a reporter; nil if none
}

// state is the verdict state from the counters (Judge's rule: a quorum of
// the reporters that know the node for dead or left).
func (n *node) state() measurev1.GossipState {
	g := int(n.dead + n.left)
	quorum := Quorum(g, g+int(n.alive+n.suspect))
	switch {
	case quorum && n.dead == 0:
		return measurev1.GossipState_GOSSIP_STATE_LEFT
	case quorum:
		return measurev1.GossipState_GOSSIP_STATE_DEAD
	case n.alive > 0:
		return measurev1.GossipState_GOSSIP_STATE_ALIVE
	case n.suspect > 0 || g > 0:
		return measurev1.GossipState_GOSSIP_STATE_SUSPECT
	}
	return measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED
}

// unconfirmed reports whether some reporters declare the node dead or
// left without a quorum (Verdict.Unconfirmed).
func (n *node) unconfirmed() bool { return n.dead+n.left > 0 && !StateGone(n.state()) }

// intern returns name's ID, allocating one if needed; t.mu is held.
func (t *Tracker) intern(name string) nodeID {
	if x, ok := t.ids[name]; ok {
		return x
	}
	var x nodeID
	if n := len(t.free); n > 0 {
		x, t.free = t.free[n-1], t.free[:n-1]
		t.nodes[x] = node{name: name}
	} else {
		x = nodeID(len(t.nodes))
		t.nodes = append(t.nodes, node{name: name})
		t.mark = append(t.mark, 0)
	}
	t.ids[name] = x
	return x
}

// release frees x's ID if nothing refers to it any more; t.mu is held.
func (t *Tracker) release(x nodeID) {
	n := &t.nodes[x]
	if n.refs > 0 || n.view != nil || n.hasJoined {
		return
	}
	if y, ok := t.ids[n.name]; !ok || y != x {
		return // freed already
	}
	delete(t.ids, n.name)
	*n = node{}
	t.free = append(t.free, x)
}

// hashIDs hashes a sorted ID list (FNV-1a over the IDs).
func hashIDs(ids []nodeID) uint64 {
	h := uint64(14695981039346656037)
	for _, x := range ids {
		h ^= uint64(x)
		h *= 1099511628211
	}
	return h
}

// acquireSet returns the shared set of ids (sorted, distinct), counting
// one more view using it; ids is kept if the set is new. t.mu is held.
func (t *Tracker) acquireSet(ids []nodeID) *memberSet {
	h := hashIDs(ids)
	for _, s := range t.sets[h] {
		if slices.Equal(s.ids, ids) {
			s.refs++
			return s
		}
	}
	s := &memberSet{ids: ids, hash: h, refs: 1}
	t.sets[h] = append(t.sets[h], s)
	for _, x := range ids {
		t.nodes[x].refs++
	}
	return s
}

// releaseSet counts one view fewer using s, and frees it (and the IDs
// only it kept) when none does. t.mu is held.
func (t *Tracker) releaseSet(s *memberSet) {
	if s.refs--; s.refs > 0 {
		return
	}
	bucket := t.sets[s.hash]
	i := slices.Index(bucket, s)
	bucket = slices.Delete(bucket, i, i+1)
	if len(bucket) == 0 {
		delete(t.sets, s.hash)
	} else {
		t.sets[s.hash] = bucket
	}
	for _, x := range s.ids {
		t.nodes[x].refs--
		t.release(x)
	}
}
