package membership_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/meshperf/meshperf/coordinator/membership"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// pool returns n node names and a full alive view of them.
func pool(n int) ([]string, []*agentv1.GossipMember) {
	names := make([]string, n)
	members := make([]*agentv1.GossipMember, n)
	for i := range n {
		names[i] = fmt.Sprintf("node-%05d.example", i)
		members[i] = &agentv1.GossipMember{NodeName: names[i], State: alive}
	}
	return names, members
}

// fullTracker returns a tracker where each of n reporters sees all n
// members alive.
func fullTracker(n int) (*membership.Tracker, []string, []*agentv1.GossipMember) {
	names, members := pool(n)
	tr := membership.New(membership.Config{})
	for _, r := range names {
		tr.SetView(r, members)
	}
	return tr, names, members
}

func heapMB() float64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc) / (1 << 20)
}

// BenchmarkTrackerHeap reports the heap a Tracker takes for n reporters
// with full alive views of n members (the views themselves, given as
// messages, are garbage once set).
func BenchmarkTrackerHeap(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var mb float64
			for range b.N {
				names, members := pool(n)
				base := heapMB()
				tr := membership.New(membership.Config{})
				for _, r := range names {
					tr.SetView(r, members)
				}
				names, members = nil, nil
				mb = heapMB() - base
				runtime.KeepAlive(tr)
				runtime.KeepAlive(names)
				runtime.KeepAlive(members)
			}
			b.ReportMetric(mb, "heap_mb")
		})
	}
}

// BenchmarkTrackerHeapDiverged is BenchmarkTrackerHeap when every view
// is its own (each reporter misses a different member): the worst case
// of the shared member sets, while the pool changes.
func BenchmarkTrackerHeapDiverged(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var mb float64
			for range b.N {
				names, members := pool(n)
				base := heapMB()
				tr := membership.New(membership.Config{})
				for i, r := range names {
					v := append(append([]*agentv1.GossipMember(nil), members[:i]...), members[i+1:]...)
					tr.SetView(r, v)
				}
				mb = heapMB() - base
				runtime.KeepAlive(tr)
			}
			b.ReportMetric(mb, "heap_mb")
		})
	}
}

// BenchmarkSetViewOneChange is one SetView of a 5,000-member view where
// one member changed state, in a tracker of 5,000 such views.
func BenchmarkSetViewOneChange(b *testing.B) {
	tr, names, members := fullTracker(5000)
	suspectView := append([]*agentv1.GossipMember(nil), members...)
	suspectView[1234] = &agentv1.GossipMember{NodeName: names[1234], State: suspect}
	views := [][]*agentv1.GossipMember{suspectView, members}
	b.ResetTimer()
	for i := range b.N {
		tr.SetView(names[7], views[i%2])
	}
}

// BenchmarkEvaluate is one Evaluate of 5,000 nodes (all connected, all
// seen alive by 5,000 reporters), and Statuses of them all (Agents).
func BenchmarkEvaluate(b *testing.B) {
	tr, names, _ := fullTracker(5000)
	nodes := make(map[string]bool, len(names))
	for _, n := range names {
		nodes[n] = true
	}
	b.Run("Evaluate", func(b *testing.B) {
		for range b.N {
			tr.Evaluate(nodes)
		}
	})
	b.Run("Statuses", func(b *testing.B) {
		for range b.N {
			tr.Statuses(names)
		}
	})
	b.Run("JudgeOneNode", func(b *testing.B) { // the old cost per node, for comparison
		views := membership.Views{}
		for _, r := range names {
			v := make(map[string]measurev1.GossipState, len(names))
			for _, n := range names {
				v[n] = alive
			}
			views[r] = v
		}
		b.ResetTimer()
		for i := range b.N {
			membership.Judge(views, names[i%len(names)])
		}
	})
}
