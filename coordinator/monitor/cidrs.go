package monitor

import (
	"fmt"
	"net/netip"

	"github.com/meshperf/meshperf/coordinator/registry"
)

// maxCIDRs bounds each CIDR list of the config file.
const maxCIDRs = 64

// cidrs parses one CIDR list of the config file (node_cidrs, pod_cidrs or
// service_cidrs), named name: each entry a masked prefix such as
// 10.0.0.0/8 or fd00::/64. The error names the entry.
func cidrs(name string, list []string) ([]netip.Prefix, error) {
	if len(list) > maxCIDRs {
		return nil, fmt.Errorf("%s: %d prefixes, at most %d", name, len(list), maxCIDRs)
	}
	var out []netip.Prefix
	for i, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] %q: not a CIDR prefix such as 10.0.0.0/8 or fd00::/64", name, i, s)
		}
		if err := registry.CheckCIDR(p); err != nil {
			return nil, fmt.Errorf("%s[%d] %q: %w", name, i, s, err)
		}
		out = append(out, p)
	}
	return out, nil
}
