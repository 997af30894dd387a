// Package ingest owns the coordinator's intake of the agents' probe
// reports (the continuous mesh): it checks each report where it arrives,
// queues it, and writes the reports of many agents in one store
// transaction (group commit, as etcd's backend batches its writes), then
// acknowledges each stored report to its agent. A report is acknowledged
// only once it is on disk, so a coordinator killed at any moment loses no
// acknowledged report; one resent after a reconnect is stored once (the
// store is idempotent by node and seq) and acknowledged again.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

// ErrBusy means the queue is full: the report is not taken (nor
// acknowledged), and its agent sends it again.
var ErrBusy = errors.New("ingest queue full")

// ErrClosed means Run has returned.
var ErrClosed = errors.New("ingest stopped")

// Report is one agent's checked report.
type Report struct {
	// Node is the reporting node: the session's, never a field of the
	// report.
	Node string
	// Report is the report, checked by Check.
	Report *agentv1.ProbeReport
}

// WriteFunc stores a batch in one transaction. It returns, per report, an
// error if that report was refused (it is then dropped and logged, and
// acknowledged, so that the agent does not send it forever) or
// ErrStoredAlready, or the error of the whole write (nothing is
// acknowledged; the agents send the reports again).
type WriteFunc func(ctx context.Context, batch []Report) (refused []error, err error)

// Config configures New.
type Config struct {
	// Write stores a batch; required.
	Write WriteFunc
	// MaxDelay is how long the first report of a batch waits for others;
	// zero means 100 ms.
	MaxDelay time.Duration
	// MaxBatchSummaries closes a batch early once it holds that many
	// summaries; zero means 50,000.
	MaxBatchSummaries int
	// MaxQueuedSummaries bounds the summaries waiting (Submit refuses more
	// with ErrBusy); zero means 2,000,000 (about 200 MB).
	MaxQueuedSummaries int
	// Logger receives write errors and refusals; nil means discard.
	Logger *slog.Logger
}

// ErrStoredAlready is a WriteFunc's answer for a report that was stored
// before (an agent's resend after a reconnect): acknowledged, counted in
// Stats.Resent, not logged.
var ErrStoredAlready = errors.New("probe report stored already")

// Stats are the ingester's counters since New.
type Stats struct {
	// Reports and Summaries count the reports stored (or found stored
	// already) and their summaries.
	Reports, Summaries uint64
	// Resent counts the reports of Reports found stored already
	// (ErrStoredAlready).
	Resent uint64
	// Batches counts the store transactions.
	Batches uint64
	// Refused counts reports the store refused; Busy those Submit refused.
	Refused, Busy uint64
	// WriteErrors counts failed transactions.
	WriteErrors uint64
}

type item struct {
	r   Report
	ack func()
}

// Ingester queues reports and writes them in groups. Submit is safe for
// concurrent use; Run is called once.
type Ingester struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	queue   []item
	queued  int // summaries in queue
	closed  bool
	signalC chan struct{}

	reports, summaries, resent, batches, refused, busy, writeErrors atomic.Uint64
}

// New returns an Ingester; it writes nothing until Run.
func New(cfg Config) (*Ingester, error) {
	if cfg.Write == nil {
		return nil, errors.New("ingest: Config.Write is nil")
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 100 * time.Millisecond
	}
	if cfg.MaxBatchSummaries == 0 {
		cfg.MaxBatchSummaries = 50000
	}
	if cfg.MaxQueuedSummaries == 0 {
		cfg.MaxQueuedSummaries = 2000000
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Ingester{cfg: cfg, log: log, signalC: make(chan struct{}, 1)}, nil
}

// Submit queues node's report; ack is called, from Run's goroutine, once
// the report is stored (or refused by the store). It never blocks: a full
// queue returns ErrBusy and a stopped ingester ErrClosed, and ack is then
// never called. r must be checked (Check) and not modified afterwards.
func (in *Ingester) Submit(node string, r *agentv1.ProbeReport, ack func()) error {
	n := len(r.GetSummaries())
	in.mu.Lock()
	switch {
	case in.closed:
		in.mu.Unlock()
		return ErrClosed
	case in.queued+n > in.cfg.MaxQueuedSummaries && len(in.queue) > 0:
		in.mu.Unlock()
		in.busy.Add(1)
		return fmt.Errorf("%w: %d summaries waiting, at most %d", ErrBusy, in.queued, in.cfg.MaxQueuedSummaries)
	}
	in.queue = append(in.queue, item{r: Report{Node: node, Report: r}, ack: ack})
	in.queued += n
	in.mu.Unlock()
	select {
	case in.signalC <- struct{}{}:
	default:
	}
	return nil
}

// Stats returns the counters.
func (in *Ingester) Stats() Stats {
	return Stats{Reports: in.reports.Load(), Summaries: in.summaries.Load(), Resent: in.resent.Load(), Batches: in.batches.Load(),
		Refused: in.refused.Load(), Busy: in.busy.Load(), WriteErrors: in.writeErrors.Load()}
}

// Run writes batches until ctx ends, then writes what is queued (bounded
// by a 5 s deadline) and returns nil. Submit refuses reports after it.
func (in *Ingester) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			in.mu.Lock()
			in.closed = true
			in.mu.Unlock()
			drain, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			for in.flush(drain) {
			}
			cancel()
			return nil
		case <-in.signalC:
		}
		// Gather: wait up to MaxDelay for more, unless the batch is full.
		timer.Reset(in.cfg.MaxDelay)
	gather:
		for !in.full() {
			select {
			case <-ctx.Done():
				break gather
			case <-timer.C:
				break gather
			case <-in.signalC:
			}
		}
		timer.Stop()
		for in.flush(ctx) && in.full() { //nolint:revive // empty-block: the condition flushes
		}
		in.mu.Lock()
		more := len(in.queue) > 0
		in.mu.Unlock()
		if more {
			select {
			case in.signalC <- struct{}{}:
			default:
			}
		}
	}
}

func (in *Ingester) full() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.queued >= in.cfg.MaxBatchSummaries
}

// flush writes one batch of up to MaxBatchSummaries summaries (at least
// one report) and acknowledges it; it reports whether it wrote anything.
func (in *Ingester) flush(ctx context.Context) bool {
	in.mu.Lock()
	n, sum := 0, 0
	for n < len(in.queue) && (n == 0 || sum+len(in.queue[n].r.Report.GetSummaries()) <= in.cfg.MaxBatchSummaries) {
		sum += len(in.queue[n].r.Report.GetSummaries())
		n++
	}
	batch := in.queue[:n:n]
	in.queue = in.queue[n:]
	if len(in.queue) == 0 {
		in.queue = nil
	}
	in.queued -= sum
	in.mu.Unlock()
	if n == 0 {
		return false
	}
	reports := make([]Report, n)
	for i, it := range batch {
		reports[i] = it.r
	}
	refused, err := in.cfg.Write(ctx, reports)
	if err != nil {
		in.writeErrors.Add(1)
		in.log.Error("store probe reports; their agents send them again", "reports", n, "summaries", sum, "err", err)
		return true
	}
	in.batches.Add(1)
	for i, it := range batch {
		var err error
		if i < len(refused) {
			err = refused[i]
		}
		if errors.Is(err, ErrStoredAlready) {
			in.resent.Add(1)
			err = nil
		}
		if err != nil {
			in.refused.Add(1)
			in.log.Warn("probe report refused by the store; dropped", "node", it.r.Node, "seq", it.r.Report.GetSeq(), "err", err)
		} else {
			in.reports.Add(1)
			in.summaries.Add(uint64(len(it.r.Report.GetSummaries())))
		}
		if it.ack != nil {
			it.ack()
		}
	}
	return true
}
