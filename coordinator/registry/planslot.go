package registry

import (
	"sync"
	"time"
)

// planSlot is one session's hold on one of its registry's plan slots
// (Config.PlansInFlight). A full plan takes a slot from before it is built
// until the agent acknowledges it, so that a join wave holds a bounded
// number of full plans, built and encoded, at once; deltas are small and
// take none. A slot held longer than Config.PlanSlotHold (an agent slow to
// read or answer) is given back all the same. The session loop never
// blocks on a slot: a plan that needs one waits (wanted) while the loop
// goes on serving its agent, and selects on wanted among its channels.
// The loop owns it; it is not safe for concurrent use.
type planSlot struct {
	slots   chan struct{} // the registry's: a token per slot taken
	hold    time.Duration // Config.PlanSlotHold
	release func()        // gives the slot back; nil while none is held
	want    bool          // a full plan waits for a slot
}

// ready reports whether the session holds a slot, taking a free one if it
// holds none; if there is none free, the plan waits (wanted).
func (p *planSlot) ready() bool {
	if p.release != nil {
		return true
	}
	select {
	case p.slots <- struct{}{}:
		p.took()
		return true
	default:
		p.want = true
		return false
	}
}

// wanted is the channel to send on to take a slot while a plan waits for
// one, and nil otherwise (a select case that never fires); call took once
// the send went through.
func (p *planSlot) wanted() chan<- struct{} {
	if p.want {
		return p.slots
	}
	return nil
}

// took records a slot just taken, and starts its hold limit.
func (p *planSlot) took() {
	var once sync.Once
	give := func() { once.Do(func() { <-p.slots }) }
	t := time.AfterFunc(p.hold, give)
	p.release, p.want = func() { t.Stop(); give() }, false
}

// give gives the slot back, if the session holds one.
func (p *planSlot) give() {
	if p.release != nil {
		p.release()
		p.release = nil
	}
}
