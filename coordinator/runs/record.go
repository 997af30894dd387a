package runs

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/queue"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Group commit of a run's results.
const (
	// maxGroup bounds the tests one transaction writes.
	maxGroup = 1000
	// recordTimeout bounds one group's write.
	recordTimeout = 10 * time.Second
)

// recorder stores the ended tests of one run in group commits: whatever
// tests ended while the previous transaction was being written go into
// the next one, with the run's header (its counters) in the same
// transaction, so a test costs a share of one fdatasync rather than one
// of its own, and the stored header never counts a test whose results are
// not stored. A test is counted, shown to watchers and the Observer, and
// reported stored to its caller (who then acknowledges the agent) only
// once its transaction is committed. The recorder's goroutine is the
// only writer of the run's counters and done set until stop returns, and
// the only writer of the run's header to the store: the run's start
// (started) is written by it too, so no header it wrote is overwritten
// by an older one.
type recorder struct {
	m *Manager
	a *active

	once atomic.Bool // started was called

	mu    sync.Mutex
	queue []*endedTest
	dirty bool          // the header changed (started) since it was last written
	wake  chan struct{} // 1-buffered: the queue is not empty, or dirty
	stopc chan struct{} // closed by stop
	donec chan struct{} // closed when the goroutine ends
}

// endedTest is one test's results waiting for their transaction.
type endedTest struct {
	results []*measurev1.Result
	stored  chan bool // 1-buffered: whether the results are stored
}

// startRecorder starts a's recorder, whose writes have ctx's values;
// stop it with stop once no record call is left.
func (m *Manager) startRecorder(ctx context.Context, a *active) *recorder {
	r := &recorder{m: m, a: a, wake: make(chan struct{}, 1), stopc: make(chan struct{}), donec: make(chan struct{})}
	// The writes take the run's values, not its end: the results of a
	// canceled run are stored too.
	go r.loop(context.WithoutCancel(ctx)) // owner: the run's goroutine (execute), which stops it
	return r
}

// started marks the run RUN_STATE_RUNNING when its first test got its
// nodes: its watchers are told at once, and the recorder writes the
// header soon after (with the next group, or alone), without the test
// waiting for it. Later calls do nothing.
func (r *recorder) started() {
	if r.once.Swap(true) {
		return
	}
	a := r.a
	a.mu.Lock()
	if a.run.GetState() == measurev1.RunState_RUN_STATE_QUEUED {
		a.run.State = measurev1.RunState_RUN_STATE_RUNNING
		u := Update{Run: summary(a.run)}
		for w := range a.watchers {
			a.send(w, u)
		}
	}
	a.mu.Unlock()
	r.mu.Lock()
	r.dirty = true
	r.mu.Unlock()
	signal(r.wake)
}

// record stores one test's results (at least one, all of one test) and
// publishes the progress; it returns once they are written and reports
// whether they are stored.
func (r *recorder) record(results []*measurev1.Result) bool {
	e := &endedTest{results: results, stored: make(chan bool, 1)}
	r.mu.Lock()
	r.queue = append(r.queue, e)
	r.mu.Unlock()
	signal(r.wake)
	return <-e.stored
}

// stop ends the goroutine once the queue is empty and waits for it.
func (r *recorder) stop() {
	close(r.stopc)
	<-r.donec
}

// loop commits what is queued until stop; ctx gives the writes their
// values (it never ends).
func (r *recorder) loop(ctx context.Context) {
	defer close(r.donec)
	for {
		select {
		case <-r.wake:
		case <-r.stopc:
			for r.commit(ctx) {
			}
			return
		}
		for r.commit(ctx) {
		}
	}
}

// commit writes the next group of queued tests, or the header alone if
// it changed and no test is queued, each write bounded by recordTimeout
// from ctx; it reports false when there was nothing to write.
func (r *recorder) commit(ctx context.Context) bool {
	r.mu.Lock()
	group := queue.TakeFront(&r.queue, maxGroup)
	dirty := r.dirty
	r.dirty = false // a group's write carries the header too
	r.mu.Unlock()
	if len(group) == 0 && !dirty {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	if len(group) == 0 {
		if err := r.m.cfg.Store.PutRun(ctx, r.header()); err != nil {
			r.m.log.Error("store the run's start", "run_id", r.a.run.GetRunId(), "err", err)
		}
		return true
	}
	stored := r.write(ctx, group)

	if obs := r.m.cfg.Observer; obs != nil {
		for _, e := range group {
			obs.Recorded(e.results)
		}
	}
	a := r.a
	a.mu.Lock()
	var base *measurev1.Run // the header without spec and plan, for the watchers
	if len(a.watchers) > 0 {
		base = summary(a.run)
	}
	for _, e := range group {
		a.run.TestsDone++
		a.done[e.results[0].GetTestId()] = true
		if failed(e.results) {
			a.run.TestsFailed++
		}
		if base != nil {
			s := proto.CloneOf(base)
			s.TestsDone, s.TestsFailed = a.run.GetTestsDone(), a.run.GetTestsFailed()
			u := Update{Run: s, Results: e.results}
			for w := range a.watchers {
				a.send(w, u)
			}
		}
	}
	a.mu.Unlock()
	for i, e := range group {
		e.stored <- stored[i]
	}
	return true
}

// write stores group with the run's header counting it, in one
// transaction. If that fails, each test is written alone, so that one
// refused result does not lose the others. stored[i] reports group[i].
func (r *recorder) write(ctx context.Context, group []*endedTest) []bool {
	st := r.m.cfg.Store
	runID := r.a.run.GetRunId()
	hdr := r.header()
	var all []*measurev1.Result
	for _, e := range group {
		all = append(all, e.results...)
		hdr.TestsDone++
		if failed(e.results) {
			hdr.TestsFailed++
		}
	}
	stored := make([]bool, len(group))
	err := st.RecordResults(ctx, hdr, all)
	if err == nil {
		for i := range stored {
			stored[i] = true
		}
		return stored
	}
	if len(group) > 1 && !errors.Is(err, context.DeadlineExceeded) {
		r.m.log.Warn("store a group of results; writing them one test at a time", "run_id", runID, "tests", len(group), "err", err)
		hdr = r.header()
		for i, e := range group {
			next := testspec.RunHeader(hdr)
			next.TestsDone++
			if failed(e.results) {
				next.TestsFailed++
			}
			if err := st.RecordResults(ctx, next, e.results); err != nil {
				r.m.log.Error("store results", "run_id", runID, "test_id", e.results[0].GetTestId(), "err", err)
				continue
			}
			stored[i], hdr = true, next
		}
		return stored
	}
	r.m.log.Error("store results", "run_id", runID, "tests", len(group), "err", err)
	return stored
}

// header is a shallow copy of the run's header (testspec.RunHeader) with
// the counters and state as of now; only the recorder's goroutine changes
// the counters while it runs, but started changes the state, so it reads
// under a.mu.
func (r *recorder) header() *measurev1.Run {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	return testspec.RunHeader(r.a.run)
}

// failed reports whether one of a test's results is not STATUS_OK.
func failed(results []*measurev1.Result) bool {
	for _, r := range results {
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			return true
		}
	}
	return false
}

// signal wakes the reader of a 1-buffered channel without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default: // already pending
	}
}
