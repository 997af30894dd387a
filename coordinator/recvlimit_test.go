package coordinator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/coordinator"
	"github.com/meshperf/meshperf/internal/protocol"
	"github.com/meshperf/meshperf/internal/testnet"
	"github.com/meshperf/meshperf/internal/testutil/fakeagent"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
)

// TestMaxRecvMsgBytes: an agent message over coordinator.MaxRecvMsgBytes
// (a ClientDone with a result padded past it) ends the agent's stream
// with ResourceExhausted; one just under it does not.
func TestMaxRecvMsgBytes(t *testing.T) {
	addr, _, _ := start(t, coordinator.Config{})
	conn := dial(t, addr, insecure.NewCredentials())
	tests := []struct {
		name     string
		pad      int
		wantCode codes.Code
	}{
		{"under the bound", coordinator.MaxRecvMsgBytes - 1024, codes.OK},
		{"over the bound", coordinator.MaxRecvMsgBytes + 1024, codes.ResourceExhausted},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testnet.Ctx(t, time.Minute)
			s := connect(t, ctx, conn, &agentv1.Register{NodeName: "node-" + string(rune('a'+i)), ProtocolVersion: protocol.Version,
				Addresses: []*measurev1.NetworkAddress{{Network: measurev1.Network_NETWORK_HOST, Ip: fmt.Sprintf("127.0.0.%d", i+1)}}}) // an address each: the other session may still be up
			if err := s.Send(fakeagent.ClientDone("run-x/t00001", &measurev1.Result{Status: measurev1.Status_STATUS_OK, Message: strings.Repeat("x", tt.pad)})); err != nil {
				t.Fatal(err)
			}
			if tt.wantCode == codes.OK {
				// The stream lives on: a second message is taken too.
				if err := s.Send(fakeagent.ClientDone("run-x/t00002", &measurev1.Result{Status: measurev1.Status_STATUS_OK})); err != nil {
					t.Fatal(err)
				}
				return
			}
			_, err := s.Recv()
			for err == nil {
				_, err = s.Recv()
			}
			if status.Code(err) != tt.wantCode {
				t.Fatalf("stream ended with %v, want %v", err, tt.wantCode)
			}
		})
	}
}
