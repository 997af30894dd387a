package agent

import (
	"context"
	"sync"
)

// This file holds the cancel of client runs (Work.cancel_client).

// clientRuns are the cancels of the client runs in progress, by the
// work_id of their Work (its test_id from a coordinator of the previous
// version). The zero value is ready.
type clientRuns struct {
	mu sync.Mutex
	m  map[string]*clientRun
	n  int // runs started and not yet forgotten (two of one ID count twice)
}

// clientRun is one client run's cancel; its pointer tells runs of the
// same test ID apart (a retry after a busy server).
type clientRun struct {
	cancel context.CancelFunc
}

// start returns the context of workID's client run, a child of ctx that
// cancel ends, and the function that forgets the run, which the caller
// calls once the run answered.
func (c *clientRuns) start(ctx context.Context, workID string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	r := &clientRun{cancel: cancel}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]*clientRun{}
	}
	c.m[workID] = r
	c.n++
	c.mu.Unlock()
	return ctx, sync.OnceFunc(func() {
		c.mu.Lock()
		if c.m[workID] == r {
			delete(c.m, workID)
		}
		c.n--
		c.mu.Unlock()
		cancel()
	})
}

// len is the number of client runs in progress or waiting for a slot,
// however many share a work ID.
func (c *clientRuns) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// cancel cancels workID's client run: its tool's process group is
// killed (agent/proc) and the run answers STATUS_CANCELED, or with its
// results if it ended first. It reports whether such a run was in
// progress; a cancel for another test ID, or a second one, does nothing.
func (c *clientRuns) cancel(workID string) bool {
	c.mu.Lock()
	r, ok := c.m[workID]
	delete(c.m, workID)
	c.mu.Unlock()
	if ok {
		r.cancel()
	}
	return ok
}
