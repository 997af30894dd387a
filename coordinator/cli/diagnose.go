package cli

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/diagnose"
)

func newDiagnoseCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "diagnose RUN_ID",
		Short: "Localise faults in a run: the node its failed or degraded pairs have in common, and the kind of fault",
		Long: `Name the node that explains a run's bad node pairs (failed tests, or
figures far worse than on the pairs the node is not in) and what the
evidence points to: agent-gone, pod-network (pod paths fail, host paths
work), icmp-blocked (only ping fails), mtu-blackhole (bulk transfers fail,
small probes pass), unreachable, bandwidth-degraded or latency-degraded.
Needs 3 nodes or more. The exit status is 1 when a fault is found.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			client, closeConn, err := o.dial()
			if err != nil {
				return err
			}
			defer closeConn()
			_, results, err := fetchRun(cmd.Context(), o, client, args[0])
			if err != nil {
				return err
			}
			findings := diagnose.Diagnose(results)
			if o.output == "json" {
				enc := json.NewEncoder(o.stdout)
				enc.SetIndent("", "  ")
				if findings == nil {
					findings = []diagnose.Finding{}
				}
				if err := enc.Encode(map[string]any{"run_id": args[0], "findings": findings}); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(o.stdout, diagnose.Summary(findings))
			}
			if len(findings) > 0 {
				return &ExitError{Code: 1, Err: fmt.Errorf("%d fault(s) found", len(findings))}
			}
			return nil
		},
	}
}
