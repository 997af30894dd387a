package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
)

// TestServiceIPsOverrideTheAgent checks that registry.Config.ServiceIPs
// alone decides a node's service IP in a cluster: its ClusterIP replaces
// what the agent sent, and when it fails or finds none, or the node has no
// pod endpoint (then it is not asked), the node gets none: a rogue agent's
// service IP, which every other agent would test, is never kept. It is
// asked with the server ports the agent registered (the defaults for 0),
// which its Service must carry.
func TestServiceIPsOverrideTheAgent(t *testing.T) {
	clusterIP := netip.MustParseAddr("10.96.7.7")
	tests := []struct {
		name       string
		agentSent  string // the agent's --service-ip
		noPod      bool
		failWith   error
		want       string // the node's service IP afterwards; "" for none
		wantCalled bool
		noneFound  bool // ServiceIPs finds no ClusterIP
	}{
		{"ClusterIP replaces the agent's", "10.96.0.11", false, nil, "10.96.7.7", true, false},
		{"ClusterIP where the agent sent none", "", false, nil, "10.96.7.7", true, false},
		{"error drops the agent's", "10.96.0.11", false, errors.New("forbidden"), "", true, false},
		{"no ClusterIP found drops the agent's", "10.96.0.11", false, nil, "", true, true},
		{"no pod endpoint: not asked", "", true, nil, "", false, false},
		{"no pod endpoint drops the agent's", "10.96.0.1", true, nil, "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var calls []string
			c := startWith(t, func(rc *registry.Config) {
				rc.ServiceIPs = func(ctx context.Context, node string, podIP netip.Addr, ports protocol.ServerPorts) (netip.Addr, error) {
					mu.Lock()
					calls = append(calls, fmt.Sprintf("%s %s %+v", node, podIP, ports))
					mu.Unlock()
					if tt.noneFound {
						return netip.Addr{}, nil
					}
					return clusterIP, tt.failWith
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			reg := register("node-1")
			reg.ServiceIp = tt.agentSent
			reg.Iperf3Port, reg.HttpPort, reg.ProbePort = 15201, 18080, 17947
			if tt.noPod {
				reg.Addresses = reg.Addresses[:1]
			}
			stream, err := fakeAgent(t, ctx, c, reg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stream.CloseSend() }()
			n, ok := c.reg.Node("node-1")
			if !ok {
				t.Fatal("node-1 not connected")
			}
			got := ""
			if n.ServiceIP.IsValid() {
				got = n.ServiceIP.String()
			}
			if got != tt.want {
				t.Errorf("node's service IP %q, want %q", got, tt.want)
			}
			if a := c.reg.Agents(); len(a) != 1 || a[0].GetServiceIp() != tt.want {
				t.Errorf("agent record %v, want service IP %q", a, tt.want)
			}
			mu.Lock()
			defer mu.Unlock()
			const wantCall = "node-1 127.0.0.2 {Iperf3:15201 Qperf:19765 QperfData:19766 HTTP:18080 Probe:17947}"
			if tt.wantCalled != (len(calls) == 1) || tt.wantCalled && calls[0] != wantCall {
				t.Errorf("ServiceIPs calls %q, want called: %v (with %q)", calls, tt.wantCalled, wantCall)
			}
			// The Endpoints the agents get carry the same service IP.
			for {
				m, err := stream.Recv()
				if err != nil {
					t.Fatal(err)
				}
				if ep := m.GetEndpoints(); ep != nil {
					if len(ep.GetNodes()) != 1 || ep.GetNodes()[0].GetServiceIp() != tt.want {
						t.Errorf("endpoints %v, want service IP %q", ep, tt.want)
					}
					break
				}
			}
		})
	}
}

// TestRegisteringDuringServiceIPs checks that a node counts as registering
// from its ServiceIPs call until its session is attached: the prune of the
// nodes' Services keeps it then, when Known does not list it yet.
func TestRegisteringDuringServiceIPs(t *testing.T) {
	var c *coordinator
	during := make(chan []string, 1)
	c = startWith(t, func(rc *registry.Config) {
		rc.ServiceIPs = func(ctx context.Context, node string, podIP netip.Addr, _ protocol.ServerPorts) (netip.Addr, error) {
			_, known := c.reg.Known()
			during <- append(c.reg.Registering(), fmt.Sprintf("known %v", known))
			return netip.MustParseAddr("10.96.7.7"), nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := fakeAgent(t, ctx, c, register("node-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stream.CloseSend() }()
	if got, want := <-during, []string{"node-1", "known []"}; !slices.Equal(got, want) {
		t.Errorf("during ServiceIPs: registering and known %v, want %v", got, want)
	}
	if got := c.reg.Registering(); len(got) != 0 {
		t.Errorf("registering %v once registered, want none", got)
	}
	if _, known := c.reg.Known(); !slices.Equal(known, []string{"node-1"}) {
		t.Errorf("known %v once registered, want node-1", known)
	}
}

// TestServiceIPOfAnotherNodeRefused: a registration whose service IP is a
// connected node's host or pod IP is refused with that reason (its tests
// would measure the other node); outside a cluster, with no ServiceIPs,
// too.
func TestServiceIPOfAnotherNodeRefused(t *testing.T) {
	tests := []struct {
		name      string
		serviceIP string
		wantMsg   string // "" for registered
	}{
		{"node-a's host IP", "127.0.0.1", `node "node-b": service_ip 127.0.0.1 is the host IP of connected node "node-a"`},
		{"node-a's pod IP", "127.0.0.2", `node "node-b": service_ip 127.0.0.2 is the pod IP of connected node "node-a"`},
		{"an address of no node", "127.0.0.9", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := start(t)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, err := fakeAgent(t, ctx, c, register("node-a")) // host 127.0.0.1, pod 127.0.0.2
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = a.CloseSend() }()
			reg := register("node-b")
			reg.Addresses[0].Ip, reg.Addresses[1].Ip = "127.0.0.3", "127.0.0.4"
			reg.ServiceIp = tt.serviceIP
			b, err := fakeAgent(t, ctx, c, reg)
			switch {
			case tt.wantMsg == "" && err != nil:
				t.Fatalf("node-b refused: %v", err)
			case tt.wantMsg == "":
				_ = b.CloseSend()
			case status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantMsg):
				t.Fatalf("node-b: err = %v, want InvalidArgument with %q", err, tt.wantMsg)
			}
		})
	}
}
