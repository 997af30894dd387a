package cli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func newTargetsCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "targets",
		Short: "List the external targets a run may name (the coordinator's allowlist)",
		Long: `List the external targets of the coordinator's config file, which
trigger --external may name: NAME, ADDRESS (an IP, or a DNS name that each
agent resolves itself) and HTTP_URL ("-": ping only).`,
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
			if o.output == "json" {
				return o.printJSON(resp)
			}
			tw := tabwriter.NewWriter(o.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tADDRESS\tHTTP_URL")
			for _, t := range resp.GetExternalTargets() {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.GetName(), t.GetAddress(), dash(t.GetHttpUrl()))
			}
			return tw.Flush()
		},
	}
}
