package protocol

import (
	"net/netip"
	"testing"
)

// TestMetadataService: the clouds' metadata addresses, IPv4-mapped
// included, are metadata services; their neighbours are not.
func TestMetadataService(t *testing.T) {
	for _, tt := range []struct {
		ip    string
		cloud string
		is    bool
	}{
		{"169.254.169.254", "", true},
		{"::ffff:169.254.169.254", "", true},
		{"fd00:ec2::254", "AWS", true},
		{"100.100.100.200", "Alibaba Cloud", true},
		{"::ffff:100.100.100.200", "Alibaba Cloud", true},
		{"169.254.169.253", "", false},
		{"100.100.100.201", "", false},
		{"10.0.0.1", "", false},
	} {
		ip := netip.MustParseAddr(tt.ip)
		if got := MetadataService(ip); got != tt.cloud {
			t.Errorf("MetadataService(%s) = %q, want %q", tt.ip, got, tt.cloud)
		}
		if got := IsMetadataService(ip); got != tt.is {
			t.Errorf("IsMetadataService(%s) = %v, want %v", tt.ip, got, tt.is)
		}
	}
}
