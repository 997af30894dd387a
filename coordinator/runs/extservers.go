package runs

import (
	"context"
	"sync"
	"time"

	"github.com/meshperf/meshperf/coordinator/schedule"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// Retries of a test to an external target's server that answered busy:
// the server may serve a client meshperf does not know of, so the
// retries wait longer than busyBackoff, doubling from
// externalBusyBackoff up to externalBusyMaxBackoff, at most
// externalBusyRetries times and never past the test's deadline
// (sanity.Timeout of its spec, from its first attempt). A busy answer is
// never a sample: the last one is stored as STATUS_BUSY.
const (
	externalBusyRetries    = 6
	externalBusyBackoff    = time.Second
	externalBusyMaxBackoff = 8 * time.Second
)

// busyPolicy is how execTest retries a test whose server answered busy.
type busyPolicy struct {
	// retries bounds the attempts after the first.
	retries int
	// backoff is the wait before retry attempt+1 (attempt from 0).
	backoff func(attempt int) time.Duration
	// within, when positive, bounds the time from the first attempt's
	// start to a retry's start: no retry starts later.
	within time.Duration
}

// busyPolicyOf returns pt's retry policy: a node test retries its own
// server (the agent's, started for it) busyRetries times; a heavy test to
// an external server as the constants above say, its first backoff
// m.extBackoff (externalBusyBackoff but in tests).
func (m *Manager) busyPolicyOf(pt *measurev1.PlannedTest, within time.Duration) busyPolicy {
	if testspec.DestOf(pt).Queued(pt.GetSpec().GetTest()) {
		first := m.extBackoff
		return busyPolicy{retries: externalBusyRetries, within: within, backoff: func(attempt int) time.Duration {
			return min(first<<attempt, externalBusyMaxBackoff)
		}}
	}
	return busyPolicy{retries: busyRetries, backoff: func(attempt int) time.Duration {
		return busyBackoff * time.Duration(attempt+1)
	}}
}

// runExternalQueues runs the heavy tests to external targets: each
// target's queue in its own goroutine (at most limit's capacity of
// queues at once, limit nil meaning no bound), its tests one after the
// other. Each test holds its source node and schedule.GateKey(target) in
// the Gate, heavy, while it runs: no other heavy test uses the node, and
// no other client of any run reaches the target's servers meanwhile. It
// returns when every queue ended or ctx did.
func (m *Manager) runExternalQueues(ctx context.Context, a *active, rec *recorder, queues []schedule.ExternalQueue, limit chan struct{}) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlimit, ok := takeLimit(ctx, limit)
			if !ok {
				return
			}
			defer unlimit()
			for _, pt := range q.Tests {
				if ctx.Err() != nil {
					return
				}
				if !m.runGated(ctx, a, rec, pt, true, pt.GetSrcNode(), schedule.GateKey(q.Target)) {
					return
				}
			}
		}()
	}
}
