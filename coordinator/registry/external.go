package registry

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// ExternalTargets returns a copy of the allowlist of external targets,
// sorted by name.
func (r *Registry) ExternalTargets() []*measurev1.ExternalTarget {
	out := make([]*measurev1.ExternalTarget, len(r.cfg.ExternalTargets))
	for i, t := range r.cfg.ExternalTargets {
		out[i] = proto.CloneOf(t)
	}
	return out
}

// checkExternal validates an allowlist of external targets and returns a
// copy sorted by name.
func checkExternal(targets []*measurev1.ExternalTarget) ([]*measurev1.ExternalTarget, error) {
	if len(targets) > protocol.MaxExternalTargets {
		return nil, fmt.Errorf("%d external targets: at most %d", len(targets), protocol.MaxExternalTargets)
	}
	out := make([]*measurev1.ExternalTarget, len(targets))
	for i, t := range targets {
		if err := protocol.ValidateExternalTarget(t); err != nil {
			return nil, fmt.Errorf("external target %d: %w", i, err)
		}
		out[i] = proto.CloneOf(t)
	}
	slices.SortFunc(out, func(a, b *measurev1.ExternalTarget) int { return strings.Compare(a.GetName(), b.GetName()) })
	for i := 1; i < len(out); i++ {
		if out[i].GetName() == out[i-1].GetName() {
			return nil, fmt.Errorf("external target %q is listed twice", out[i].GetName())
		}
	}
	return out, nil
}

// isExternalName reports whether name is an external target's: no node
// may register under it, since results to the target carry it as their
// dst_node.
func (r *Registry) isExternalName(name string) bool {
	return slices.ContainsFunc(r.cfg.ExternalTargets, func(t *measurev1.ExternalTarget) bool { return t.GetName() == name })
}
