package servers

import (
	"testing"

	"github.com/meshperf/meshperf/internal/protocol"
)

// TestPortsSetDefaults: SetDefaults fills the zero ports and keeps the others.
func TestPortsSetDefaults(t *testing.T) {
	for _, tt := range []struct {
		name     string
		in, want Ports
	}{
		{"all zero", Ports{}, Ports{protocol.DefaultIperf3Port, protocol.DefaultQperfPort, protocol.DefaultQperfDataPort}},
		{"all set", Ports{1, 2, 3}, Ports{1, 2, 3}},
		{"some set", Ports{Qperf: 7}, Ports{protocol.DefaultIperf3Port, 7, protocol.DefaultQperfDataPort}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.in
			p.SetDefaults()
			if p != tt.want {
				t.Errorf("SetDefaults(%+v) = %+v, want %+v", tt.in, p, tt.want)
			}
		})
	}
}
