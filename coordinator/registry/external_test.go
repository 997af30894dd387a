package registry

import (
	"fmt"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
	agentv1 "github.com/meshperf/meshperf/proto/meshperf/agent/v1"
)

func TestCheckExternal(t *testing.T) {
	many := make([]*agentv1.ExternalTarget, protocol.MaxExternalTargets+1)
	for i := range many {
		many[i] = &agentv1.ExternalTarget{Name: fmt.Sprintf("t%d", i), Address: "192.0.2.1"}
	}
	tests := []struct {
		name    string
		in      []*agentv1.ExternalTarget
		want    string // names in order
		wantErr string
	}{
		{"sorted", []*agentv1.ExternalTarget{{Name: "b", Address: "192.0.2.2"}, {Name: "a", Address: "a.example.com"}}, "[a b]", ""},
		{"none", nil, "[]", ""},
		{"invalid", []*agentv1.ExternalTarget{{Name: "a", Address: "192.0.2.1", HttpUrl: "http://192.0.2.9/"}}, "", `external target 0: external target "a": http_url`},
		{"duplicate", []*agentv1.ExternalTarget{{Name: "a", Address: "192.0.2.1"}, {Name: "a", Address: "192.0.2.2"}}, "", `"a" is listed twice`},
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
