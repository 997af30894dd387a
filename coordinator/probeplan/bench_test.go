package probeplan

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
)

// benchPeer is a realistic peer: host, pod and service addresses, MTUs.
func benchPeer(i int) Peer {
	return Peer{
		Name:   fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i>>8, i&255),
		HostIP: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), PodIP: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}),
		ServiceIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}),
		ProbePort: 7946, HTTPPort: 8080, HostMTU: 9001, PodMTU: 8951,
	}
}

// BenchmarkJoinWave5000: 5,000 nodes join one by one; after every 100
// joins every joined node's session fetches its plan (a newcomer a full
// plan, the others a delta of up to 100 peers). peer_entries_per_join is
// the peers sent over all sessions per join: ~N (the newcomer's full plan
// and one entry to each other agent), not N^2.
func BenchmarkJoinWave5000(b *testing.B) {
	const nodes, batch = 5000, 100
	peers := make([]Peer, nodes)
	for i := range peers {
		peers[i] = benchPeer(i)
	}
	var entries, wire, plans int64
	b.ReportAllocs()
	for b.Loop() {
		entries, wire, plans = 0, 0, 0
		tb := NewTable(Options{FirstRevision: 1})
		tb.SetSettings(testSettings(1))
		held := make([]uint64, nodes)
		for j := range nodes {
			if _, _, err := tb.Upsert(peers[j]); err != nil {
				b.Fatal(err)
			}
			if (j+1)%batch != 0 {
				continue
			}
			for k := 0; k <= j; k++ {
				plan, _ := tb.Delta(peers[k].Name, held[k])
				if plan == nil {
					continue
				}
				plans++
				entries += int64(len(plan.GetUpsert()) + len(plan.GetRemove()))
				wire += int64(proto.Size(plan))
				held[k] = plan.GetVersion()
			}
		}
	}
	b.ReportMetric(float64(entries)/nodes, "peer_entries_per_join")
	b.ReportMetric(float64(wire)/nodes, "plan_bytes_per_join")
	b.ReportMetric(float64(plans), "plans")
}

// BenchmarkDeltaOneChange5000 is one session's delta after one peer of
// 5,000 changed: O(changes), not O(N).
func BenchmarkDeltaOneChange5000(b *testing.B) {
	tb := NewTable(Options{FirstRevision: 1})
	for i := range 5000 {
		put(b, tb, benchPeer(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		since := tb.Revision()
		p := benchPeer(i % 5000)
		p.HTTPPort = uint32(8000 + i%2)
		put(b, tb, p)
		if plan, _ := tb.Delta("other", since); len(plan.GetUpsert()) != 1 {
			b.Fatalf("delta of %d peers", len(plan.GetUpsert()))
		}
		i++
	}
}

// BenchmarkFullPlan5000 is one full plan of a 5,000-node table.
func BenchmarkFullPlan5000(b *testing.B) {
	tb := NewTable(Options{FirstRevision: 1})
	for i := range 5000 {
		put(b, tb, benchPeer(i))
	}
	plan, _ := tb.Delta(benchPeer(0).Name, 0)
	b.ReportMetric(float64(proto.Size(plan)), "wire_bytes")
	b.ReportAllocs()
	for b.Loop() {
		tb.Delta(benchPeer(0).Name, 0)
	}
}

// BenchmarkTableMemory5000 reports the heap a 5,000-node table holds, after
// churn (every peer changed twice and 10% removed and re-added), so that
// the changelog is at its compaction bound.
func BenchmarkTableMemory5000(b *testing.B) {
	var heap uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tb := NewTable(Options{FirstRevision: 1})
		for round := range 3 {
			for i := range 5000 {
				p := benchPeer(i)
				p.HTTPPort = uint32(8000 + round)
				put(b, tb, p)
			}
		}
		for i := 0; i < 5000; i += 10 {
			tb.Remove(benchPeer(i).Name)
			put(b, tb, benchPeer(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		heap = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(tb)
	}
	b.ReportMetric(float64(heap), "heap_bytes")
}

// BenchmarkFullPlanEncoded5000 builds and marshals one full plan of a
// 5,000-node table as a session sends it (upserts pre-encoded at Upsert)
// and, in the same run, as the structured Delta marshalled peer by peer;
// wire_over_structured is the first's time over the second's.
func BenchmarkFullPlanEncoded5000(b *testing.B) {
	tb := NewTable(Options{FirstRevision: 1})
	for i := range 5000 {
		put(b, tb, benchPeer(i))
	}
	node := benchPeer(0).Name
	wire := func() {
		tb.mu.RLock()
		plan, _ := tb.deltaLocked(node, 0, true)
		tb.mu.RUnlock()
		if _, err := proto.Marshal(plan); err != nil {
			b.Fatal(err)
		}
	}
	structured := func() {
		plan, _ := tb.Delta(node, 0)
		if _, err := proto.Marshal(plan); err != nil {
			b.Fatal(err)
		}
	}
	timeOf := func(f func()) time.Duration {
		start := time.Now()
		for range 20 {
			f()
		}
		return time.Since(start)
	}
	var w, s time.Duration
	b.ReportAllocs()
	for b.Loop() {
		w += timeOf(wire)
		s += timeOf(structured)
	}
	b.ReportMetric(float64(w)/float64(s), "wire_over_structured")
}
