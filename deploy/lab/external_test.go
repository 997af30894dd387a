package lab

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/agent/netns"
	"github.com/meshperf/meshperf/internal/testskip"
	"github.com/meshperf/meshperf/internal/testutil"
)

// serveRemoteAddr serves HTTP on port inside the lab namespace nsPath,
// answering every request with the peer address it sees ("IP:port"). The
// listener is opened in the namespace (so every socket it accepts lives
// there); the server is closed when the test ends.
func serveRemoteAddr(t *testing.T, nsPath string, port int) {
	t.Helper()
	checkLabNS(t, nsPath)
	ln, err := netns.Listen(nsPath, "tcp", net.JoinHostPort("", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, r.RemoteAddr)
		}),
		ReadHeaderTimeout: 5 * time.Second,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
}

// peerCase is one TCP connection whose source address, as the server sees
// it, is checked.
type peerCase struct {
	name     string
	from     func(*Lab) string // client namespace
	serverNS func(*Lab) string
	target   func(*Lab) string     // address the client connects to
	wantPeer func(*Lab) netip.Addr // source address the server must see
}

func hostAddr(i int) func(*Lab) netip.Addr {
	return func(l *Lab) netip.Addr { return l.Nodes[i-1].HostIP }
}

func podAddr(i int) func(*Lab) netip.Addr {
	return func(l *Lab) netip.Addr { return l.Nodes[i-1].PodIP }
}

// peerCases are the connections of TestPeerAddress: to the external host,
// pods are masqueraded to their node IP; every other path keeps the source
// it had before pod egress was masqueraded.
func peerCases() []peerCase {
	var cases []peerCase
	for i := 1; i <= 3; i++ {
		cases = append(cases,
			peerCase{"pod" + strconv.Itoa(i) + " to external is SNATed to host" + strconv.Itoa(i),
				pod(i), external, externalIP, hostAddr(i)},
			peerCase{"host" + strconv.Itoa(i) + " to external",
				host(i), external, externalIP, hostAddr(i)},
		)
	}
	return append(cases,
		peerCase{"external to host1", external, host(1), hostIP(1),
			func(l *Lab) netip.Addr { return l.External.IP }},
		peerCase{"pod1 to pod2 keeps the pod IP", pod(1), pod(2), podIP(2), podAddr(1)},
		peerCase{"pod1 to host2 keeps the pod IP", pod(1), host(2), hostIP(2), podAddr(1)},
		peerCase{"pod1 to host1 keeps the pod IP", pod(1), host(1), hostIP(1), podAddr(1)},
		peerCase{"pod1 to service2 keeps the pod IP", pod(1), pod(2), serviceIP(2), podAddr(1)},
		peerCase{"pod2 to its own service is masqueraded to its gateway (hairpin)", pod(2), pod(2), serviceIP(2),
			func(l *Lab) netip.Addr { return l.Nodes[1].PodGateway }},
		peerCase{"host1 to host2", host(1), host(2), hostIP(2), hostAddr(1)},
		peerCase{"host1 to pod2 comes from host1, or its VTEP in vxlan mode", host(1), pod(2), podIP(2),
			func(l *Lab) netip.Addr { return nodeSource(l, 1) }},
		peerCase{"host3 to service2 is masqueraded to host3, or its VTEP in vxlan mode", host(3), pod(2), serviceIP(2),
			func(l *Lab) netip.Addr { return nodeSource(l, 3) }},
	)
}

// nodeSource is the address node i's own traffic to another node's pod
// leaves with: its host IP in host-gw mode, its VTEP address in vxlan mode.
func nodeSource(l *Lab, i int) netip.Addr {
	if l.Mode == ModeVXLAN {
		return l.Nodes[i-1].VTEPIP
	}
	return l.Nodes[i-1].HostIP
}

func TestPeerAddress(t *testing.T) {
	requireLab(t)
	testskip.Tools(t, "deploy/lab/install-deps.sh installs it", "curl")
	t.Parallel()
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			l := upLab(t, Config{Prefix: testPrefix(t), Nodes: 3, Mode: mode, Logger: testutil.StreamLogger(t)})
			port := 17000
			for _, c := range peerCases() {
				port++
				t.Run(c.name, func(t *testing.T) {
					serveRemoteAddr(t, c.serverNS(l), port)
					url := "http://" + net.JoinHostPort(c.target(l), strconv.Itoa(port)) + "/"
					out, err := runIn(t, 10*time.Second, c.from(l),
						"curl", "-sS", "--noproxy", "*", "--connect-timeout", "2", "--max-time", "3", url)
					if err != nil {
						t.Fatalf("curl %s: %v\n%s", url, err, out)
					}
					peer, err := netip.ParseAddrPort(strings.TrimSpace(out))
					if err != nil {
						t.Fatalf("curl %s: answer %q is no peer address: %v", url, out, err)
					}
					if want := c.wantPeer(l); peer.Addr() != want {
						t.Errorf("curl %s: the server saw %s, want %s", url, peer.Addr(), want)
					}
				})
			}
		})
	}
}

// TestDownExternal removes an external namespace left alone by a crash
// (the rest of the lab already gone), with a process still in it.
func TestDownExternal(t *testing.T) {
	requireLab(t)
	t.Parallel()
	prefix := testPrefix(t)
	downOnCleanup(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := prefix + "-ext"
	if err := (runner{log: testutil.StreamLogger(t)}).ip(ctx, "", "netns", "add", name); err != nil {
		t.Fatal(err)
	}
	orphan := startOrphan(t, nsPath(name))
	st, err := Status(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if ns, ok := st.Namespace(name); !ok || len(ns.Processes) != 1 || len(st.Namespaces) != 1 {
		t.Fatalf("Status of a lab left as %s with a process: want it with 1 process:\n%s", name, st)
	}
	for i := range 2 { // Down twice: the second finds nothing and is fine.
		if err := Down(ctx, prefix, testutil.StreamLogger(t)); err != nil {
			t.Fatalf("Down #%d: %v", i+1, err)
		}
		if _, err := os.Stat(nsPath(name)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("after Down #%d: %s: %v, want it gone", i+1, nsPath(name), err)
		}
	}
	wantKilled(t, orphan, "the process in "+name)
}
