// Package cluster runs meshperf on a lab (deploy/lab) the way a cluster runs
// it: the coordinator as a process in the control-plane node's host network
// namespace, listening on its node IP for agents and on a unix socket for the
// CLI in the root namespace; one agent process per node in that node's host
// namespace, with the node's pod namespace as its pod network (given by
// flags, or with Config.EndpointSocket learned from an `agent endpoint`
// process in the pod namespace). The lab, the binaries, the sockets and the
// processes are all real; only Kubernetes is missing.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/stringers"
	"github.com/meshperf/meshperf/internal/tick"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// DefaultPort is the coordinator's TCP port inside the lab.
const DefaultPort = 7700

// Config configures Start.
type Config struct {
	// Lab is a lab that is up.
	Lab *lab.Lab
	// BinDir holds the `agent` and `coordinator` binaries.
	BinDir string
	// WorkDir holds the bbolt file, the socket and one log file per
	// process; created if missing.
	WorkDir string
	// Port is the coordinator's TCP port; zero means DefaultPort.
	Port int
	// HeartbeatInterval is passed to the coordinator; zero means its default.
	HeartbeatInterval time.Duration
	// CoordinatorArgs are extra arguments of `coordinator serve`, e.g.
	// ["--config", "monitor.yaml"].
	CoordinatorArgs []string
	// PartitionGrace is passed to the coordinator (--partition-grace); zero
	// means its default.
	PartitionGrace time.Duration
	// AgentLogLevel is the agents' --log-level (debug, info, warn, error);
	// empty means their default.
	AgentLogLevel string
	// EndpointSocket makes the agents learn their pod endpoint over the
	// endpoint handshake instead of --pod-ip and --pod-netns: each agent
	// listens on --endpoint-socket EndpointSocketPath(node), and Start runs
	// `agent endpoint` in each node's pod namespace (StartEndpoint).
	EndpointSocket bool
	// Logger receives process events; nil means discard.
	Logger *slog.Logger
}

// Cluster is a coordinator and its agents running in a lab.
type Cluster struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	coord     *process
	agents    map[string]*process
	endpoints map[string]*process // by node: `agent endpoint` processes
}

// process is one started binary in its own process group.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// New checks cfg and prepares WorkDir; nothing is started.
func New(cfg Config) (*Cluster, error) {
	if cfg.Lab == nil || len(cfg.Lab.Nodes) == 0 {
		return nil, errors.New("cluster: Config.Lab has no nodes")
	}
	for _, b := range []string{"agent", "coordinator"} {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("cluster: binary %s: %w (run make build)", b, err)
		}
	}
	if cfg.Port == 0 {
		cfg.Port = DefaultPort
	}
	if err := os.MkdirAll(filepath.Join(cfg.WorkDir, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("cluster: work dir: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cluster{cfg: cfg, log: log, agents: map[string]*process{}, endpoints: map[string]*process{}}, nil
}

// SocketPath is the coordinator's unix socket, reachable from the root
// namespace.
func (c *Cluster) SocketPath() string { return filepath.Join(c.cfg.WorkDir, "coordinator.sock") }

// DBPath is the coordinator's bbolt file.
func (c *Cluster) DBPath() string { return filepath.Join(c.cfg.WorkDir, "meshperf.db") }

// LogPath is the log file of a process: "coordinator" or a node name.
func (c *Cluster) LogPath(name string) string {
	return filepath.Join(c.cfg.WorkDir, "logs", name+".log")
}

// StateDir is the state directory of a node's agent (its --state-dir),
// under WorkDir: agents of labs that run at once never share one.
func (c *Cluster) StateDir(node string) string {
	return filepath.Join(c.cfg.WorkDir, "state", node)
}

// EndpointSocketPath is the endpoint socket of a node's agent, under
// WorkDir: in a cluster it is in a hostPath directory.
func (c *Cluster) EndpointSocketPath(node string) string {
	return filepath.Join(c.cfg.WorkDir, "endpoint", node, "endpoint.sock")
}

// CoordinatorAddress is where agents dial the coordinator, inside the lab.
func (c *Cluster) CoordinatorAddress() string {
	return net.JoinHostPort(c.cfg.Lab.ControlPlane().HostIP.String(), strconv.Itoa(c.cfg.Port))
}

// Start starts the coordinator and every agent and waits until every agent
// is connected or ctx ends.
func (c *Cluster) Start(ctx context.Context) error {
	if err := c.StartCoordinator(ctx); err != nil {
		return err
	}
	for _, n := range c.cfg.Lab.Nodes {
		if err := c.StartAgent(n.Name); err != nil {
			return err
		}
		if c.cfg.EndpointSocket {
			if err := c.StartEndpoint(n.Name); err != nil {
				return err
			}
		}
	}
	return c.WaitAgents(ctx, len(c.cfg.Lab.Nodes))
}

// StartCoordinator starts `coordinator serve` in the control-plane node and
// waits until its socket answers.
func (c *Cluster) StartCoordinator(ctx context.Context) error {
	args := []string{"serve", "--listen", c.CoordinatorAddress(), "--socket", c.SocketPath(), "--db", c.DBPath()}
	if c.cfg.HeartbeatInterval > 0 {
		args = append(args, "--heartbeat-interval", c.cfg.HeartbeatInterval.String())
	}
	args = append(args, c.cfg.CoordinatorArgs...)
	if c.cfg.PartitionGrace > 0 {
		args = append(args, "--partition-grace", c.cfg.PartitionGrace.String())
	}
	p, err := c.spawn("coordinator", c.cfg.Lab.ControlPlane().HostNetNSPath, filepath.Join(c.cfg.BinDir, "coordinator"), args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.coord = p
	c.mu.Unlock()
	return c.waitSocket(ctx, p)
}

// StartAgent starts the agent of a node in its host namespace.
func (c *Cluster) StartAgent(node string) error {
	n, ok := c.cfg.Lab.Node(node)
	if !ok {
		return fmt.Errorf("cluster: no node %q in the lab", node)
	}
	args := []string{"--coordinator", c.CoordinatorAddress(), "--node", n.Name, "--host-ip", stringers.Join(n.HostIPs(), ",", "")}
	if c.cfg.EndpointSocket {
		args = append(args, "--endpoint-socket", c.EndpointSocketPath(n.Name))
	} else {
		args = append(args, "--pod-ip", stringers.Join(n.PodIPs(), ",", ""), "--pod-netns", n.PodNetNSPath)
	}
	args = append(args, "--service-ip", stringers.Join(n.ServiceIPs(), ",", ""), "--state-dir", c.StateDir(n.Name))
	if c.cfg.AgentLogLevel != "" {
		args = append(args, "--log-level", c.cfg.AgentLogLevel)
	}
	p, err := c.spawn(n.Name, n.HostNetNSPath, filepath.Join(c.cfg.BinDir, "agent"), args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.agents[node] = p
	c.mu.Unlock()
	return nil
}

// StartEndpoint starts `agent endpoint` in a node's pod namespace, with
// NODE_NAME set, connecting to EndpointSocketPath(node); its log is
// LogPath("endpoint-" + node).
func (c *Cluster) StartEndpoint(node string) error {
	n, ok := c.cfg.Lab.Node(node)
	if !ok {
		return fmt.Errorf("cluster: no node %q in the lab", node)
	}
	p, err := c.spawnEnv("endpoint-"+n.Name, n.PodNetNSPath, []string{"NODE_NAME=" + n.Name},
		filepath.Join(c.cfg.BinDir, "agent"), "endpoint", "--socket", c.EndpointSocketPath(n.Name))
	if err != nil {
		return err
	}
	c.mu.Lock()
	old := c.endpoints[node]
	c.endpoints[node] = p
	c.mu.Unlock()
	return old.stop(syscall.SIGTERM)
}

// StopEndpoint stops a node's `agent endpoint` with sig and waits until it
// is gone.
func (c *Cluster) StopEndpoint(node string, sig syscall.Signal) error {
	return c.take(c.endpoints, node).stop(sig)
}

// take removes node's process from m (c.agents or c.endpoints) and
// returns it; nil if it has none.
func (c *Cluster) take(m map[string]*process, node string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := m[node]
	delete(m, node)
	return p
}

// StopCoordinator stops the coordinator with sig (SIGTERM for a clean stop,
// SIGKILL for a crash) and waits until it is gone.
func (c *Cluster) StopCoordinator(sig syscall.Signal) error {
	c.mu.Lock()
	p := c.coord
	c.coord = nil
	c.mu.Unlock()
	return p.stop(sig)
}

// StopAgent stops a node's agent with sig and waits until it is gone.
func (c *Cluster) StopAgent(node string, sig syscall.Signal) error {
	return c.take(c.agents, node).stop(sig)
}

// Stop stops every process: endpoints, agents, then the coordinator.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	nodes := make([]string, 0, len(c.agents))
	for n := range c.agents {
		nodes = append(nodes, n)
	}
	endpoints := make([]string, 0, len(c.endpoints))
	for n := range c.endpoints {
		endpoints = append(endpoints, n)
	}
	c.mu.Unlock()
	var errs []error
	for _, n := range endpoints {
		errs = append(errs, c.StopEndpoint(n, syscall.SIGTERM))
	}
	for _, n := range nodes {
		errs = append(errs, c.StopAgent(n, syscall.SIGTERM))
	}
	errs = append(errs, c.StopCoordinator(syscall.SIGTERM))
	return errors.Join(errs...)
}

// Dial connects to the coordinator's MeshService over the unix socket.
func (c *Cluster) Dial() (meshv1.MeshServiceClient, io.Closer, error) {
	conn, err := grpc.NewClient("unix://"+c.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: dial coordinator: %w", err)
	}
	return meshv1.NewMeshServiceClient(conn), conn, nil
}

// WaitAgents waits until at least n agents are connected.
func (c *Cluster) WaitAgents(ctx context.Context, n int) error {
	client, conn, err := c.Dial()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	err = tick.Until(ctx, 100*time.Millisecond, func() string {
		resp, err := client.ListAgents(ctx, &meshv1.ListAgentsRequest{})
		if err != nil {
			return fmt.Sprintf("no agent list (%v)", err)
		}
		connected := 0
		for _, a := range resp.GetAgents() {
			if a.GetConnected() {
				connected++
			}
		}
		if connected >= n {
			return ""
		}
		return fmt.Sprintf("%d of %d agents connected", connected, n)
	})
	if err != nil {
		return fmt.Errorf("cluster: %w; see %s", err, filepath.Join(c.cfg.WorkDir, "logs"))
	}
	return nil
}

// waitSocket waits until the coordinator answers on its socket, or exits.
func (c *Cluster) waitSocket(ctx context.Context, p *process) error {
	client, conn, err := c.Dial()
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	exited := false
	err = tick.Until(ctx, 50*time.Millisecond, func() string {
		select {
		case <-p.done:
			exited = true
			return ""
		default:
		}
		if _, err := client.ListAgents(ctx, &meshv1.ListAgentsRequest{}); err != nil {
			return fmt.Sprintf("coordinator not answering on %s (%v)", c.SocketPath(), err)
		}
		return ""
	})
	switch {
	case exited:
		return fmt.Errorf("cluster: coordinator exited at start (%v); see %s", p.cmd.ProcessState, c.LogPath("coordinator"))
	case err != nil:
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// spawn starts bin inside the network namespace at nsPath, in a process
// group of its own that dies with this process, logging to LogPath(name).
func (c *Cluster) spawn(name, nsPath, bin string, args ...string) (*process, error) {
	return c.spawnEnv(name, nsPath, nil, bin, args...)
}

// spawnEnv is spawn with env added to this process's environment.
func (c *Cluster) spawnEnv(name, nsPath string, env []string, bin string, args ...string) (*process, error) {
	f, err := os.OpenFile(c.LogPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cluster: log file: %w", err)
	}
	argv := lab.NSExec(nsPath, append([]string{bin}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: f, done: make(chan struct{})}
	go func() { // owner: process; ends when the process exits
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	c.log.Info("started", "process", name, "pid", cmd.Process.Pid, "log", c.LogPath(name))
	return p, nil
}

// stop signals the process group and waits; after 10 s it sends SIGKILL.
func (p *process) stop(sig syscall.Signal) error {
	if p == nil {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("cluster: %s ignored %v for 10 s; killed", p.name, sig)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // anything it left in its group
	return nil
}
