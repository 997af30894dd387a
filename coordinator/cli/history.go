package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/report"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testcell"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// rollupsPage is the most rollups the CLI asks for a page: a tenth of the
// coordinator's maximum keeps each answer a few MB.
const rollupsPage = store.MaxRollupsPageSize / 10

func newHistoryCommand(o *options) *cobra.Command {
	var rf resultsFlags
	cmd := &cobra.Command{
		Use:   "history",
		Short: "Hourly summaries of results older than the retention, per node pair",
		Long: `Print the hourly rollups the coordinator keeps of results older than its
--retention: per node pair, path, test and hour, the number of samples, the
failures by status, and the min, median, max and mean headline figure.
Newer results are in coordinator results.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			lr, err := rf.request(time.Now())
			if err != nil {
				return err
			}
			req := &meshv1.ListRollupsRequest{SrcNode: lr.GetSrcNode(), DstNode: lr.GetDstNode(),
				Path: lr.GetPath(), Test: lr.GetTest(), StartTime: lr.GetStartTime(), EndTime: lr.GetEndTime()}
			var (
				rollups []*measurev1.Rollup
				next    string
			)
			err = withClient(o, func(c meshv1.MeshServiceClient) (err error) {
				rollups, next, err = follow(cmd.Context(), o, "list rollups", "", rf.limit, rollupsPage,
					func(ctx context.Context, size uint32, token string) ([]*measurev1.Rollup, string, error) {
						req.PageSize, req.PageToken = size, token
						resp, err := c.ListRollups(ctx, req)
						return resp.GetRollups(), resp.GetNextPageToken(), err
					})
				return err
			})
			if err != nil {
				return err
			}
			if next != "" {
				fmt.Fprintf(o.stderr, "showing the first %d rollups in (source, destination, hour) order; more match: narrow with --since/--src/--dst or raise --limit (0: all)\n", rf.limit)
			}
			err = o.printTable(&meshv1.ListRollupsResponse{Rollups: rollups}, "HOUR\tSRC\tDST\tPATH\tTEST\tN\tMIN\tMEDIAN\tMAX\tFAILED", func(tw io.Writer) {
				for _, ru := range rollups {
					t := ru.GetSpec().GetTest()
					f := func(v float64) string {
						if ru.GetSamples() == 0 {
							return "-"
						}
						return report.FormatHeadline(t, v)
					}
					var failed []string
					for _, fc := range ru.GetFailed() {
						failed = append(failed, fmt.Sprintf("%d %s", fc.GetCount(), testspec.StatusName(fc.GetStatus())))
					}
					title := testspec.Name(t)
					if l := testcell.Label(ru.GetSpec()); l != "" {
						title += " " + l
					}
					title += testcell.FamilySuffix(ru.GetIpFamily()) // "ping ipv6"; IPv4 as before families
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", ru.GetHourStart().AsTime().Local().Format("2006-01-02 15:04"),
						ru.GetSrcNode(), ru.GetDstNode(), testspec.PathName(ru.GetPath()), title, ru.GetSamples(),
						f(ru.GetMinValue()), f(ru.GetMedianValue()), f(ru.GetMaxValue()), dash(strings.Join(failed, ", ")))
				}
			})
			if err != nil || o.output == "json" {
				return err
			}
			fmt.Fprintf(o.stdout, "%d hourly rollups\n", len(rollups))
			return nil
		},
	}
	f := rf.pairFlags(cmd)
	f.StringVar(&rf.since, "since", "", "hours that start at or after this: a duration ago (48h) or RFC 3339 time")
	f.StringVar(&rf.until, "until", "", "hours that start before this")
	f.IntVar(&rf.limit, "limit", 10000, "most rollups to print (0: all)")
	return cmd
}
