package coordinator_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/coordinator/cli"
	"github.com/meshperf/meshperf/coordinator/registry"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// running is a coordinator started by runAt.
type running struct {
	addr, sock string
	logs       *testutil.SyncBuffer
	stop       func() // stops it and waits; safe to call twice
}

// runAt runs the coordinator with cfg on 127.0.0.1, a socket and the
// store dir/meshperf.db (which outlives it: a second runAt on dir is a
// restart) until stop or the test's end; its log goes to logs (a fresh
// buffer if nil).
func runAt(t *testing.T, dir string, cfg coordinator.Config, logs *testutil.SyncBuffer) *running {
	t.Helper()
	if logs == nil {
		logs = &testutil.SyncBuffer{}
	}
	if cfg.AllowAddresses == nil { // the fakes register loopback addresses
		cfg.AllowAddresses = []registry.AddressClass{registry.ClassLoopback}
	}
	cfg.ListenAddress = fmt.Sprintf("127.0.0.1:%d", testnet.FreePort(t))
	cfg.SocketPath = filepath.Join(t.TempDir(), "coordinator.sock")
	cfg.DBPath = filepath.Join(dir, "meshperf.db")
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	stop := testutil.Run(t, testnet.Ctx(t, 2*time.Minute), "coordinator.Run", ready, func(ctx context.Context) error { return coordinator.Run(ctx, cfg) })
	return &running{addr: cfg.ListenAddress, sock: cfg.SocketPath, logs: logs, stop: stop}
}

// socketConn dials the coordinator's unix socket (the CLI's way in).
func (c *running) socketConn(t *testing.T) *grpc.ClientConn {
	return dial(t, "unix://"+c.sock, insecure.NewCredentials())
}

// cli runs `coordinator ARGS` against the socket and returns stdout.
func (c *running) cli(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := cli.NewCommand(&out, &errb)
	cmd.SetArgs(append([]string{"--coordinator", c.sock}, args...))
	if err := cmd.ExecuteContext(testnet.Ctx(t, 30*time.Second)); err != nil {
		t.Fatalf("coordinator %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// fakeAgent is an agent session played by the test: it heartbeats, keeps
// every Work it gets and answers each with answer (nil: no answer, the
// work stays in flight).
type fakeAgent struct {
	node   string
	stream agentv1.AgentService_ConnectClient
	answer func(w *agentv1.Work) *agentv1.WorkResult

	sendMu sync.Mutex
	mu     sync.Mutex
	works  []*agentv1.Work
	acks   []string
}

// playAgent registers node over conn with a host address of ip and plays
// its session until ctx or the test ends.
func playAgent(t *testing.T, ctx context.Context, conn *grpc.ClientConn, node, ip string, answer func(*agentv1.Work) *agentv1.WorkResult) *fakeAgent {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	a := &fakeAgent{node: node, answer: answer}
	a.stream = connect(t, ctx, conn, &agentv1.Register{NodeName: node, ProtocolVersion: protocol.Version,
		Addresses: []*agentv1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: ip}}})
	go func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if a.send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Heartbeat{Heartbeat: &agentv1.Heartbeat{SendTime: timestamppb.Now()}}}) != nil {
					return
				}
			}
		}
	}()
	go func() {
		for {
			m, err := a.stream.Recv()
			if err != nil {
				return
			}
			if ack := m.GetResultAck(); ack != nil {
				a.mu.Lock()
				a.acks = append(a.acks, ack.GetTestIds()...)
				a.mu.Unlock()
			}
			w := m.GetWork()
			if w == nil {
				continue
			}
			a.mu.Lock()
			a.works = append(a.works, w)
			a.mu.Unlock()
			if a.answer == nil {
				continue
			}
			if wr := a.answer(w); wr != nil {
				if a.send(&agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: wr}}) != nil {
					return
				}
			}
		}
	}()
	return a
}

func (a *fakeAgent) send(m *agentv1.ConnectRequest) error {
	a.sendMu.Lock()
	defer a.sendMu.Unlock()
	return a.stream.Send(m)
}

// clientWork lists the test IDs of the run_client work the agent got.
func (a *fakeAgent) clientWork() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, w := range a.works {
		if w.GetRunClient() != nil {
			out = append(out, w.GetTestId())
		}
	}
	return out
}

// acked reports whether the coordinator acknowledged testID.
func (a *fakeAgent) acked(testID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range a.acks {
		if id == testID {
			return true
		}
	}
	return false
}

// serverAnswer answers StartServer and StopServer like an agent whose
// servers listen on the default ports, and ignores the rest.
func serverAnswer(w *agentv1.Work) *agentv1.WorkResult {
	wr := &agentv1.WorkResult{TestId: w.GetTestId(), Status: measurev1.Status_STATUS_OK}
	switch {
	case w.GetStartServer() != nil:
		wr.Outcome = &agentv1.WorkResult_ServerStarted{ServerStarted: &agentv1.ServerStarted{Port: 5201}}
	case w.GetStopServer() != nil:
		wr.Outcome = &agentv1.WorkResult_ServerStopped{ServerStopped: &agentv1.ServerStopped{}}
	default:
		return nil
	}
	return wr
}

// clientDone is a late or in-time answer to client work id with results.
func clientDone(id string, results ...*measurev1.Result) *agentv1.ConnectRequest {
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_WorkResult{WorkResult: &agentv1.WorkResult{
		TestId: id, Status: measurev1.Status_STATUS_OK,
		Outcome: &agentv1.WorkResult_ClientDone{ClientDone: &agentv1.ClientDone{Results: results}}}}}
}

// scrapeText fetches url (a /metrics page) as text.
func scrapeText(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(testnet.Ctx(t, 10*time.Second), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func insecureCreds() credentials.TransportCredentials { return insecure.NewCredentials() }
