package cluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/lab"
	"github.com/meshperf/meshperf/deploy/lab/cluster"
)

// TestDemoFaultsConfigErrors: a bad config fails at once, names the field
// and value, and leaves nothing behind (no lab is built: every prefix here
// is invalid or the config fails before lab.Up).
func TestDemoFaultsConfigErrors(t *testing.T) {
	cases := []struct {
		name string
		cfg  cluster.FaultsConfig
		want string
	}{
		{"interval under 5s", cluster.FaultsConfig{Lab: lab.Config{Prefix: "brkcfg1"}, Interval: time.Second}, "interval 1s"},
		{"2 nodes", cluster.FaultsConfig{Lab: lab.Config{Prefix: "brkcfg1", Nodes: 2}}, "2 nodes"},
		{"unknown scenario", cluster.FaultsConfig{Lab: lab.Config{Prefix: "brkcfg1"}, Scenarios: []string{"bogus"}}, `scenario "bogus"`},
		{"bad prefix", cluster.FaultsConfig{Lab: lab.Config{Prefix: "BAD!"}}, `Prefix "BAD!"`},
		{"too many nodes", cluster.FaultsConfig{Lab: lab.Config{Prefix: "brkcfg1", Nodes: lab.MaxNodes + 1}}, "Nodes 17"},
		{"bad mode", cluster.FaultsConfig{Lab: lab.Config{Prefix: "brkcfg1", Mode: "ipip"}}, `Mode "ipip"`},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cluster.DemoFaults(ctx, tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming %q", err, tt.want)
			}
			left, _ := os.ReadDir(tmp)
			for _, e := range left {
				t.Errorf("left behind in TMPDIR: %s", e.Name())
			}
		})
	}
}
