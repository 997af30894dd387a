package protocol

import (
	"net/netip"
	"strings"
	"testing"
)

// TestCheckExternalIPEmbeddedIPv4 is an external target's DNS name (its
// zone is not the coordinator's) answering with an IPv6 form of a refused
// IPv4 address: IPv4-compatible ::a.b.c.d (Linux's sit0 tunnels it to
// a.b.c.d), IPv4-translated ::ffff:0:a.b.c.d and NAT64 64:ff9b::a.b.c.d
// (a translator sends it to a.b.c.d). The metadata service must stay out
// of reach through them; a NAT64 form of a public address stays a target.
func TestCheckExternalIPEmbeddedIPv4(t *testing.T) {
	tests := []struct {
		ip     string
		wantIn string // "" passes
	}{
		{"64:ff9b::169.254.169.254", "169.254.169.254"},
		{"::169.254.169.254", "169.254.169.254"},
		{"::ffff:0:169.254.169.254", "169.254.169.254"},
		{"64:ff9b::100.100.100.200", "Alibaba"},
		{"64:ff9b::127.0.0.1", "127.0.0.1"},
		{"::127.0.0.1", "127.0.0.1"},
		{"64:ff9b::8.8.8.8", ""},
		{"2001:db8::1", ""},
		{"::1", ""}, // loopback: the agent's decision (its --allow-target)
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			err := CheckExternalIP(netip.MustParseAddr(tt.ip))
			switch {
			case tt.wantIn == "" && err != nil:
				t.Fatalf("CheckExternalIP(%s) = %v, want it accepted", tt.ip, err)
			case tt.wantIn != "" && (err == nil || !strings.Contains(err.Error(), tt.wantIn)):
				t.Fatalf("CheckExternalIP(%s) = %v, want an error naming %q", tt.ip, err, tt.wantIn)
			}
		})
	}
}
