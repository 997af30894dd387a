package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/meshperf/meshperf/agent/httptarget"
	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/deploy/lab"
)

// The lab's external host as an external target of meshperf.
const (
	// ExternalTargetName is the name under which ExternalConfig allowlists
	// the lab's external host.
	ExternalTargetName = "lab-ext"
	// ExternalHTTPPort is the TCP port of the HTTP server ServeExternal runs
	// on the external host.
	ExternalHTTPPort = 8080
)

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
