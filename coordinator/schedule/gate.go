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
// runs apart. A Gate is safe for concurrent use.
type Gate struct {
	maxLight int

	mu      sync.Mutex
	heavy   map[string]bool
	light   map[string]int
	changed chan struct{}
}

// NewGate returns a Gate; maxLight <= 0 means DefaultMaxLight.
func NewGate(maxLight int) *Gate {
	if maxLight <= 0 {
		maxLight = DefaultMaxLight
	}
	return &Gate{maxLight: maxLight, heavy: map[string]bool{}, light: map[string]int{}, changed: make(chan struct{})}
}

// TryAcquire takes src and dst for one test if they are free for it and
// returns the function that gives them back (call it exactly once). An
// empty dst, for a test to an external target, takes src alone.
func (g *Gate) TryAcquire(heavy bool, src, dst string) (release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
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
// ctx's error).
func (g *Gate) Acquire(ctx context.Context, heavy bool, src, dst string) (release func(), err error) {
	for {
		changed := g.Changed()
		if release, ok := g.TryAcquire(heavy, src, dst); ok {
			return release, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
