package agent_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/agent"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

type stream = grpc.BidiStreamingServer[agentv1.ConnectRequest, agentv1.ConnectResponse]

// fakeSession is the coordinator's end of one agent session, driven by
// the test.
type fakeSession struct {
	stream stream
	reg    *agentv1.Register
	msgs   chan *agentv1.ConnectRequest // closed when the agent's side ends
	end    chan error                   // the test ends the session with this error
}

// sessions starts a fake coordinator that hands every agent session to
// the test, after reading its Register.
func sessions(t *testing.T) (target string, next func() *fakeSession) {
	t.Helper()
	ch := make(chan *fakeSession)
	target = startFake(t, func(s stream) error {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		fs := &fakeSession{stream: s, reg: m.GetRegister(), msgs: make(chan *agentv1.ConnectRequest, 64), end: make(chan error, 1)}
		go func() { // ends when the stream does
			defer close(fs.msgs)
			for {
				m, err := s.Recv()
				if err != nil {
					return
				}
				fs.msgs <- m
			}
		}()
		select {
		case ch <- fs:
		case <-s.Context().Done():
			return nil
		}
		select {
		case err := <-fs.end:
			return err
		case <-s.Context().Done():
			return nil
		}
	})
	next = func() *fakeSession {
		t.Helper()
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case fs := <-ch:
			return fs
		case <-timer.C:
			t.Fatal("no agent session within 30 s")
			return nil
		}
	}
	return target, next
}

func (fs *fakeSession) send(t *testing.T, m *agentv1.ConnectResponse) {
	t.Helper()
	if err := fs.stream.Send(m); err != nil {
		t.Fatalf("send to the agent: %v", err)
	}
}

// accept answers the Register.
func (fs *fakeSession) accept(t *testing.T, interval, timeout time.Duration) {
	t.Helper()
	fs.send(t, &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
		CoordinatorVersion: "fake", HeartbeatInterval: durationpb.New(interval), HeartbeatTimeout: durationpb.New(timeout),
	}}})
}

// result waits for the WorkResult of testID, skipping heartbeats.
func (fs *fakeSession) result(t *testing.T, testID string) *agentv1.WorkResult {
	t.Helper()
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	for {
		select {
		case m, ok := <-fs.msgs:
			if !ok {
				t.Fatalf("the agent ended the session before answering %q", testID)
			}
			switch msg := m.GetMsg().(type) {
			case *agentv1.ConnectRequest_Heartbeat:
			case *agentv1.ConnectRequest_WorkResult:
				if msg.WorkResult.GetWorkId() == testID {
					return msg.WorkResult
				}
				t.Errorf("unexpected answer to %q while waiting for %q", msg.WorkResult.GetWorkId(), testID)
			default:
				t.Errorf("unexpected message from the agent: %T", msg)
			}
		case <-timer.C:
			t.Fatalf("no answer to %q within 60 s", testID)
		}
	}
}

// closed reports whether the agent ended its side of the session.
func (fs *fakeSession) closed() bool {
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	for {
		select {
		case _, ok := <-fs.msgs:
			if !ok {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

func TestRunBadConfig(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*agent.Config)
		wantIn string
	}{
		{"bad node name", func(c *agent.Config) { c.NodeName = "Node_1" }, `"Node_1"`},
		{"empty node name", func(c *agent.Config) { c.NodeName = "" }, "node name"},
		{"no coordinator", func(c *agent.Config) { c.Coordinator = "" }, "coordinator"},
		{"no host IP", func(c *agent.Config) { c.HostIP = netip.Addr{} }, "host IP"},
		{"pod IP without a namespace", func(c *agent.Config) { c.PodIP = netip.MustParseAddr("127.0.0.5") }, "127.0.0.5"},
		{"HTTP port out of range", func(c *agent.Config) { c.HTTPPort = 70000 }, "70000"},
		{"iperf3 port out of range", func(c *agent.Config) { c.Ports.Iperf3 = 70000 }, "--iperf3-port) 70000"},
		{"qperf port out of range", func(c *agent.Config) { c.Ports.Qperf = 65536 }, "--qperf-port) 65536"},
		{"qperf data port out of range", func(c *agent.Config) { c.Ports.QperfData = 1 << 31 }, "--qperf-data-port) 2147483648"},
		{"qperf data port = qperf port", func(c *agent.Config) { c.Ports.QperfData = c.Ports.Qperf }, "qperf data port (--qperf-data-port)"},
		{"HTTP port = iperf3 port", func(c *agent.Config) { c.HTTPPort = c.Ports.Iperf3 }, "HTTP port (--http-port)"},
		{"HTTP port = qperf port", func(c *agent.Config) { c.HTTPPort = c.Ports.Qperf }, "HTTP port (--http-port)"},
		{"HTTP port = qperf data port", func(c *agent.Config) { c.HTTPPort = c.Ports.QperfData }, "HTTP port (--http-port)"},
		{"HTTP port = default iperf3 port", func(c *agent.Config) { c.HTTPPort, c.Ports.Iperf3 = 5201, 0 }, "5201"},
		{"unspecified host IP", func(c *agent.Config) { c.HostIP = netip.IPv4Unspecified() }, `host IP (--host-ip): "0.0.0.0"`},
		{"unspecified IPv6 host IP", func(c *agent.Config) { c.HostIP = netip.IPv6Unspecified() }, `host IP (--host-ip): "::"`},
		{"multicast host IP", func(c *agent.Config) { c.HostIP = netip.MustParseAddr("224.0.0.1") }, `host IP (--host-ip): "224.0.0.1"`},
		{"broadcast host IP", func(c *agent.Config) { c.HostIP = netip.MustParseAddr("255.255.255.255") }, `"255.255.255.255"`},
		{"IPv4-mapped host IP", func(c *agent.Config) { c.HostIP = netip.MustParseAddr("::ffff:127.0.0.1") }, `"::ffff:127.0.0.1"`},
		{"zoned host IP", func(c *agent.Config) { c.HostIP = netip.MustParseAddr("fe80::1%lo") }, `"fe80::1%lo"`},
		{"multicast pod IP", func(c *agent.Config) { c.PodIP, c.PodNetNS = netip.MustParseAddr("ff02::1"), "/run/netns/none" }, `pod IP (--pod-ip): "ff02::1"`},
		{"unspecified service IP", func(c *agent.Config) { c.ServiceIP = netip.IPv4Unspecified() }, `service IP (--service-ip): "0.0.0.0"`},
		{"negative MaxClients", func(c *agent.Config) { c.MaxClients = -1 }, "MaxClients -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var connects atomic.Int32
			target := startFake(t, func(s stream) error { connects.Add(1); return nil })
			cfg := baseConfig(t, target, "node-1")
			tt.mutate(&cfg)
			// A config that passes runs until ctx ends, and returns nil.
			ctx, cancel := context.WithTimeout(testnet.Ctx(t, 2*time.Minute), 10*time.Second)
			defer cancel()
			err := agent.Run(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tt.wantIn) {
				t.Errorf("Run = %v, want an error containing %s", err, tt.wantIn)
			}
			if n := connects.Load(); n != 0 {
				t.Errorf("the agent connected %d times with a bad config", n)
			}
		})
	}
}

// TestRunRefused: a refusal for good (the codes that TestRefusedByCoordinator
// gets from the real coordinator) ends Run, without a retry, with the
// coordinator's reason. TestSessionEnds covers what is retried.
func TestRunRefused(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"protocol mismatch", status.Error(codes.FailedPrecondition,
			`protocol version mismatch: agent "node-1" (version "dev") speaks protocol 1, this coordinator speaks 2; run matching versions`)},
		{"bad registration", status.Error(codes.InvalidArgument,
			`bad registration: node name "node-1" is not allowed here`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			regs := make(chan *agentv1.Register, 10)
			target := startFake(t, func(s stream) error {
				m, err := s.Recv()
				if err != nil {
					return err
				}
				regs <- m.GetRegister()
				return tt.err
			})
			cfg := baseConfig(t, target, "node-1")
			var err error
			timer := time.NewTimer(30 * time.Second)
			defer timer.Stop()
			select {
			case err = <-startAgent(t, cfg):
			case <-timer.C:
				t.Fatal("Run still runs 30 s after a refusal")
			}
			want := status.Convert(tt.err).Message()
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "refused") {
				t.Errorf("Run = %v, want a refusal saying %q", err, want)
			}
			if n := len(regs); n != 1 {
				t.Errorf("the agent registered %d times, want once (a refusal is final)", n)
			}
			reg := <-regs
			if reg.GetProtocolVersion() != protocol.Version || reg.GetNodeName() != "node-1" {
				t.Errorf("Register: protocol %d node %q, want %d and node-1", reg.GetProtocolVersion(), reg.GetNodeName(), protocol.Version)
			}
			if a := reg.GetAddresses(); len(a) != 1 || a[0].GetNetwork() != measurev1.Network_NETWORK_HOST || a[0].GetIp() != "127.0.0.1" {
				t.Errorf("Register addresses %v, want host 127.0.0.1 only", a)
			}
		})
	}
}

// TestSessionEnds: a session that fails in any way but a refusal is
// retried, and its servers do not outlive it.
func TestSessionEnds(t *testing.T) {
	testnet.Need(t, "qperf")
	registered := func(interval, timeout time.Duration) *agentv1.ConnectResponse {
		return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
			HeartbeatInterval: durationpb.New(interval), HeartbeatTimeout: durationpb.New(timeout),
		}}}
	}
	heartbeat := &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Heartbeat{Heartbeat: &agentv1.Heartbeat{}}}
	tests := []struct {
		name       string
		first      *agentv1.ConnectResponse // the answer to Register; nil: none
		withServer bool                     // start a server before the session ends
		// endErr is how the coordinator ends the session; nil: the agent
		// must drop it, although heartbeats keep coming unless silent.
		endErr error
		silent bool
		// wantLog is in the agent's log once it reconnected: why the
		// session ended.
		wantLog string
	}{
		{"coordinator goes away", registered(time.Second, 30*time.Second), true, status.Error(codes.Unavailable, "shutting down"), false, "shutting down"},
		{"coordinator replaces the session", registered(time.Second, 30*time.Second), true, status.Error(codes.Aborted, "replaced"), false, "replaced"},
		{"coordinator goes silent", registered(50*time.Millisecond, 300*time.Millisecond), true, nil, true, "no message from the coordinator"},
		{"heartbeat timeout not above interval", registered(time.Second, time.Second), false, nil, false,
			"heartbeat timeout 1s is below 2 x the interval 1s"},
		{"heartbeat timeout below 2 intervals", registered(time.Second, 1500*time.Millisecond), false, nil, false,
			"heartbeat timeout 1.5s is below 2 x the interval 1s"},
		{"heartbeat interval of 1µs", registered(time.Microsecond, 30*time.Second), false, nil, false,
			"heartbeat interval 1µs is below 10ms"},
		{"heartbeat interval below 10 ms", registered(9*time.Millisecond, time.Second), false, nil, false,
			"heartbeat interval 9ms is below 10ms"},
		{"no heartbeat interval", registered(0, 30*time.Second), false, nil, false, "heartbeat interval 0s is below 10ms"},
		{"answer is not Registered", heartbeat, false, nil, false, "not Registered"},
		{"no answer to Register", nil, false, nil, true, "no answer to the registration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target, next := sessions(t)
			cfg := baseConfig(t, target, "node-1")
			cfg.RegisterTimeout = 300 * time.Millisecond
			logs := captureLogs(&cfg)
			errc := startAgent(t, cfg)
			defer noServersLeft(t, cfg.Ports.Iperf3, cfg.Ports.Qperf)

			fs := next()
			if tt.first != nil {
				fs.send(t, tt.first)
			}
			if tt.withServer {
				fs.send(t, work("s1", 10*time.Second, &agentv1.Work_StartServer{StartServer: &agentv1.StartServer{
					Tool: measurev1.Tool_TOOL_QPERF, Network: measurev1.Network_NETWORK_HOST}}))
				if r := fs.result(t, "s1"); r.GetStatus() != measurev1.Status_STATUS_OK {
					t.Fatalf("start server: %v %s", r.GetStatus(), r.GetMessage())
				}
				if len(testutil.ToolServers(cfg.Ports.Qperf)) == 0 {
					t.Fatal("no qperf server runs after StartServer answered OK")
				}
			}
			if tt.endErr != nil {
				fs.end <- tt.endErr
			} else {
				stopHB := make(chan struct{})
				hbDone := make(chan struct{})
				go func() { // the only sender from here on; ends with stopHB or the stream
					defer close(hbDone)
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for !tt.silent {
						select {
						case <-stopHB:
							return
						case <-tick.C:
							if fs.stream.Send(heartbeat) != nil {
								return
							}
						}
					}
				}()
				closed := fs.closed()
				close(stopHB)
				<-hbDone
				if !closed {
					t.Fatal("the agent kept a session that is not healthy")
				}
			}
			// Servers go with the session; the agent comes back.
			noServersLeft(t, cfg.Ports.Qperf)
			again := next()
			if again.reg.GetNodeName() != "node-1" {
				t.Errorf("second Register from %q", again.reg.GetNodeName())
			}
			if l := logs.String(); !strings.Contains(l, tt.wantLog) {
				t.Errorf("the agent's log does not say %q:\n%s", tt.wantLog, l)
			}
			select {
			case err := <-errc:
				t.Fatalf("Run returned %v after a session that is worth retrying", err)
			default:
			}
			again.end <- status.Error(codes.Unavailable, "test over")
		})
	}
}

// TestReconnectBackoff: the reconnect backoff doubles (up to
// ReconnectMax) while the agent fails to register, and starts over at
// ReconnectMin after any session that got past registration, however short
// (a session replaced by an impostor must not keep the real agent away).
// A registration whose heartbeats the agent refuses is a failure.
func TestReconnectBackoff(t *testing.T) {
	type step int
	const (
		refuse       step = iota // Unavailable before answering the Register
		replace                  // Registered, then Aborted at once
		badHeartbeat             // Registered with a 1 µs heartbeat interval
	)
	const ms = time.Millisecond // baseConfig: ReconnectMin 20 ms, ReconnectMax 200 ms
	tests := []struct {
		name   string
		script []step // what the fake does with each session; then it keeps one
		want   []time.Duration
	}{
		{"failures double up to the max", []step{refuse, refuse, refuse, refuse, refuse, refuse},
			[]time.Duration{20 * ms, 40 * ms, 80 * ms, 160 * ms, 200 * ms, 200 * ms}},
		{"a replaced session resets", []step{refuse, refuse, refuse, replace, refuse, replace, replace},
			[]time.Duration{20 * ms, 40 * ms, 80 * ms, 20 * ms, 40 * ms, 20 * ms, 20 * ms}},
		{"replaced again and again", []step{replace, replace, replace, replace, replace},
			[]time.Duration{20 * ms, 20 * ms, 20 * ms, 20 * ms, 20 * ms}},
		{"refused heartbeats are failures", []step{badHeartbeat, badHeartbeat, badHeartbeat, replace},
			[]time.Duration{20 * ms, 40 * ms, 80 * ms, 20 * ms}},
	}
	registered := func(interval time.Duration) *agentv1.ConnectResponse {
		return &agentv1.ConnectResponse{Msg: &agentv1.ConnectResponse_Registered{Registered: &agentv1.Registered{
			HeartbeatInterval: durationpb.New(interval), HeartbeatTimeout: durationpb.New(30 * time.Second),
		}}}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sessions atomic.Int32
			target := startFake(t, func(s stream) error {
				if _, err := s.Recv(); err != nil {
					return err
				}
				i := int(sessions.Add(1)) - 1
				if i >= len(tt.script) {
					if err := s.Send(registered(time.Second)); err != nil {
						return err
					}
					<-s.Context().Done() // kept until the test ends
					return nil
				}
				switch tt.script[i] {
				case refuse:
					return status.Error(codes.Unavailable, "not now")
				case replace:
					if err := s.Send(registered(time.Second)); err != nil {
						return err
					}
					return status.Error(codes.Aborted, "session replaced by a new one for node-1")
				default:
					if err := s.Send(registered(time.Microsecond)); err != nil {
						return err
					}
					<-s.Context().Done() // until the agent drops it
					return nil
				}
			})
			backoffs := make(chan time.Duration, 100)
			cfg := baseConfig(t, target, "node-1")
			cfg.OnReconnectWait = func(d time.Duration) {
				select {
				case backoffs <- d:
				default:
				}
			}
			startAgent(t, cfg)
			var got []time.Duration
			timer := time.NewTimer(60 * time.Second) // only turns a hang into a failure
			defer timer.Stop()
			for len(got) < len(tt.want) {
				select {
				case d := <-backoffs:
					got = append(got, d)
				case <-timer.C:
					t.Fatalf("backoffs %v after 60 s, want %v", got, tt.want)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("backoffs %v, want %v", got, tt.want)
			}
		})
	}
}
