package probeplan

import (
	"fmt"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// DefaultDebounce is the Follower's wait from a table change to building
// the plan, when Follow is given 0: changes within it (a fleet joining)
// reach the agent in one delta.
const DefaultDebounce = 200 * time.Millisecond

// closed is a channel that is always ready.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

type followState int

const (
	stateDue      followState = iota // a plan is to be built now (C is ready)
	stateIdle                        // up to date; waiting for a table change
	stateDebounce                    // a change came; waiting out the debounce
	stateInFlight                    // a plan was sent; waiting for its PlanAck
)

// Follower is one agent session's view of a Table: the version the agent
// holds and whether a plan is in flight. It keeps at most one plan in
// flight, so that changes made while a plan travels coalesce into the next
// one, and waits Debounce after a change before building a delta. It is
// not safe for concurrent use: its session's goroutine owns it, selecting
// on C among its other channels:
//
//	f := table.Follow(node, 0)
//	defer f.Stop()
//	for {
//		select {
//		case <-f.C():
//			if plan := f.Next(); plan != nil {
//				send(plan)
//			}
//		case ack := <-planAcks:
//			if err := f.Acked(ack); err != nil {
//				log(err)
//			}
//		...
//		}
//	}
//
// Version chaining: the first plan is full (the agent's Register carries
// no version). Each later plan is Table.Delta from the version the agent
// acknowledged, so its base_version is exactly that version. A refused
// plan (a PlanAck with an error, or with another version than the one
// sent) makes the next plan full; a refused full plan is retried only
// after the next table change. A table change costs an idle Follower one
// wakeup that arms a timer; the debounced Next costs O(changes).
type Follower struct {
	t        *Table
	node     string
	debounce time.Duration

	state   followState
	held    uint64          // version the agent acknowledged; 0: none, a full plan is next
	sent    Sent            // the plan in flight (stateInFlight), by its versions only
	changed <-chan struct{} // the table's Changed of the last plan built

	fire  chan struct{} // 1-buffered; the debounce timer's signal
	timer *time.Timer   // the debounce; its callback only signals fire
}

// Follow returns a Follower of node's agent, which has no plan yet (its
// first Next returns a full plan). debounce 0 means DefaultDebounce; a
// negative one means none.
func (t *Table) Follow(node string, debounce time.Duration) *Follower {
	if debounce == 0 {
		debounce = DefaultDebounce
	}
	return &Follower{t: t, node: node, debounce: debounce, state: stateDue, fire: make(chan struct{}, 1)}
}

// C returns the channel to select on: when it is ready, call Next. While a
// plan is in flight it is nil (it never fires); call Acked first.
func (f *Follower) C() <-chan struct{} {
	switch f.state {
	case stateDue:
		return closed
	case stateIdle:
		return f.changed
	case stateDebounce:
		return f.fire
	}
	return nil
}

// Next advances after C fired. It returns the plan to send now, or nil:
// when it only started the debounce, when nothing changed for this node
// (no message is due; see Table.Delta), or when a plan is in flight.
//
// A plan from Next or Flush is in wire form: its upserts are the peers'
// encodings made once at Table.Upsert, held as the message's unknown
// fields, so GetUpsert is empty on this side while proto.Marshal writes
// the same bytes as a plan listing them (the agent decodes them as
// upsert). Marshal it; to read its peers, decode the marshalled bytes.
func (f *Follower) Next() *agentv1.ProbePlan {
	switch f.state {
	case stateInFlight:
		return nil
	case stateIdle:
		if f.debounce > 0 {
			f.state = stateDebounce
			f.arm()
			return nil
		}
	case stateDebounce:
		select {
		case <-f.fire:
		default:
		}
	}
	return f.build()
}

// Flush returns, at once and without the debounce, the plan that brings
// the agent up to date (its session calls it before work that may name a
// peer that just joined), or nil when the agent is up to date or a plan
// is in flight (InFlight: wait for its PlanAck, then Flush again).
func (f *Follower) Flush() *agentv1.ProbePlan {
	switch f.state {
	case stateInFlight:
		return nil
	case stateDebounce:
		if f.timer != nil {
			f.timer.Stop()
		}
		select {
		case <-f.fire:
		default:
		}
	}
	return f.build()
}

// build makes the delta from the acknowledged version, if any is due, and
// puts it in flight.
func (f *Follower) build() *agentv1.ProbePlan {
	plan, _, changed := f.t.deltaAndChanged(f.node, f.held)
	f.changed = changed
	if plan == nil {
		f.state = stateIdle
		return nil
	}
	f.state, f.sent = stateInFlight, Sent{Version: plan.GetVersion(), BaseVersion: plan.GetBaseVersion()}
	return plan
}

// arm starts the debounce timer.
func (f *Follower) arm() {
	if f.timer == nil {
		f.timer = time.AfterFunc(f.debounce, func() {
			select {
			case f.fire <- struct{}{}:
			default:
			}
		})
		return
	}
	f.timer.Reset(f.debounce)
}

// Acked records the agent's PlanAck for the plan in flight. It returns an
// error, for the log, when the agent refused the plan, acknowledged another
// version, or no plan was in flight; the Follower then sends a full plan
// next (at once after a refused delta, after the next table change after a
// refused full plan).
func (f *Follower) Acked(ack *agentv1.PlanAck) error {
	if f.state != stateInFlight {
		return fmt.Errorf("probe plan ack for version %d of node %q with no plan in flight", ack.GetVersion(), f.node)
	}
	sent := f.sent
	f.sent = Sent{}
	switch {
	case ack.GetError() == "" && ack.GetVersion() == sent.Version:
		f.held, f.state = sent.Version, stateIdle
		return nil
	case ack.GetError() == "":
		f.held, f.state = 0, stateDue
		return fmt.Errorf("node %q acknowledged probe plan version %d, not the %d sent; a full plan follows", f.node, ack.GetVersion(), sent.Version)
	case sent.BaseVersion != 0:
		f.held, f.state = 0, stateDue
		return fmt.Errorf("node %q refused probe plan delta %d->%d (it runs %d): %s; a full plan follows",
			f.node, sent.BaseVersion, sent.Version, ack.GetVersion(), ack.GetError())
	default:
		f.held, f.state = 0, stateIdle // retry at the next change, not in a loop
		return fmt.Errorf("node %q refused full probe plan version %d (it runs %d): %s; retried after the next change",
			f.node, sent.Version, ack.GetVersion(), ack.GetError())
	}
}

// Version returns the plan version the agent acknowledged (0: none).
func (f *Follower) Version() uint64 { return f.held }

// Sent names a plan sent to an agent by its versions; the Follower keeps
// no more of it (a full plan of thousands of peers is not held in memory
// until its ack, once per agent).
type Sent struct {
	// Version is the plan's version.
	Version uint64
	// BaseVersion is the version the plan is a delta against; 0: a full plan.
	BaseVersion uint64
}

// InFlight returns the plan sent and not yet acknowledged; false if none.
func (f *Follower) InFlight() (Sent, bool) { return f.sent, f.state == stateInFlight }

// Stop releases the debounce timer; call it when the session ends.
func (f *Follower) Stop() {
	if f.timer != nil {
		f.timer.Stop()
	}
}
