package testnet_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testskip"
)

func TestFreePort(t *testing.T) {
	// The kernel's ephemeral range, which FreePort stays below.
	ephemeral := uint32(32768)
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var lo, hi uint32
		if _, err := fmt.Sscan(string(b), &lo, &hi); err == nil && lo > 17384 {
			ephemeral = lo
		}
	}
	seen := map[uint32]bool{}
	for range 50 {
		p := testnet.FreePort(t)
		if seen[p] {
			t.Fatalf("FreePort returned %d twice", p)
		}
		seen[p] = true
		switch p {
		case 0, 5201, 19765, 19766, 8080:
			t.Fatalf("FreePort = %d", p)
		}
		if p < 16384 || p >= ephemeral {
			t.Fatalf("FreePort = %d, outside [16384, %d): the kernel hands ephemeral ports to clients", p, ephemeral)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen tcp %s: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		_ = l.Close()
		if err != nil {
			t.Fatalf("listen udp %s: %v", addr, err)
		}
		_ = u.Close()
	}
}

func TestCtx(t *testing.T) {
	var ctx context.Context
	t.Run("inner", func(t *testing.T) {
		ctx = testnet.Ctx(t, time.Hour)
		deadline, ok := ctx.Deadline()
		if left := time.Until(deadline); !ok || left > time.Hour || left < 59*time.Minute {
			t.Errorf("Deadline = %v, %v; want about an hour from now", deadline, ok)
		}
		if err := ctx.Err(); err != nil {
			t.Errorf("Err = %v while the test runs", err)
		}
	})
	if err := ctx.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the test = %v, want %v", err, context.Canceled)
	}
}

func TestNeedSkipsMissingTool(t *testing.T) {
	for name, need := range map[string]func(testing.TB, ...string){"Need": testnet.Need, "NeedTools": testnet.NeedTools} {
		reason, skipped := testskip.Reason(func(tb testing.TB) { need(tb, "meshperf-no-such-tool") })
		if !skipped {
			t.Errorf("%s did not skip for a missing tool", name)
		}
		if want := testskip.ToolPrefix + "meshperf-no-such-tool"; reason != want {
			t.Errorf("%s skipped with %q, want %q", name, reason, want)
		}
	}
}

func TestNeedToolsRunsPresentTool(t *testing.T) {
	var skipped bool
	t.Run("sh", func(t *testing.T) {
		defer func() { skipped = t.Skipped() }()
		testnet.NeedTools(t, "sh")
	})
	if skipped {
		t.Error("NeedTools skipped for sh")
	}
}

func TestNewNetNS(t *testing.T) {
	var path string
	t.Run("create", func(t *testing.T) {
		path = testnet.NewNetNS(t, "mp-testnet")
		if dir, name := filepath.Split(path); dir != "/run/netns/" || !strings.HasPrefix(name, "mp-testnet-") || len(name) != len("mp-testnet-")+8 {
			t.Errorf("path = %q, want /run/netns/mp-testnet-<8 hex digits>", path)
		}
		if _, err := os.Stat(path); err != nil {
			t.Errorf("namespace missing while the test runs: %v", err)
		}
		out, err := exec.Command("ip", "-n", filepath.Base(path), "-o", "link", "show", "lo").CombinedOutput()
		if err != nil || !strings.Contains(string(out), ",UP") {
			t.Errorf("ip link show lo in %s: %v: %s; want lo up", path, err, out)
		}
	})
	if path == "" {
		t.Skip("NewNetNS skipped")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s after the test: %v, want not exist", path, err)
	}
}
