package lab

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testutil"
)

func TestUpStatusDown(t *testing.T) {
	requireLab(t)
	t.Parallel()
	tests := []struct {
		mode    Mode
		wantMTU int // of cni0, vethpod0 and the pod's eth0
	}{
		{ModeHostGW, 1500},
		{ModeVXLAN, 1450},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			prefix := testPrefix(t)
			l := upLab(t, Config{Prefix: prefix, Nodes: 3, Mode: tt.mode, Logger: testutil.StreamLogger(t)})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			st, err := Status(ctx, prefix)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("status:\n%s", st)
			if got := len(st.Namespaces); got != 8 {
				t.Fatalf("%d namespaces, want 8 (fabric, external, 3 nodes, 3 pods)", got)
			}
			if got := st.Namespaces[0].Name; got != l.FabricNetNS {
				t.Errorf("first namespace %q, want the fabric", got)
			}
			if got := st.Namespaces[1].Name; got != l.External.NetNS {
				t.Errorf("second namespace %q, want the external host %s", got, l.External.NetNS)
			}
			fabric, _ := st.Namespace(l.FabricNetNS)
			for _, want := range []string{"br0", "n1", "n2", "n3", ExternalFabricPort} {
				if findIface(fabric, want) == nil {
					t.Errorf("fabric has no %s: %+v", want, fabric.Interfaces)
				}
			}
			ext, ok := st.Namespace(l.External.NetNS)
			if !ok || ext.Err != "" {
				t.Fatalf("external namespace %s: found %v, err %q", l.External.NetNS, ok, ext.Err)
			}
			checkIface(t, ext, "lo", 65536, netip.MustParsePrefix("127.0.0.1/8"))
			checkIface(t, ext, ExternalIface, 1500, netip.PrefixFrom(ExternalIP, 24))
			// Only the connected fabric subnet: no default route, no route
			// to pods or services.
			if len(ext.Routes) != 1 || !hasRoute(ext, FabricSubnet.String()+" dev "+ExternalIface) {
				t.Errorf("external routes %q, want only %s dev %s", ext.Routes, FabricSubnet, ExternalIface)
			}
			for _, n := range l.Nodes {
				host, ok := st.Namespace(n.HostNetNS)
				if !ok || host.Err != "" {
					t.Fatalf("node namespace %s: found %v, err %q", n.HostNetNS, ok, host.Err)
				}
				pod, ok := st.Namespace(n.PodNetNS)
				if !ok || pod.Err != "" {
					t.Fatalf("pod namespace %s: found %v, err %q", n.PodNetNS, ok, pod.Err)
				}
				checkIface(t, host, HostIface, 1500, netip.PrefixFrom(n.HostIP, 24))
				checkIface(t, host, BridgeIface, tt.wantMTU, netip.PrefixFrom(n.PodGateway, 24))
				checkIface(t, host, PodPeerIface, tt.wantMTU)
				checkIface(t, pod, PodIface, tt.wantMTU, netip.PrefixFrom(n.PodIP, 24))
				vx := findIface(host, VXLANIface)
				if tt.mode == ModeVXLAN {
					checkIface(t, host, VXLANIface, VXLANMTU, netip.PrefixFrom(n.VTEPIP, 32))
					if vx != nil && vx.MAC != n.VTEPMAC.String() {
						t.Errorf("%s %s MAC %s, want %s", n.Name, VXLANIface, vx.MAC, n.VTEPMAC)
					}
				} else if vx != nil {
					t.Errorf("%s has %s in host-gw mode", n.Name, VXLANIface)
				}
				if !hasRoute(host, ServiceCIDR.String()+" dev eth0") {
					t.Errorf("%s has no service route: %q", n.Name, host.Routes)
				}
				for _, p := range l.Nodes {
					if p.Index != n.Index && !hasRoute(host, p.PodCIDR.String()+" via") {
						t.Errorf("%s has no route to %s: %q", n.Name, p.PodCIDR, host.Routes)
					}
				}
				if hasRoute(host, "default") {
					t.Errorf("%s has a default route: %q", n.Name, host.Routes)
				}
			}
			if s := st.String(); !strings.Contains(s, l.Nodes[2].PodNetNSPath) || !strings.Contains(s, "172.18.0.13/24") ||
				!strings.Contains(s, l.External.NetNSPath) || !strings.Contains(s, "172.18.0.250/24") {
				t.Errorf("String() lacks the pod3 path, node3's address, the external path or address:\n%s", s)
			}

			for i := range 2 { // Down twice: the second finds nothing and is fine.
				start := time.Now()
				if err := Down(ctx, prefix, testutil.StreamLogger(t)); err != nil {
					t.Fatalf("Down #%d: %v", i+1, err)
				}
				t.Logf("Down #%d: %v", i+1, time.Since(start))
				st, err := Status(ctx, prefix)
				if err != nil {
					t.Fatal(err)
				}
				if !st.Empty() {
					t.Fatalf("after Down #%d: %s", i+1, st)
				}
				if _, err := os.Stat(l.External.NetNSPath); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("after Down #%d: %s: %v, want it gone", i+1, l.External.NetNSPath, err)
				}
			}
		})
	}
}

func findIface(ns NamespaceStatus, name string) *InterfaceStatus {
	for i := range ns.Interfaces {
		if ns.Interfaces[i].Name == name {
			return &ns.Interfaces[i]
		}
	}
	return nil
}

func checkIface(t *testing.T, ns NamespaceStatus, name string, wantMTU int, wantAddrs ...netip.Prefix) {
	t.Helper()
	i := findIface(ns, name)
	if i == nil {
		t.Errorf("%s: no interface %s in %+v", ns.Name, name, ns.Interfaces)
		return
	}
	if i.MTU != wantMTU {
		t.Errorf("%s %s: MTU %d, want %d", ns.Name, name, i.MTU, wantMTU)
	}
	if i.State == "DOWN" {
		t.Errorf("%s %s is down", ns.Name, name)
	}
	if fmt.Sprint(i.Addrs) != fmt.Sprint(wantAddrs) {
		t.Errorf("%s %s: addresses %v, want %v", ns.Name, name, i.Addrs, wantAddrs)
	}
}

func hasRoute(ns NamespaceStatus, prefix string) bool {
	for _, r := range ns.Routes {
		if strings.HasPrefix(r, prefix) {
			return true
		}
	}
	return false
}

// startOrphan starts `sleep 60` in a lab namespace as a crashed lab would
// leave it, and returns a channel that yields its wait status once it exits.
// The test's cleanup kills it if it is still there.
func startOrphan(t *testing.T, nsPath string) <-chan error {
	t.Helper()
	checkLabNS(t, nsPath)
	argv := NSExec(nsPath, "sleep", "60")
	cmd := exec.Command(argv[0], argv[1:]...)
	done := testutil.StartGroup(t, cmd)
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	// nsenter execs sleep in place; wait until it did, so Down finds it.
	for range 100 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); err == nil && strings.TrimSpace(string(b)) == "sleep" {
			return done
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("sleep did not start in %s", nsPath)
	return nil
}

// wantKilled waits (at most 10 s) for the orphan to end with SIGKILL.
func wantKilled(t *testing.T, done <-chan error, what string) {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("%s ended with %v, want SIGKILL", what, err)
		}
	case <-timer.C:
		t.Fatalf("%s still running", what)
	}
}

func TestUpAfterCrash(t *testing.T) {
	requireLab(t)
	t.Parallel()
	prefix := testPrefix(t)
	downOnCleanup(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r := runner{log: testutil.StreamLogger(t)}

	// A half-built lab: the fabric, node1 with its fabric link, a node7 from
	// a bigger lab, the external host, a name left by a crash in the middle
	// of `ip netns add`, and processes still running in node1 and the
	// external host.
	for _, args := range [][]string{
		{"", "netns", "add", prefix + "-fabric"},
		{"", "netns", "add", prefix + "-ext"},
		{"", "netns", "add", prefix + "-node1"},
		{"", "netns", "add", prefix + "-node7"},
		{prefix + "-node1", "link", "add", "eth0", "type", "veth", "peer", "name", "n1", "netns", prefix + "-fabric"},
	} {
		if err := r.ip(ctx, args[0], args[1:]...); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(nsPath(prefix+"-pod2"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	orphan := startOrphan(t, nsPath(prefix+"-node1"))
	extOrphan := startOrphan(t, nsPath(prefix+"-ext"))
	st, err := Status(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.Processes()); got != 2 {
		t.Errorf("Status of the crashed lab: %d processes, want 2:\n%s", got, st)
	}
	if ns, _ := st.Namespace(prefix + "-pod2"); ns.Err == "" {
		t.Errorf("the stale name %s-pod2 should report an error:\n%s", prefix, st)
	}
	t.Logf("crashed lab:\n%s", st)

	l := upLab(t, Config{Prefix: prefix, Logger: testutil.StreamLogger(t)})
	wantKilled(t, orphan, "the process left in the crashed lab")
	wantKilled(t, extOrphan, "the process left in the crashed lab's external host")
	st, err = Status(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(st.Namespaces); got != 8 {
		t.Errorf("after Up: %d namespaces, want 8:\n%s", got, st)
	}
	if _, ok := st.Namespace(prefix + "-node7"); ok {
		t.Errorf("node7 of the crashed lab survived Up")
	}
	if out, err := runIn(t, 10*time.Second, l.Nodes[0].PodNetNSPath, "ping", "-c", "1", "-W", "2", l.Nodes[2].PodIP.String()); err != nil {
		t.Errorf("pod1 -> pod3 after Up over a crashed lab: %v\n%s", err, out)
	}

	// Down kills what runs in the lab, here in a pod.
	orphan = startOrphan(t, l.Nodes[1].PodNetNSPath)
	if st, err := Status(ctx, prefix); err != nil || len(st.Processes()) != 1 {
		t.Errorf("Status: %v, want 1 process:\n%s", err, st)
	}
	if err := Down(ctx, prefix, testutil.StreamLogger(t)); err != nil {
		t.Fatal(err)
	}
	wantKilled(t, orphan, "the process in pod2")
	if st, err := Status(ctx, prefix); err != nil || !st.Empty() {
		t.Errorf("after Down: %v\n%s", err, st)
	}
}

func TestUpCancelled(t *testing.T) {
	requireLab(t)
	t.Parallel()
	prefix := testPrefix(t)
	downOnCleanup(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	l, err := Up(ctx, Config{Prefix: prefix, Nodes: 16, Mode: ModeVXLAN, Logger: testutil.StreamLogger(t)})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Up with a 30 ms deadline = %v, %v; want DeadlineExceeded", l, err)
	}
	t.Logf("Up: %v", err)
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	st, err := Status(sctx, prefix)
	if err != nil || !st.Empty() {
		t.Errorf("a failed Up left: %v\n%s", err, st)
	}
}

func TestInvalidPrefix(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []string{"", "A", "a-b", "../etc"} {
		if err := Down(ctx, p, nil); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Down(%q) = %v, want ErrInvalidConfig", p, err)
		}
		if _, err := Status(ctx, p); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Status(%q) = %v, want ErrInvalidConfig", p, err)
		}
		if _, err := Up(ctx, Config{Prefix: p}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Up(%q) = %v, want ErrInvalidConfig", p, err)
		}
	}
}

// A lab name bound to the host's own network namespace (by mistake, or by
// someone else) must never make Down or Status treat the host's processes
// as the lab's.
func TestDownSparesTheHostNamespace(t *testing.T) {
	requireLab(t)
	t.Parallel()
	prefix := testPrefix(t)
	downOnCleanup(t, prefix)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// A process of the host, and a lab name that points at the host's
	// namespace through it.
	host := exec.Command("sleep", "60")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	name := prefix + "-node1"
	if out, err := exec.CommandContext(ctx, "ip", "netns", "attach", name, strconv.Itoa(host.Process.Pid)).CombinedOutput(); err != nil {
		t.Fatalf("ip netns attach: %v: %s", err, out)
	}

	st, err := Status(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if procs := st.Processes(); len(procs) != 0 {
		t.Errorf("Status lists %d host processes as the lab's, first %+v", len(procs), procs[0])
	}
	if err := Down(ctx, prefix, testutil.StreamLogger(t)); err != nil {
		t.Fatal(err)
	}
	if err := host.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("Down killed a host process: %v", err)
	}
	if _, err := os.Stat(nsPath(name)); err == nil {
		t.Errorf("Down left the name %s", name)
	}
}
