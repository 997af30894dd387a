package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/agent/httptarget"
	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/internal/tick"
)

// The lab's external host as an external target of meshperf.
const (
	// ExternalTargetName is the name under which ExternalConfig allowlists
	// the lab's external host.
	ExternalTargetName = "lab-ext"
	// ExternalHTTPPort is the TCP port of the HTTP server ServeExternal runs
	// on the external host.
	ExternalHTTPPort = 8080
	// ExternalIperf3Port, ExternalQperfPort and ExternalQperfDataPort are
	// the ports of the iperf3 and qperf servers ServeExternalServers runs
	// on the external host (iperf3 -s -p, qperf -lp; qperf clients pin the
	// data port with -ip), as ExternalServersConfig allowlists them.
	ExternalIperf3Port    = 15201
	ExternalQperfPort     = 29765
	ExternalQperfDataPort = 29766
)

// ExternalServersConfig is ExternalConfig with the ports of the iperf3 and
// qperf servers that ServeExternalServers runs on the external host in
// ExternalTargetName's entry; extra is appended as it is.
func ExternalServersConfig(l *lab.Lab, extra string) string {
	return fmt.Sprintf("external:\n  - name: %s\n    address: %s\n    http_url: %s\n    iperf3_port: %d\n    qperf_port: %d\n    qperf_data_port: %d\n%s",
		ExternalTargetName, l.External.IP, ExternalURL(l), ExternalIperf3Port, ExternalQperfPort, ExternalQperfDataPort, extra)
}

// ServeExternalServers runs real servers in the lab's external host, as an
// iperf3 DaemonSet behind a LoadBalancer would be: `iperf3 -s -p
// ExternalIperf3Port` and `qperf -lp ExternalQperfPort`, each in its own
// process group. It returns once both accept TCP connections on the
// external host's IP (checked from inside its namespace), or fails within
// 10 s. stop kills both groups and waits for them; call it exactly when
// done with the servers (it is idempotent). lab.Down also kills whatever
// is left in the namespace.
func ServeExternalServers(ctx context.Context, l *lab.Lab) (stop func(), err error) {
	if !l.External.IP.IsValid() || l.External.NetNSPath == "" {
		return nil, errors.New("cluster: the lab has no external host")
	}
	var cmds []*exec.Cmd
	var once sync.Once
	stop = func() {
		once.Do(func() {
			for _, c := range cmds {
				_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
				_ = c.Wait()
			}
		})
	}
	for _, argv := range [][]string{
		{"iperf3", "-s", "-p", strconv.Itoa(ExternalIperf3Port)},
		{"qperf", "-lp", strconv.Itoa(ExternalQperfPort)},
	} {
		argv = l.External.Command(argv...)
		c := exec.Command(argv[0], argv[1:]...)
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("cluster: start %v on the external host: %w", argv, err)
		}
		cmds = append(cmds, c)
	}
	for _, port := range []int{ExternalIperf3Port, ExternalQperfPort} {
		if err := waitListening(ctx, l, port); err != nil {
			stop()
			return nil, err
		}
	}
	return stop, nil
}

// waitListening waits up to 10 s (or until ctx ends) for a TCP connect to
// the external host's IP and port to succeed from inside its namespace.
func waitListening(ctx context.Context, l *lab.Lab, port int) error {
	addr := net.JoinHostPort(l.External.IP.String(), strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := tick.Until(ctx, 100*time.Millisecond, func() string {
		err := netns.Do(l.External.NetNSPath, func() error {
			c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
			if err == nil {
				_ = c.Close()
			}
			return err
		})
		if err != nil {
			return err.Error()
		}
		return ""
	})
	if err != nil {
		return fmt.Errorf("cluster: no server accepts on %s in the external host: %w", addr, err)
	}
	return nil
}

// ExternalURL is what the HTTP test fetches from the lab's external host:
// http://<lab.ExternalIP>:ExternalHTTPPort/.
func ExternalURL(l *lab.Lab) string {
	return "http://" + netip.AddrPortFrom(l.External.IP, ExternalHTTPPort).String() + "/"
}

// ExternalConfig is a coordinator config file (YAML) whose allowlist holds
// the lab's external host as ExternalTargetName, with ping to its IP and
// HTTP to ExternalURL. extra is appended as it is (more top-level keys,
// e.g. a monitor section).
func ExternalConfig(l *lab.Lab, extra string) string {
	return fmt.Sprintf("external:\n  - name: %s\n    address: %s\n    http_url: %s\n%s",
		ExternalTargetName, l.External.IP, ExternalURL(l), extra)
}

// ServeExternal serves an HTTP target (the agents' own, answering "meshperf
// agent lab-ext external") on ExternalHTTPPort inside the lab's external
// host, until ctx ends. It returns once the listener is open; wait on the
// returned channel for the server's end (nil after ctx ends).
func ServeExternal(ctx context.Context, l *lab.Lab) (<-chan error, error) {
	if !l.External.IP.IsValid() || l.External.NetNSPath == "" {
		return nil, errors.New("cluster: the lab has no external host")
	}
	ln, err := netns.Listen(l.External.NetNSPath, "tcp", net.JoinHostPort(l.External.IP.String(), strconv.Itoa(ExternalHTTPPort)))
	if err != nil {
		return nil, fmt.Errorf("cluster: listen on the external host: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- httptarget.Serve(ctx, ln, httptarget.Handler(ExternalTargetName, "external")) }()
	return done, nil
}
