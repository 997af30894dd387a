package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meshperf/meshperf/coordinator/diagnose"
	"github.com/meshperf/meshperf/internal/testspec"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

func newDiagnoseCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "diagnose [RUN_ID]",
		Short: "Localise faults in a run: the node its failed or degraded pairs have in common, and the kind of fault",
		Long: `Name the node that explains a run's bad node pairs (failed tests, or
figures far worse than on the pairs the node is not in) and what the
evidence points to: agent-gone, pod-network (pod paths fail, host paths
work), icmp-blocked (only ping fails), mtu-blackhole (bulk transfers fail,
small probes pass), unreachable, bandwidth-degraded or latency-degraded.
Needs 3 nodes or more. Without RUN_ID, the newest run that ended.

The external targets' results (host-external, pod-external) are judged
apart, from 2 source nodes or more: "target NAME: external-down" (every
test fails from every node), external-http-down or external-icmp-blocked
(only HTTP, only ping), external-partial (failures from some nodes, listed);
"node NAME: egress-broken" (the node reaches no target the others reach)
or pod-egress-broken (only from its pod). -o json adds "target" and
"sources" to a target's finding, "targets" to a node's egress finding.

The coordinator does the same after every continuous run: it logs "fault
localised" and "fault cleared" (node= or target=) and exports
meshperf_fault{node,kind} and meshperf_external_fault{target,kind}.
The exit status is 1 when a fault is found.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkOutput(); err != nil {
				return err
			}
			return withClient(o, func(client meshv1.MeshServiceClient) error {
				var runID string
				var err error
				if len(args) == 1 {
					runID = args[0]
				} else if runID, err = newestEnded(cmd.Context(), o, client); err != nil {
					return err
				}
				run, results, err := fetchRun(cmd.Context(), o, client, runID)
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
					if err := enc.Encode(map[string]any{"run_id": runID, "findings": findings}); err != nil {
						return err
					}
				} else {
					head := fmt.Sprintf("run %s (%s, %d/%d tests done)", runID, testspec.RunStateName(run.GetState()), run.GetTestsDone(), len(run.GetPlanned()))
					summary := diagnoseSummary(findings, results)
					fmt.Fprintf(o.stdout, "%s: %s\n", head, strings.ReplaceAll(summary, "\n", "\n"+strings.Repeat(" ", len(head)+2)))
				}
				if len(findings) > 0 {
					return &ExitError{Code: 1, Err: fmt.Errorf("%d fault(s) found", len(findings))}
				}
				return nil
			})
		},
	}
}

// newestEnded returns the ID of the newest run that is neither queued nor
// running, reading the runs a page at a time.
func newestEnded(ctx context.Context, o *options, client meshv1.MeshServiceClient) (string, error) {
	token := ""
	for {
		runs, next, err := listRuns(ctx, o, client, token, 100)
		if err != nil {
			return "", err
		}
		for _, r := range runs { // newest first
			if testspec.RunEnded(r.GetState()) {
				return r.GetRunId(), nil
			}
		}
		if next == "" {
			return "", errors.New("no run has ended yet: give a RUN_ID, or trigger one")
		}
		token = next
	}
}

// diagnoseSummary is the findings in words, one per line, with what could
// not be judged: node faults in a run of fewer than 3 nodes, external
// targets measured from fewer than diagnose.MinExternalSources nodes.
func diagnoseSummary(findings []diagnose.Finding, results []*measurev1.Result) string {
	_, target := testspec.Split(results)
	n, extSources := nodesIn(results), externalSources(target)
	if n >= 3 {
		if len(findings) == 0 && extSources > 0 && extSources < diagnose.MinExternalSources {
			return fmt.Sprintf("no fault found\nexternal targets not judged: measured from %d node(s), judging them needs %d or more", extSources, diagnose.MinExternalSources)
		}
		return diagnose.Summary(findings)
	}
	few := fmt.Sprintf("cannot localise faults: the run has %d node(s), localising needs 3 or more", n)
	switch {
	case extSources == 0 && len(findings) == 0:
		return few
	case extSources == 0:
		return diagnose.Summary(findings)
	}
	// External results are judged from 2 source nodes on.
	few = fmt.Sprintf("cannot localise node faults: the run has %d node(s), localising needs 3 or more", n)
	switch {
	case len(findings) > 0:
		return diagnose.Summary(findings) + "\n" + few
	case extSources < diagnose.MinExternalSources:
		return fmt.Sprintf("%s\nexternal targets not judged: measured from %d node(s), judging them needs %d or more", few, extSources, diagnose.MinExternalSources)
	}
	return few + "\nno fault found towards the external targets"
}

// externalSources counts the distinct source nodes of results to
// external targets.
func externalSources(results []*measurev1.Result) int {
	srcs := map[string]bool{}
	for _, r := range results {
		if r.GetSrcNode() != "" {
			srcs[r.GetSrcNode()] = true
		}
	}
	return len(srcs)
}

// nodesIn counts the distinct nodes of results.
func nodesIn(results []*measurev1.Result) int {
	nodes := map[string]bool{}
	for _, r := range results {
		for _, n := range testspec.DestOf(r).Nodes(r.GetSrcNode()) { // a target is no node
			nodes[n] = true
		}
	}
	delete(nodes, "")
	return len(nodes)
}
