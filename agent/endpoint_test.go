package agent_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/agent/endpoint"
	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// endpointHelperEnv, when set, makes the test binary an `agent endpoint`
// process dialing the socket it names, until SIGTERM.
const endpointHelperEnv = "MESHPERF_TEST_AGENT_ENDPOINT_SOCKET"

// runEndpointHelper is the test binary as an endpoint process.
func runEndpointHelper(sock string) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	_ = endpoint.Dial(ctx, endpoint.ClientConfig{Socket: sock, MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	stop()
	os.Exit(0)
}

// podAddress is the pod address of a registration, "" for none.
func podAddress(reg *agentv1.Register) string {
	for _, a := range reg.GetAddresses() {
		if a.GetNetwork() == measurev1.Network_NETWORK_POD {
			return a.GetIp()
		}
	}
	return ""
}

// TestEndpointSocket: an agent with an endpoint socket registers without a
// pod address, then, once an endpoint in a pod namespace connects, again
// with that namespace's IPv4 address; when the endpoint dies, it registers
// once more without it.
func TestEndpointSocket(t *testing.T) {
	ns := testnet.NewNetNS(t, "mp-agent-ep")
	name := filepath.Base(ns)
	for _, argv := range [][]string{
		{"ip", "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "peer0"},
		{"ip", "-n", name, "addr", "add", "192.0.2.30/24", "dev", "eth0"},
		{"ip", "-n", name, "link", "set", "eth0", "up"},
		{"ip", "-n", name, "link", "set", "peer0", "up"},
	} {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.EndpointSocket = filepath.Join(t.TempDir(), "endpoint.sock")
	startAgent(t, cfg)

	fs := next()
	if got := podAddress(fs.reg); got != "" {
		t.Errorf("first registration has pod address %q, want none", got)
	}
	fs.accept(t, time.Second, 30*time.Second)

	cmd := exec.Command("nsenter", "--net="+ns, "--", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), endpointHelperEnv+"="+cfg.EndpointSocket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-waited
	})

	fs = next()
	if got := podAddress(fs.reg); got != "192.0.2.30" {
		t.Errorf("registration after the endpoint connected has pod address %q, want 192.0.2.30", got)
	}
	fs.accept(t, time.Second, 30*time.Second)

	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-waited
	fs = next()
	if got := podAddress(fs.reg); got != "" {
		t.Errorf("registration after the endpoint died has pod address %q, want none", got)
	}
	fs.accept(t, time.Second, 30*time.Second)
}

// TestEndpointSocketExcludesPodFlags: the socket and the pod flags are
// refused together, by an error naming both.
func TestEndpointSocketExcludesPodFlags(t *testing.T) {
	cfg := baseConfig(t, "unix:///nonexistent", "node-a")
	cfg.EndpointSocket = filepath.Join(t.TempDir(), "endpoint.sock")
	cfg.PodNetNS = "/run/netns/x"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := agent.Run(ctx, cfg)
	if err == nil {
		t.Fatal("Run = nil, want an error")
	}
	for _, w := range []string{"--endpoint-socket", "--pod-netns"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Run = %v, want it to name %s", err, w)
		}
	}
}
