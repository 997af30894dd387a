package coordinator

import (
	"context"
	"log/slog"

	"github.com/meshperf/meshperf/coordinator/alert"
	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/coordinator/remotewrite"
	"github.com/meshperf/meshperf/coordinator/runs"
	"golang.org/x/sync/errgroup"
)

// remoteWrite is Run's remote-write writer; nil when none is configured,
// and then each method does nothing.
type remoteWrite struct{ w *remotewrite.Writer }

// newRemoteWrite returns the writer of cfg (nil cfg: none); its logger is
// log unless cfg has one.
func newRemoteWrite(cfg *remotewrite.Config, log *slog.Logger) (*remoteWrite, error) {
	if cfg == nil {
		return nil, nil
	}
	c := *cfg
	if c.Logger == nil {
		c.Logger = log.With("component", "remote-write")
	}
	w, err := remotewrite.New(c)
	if err != nil {
		return nil, err
	}
	return &remoteWrite{w: w}, nil
}

// reports is what writeReports tells of the stored probe reports.
func (r *remoteWrite) reports() []storedReports {
	if r == nil {
		return nil
	}
	return []storedReports{r.w}
}

// observers are the run observers to add, and registers the writer's
// metrics with met (nil: no /metrics).
func (r *remoteWrite) observers(met *metrics.Metrics) []runs.Observer {
	if r == nil {
		return nil
	}
	if met != nil {
		met.Registry().MustRegister(r.w)
	}
	return []runs.Observer{r.w}
}

// start runs the sender in eg until ctx ends and its flush is over.
func (r *remoteWrite) start(ctx context.Context, eg *errgroup.Group) {
	if r == nil {
		return
	}
	eg.Go(func() error { return r.w.Run(ctx) })
}

// publisher is p (nil: none) with the writer added: the findings go to
// both.
func (r *remoteWrite) publisher(p alert.Publisher) alert.Publisher {
	switch {
	case r == nil:
		return p
	case p == nil:
		return r.w
	}
	return publishers{p, r.w}
}

// publishers tells each of several alert.Publishers.
type publishers []alert.Publisher

// SetFaults hands fs to each.
func (ps publishers) SetFaults(fs []diagnose.Finding) {
	for _, p := range ps {
		p.SetFaults(fs)
	}
}
