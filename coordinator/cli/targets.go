package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func newTargetsCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "targets",
		Short: "List the external targets a run may name (the coordinator's allowlist)",
		Long: `List the external targets of the coordinator's config file, which
trigger --external may name: NAME, ADDRESS (an IP, or a DNS name that each
agent resolves itself), HTTP_URL ("-": no HTTP test), IPERF3_PORT (the
port of an iperf3 server behind the target; "-": no iperf3 test) and
QPERF_PORTS (a qperf server's listen and data ports, PORT/DATA_PORT;
"-": no qperf test).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			resp, err := unary(cmd.Context(), o, "list external targets", func(ctx context.Context, c meshv1.MeshServiceClient) (*meshv1.ListExternalTargetsResponse, error) {
				return c.ListExternalTargets(ctx, &meshv1.ListExternalTargetsRequest{})
			})
			if err != nil {
				return err
			}
			return o.printTable(resp, "NAME\tADDRESS\tHTTP_URL\tIPERF3_PORT\tQPERF_PORTS", func(tw io.Writer) {
				for _, t := range resp.GetExternalTargets() {
					iperf3, qperf := "-", "-"
					if p := t.GetIperf3Port(); p != 0 {
						iperf3 = strconv.FormatUint(uint64(p), 10)
					}
					if p, d := t.GetQperfPort(), t.GetQperfDataPort(); p != 0 || d != 0 {
						qperf = fmt.Sprintf("%d/%d", p, d)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.GetName(), t.GetAddress(), dash(t.GetHttpUrl()), iperf3, qperf)
				}
			})
		},
	}
}
