package agent

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestResolveRefuses: an external target's address, written or resolved,
// is never link-local (the cloud metadata service 169.254.169.254) nor a
// cloud metadata address, and is loopback only where an --allow-target
// CIDR says so: a DNS name whose owner points it at 127.0.0.1 must not
// turn every agent's curl onto its own node's local services.
func TestResolveRefuses(t *testing.T) {
	loop := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	tests := []struct {
		name     string
		address  string
		answer   []string
		allow    []netip.Prefix
		want     string
		wantErr  []string
		refusals bool // the error is a refusedAddress (isRefusedAddress)
	}{
		{"metadata by name", "md.example.com", []string{"169.254.169.254"}, nil, "",
			[]string{"no usable address in the answer [169.254.169.254]", "169.254.169.254 is link-local"}, true},
		{"metadata skipped", "md.example.com", []string{"169.254.169.254", "fe80::1", "192.0.2.5"}, nil, "192.0.2.5", nil, false},
		{"AWS IPv6 metadata", "md.example.com", []string{"fd00:ec2::254"}, nil, "", []string{"cloud metadata"}, true},
		{"loopback by name, no allowlist", "web.example.com", []string{"127.0.0.1", "::1"}, nil, "",
			[]string{"127.0.0.1 is loopback", "--allow-target"}, true},
		{"loopback by name, allowlisted", "web.example.com", []string{"::1", "127.0.0.1"}, loop, "127.0.0.1", nil, false},
		{"loopback literal, no allowlist", "127.0.0.1", nil, nil, "", []string{"127.0.0.1 is loopback", "--allow-target none"}, true},
		{"loopback literal, allowlisted", "127.0.0.1", nil, loop, "127.0.0.1", nil, false},
		{"IPv6 loopback literal, not in the allowlist", "::1", nil, loop, "", []string{"::1 is loopback", "--allow-target 127.0.0.0/8"}, true},
		{"link-local literal", "169.254.169.254", nil, []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, "", []string{"link-local"}, true},
		{"inside --external-cidr", "203.0.113.7", nil, nil, "203.0.113.7", nil, false},
		{"outside --external-cidr", "192.0.2.9", nil, nil, "", []string{"192.0.2.9 is outside this agent's --external-cidr 203.0.113.0/24"}, true},
		{"name: first answer inside --external-cidr", "lb.example.com", []string{"10.96.0.1", "203.0.113.8"}, nil, "203.0.113.8", nil, false},
		{"name: no answer inside --external-cidr", "lb.example.com", []string{"10.96.0.1"}, nil, "", []string{"10.96.0.1 is outside"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(ctx context.Context, network, host string) ([]netip.Addr, error) {
				var as []netip.Addr
				for _, s := range tt.answer {
					as = append(as, netip.MustParseAddr(s))
				}
				return as, nil
			}
			a := &Agent{cfg: Config{LookupNetIP: lookup, AllowTargets: tt.allow}}
			if strings.Contains(tt.name, "--external-cidr") {
				a.cfg.ExternalCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}
			}
			got, err := a.resolve(context.Background(), tt.address)
			if tt.wantErr == nil {
				if err != nil || got.String() != tt.want {
					t.Fatalf("resolve(%q) = %v, %v; want %s", tt.address, got, err, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("resolve(%q) = %v, want an error", tt.address, got)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("resolve(%q): %q lacks %q", tt.address, err, w)
				}
			}
			if refused := isRefusedAddress(err); refused != tt.refusals {
				t.Errorf("resolve(%q): %v is a refusal: %v, want %v", tt.address, err, refused, tt.refusals)
			}
		})
	}
}

// TestExternalListTail: a list above MaxExternalTargets costs one warning
// for its tail, not one per entry (a coordinator could send 100 000).
func TestExternalListTail(t *testing.T) {
	var buf bytes.Buffer
	tg := newTargets(nil, false, slog.New(slog.NewTextHandler(&buf, nil)))
	var list []*measurev1.ExternalTarget
	for i := range 5000 {
		list = append(list, &measurev1.ExternalTarget{Name: fmt.Sprintf("t%d", i), Address: "192.0.2.1"})
	}
	tg.setEndpoints(&agentv1.Endpoints{ExternalTargets: list})
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Errorf("%d log lines, want 1:\n%.2000s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "4744 entries") || !strings.Contains(buf.String(), "t256") {
		t.Errorf("the warning does not name the dropped tail: %s", buf.String())
	}
	if tg.externalTarget("t255") == nil || tg.externalTarget("t256") != nil {
		t.Error("want the first 256 entries kept, the rest dropped")
	}
}
