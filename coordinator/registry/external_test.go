package registry

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/coordinator/store"
	"github.com/meshperf/meshperf/internal/protocol"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	storev1 "github.com/meshperf/meshperf/proto/meshperf/store/v1"
)

func TestCheckExternal(t *testing.T) {
	many := make([]*measurev1.ExternalTarget, protocol.MaxExternalTargets+1)
	for i := range many {
		many[i] = &measurev1.ExternalTarget{Name: fmt.Sprintf("t%d", i), Address: "192.0.2.1"}
	}
	tests := []struct {
		name    string
		in      []*measurev1.ExternalTarget
		want    string // names in order
		wantErr string
	}{
		{"sorted", []*measurev1.ExternalTarget{{Name: "b", Address: "192.0.2.2"}, {Name: "a", Address: "a.example.com"}}, "[a b]", ""},
		{"none", nil, "[]", ""},
		{"invalid", []*measurev1.ExternalTarget{{Name: "a", Address: "192.0.2.1", HttpUrl: "http://192.0.2.9/"}}, "", `external target 0: external target "a": http_url`},
		{"duplicate", []*measurev1.ExternalTarget{{Name: "a", Address: "192.0.2.1"}, {Name: "a", Address: "192.0.2.2"}}, "", `"a" is listed twice`},
		{"too many", many, "", "at most 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := checkExternal(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, x := range got {
				names = append(names, x.GetName())
			}
			if s := fmt.Sprint(names); s != tt.want {
				t.Errorf("names %s, want %s", s, tt.want)
			}
		})
	}
}

// TestStoredNodeNamedLikeTarget: a node stored from earlier runs under a
// name the config now gives an external target is warned about at start,
// naming both; a target without such a node is not.
func TestStoredNodeNamedLikeTarget(t *testing.T) {
	for _, tt := range []struct {
		name, target string
		wantWarn     bool
	}{
		{"clash", "node-1", true},
		{"no clash", "ingress", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := store.Open(store.Config{Path: filepath.Join(t.TempDir(), "m.db")})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = st.Close() }()
			ctx := context.Background()
			if err := st.PutAgent(ctx, &storev1.Agent{NodeName: "node-1"}); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			r, err := New(ctx, Config{Recorder: st, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				ExternalTargets: []*measurev1.ExternalTarget{{Name: tt.target, Address: "192.0.2.1"}}})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Shutdown()
			got := strings.Contains(logs.String(), "an external target has the name of a stored node") &&
				strings.Contains(logs.String(), "target="+tt.target)
			if got != tt.wantWarn {
				t.Errorf("warned %v, want %v; logs:\n%s", got, tt.wantWarn, logs.String())
			}
		})
	}
}
