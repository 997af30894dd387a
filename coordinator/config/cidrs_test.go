package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestCIDRs: node_cidrs, pod_cidrs and service_cidrs are parsed, and a bad
// entry is refused naming the list, the index and the value.
func TestCIDRs(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // the three lists as fmt prints them
		wantErr    string
	}{
		{"none", "monitor: {}\n", "[] [] []", ""},
		{"all three", "node_cidrs: [10.0.0.0/16, fd00::/64]\npod_cidrs: [10.244.0.0/16]\nservice_cidrs: [10.96.0.0/12]\n",
			"[10.0.0.0/16 fd00::/64] [10.244.0.0/16] [10.96.0.0/12]", ""},
		{"not a prefix", "node_cidrs: [10.0.0.0/16, 10.0.0.1]\n", "", `node_cidrs[1] "10.0.0.1": not a CIDR prefix`},
		{"host bits", "pod_cidrs: [10.244.1.0/16]\n", "", `pod_cidrs[0] "10.244.1.0/16": 10.244.1.0/16 has host bits set; did you mean 10.244.0.0/16?`},
		{"garbage", "service_cidrs: [\"10.96.0.0/40\"]\n", "", `service_cidrs[0] "10.96.0.0/40"`},
		{"not a list", "node_cidrs: 10.0.0.0/16\n", "", "node_cidrs"},
		{"too many", "node_cidrs: [" + strings.Repeat("10.0.0.0/8,", maxCIDRs) + "10.0.0.0/8]\n", "", fmt.Sprintf("node_cidrs: %d prefixes, at most %d", maxCIDRs+1, maxCIDRs)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml))
			if tt.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want ErrConfig with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(s.NodeCIDRs, s.PodCIDRs, s.ServiceCIDRs); got != tt.want {
				t.Errorf("CIDRs %s, want %s", got, tt.want)
			}
		})
	}
}
