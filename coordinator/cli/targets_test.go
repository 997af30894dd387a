package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	measurev1 "github.com/meshperf/meshperf/proto/meshperf/measure/v1"
	meshv1 "github.com/meshperf/meshperf/proto/meshperf/mesh/v1"
)

// targetsServer answers ListExternalTargets with fixed targets.
type targetsServer struct {
	meshv1.UnimplementedMeshServiceServer
	targets []*measurev1.ExternalTarget
}

func (s *targetsServer) ListExternalTargets(context.Context, *meshv1.ListExternalTargetsRequest) (*meshv1.ListExternalTargetsResponse, error) {
	return &meshv1.ListExternalTargetsResponse{ExternalTargets: s.targets}, nil
}

func TestTargetsCommand(t *testing.T) {
	sock := serveMesh(t, &targetsServer{targets: []*measurev1.ExternalTarget{
		{Name: "ingress", Address: "lb.example.com", HttpUrl: "https://lb.example.com/healthz"},
		{Name: "peer", Address: "192.0.2.7"},
		{Name: "srv", Address: "192.0.2.8", Iperf3Port: 5201, QperfPort: 19765, QperfDataPort: 19766},
	}})
	for _, tt := range []struct {
		name  string
		args  []string
		wants []string
	}{
		{"table", nil, []string{
			"NAME ADDRESS HTTP_URL IPERF3_PORT QPERF_PORTS",
			"ingress lb.example.com https://lb.example.com/healthz - -",
			"peer 192.0.2.7 - - -",
			"srv 192.0.2.8 - 5201 19765/19766",
		}},
		{"json", []string{"-o", "json"}, []string{`"http_url": "https://lb.example.com/healthz"`, `"name": "peer"`,
			`"iperf3_port": 5201`, `"qperf_port": 19765`, `"qperf_data_port": 19766`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCommand(&out, &errOut)
			cmd.SetArgs(append([]string{"targets", "--coordinator", "unix://" + sock}, tt.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatalf("targets: %v\n%s", err, errOut.String())
			}
			got := strings.Join(strings.Fields(out.String()), " ")
			for _, w := range tt.wants {
				if !strings.Contains(got, strings.Join(strings.Fields(w), " ")) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
