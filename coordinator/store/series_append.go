package store

import (
	"cmp"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/meshperf/meshperf/coordinator/series"
)

// This file holds AppendReports' preparation of reports, outside the
// write transaction and on every core: validation, node IDs, sorting and
// encoding (series.go writes the result). A report naming a node the
// cache has no ID for is validated and its entries built, the new names
// standing for IDs to come (provisional, per worker); once the write
// transaction has given the names IDs, in the order the reports name
// them, its entries take them and it is encoded, also on every core.

// appendItem is one report being prepared.
type appendItem struct {
	key, val []byte
	err      error
	// pending says the report names a node without a cached ID: entries
	// are its summaries, some provisional (of worker w's names), as src
	// if srcProv.
	pending bool
	srcProv bool
	src     uint32
	entries []headEntry
	w       *prepWorker
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
	// names are the names this worker found without a cached ID, first
	// seen at first, indexed by missing; ids are their IDs, once given.
	names   []string
	first   []namePos
	missing map[string]uint32
	ids     []uint32
	// runs are the destinations of this worker's last report, one per
	// run of summaries, as it found their IDs.
	runs []dstRun
}

// dstRun is one destination's ID (or provisional index, if prov).
type dstRun struct {
	name string
	id   uint32
	prov bool
}

// provisional is the index of name, seen at pos, in w.names.
func (w *prepWorker) provisional(name string, pos namePos) uint32 {
	if k, ok := w.missing[name]; ok {
		return k
	}
	k := uint32(len(w.names))
	w.missing[name] = k
	w.names, w.first = append(w.names, name), append(w.first, pos)
	return k
}

// prep validates report i and builds its entries; it encodes it if every
// name it has has a cached ID, else marks it pending with the entries.
func (w *prepWorker) prep(reports []series.Report, items []appendItem, i int) {
	r, it := &reports[i], &items[i]
	if it.err = r.Validate(); it.err != nil {
		return
	}
	id, ok := w.in.cached(r.Src)
	if !ok {
		id, it.srcProv, it.pending = w.provisional(r.Src, namePos{i, -1}), true, true
	}
	it.src = id
	entries := w.entries[:0]
	last, lastID, prov, run := "", uint32(0), false, 0
	for j := range r.Summaries {
		m := &r.Summaries[j]
		if j == 0 || m.Dst != last {
			// Agents name their destinations in much the same order
			// report after report: the name of the same run in this
			// worker's previous report is compared before the maps are
			// searched.
			if run < len(w.runs) && w.runs[run].name == m.Dst {
				lastID, prov = w.runs[run].id, w.runs[run].prov
			} else {
				id, ok := w.in.cached(m.Dst)
				if prov = !ok; prov {
					id = w.provisional(m.Dst, namePos{i, j})
				}
				lastID = id
				if run < len(w.runs) {
					w.runs[run] = dstRun{m.Dst, id, prov}
				} else {
					w.runs = append(w.runs, dstRun{m.Dst, id, prov})
				}
			}
			last, run = m.Dst, run+1
			it.pending = it.pending || prov
		}
		entries = append(entries, headEntry{dst: lastID, pk: pathKind(m), prov: prov, j: int32(j)})
	}
	if it.pending {
		// Kept for after the IDs: the worker takes new scratch.
		it.entries, it.w = entries, w
		w.entries = make([]headEntry, 0, len(entries))
		return
	}
	w.entries = entries[:0]
	encodeItem(r, it, entries)
}

// resolve gives a pending report's provisional entries their IDs (its
// worker's ids set) and encodes it.
func resolve(r *series.Report, it *appendItem) {
	ids := it.w.ids
	if it.srcProv {
		it.src = ids[it.src]
	}
	for k := range it.entries {
		if e := &it.entries[k]; e.prov {
			e.dst, e.prov = ids[e.dst], false
		}
	}
	it.pending = false
	encodeItem(r, it, it.entries)
	it.entries, it.w = nil, nil
}

// encodeItem sorts the entries of a report whose IDs are known, refuses
// it if two are the same, else sets its key and value.
func encodeItem(r *series.Report, it *appendItem, entries []headEntry) {
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
	it.key = headKey(it.src, r.Seq)
	it.val = encodeHead(headBuf(headCap(len(entries))), r.Start, r.Period, r.Summaries, entries)
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

// parallel calls fn(w, i) for every i of idx, on up to limit cores (one
// per 16 reports), w from 0 to the number of cores used, which it
// returns; worker w takes the reports idx[w], idx[w+n], ...
func parallel(idx []int, limit int, fn func(w, i int)) int {
	n := min(limit, max(1, len(idx)/16))
	if n == 1 {
		for _, i := range idx {
			fn(0, i)
		}
		return 1
	}
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for k := w; k < len(idx); k += n {
				fn(w, idx[k])
			}
		})
	}
	wg.Wait()
	return n
}

// prepAll runs prep over every report on up to every core, the workers
// reading the names of the cache c; it returns the workers used.
func prepAll(reports []series.Report, items []appendItem, c *nodeCache) []*prepWorker {
	all := make([]int, len(reports))
	for i := range all {
		all[i] = i
	}
	workers := make([]*prepWorker, max(1, runtime.GOMAXPROCS(0)))
	for k := range workers {
		workers[k] = &prepWorker{in: &interner{cache: c}, missing: map[string]uint32{}}
	}
	n := parallel(all, len(workers), func(w, i int) { workers[w].prep(reports, items, i) })
	return workers[:n]
}

// resolveAll gives the workers' names their IDs from fresh (the write
// transaction's interner, which has given every one an ID) and encodes
// the pending reports on every core.
func resolveAll(reports []series.Report, items []appendItem, workers []*prepWorker, pending []int, fresh map[string]uint32) error {
	for _, w := range workers {
		w.ids = make([]uint32, len(w.names))
		for k, name := range w.names {
			id, ok := fresh[name]
			if !ok {
				return fmt.Errorf("node %q has no ID after the IDs were given", name)
			}
			w.ids[k] = id
		}
	}
	parallel(pending, runtime.GOMAXPROCS(0), func(_, i int) { resolve(&reports[i], &items[i]) })
	return nil
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
		for k, name := range w.names {
			all = append(all, seen{name, w.first[k]})
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
