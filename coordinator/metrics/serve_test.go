package metrics_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/coordinator/metrics"
	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/testnet"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// fakeAgents is a registry whose agents the test sets.
type fakeAgents struct {
	mu     sync.Mutex
	agents []*meshv1.Agent
}

func (f *fakeAgents) Agents() []*meshv1.Agent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.agents
}

func (f *fakeAgents) set(known, connected int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.agents = nil
	for i := range known {
		f.agents = append(f.agents, &meshv1.Agent{NodeName: fmt.Sprintf("node-%d", i), Connected: i < connected})
	}
}

func TestGossipGauges(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	agents := &fakeAgents{}
	m, err := metrics.New(metrics.Config{Agents: agents})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, m)
	alive, dead, left := measurev1.GossipState_GOSSIP_STATE_ALIVE, measurev1.GossipState_GOSSIP_STATE_DEAD, measurev1.GossipState_GOSSIP_STATE_LEFT
	for _, tt := range []struct {
		name                     string
		agents                   []*meshv1.Agent
		wantDead, wantPartitions float64
	}{
		{"no gossip", []*meshv1.Agent{{NodeName: "a", Connected: true}}, 0, 0},
		{"all alive", []*meshv1.Agent{{NodeName: "a", GossipState: alive}, {NodeName: "b", GossipState: alive}}, 0, 0},
		{"dead, left and partitions", []*meshv1.Agent{
			{NodeName: "a", Connected: true, GossipState: dead, Partition: "the coordinator is connected to a, but ..."},
			{NodeName: "b", GossipState: left},
			{NodeName: "c", GossipState: alive, Partition: "the coordinator lost c, but ..."},
			{NodeName: "d", Connected: true, GossipState: alive},
		}, 2, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agents.mu.Lock()
			agents.agents = tt.agents
			agents.mu.Unlock()
			fams := scrape(t, ctx, base)
			if got, _ := value(fams, "meshperf_agents_gossip_dead", nil); got != tt.wantDead {
				t.Errorf("meshperf_agents_gossip_dead = %v, want %v", got, tt.wantDead)
			}
			if got, _ := value(fams, "meshperf_gossip_partitions", nil); got != tt.wantPartitions {
				t.Errorf("meshperf_gossip_partitions = %v, want %v", got, tt.wantPartitions)
			}
		})
	}
}

func TestScrapeTimeGauges(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	dbPath := filepath.Join(t.TempDir(), "meshperf.db")
	st, err := store.Open(store.Config{Path: dbPath})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	agents := &fakeAgents{}
	m, err := metrics.New(metrics.Config{Agents: agents, StorePath: st.Path()})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, m)
	tests := []struct {
		name                string
		known, connected    int
		wantKnown, wantConn float64
	}{
		{"no agents", 0, 0, 0, 0},
		{"known, none connected", 3, 0, 3, 0},
		{"some connected", 3, 2, 3, 2},
		{"all connected", 4, 4, 4, 4},
		{"all gone", 4, 0, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agents.set(tt.known, tt.connected)
			fams := scrape(t, ctx, base)
			if got, _ := value(fams, "meshperf_agents_connected", nil); got != tt.wantConn {
				t.Errorf("meshperf_agents_connected = %v, want %v", got, tt.wantConn)
			}
			if got, _ := value(fams, "meshperf_agents_known", nil); got != tt.wantKnown {
				t.Errorf("meshperf_agents_known = %v, want %v", got, tt.wantKnown)
			}
		})
	}

	fi, err := os.Stat(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	got, there := value(scrape(t, ctx, base), "meshperf_store_size_bytes", nil)
	if !there || got != float64(fi.Size()) || got <= 0 {
		t.Errorf("meshperf_store_size_bytes = %v (present %v), want the file's size %d", got, there, fi.Size())
	}

	// A store file that cannot be read leaves its gauge out, not the scrape.
	m2, err := metrics.New(metrics.Config{Agents: agents, StorePath: filepath.Join(t.TempDir(), "missing.db")})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, ctx, serve(t, m2))
	if _, there := value(fams, "meshperf_store_size_bytes", nil); there {
		t.Error("meshperf_store_size_bytes is set for a missing file")
	}
	if _, there := value(fams, "meshperf_agents_known", nil); !there {
		t.Error("meshperf_agents_known is missing when the store file is")
	}
}

func TestHealthz(t *testing.T) {
	ctx := testnet.Ctx(t, 30*time.Second)
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, m)
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/healthz", http.StatusOK},
		{http.MethodGet, "/metrics", http.StatusOK},
		{http.MethodGet, "/nothing", http.StatusNotFound},
		{http.MethodPost, "/metrics", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			req, err := http.NewRequestWithContext(ctx, tt.method, base+tt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

func TestServeStopsWithItsContext(t *testing.T) {
	m, err := metrics.New(metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(testnet.Ctx(t, 30*time.Second))
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, l, time.Second) }()
	if resp := get(t, testnet.Ctx(t, 10*time.Second), "http://"+l.Addr().String()+"/healthz"); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz: %s", resp.Status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve = %v, want nil after its context ended", err)
	}
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		_ = c.Close()
		t.Error("the listener still accepts after Serve returned")
	}
}
