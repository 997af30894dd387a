package runs

import (
	"context"
	"fmt"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the watching of a run in progress (Watch, and the
// bounded channels of its watchers, which send and drop feed and end) and
// the summaries its watchers and readers get.

// Watch returns a channel that receives the run's current state at once,
// then one Update when the run leaves RUN_STATE_QUEUED (its first test
// started), one per ended test and one with its final state, and is
// closed when the run has ended (at once for a run that already has) or
// when ctx ends. A watcher that falls Config.WatchBuffer updates behind
// gets an Update with Lagged set and its channel is closed: the run never
// waits for a watcher. The error wraps ErrNotFound.
func (m *Manager) Watch(ctx context.Context, runID string) (<-chan Update, error) {
	m.mu.Lock()
	a := m.active[runID]
	m.mu.Unlock()
	if a == nil {
		run, err := m.Get(ctx, runID)
		if err != nil {
			return nil, err
		}
		ch := make(chan Update, 1)
		ch <- Update{Run: summary(run)}
		close(ch)
		return ch, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Room for the first update, the start's, one per test and the last.
	w := &watcher{ch: make(chan Update, min(int(a.run.GetTestsPlanned())+3, m.cfg.WatchBuffer)), count: &m.watchers}
	w.ch <- Update{Run: summary(a.run)}
	if testspec.RunEnded(a.run.GetState()) {
		close(w.ch)
		return w.ch, nil
	}
	if n := w.count.Add(1); n > int64(m.cfg.MaxWatchers) {
		w.count.Add(-1)
		m.log.Warn("watch refused: too many watchers", "run_id", runID, "watchers", n-1, "max_watchers", m.cfg.MaxWatchers)
		return nil, fmt.Errorf("run %s: %w: %d watchers follow runs in progress, at most %d (--max-watchers); end one or watch later",
			runID, ErrTooBusy, n-1, m.cfg.MaxWatchers)
	}
	if a.watchers == nil {
		a.watchers = map[*watcher]bool{}
	}
	a.watchers[w] = true
	w.stop = context.AfterFunc(ctx, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.drop(w)
	})
	return w.ch, nil
}

// watcher is one Watch call's channel. Its room is bounded; a watcher
// that falls behind gets a Lagged update and is dropped.
type watcher struct {
	ch    chan Update
	stop  func() bool   // unregisters the context.AfterFunc
	count *atomic.Int64 // Manager.watchers, given back by drop
}

// DefaultWatchBuffer bounds the updates a slow watcher may fall behind by.
const DefaultWatchBuffer = 4096

// send queues u, or ends a watcher that has no room left with a Lagged
// update; it reports whether the watcher is still there. Caller holds a.mu.
func (a *active) send(w *watcher, u Update) bool {
	if len(w.ch) >= cap(w.ch)-1 {
		w.ch <- Update{Run: u.Run, Lagged: true}
		a.drop(w)
		return false
	}
	w.ch <- u
	return true
}

// drop closes and forgets w. Caller holds a.mu.
func (a *active) drop(w *watcher) {
	if a.watchers[w] {
		delete(a.watchers, w)
		w.stop()
		close(w.ch)
		w.count.Add(-1)
	}
}

// summary is a copy of run's header (testspec.RunHeader) without its
// spec: small, whatever the run's size.
func summary(run *measurev1.Run) *measurev1.Run {
	s := testspec.RunHeader(run)
	s.Spec = nil
	return proto.CloneOf(s) // deep: the run goes on changing
}
