package remotewrite

import (
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/diagnose"
)

// faultKey is one fault series: about a node, or about an external target.
type faultKey struct {
	node, target string
	kind         diagnose.Kind
}

// faultState is the findings last published.
type faultState struct {
	mu   sync.Mutex
	last map[faultKey]bool
}

// SetFaults queues the findings of a continuous run (alert.Publisher), at
// the time of the call: 1 in meshperf_fault{node,kind} or
// meshperf_external_fault{target,kind} for each finding, and 0 once for
// each finding of the last call that cleared. It does not keep fs.
func (w *Writer) SetFaults(fs []diagnose.Finding) {
	now := time.Now().UnixMilli()
	type change struct {
		k faultKey
		v float64
	}
	var out []change
	cur := make(map[faultKey]bool, len(fs))
	for _, f := range fs {
		k := faultKey{node: f.Node, target: f.Target, kind: f.Kind}
		if !cur[k] {
			cur[k] = true
			out = append(out, change{k, 1})
		}
	}
	w.faults.mu.Lock()
	for k := range w.faults.last {
		if !cur[k] {
			out = append(out, change{k, 0})
		}
	}
	w.faults.last = cur
	w.faults.mu.Unlock()
	if len(out) == 0 {
		return
	}
	w.add(func(q *queue, push func(sample)) {
		for _, c := range out {
			s := sample{ts: now, v: c.v, a: q.intern(c.k.node), b: q.intern(string(c.k.kind)), fam: famFault}
			if c.k.node == "" {
				s.a, s.fam = q.intern(c.k.target), famExternalFault
			}
			push(s)
		}
	})
}
