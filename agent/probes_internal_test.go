package agent

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestListenEchoAvoidsServerPorts: with --probe-port 0, a port the kernel
// picks that one of the agent's other servers is configured to take, or
// that is taken on the host IPv6 address or in the pod network namespace,
// is given back and picked again (the coordinator would refuse a Register
// with two servers on one port; the agent would not start), at most
// maxEchoPicks times. A port set with --probe-port is never picked again.
// The pod namespace's listener is played by 127.0.0.2, the IPv6 one by
// 127.0.0.3: the test needs no namespace.
func TestListenEchoAvoidsServerPorts(t *testing.T) {
	// A port that is surely free now: the kernel's pick, given back.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	taken := uint32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	inUse := &net.OpError{Op: "listen", Net: "tcp", Err: fmt.Errorf("bind: %w", syscall.EADDRINUSE)}

	for _, tt := range []struct {
		name       string
		probePort  uint32
		clashes    int // host picks that return the iperf3 port
		podInUse   int // pod listens that find the port taken
		v6InUse    int // host IPv6 listens that find the port taken
		wantPicks  int // host listens
		wantErr    string
		wantListen int // listeners returned
	}{
		{"no clash", 0, 0, 0, 0, 1, "", 3},
		{"two clashes, then a free port", 0, 2, 0, 0, 3, "", 3},
		{"every pick clashes", 0, maxEchoPicks, 0, 0, maxEchoPicks, "picked 8 times a port", 0},
		{"taken in the pod namespace once", 0, 0, 1, 0, 2, "", 3},
		{"taken on the host IPv6 address twice", 0, 0, 0, 2, 3, "", 3},
		{"taken in the pod namespace at every pick", 0, 0, maxEchoPicks, 0, maxEchoPicks, "picked 8 times a port", 0},
		{"a set port taken in the pod namespace", taken, 0, 1, 0, 1, "address already in use", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &Agent{cfg: Config{HostIP: netip.MustParseAddr("127.0.0.1"), HostIPv6: netip.MustParseAddr("::1"), PodNetNS: "/run/netns/pod",
				HTTPPort: 8080, ProbePort: tt.probePort}}
			a.cfg.Ports.Iperf3, a.cfg.Ports.Qperf, a.cfg.Ports.QperfData = taken, 19765, 19766
			if tt.probePort != 0 {
				a.cfg.Ports.Iperf3 = 5201
			}
			picks, pods, v6s, open := 0, 0, 0, 0
			listen := func(nsPath, network, address string) (net.Listener, error) {
				_, port, _ := net.SplitHostPort(address)
				switch {
				case nsPath == "/run/netns/pod":
					if pods++; pods <= tt.podInUse {
						return nil, inUse
					}
					address = net.JoinHostPort("127.0.0.2", port)
				case strings.HasPrefix(address, "[::1]"):
					if v6s++; v6s <= tt.v6InUse {
						return nil, inUse
					}
					address = net.JoinHostPort("127.0.0.3", port)
				default:
					if picks++; picks <= tt.clashes {
						address = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(taken)))
					}
				}
				l, err := net.Listen(network, address)
				if err == nil {
					open++
					l = closeCounter{l, &open}
				}
				return l, err
			}
			got, err := a.listenEcho(listen)
			defer func() {
				for _, l := range got {
					_ = l.Close()
				}
			}()
			if picks != tt.wantPicks {
				t.Errorf("%d host listens, want %d", picks, tt.wantPicks)
			}
			if open != len(got) {
				t.Errorf("%d listeners left open, %d returned: the others leak", open, len(got))
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
			if len(got) != tt.wantListen {
				t.Fatalf("%d listeners, want %d", len(got), tt.wantListen)
			}
			port := got[0].Addr().(*net.TCPAddr).Port
			if uint32(port) == taken {
				t.Errorf("echo responder on %d, the iperf3 port", port)
			}
			for _, l := range got[1:] {
				if p := l.Addr().(*net.TCPAddr).Port; p != port {
					t.Errorf("a listener on %d, the host's on %d", p, port)
				}
			}
		})
	}
}

// closeCounter counts its listener's Close in *open.
type closeCounter struct {
	net.Listener
	open *int
}

func (c closeCounter) Close() error {
	*c.open--
	return c.Listener.Close()
}
