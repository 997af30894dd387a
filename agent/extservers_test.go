package agent_test

import (
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// startLoopbackServer runs argv (a test server on loopback) in its own process
// group until the test ends, then kills the group and waits for it, and
// waits up to 5 s for port to accept TCP connections.
func startLoopbackServer(t *testing.T, port uint32, argv ...string) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(port), 10))
	for range 50 {
		if c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond); err == nil {
			_ = c.Close()
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%v: nothing accepts on %s", argv, addr)
}

// TestExternalServers drives an agent against real iperf3 and qperf
// servers behind an external target on loopback: a client on the
// allowlisted ports runs and measures; one on any other port, or to a
// target without those servers, is refused (INVALID) without running;
// an entry whose ports are invalid is dropped.
func TestExternalServers(t *testing.T) {
	testnet.Need(t, "iperf3", "qperf")
	iperf3Port, qperfPort, qperfData := testnet.FreePort(t), testnet.FreePort(t), testnet.FreePort(t)
	startLoopbackServer(t, iperf3Port, "iperf3", "-s", "-p", fmt.Sprint(iperf3Port))
	startLoopbackServer(t, qperfPort, "qperf", "-lp", fmt.Sprint(qperfPort))

	target, next := sessions(t)
	cfg := baseConfig(t, target, "node-a")
	cfg.AllowTargets = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	logs := captureLogs(&cfg)
	startAgent(t, cfg)
	fs := next()
	fs.accept(t, time.Second, 30*time.Second)
	fs.send(t, externalEndpoints(
		&measurev1.ExternalTarget{Name: "srv", Address: "127.0.0.1", Iperf3Port: iperf3Port, QperfPort: qperfPort, QperfDataPort: qperfData},
		&measurev1.ExternalTarget{Name: "bare", Address: "127.0.0.1"},
		&measurev1.ExternalTarget{Name: "half", Address: "127.0.0.1", QperfPort: qperfPort},
	))
	second := durationpb.New(time.Second)
	iperf3 := &measurev1.TestSpec{Test: measurev1.Test_TEST_IPERF3_TCP, Params: &measurev1.TestSpec_Iperf3{Iperf3: &measurev1.Iperf3Params{Duration: second}}}
	qbw := &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_BW, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: second}}}
	qlat := &measurev1.TestSpec{Test: measurev1.Test_TEST_QPERF_TCP_LAT, Params: &measurev1.TestSpec_Qperf{Qperf: &measurev1.QperfParams{Duration: second}}}
	rc := func(spec *measurev1.TestSpec, name string, port, data uint32) *agentv1.Work_RunClient {
		return &agentv1.Work_RunClient{RunClient: &agentv1.RunClient{Spec: spec, Network: measurev1.Network_NETWORK_HOST,
			ExternalTarget: name, Port: port, DataPort: data}}
	}
	const ok, invalid = measurev1.Status_STATUS_OK, measurev1.Status_STATUS_INVALID
	steps := []struct {
		name       string
		work       *agentv1.Work_RunClient
		wantStatus measurev1.Status
		wantIn     string
	}{
		{"iperf3 on its port", rc(iperf3, "srv", iperf3Port, 0), ok, ""},
		{"qperf tcp_bw on its ports", rc(qbw, "srv", qperfPort, qperfData), ok, ""},
		{"qperf tcp_lat on its ports", rc(qlat, "srv", qperfPort, qperfData), ok, ""},
		{"iperf3 to qperf's port", rc(iperf3, "srv", qperfPort, 0), invalid,
			fmt.Sprintf(`external_target "srv": port %d is not its iperf3_port %d`, qperfPort, iperf3Port)},
		{"iperf3 to ssh", rc(iperf3, "srv", 22, 0), invalid, `external_target "srv": port 22 is not its iperf3_port`},
		{"qperf to another data port", rc(qbw, "srv", qperfPort, qperfData+1), invalid,
			fmt.Sprintf(`data_port %d is not its qperf_data_port %d`, qperfData+1, qperfData)},
		{"iperf3 to a target without servers", rc(iperf3, "bare", iperf3Port, 0), invalid, `external_target "bare" has no iperf3_port`},
		{"qperf to a dropped entry", rc(qlat, "half", qperfPort, qperfData), invalid, `external_target "half" refused`},
	}
	for i, s := range steps {
		id := fmt.Sprintf("s%d", i)
		fs.send(t, work(id, 30*time.Second, s.work))
		r := fs.result(t, id)
		rs := r.GetClientDone().GetResults()
		if len(rs) != 1 || rs[0].GetStatus() != s.wantStatus || !strings.Contains(rs[0].GetMessage(), s.wantIn) {
			t.Errorf("%s: %v %q with results %v, want one %v with %q", s.name, r.GetStatus(), r.GetMessage(), rs, s.wantStatus, s.wantIn)
			continue
		}
		if s.wantStatus != ok {
			continue
		}
		if got := rs[0].GetTargetAddress(); got != "127.0.0.1" {
			t.Errorf("%s: target_address %q", s.name, got)
		}
		switch m := rs[0]; {
		case m.GetIperf3() != nil && m.GetIperf3().GetThroughputBps() < 1e6,
			m.GetQperf() != nil && s.work.RunClient.GetSpec().GetTest() == measurev1.Test_TEST_QPERF_TCP_BW && m.GetQperf().GetThroughputBps() < 1e6,
			m.GetQperf() != nil && s.work.RunClient.GetSpec().GetTest() == measurev1.Test_TEST_QPERF_TCP_LAT && m.GetQperf().GetLatencySeconds() <= 0,
			m.GetIperf3() == nil && m.GetQperf() == nil:
			t.Errorf("%s: implausible metrics %v", s.name, m.GetMetrics())
		}
	}
	if want := "external_target=half"; !strings.Contains(logs.String(), want) {
		t.Errorf("no warning with %q in the log:\n%s", want, logs.String())
	}
}
