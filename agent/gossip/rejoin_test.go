package gossip_test

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/meshperf/meshperf/agent/gossip"
	"github.com/meshperf/meshperf/internal/testutil"
)

// countingTransport counts the dials to one address.
type countingTransport struct {
	*cutTransport
	to    atomic.Value // string
	dials atomic.Int64
}

func (c *countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if s, _ := c.to.Load().(string); s != "" && a.Addr == s {
		c.dials.Add(1)
	}
	return c.cutTransport.DialAddressTimeout(a, timeout)
}

// TestDeadStrangerNotRejoined: a member admitted before the agent knew
// the registered nodes (any name at an address of an allowed class) and
// since gone dead is not dialled again once the registered nodes leave
// it out: the reconnect loop rejoins only members it would admit.
func TestDeadStrangerNotRejoined(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var network memberlist.MockNetwork
	trA := &countingTransport{cutTransport: newCutTransport(&network, "node-a")}
	trE := newCutTransport(&network, "stranger")
	a, err := gossip.New(fast("node-a", trA, testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	e, err := gossip.New(fast("stranger", trE, testutil.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		trA.down.Store(true)
		trE.down.Store(true)
		_ = a.Close()
		_ = e.Close()
		trA.close()
		trE.close()
	}()
	if _, err := e.Join(ctx, []string{a.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	strangerAddr := e.Addr().String()
	trE.down.Store(true) // the stranger goes silent: node-a holds it dead
	testutil.EventuallyCtx(t, ctx, 20*time.Millisecond, "the stranger dead in node-a's view", func() bool {
		for _, m := range a.Members() {
			if m.Name == "stranger" && m.State == gossip.StateDead {
				return true
			}
		}
		return false
	})
	a.SetRegistered(map[string]netip.AddrPort{}) // the coordinator's nodes: no stranger
	// A reconnect round that chose the stranger before SetRegistered may
	// still dial it: count from the round after.
	time.Sleep(500 * time.Millisecond)
	trA.to.Store(strangerAddr)
	// Ten reconnect intervals (fast's 200 ms): the old loop dialled it in
	// each.
	time.Sleep(2 * time.Second)
	if n := trA.dials.Load(); n > 0 {
		t.Errorf("node-a dialled the unregistered stranger's %s %d times after SetRegistered left it out", strangerAddr, n)
	}
}
