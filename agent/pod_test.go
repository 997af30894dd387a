package agent_test

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// httpGet fetches / from addr over a connection opened in the namespace
// at path ("" = ours) and returns the body.
func httpGet(path, addr string) (string, error) {
	var c net.Conn
	err := func() error {
		dial := func() error {
			var err error
			c, err = net.DialTimeout("tcp", addr, 5*time.Second)
			return err
		}
		if path == "" {
			return dial()
		}
		return netns.Do(path, dial)
	}()
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: %s\r\n\r\n", addr); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return body, nil
}

// TestPodNetwork: an agent with a pod network (a throwaway namespace)
// registers its pod address, serves its HTTP target inside the namespace
// only, and runs servers and clients there.
func TestPodNetwork(t *testing.T) {
	testnet.Need(t, "qperf", "curl")
	// Deleted after the agent stopped: cleanups run last-in first-out.
	path := testnet.NewNetNS(t, "mp-agent")
	// Inside the namespace, an address of its own loopback.
	const podIP = "127.0.0.50"
	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.PodIP, cfg.PodNetNS = netip.MustParseAddr(podIP), path
	startAgent(t, cfg)
	defer noServersLeft(t, cfg.Ports.Iperf3, cfg.Ports.Qperf)

	fs := next()
	var gotPod bool
	for _, a := range fs.reg.GetAddresses() {
		gotPod = gotPod || a.GetNetwork() == measurev1.Network_NETWORK_POD && a.GetIp() == podIP
	}
	if !gotPod {
		t.Errorf("Register addresses %v lack the pod address %s", fs.reg.GetAddresses(), podIP)
	}
	fs.accept(t, time.Second, 30*time.Second)
	fs.send(t, endpoints(withPorts(&agentv1.NodeEndpoint{NodeName: "node-a", Addresses: []*measurev1.NetworkAddress{
		{Network: measurev1.Network_NETWORK_HOST, Ip: "127.0.0.1"}, {Network: measurev1.Network_NETWORK_POD, Ip: podIP},
	}}, cfg)))

	addr := fmt.Sprintf("%s:%d", podIP, cfg.HTTPPort)
	if body, err := httpGet(path, addr); err != nil || body != "meshperf agent node-a pod\n" {
		t.Errorf("HTTP target %s in the pod namespace: %q, %v", addr, body, err)
	}
	if body, err := httpGet("", addr); err == nil && strings.Contains(body, "node-a pod") {
		t.Errorf("the pod's HTTP target %s answers in the root namespace", addr)
	}
	hostAddr := fmt.Sprintf("127.0.0.1:%d", cfg.HTTPPort)
	if body, err := httpGet("", hostAddr); err != nil || body != "meshperf agent node-a host\n" {
		t.Errorf("HTTP target %s on the host: %q, %v", hostAddr, body, err)
	}

	pod := measurev1.Network_NETWORK_POD
	sec := durationpb.New(time.Second)
	steps := []struct {
		name   string
		work   *agentv1.ConnectResponse
		testID string
		check  func(*testing.T, *agentv1.WorkResult)
	}{
		{"HTTP target", work("h1", 10*time.Second, startServer(measurev1.Tool_TOOL_CURL, pod)), "h1",
			func(t *testing.T, r *agentv1.WorkResult) {
				if r.GetServerStarted().GetPort() != cfg.HTTPPort {
					t.Errorf("port %d, want %d", r.GetServerStarted().GetPort(), cfg.HTTPPort)
				}
			}},
		{"curl in the pod", work("h1", 20*time.Second, &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
			Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_HTTP, Params: &measurev1.TestSpec_Http{Http: &measurev1.HttpParams{Timeout: sec}}},
			Network: pod, TargetIp: podIP, Port: cfg.HTTPPort,
		}}), "h1", func(t *testing.T, r *agentv1.WorkResult) {
			if res := r.GetClientDone().GetResults(); len(res) != 1 || res[0].GetHttp().GetHttpCode() != 200 {
				t.Errorf("results %v, want one HTTP 200", res)
			}
		}},
		{"qperf server in the pod", work("q1", 10*time.Second, startServer(measurev1.Tool_TOOL_QPERF, pod)), "q1", nil},
		{"qperf client in the pod", work("q1", 30*time.Second, &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
			Spec:    &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: sec}}},
			Network: pod, TargetIp: podIP, Port: cfg.Ports.Qperf, DataPort: cfg.Ports.QperfData,
		}}), "q1", func(t *testing.T, r *agentv1.WorkResult) {
			if res := r.GetClientDone().GetResults(); len(res) != 1 || res[0].GetQperf().GetLatencySeconds() <= 0 {
				t.Errorf("results %v, want one qperf latency", res)
			}
		}},
		{"stop the qperf server", work("q1", 10*time.Second, &agentv1.Work_StopServer{StopServer: &agentv1.StopServer{}}), "q1",
			func(t *testing.T, r *agentv1.WorkResult) { noServersLeft(t, cfg.Ports.Qperf) }},
	}
	for _, s := range steps {
		fs.send(t, s.work)
		r := fs.result(t, s.testID)
		if r.GetStatus() != measurev1.Status_STATUS_OK {
			t.Errorf("%s: %v %s", s.name, r.GetStatus(), r.GetMessage())
			continue
		}
		if s.check != nil {
			s.check(t, r)
		}
	}
}

// TestBadEndpoints: an address in the coordinator's Endpoints that is no
// target (unspecified, broadcast, multicast, IPv4-mapped) is dropped with a
// warning naming the node and the address, and no allowlist makes such an
// address a target. The pings run in a throwaway namespace, so that a
// regression sends nothing out of this machine.
func TestBadEndpoints(t *testing.T) {
	testnet.Need(t, "ping")
	path := testnet.NewNetNS(t, "mp-agent")
	const podIP, goodIP = "127.0.0.50", "127.0.0.60"
	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.PodIP, cfg.PodNetNS = netip.MustParseAddr(podIP), path
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("224.0.0.0/4"), netip.MustParsePrefix("255.255.255.255/32")}
	logs := captureLogs(&cfg)
	startAgent(t, cfg)

	fs := next()
	fs.accept(t, time.Second, 30*time.Second)
	host, pod := measurev1.Network_NETWORK_HOST, measurev1.Network_NETWORK_POD
	fs.send(t, endpoints(
		&agentv1.NodeEndpoint{NodeName: "node-a", Addresses: []*measurev1.NetworkAddress{{Network: host, Ip: "127.0.0.1"}, {Network: pod, Ip: podIP}}},
		&agentv1.NodeEndpoint{NodeName: "node-b", ServiceIp: "255.255.255.255", Addresses: []*measurev1.NetworkAddress{
			{Network: host, Ip: "0.0.0.0"}, {Network: pod, Ip: "::ffff:127.0.0.2"}}},
		&agentv1.NodeEndpoint{NodeName: "node-c", ServiceIp: "::", Addresses: []*measurev1.NetworkAddress{
			{Network: host, Ip: "224.0.0.1"}, {Network: pod, Ip: goodIP}}},
	))

	tests := []struct {
		target     string
		node       string // whose Endpoints held it; "" for none
		wantStatus measurev1.Status
		wantIn     string
	}{
		{"0.0.0.0", "node-b", measurev1.Status_STATUS_INVALID, `"0.0.0.0" is the unspecified address`},
		{"255.255.255.255", "node-b", measurev1.Status_STATUS_INVALID, `"255.255.255.255" is the broadcast address`},
		{"::ffff:127.0.0.2", "node-b", measurev1.Status_STATUS_INVALID, `"::ffff:127.0.0.2" is IPv4-mapped`},
		{"224.0.0.1", "node-c", measurev1.Status_STATUS_INVALID, `"224.0.0.1" is a multicast address`},
		{"::", "node-c", measurev1.Status_STATUS_INVALID, `"::" is the unspecified address`},
		{"224.0.0.251", "", measurev1.Status_STATUS_INVALID, "multicast"}, // allowlisted only
		{goodIP, "", measurev1.Status_STATUS_OK, ""},                      // kept from the same Endpoints
	}
	for i, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			id := fmt.Sprintf("p%d", i)
			fs.send(t, work(id, 20*time.Second, &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{
				Spec: pingSpec, Network: pod, TargetIp: tt.target}}))
			r := fs.result(t, id)
			if r.GetStatus() != tt.wantStatus || !strings.Contains(r.GetMessage(), tt.wantIn) {
				t.Errorf("ping %s: %v %q, want %v with %q", tt.target, r.GetStatus(), r.GetMessage(), tt.wantStatus, tt.wantIn)
			}
			if tt.node == "" {
				return
			}
			warned := false
			for _, line := range strings.Split(logs.String(), "\n") {
				warned = warned || strings.Contains(line, "level=WARN") && strings.Contains(line, tt.node) && strings.Contains(line, tt.target)
			}
			if !warned {
				t.Errorf("no warning naming %s and %s in the agent's log:\n%s", tt.node, tt.target, logs.String())
			}
		})
	}
}
