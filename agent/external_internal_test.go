package agent

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

func TestPickAddr(t *testing.T) {
	tests := []struct {
		name    string
		answer  []string
		want    string
		wantErr string
	}{
		{"first IPv4 before IPv6", []string{"::1", "127.0.0.1", "127.0.0.2"}, "127.0.0.1", ""},
		{"only IPv6", []string{"2001:db8::1", "2001:db8::2"}, "2001:db8::1", ""},
		{"IPv4-mapped counts as IPv4", []string{"2001:db8::1", "::ffff:192.0.2.1"}, "192.0.2.1", ""},
		{"unusable ones skipped", []string{"0.0.0.0", "224.0.0.1", "255.255.255.255", "ff02::1", "::1"}, "::1", ""},
		{"nothing usable", []string{"0.0.0.0", "::"}, "", "no usable address in the answer [0.0.0.0 ::]"},
		{"empty answer", nil, "", "no address in the answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var addrs []netip.Addr
			for _, s := range tt.answer {
				addrs = append(addrs, netip.MustParseAddr(s))
			}
			got, err := pickAddr(addrs, func(netip.Addr) error { return nil })
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("pickAddr(%v) = %v, %v; want error %q", addrs, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tt.want) {
				t.Errorf("pickAddr(%v) = %v, %v; want %s", addrs, got, err, tt.want)
			}
		})
	}
}

// TestResolve: an IP literal never reaches the resolver; a name does, with
// network "ip" and a context bounded by resolveTimeout.
func TestResolve(t *testing.T) {
	errNX := errors.New("no such host (injected)")
	tests := []struct {
		name      string
		address   string
		answer    []netip.Addr
		err       error
		want      string
		wantErr   string
		wantAsked bool
	}{
		{"IPv4 literal", "192.0.2.1", nil, nil, "192.0.2.1", "", false},
		{"IPv6 literal", "2001:db8::1", nil, nil, "2001:db8::1", "", false},
		{"name", "web.example.com", []netip.Addr{netip.MustParseAddr("2001:db8::5"), netip.MustParseAddr("192.0.2.5")}, nil, "192.0.2.5", "", true},
		{"name that fails", "gone.example.com", nil, errNX, "", errNX.Error(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked := false
			lookup := func(ctx context.Context, network, host string) ([]netip.Addr, error) {
				asked = true
				if network != "ip" || host != tt.address {
					t.Errorf("lookup(%q, %q), want (ip, %q)", network, host, tt.address)
				}
				if d, ok := ctx.Deadline(); !ok || time.Until(d) > resolveTimeout {
					t.Errorf("lookup's context deadline %v (set: %v), want within %v", d, ok, resolveTimeout)
				}
				return tt.answer, tt.err
			}
			a := &Agent{cfg: Config{LookupNetIP: lookup}}
			got, err := a.resolve(context.Background(), tt.address)
			if asked != tt.wantAsked {
				t.Errorf("resolver asked: %v, want %v", asked, tt.wantAsked)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("resolve(%q) = %v, %v; want error %q", tt.address, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Errorf("resolve(%q) = %v, %v; want %s", tt.address, got, err, tt.want)
			}
		})
	}
}

// TestExternalListReplaced: each Endpoints replaces the external targets;
// invalid and repeated entries are dropped, the rest kept in order.
func TestExternalListReplaced(t *testing.T) {
	tg := newTargets(nil, false, slog.New(slog.DiscardHandler))
	tg.setEndpoints(&agentv1.Endpoints{ExternalTargets: []*measurev1.ExternalTarget{
		{Name: "lb", Address: "192.0.2.1"},
		{Name: "Bad_Name", Address: "192.0.2.2"},
		{Name: "web", Address: "web.example.com", HttpUrl: "https://web.example.com/health"},
		{Name: "lb", Address: "192.0.2.3"},
		{Name: "wrong-host", Address: "web.example.com", HttpUrl: "https://other.example.com/"},
	}})
	if got := tg.externalString(); got != "lb, web" {
		t.Errorf("known external targets %q, want \"lb, web\"", got)
	}
	if e := tg.externalTarget("lb"); e.GetAddress() != "192.0.2.1" {
		t.Errorf("lb is %v, want the first entry of that name", e)
	}
	tg.setEndpoints(&agentv1.Endpoints{ExternalTargets: []*measurev1.ExternalTarget{{Name: "db", Address: "192.0.2.9"}}})
	if got := tg.externalString(); got != "db" {
		t.Errorf("after a second Endpoints, known external targets %q, want \"db\"", got)
	}
	if tg.externalTarget("lb") != nil {
		t.Error("lb kept after an Endpoints without it")
	}
	tg.setEndpoints(&agentv1.Endpoints{})
	if got := tg.externalString(); !strings.HasPrefix(got, "none") {
		t.Errorf("after an Endpoints without external targets, known %q, want none", got)
	}
}
