package agent

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestListenEchoAvoidsServerPorts: with --probe-port 0, a port the kernel
// picks that one of the agent's other servers is configured to take is
// given back and picked again (the coordinator would refuse a Register
// with two servers on one port), at most maxEchoPicks times.
func TestListenEchoAvoidsServerPorts(t *testing.T) {
	// A port that is surely free now: the kernel's pick, given back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := uint32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()

	for _, tt := range []struct {
		name      string
		clashes   int // picks that return the iperf3 port
		wantPicks int
		wantErr   string
	}{
		{"no clash", 0, 1, ""},
		{"two clashes, then a free port", 2, 3, ""},
		{"every pick clashes", maxEchoPicks, maxEchoPicks, "picked one of the other servers' ports"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{cfg: Config{HostIP: netip.MustParseAddr("127.0.0.1"), HTTPPort: 8080}}
			a.cfg.Ports.Iperf3, a.cfg.Ports.Qperf, a.cfg.Ports.QperfData = taken, 19765, 19766
			picks := 0
			listen := func(network, address string) (net.Listener, error) {
				if picks++; picks <= tt.clashes {
					return net.Listen(network, net.JoinHostPort("127.0.0.1", strconv.Itoa(int(taken))))
				}
				return net.Listen(network, address)
			}
			got, err := a.listenEcho(listen)
			if got != nil {
				defer func() { _ = got.Close() }()
			}
			if picks != tt.wantPicks {
				t.Errorf("%d picks, want %d", picks, tt.wantPicks)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p := uint32(got.Addr().(*net.TCPAddr).Port); p == taken {
				t.Errorf("echo responder on %d, the iperf3 port", p)
			}
		})
	}
}
