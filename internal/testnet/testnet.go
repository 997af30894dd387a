package testnet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testskip"
)

// reservedPorts are the agents' default ports (iperf3, qperf, qperf's
// data port, the HTTP target, the probes' echo responder) that tests may
// use; FreePort never returns them.
var reservedPorts = []int{protocol.DefaultIperf3Port, protocol.DefaultQperfPort, protocol.DefaultQperfDataPort,
	protocol.DefaultHTTPPort, protocol.DefaultProbePort}

// FreePort returns a port that is free for both TCP and UDP on 127.0.0.1
// (iperf3 UDP and qperf udp_* use the same number for both), below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range) and not one of
// the agents' default ports 5201, 19765, 19766, 8080 and 7947. Below the
// ephemeral range, because a port the kernel handed out for a listener
// and took back goes on to be some client's local port: with many test
// binaries connecting at once, a tool that then listened on it failed
// ("unable to bind to listen port"). It picks at random in
// [16384, the range's low end), checks both binds and holds nothing open
// once it returns, so there is nothing to clean up. Within one test
// binary it never returns the same port twice, so ports asked for one
// after the other (a config with several ports) are distinct. It fails
// the test if 200 tries find no such port; it never skips.
func FreePort(t testing.TB) uint32 {
	t.Helper()
	lo, hi := freePortRange()
	for range 200 {
		port := lo + mrand.IntN(hi-lo)
		if slices.Contains(reservedPorts, port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if err == nil {
			_ = u.Close()
			if claim(port) {
				return uint32(port)
			}
		}
	}
	t.Fatal("no free port")
	return 0
}

// freePortRange is FreePort's range, [lo, hi): from 16384 to the low end
// of the kernel's ephemeral range (32768 if it cannot be read, or if it
// starts too low to leave a thousand ports).
func freePortRange() (lo, hi int) {
	lo, hi = 16384, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	var first, last int
	if _, err := fmt.Sscan(string(b), &first, &last); err == nil && first >= lo+1000 {
		hi = first
	}
	return lo, hi
}

// given holds every port FreePort returned in this process.
var given struct {
	sync.Mutex
	ports map[int]bool
}

// claim records port as given and reports whether it was not given before.
func claim(port int) bool {
	given.Lock()
	defer given.Unlock()
	if given.ports[port] {
		return false
	}
	if given.ports == nil {
		given.ports = map[int]bool{}
	}
	given.ports[port] = true
	return true
}

// NewNetNS creates a network namespace named prefix-<8 random hex
// digits>, sets its lo up, and returns its path (/run/netns/<name>), for
// nsenter --net= or setns. The namespace is deleted by ip netns del in a
// t.Cleanup; cleanups run last-in first-out, so one registered after this
// call (a server in the namespace, say) runs before the deletion. It skips
// the test when ip or nsenter is not installed or the test does not run as
// root, but not with -short (callers that want that call Need first), and
// fails it if the namespace cannot be created or lo cannot be set up.
func NewNetNS(t testing.TB, prefix string) (path string) {
	t.Helper()
	NeedTools(t, "ip", "nsenter")
	if os.Geteuid() != 0 {
		t.Skip("needs root: creating a network namespace")
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + "-" + hex.EncodeToString(b)
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in %s: %v: %s", name, err, out)
	}
	return "/run/netns/" + name
}

// Need skips the test when it runs with -short (it runs real tools) or
// when one of tools is not found in PATH. It registers no cleanup.
func Need(t testing.TB, tools ...string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs real tools; skipped with -short")
	}
	NeedTools(t, tools...)
}

// NeedTools skips the test when one of tools is not found in PATH. Unlike
// Need it does not skip with -short: it is for quick tools (sh, sleep)
// that short tests may run too. It registers no cleanup.
func NeedTools(t testing.TB, tools ...string) {
	t.Helper()
	testskip.Tools(t, "", tools...)
}

// Ctx returns a context that ends d after the call or when the test ends,
// whichever comes first: its cancel is registered with t.Cleanup. It
// never skips or fails.
func Ctx(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
