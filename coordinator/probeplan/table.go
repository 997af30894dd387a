package probeplan

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// compactSlack is the changelog length a table may always have beyond
// twice its peers, so that a small table does not compact on every change.
const compactSlack = 64

// Options configures NewTable.
type Options struct {
	// FirstRevision is the revision of the empty table; versions of its
	// plans are above it. Zero means the clock in nanoseconds since the Unix
	// epoch, so that a restarted coordinator's versions exceed those of
	// its previous run (an agent may still hold one; see Table.Delta).
	FirstRevision uint64
}

// entry is the current state of one name: a peer, or a tombstone (peer nil)
// kept while the changelog may still have to tell a lagging agent of the
// removal.
type entry struct {
	name string
	val  Peer
	peer *agentv1.ProbePeer // nil: removed (a tombstone); never modified once stored
	wire []byte             // peer as one element of ProbePlan.upsert on the wire (tag, length, message); nil with peer
	rev  uint64             // revision of the last change; a record with another rev is superseded
	born uint64             // revision of the upsert that added this incarnation of the name
	// gone is when the name was last removed before born: 0 if it never
	// was, or if that tombstone was compacted away (then gone <= compacted).
	gone uint64
}

// record is one changelog entry: the change of e at rev. It is live iff
// e.rev == rev; superseded records stay until the next compaction.
type record struct {
	rev uint64
	e   *entry
}

// Table is the coordinator's one peer table: every plannable node, the
// probe settings, a revision counter bumped by every change, and a
// changelog in revision order. It is safe for concurrent use: writers
// (Upsert, Remove, SetSettings) serialise, readers (Delta, Revision,
// Changed) share a read lock. Memory is O(peers): the changelog is
// compacted once it holds more than 2 x peers + 64 records.
type Table struct {
	mu          sync.RWMutex
	rev         uint64
	names       map[string]*entry // peers and tombstones
	live        int               // entries with a peer
	liveWire    int               // the bytes of their wire forms
	tombs       int               // entries without
	log         []record          // ascending rev
	compacted   uint64            // a delta from below it may miss a dropped tombstone: full plan
	settings    *agentv1.ProbeSettings
	settingsRev uint64
	changed     chan struct{} // closed and replaced on every revision bump

	// full caches, for one revision, every live peer's wire form in the
	// order of a full plan, so that the full plans a join wave builds at
	// one revision (thousands, one per agent) are two copies each, not a
	// walk of the changelog each. Readers of the table (under mu's read
	// lock) fill it under fullMu.
	fullMu sync.Mutex
	full   fullCache
}

// fullCache is the wire form of a full plan's upserts at rev, every live
// peer included; at[name] is where name's upsert is in buf.
type fullCache struct {
	rev uint64
	buf []byte
	at  map[string][2]int
}

// NewTable returns an empty table with probing off (nil settings).
func NewTable(o Options) *Table {
	first := o.FirstRevision
	if first == 0 {
		first = uint64(time.Now().UnixNano())
	}
	return &Table{rev: first, compacted: first, settingsRev: first, names: map[string]*entry{}, changed: make(chan struct{})}
}

// Revision returns the current revision: the version a plan built now has.
func (t *Table) Revision() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.rev
}

// Len returns the number of peers in the table.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.live
}

// Changed returns a channel that is closed at the next revision bump. Each
// bump closes one channel, however many goroutines wait on it: take the
// channel before calling Delta (or use Follower), so that no change between
// the two is missed.
func (t *Table) Changed() <-chan struct{} {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.changed
}

// bump advances the revision and wakes the waiters; t.mu is held.
func (t *Table) bump() uint64 {
	t.rev++
	close(t.changed)
	t.changed = make(chan struct{})
	return t.rev
}

// Upsert adds p or replaces the peer of that name. It returns the
// revision after the call and whether p changed anything; an identical
// peer bumps nothing. A refused peer returns an error wrapping ErrInvalid
// that names the field and value, and the current revision.
func (t *Table) Upsert(p Peer) (rev uint64, changed bool, err error) {
	if err := p.Validate(); err != nil {
		return t.Revision(), false, err
	}
	msg := p.Proto()
	wire, err := encodeUpsert(msg)
	if err != nil {
		return t.Revision(), false, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.names[p.Name]
	if e != nil && e.peer != nil && e.val == p {
		return t.rev, false, nil
	}
	rev = t.bump()
	switch {
	case e == nil:
		e = &entry{name: p.Name, born: rev}
		t.names[p.Name] = e
		t.live++
	case e.peer == nil: // a tombstone comes back
		e.gone, e.born = e.rev, rev
		t.tombs--
		t.live++
	}
	t.liveWire += len(wire) - len(e.wire)
	e.val, e.peer, e.wire, e.rev = p, msg, wire, rev
	t.appendRecord(e)
	return rev, true, nil
}

// Remove drops the peer named name. It returns the revision after the call
// and whether there was such a peer; removing an absent one bumps nothing.
func (t *Table) Remove(name string) (rev uint64, removed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.names[name]
	if e == nil || e.peer == nil {
		return t.rev, false
	}
	rev = t.bump()
	t.liveWire -= len(e.wire)
	e.val, e.peer, e.wire, e.rev = Peer{}, nil, nil, rev
	t.live--
	t.tombs++
	t.appendRecord(e)
	return rev, true
}

// SetSettings replaces the probe settings (cloned; nil means probing off)
// and returns the revision after the call. Settings equal to the current
// ones bump nothing. Turning probing off cannot be said in a delta, so
// agents behind that change get a full plan.
func (t *Table) SetSettings(s *agentv1.ProbeSettings) uint64 {
	if s != nil {
		s = proto.CloneOf(s)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if (s == nil) == (t.settings == nil) && (s == nil || proto.Equal(s, t.settings)) {
		return t.rev
	}
	t.settings = s
	t.settingsRev = t.bump()
	return t.rev
}

// appendRecord logs e's change and compacts when due; t.mu is held.
func (t *Table) appendRecord(e *entry) {
	t.log = append(t.log, record{rev: e.rev, e: e})
	if len(t.log) > 2*t.live+compactSlack {
		t.compact((t.live + compactSlack) / 2)
	}
}

// compact drops superseded records and all but the newest maxTombs
// tombstones (which leave the table); t.mu is held. Deltas from below the
// newest dropped tombstone's revision become full plans.
func (t *Table) compact(maxTombs int) {
	drop := max(t.tombs-maxTombs, 0)
	kept := t.log[:0]
	for _, r := range t.log {
		switch {
		case r.e.rev != r.rev: // superseded
		case r.e.peer == nil && drop > 0:
			drop--
			t.tombs--
			delete(t.names, r.e.name)
			t.compacted = max(t.compacted, r.rev)
		default:
			kept = append(kept, r)
		}
	}
	clear(t.log[len(kept):]) // release the dropped entries
	t.log = kept
	if cap(t.log) > 4*(len(kept)+compactSlack) { // shrink after a mass removal
		t.log = append([]record(nil), kept...)
	}
}

// Delta returns the plan that brings the agent of node from version since
// to the current revision, and whether it is a full plan:
//
//   - A full plan (base_version 0, full true): every peer but node itself,
//     and the settings (absent: probing off). Returned when since is 0,
//     below the compacted part of the changelog (a removal it needs was
//     forgotten), above the current revision or below the table's first
//     revision (a version of another coordinator run), or when probing was
//     turned off after since. Cost O(peers).
//   - A delta (base_version since, full false): upserts of the peers
//     changed after since (their current value) and the names of those
//     removed after since; never node itself; the settings if they changed
//     after since. A name added and removed after since is left out, but
//     one that flapped (removed, re-added, removed) may be named although
//     the agent did not hold it at since: the agent must treat removing a
//     peer it does not hold as a no-op. Cost O(log(changelog) + changes
//     after since).
//   - nil, false when nothing changed for node after since (e.g. only its
//     own entry changed). The agent's version then stays since, which
//     stays valid: since's view for node equals the current one, and a
//     later Delta from since includes all later changes. Versions are thus
//     per node; the caller sends nothing and keeps since.
//
// In both plan kinds version is the current revision, and the caller must
// base the next Delta for node on it once the agent acknowledged it.
func (t *Table) Delta(node string, since uint64) (*agentv1.ProbePlan, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.deltaLocked(node, since, false)
}

// deltaLocked is Delta; t.mu is held. With wire, the upserts travel
// pre-encoded (see wirePlan) instead of in the Upsert field.
func (t *Table) deltaLocked(node string, since uint64, wire bool) (*agentv1.ProbePlan, bool) {
	if since == 0 || since < t.compacted || since > t.rev || t.settings == nil && t.settingsRev > since {
		return t.fullLocked(node, wire), true
	}
	if since == t.rev {
		return nil, false
	}
	plan := &agentv1.ProbePlan{Version: t.rev, BaseVersion: since}
	if t.settingsRev > since {
		plan.Settings = t.settings
	}
	var w wirePlan
	i := sort.Search(len(t.log), func(i int) bool { return t.log[i].rev > since })
	for _, r := range t.log[i:] {
		e := r.e
		switch {
		case e.rev != r.rev || e.name == node: // superseded, or itself
		case e.peer != nil && wire:
			w.add(e.wire)
		case e.peer != nil:
			plan.Upsert = append(plan.Upsert, e.peer)
		case e.born <= since || e.gone > since: // removed after since, and the agent had this or an older incarnation
			plan.Remove = append(plan.Remove, e.name)
		}
	}
	if plan.Settings == nil && len(plan.Upsert) == 0 && w.n == 0 && len(plan.Remove) == 0 {
		return nil, false
	}
	w.attach(plan)
	return plan, false
}

// fullLocked builds the full plan for node; t.mu is held. Peers are in
// revision order of their last change.
func (t *Table) fullLocked(node string, wire bool) *agentv1.ProbePlan {
	plan := &agentv1.ProbePlan{Version: t.rev, Settings: t.settings}
	if !wire {
		plan.Upsert = make([]*agentv1.ProbePeer, 0, t.live)
		for _, r := range t.log {
			if e := r.e; e.rev == r.rev && e.peer != nil && e.name != node {
				plan.Upsert = append(plan.Upsert, e.peer)
			}
		}
		return plan
	}
	buf, at := t.fullWireLocked()
	self, ok := at[node]
	if !ok {
		self = [2]int{len(buf), len(buf)}
	}
	w := wirePlan{buf: make([]byte, 0, len(buf)-(self[1]-self[0])), n: len(at)}
	w.buf = append(append(w.buf, buf[:self[0]]...), buf[self[1]:]...)
	if ok {
		w.n--
	}
	w.attach(plan)
	return plan
}

// fullWireLocked returns the wire form of every live peer's upsert in
// revision order of their last change, and where each one is; t.mu is
// held (read or write). The result is cached for the revision and shared:
// never modify it.
func (t *Table) fullWireLocked() ([]byte, map[string][2]int) {
	t.fullMu.Lock()
	defer t.fullMu.Unlock()
	if t.full.buf != nil && t.full.rev == t.rev {
		return t.full.buf, t.full.at
	}
	buf := make([]byte, 0, t.liveWire)
	at := make(map[string][2]int, t.live)
	for _, r := range t.log {
		if e := r.e; e.rev == r.rev && e.peer != nil {
			at[e.name] = [2]int{len(buf), len(buf) + len(e.wire)}
			buf = append(buf, e.wire...)
		}
	}
	t.full = fullCache{rev: t.rev, buf: buf, at: at}
	return buf, at
}

// upsertField is ProbePlan.upsert's field number.
var upsertField = (&agentv1.ProbePlan{}).ProtoReflect().Descriptor().Fields().ByName("upsert").Number()

// encodeUpsert returns p as one element of ProbePlan.upsert on the wire:
// the field's tag, the message's length and the message (deterministic).
// Each peer is encoded once, at its Upsert, instead of once per plan that
// carries it (5,000 full plans of 5,000 peers in a join wave).
func encodeUpsert(p *agentv1.ProbePeer) ([]byte, error) {
	m, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%w: peer %q: encode: %w", ErrInvalid, p.GetNodeName(), err)
	}
	b := protowire.AppendTag(make([]byte, 0, len(m)+8), upsertField, protowire.BytesType)
	return protowire.AppendBytes(b, m), nil
}

// wirePlan gathers a plan's pre-encoded upserts.
type wirePlan struct {
	buf []byte
	n   int // upserts in buf
}

// add appends one upsert's wire form.
func (w *wirePlan) add(b []byte) { w.buf, w.n = append(w.buf, b...), w.n+1 }

// attach makes w's upserts the plan's unknown fields: proto.Marshal
// writes them out as they are, after the known fields, so the message on
// the wire is the same as one with those peers in Upsert (a parser sees
// repeated field 4 either way), while plan.GetUpsert stays empty on this
// side. Plans the Follower hands out are of this form.
func (w *wirePlan) attach(plan *agentv1.ProbePlan) {
	if w.n > 0 {
		plan.ProtoReflect().SetUnknown(w.buf)
	}
}

// deltaAndChanged is Delta plus the Changed channel of the same revision.
func (t *Table) deltaAndChanged(node string, since uint64) (*agentv1.ProbePlan, bool, <-chan struct{}) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	p, full := t.deltaLocked(node, since, true)
	return p, full, t.changed
}
