package schedule

import (
	"context"
	"sync"
)

// DefaultMaxLight is the default number of light tests a node takes part in
// at once.
const DefaultMaxLight = 4

// Gate keeps tests from disturbing each other across all the runs of a
// coordinator. A heavy test (one that loads the link or needs a server of
// its own: qperf, iperf3) holds both of its nodes against every other heavy
// test; light tests (ping, HTTP) run beside anything but at most maxLight
// at once per node, so probes never pile up on an agent. Within one run the
// rounds of Arrange already keep heavy tests apart; the Gate also keeps two
// runs apart. A heavy test to an external target's server holds its
// source and GateKey(target): one client at a time per external server,
// over every run. A Gate is safe for concurrent use.
type Gate struct {
	maxLight int

	mu      sync.Mutex
	heavy   map[string]bool
	light   map[string]int
	changed chan struct{}
	// waiting are the Acquire calls waiting for a node, by node: a
	// release wakes those of its own nodes only, so that thousands of
	// waiting tests cost a release a few wake-ups, not thousands.
	waiting map[string]map[*waiter]struct{}
}

// waiter is one waiting Acquire; its channel (1-buffered) says that one
// of its nodes was released.
type waiter struct {
	wake  chan struct{}
	nodes [2]string
}

// NewGate returns a Gate; maxLight <= 0 means DefaultMaxLight.
func NewGate(maxLight int) *Gate {
	if maxLight <= 0 {
		maxLight = DefaultMaxLight
	}
	return &Gate{maxLight: maxLight, heavy: map[string]bool{}, light: map[string]int{}, changed: make(chan struct{}),
		waiting: map[string]map[*waiter]struct{}{}}
}

// MaxLight is the number of light tests a node takes part in at once.
func (g *Gate) MaxLight() int { return g.maxLight }

// TryAcquire takes src and dst for one test if they are free for it and
// returns the function that gives them back (call it exactly once). An
// empty dst, for a test to an external target, takes src alone.
func (g *Gate) TryAcquire(heavy bool, src, dst string) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tryLocked(heavy, src, dst)
}

// tryLocked is TryAcquire; the caller holds g.mu.
func (g *Gate) tryLocked(heavy bool, src, dst string) (release func(), ok bool) {
	nodes := [2]string{src, dst}
	for _, n := range nodes {
		if n == "" {
			continue
		}
		if heavy && g.heavy[n] || !heavy && g.light[n] >= g.maxLight {
			return nil, false
		}
	}
	for _, n := range nodes {
		if n == "" {
			continue
		}
		if heavy {
			g.heavy[n] = true
		} else {
			g.light[n]++
		}
	}
	var once sync.Once
	return func() { once.Do(func() { g.release(heavy, nodes) }) }, true
}

func (g *Gate) release(heavy bool, nodes [2]string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, n := range nodes {
		if n == "" {
			continue
		}
		if heavy {
			delete(g.heavy, n)
		} else if g.light[n]--; g.light[n] == 0 {
			delete(g.light, n)
		}
		for w := range g.waiting[n] {
			select {
			case w.wake <- struct{}{}:
			default: // woken already
			}
		}
	}
	close(g.changed)
	g.changed = make(chan struct{})
}

// Changed returns a channel that is closed at the next release: the moment
// to try TryAcquire again.
func (g *Gate) Changed() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

// Acquire waits until TryAcquire succeeds or ctx ends (then it returns
// ctx's error). It tries again only when one of src and dst is released.
func (g *Gate) Acquire(ctx context.Context, heavy bool, src, dst string) (release func(), err error) {
	g.mu.Lock()
	if release, ok := g.tryLocked(heavy, src, dst); ok {
		g.mu.Unlock()
		return release, nil
	}
	w := &waiter{wake: make(chan struct{}, 1), nodes: [2]string{src, dst}}
	g.wait(w, true)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.wait(w, false)
		g.mu.Unlock()
	}()
	for {
		select {
		case <-w.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if release, ok := g.TryAcquire(heavy, src, dst); ok {
			return release, nil
		}
	}
}

// wait registers w with its nodes (on) or removes it. Caller holds g.mu.
func (g *Gate) wait(w *waiter, on bool) {
	for _, n := range w.nodes {
		if n == "" {
			continue
		}
		ws := g.waiting[n]
		switch {
		case on && ws == nil:
			ws = map[*waiter]struct{}{}
			g.waiting[n] = ws
			fallthrough
		case on:
			ws[w] = struct{}{}
		default:
			delete(ws, w)
			if len(ws) == 0 {
				delete(g.waiting, n)
			}
		}
	}
}
