package server_test

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/testnet"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// TestNodeNamedLikeExternalTarget: a node may not register under an
// external target's name. Results of a target carry its name as dst_node,
// so such a node would pass for the target in results, history and
// compare, and every run naming the target (the monitor's each tick) would
// be refused while the node is known.
func TestNodeNamedLikeExternalTarget(t *testing.T) {
	c := startWith(t, withExternal)
	ctx := testnet.Ctx(t, 10*time.Second)
	stream, err := c.agent.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(registerMsg("zeta")); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `node name "zeta" is the name of an external target`) {
		t.Fatalf("registering node zeta: %v, want InvalidArgument naming the clash", err)
	}
	// The others still register, and a run of zeta is planned.
	playExternal(t, ctx, c, register("node-1"))
	if _, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{Repeats: 1, ExternalTargets: []string{"zeta"}}}); err != nil {
		t.Errorf("run of zeta: %v", err)
	}
}

// TestExternalRunHugeSpec: an oversized external_targets list or name is
// refused with a bounded message.
func TestExternalRunHugeSpec(t *testing.T) {
	c := startWith(t, withExternal)
	ctx := testnet.Ctx(t, 10*time.Second)
	playExternal(t, ctx, c, register("node-1"))
	many := make([]string, 100_000)
	for i := range many {
		many[i] = "zeta"
	}
	for _, tt := range []struct {
		name    string
		targets []string
		wantMsg string
	}{
		{"repeats", many, `external_targets[1]: "zeta" is listed twice`},
		{"huge name", []string{strings.Repeat("x", 1<<20)}, "is not an allowed external target"},
		{"empty name", []string{""}, `external_targets[0] "" is not an allowed external target`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.mesh.TriggerRun(ctx, &meshv1.TriggerRunRequest{Spec: &measurev1.RunSpec{ExternalTargets: tt.targets}})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("err = %.300v, want InvalidArgument with %q", err, tt.wantMsg)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("message of %d bytes: %.200s...", len(err.Error()), err)
			}
		})
	}
}

func registerMsg(node string) *agentv1.ConnectRequest {
	return &agentv1.ConnectRequest{Msg: &agentv1.ConnectRequest_Register{Register: register(node)}}
}
