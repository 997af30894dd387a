package membership

import (
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Members is a gossip view's members in compact form: the node names
// packed into one buffer and a state per member, some 15 bytes per member
// against some 110 for the decoded messages. A receiver builds it with
// Compact as soon as a view arrives and lets the message go, so that
// views waiting for the Tracker hold little memory (a join wave of 5,000
// agents sends 5,000 whole views of up to 5,000 members at once). It
// refers to nothing of the messages it came from.
type Members struct {
	names  []byte
	ends   []uint32 // ends[i] is where member i's name ends in names
	states []measurev1.GossipState
}

// Compact packs members' names and states into Members.
func Compact(members []*agentv1.GossipMember) Members {
	size := 0
	for _, m := range members {
		size += len(m.GetNodeName())
	}
	c := Members{names: make([]byte, 0, size), ends: make([]uint32, len(members)), states: make([]measurev1.GossipState, len(members))}
	for i, m := range members {
		c.names = append(c.names, m.GetNodeName()...)
		c.ends[i] = uint32(len(c.names))
		c.states[i] = m.GetState()
	}
	return c
}

// Len is the number of members.
func (c Members) Len() int { return len(c.ends) }

// name is member i's name, as bytes of c's buffer.
func (c Members) name(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = c.ends[i-1]
	}
	return c.names[start:c.ends[i]]
}

// lookup is the ID of the name b, if it has one; t.mu is held. It does
// not allocate.
func (t *Tracker) lookup(b []byte) (nodeID, bool) {
	x, ok := t.ids[string(b)]
	return x, ok
}

// internBytes is intern of the name b; it allocates the name's string
// only for a name without an ID.
func (t *Tracker) internBytes(b []byte) nodeID {
	if x, ok := t.lookup(b); ok {
		return x
	}
	return t.intern(string(b))
}
