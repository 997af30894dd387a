package runner

import (
	"net/netip"

	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// familyFlag is the tool's family option for target: ["-6"] for an IPv6
// address (ping and iperf3 both take it), nothing for IPv4 or a name, so
// IPv4 command lines stay as they were. qperf and curl take the address
// as it is (curl bracketed, see curlURL).
func familyFlag(target string) []string {
	if a, err := netip.ParseAddr(target); err == nil && protocol.FamilyOf(a) == measurev1.IPFamily_IP_FAMILY_IPV6 {
		return []string{"-6"}
	}
	return nil
}

// familyOf is the family of a result's target_address; unspecified when
// it is not an IP address.
func familyOf(target string) measurev1.IPFamily {
	a, err := netip.ParseAddr(target)
	if err != nil {
		return measurev1.IPFamily_IP_FAMILY_UNSPECIFIED
	}
	return protocol.FamilyOf(a)
}
