package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/safetext"
	"github.com/meshperf/meshperf/internal/stats"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func newSeriesCommand(o *options) *cobra.Command {
	var src, dst, path, kind, since, until string
	cmd := &cobra.Command{
		Use:   "series --src NODE --dst NODE",
		Short: "One node pair's continuous probes: a summary per report period",
		Long: `Print one series of the continuous mesh (the probes section of the config
file): the summaries node --src's agent reported of its probes of --dst on
--path with --kind, one line per report period, oldest first: probes sent and
answered, loss, and the round trip's min, median, p90 and max.

Hours older than the coordinator's --retention come first, one line per
hour (PERIOD "1h x N": N report periods folded in): probes sent and
answered, loss, the exact min and max, estimates of the hour's median and
p90 (marked ~: the median and p90 of the mixture of the periods'
distributions, weighted by their answered probes), and the failed periods
with the last failure's status. They are kept for
--series-rollup-retention (default 30 days); --since reaches them, e.g.
--since 720h (a range is at most 31 days).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			if src == "" || dst == "" {
				return fmt.Errorf("--src and --dst are required")
			}
			p, err := testspec.ParsePath(path)
			if err != nil {
				return fmt.Errorf("--path: %w", err)
			}
			k, ok := testspec.ParseProbeKind(kind)
			if !ok {
				var names []string
				for _, k := range testspec.ProbeKinds() {
					names = append(names, testspec.ProbeKindName(k))
				}
				slices.Sort(names)
				return fmt.Errorf("--kind %q: want one of %s", kind, strings.Join(names, ", "))
			}
			now := time.Now()
			req := &meshv1.ListProbeSeriesRequest{SrcNode: src, DstNode: dst, Path: p, Kind: k}
			for _, b := range []struct {
				flag, v string
				dst     **timestamppb.Timestamp
			}{{"since", since, &req.StartTime}, {"until", until, &req.EndTime}} {
				if b.v == "" {
					continue
				}
				t, err := parseTime(b.v, now)
				if err != nil {
					return fmt.Errorf("--%s: %w", b.flag, err)
				}
				*b.dst = timestamppb.New(t)
			}
			var (
				samples []*meshv1.ProbeSample
				rollups []*meshv1.ProbeRollup
			)
			err = withClient(o, func(c meshv1.MeshServiceClient) error {
				pages, _, err := follow(cmd.Context(), o, "list probe series", "", 0, store.MaxSeriesPageSize,
					func(ctx context.Context, size uint32, token string) ([]*meshv1.ListProbeSeriesResponse, string, error) {
						req.PageSize, req.PageToken = size, token
						resp, err := c.ListProbeSeries(ctx, req)
						return []*meshv1.ListProbeSeriesResponse{resp}, resp.GetNextPageToken(), err
					})
				for _, p := range pages {
					samples, rollups = append(samples, p.GetSamples()...), append(rollups, p.GetRollups()...)
				}
				return err
			})
			if err != nil {
				return err
			}
			err = o.printTable(&meshv1.ListProbeSeriesResponse{Samples: samples, Rollups: rollups}, "PERIOD START\tPERIOD\tSENT\tANSWERED\tLOSS\tMIN\tMEDIAN\tP90\tMAX\tSTATUS", func(tw io.Writer) {
				loss := func(sent, received uint64) string {
					if sent == 0 {
						return "-"
					}
					return fmt.Sprintf("%.1f%%", 100*stats.LossRatio(sent, received))
				}
				rtt := func(received uint64, mark string, v float64) string {
					if received == 0 {
						return "-"
					}
					return mark + report.FormatSeconds(v)
				}
				for _, r := range rollups {
					status := testspec.StatusName(measurev1.Status_STATUS_OK)
					if r.GetFailedPeriods() > 0 {
						status = fmt.Sprintf("%d/%d failed, last %s", r.GetFailedPeriods(), r.GetPeriods(), testspec.StatusName(r.GetLastFailedStatus()))
					}
					n := r.GetReceived()
					fmt.Fprintf(tw, "%s\t%v x%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.GetBucketStart().AsTime().Local().Format("2006-01-02 15:04:05"),
						r.GetBucket().AsDuration(), r.GetPeriods(), r.GetSent(), n, loss(r.GetSent(), n),
						rtt(n, "", r.GetRttMinSeconds()), rtt(n, "~", r.GetRttMedianSeconds()), rtt(n, "~", r.GetRttP90Seconds()), rtt(n, "", r.GetRttMaxSeconds()), status)
				}
				for _, s := range samples {
					n := uint64(s.GetReceived())
					status := testspec.StatusName(s.GetStatus())
					if m := s.GetMessage(); m != "" {
						status += ": " + safetext.Line(m)
					}
					fmt.Fprintf(tw, "%s\t%v\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.GetPeriodStart().AsTime().Local().Format("2006-01-02 15:04:05"),
						s.GetPeriod().AsDuration(), s.GetSent(), s.GetReceived(), loss(uint64(s.GetSent()), n),
						rtt(n, "", s.GetRttMinSeconds()), rtt(n, "", s.GetRttMedianSeconds()), rtt(n, "", s.GetRttP90Seconds()), rtt(n, "", s.GetRttMaxSeconds()), status)
				}
			})
			if err != nil || o.output == "json" {
				return err
			}
			if len(rollups) > 0 {
				fmt.Fprintf(o.stdout, "%d hourly rollups and ", len(rollups))
			}
			fmt.Fprintf(o.stdout, "%d periods of %s -> %s %s %s\n", len(samples), src, dst, testspec.PathName(p), kind)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&src, "src", "", "probing node (required)")
	f.StringVar(&dst, "dst", "", "probed node (required)")
	f.StringVar(&path, "path", "host-host", "path: host-host, host-pod, pod-pod, host-service, pod-service")
	f.StringVar(&kind, "kind", "icmp", "probe kind: icmp, icmp_mtu, tcp, http")
	f.StringVar(&since, "since", "", "periods that end after this: a duration ago (1h30m) or RFC 3339 time (default 24h ago)")
	f.StringVar(&until, "until", "", "periods that start before this (default now)")
	return cmd
}
