package membership

import (
	"errors"
	"fmt"
	"slices"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ErrNoView is UpdateView's error for a reporter the Tracker holds no view
// of: a delta needs a whole view (SetView) to apply to, and is ignored.
var ErrNoView = errors.New("gossip delta before any whole view")

// markRemove is the scratch mark of a member a delta removes.
const markRemove = 0xff

// UpdateView applies a delta to reporter's view: each member of changed
// takes its state, and a member whose state SetView would leave out
// (GOSSIP_STATE_FORGOTTEN, unspecified or unknown) is removed; of a member
// listed twice, the last state counts. Its effect is that of SetView with
// the view so merged: the whole view counts as received now (a dead or
// left it holds may count now under the settle rule, see Joined).
//
// It refuses, with ErrNoView and no change, a reporter without a view (a
// delta before a whole view, or after Drop).
//
// Cost: O(D log M + K) for D changed members and K members of the view not
// seen alive (usually none), when the delta adds or removes no member; a
// delta that does also copies the view's member set, O(M) (the sets are
// shared between views, never changed in place).
func (t *Tracker) UpdateView(reporter string, changed []*agentv1.GossipMember) error {
	return t.UpdateMembers(reporter, Compact(changed))
}

// UpdateMembers is UpdateView of the changed members in compact form.
func (t *Tracker) UpdateMembers(reporter string, changed Members) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.ids[reporter]
	if !ok || t.nodes[r].view == nil {
		return fmt.Errorf("%w: reporter %q has none", ErrNoView, reporter)
	}
	old := t.nodes[r].view
	now := t.now()
	buf := t.buf[:0]
	for i := range changed.Len() {
		st, name := changed.states[i], changed.name(i)
		var x nodeID
		if known(st) {
			x = t.internBytes(name)
		} else if x, ok = t.lookup(name); !ok {
			continue // removes a member never heard of: nothing to do
		}
		if t.mark[x] == 0 {
			buf = append(buf, x)
		}
		if known(st) {
			t.mark[x] = uint8(st)
		} else {
			t.mark[x] = markRemove
		}
	}
	// The members not seen alive that the delta leaves alone: kept, and a
	// gone one may count now that the view is newer.
	odd := t.odd[:0]
	for i, x := range old.odd {
		if t.mark[x] != 0 {
			continue // changed: below
		}
		st := measurev1.GossipState(old.oddSt[i])
		odd = append(odd, uint64(x)<<8|uint64(st))
		if x != r && StateGone(st) {
			t.count(x, st, old.at, -1)
			t.count(x, st, now, +1)
		}
	}
	var adds, removes []nodeID
	for _, x := range buf {
		is := measurev1.GossipState(t.mark[x])
		if t.mark[x] == markRemove {
			is = measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED
		}
		t.mark[x] = 0
		was := old.state(x)
		if x != r && (was != is || StateGone(was)) {
			t.count(x, was, old.at, -1)
			t.count(x, is, now, +1)
		}
		if is != measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED && is != measurev1.GossipState_GOSSIP_STATE_ALIVE {
			odd = append(odd, uint64(x)<<8|uint64(is))
		}
		switch {
		case was == measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED && is != measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED:
			adds = append(adds, x)
		case was != measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED && is == measurev1.GossipState_GOSSIP_STATE_UNSPECIFIED:
			removes = append(removes, x)
		}
	}
	var set *memberSet
	if len(adds) == 0 && len(removes) == 0 {
		set = old.set
		set.refs++
	} else {
		set = t.acquireSet(mergeIDs(old.set.ids, adds, removes))
	}
	slices.Sort(odd)
	t.nodes[r].view = newView(set, odd, now)
	t.releaseSet(old.set)
	for _, x := range buf {
		t.release(x) // a name interned for this delta and removed by it again
	}
	if now.After(t.lastAt) {
		t.lastAt = now
	}
	t.buf, t.odd = buf[:0], odd[:0]
	return nil
}

// mergeIDs returns a new sorted list: ids (sorted) with adds (none in ids)
// and without removes (all in ids).
func mergeIDs(ids, adds, removes []nodeID) []nodeID {
	slices.Sort(adds)
	slices.Sort(removes)
	out := make([]nodeID, 0, len(ids)+len(adds)-len(removes))
	i, j := 0, 0
	for _, x := range ids {
		for i < len(adds) && adds[i] < x {
			out = append(out, adds[i])
			i++
		}
		if j < len(removes) && removes[j] == x {
			j++
			continue
		}
		out = append(out, x)
	}
	return append(out, adds[i:]...)
}
