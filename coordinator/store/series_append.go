package store

import (
	"cmp"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/meshperf/meshperf/coordinator/series"
)

// This file holds AppendReports' preparation of reports, outside the
// write transaction and on every core: validation, node IDs, sorting and
// encoding (series.go writes the result).

// appendItem is one report being prepared.
type appendItem struct {
	key, val []byte
	err      error
	valid    bool // Validate passed: a second prep does not check again
	pending  bool // names a node without a cached ID
}

// namePos is where a node name was first seen: report index, summary
// index (-1: the report's src).
type namePos struct{ report, summary int }

func cmpPos(a, b namePos) int {
	if c := cmp.Compare(a.report, b.report); c != 0 {
		return c
	}
	return cmp.Compare(a.summary, b.summary)
}

// prepWorker is one core's state while preparing reports.
type prepWorker struct {
	in *interner
	// entries is scratch for one report's, reused report after report.
	entries []headEntry
	// missing, if not nil, collects the names without a cached ID and
	// where this worker saw each first.
	missing map[string]namePos
}

// miss notes that name, seen at pos, has no cached ID.
func (w *prepWorker) miss(name string, pos namePos) {
	if w.missing == nil {
		return
	}
	if _, ok := w.missing[name]; !ok {
		w.missing[name] = pos
	}
}

// prep validates and encodes report i, or marks it pending when it names
// a node w has no ID for (noting the names).
func (w *prepWorker) prep(reports []series.Report, items []appendItem, i int) {
	r, it := &reports[i], &items[i]
	it.pending = false
	if !it.valid {
		if it.err = r.Validate(); it.err != nil {
			return
		}
		it.valid = true
	}
	src, ok := w.in.cached(r.Src)
	if !ok {
		w.miss(r.Src, namePos{i, -1})
		it.pending = true
	}
	entries := w.entries[:0]
	last, lastID := "", uint32(0)
	for j := range r.Summaries {
		m := &r.Summaries[j]
		if j == 0 || m.Dst != last {
			id, ok := w.in.cached(m.Dst)
			if !ok {
				w.miss(m.Dst, namePos{i, j})
				it.pending = true
			}
			last, lastID = m.Dst, id
		}
		if !it.pending {
			entries = append(entries, headEntry{dst: lastID, pk: pathKind(m), j: int32(j)})
		}
	}
	w.entries = entries[:0]
	if it.pending {
		return
	}
	// Agents list summaries in order: then one pass finds them sorted
	// and distinct.
	if !increasing(entries) {
		slices.SortStableFunc(entries, cmpEntry)
		if j := dupEntry(entries); j >= 0 {
			m := &r.Summaries[entries[j].j]
			it.err = fmt.Errorf("%w: summaries %d and %d have the same dst %q, path %v and kind %v", series.ErrInvalid,
				entries[j-1].j, entries[j].j, m.Dst, m.Path, m.Kind)
			return
		}
	}
	it.key = headKey(src, r.Seq)
	it.val = encodeHead(headBuf(headCap(len(entries))), r.Start, r.Period, r.Summaries, entries)
}

// headBufs holds the buffers of head values once their transaction is
// over (bbolt copies a value into its pages at the commit), for the next
// AppendReports: a report of 4,000 summaries takes 50 kB.
var headBufs sync.Pool

// headBuf is an empty buffer of at least size bytes, from headBufs if it
// has one.
func headBuf(size int) []byte {
	if p, ok := headBufs.Get().(*[]byte); ok && cap(*p) >= size {
		return (*p)[:0]
	}
	return make([]byte, 0, size)
}

// releaseHeads puts the value buffers of items in headBufs; nothing may
// use them after.
func releaseHeads(items []appendItem) {
	for i := range items {
		if v := items[i].val; cap(v) > 0 {
			items[i].val = nil
			headBufs.Put(&v)
		}
	}
}

// increasing reports whether entries are sorted and distinct.
func increasing(entries []headEntry) bool {
	for j := 1; j < len(entries); j++ {
		if entries[j-1].order() >= entries[j].order() {
			return false
		}
	}
	return true
}

// headCap is a head value's usual size for n summaries, enough for the
// common ones (every probe answered, round trips under a few ms).
func headCap(n int) int { return 16 + (n+headGroup-1)/headGroup*headIndexEntry + n*12 }

// prepSummaries is how many summaries make it worth one more core.
const prepSummaries = 4096

// prepAll runs prep over the reports idx names, on up to every core (one
// per prepSummaries summaries), each core taking the next report when it
// is done with one; in is the interner of every worker (read-only while
// they run), and collect says whether they note the names without an ID.
// It returns the workers.
func prepAll(reports []series.Report, items []appendItem, idx []int, in *interner, collect bool) []*prepWorker {
	total := 0
	for _, i := range idx {
		total += len(reports[i].Summaries)
	}
	n := min(runtime.GOMAXPROCS(0), len(idx), max(1, total/prepSummaries))
	workers := make([]*prepWorker, n)
	for k := range workers {
		workers[k] = &prepWorker{in: in}
		if collect {
			workers[k].missing = map[string]namePos{}
		}
	}
	if n == 1 {
		for _, i := range idx {
			workers[0].prep(reports, items, i)
		}
		return workers
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(idx) {
					return
				}
				w.prep(reports, items, idx[k])
			}
		})
	}
	wg.Wait()
	return workers
}

// missingNames are the names the workers found without an ID, each once,
// in the order of the reports and summaries that first name them.
func missingNames(workers []*prepWorker) []string {
	type seen struct {
		name string
		pos  namePos
	}
	var all []seen
	for _, w := range workers {
		for name, pos := range w.missing {
			all = append(all, seen{name, pos})
		}
	}
	slices.SortFunc(all, func(a, b seen) int { return cmpPos(a.pos, b.pos) })
	out := make([]string, 0, len(all))
	done := make(map[string]bool, len(all))
	for _, s := range all {
		if !done[s.name] {
			done[s.name] = true
			out = append(out, s.name)
		}
	}
	return out
}

// withFresh is a cache of c's names and fresh's, for the workers of one
// transaction (a lookup each, not one in c and one in fresh).
func withFresh(c *nodeCache, fresh map[string]uint32) *nodeCache {
	m := map[string]uint32{}
	if old := c.byName.Load(); old != nil {
		m = maps.Clone(*old)
	}
	maps.Copy(m, fresh)
	out := &nodeCache{}
	out.byName.Store(&m)
	return out
}
