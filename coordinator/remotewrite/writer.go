package remotewrite

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/exp/api/remote"
	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Writer.
type Config struct {
	// URL is the receiver's remote-write endpoint, http or https (e.g.
	// http://vm:8428/api/v1/write); see ParseURL.
	URL string
	// BearerTokenFile, if set, holds a token sent as "Authorization:
	// Bearer"; read once by New.
	BearerTokenFile string
	// CAFile, if set, holds the PEM CA certificates an https receiver's
	// certificate must chain to (the system's otherwise).
	CAFile string
	// QueueSamples bounds the queue, in samples (0: DefaultQueueSamples;
	// 32 bytes each).
	QueueSamples int
	// BatchSamples is the most samples per request (0:
	// DefaultBatchSamples).
	BatchSamples int
	// BatchWait is the longest a queued sample waits for its batch to
	// fill (0: DefaultBatchWait).
	BatchWait time.Duration
	// Timeout bounds each HTTP request (0: DefaultTimeout).
	Timeout time.Duration
	// MinBackoff and MaxBackoff bound the delay between retries, before
	// jitter and any Retry-After (0: DefaultMinBackoff,
	// DefaultMaxBackoff).
	MinBackoff, MaxBackoff time.Duration
	// FlushTimeout is how long Run keeps sending once its context ended
	// (0: DefaultFlushTimeout).
	FlushTimeout time.Duration
	// Logger logs requests given up and the flush's end (nil: discard).
	Logger *slog.Logger

	codes func(code string) // set by New: counts a response
}

// Stats are a Writer's counts so far, in samples unless named otherwise.
type Stats struct {
	// Queued is how many wait in the queue; InFlight how many are in the
	// request being sent.
	Queued, InFlight int
	// Sent were accepted (2xx); Dropped overflowed the queue (QueueFull)
	// or were rejected with a 4xx other than 429 (Rejected); Failed were
	// left when the flush ended.
	Sent, Dropped, QueueFull, Rejected, Failed int64
	// Requests is how many HTTP requests got an answer or an error;
	// Retries how many of them were retries.
	Requests, Retries int64
}

// Writer queues samples and sends them to the receiver: Run sends, the
// Observer methods and Reports queue. Safe for concurrent use.
type Writer struct {
	cfg Config
	log *slog.Logger
	api *remote.API
	q   *queue
	enc encoder

	aggs   runAggs
	faults faultState

	inFlight                   atomic.Int64
	sent, queueFull, rejected  atomic.Int64
	failed, requests, retries  atomic.Int64
	lastSuccess                atomic.Int64 // Unix nanoseconds; 0: never
	samples                    *prometheus.CounterVec
	dropped                    *prometheus.CounterVec
	requestsVec                *prometheus.CounterVec
	retriesC                   prometheus.Counter
	queueG, capacityG, lastSuc prometheus.GaugeFunc

	runOnce sync.Once
}

var _ prometheus.Collector = (*Writer)(nil)

// New returns a Writer for cfg; the error names the bad field and value.
// Nothing is sent until Run.
func New(cfg Config) (*Writer, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	w := &Writer{cfg: cfg, log: cfg.Logger, q: newQueue(cfg.QueueSamples)}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	w.samples = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meshperf_remote_write_samples_total",
		Help: "Samples by outcome: sent (accepted), dropped (queue full or rejected), failed (left at shutdown)."}, []string{"outcome"})
	w.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meshperf_remote_write_dropped_samples_total",
		Help: "Samples dropped, by reason: queue_full (the oldest, on overflow) or rejected (a 4xx other than 429)."}, []string{"reason"})
	w.requestsVec = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "meshperf_remote_write_requests_total",
		Help: "Remote-write HTTP requests by status code (error: no response)."}, []string{"code"})
	w.retriesC = prometheus.NewCounter(prometheus.CounterOpts{Name: "meshperf_remote_write_retries_total",
		Help: "Remote-write requests sent again after a network error, 5xx or 429."})
	w.queueG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "meshperf_remote_write_queue_samples",
		Help: "Samples queued or in flight."}, func() float64 { return float64(w.q.len()) + float64(w.inFlight.Load()) })
	w.capacityG = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "meshperf_remote_write_queue_capacity",
		Help: "The queue's bound, in samples (--remote-write-queue-samples)."}, func() float64 { return float64(cfg.QueueSamples) })
	w.lastSuc = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "meshperf_remote_write_last_success_timestamp_seconds",
		Help: "Unix time of the last accepted request (0: none yet)."}, func() float64 {
		return float64(w.lastSuccess.Load()) / 1e9
	})
	for _, o := range []string{"sent", "dropped", "failed"} {
		w.samples.WithLabelValues(o)
	}
	for _, r := range []string{"queue_full", "rejected"} {
		w.dropped.WithLabelValues(r)
	}
	w.cfg.codes = func(code string) {
		w.requests.Add(1)
		w.requestsVec.WithLabelValues(code).Inc()
	}
	client, err := w.cfg.client()
	if err != nil {
		return nil, err
	}
	if w.api, err = remote.NewAPI(cfg.URL, remote.WithAPIPath(""), remote.WithAPIHTTPClient(client), remote.WithAPILogger(w.log),
		remote.WithAPIBackoff(remote.BackoffConfig{Min: cfg.MinBackoff, Max: cfg.MaxBackoff})); err != nil {
		return nil, fmt.Errorf("--remote-write %q: %w", cfg.URL, err)
	}
	return w, nil
}

// Describe sends the descriptors of the remote-write metrics.
func (w *Writer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range w.collectors() {
		c.Describe(ch)
	}
}

// Collect sends the remote-write metrics.
func (w *Writer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range w.collectors() {
		c.Collect(ch)
	}
}

func (w *Writer) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.samples, w.dropped, w.requestsVec, w.retriesC, w.queueG, w.capacityG, w.lastSuc}
}

// Stats returns the counts so far.
func (w *Writer) Stats() Stats {
	return Stats{
		Queued: w.q.len(), InFlight: int(w.inFlight.Load()),
		Sent: w.sent.Load(), QueueFull: w.queueFull.Load(), Rejected: w.rejected.Load(),
		Dropped: w.queueFull.Load() + w.rejected.Load(), Failed: w.failed.Load(),
		Requests: w.requests.Load(), Retries: w.retries.Load(),
	}
}

// add queues samples, dropping the oldest on overflow.
func (w *Writer) add(fill func(q *queue, push func(sample))) {
	now := time.Now()
	drops := 0
	w.q.mu.Lock()
	before := w.q.n
	fill(w.q, func(s sample) {
		if w.q.push(s, now) {
			drops++
		}
	})
	full := w.q.n >= w.cfg.BatchSamples || (before == 0 && w.q.n > 0)
	w.q.mu.Unlock()
	if drops > 0 {
		w.queueFull.Add(int64(drops))
		w.samples.WithLabelValues("dropped").Add(float64(drops))
		w.dropped.WithLabelValues("queue_full").Add(float64(drops))
	}
	if full {
		w.q.signal()
	}
}

// Run sends batches until ctx ends, then for at most FlushTimeout more,
// and counts what is left as failed. It returns nil; call it once.
func (w *Writer) Run(ctx context.Context) error {
	first := false
	w.runOnce.Do(func() { first = true })
	if !first {
		return errors.New("remote write: Run called twice")
	}
	// sendCtx outlives ctx by FlushTimeout: a request retrying when ctx
	// ends goes on during the flush.
	sendCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var flushTimer atomic.Pointer[time.Timer]
	stop := context.AfterFunc(ctx, func() { flushTimer.Store(time.AfterFunc(w.cfg.FlushTimeout, cancel)) })
	defer func() {
		if !stop() {
			if t := flushTimer.Load(); t != nil {
				t.Stop()
			}
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var batch []sample
	for {
		var names []string
		draining := ctx.Err() != nil
		w.q.mu.Lock()
		due := w.q.n >= w.cfg.BatchSamples || (w.q.n > 0 && (draining || time.Since(w.q.firstAt) >= w.cfg.BatchWait))
		if due {
			batch, names = w.q.take(batch[:0], w.cfg.BatchSamples, time.Now())
			w.inFlight.Store(int64(len(batch)))
		}
		wait := w.cfg.BatchWait
		if w.q.n > 0 {
			wait = max(0, w.cfg.BatchWait-time.Since(w.q.firstAt))
		}
		w.q.mu.Unlock()
		if due {
			w.send(sendCtx, batch, names)
			if sendCtx.Err() != nil {
				break
			}
			continue
		}
		if draining {
			break // empty
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-w.q.ready:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
	w.q.mu.Lock()
	left := w.q.n
	w.q.n, w.q.chunks, w.q.head = 0, nil, 0
	w.q.mu.Unlock()
	if left > 0 {
		w.failed.Add(int64(left))
		w.samples.WithLabelValues("failed").Add(float64(left))
	}
	w.log.Info("remote write stopped", "sent", w.sent.Load(), "dropped", w.queueFull.Load()+w.rejected.Load(), "failed", w.failed.Load())
	return nil
}

// send sends one batch, retrying until it is accepted, rejected or ctx
// ends, and counts its outcome.
func (w *Writer) send(ctx context.Context, batch []sample, names []string) {
	defer w.inFlight.Store(0)
	n := int64(len(batch))
	msg := w.enc.encode(batch, names)
	_, err := w.api.Write(ctx, remote.WriteV1MessageType, msg, remote.WithWriteRetryCallback(func(error) {
		w.retries.Add(1)
		w.retriesC.Inc()
	}))
	switch {
	case err == nil:
		w.sent.Add(n)
		w.samples.WithLabelValues("sent").Add(float64(n))
		w.lastSuccess.Store(time.Now().UnixNano())
	case ctx.Err() != nil:
		w.failed.Add(n)
		w.samples.WithLabelValues("failed").Add(float64(n))
	default:
		w.rejected.Add(n)
		w.samples.WithLabelValues("dropped").Add(float64(n))
		w.dropped.WithLabelValues("rejected").Add(float64(n))
		w.log.Warn("remote write request rejected; its samples dropped", "url", w.cfg.URL, "samples", n, "err", err)
	}
}
