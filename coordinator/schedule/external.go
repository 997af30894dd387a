package schedule

import (
	"fmt"
	"slices"
	"strings"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// AppliesTo reports whether test can run against an external target:
// ping always, HTTP only when the target has an http_url, nothing else
// (qperf and iperf3 need a server of their own).
func AppliesTo(test measurev1.Test, target *agentv1.ExternalTarget) bool {
	switch test {
	case measurev1.Test_TEST_PING:
		return true
	case measurev1.Test_TEST_HTTP:
		return target.GetHttpUrl() != ""
	}
	return false
}

// externalTargets resolves the spec's external_targets against the
// allowlist: each must be in it, once, and must not be a node's name
// (results carry it as dst_node, where it would pass for that node).
func externalTargets(spec *measurev1.RunSpec, nodes Nodes) ([]*agentv1.ExternalTarget, error) {
	asked := spec.GetExternalTargets()
	if len(asked) == 0 {
		return nil, nil
	}
	out := make([]*agentv1.ExternalTarget, 0, len(asked))
	for i, name := range asked {
		j := slices.IndexFunc(nodes.External, func(t *agentv1.ExternalTarget) bool { return t.GetName() == name })
		switch {
		case j < 0 && len(nodes.External) == 0:
			return nil, fmt.Errorf("%w: external_targets[%d] %.70q: the coordinator allows no external target (see its config file's external list)",
				ErrInvalid, i, name)
		case j < 0:
			return nil, fmt.Errorf("%w: external_targets[%d] %.70q is not an allowed external target; allowed: %s",
				ErrInvalid, i, name, strings.Join(names(nodes.External), ", "))
		case slices.Index(asked, name) < i:
			return nil, fmt.Errorf("%w: external_targets[%d]: %q is listed twice", ErrInvalid, i, name)
		case slices.Contains(nodes.Targetable, name) || slices.Contains(nodes.Mesh, name):
			return nil, fmt.Errorf("%w: external_targets[%d] %q is also a node's name; rename the target in the coordinator's config",
				ErrInvalid, i, name)
		}
		out = append(out, nodes.External[j])
	}
	return out, nil
}

// names are the targets' names, in order.
func names(targets []*agentv1.ExternalTarget) []string {
	out := make([]string, len(targets))
	for i, t := range targets {
		out[i] = t.GetName()
	}
	return out
}

// route is one source and destination of a run, with the paths measured
// between them; target is set for an external target (dst is its name).
type route struct {
	src, dst string
	target   *agentv1.ExternalTarget
	paths    []measurev1.Path
}

// routes lays out what a run measures: the node pairs on the node paths
// (none without node paths), then every source node with every external
// target on the external paths. The external sources are the nodes of the
// asked pairs, both ends, sorted, or every mesh node without pairs. The
// error wraps ErrNoPairs when neither gives anything to measure.
func routes(asked []*measurev1.NodePair, nodes Nodes, nodePaths, extPaths []measurev1.Path, targets []*agentv1.ExternalTarget) ([]route, error) {
	ps, err := pairs(asked, nodes)
	if err != nil {
		return nil, err
	}
	var out []route
	if len(nodePaths) > 0 {
		for _, p := range ps {
			out = append(out, route{src: p.GetSrcNode(), dst: p.GetDstNode(), paths: nodePaths})
		}
	}
	if len(targets) > 0 {
		sources := nodes.Mesh
		if len(asked) > 0 {
			sources = nil
			for _, p := range asked {
				sources = append(sources, p.GetSrcNode(), p.GetDstNode())
			}
			slices.Sort(sources)
			sources = slices.Compact(sources)
		}
		for _, src := range sources {
			for _, t := range targets {
				out = append(out, route{src: src, dst: t.GetName(), target: t, paths: extPaths})
			}
		}
	}
	if len(out) == 0 {
		if len(targets) > 0 {
			return nil, fmt.Errorf("%w: no node to measure the external targets from", ErrNoPairs)
		}
		return nil, fmt.Errorf("%w: %d node(s) to mesh, a mesh needs 2", ErrNoPairs, len(nodes.Mesh))
	}
	return out, nil
}
