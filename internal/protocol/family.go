package protocol

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// This file holds the IP families of addresses, tests and results: the
// family of an address, the names the CLI and the tables use, and the
// reading of an unset family (IPv4, as before families existed).

// FamilyOf returns the family of ip: IP_FAMILY_IPV6 for an IPv6 address
// (an IPv4-mapped one is IPv4), IP_FAMILY_IPV4 for IPv4, and
// IP_FAMILY_UNSPECIFIED for the zero Addr.
func FamilyOf(ip netip.Addr) measurev1.IPFamily {
	switch {
	case !ip.IsValid():
		return measurev1.IPFamily_IP_FAMILY_UNSPECIFIED
	case ip.Is4() || ip.Is4In6():
		return measurev1.IPFamily_IP_FAMILY_IPV4
	}
	return measurev1.IPFamily_IP_FAMILY_IPV6
}

// ResultFamily is f as stored results mean it: IP_FAMILY_UNSPECIFIED
// (results stored before families existed) is IPv4.
func ResultFamily(f measurev1.IPFamily) measurev1.IPFamily {
	if f == measurev1.IPFamily_IP_FAMILY_UNSPECIFIED {
		return measurev1.IPFamily_IP_FAMILY_IPV4
	}
	return f
}

// FamilyName is f's short name: "ipv4", "ipv6" ("ipv4" for unspecified,
// as results read it); an unknown value is its number.
func FamilyName(f measurev1.IPFamily) string {
	switch ResultFamily(f) {
	case measurev1.IPFamily_IP_FAMILY_IPV4:
		return "ipv4"
	case measurev1.IPFamily_IP_FAMILY_IPV6:
		return "ipv6"
	}
	return fmt.Sprintf("family(%d)", int32(f))
}

// Families lists the known families, IPv4 first.
var Families = []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV4, measurev1.IPFamily_IP_FAMILY_IPV6}

// ParseFamilyName is FamilyName's inverse for Families: exactly "ipv4" or
// "ipv6" (the config file's names); ok is false for anything else.
func ParseFamilyName(name string) (f measurev1.IPFamily, ok bool) {
	for _, f := range Families {
		if FamilyName(f) == name {
			return f, true
		}
	}
	return measurev1.IPFamily_IP_FAMILY_UNSPECIFIED, false
}

// ParseFamilies parses a --ip-family value: "ipv4", "ipv6", "dual" (both)
// or "" and "all" (none listed: every family the nodes have). The error
// names the value.
func ParseFamilies(s string) ([]measurev1.IPFamily, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "all":
		return nil, nil
	case "ipv4", "4", "v4":
		return []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV4}, nil
	case "ipv6", "6", "v6":
		return []measurev1.IPFamily{measurev1.IPFamily_IP_FAMILY_IPV6}, nil
	case "dual", "both":
		return slices.Clone(Families), nil
	}
	return nil, fmt.Errorf("IP family %q: want ipv4, ipv6 or dual", s)
}

// ValidateFamilies checks a list of requested families (RunSpec.ip_families,
// ProbeSettings.ip_families): each known, none twice. The error names field
// and the value.
func ValidateFamilies(field string, fs []measurev1.IPFamily) error {
	seen := map[measurev1.IPFamily]bool{}
	for i, f := range fs {
		if f != measurev1.IPFamily_IP_FAMILY_IPV4 && f != measurev1.IPFamily_IP_FAMILY_IPV6 {
			return fmt.Errorf("%s[%d]: %v is not IPv4 or IPv6", field, i, f)
		}
		if seen[f] {
			return fmt.Errorf("%s[%d]: %v listed twice", field, i, f)
		}
		seen[f] = true
	}
	return nil
}
